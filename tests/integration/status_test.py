"""Issue 3 §8, the status endpoints of `quorate run`: /healthz is 200 while quorate and etcd run;
/readyz is 503 until the member is a healthy voter and 200 after (seen at bootstrap, before etcd
answers, and on a replaced member while it is a learner); /metrics is Prometheus text (every sample
`name{labels} value`, each family with HELP and TYPE) whose values match what happened; while quorate
decides again before a restart (here waiting for a quorum), /healthz stays 200."""
import json
import os
import signal
import urllib.request

from harness import (Cluster, Sampler, check, log, log_size, main, member_ids, parse_prometheus, require,
                     run_together, stop_together, wait_healthy, wait_log, wait_until)

LABELS = frozenset()


class ReadySampler(Sampler):
    """Reads the node's /readyz and /healthz, then etcd's entry for its peer URL (from `endpoints`),
    again and again, and once more after finish(): each sample is (readyz, healthz, entry).
    Promotion only goes one way, so an entry read after /readyz said 200 must be a voter, and a
    learner entry read after a 503 shows the 503 was given to a learner."""

    def __init__(self, c, node, endpoints, always_list=True):
        super().__init__(0.02)
        self.c, self.node, self.endpoints, self.always_list = c, node, endpoints, always_list
        self.samples = []

    def sample(self):
        ready = self.node.http("/readyz")
        health = self.node.http("/healthz")
        entry = None
        # Without a quorum yet, etcdctl would wait out its dial timeout: at bootstrap the listing
        # is only needed to check a 200.
        r = None
        if self.always_list or ready[0] == 200:
            r = self.c.etcdctl("member", "list", "-w", "json", endpoints=self.endpoints, check_rc=None)
        if r is not None and r.returncode == 0:
            entry = next((m for m in json.loads(r.stdout)["members"]
                          if self.node.peer_url in m.get("peerURLs", [])), None)
        self.samples.append((ready, health, entry))

    def finish(self):
        super().finish()
        return self.samples


def metrics_of(node):
    with urllib.request.urlopen(f"http://{node.ip}:2383/metrics", timeout=5) as r:
        check(r.status == 200, f"{node.name} /metrics answered {r.status}")
        ctype = r.headers.get("Content-Type", "")
        check(ctype.startswith("text/plain") and "version=0.0.4" in ctype, f"/metrics Content-Type {ctype!r}")
        return parse_prometheus(r.read().decode())


def decisions(m):
    return {dict(labels)["decision"]: v for (name, labels), v in m.items() if name == "quorate_decisions_total"}


def check_samples(samples, who, want_learner_503):
    """Samples taken from the moment the status server answered until the test saw /readyz 200."""
    check(samples, f"no samples for {who}")
    codes = [ready[0] for ready, _, _ in samples]
    check(set(codes) <= {200, 503}, f"{who}: /readyz answered {set(codes)}")
    check(codes[0] == 503, f"{who}: /readyz did not start at 503: {codes}")
    first_200 = codes.index(200) if 200 in codes else len(codes)
    check(all(c == 200 for c in codes[first_200:]), f"{who}: /readyz went back from 200 to 503: {codes}")
    for (code, body), _, entry in samples:
        if code == 200:
            check(entry is not None and not entry.get("isLearner") and entry.get("clientURLs"),
                  f"{who}: /readyz said 200 while etcd lists it as {entry}")
        else:
            check(body.strip(), f"{who}: /readyz 503 without a reason")
    # /healthz: 200 from the first answer on (deciding how to start etcd counts as alive).
    health = [h[0] for _, h, _ in samples]
    first_up = health.index(200) if 200 in health else len(health)
    check(first_up < len(health) and all(h == 200 for h in health[first_up:]), f"{who}: /healthz went {health}")
    learner_503 = [body.strip() for (code, body), _, entry in samples
                   if code == 503 and entry is not None and entry.get("isLearner")]
    reasons = [body.strip() for (code, body), _, _ in samples if code == 503]
    log(f"{who}: /readyz {codes.count(503)} x 503, then {codes.count(200)} x 200; 503 while etcd lists it as a "
        f"learner: {len(learner_503)} times; reasons given: {sorted(set(reasons))}")
    if want_learner_503:
        check(learner_503, f"{who}: never saw /readyz 503 while etcd listed it as a learner")


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1, n2, n3 = c.nodes
    check(n1.http("/readyz")[0] == 0, "something already listens on the status port")

    log("bootstrap: /readyz on n1 from the start")
    boot = ReadySampler(c, n1, c.endpoints(), always_list=False)
    boot.start()
    run_together(c.nodes)
    try:
        wait_healthy(c)
    finally:
        samples = boot.finish()
    check_samples([s for s in samples if s[0][0] != 0], "n1 at bootstrap", want_learner_503=False)
    for n in c.nodes:
        check(n.http("/healthz")[0] == 200, f"{n.name} /healthz")
        check(n.http("/readyz") == (200, "ok\n"), f"{n.name} /readyz: {n.http('/readyz')}")
        m = metrics_of(n)
        check(m[("quorate_up", LABELS)] == 1, "quorate_up")
        check(m[("quorate_members", LABELS)] == 3, f"{n.name} quorate_members {m[('quorate_members', LABELS)]}")
        check(m[("quorate_is_learner", LABELS)] == 0, "quorate_is_learner")
        check(m[("quorate_etcd_restarts_total", LABELS)] == 0, "quorate_etcd_restarts_total")
        d = decisions(m)
        check(set(d) == {"restart", "join", "late-initial", "replace", "new", "wait"}, f"decision labels {d}")
        check(sum(d.values()) == 1 and d["new"] + d["late-initial"] == 1, f"{n.name} decisions {d}")
        check(m[("quorate_last_error_timestamp_seconds", LABELS)] == 0, "an error at bootstrap")

    log("replace n3: /readyz while it is a learner")
    old = member_ids(c)["n3"]
    n3.stop()
    n3.wipe()
    check(n3.http("/readyz")[0] == 0, "n3's status port still answers after quorate stopped")
    watch = ReadySampler(c, n3, c.endpoints([n1, n2]))
    watch.start()
    n3.run()
    try:
        wait_healthy(c)
    finally:
        samples = watch.finish()
    check(member_ids(c)["n3"] != old, "n3 was not replaced")
    check_samples([s for s in samples if s[0][0] != 0], "n3 replaced", want_learner_503=True)
    m = metrics_of(n3)
    d = decisions(m)
    check(d["replace"] == 1 and sum(d.values()) == 1, f"n3 decisions after the replace: {d}")
    check(m[("quorate_is_learner", LABELS)] == 0 and m[("quorate_members", LABELS)] == 3, f"n3 metrics {m}")

    log("etcd killed under n1: /healthz keeps answering, restarts counted, the error exported")
    pid = n1.etcd_pid()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: n1.etcd_pid() not in (None, pid), 30, "etcd restarted under n1's quorate")
    check(n1.http("/healthz")[0] == 200, "/healthz after etcd was restarted")
    wait_healthy(c)
    m = metrics_of(n1)
    check(m[("quorate_etcd_restarts_total", LABELS)] == 1, "the restart is not counted")
    check(m[("quorate_last_error_timestamp_seconds", LABELS)] > 0, "no last error after etcd was killed")
    errors = [dict(labels)["message"] for (name, labels), v in m.items() if name == "quorate_last_error_info"]
    check(len(errors) == 1 and "etcd exited" in errors[0], f"quorate_last_error_info: {errors}")

    log("n1's data lost with n2 and n3 down: deciding again waits for a quorum, alive and not ready")
    stop_together([n2, n3])
    offset = log_size(n1)
    pid = n1.etcd_pid()
    n1.wipe()
    os.kill(pid, signal.SIGKILL)
    # The wait lasts until --timeout (a minute): a liveness probe failing meanwhile would restart
    # quorate in the middle of the decision.
    wait_log(n1, "waiting: ", 30, since=offset)
    health, ready = n1.http("/healthz"), n1.http("/readyz")
    check(health[0] == 200, f"n1 /healthz while it decides again: {health}")
    check(ready[0] == 503, f"n1 /readyz while it decides again: {ready}")
    stop_together(c.nodes)
    check(all(n.http("/healthz")[0] == 0 for n in c.nodes), "a status server outlived its quorate")


if __name__ == "__main__":
    main(test)
