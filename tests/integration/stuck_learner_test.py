"""Issue 25 item 4, rule M6 (docs/DESIGN.md §12) against real etcd: 3 nodes under `quorate run` with
`--learner-deadline 4s` and a writer.
1. A learner that catches up (a plain etcd the test adds with `member add --learner` and starts) is
   kept for a span of several deadlines: progress, or being caught up, resets its watch.
2. Its etcd killed, it neither answers nor progresses: the leader's quorate removes it (rule M6),
   its record written in etcd first.
3. A learner whose node never starts (a peer URL nobody serves) is removed too, freeing etcd's one
   learner seat.
No write of the writer fails, and the three voters stay: a learner holds no vote."""
import json
import os
import time

from harness import (ETCD, NET, Cluster, Sampler, Writer, check, log, log_since, main, parse_prometheus, require,
                     run_together, spawn, started_voters, stop_together, wait_healthy, wait_until)

DEADLINE_S = 4


def members(c):
    return {m.get("name") or "(unstarted)": m for m in c.member_list()["members"]}


def removed_learners(c):
    return sum(parse_prometheus(n.http("/metrics")[1]).get(
        ("quorate_maintenance_actions_total", frozenset({("action", "remove-learner")})), 0) for n in c.nodes)


class LearnerKept(Sampler):
    """Records every moment the learner named `name` was missing from the member list."""

    def __init__(self, cluster, name):
        super().__init__(0.5)
        self.cluster, self.name = cluster, name
        self.missing = []

    def sample(self):
        r = self.cluster.etcdctl("member", "list", "-w", "json", check_rc=None)
        if r.returncode == 0 and not any(m.get("name") == self.name for m in json.loads(r.stdout)["members"]):
            self.missing.append(time.strftime("%H:%M:%S"))


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    run_together(c.nodes, extra=["--learner-deadline", f"{DEADLINE_S}s"])
    wait_healthy(c)
    w = Writer(c, c.endpoints())
    w.start()

    # 1. A learner that catches up is kept.
    ip = f"{NET}.4"
    # etcd refuses a member change as "unhealthy cluster" until its members have been connected a while.
    wait_until(lambda: c.etcdctl("member", "add", "l4", "--learner", "--peer-urls", f"http://{ip}:2380",
                                 check_rc=None).returncode == 0, 30, "the learner l4 added")
    initial = c.initial_cluster() + f",l4=http://{ip}:2380"
    learner = spawn([ETCD, "--name", "l4", "--data-dir", os.path.join(c.dir, "l4"), "--initial-cluster", initial,
                     "--initial-cluster-state", "existing", "--initial-cluster-token", c.token,
                     "--initial-advertise-peer-urls", f"http://{ip}:2380", "--listen-peer-urls", f"http://{ip}:2380",
                     "--advertise-client-urls", f"http://{ip}:2379", "--listen-client-urls", f"http://{ip}:2379"],
                    os.path.join(c.dir, "l4.log"))

    def learner_caught_up():
        r = c.etcdctl("endpoint", "status", "-w", "json", endpoints=f"http://{ip}:2379", check_rc=None)
        if r.returncode != 0:
            return False
        st = json.loads(r.stdout)[0]["Status"]
        return st.get("raftAppliedIndex", 0) > 0 and members(c)["l4"].get("clientURLs")
    wait_until(learner_caught_up, 60, "the learner l4 started and applying")
    kept = LearnerKept(c, "l4")
    kept.start()
    # What must not happen has no event to wait for: the span is several deadlines of rounds (every 5 s).
    span_end = time.monotonic() + 4 * DEADLINE_S + 10
    wait_until(lambda: time.monotonic() >= span_end, 60, "a span of several deadlines")
    kept.finish()
    check(not kept.missing, f"a learner that caught up was removed at {kept.missing}")
    check(removed_learners(c) == 0, "a learner was removed while it caught up")
    log(f"l4 kept as a learner for {4 * DEADLINE_S + 10} s while it applied the writer's puts")

    # 2. Its etcd gone: neither answering nor progressing, it is removed by the leader's quorate,
    #    which leaves its record in etcd first (rule 1b reads it to have that node join again).
    l4_id = members(c)["l4"]["ID"]
    learner.kill()
    learner.wait()
    wait_until(lambda: "l4" not in members(c), 60, "the stalled learner l4 removed by rule M6")
    text = "".join(log_since(n) for n in c.nodes)
    check("maintenance: remove-learner (rule M6): learner l4" in text, "no M6 decision line for l4 in the logs")
    key = f"/quorate/maintenance/removed-learners/{l4_id:x}"
    value = c.etcdctl("get", key, "--print-value-only", check_rc=0).stdout.strip()
    check(value, f"no record of rule M6 at {key}")
    record = json.loads(value)
    check(record.get("rule") == "M6" and record.get("state") == "removing" and record.get("name") == "l4",
          f"rule M6's record of l4 is not as written: {record}")

    # 3. A learner whose node never starts is removed too.
    wait_until(lambda: c.etcdctl("member", "add", "ghost", "--learner", "--peer-urls", f"http://{NET}.9:2380",
                                 check_rc=None).returncode == 0, 30, "the ghost learner added")
    check("(unstarted)" in members(c), "the ghost learner is not listed")
    wait_until(lambda: "(unstarted)" not in members(c), 60, "the never-started learner removed by rule M6")
    text = "".join(log_since(n) for n in c.nodes)
    check("it does not answer; removed" in text, "no M6 line saying the ghost learner does not answer")
    wait_until(lambda: removed_learners(c) == 2, 10, "quorate_maintenance_actions_total{action=remove-learner} 2")

    w.finish()
    check(not w.failures, f"writes failed while learners were removed: {w.failures[:3]}")
    check(len(w.ok) > 20, f"the writer got only {len(w.ok)} puts through")
    check(started_voters(c, 3), f"the members after the removals are not the 3 voters: {members(c)}")
    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes: {codes}")


if __name__ == "__main__":
    main(test)
