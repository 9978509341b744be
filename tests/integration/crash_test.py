"""Issue 3 §1, crash: kill -9 the etcd child of `quorate run` on one of 3 nodes. quorate restarts it
(a new pid, after deciding again: restart on its data), the member keeps its ID, every key written
before is read back from that member's own store, and /metrics counts the restart."""
import json
import os
import signal

from harness import (Cluster, check, keys_caught_up, log, log_since, log_size, main, member_ids, parse_prometheus,
                     require, run_together, stop_together, wait_healthy, wait_until)


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1 = c.nodes[0]
    run_together(c.nodes)
    wait_healthy(c)
    before = member_ids(c)
    cluster_before = set(c.cluster_ids().values())
    for i in range(20):
        c.etcdctl("put", f"/k/{i}", f"v{i}")

    pid = n1.etcd_pid()
    check(pid, "no etcd child under n1's quorate run")
    offset = log_size(n1)
    log(f"kill -9 etcd (pid {pid}) under n1's quorate run (pid {n1.quorate.pid})")
    os.kill(pid, signal.SIGKILL)
    new_pid = wait_until(lambda: n1.etcd_pid() not in (None, pid) and n1.etcd_pid(), 30, "etcd restarted")
    log(f"etcd restarted as pid {new_pid}")
    check(n1.quorate.poll() is None, "quorate run exited when its etcd was killed")
    wait_healthy(c)

    after = member_ids(c)
    check(after == before, f"member IDs changed after the crash: {before} -> {after}")
    check(set(c.cluster_ids().values()) == cluster_before, f"cluster ID changed: {c.cluster_ids()}")
    want = {f"/k/{i}": f"v{i}" for i in range(20)}
    got = keys_caught_up(c, n1, "/k/", lambda k: k == want)
    check(got == want, f"n1's keys after the crash: {got}")
    st = json.loads(c.etcdctl("endpoint", "status", "-w", "json", endpoints=n1.client_url).stdout)[0]["Status"]
    check(format(st["header"]["member_id"], "x") == before["n1"], f"n1 answers as another member: {st}")

    text = log_since(n1, offset)
    check("etcd exited" in text and "decision: restart" in text,
          f"n1's log does not show the exit and a restart decision:\n{text[-2000:]}")
    metrics = parse_prometheus(n1.http("/metrics")[1])
    check(metrics[("quorate_etcd_restarts_total", frozenset())] == 1, f"restarts in /metrics: {metrics}")
    check(metrics[("quorate_decisions_total", frozenset({("decision", "restart")}))] == 1,
          f"restart decisions in /metrics: {metrics}")
    for n in c.nodes[1:]:
        check(parse_prometheus(n.http("/metrics")[1])[("quorate_etcd_restarts_total", frozenset())] == 0,
              f"{n.name} restarted its etcd too")

    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes on SIGTERM: {codes}")


if __name__ == "__main__":
    main(test)
