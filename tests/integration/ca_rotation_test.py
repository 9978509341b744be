"""Issue 24, item 2: a rotation of the peer CA with no downtime (docs/DESIGN.md §14), 3 nodes under
`quorate run` with peer mutual TLS (openssl certificates), real etcd, a writer and a quorum sampler:
1. `quorate tls rotate-ca` with every node up: each etcd is restarted exactly twice (bundle, new), never two
   at once; the writer never fails for longer than one member's restart; a majority always answers; at the
   end every peer listener serves a leaf of the new CA and refuses a client leaf of the old one.
2. The operator puts next/ in place; a second rotation is asked with n3 off: no etcd restarts while it is
   off (rule R8 names it); n3 comes back and catches up.
3. n1's quorate is SIGKILLed just after it decided its first restart, and started again: the rotation
   converges, every peer on the third CA."""
import datetime
import json
import os
import re
import signal
import shutil
import threading
import time

import pki
from harness import (QUORATE, Cluster, Node, Sampler, check, log, log_since, log_size, main, run,
                     wait_healthy, wait_log, wait_until)

STAMP = re.compile(r"^\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d+)")


class TlsNode(Node):
    @property
    def peer_url(self):
        return f"https://{self.host}:2380"

    def args(self, extra=()):
        a = super().args(extra)
        a[a.index("--listen-peer-urls") + 1] = f"https://{self.ip}:2380"
        return a


def tls_cluster(size):
    c = Cluster(size)
    c.nodes = [TlsNode(c, i) for i in range(1, size + 1)]
    c.discovery = ["--initial-cluster", c.initial_cluster()]
    return c


class Writer(threading.Thread):
    """Puts one key after another through every endpoint; keeps (start, end, ok) of each put."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster = cluster
        self.puts = []
        self._halt = threading.Event()

    def run(self):
        i = 0
        while not self._halt.is_set():
            t0 = time.time()
            r = run(["etcdctl", "--endpoints", self.cluster.endpoints(), "--dial-timeout", "1s",
                     "--command-timeout", "1s", "put", f"/w/{i:05d}", str(i)], check_rc=None, timeout=10)
            self.puts.append((t0, time.time(), r.returncode == 0))
            i += 1
            self._halt.wait(0.05)

    def finish(self):
        self._halt.set()
        self.join()
        return self

    def longest_failing(self):
        """The longest time from a failed put's start to the end of the next put that succeeded."""
        longest, first_failed = 0.0, None
        for start, end, ok in self.puts:
            if not ok and first_failed is None:
                first_failed = start
            if ok and first_failed is not None:
                longest = max(longest, end - first_failed)
                first_failed = None
        return longest


class QuorumWatch(Sampler):
    """Asks every member's etcd for its status at once, every 0.2 s. A majority must always answer: two
    members down at once would show here. A majority that knows a leader may be missing for the time of
    one election, never longer: a leader stopped by SIGTERM hands its leadership on (etcd's Stop), and a
    follower knows no leader between the new one's vote request and its first append, which on a loaded
    machine one sample can catch. Each ask has 2 s, so an etcdctl slow to start is not taken for a member
    down."""

    ELECTION = 3.0  # etcd's default election timeout is 1 s; a follower waits up to 2 of them

    def __init__(self, cluster):
        super().__init__(0.2)
        self.cluster = cluster
        self.samples = 0
        self.short = []  # (time, answering) of each sample in which a majority did not answer
        self.leaderless = []  # [first, last, who knew a leader] of each run of samples without a majority that did
        self._run = None

    def ask(self, node, up, led):
        r = run(["etcdctl", "--endpoints", node.client_url, "--dial-timeout", "2s", "--command-timeout", "2s",
                 "endpoint", "status", "-w", "json"], check_rc=None, timeout=10)
        if r.returncode == 0:
            up.append(node.name)
            if json.loads(r.stdout)[0]["Status"].get("leader"):
                led.append(node.name)

    def sample(self):
        at, up, led = time.time(), [], []
        asks = [threading.Thread(target=self.ask, args=(n, up, led)) for n in self.cluster.nodes]
        for t in asks:
            t.start()
        for t in asks:
            t.join()
        self.samples += 1
        half = len(self.cluster.nodes) / 2
        if len(up) <= half:
            self.short.append((time.strftime("%H:%M:%S", time.localtime(at)), sorted(up)))
        if len(led) > half:
            self._run = None
        elif self._run is None:
            self._run = [at, at, sorted(led)]
            self.leaderless.append(self._run)
        else:
            self._run[1] = at

    def longest_leaderless(self):
        return max((r[1] - r[0] for r in self.leaderless), default=0.0)


def stamp(line):
    m = STAMP.match(line)
    return datetime.datetime.strptime(m.group(1).replace("T", " "), "%Y-%m-%d %H:%M:%S.%f").timestamp() if m else None


def restart_spans(c, since, change="CA rotation"):
    """(start, end, node, phase) of each etcd restart the rolling change asked: from the decision to the
    node's report of that phase, which it makes once its etcd answers as a voter with a leader, caught up
    (the gate's own check, rule R3; /readyz's round may come a second later)."""
    out = []
    for n in c.nodes:
        start = phase = None
        for line in log_since(n, since.get(n.name, 0)).splitlines():
            m = re.search(change + r": restarting etcd for phase (\w+)", line)
            if m and stamp(line):
                start, phase = stamp(line), m.group(1)
            if start and f"{change}: report {phase} (rule R3)" in line and stamp(line):
                out.append((start, stamp(line), n.name, phase))
                start = None
    return sorted(out)


def restart_killed(node, extra):
    """Starts `quorate run` again on a node whose quorate was SIGKILLed, until its etcd starts."""
    at = log_size(node)
    node.run(extra=extra)
    wait_until(lambda: node.quorate.poll() is not None or "etcd started" in log_since(node, at), 60,
               f"{node.name}'s etcd started again, or its quorate exited")
    if node.quorate.poll() is not None:
        # The etcd the killed quorate was stopping may still hold its WAL's lock while it shuts down
        # (1-3 s on 3.5): StopStrayEtcd then sees the lock and no holder (src/node/stray_etcd.cc reads
        # the lock, then /proc, and the holder exits in between) and quorate exits 1 saying so. Only
        # that is let through, and quorate is started once more, as its service manager would.
        said = log_since(node, at)
        check("is locked by an etcd quorate cannot see" in said, f"{node.name}'s quorate exited at start:\n{said[-2000:]}")
        log(f"{node.name}'s quorate met the killed one's etcd still shutting down; started once more")
        node.run(extra=extra)


def watched(c):
    """Where each node's log ends now, and a Writer and a QuorumWatch started on `c`."""
    offsets = {n.name: log_size(n) for n in c.nodes}
    w, q = Writer(c), QuorumWatch(c)
    w.start()
    q.start()
    return offsets, w, q


def check_rolling(c, spans, phases, w, q, unbounded=()):
    """A rolling change's restarts (restart_spans) were one per member for each of `phases`, never two at
    once; the writer `w` failed for no longer than the longest restart (but those of `unbounded`, (node,
    phase) pairs) and a second; quorum watch `q` always saw a majority."""
    log(f"restarts: {[(s[2], s[3], round(s[1] - s[0], 2)) for s in spans]}")
    check(len(spans) == len(phases) * len(c.nodes), f"want {len(phases)} restarts per member, got {spans}")
    for a, b in zip(spans, spans[1:]):
        check(a[1] <= b[0], f"two members restarted at once: {a} and {b}")
    for n in c.nodes:
        done = [s[3] for s in spans if s[2] == n.name]
        check(done == phases, f"{n.name} restarted for {done}")
    longest_restart = max(s[1] - s[0] for s in spans if (s[2], s[3]) not in unbounded)
    stall = w.longest_failing()
    log(f"writer: {len(w.puts)} puts, {sum(1 for p in w.puts if not p[2])} failed, longest failing {stall:.2f}s; "
        f"longest restart {longest_restart:.2f}s; quorum samples {q.samples}, short {q.short}, "
        f"leaderless runs {len(q.leaderless)}, longest {q.longest_leaderless():.2f}s")
    check(stall <= longest_restart + 1.0, f"writes failed for {stall:.2f}s, longer than a restart ({longest_restart:.2f}s)")
    check(q.samples > 10 and not q.short, f"a majority did not answer: {q.short}")
    check(q.longest_leaderless() <= q.ELECTION,
          f"a majority knew no leader for longer than an election: {q.leaderless}")
    check(sum(1 for p in w.puts if p[2]) > 20, "the writer got few puts through")


def tls_status(c):
    return run([QUORATE, "tls", "status", "--endpoints", c.endpoints()], check_rc=0).stdout


def rotate(c, pkidir, node):
    ca_file = pki.node_files(pkidir, node)[0]
    return run([QUORATE, "tls", "rotate-ca", "--endpoints", c.endpoints(), "--peer-trusted-ca-file", ca_file],
               check_rc=0).stdout


def wait_done(c, timeout):
    wait_until(lambda: ": done" in tls_status(c), timeout, "the CA rotation done on every member")


def check_peers_on(c, pkidir, ca, old_leaves):
    """Every peer listener serves a leaf of `ca` and takes this node's leaf of it; a leaf of the old CA is
    refused."""
    for n in c.nodes:
        _, crt, key = pki.node_files(pkidir, n)
        nxt = [os.path.join(os.path.dirname(p), "next", os.path.basename(p)) for p in (crt, key)]
        crt, key = nxt if os.path.exists(nxt[0]) else (crt, key)
        check(pki.handshake(n, ca[0], crt, key), f"{n.name}'s peer listener does not serve the new CA's leaf")
        old_crt, old_key = old_leaves[n.name]
        check(not pki.handshake(n, ca[0], old_crt, old_key), f"{n.name} still takes a leaf of the old CA")


def keep_leaves(c, pkidir, where):
    kept = {}
    for n in c.nodes:
        _, crt, key = pki.node_files(pkidir, n)
        dst = os.path.join(where, n.name)
        os.makedirs(dst, exist_ok=True)
        kept[n.name] = (shutil.copy(crt, dst), shutil.copy(key, dst))
    return kept


def test():
    c = tls_cluster(3)
    pkidir, ca1 = pki.run_cluster(c, "ca1")
    check(all(pki.handshake(n, ca1[0], *pki.node_files(pkidir, n)[1:]) for n in c.nodes), "peer TLS is not on")

    # Bad input: exit 2, one line naming the flag or the file, nothing written.
    r = run([QUORATE, "tls", "rotate-ca", "--endpoints", c.endpoints()], check_rc=2)
    check(r.stderr.count("\n") == 1 and "--peer-trusted-ca-file" in r.stderr, f"no CA flag: {r.stderr}")
    ca_file = pki.node_files(pkidir, c.nodes[0])[0]
    r = run([QUORATE, "tls", "rotate-ca", "--endpoints", c.endpoints(), "--peer-trusted-ca-file", ca_file], check_rc=2)
    check(r.stderr.count("\n") == 1 and "next/ca.crt" in r.stderr, f"no next CA: {r.stderr}")
    check("none asked" in tls_status(c), "a refused rotate-ca wrote an intent")

    # 1. Every node up, under a writer and a quorum sampler.
    ca2 = pki.make_ca(os.path.join(c.dir, "cas"), "ca2")
    for n in c.nodes:
        pki.install(pkidir, n, ca2, next_dir=True)
    old_leaves = keep_leaves(c, pkidir, os.path.join(c.dir, "old-leaves"))
    offsets, w, q = watched(c)
    began = time.time()
    out = rotate(c, pkidir, c.nodes[0])
    log(f"rotate-ca:\n{out}")
    wait_done(c, 180)
    took = time.time() - began
    wait_healthy(c)
    w.finish()
    q.finish()
    log(f"rotation 1 took {took:.1f}s")
    check_rolling(c, restart_spans(c, offsets), ["bundle", "new"], w, q)
    check_peers_on(c, pkidir, ca2, old_leaves)

    # 2. The operator puts the new files in place; a second rotation with n3 off.
    for n in c.nodes:
        pki.promote(pkidir, n)
    old_leaves = keep_leaves(c, pkidir, os.path.join(c.dir, "old-leaves-2"))
    n1, n3 = c.nodes[0], c.nodes[2]
    n3.stop()
    ca3 = pki.make_ca(os.path.join(c.dir, "cas"), "ca3")
    for n in c.nodes:
        pki.install(pkidir, n, ca3, next_dir=True)
    offsets = {n.name: log_size(n) for n in c.nodes}
    rotate(c, pkidir, n1)
    wait_log(n1, "CA rotation: wait old (rule R8)", 30, since=offsets["n1"])
    check("n3 does not answer" in log_since(n1, offsets["n1"]), "n1 waits, but not for n3")
    check(not restart_spans(c, offsets) and "restarting etcd" not in log_since(n1, offsets["n1"]),
          "an etcd restarted while n3 was off")

    # 3. n3 back; n1's quorate killed right after it decided its first restart, then started again.
    at = log_size(n1)
    n3.run(extra=pki.peer_args(pkidir, n3))
    wait_log(n1, "CA rotation: restarting etcd for phase bundle", 60, since=at)
    os.kill(n1.quorate.pid, signal.SIGKILL)
    n1.quorate.wait()
    log("n1's quorate killed after its restart decision; starting it again")
    restart_killed(n1, pki.peer_args(pkidir, n1))
    wait_done(c, 180)
    wait_healthy(c)
    log(f"rotation 2:\n{tls_status(c)}")
    check_peers_on(c, pkidir, ca3, old_leaves)
    for n in c.nodes:
        check("BEGIN PRIVATE KEY" not in log_since(n), f"{n.name}'s log holds a private key")
    keys = run(["etcdctl", "--endpoints", c.endpoints(), "get", "/quorate/", "--prefix"], check_rc=0).stdout
    check("PRIVATE KEY" not in keys and "CERTIFICATE" not in keys, "etcd holds TLS material")


if __name__ == "__main__":
    main(test)
