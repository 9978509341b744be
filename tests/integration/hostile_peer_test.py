"""Issue 15, items 1 and 2: what a hostile or broken etcd peer URL answers must never make quorate
start a new cluster, nor put its words into the files etcd reads or into quorate's log.

1. Injection: a peer URL answers GET /members with a cluster that lists this node as an initial
   member that never started (IDs computed as etcd does, so the cluster looks consistent), beside a
   member whose name or peer URL carries a line break and ETCD_FORCE_NEW_CLUSTER=true. Before the
   fix, `quorate init` wrote that line into etcd.env. Now the answer is refused as not etcd's, init
   waits (saying why, escaped) and writes nothing.
2. Fail-open: both nodes' agents are real and agree to bootstrap, but each one's etcd peer URL is
   held by a server answering HTTP 500, non-JSON, or JSON without X-Etcd-Cluster-Id. Before the
   fix, both decided `new`. Now each waits, naming the peer and what it answered, and exits 1 at
   --timeout without writing etcd's config.
"""
import hashlib
import json
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hostile"))

from harness import QUORATE, Cluster, check, log, main, run  # noqa: E402
from hostile_http import Answer, HostileHttp  # noqa: E402


def member_id(peer_urls, token):
    digest = hashlib.sha1(("".join(sorted(peer_urls)) + token).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def cluster_id(ids):
    digest = hashlib.sha1(b"".join(i.to_bytes(8, "big") for i in sorted(ids))).digest()
    return int.from_bytes(digest[:8], "big")


def init(c, node):
    return run([QUORATE, "init"] + node.args(), timeout=60)


def written(node):
    state = os.path.join(node.data_dir, "quorate")
    return sorted(os.listdir(state)) if os.path.isdir(state) else []


def check_log_is_clean(r, what):
    """Every stderr line is one of quorate's own records or its final error: nothing forged."""
    check("\x1b" not in r.stderr, f"{what}: an escape character reached the terminal: {r.stderr!r}")
    for line in r.stderr.splitlines():
        check(line[:4].isdigit() or line.startswith("quorate: error: "),
              f"{what}: a log line quorate did not write: {line!r}")
    check("\nETCD_FORCE_NEW_CLUSTER" not in r.stderr, f"{what}: the peer's line break reached the log")


def injection(name, peer_url):
    c = Cluster(2, timeout="4s")
    n1, n2 = c.nodes
    me = member_id([n1.peer_url], c.token)
    evil = member_id([peer_url], c.token)
    members = [{"id": me, "peerURLs": [n1.peer_url]},
               {"id": evil, "name": name, "peerURLs": [peer_url], "clientURLs": ["http://127.0.0.9:2379"]}]
    body = json.dumps(members)
    server = HostileHttp(n2.ip, 2380)
    server.behave(Answer(200, body, {"X-Etcd-Cluster-Id": format(cluster_id([me, evil]), "x")}), path="/members")
    try:
        r = init(c, n1)
    finally:
        server.stop()
    what = f"a /members answer with member name {name!r} and peer URL {peer_url!r}"
    env = os.path.join(n1.data_dir, "quorate", "etcd.env")
    if os.path.exists(env):
        with open(env) as f:
            text = f.read()
        check("\nETCD_FORCE_NEW_CLUSTER" not in text, f"{what}: etcd.env got the peer's line:\n{text}")
    check(r.returncode == 1, f"{what}: init exited {r.returncode}, wanted 1 (wait, then time out)\n{r.stderr}")
    check(written(n1) == [], f"{what}: init wrote {written(n1)}")
    check("is not an etcd peer answer" in r.stderr, f"{what}: the wait does not say the answer was refused:\n{r.stderr}")
    check_log_is_clean(r, what)
    log(f"refused: {what}")


def fail_open(answer, says):
    c = Cluster(2, timeout="4s")
    n1, n2 = c.nodes
    servers = [HostileHttp(n.ip, 2380) for n in c.nodes]
    for s in servers:
        s.behave(answer)
    results = {}

    def go(node):
        results[node.name] = init(c, node)

    try:
        threads = [threading.Thread(target=go, args=(n,)) for n in c.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for s in servers:
            s.stop()
    for node, peer in ((n1, n2), (n2, n1)):
        r = results[node.name]
        what = f"{node.name} with {peer.name}'s peer URL answering {says}"
        check(r.returncode == 1, f"{what}: init exited {r.returncode}, wanted 1\n{r.stdout}{r.stderr}")
        check(written(node) == [], f"{what}: init wrote {written(node)}")
        check(f"{peer.name}: its etcd peer URL answered as etcd never does" in r.stderr,
              f"{what}: the wait does not name the peer and why:\n{r.stderr}")
        check(says in r.stderr, f"{what}: the wait does not say what it answered ({says}):\n{r.stderr}")
        check("decision: new" not in r.stderr, f"{what}: decided new:\n{r.stderr}")
    log(f"both waited on a peer URL answering {says}")


def test():
    for name, peer_url in [
        ("x\nETCD_FORCE_NEW_CLUSTER=true\nETCD_UNSAFE_NO_FSYNC=true", "http://127.0.0.9:2380"),
        ("evil", "http://[::1\nETCD_FORCE_NEW_CLUSTER=true]:2380"),
        ("\x1b[2J\x1b[31mforged", "http://127.0.0.9:2380"),
    ]:
        injection(name, peer_url)
    for answer, says in [
        (Answer(500, "boom"), "HTTP 500"),
        (Answer(200, "<html>proxy</html>", {"X-Etcd-Cluster-Id": "2a"}, content_type="text/html"), "not JSON"),
        (Answer(200, "[]"), "no X-Etcd-Cluster-ID header"),
    ]:
        fail_open(answer, says)


if __name__ == "__main__":
    main(test)
