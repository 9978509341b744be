"""Rule M6's record read back (rule 1b, docs/DESIGN.md §4 and §12) against real etcd: 3 nodes under
`quorate run` with `--learner-deadline 4s` and a writer, then n4 joins under `quorate run` with
`--cluster-size 4` (rule 2: a learner) and is stopped whole before its quorate promotes it: SIGSTOP to
its quorate as it starts etcd, then to its etcd once that has written its WAL.
1. The leader's quorate removes the stalled learner (rule M6), its record written in etcd first.
2. n4 let go on (SIGCONT): its etcd finds itself removed and exits 0 (said as such, not as a crash), and its quorate, which ran that
   etcd, would hold it stopped after the operator's removal; it reads M6's record instead, moves its
   data aside and joins again by rule 2, a new learner (a new member ID) promoted once caught up.
No write of the writer fails, the three voters stay voters throughout (a learner holds no vote), the
old member ID is gone, and the record names it."""
import base64
import glob
import json
import os
import re
import signal

from harness import (Cluster, Sampler, Writer, check, log, log_since, main, member_ids, require, run_together,
                     started_voters, stop_together, to_hex, wait_healthy, wait_log, wait_until)

DEADLINE = ["--learner-deadline", "4s"]
RECORDS = "/quorate/maintenance/removed-learners/"


class VotersStay(Sampler):
    """Records every member list, read from the voters, in which one of them is missing or a learner."""

    def __init__(self, cluster, voters):
        super().__init__(0.5)
        self.cluster, self.voters = cluster, voters
        self.endpoints = cluster.endpoints(voters)
        self.lost = []

    def sample(self):
        r = self.cluster.etcdctl("member", "list", "-w", "json", endpoints=self.endpoints, check_rc=None)
        if r.returncode != 0:
            return
        voters = {m.get("name") for m in json.loads(r.stdout)["members"] if not m.get("isLearner")}
        if not all(n.name in voters for n in self.voters):
            self.lost.append(sorted(v for v in voters if v))


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    run_together(c.nodes, extra=DEADLINE)
    wait_healthy(c)
    voters = list(c.nodes)
    # Every etcdctl call goes to the voters: a stopped etcd still accepts connections (the kernel
    # does) and answers none.
    at = c.endpoints(voters)
    before = member_ids(c, at)
    w = Writer(c, at)
    w.start()
    stay = VotersStay(c, voters)
    stay.start()

    # n4 joins as a learner, and is stopped whole with a WAL of its member: the data rule 1b finds
    # removed. Its quorate is stopped first, as it starts etcd: it would promote the learner, which
    # it first tries a round (1 s) after it starts etcd; its etcd, on its own, writes its WAL and
    # catches up, and is stopped once the WAL is there. Both are then neither progressing nor answering.
    n4 = c.add_node()
    c.discovery = ["--initial-cluster", c.initial_cluster(), "--cluster-size", "4"]
    n4.run(extra=DEADLINE)
    started = wait_until(lambda: re.search(r"etcd started \(pid (\d+)\)", log_since(n4)), 60,
                         "n4's quorate to start etcd", interval=0.005)
    os.kill(n4.quorate.pid, signal.SIGSTOP)
    wal = os.path.join(n4.data_dir, "member", "wal", "*.wal")
    wait_until(lambda: glob.glob(wal), 30, "n4's etcd to write its WAL")
    os.kill(int(started.group(1)), signal.SIGSTOP)
    log("n4 stopped (its quorate as it started etcd, its etcd once its WAL was written)")
    # By its peer URL: an etcd stopped this early may not have published its name yet.
    old = next((m for m in c.member_list(at)["members"] if n4.peer_url in m.get("peerURLs", [])), None)
    check(old and old.get("isLearner"), f"n4 is not a learner as it is stopped (promoted already?): {old}")
    old_id = to_hex(old["ID"])

    # 1. Removed by the leader's quorate (rule M6).
    wait_until(lambda: all(m["ID"] != old["ID"] for m in c.member_list(at)["members"]), 60,
               f"the stalled learner n4 ({old_id}) removed by rule M6")
    # The leader's quorate says so once MemberRemove has returned, a moment after the list lacks it.
    removed = f"({old_id}) removed; its record is at {RECORDS}{old_id}"
    wait_until(lambda: any(removed in log_since(n) for n in voters), 10,
               f"a voter's log to say rule M6 removed n4: {removed!r}")

    # 2. Let go on, n4 comes back as a new learner, then a voter.
    offset = os.path.getsize(n4.log_path)
    os.killpg(n4.quorate.pid, signal.SIGCONT)
    log(f"n4 ({old_id}) removed by rule M6; let go on")
    wait_until(lambda: started_voters(c, 4, at) and member_ids(c, at).get("n4") not in (None, old_id), 90,
               "n4 back as a started voter under a new member ID")
    stay.finish()
    w.finish()
    after = member_ids(c, at)
    new_id = after["n4"]
    log(f"n4 back as voter {new_id}")
    # Its quorate says so once MemberPromote has returned, a moment after the list shows a voter.
    wait_log(n4, f"promoted n4 ({new_id})", 10, since=offset)
    wait_until(lambda: n4.http("/readyz")[0] == 200, 10, "n4's /readyz 200")
    text = log_since(n4, offset)
    # The fresh start's path of rule 1b, taken on M6's record: one decision line says all three.
    decided = [line for line in text.splitlines() if f"decision: join: member {old_id} (n4) was removed" in line]
    check(decided and "rule M6's record says it removed that learner" in decided[0]
          and "moving its data aside" in decided[0],
          f"n4 did not decide to join again on rule M6's record, its data moved aside:\n{text[-3000:]}")
    check("not restarting etcd, and not rejoining" not in text, "n4 held its etcd stopped at some point")
    # Its removed etcd ended with exit 0, as etcd does once removed: no crash, no error exported.
    check("etcd ended by itself (exit code 0)" in text and "etcd exited" not in text,
          f"n4's removed etcd's exit was not told from a crash:\n{text[-3000:]}")
    check(f"added n4 as learner {new_id}" in text, f"n4 did not join again as learner {new_id}")
    check(glob.glob(os.path.join(n4.data_dir, "member.removed*")), "n4's old data is not kept aside")

    check(not w.failures, f"writes failed while n4 was removed and joined again: {w.failures[:3]}")
    check(len(w.ok) > 20, f"the writer got only {len(w.ok)} puts through")
    check(not stay.lost, f"a voter was missing or a learner at times: {stay.lost[:3]}")
    check({k: after[k] for k in before} == before, f"the three voters changed: {before} -> {after}")
    listed = c.member_list(at)["members"]
    check(all(m["ID"] != old["ID"] for m in listed), f"the removed member {old_id} is listed again: {listed}")
    r = c.etcdctl("get", "--prefix", RECORDS, "-w", "json", endpoints=at)
    records = {base64.b64decode(kv["key"]).decode(): json.loads(base64.b64decode(kv["value"]))
               for kv in json.loads(r.stdout).get("kvs", [])}
    record = records.get(RECORDS + old_id)
    check(record and record.get("member") == old_id and record.get("rule") == "M6"
          and record.get("state") == "removing", f"no record of rule M6 naming {old_id}: {records}")
    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes: {codes}")


if __name__ == "__main__":
    main(test)
