"""Issue 13, rolling upgrade: a 3-node cluster of etcd 3.4.23 under `quorate run` is upgraded node by
node to etcd 3.5 (quorate stopped with SIGTERM and started again with --etcd of 3.5), the cluster
healthy before and after each step, while a client writes through every member. Midway, with a mixed
3.4/3.5 cluster, the etcd child of a 3.5 node and of a 3.4 node is killed and comes back. At the end:
every acknowledged key is on every member, no more failed writes than one leader election per
restart, every member kept its ID, the cluster version is 3.5, and each bucket records it."""
import json
import os
import signal

from harness import (QUORATE, Writer, check, healthy_cluster_on, http_get, keys_caught_up, log, log_since, log_size,
                     main, member_ids, require_etcd34_and_35, run, stop_together, wait_healthy, wait_log, wait_until)

# etcd hands leadership over on SIGTERM, so a restart costs at most one election's worth of writes.
MAX_FAILED_WRITES_PER_RESTART = 3


def versions(node):
    """(server, cluster) versions as the member's client URL says them."""
    status, body = http_get(f"{node.client_url}/version")
    check(status == 200, f"{node.name} /version: {status} {body}")
    doc = json.loads(body)
    return doc["etcdserver"], doc["etcdcluster"]


def crash_and_back(c, node):
    pid = node.etcd_pid()
    check(pid, f"no etcd child under {node.name}'s quorate run")
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: node.etcd_pid() not in (None, pid), 30, f"{node.name}'s etcd restarted")
    wait_healthy(c)


def test():
    etcd34, etcd35 = require_etcd34_and_35()
    c = healthy_cluster_on(etcd34)
    check(all(versions(n)[0] == "3.4.23" for n in c.nodes), "the cluster does not start on etcd 3.4.23")
    before = member_ids(c)
    for i in range(20):
        c.etcdctl("put", f"/k/{i:02d}", f"v{i}")

    writer = Writer(c, c.endpoints())
    writer.start()
    wait_until(lambda: len(writer.ok) >= 5, 20, "the writer to get going")
    for step, node in enumerate(c.nodes):
        wait_healthy(c)
        log(f"upgrading {node.name} to {etcd35}")
        offset = log_size(node)
        node.stop()
        node.run(etcd=etcd35)
        wait_until(lambda: versions(node)[0].startswith("3.5."), 60, f"{node.name} to run 3.5")
        wait_healthy(c)
        # quorate says the change, with the other members' health before it, and when it is done.
        before_line = f"etcd of {node.name} changes from 3.4.23 to 3.5."
        wait_log(node, before_line, 10, since=offset)
        check("2 of the 2 other members answer" in log_since(node, offset),
              f"{node.name}: the check before the upgrade did not find both others answering")
        wait_log(node, f"etcd of {node.name} changed from 3.4.23 to 3.5.", 30, since=offset)
        if step == 0:
            # A mixed cluster: n1 on 3.5, n2 and n3 on 3.4. A crash of each kind of node heals.
            check(versions(c.nodes[1])[1] == "3.4.0", f"cluster version moved early: {versions(c.nodes[1])}")
            log("mixed 3.4/3.5 cluster: kill -9 the etcd of n1 (3.5), then of n2 (3.4)")
            crash_and_back(c, c.nodes[0])
            crash_and_back(c, c.nodes[1])
    # The leader moves the cluster version up once every member runs 3.5.
    wait_until(lambda: all(versions(n)[1] == "3.5.0" for n in c.nodes), 30, "cluster version 3.5.0")
    writer.finish()
    log(f"writer: {len(writer.ok)} writes ok, {len(writer.failures)} failed")
    for f in writer.failures:
        log(f"  failed: {f}")
    restarts = len(c.nodes) + 2
    check(len(writer.failures) <= MAX_FAILED_WRITES_PER_RESTART * restarts,
          f"{len(writer.failures)} failed writes over {restarts} restarts")

    check(member_ids(c) == before, f"member IDs changed in the upgrade: {before} -> {member_ids(c)}")
    expected = {f"/k/{i:02d}": f"v{i}" for i in range(20)}
    expected.update({k: str(int(k.split("/")[-1])) for k in writer.ok})
    for n in c.nodes:
        got = keys_caught_up(c, n, "/", lambda k: set(expected) <= set(k))
        missing = sorted(set(expected) - set(got))
        check(not missing, f"{n.name} lost {len(missing)} acknowledged keys, e.g. {missing[:5]}")
        with open(os.path.join(n.data_dir, "quorate", "bucket.json")) as f:
            cluster = json.load(f)["cluster"]
        check(cluster.get("etcdVersion", "").startswith("3.5.") and cluster.get("clusterVersion") in ("3.4.0", "3.5.0"),
              f"{n.name}'s bucket does not record the upgrade: {cluster}")

    r = run([QUORATE, "version", "--etcd", etcd35, "--data-dir", c.nodes[0].data_dir, "-w", "json"],
            prefix=c.prefix, check_rc=0)
    shown = json.loads(r.stdout)
    check(shown["etcd"].startswith("3.5.") and shown["cluster"] == "3.5.0", f"quorate version: {r.stdout}")
    found = c.discover()
    check(found["clusterVersion"] == "3.5.0" and all(m["etcdVersion"].startswith("3.5.") for m in found["members"]),
          f"discover -w json: {found}")
    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes on SIGTERM: {codes}")


if __name__ == "__main__":
    main(test)
