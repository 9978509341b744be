"""Issue 12, scheduled backups: three `quorate run --backup-to DIR --backup-schedule 2s`. Only the
leader's quorate takes them (each listed backup came from the leader of its time, about one a
round, not three). The leader's quorate is killed (SIGKILL) while it streams a backup of a ~10 MB
database: nothing partial is ever listed, every listed backup verifies, and the next leader takes
the next one."""
import json
import os
import signal
import time

from backup_test import put_keys, quorate
from harness import (Cluster, Sampler, check, log, log_since, log_size, main, parse_prometheus, require,
                     run_together, wait_healthy, wait_until)


def listed(c, to):
    return json.loads(quorate(c, "backup", "list", *to, "-w", "json").stdout)["backups"]


def leader(c):
    for n in c.nodes:
        if n.quorate is None:
            continue
        r = c.etcdctl("endpoint", "status", "-w", "json", endpoints=n.client_url, check_rc=None)
        if r.returncode == 0:
            st = json.loads(r.stdout)[0]["Status"]
            if st["leader"] == st["header"]["member_id"]:
                return n, st["leader"]
    return None


class LeaderWatch(Sampler):
    """Every leader ID the nodes report, until finish() and once more after."""

    def __init__(self, c):
        super().__init__(0.5)
        self.c, self.seen = c, set()

    def sample(self):
        for n in self.c.nodes:
            r = self.c.etcdctl("endpoint", "status", "-w", "json", endpoints=n.client_url, check_rc=None)
            if r.returncode == 0 and (lead := json.loads(r.stdout)[0]["Status"]["leader"]):
                self.seen.add(lead)


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    store = os.path.join(c.dir, "store")
    os.makedirs(store)
    to = ["--backup-to", f"file://{store}"]
    run_together(c.nodes, to + ["--backup-schedule", "2s"])
    wait_healthy(c)
    # A loaded machine may move the leadership meanwhile: each backup must come from a leader.
    leaders = LeaderWatch(c)
    leaders.start()
    # ~10 MB of values, so a snapshot takes long enough to be cut.
    put_keys(c, "/big/", 10000, value="x" * 1000)
    first = wait_until(lambda: listed(c, to), 30, "a first scheduled backup")
    lead, _ = wait_until(lambda: leader(c), 20, "a leader")
    time.sleep(4)
    backups = listed(c, to)
    leaders.finish()
    seen = {format(i, "x") for i in leaders.seen}
    sources = {b["memberID"] for b in backups}
    check(sources <= seen, f"backups from {sources}, the leaders were {seen}")
    log(f"{len(backups)} backups, all from the leader{'s' if len(seen) > 1 else ''} {sorted(seen)}")
    status, body = lead.http("/metrics")
    metrics = parse_prometheus(body)
    check(status == 200 and metrics.get(("quorate_backup_last_success_timestamp_seconds", frozenset()), 0) > 0
          and metrics.get(("quorate_backup_stale", frozenset())) == 0, f"the leader's backup metrics: {metrics}")
    taken = sum(log_since(n).count("backup: this member leads") for n in c.nodes)
    check(taken <= len(backups) + 1, f"{taken} backups started for {len(backups)} listed: not only the leader")

    # Kill the leader's quorate while it streams one.
    offset = log_size(lead)
    before = {b["url"] for b in listed(c, to)}
    wait_until(lambda: "backup: this member leads" in log_since(lead, offset), 20, "the leader to start a backup",
               interval=0.005)
    os.killpg(lead.quorate.pid, signal.SIGKILL)
    lead.quorate.wait()
    lead.quorate = None
    log(f"killed {lead.name}'s quorate while it backed up")
    partial = [b for b in listed(c, to) if b["url"] not in before]
    for b in partial:
        # It finished just before the kill: then it is whole.
        quorate(c, "backup", "verify", b["url"])
    others = [n for n in c.nodes if n is not lead]
    new_lead = wait_until(lambda: leader(c), 30, "a new leader")
    check(new_lead[0] is not lead, "the killed node still leads")
    wait_until(lambda: any(b["memberID"] == format(new_lead[1], "x") for b in listed(c, to)), 30,
               "the next leader's backup")
    for b in listed(c, to):
        quorate(c, "backup", "verify", b["url"])
    names = [n for d, _, files in os.walk(store) for n in files]
    log(f"store holds {len(names)} files; {len(listed(c, to))} backups listed")
    for n in others:
        n.kill()
    check(first, "no first backup")


if __name__ == "__main__":
    main(test)
