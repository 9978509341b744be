"""Issue 3 §3, lost volume: one node of 3 loses its data dir and starts again under `quorate run`.
It is removed and re-added as a learner (a new member ID), promoted once caught up, and the cluster
ends with 3 started voters holding every key. A writer runs the whole time against the two other
nodes' endpoints and sees no failed write beyond a short leader change."""
import json
import re

from harness import (Cluster, ClusterIdWatch, Writer, check, keys_caught_up, log, log_since, log_size, main, member_ids,
                     require, run_together, stop_together, to_hex, wait_healthy, wait_until)

MAX_FAILED_WRITES = 2


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1, n2, n3 = c.nodes
    run_together(c.nodes)
    wait_healthy(c)
    before = member_ids(c)
    cluster_id = set(c.cluster_ids().values())
    for i in range(30):
        c.etcdctl("put", f"/k/{i:02d}", f"v{i}")

    writer = Writer(c, c.endpoints([n1, n2]))
    watch = ClusterIdWatch(c)
    writer.start()
    watch.start()
    wait_until(lambda: len(writer.ok) >= 5, 20, "the writer to get going")

    # The hard case: the node that loses its volume is the leader, so the writer lives through a
    # leader change as well as the membership changes.
    status = json.loads(c.etcdctl("endpoint", "status", "-w", "json").stdout)
    leader = to_hex(status[0]["Status"]["leader"])
    if leader != before["n3"]:
        leader_url = next(s["Endpoint"] for s in status if to_hex(s["Status"]["header"]["member_id"]) == leader)
        c.etcdctl("move-leader", before["n3"], endpoints=leader_url)
    wait_until(lambda: to_hex(json.loads(c.etcdctl("endpoint", "status", "-w", "json", endpoints=n1.client_url)
                                         .stdout)[0]["Status"]["leader"]) == before["n3"], 10, "n3 to lead")
    log("n3 (the leader) stops, its data dir is wiped, it starts again")
    n3.stop()
    n3.wipe()
    offset = log_size(n3)
    n3.run()
    try:
        wait_healthy(c, timeout=60)
        # Writes on into the healed cluster, so every check below has some to count (on a loaded
        # machine the replace can be over before many writes went through).
        wait_until(lambda: len(writer.ok) >= 20, 60, "the writer to get 20 writes through")
    finally:
        writer.finish()
        seen = watch.finish()
    log(f"writer: {len(writer.ok)} writes ok, {len(writer.failures)} failed")
    for f in writer.failures:
        log(f"  failed: {f}")

    after = member_ids(c)
    check(after["n3"] != before["n3"], f"n3 kept its old ID {before['n3']}: it was not replaced")
    check({k: v for k, v in after.items() if k != "n3"} == {k: v for k, v in before.items() if k != "n3"},
          f"other members changed: {before} -> {after}")
    text = log_since(n3, offset)
    check("decision: replace" in text, f"n3 did not decide to replace itself:\n{text[-3000:]}")
    check(f"removed stale member {before['n3']}" in text, f"n3's old ID was not removed:\n{text[-3000:]}")
    check(f"added n3 as learner {after['n3']}" in text, f"n3 was not added as a learner:\n{text[-3000:]}")
    check(f"promoted n3 ({after['n3']})" in text, f"n3 was not promoted by its quorate:\n{text[-3000:]}")
    # etcd's own word: the new ID entered raft as a learner and was promoted.
    learners = {int(x) for m in re.finditer(r"learners=\(([0-9 ]*)\)", text) for x in m.group(1).split()}
    check(int(after["n3"], 16) in learners,
          f"n3's etcd never had {after['n3']} as a raft learner:\n{text[-3000:]}")
    # 3.4 logs "promote member <id>" in its text, 3.5 "promote member" with "promoted-member-id":"<id>".
    check(f"promote member {after['n3']}" in text or f'"promoted-member-id":"{after["n3"]}"' in text,
          f"n3's etcd did not log its promotion:\n{text[-3000:]}")
    check(set(seen) == cluster_id, f"cluster IDs seen while replacing: {seen}, want only {cluster_id}")
    check(len(writer.failures) <= MAX_FAILED_WRITES,
          f"{len(writer.failures)} of {len(writer.ok) + len(writer.failures)} writes failed during the replace")
    check(len(writer.ok) >= 20, f"the writer got only {len(writer.ok)} writes through")

    # n3's own store (serializable read) holds the keys from before and every write that succeeded.
    wanted = {f"/k/{i:02d}" for i in range(30)} | set(writer.ok)
    got = set(keys_caught_up(c, n3, "/", lambda k: wanted <= set(k)))
    missing = wanted - got
    check(not missing, f"n3 lacks {len(missing)} keys, e.g. {sorted(missing)[:5]}")
    stop_together(c.nodes)


if __name__ == "__main__":
    main(test)
