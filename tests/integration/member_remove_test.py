"""Issue 5, scaling down the etcdctl way: a 5-node `quorate run` cluster under a writer, and
`quorate member remove n5 n4` leaves 3 voters with no failed write and one cluster ID throughout.
n4's and n5's quorate keep their etcd stopped instead of crash-looping it (no restart, /readyz 503,
/healthz 200, the decision logged once) and stop on SIGTERM. Bad input removes nothing (exit 2); a
removal that would lose quorum is refused (exit 1). Then n4 starts again on its old data with
--cluster-size 5, as a scale-up reusing its volume would: its old member dir is moved aside (kept),
and it joins as a learner under a new ID and is promoted. n5 started on its old data when the cluster
is at --cluster-size waits as extra and gives up, its data untouched."""
import glob
import json
import os
import time
import urllib.request

from harness import (QUORATE, Cluster, ClusterIdWatch, Writer, check, log, log_since, log_size, main, member_ids,
                     parse_prometheus, require, run, run_together, started_voters, stop_together, to_hex,
                     wait_healthy, wait_log, wait_until)


def remove(c, *members, endpoints=None, check_rc=None):
    return run([QUORATE, "member", "remove", "--endpoints", endpoints or c.endpoints(c.nodes[:3])] + list(members),
               check_rc=check_rc, timeout=60)


def restarts(node):
    with urllib.request.urlopen(f"http://{node.ip}:2383/metrics", timeout=5) as r:
        return parse_prometheus(r.read().decode())[("quorate_etcd_restarts_total", frozenset())]


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(5)
    n1, n2, n3, n4, n5 = c.nodes
    run_together(c.nodes)
    wait_healthy(c)
    before = member_ids(c)
    cluster_id = set(c.cluster_ids().values())
    (cid,) = cluster_id

    # Bad input: exit 2, one line naming the argument, nothing removed.
    for args, says in [((), "at least one MEMBER"), (("n9",), "'n9'"), (("n5", "n9"), "'n9'"),
                       (("n5", before["n5"]), "given twice"), (("n5", "n5"), "given twice")]:
        r = remove(c, *args)
        check(r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"member remove {args}: exit {r.returncode}, stderr {r.stderr!r}; want 2 saying {says!r}")
    check(member_ids(c, n1.client_url) == before, "bad input removed something")

    # The leader stays among the members that stay, so the writer sees no leader change.
    status = json.loads(c.etcdctl("endpoint", "status", "-w", "json", endpoints=n1.client_url).stdout)
    leader = to_hex(status[0]["Status"]["leader"])
    if leader in (before["n4"], before["n5"]):
        leader_url = n4.client_url if leader == before["n4"] else n5.client_url
        c.etcdctl("move-leader", before["n1"], endpoints=leader_url)

    writer = Writer(c, c.endpoints([n1, n2, n3]))
    watch = ClusterIdWatch(c)
    writer.start()
    watch.start()
    wait_until(lambda: len(writer.ok) >= 5, 20, "the writer to get going")
    offsets = {n.name: log_size(n) for n in (n4, n5)}
    log("quorate member remove n5 n4")
    r = remove(c, "n5", "n4", check_rc=0)
    want = [f"Member {before['n5']} (n5) removed from cluster {cid}", f"Member {before['n4']} (n4) removed from cluster {cid}"]
    check(r.stdout.splitlines() == want, f"member remove printed {r.stdout!r}, want {want}")
    wait_until(lambda: started_voters(c, 3, n1.client_url), 30, "3 started voters")

    # n4 and n5: etcd stopped for good, quorate alive and not ready, the decision said once.
    for n in (n4, n5):
        wait_log(n, "decision: wait: member", 30, since=offsets[n.name])
        text = log_since(n, offsets[n.name])
        check("the member has been permanently removed from the cluster" in text,
              f"{n.name}'s etcd did not say it was removed:\n{text[-3000:]}")
    time.sleep(8)  # several restart backoffs
    for n in (n4, n5):
        text = log_since(n, offsets[n.name])
        said = f"decision: wait: member {before[n.name]} ({n.name}) was removed from cluster {cid}"
        check(text.count(said) == 1, f"{n.name} did not log {said!r} once:\n{text[-3000:]}")
        check(n.quorate.poll() is None, f"{n.name}'s quorate exited: {n.quorate.returncode}")
        check(n.etcd_pid() is None, f"{n.name}'s etcd runs again")
        check(restarts(n) == 0, f"{n.name} restarted etcd {restarts(n)} times after its removal")
        ready, health = n.http("/readyz"), n.http("/healthz")
        check(ready[0] == 503 and "was removed" in ready[1], f"{n.name} /readyz {ready}")
        check(health[0] == 200, f"{n.name} /healthz {health}")

    # On a loaded machine few writes may have gone through by now: the count below needs some.
    wait_until(lambda: len(writer.ok) >= 20, 60, "the writer to get 20 writes through")
    writer.finish()
    log(f"writer: {len(writer.ok)} writes ok, {len(writer.failures)} failed")
    check(not writer.failures, f"writes failed during the removal: {writer.failures}")
    check(len(writer.ok) >= 20, f"the writer got only {len(writer.ok)} writes through")
    r = remove(c, "n5", "n4")
    check(r.returncode == 2 and "'n5'" in r.stderr, f"again without --ignore-not-found: {r.returncode} {r.stderr!r}")
    r = remove(c, "n5", before["n4"], "--ignore-not-found", check_rc=0)
    check("n5: not a member of cluster" in r.stdout, f"again with --ignore-not-found: {r.stdout!r}")

    # SIGTERM ends a node that keeps etcd stopped, at once and cleanly.
    t = time.time()
    codes = stop_together([n4, n5])
    check(codes == {"n4": 0, "n5": 0} and time.time() - t < 10, f"stopping n4 and n5: {codes}")

    # 3 voters with n3 down: removing a running one would leave 1 of 2 healthy, and is refused.
    n3.stop()
    r = remove(c, "n1", endpoints=c.endpoints([n1, n2]))
    check(r.returncode == 1 and "refusing to remove n1" in r.stderr and "n3" in r.stderr,
          f"removing n1 with n3 down: exit {r.returncode}, {r.stderr!r}")
    check(member_ids(c, n1.client_url) == {k: before[k] for k in ("n1", "n2", "n3")}, "the refusal removed something")
    n3.run()
    wait_healthy(c, count=3, nodes=[n1, n2, n3])

    # A scale-up reusing n4's volume: its old data aside, a new member, promoted.
    offset = log_size(n4)
    n4.run(["--cluster-size", "5"])
    wait_healthy(c, count=4, nodes=[n1, n2, n3, n4])
    after = member_ids(c, n1.client_url)
    check(after["n4"] != before["n4"], f"n4 came back as its removed ID {before['n4']}")
    text = log_since(n4, offset)
    check(f"member {before['n4']} (n4) was removed from cluster {cid}" in text and "decision: join" in text,
          f"n4 did not decide to join after its removal:\n{text[-3000:]}")
    check(f"promoted n4 ({after['n4']})" in text, f"n4 was not promoted:\n{text[-3000:]}")
    aside = glob.glob(os.path.join(n4.data_dir, "member.removed-*"))
    check(len(aside) == 1 and glob.glob(os.path.join(aside[0], "wal", "*.wal")),
          f"n4's old data was not kept aside: {os.listdir(n4.data_dir)}")

    # n5 started on its old data when the cluster is at its size: it waits as extra, saying it was
    # removed, and gives up at --timeout with its data where it was.
    offset = log_size(n5)
    c.timeout = "6s"
    n5.run(["--cluster-size", "4"])
    wait_until(lambda: n5.quorate.poll() is not None, 30, "n5 to give up")
    text = log_since(n5, offset)
    check(n5.quorate.returncode == 1, f"n5 exited {n5.quorate.returncode}, want 1")
    check(f"member {before['n5']} (n5) was removed from cluster {cid}" in text and "raise --cluster-size" in text,
          f"n5 did not say it was removed and extra:\n{text[-3000:]}")
    check(not glob.glob(os.path.join(n5.data_dir, "member.removed-*")) and
          glob.glob(os.path.join(n5.data_dir, "member", "wal", "*.wal")), "n5's data was moved")
    check(started_voters(c, 4, n1.client_url), "n5's attempt changed the membership")
    seen = watch.finish()
    check(set(seen) == cluster_id, f"cluster IDs seen: {seen}, want only {cluster_id}")
    stop_together([n1, n2, n3, n4])


if __name__ == "__main__":
    main(test)
