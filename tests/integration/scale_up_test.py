"""Issue 3 §5, scale up 3 -> 5: a running 3-node cluster (bootstrapped by `quorate run` from a 3-member
--initial-cluster), then n4 and n5 started at the same time with all five in --initial-cluster and
--cluster-size 5. Each finds a cluster below its size that does not list it, joins as a learner
(etcd 3.4 allows one learner at a time, so one of them waits for the other's promotion), and is
promoted: 5 started voters in the one original cluster, the first three keeping their IDs."""
import re

from harness import (Cluster, check, log, log_since, main, member_ids, require, run_together, stop_together,
                     wait_healthy, wait_until)


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    run_together(c.nodes)
    wait_healthy(c)
    before = member_ids(c)
    cluster_id = set(c.cluster_ids().values())
    c.etcdctl("put", "/k/before", "3 members")

    n4, n5 = c.add_node(), c.add_node()
    # Only n4 and n5 start from here on, so only they see the five-member discovery.
    c.discovery = ["--initial-cluster", c.initial_cluster(), "--cluster-size", "5"]
    log(f"starting n4 and n5 together with {' '.join(c.discovery)}")
    run_together([n4, n5])
    wait_healthy(c, count=5, timeout=60)

    after = member_ids(c)
    check({k: after[k] for k in before} == before, f"the first three changed IDs: {before} -> {after}")
    ids = c.cluster_ids()
    check(set(ids.values()) == cluster_id and len(ids) == 5, f"cluster IDs after scale up: {ids}")
    for n in (n4, n5):
        text = log_since(n)
        check("decision: join: cluster" in text, f"{n.name} did not join:\n{text[-3000:]}")
        check(f"added {n.name} as learner {after[n.name]}" in text, f"{n.name} was not added as a learner")
        check(f"promoted {n.name} ({after[n.name]})" in text, f"{n.name} was not promoted by its quorate")
        learners = {int(x) for m in re.finditer(r"learners=\(([0-9 ]*)\)", text) for x in m.group(1).split()}
        check(int(after[n.name], 16) in learners, f"{n.name}'s etcd never had it as a raft learner")
        check(c.etcdctl("get", "/k/before", "--consistency=s", "--print-value-only",
                        endpoints=n.client_url).stdout.strip() == "3 members", f"{n.name} lacks the data")
    # Raft itself counts n4 and n5 as voters: with n1 and n2 stopped, n3, n4 and n5 are 3 of 5 voters
    # and still commit a write (3 voters and 2 learners would leave 1 of 3, and no quorum).
    n1, n2, n3 = c.nodes[:3]
    stop_together([n1, n2])
    wait_until(lambda: c.etcdctl("put", "/k/after", "n1 and n2 down", endpoints=c.endpoints([n3, n4, n5]),
                                 check_rc=None).returncode == 0, 20, "a write with n1 and n2 down")
    check(c.etcdctl("get", "/k/after", "--print-value-only", endpoints=n4.client_url).stdout.strip()
          == "n1 and n2 down", "the write with n1 and n2 down is not there")
    stop_together([n3, n4, n5])

if __name__ == "__main__":
    main(test)
