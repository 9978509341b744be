"""Issue 24, item 3: a running cluster's peers moved from plaintext to TLS with no downtime (docs/DESIGN.md
§14, rules H1-H5), 3 nodes under `quorate run` on http peer URLs with their peer TLS files given (openssl
certificates), real etcd, a writer and a quorum sampler:
1. Bad input to `quorate tls to-https` (no port, the http peer port): exit 2, one line, no intent written.
2. `quorate tls to-https --peer-https-port 2381`; n2's quorate is SIGKILLed just after it decided its first
   restart, and started again with the same flags: the move converges. Every member is then listed at
   https://<ip>:2381 and its etcd listens on https only (http :2380 refuses, :2381 serves the CA's leaf);
   each etcd was restarted exactly twice (both, https), never two at once; a majority always answered and
   the writer never failed for longer than one member's restart.
3. n1's quorate is stopped and started again with its old (http) flags: it restarts on its data at https,
   upkeep leaves the membership at https, and its member bucket lists every member at https.
4. n3 loses its volume (its phase with it) and starts again on its old http flags: its peers are silent
   there, the cluster says the move is done, so it takes its https twins and replaces its member (rule 4).
Asked again, to-https answers the same; another port for a cluster on https is bad input (exit 2)."""
import json
import os
import signal
import time

import pki
from ca_rotation_test import check_rolling, restart_killed, restart_spans, watched
from harness import QUORATE, Cluster, check, log, log_since, log_size, main, run, wait_healthy, wait_log, wait_until

PORT = 2381


def peer_tls_status(c):
    out = run([QUORATE, "tls", "status", "--endpoints", c.endpoints()], check_rc=0).stdout
    return next(line for line in out.splitlines() if line.startswith("peer TLS"))


def listed_urls(c):
    return {m["name"]: m["peerURLs"] for m in c.member_list()["members"]}


def on_https_only(c):
    """Every member listed at its https URL alone, its etcd serving TLS there and nothing on http :2380."""
    if listed_urls(c) != {n.name: [f"https://{n.ip}:{PORT}"] for n in c.nodes}:
        return False
    for n in c.nodes:
        plain = run(["curl", "-sS", "-o", "/dev/null", "--max-time", "2", f"http://{n.ip}:2380/members"],
                    check_rc=None, timeout=10)
        if plain.returncode == 0:
            return False
    return True


def test():
    c = Cluster(3)  # on http peer URLs, with the peer TLS files given
    pkidir, ca = pki.run_cluster(c, "ca")
    check(all(u[0].startswith("http://") for u in listed_urls(c).values()), f"not plaintext: {listed_urls(c)}")

    # 1. Bad input: exit 2, one line naming the flag, nothing written.
    r = run([QUORATE, "tls", "to-https", "--endpoints", c.endpoints()], check_rc=2)
    check(r.stderr.count("\n") == 1 and "--peer-https-port" in r.stderr, f"no port: {r.stderr}")
    r = run([QUORATE, "tls", "to-https", "--endpoints", c.endpoints(), "--peer-https-port", "2380"], check_rc=2)
    check(r.stderr.count("\n") == 1 and "listens for peers there" in r.stderr, f"the http port: {r.stderr}")
    check("none asked" in peer_tls_status(c), "a refused to-https wrote an intent")

    # 2. The move under a writer and a quorum sampler; n2's quorate killed after its first restart decision.
    offsets, w, q = watched(c)
    began = time.time()
    out = run([QUORATE, "tls", "to-https", "--endpoints", c.endpoints(), "--peer-https-port", str(PORT)],
              check_rc=0).stdout
    log(f"to-https:\n{out}")
    n2 = c.nodes[1]
    wait_log(n2, "peer TLS: restarting etcd for phase both", 60, since=offsets["n2"])
    os.kill(n2.quorate.pid, signal.SIGKILL)
    n2.quorate.wait()
    log("n2's quorate killed after its restart decision; starting it again with the same flags")
    restart_killed(n2, pki.peer_args(pkidir, n2))
    wait_until(lambda: ": done" in peer_tls_status(c) and on_https_only(c), 90,
               "every member listed at https and listening on https only")
    took = time.time() - began
    wait_healthy(c)
    w.finish()
    q.finish()
    log(f"the move took {took:.1f}s")
    # n2's first restart spans its quorate's kill and start: the writer's bound is that of the others.
    check_rolling(c, restart_spans(c, offsets, change="peer TLS"), ["both", "https"], w, q, unbounded=[("n2", "both")])
    for n in c.nodes:
        check(pki.handshake(n, ca[0], *pki.node_files(pkidir, n)[1:], port=PORT), f"{n.name} serves no TLS on {PORT}")

    # 3. A quorate started again on the old flags keeps the member at https, and its bucket says so.
    n1 = c.nodes[0]
    n1.stop()
    at = log_size(n1)
    n1.run(extra=pki.peer_args(pkidir, n1))
    wait_log(n1, "etcd started", 60, since=at)
    wait_healthy(c)
    said = log_since(n1, at)
    check("MemberUpdate" not in said, f"n1's upkeep changed its peer URLs:\n{said[-2000:]}")
    check(on_https_only(c), f"the membership moved back: {listed_urls(c)}")
    with open(os.path.join(n1.data_dir, "quorate", "bucket.json")) as f:
        bucket = f.read()
    urls = [u for m in json.loads(bucket)["members"].values() for u in m["peerURLs"]]
    check(urls and all(u.startswith("https://") and u.endswith(f":{PORT}") for u in urls),
          f"n1's bucket does not list every member at https: {urls}")

    # 4. n3 loses its volume (its quorate state with it) and starts again on its old http flags: its fresh
    #    quorate must find its member at the https twin of its peer URL and replace it there (rule 4).
    n3 = c.nodes[2]
    n3.kill()
    n3.wipe()
    at = log_size(n3)
    n3.run(extra=pki.peer_args(pkidir, n3))
    wait_until(lambda: on_https_only(c) and len(listed_urls(c)) == 3 and
               all(m.get("clientURLs") and not m.get("isLearner") for m in c.member_list()["members"]), 120,
               "n3 back as a started voter at its https peer URL")
    wait_healthy(c)
    said = [line for line in log_since(n3, at).splitlines() if " info " in line and ("decision:" in line or "https" in line)]
    log("n3 after its volume loss:\n" + "\n".join(said[:6]))
    check(any("moved its peer URLs to https at port" in line for line in said), "n3 did not say where the peers moved")
    check(any("decision: replace" in line for line in said), "n3 did not replace its member (rule 4)")

    # Asked again, the same answer; another move of a cluster on https, refused as bad input.
    run([QUORATE, "tls", "to-https", "--endpoints", c.endpoints(), "--peer-https-port", str(PORT)], check_rc=0)
    r = run([QUORATE, "tls", "to-https", "--endpoints", c.endpoints(), "--peer-https-port", "2390"], check_rc=2)
    check(r.stderr.count("\n") == 1 and "nothing to move" in r.stderr, f"a move of an https cluster: {r.stderr}")


if __name__ == "__main__":
    main(test)
