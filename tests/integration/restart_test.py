"""Issue 2: restarting every node (kill etcd, run `init` again, start etcd) keeps the data: keys
written before are read after, the member IDs do not change, and init says it restarted."""
import base64
import json
import signal

from harness import Cluster, check, log, main, require, to_hex, wait_until


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    c.start_all(lambda n, d: n.init_and_start(d))
    wait_until(lambda: c.all_started(), 60, "all members started")
    before = {m["name"]: to_hex(m["ID"]) for m in c.member_list()["members"]}
    cluster_before = set(c.cluster_ids().values())
    for i in range(20):
        c.etcdctl("put", f"/k/{i}", f"v{i}")

    for n in c.nodes:
        n.stop(signal.SIGKILL)
    decisions = {}

    def restart(n, delay):
        out = n.init_and_start(delay)
        decisions[n.name] = (out["decision"], out["memberID"])
    c.start_all(restart)
    log(f"after kill -9 of every etcd: {decisions}")
    check(all(d == "restart" for d, _ in decisions.values()), f"every node restarts on its data: {decisions}")
    check({n: i for n, (_, i) in decisions.items()} == before, f"init reports the old IDs {before}: {decisions}")
    wait_until(lambda: c.all_started(), 60, "all members back")
    after = {m["name"]: to_hex(m["ID"]) for m in c.member_list()["members"]}
    check(after == before, f"member IDs changed: {before} -> {after}")
    check(set(c.cluster_ids().values()) == cluster_before, "cluster ID changed")
    # Every key, read back from every member (a linearizable read goes through the leader, so this
    # also shows each member is part of the one cluster that holds the data).
    for n in c.nodes:
        r = c.etcdctl("get", "/k/", "--prefix", "-w", "json", endpoints=n.client_url)
        kvs = json.loads(r.stdout).get("kvs", [])
        got = {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode() for kv in kvs}
        check(got == {f"/k/{i}": f"v{i}" for i in range(20)}, f"keys after the restart, read from {n.name}: {got}")
    c.stop_all()


if __name__ == "__main__":
    main(test)
