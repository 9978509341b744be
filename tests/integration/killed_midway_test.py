"""Issue 3 §7, killed mid-way: quorate is killed (SIGKILL on its process group) between the steps of a
replace or a join, and a plain `quorate run` afterwards converges: no stray member left behind, no
second MemberAdd, the member promoted, 3 started voters holding the data. n3 of 3 loses its data
three times, and each time quorate dies at another point:
  1. after MemberRemove, before MemberAdd (`quorate init` killed when it logs the removal; a silent
     listener on n3's peer address holds it for 1 s in its peer-URL check, right between the two);
  2. after MemberAdd, before etcd started (`quorate init` ran to the end: it removed and re-added n3,
     and nothing started etcd);
  3. after etcd started as a learner, before its promotion (`quorate run` killed, etcd with it): once
     before etcd wrote anything, once after it wrote its WAL."""
import os
import signal
import socket

from harness import (QUORATE, Cluster, check, log, log_since, log_size, main, member_ids, require, run,
                     run_together, spawn, stop_together, to_hex, wait_healthy, wait_log, wait_until)


def listed(c, node, endpoints):
    """etcd's entry for the node's peer URL, or None."""
    for m in c.member_list(endpoints)["members"]:
        if node.peer_url in m.get("peerURLs", []):
            return m
    return None


def converge(c, node, offset, want_id=None):
    """`quorate run` for the node; waits for 3 started voters; checks what its log says it did."""
    node.run()
    wait_healthy(c, timeout=45)
    text = log_since(node, offset)
    ids = member_ids(c)
    check(len(c.member_list()["members"]) == 3, f"a stray member is left: {c.member_list()['members']}")
    check(f"promoted {node.name} ({ids[node.name]})" in text, f"{node.name} was not promoted:\n{text[-3000:]}")
    if want_id is not None:
        check(ids[node.name] == want_id, f"{node.name} is {ids[node.name]}, not the {want_id} added before")
        check(f"added {node.name} as learner" not in text, f"a second MemberAdd for {node.name}:\n{text[-3000:]}")
    got = c.etcdctl("get", "/k/", "--prefix", "--keys-only", "--consistency=s", endpoints=node.client_url)
    check(len(got.stdout.split()) == 20, f"{node.name} holds {got.stdout.split()}")
    return ids, text


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1, n2, n3 = c.nodes
    others = c.endpoints([n1, n2])
    run_together(c.nodes)
    wait_healthy(c)
    cluster_id = set(c.cluster_ids().values())
    for i in range(20):
        c.etcdctl("put", f"/k/{i:02d}", f"v{i}")

    log("1. killed after MemberRemove, before MemberAdd")
    old = member_ids(c)["n3"]
    n3.stop()
    n3.wipe()
    silent = socket.socket()
    silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    silent.bind((n3.ip, 2380))
    silent.listen(16)
    try:
        offset = log_size(n3)
        init = spawn([QUORATE, "init"] + n3.args(), n3.log_path, prefix=c.prefix)
        wait_log(n3, f"removed stale member {old}", 30, since=offset, interval=0.01)
        os.killpg(init.pid, signal.SIGKILL)
        init.wait()
    finally:
        silent.close()
    check("added n3 as learner" not in log_since(n3, offset), "the kill came after MemberAdd")
    check(listed(c, n3, others) is None and len(c.member_list(others)["members"]) == 2,
          f"after the kill etcd should list n1 and n2 only: {c.member_list(others)['members']}")
    offset = log_size(n3)
    ids, text = converge(c, n3, offset)
    check("decision: join: cluster" in text and "has 2 of 3 members and does not list n3" in text,
          f"n3 did not join the 2-member cluster:\n{text[-3000:]}")
    check(text.count("added n3 as learner") == 1, "not exactly one MemberAdd")
    check(ids["n3"] != old, "n3 kept its old ID")

    log("2. killed after MemberAdd, before etcd started")
    old = ids["n3"]
    n3.stop()
    n3.wipe()
    out = n3.init()
    check(out["decision"] == "replace", f"init decided {out}")
    learner = listed(c, n3, others)
    check(learner and learner.get("isLearner") and not learner.get("clientURLs")
          and to_hex(learner["ID"]) == out["memberID"] != old,
          f"after init etcd should list n3 as a new learner that never started: {learner}, init said {out}")
    check(len(c.member_list(others)["members"]) == 3, "init left a stray member")
    offset = log_size(n3)
    ids, text = converge(c, n3, offset, want_id=out["memberID"])
    check(f"already lists n3 as added member {out['memberID']} that never started" in text,
          f"n3 did not resume the join:\n{text[-3000:]}")

    # 3a: the moment etcd is spawned (usually before it wrote its WAL: the next run resumes the join;
    # if etcd was quicker than the kill, it restarts on it); 3b: once etcd has its WAL (the next run
    # restarts on it, still a learner, and promotes it).
    for label, point, decided in (("3a", "etcd spawned", ("join", "restart")),
                                  ("3b", "etcd wrote its WAL", ("restart",))):
        log(f"{label}. killed after {point} as a learner, before its promotion")
        old = ids["n3"]
        n3.stop()
        n3.wipe()
        offset = log_size(n3)
        n3.run()
        wait_log(n3, "etcd started (pid", 45, since=offset)
        if label == "3b":
            wal = os.path.join(n3.data_dir, "member", "wal")
            wait_until(lambda: any(f.endswith(".wal") for f in os.listdir(wal)), 30, "n3's WAL", interval=0.01)
        os.killpg(n3.quorate.pid, signal.SIGKILL)  # quorate and its etcd: one process group
        n3.quorate.wait()
        n3.quorate = None
        text = log_since(n3, offset)
        check("promoted n3" not in text, f"{label}: the kill came after the promotion")
        learner = listed(c, n3, others)
        check(learner and learner.get("isLearner"), f"{label}: n3 should be left a learner: {learner}")
        added = to_hex(learner["ID"])
        check(added != old and f"added n3 as learner {added}" in text, f"n3's learner {added} is not this run's")
        wait_until(lambda: run(["pgrep", "-f", "--", f"--data-dir={n3.data_dir}"]).returncode == 1, 10,
                   "n3's etcd to be gone")
        offset = log_size(n3)
        ids, text = converge(c, n3, offset, want_id=added)
        took = [d for d in decided if f"decision: {d}:" in text]
        check(took, f"{label}: after the kill n3 should decide {' or '.join(decided)}:\n{text[-3000:]}")
        log(f"{label}: after the kill n3 decided {took[0]} and converged")

    check(set(c.cluster_ids().values()) == cluster_id, f"cluster IDs: {c.cluster_ids()}")
    stop_together(c.nodes)


if __name__ == "__main__":
    main(test)
