"""Issue 3 §2, all at once: every `quorate run` gets SIGTERM at the same moment (the case where
StatefulSet scripts that start one pod after another stay stuck), and all are started again at the
same moment. Each decides to restart on its data, the cluster comes back with the same cluster ID and
member IDs, and every key written before is read back from every member."""
from harness import (Cluster, check, keys_caught_up, log, log_since, log_size, main, member_ids, require, run_together,
                     stop_together, wait_healthy)

KEYS = 60


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    run_together(c.nodes)
    wait_healthy(c)
    before = member_ids(c)
    cluster_before = set(c.cluster_ids().values())
    check(len(cluster_before) == 1, f"more than one cluster: {c.cluster_ids()}")
    # Spread over the members' endpoints, so each of them has served writes.
    want = {f"/k/{i:03d}": f"v{i}" for i in range(KEYS)}
    for i, (k, v) in enumerate(want.items()):
        c.etcdctl("put", k, v, endpoints=c.nodes[i % 3].client_url)

    log("SIGTERM to every quorate run at once")
    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes on SIGTERM: {codes}")
    offsets = {n.name: log_size(n) for n in c.nodes}
    log("starting every node at once")
    run_together(c.nodes)
    wait_healthy(c)

    after = member_ids(c)
    check(after == before, f"member IDs changed: {before} -> {after}")
    ids = c.cluster_ids()
    check(set(ids.values()) == cluster_before, f"cluster IDs after: {ids}, before: {cluster_before}")
    for n in c.nodes:
        text = log_since(n, offsets[n.name])
        check("decision: restart" in text, f"{n.name} did not restart on its data:\n{text[-2000:]}")
        got = keys_caught_up(c, n, "/k/", lambda k: k == want)
        check(got == want, f"{n.name} lost keys: {len(got)} of {len(want)}, missing "
              f"{sorted(set(want) - set(got))[:10]}")
    stop_together(c.nodes)


if __name__ == "__main__":
    main(test)
