"""Issue 3 §6, majority lost: two of three data dirs are wiped and all three `quorate run` start again
with --timeout 15s. quorate must not create a new cluster: the two wiped nodes wait, then exit 1 at
the timeout saying a majority is lost and how to recover; neither ever starts etcd. The survivor runs
etcd on its data and stays in the old cluster without a leader; nothing but the old cluster ID is
ever seen on any endpoint."""
import json
import os
import time

from harness import (Cluster, ClusterIdWatch, check, log, log_since, log_size, main, peer_members, require,
                     run_together, stop_together, to_hex, wait_healthy, wait_until)


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1, n2, n3 = c.nodes
    run_together(c.nodes)
    wait_healthy(c)
    cluster_id = set(c.cluster_ids().values())
    c.etcdctl("put", "/k/precious", "only n1 keeps this")

    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes on SIGTERM: {codes}")
    n2.wipe()
    n3.wipe()
    c.timeout = "15s"
    offsets = {n.name: log_size(n) for n in c.nodes}
    log("n2 and n3 wiped; all three start with --timeout 15s")
    watch = ClusterIdWatch(c)
    watch.start()
    started = time.time()
    run_together(c.nodes)
    try:
        for n in (n2, n3):
            rc = n.quorate.wait(timeout=45)
            took = time.time() - started
            text = log_since(n, offsets[n.name])
            log(f"{n.name} exited {rc} after {took:.1f}s; last line: {text.strip().splitlines()[-1]}")
            check(rc == 1, f"{n.name} exited {rc}, wanted 1:\n{text[-3000:]}")
            check(14 <= took <= 40, f"{n.name} exited after {took:.1f}s, not at --timeout 15s")
            last = text.strip().splitlines()[-1].lower()
            check("timed out" in last and "majority" in last, f"{n.name}'s last word does not say a majority "
                  f"is lost: {last}")
            check("snapshot" in last or "force-new-cluster" in last, f"{n.name} does not say how to recover: {last}")
            check("quorate recover --from-member n1" in last, f"{n.name} does not name the survivor's recovery: {last}")
            check("etcd started" not in text and "decision:" not in text, f"{n.name} started something:\n{text}")
            check(not os.path.exists(os.path.join(n.data_dir, "member")), f"{n.name} has an etcd data dir")
        check(n1.quorate.poll() is None, f"the survivor's quorate run exited:\n{log_since(n1, offsets['n1'])}")
        check("decision: restart" in log_since(n1, offsets["n1"]), "the survivor did not restart on its data")
        # The survivor's etcd runs in the old cluster, still of 3 members, and never gets a leader.
        peer = wait_until(lambda: peer_members(n1), 20, "the survivor's etcd to answer on its peer URL")
        check(peer[0] in cluster_id, f"the survivor's peer URL reports cluster {peer[0]}, not {cluster_id}")
        check(len(peer[1]) == 3, f"the survivor's membership changed: {peer[1]}")
        etcd_log = log_since(n1, offsets["n1"])
        check("became leader" not in etcd_log and "elected leader" not in etcd_log,
              f"the survivor's etcd got a leader:\n{etcd_log[-3000:]}")
        # etcd 3.4 serves clients only once it has published itself through raft; if it answers, it
        # must say the old cluster and no leader.
        r = c.etcdctl("endpoint", "status", "-w", "json", endpoints=n1.client_url, check_rc=None)
        if r.returncode == 0:
            st = json.loads(r.stdout)[0]["Status"]
            check(to_hex(st["header"]["cluster_id"]) in cluster_id, f"the survivor is in another cluster: {st}")
            check(st.get("leader", 0) == 0, f"the survivor has a leader: {st}")
    finally:
        seen = watch.finish()
    check(set(seen) <= cluster_id, f"a second cluster appeared: {seen}, the original is {cluster_id}")
    check(seen.get(next(iter(cluster_id))) == {"n1"}, f"not only the survivor answered: {seen}")
    n1.kill()  # its etcd has no quorum, so a clean stop would only wait


if __name__ == "__main__":
    main(test)
