"""Issue 3, `quorate run` against real etcd, 3 nodes on loopback, one scenario after another on the
same cluster where that is what happens in life:
  bootstrap with run; /healthz, /readyz, /metrics;
  crash (kill -9 etcd): restarted, same ID, data intact;
  lost volume with a writer running: removed, re-added as a learner, promoted, writes keep working;
  all at once: stop every node together and start them together: same IDs, every key there;
  full restart with one lost volume: two form quorum, the third is replaced, one cluster ID;
  scale up 3 -> 5: the new nodes join as learners and are promoted;
  killed mid-way: after MemberRemove, and after MemberAdd before etcd started: it converges;
  majority lost: two volumes wiped: nothing new is created, exit 1 at --timeout saying why."""
import json
import os
import re
import signal
import threading
import time

from harness import Cluster, check, log, main, require, run, to_hex, wait_until

SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.eE+-]+$')


def ids(c, endpoint=None):
    return {m["name"]: to_hex(m["ID"]) for m in c.member_list(endpoint)["members"] if m.get("name")}


def voters(c, count):
    ml = c.member_list()["members"]
    return len(ml) == count and all(m.get("clientURLs") and not m.get("isLearner") for m in ml)


def all_ready(nodes):
    return all(n.http("/readyz")[0] == 200 for n in nodes)


def start_together(nodes, extra=()):
    threads = [threading.Thread(target=n.run, args=(extra,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def stop_together(nodes):
    threads = [threading.Thread(target=n.stop) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class Writer(threading.Thread):
    """Writes a key every 50 ms through `endpoints`, counting what failed."""

    def __init__(self, c, endpoints):
        super().__init__(daemon=True)
        self.c, self.endpoints = c, endpoints
        self.ok = self.failed = 0
        self.stopping = False

    def run(self):
        i = 0
        while not self.stopping:
            r = self.c.etcdctl("put", f"/w/{i:05d}", str(i), endpoints=self.endpoints, check_rc=None)
            if r.returncode == 0:
                self.ok += 1
            else:
                self.failed += 1
            i += 1
            time.sleep(0.05)


def check_metrics(node):
    code, text = node.http("/metrics")
    check(code == 200, f"/metrics answered {code}")
    names = set()
    for line in text.splitlines():
        if not line or line.startswith("# HELP") or line.startswith("# TYPE"):
            if line.startswith("# TYPE"):
                names.add(line.split()[2])
            continue
        check(SAMPLE.match(line), f"/metrics line is not Prometheus text: {line!r}")
    for want in ("quorate_etcd_restarts_total", "quorate_decisions_total", "quorate_members"):
        check(want in names, f"/metrics has no {want}: {sorted(names)}")


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1, n2, n3 = c.nodes

    log("bootstrap: 3 x quorate run at once")
    start_together(c.nodes)
    wait_until(lambda: voters(c, 3) and all_ready(c.nodes), 60, "3 ready voters")
    original = ids(c)
    for n in c.nodes:
        check(n.http("/healthz")[0] == 200, f"{n.name} /healthz")
    check_metrics(n1)
    for i in range(10):
        c.etcdctl("put", f"/k/{i}", f"v{i}")

    log("crash: kill -9 the etcd under quorate run on n1")
    pid = n1.etcd_pid()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: n1.etcd_pid() not in (None, pid), 30, "etcd restarted under quorate run")
    wait_until(lambda: all_ready(c.nodes), 60, "n1 ready again")
    check(ids(c) == original, f"IDs changed after a crash: {original} -> {ids(c)}")
    check(c.etcdctl("get", "/k/3", "--print-value-only", endpoints=n1.client_url).stdout.strip() == "v3",
          "data lost after a crash")
    check("quorate_etcd_restarts_total 1" in n1.http("/metrics")[1], "restart counted in /metrics")

    log("lost volume: n3 stops, its data dir is wiped, it starts again while a writer runs")
    writer = Writer(c, c.endpoints([n1, n2]))
    writer.start()
    n3.stop()
    n3.wipe()
    n3.run()
    saw_unready = False
    deadline = time.time() + 60
    while time.time() < deadline:
        code, _ = n3.http("/readyz") if n3.quorate.poll() is None else (0, "")
        if code == 200 and voters(c, 3):
            break
        saw_unready |= code == 503
        time.sleep(0.1)
    writer.stopping = True
    writer.join()
    check(voters(c, 3), f"n3 is not a voter again: {c.member_list()}")
    check(saw_unready, "/readyz never said 503 while n3 was being replaced")
    replaced = ids(c)
    check(replaced["n3"] != original["n3"] and replaced["n1"] == original["n1"], f"n3 not replaced: {replaced}")
    check(writer.failed <= 3, f"{writer.failed} of {writer.ok + writer.failed} writes failed during the replace")
    log(f"writer: {writer.ok} writes, {writer.failed} failed")
    check("replace" in open(n3.log_path).read(), "n3's log does not say it was replaced")

    log("all at once: every node stops and starts together")
    before = ids(c)
    stop_together(c.nodes)
    start_together(c.nodes)
    wait_until(lambda: voters(c, 3) and all_ready(c.nodes), 60, "cluster back")
    check(ids(c) == before, f"IDs changed: {before} -> {ids(c)}")
    got = c.etcdctl("get", "/k/", "--prefix", "--print-value-only").stdout.split()
    check(len(got) == 10, f"keys lost: {got}")

    log("full restart with one lost volume: all stop, n2 is wiped, all start")
    stop_together(c.nodes)
    n2.wipe()
    start_together(c.nodes)
    wait_until(lambda: voters(c, 3) and all_ready(c.nodes), 90, "cluster back with n2 replaced")
    after = ids(c)
    check(after["n2"] != before["n2"] and after["n1"] == before["n1"], f"n2 not replaced: {after}")
    check(len(set(c.cluster_ids().values())) == 1, f"more than one cluster: {c.cluster_ids()}")
    check(len(c.etcdctl("get", "/k/", "--prefix", "--keys-only").stdout.split()) == 10, "keys lost")

    log("scale up: n4 and n5 with --cluster-size 5")
    n4, n5 = c.add_node(), c.add_node()
    c.discovery = ["--initial-cluster", c.initial_cluster(), "--cluster-size", "5"]
    for n in (n4, n5):
        n.run()
    wait_until(lambda: voters(c, 5) and all_ready(c.nodes), 120, "5 voters")
    check(len(set(c.cluster_ids().values())) == 1, "one cluster after scale up")
    for n in (n4, n5):
        check("join" in open(n.log_path).read(), f"{n.name} did not join")

    log("killed mid-way: n5 after MemberRemove, n4 after MemberAdd before etcd started")
    n4.stop()
    n5.stop()
    n4.wipe()
    n5.wipe()
    listing = ids(c)
    c.etcdctl("member", "remove", listing["n5"])
    r = run([os.environ.get("QUORATE_BIN", "quorate"), "init", "-w", "json"] + n4.args())
    check(r.returncode == 0 and json.loads(r.stdout)["decision"] == "replace", f"init for n4: {r.stdout} {r.stderr}")
    for n in (n4, n5):
        n.run()
    wait_until(lambda: voters(c, 5) and all_ready(c.nodes), 120, "5 voters after interrupted changes")
    check(len(c.member_list()["members"]) == 5, "no stray member left behind")
    c.stop_all()

    log("majority lost: a fresh 3-node cluster, two volumes wiped, all restarted with --timeout 15s")
    m = Cluster(3, timeout="15s")
    start_together(m.nodes)
    wait_until(lambda: voters(m, 3), 60, "fresh cluster")
    cluster_id = set(m.cluster_ids().values())
    stop_together(m.nodes)
    m.nodes[1].wipe()
    m.nodes[2].wipe()
    start_together(m.nodes)
    for n in m.nodes[1:]:
        rc = n.quorate.wait(timeout=60)
        text = open(n.log_path).read()
        check(rc == 1, f"{n.name} exited {rc}, wanted 1")
        check("majority" in text.lower(), f"{n.name} does not say a majority is lost: {text[-600:]}")
    r = m.etcdctl("endpoint", "status", "-w", "json", endpoints=m.nodes[0].client_url, check_rc=None)
    if r.returncode == 0:
        status = json.loads(r.stdout)[0]["Status"]
        check(to_hex(status["header"]["cluster_id"]) in cluster_id, "the survivor is in the old cluster")
        check(status.get("leader", 0) == 0, "the survivor must not lead a one-member cluster")
    check(not os.path.exists(os.path.join(m.nodes[1].data_dir, "member", "wal")), "no new cluster was created")
    m.stop_all()


if __name__ == "__main__":
    main(test)
