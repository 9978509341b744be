"""Issue 24, leaves renewed live (docs/DESIGN.md §13) against real etcd: 3 nodes under `quorate run` with
peer and client TLS (mutual on both), their leaves issued by quorate from a CA made here with openssl,
30 s of life each, under a writer that puts through every member (a new etcdctl, so a new handshake,
every put):
1. the leaves that are missing at the first start are issued before etcd starts (rule T2);
2. each node renews its peer and client leaves at two thirds of their life, at least twice over, and
   etcd serves the new ones from its next handshake: the certificate each listener presents is the
   file's, with no restart of etcd and no failed write;
3. /metrics has quorate_tls_not_after_seconds for every file, as the files say, and `quorate member
   list` each member's peer certificate expiry as its handshake says;
4. a node stopped until its leaves expired renews them before etcd starts (rule T2), rejoins, and has
   the keys written while it was off;
5. stopped until they expired again, `quorate init` (the init-container variant) renews them before
   it decides, and exits 0 with the node's etcd to be started on valid leaves.
First, a CA key that is not the CA's is bad input: exit 2, one line, nothing written."""
import json
import os
import socket
import ssl
import subprocess
import time

from harness import (QUORATE, Cluster, Node, Writer, check, keys_caught_up, log, log_size, main, parse_prometheus, require,
                     run, run_together, wait_healthy, wait_log, wait_until)

LIFETIME = 30


class TlsNode(Node):
    """A node whose etcd speaks https on both ports, with leaves quorate issues into its tls/ folder."""

    @property
    def peer_url(self):
        return f"https://{self.host}:2380"

    @property
    def client_url(self):
        return f"https://{self.ip}:2379"

    def file(self, name):
        return os.path.join(self.cluster.dir, f"{self.name}-tls", name)

    def args(self, extra=()):
        ca = os.path.join(self.cluster.dir, "ca.crt")
        return ["--name", self.name, "--data-dir", self.data_dir,
                "--initial-advertise-peer-urls", self.peer_url, "--advertise-client-urls", self.client_url,
                "--listen-peer-urls", self.peer_url, "--listen-client-urls", self.client_url,
                "--initial-cluster-token", self.cluster.token, "--agent-listen", f"{self.ip}:2382",
                "--timeout", self.cluster.timeout,
                "--peer-cert-file", self.file("peer.crt"), "--peer-key-file", self.file("peer.key"),
                "--peer-trusted-ca-file", ca, "--peer-client-cert-auth",
                "--cert-file", self.file("server.crt"), "--key-file", self.file("server.key"),
                "--trusted-ca-file", ca, "--client-cert-auth",
                "--tls-ca-cert-file", ca, "--tls-ca-key-file", os.path.join(self.cluster.dir, "ca.key"),
                "--tls-leaf-lifetime", f"{LIFETIME}s",
                # Every node dials from 127.0.0.1 here (the loopback's source address), and etcd checks a
                # peer's or client's IP SANs against the address it connects from.
                "--tls-extra-names", "127.0.0.1"] + list(self.cluster.discovery) + list(extra)


def openssl(cwd, *args):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True)
    check(r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}")


def make_ca(d):
    """The CA quorate issues from, and a client certificate of the test's own (for etcdctl)."""
    openssl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.crt", "-days", "2", "-subj", "/CN=quorate-test-ca")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    openssl(d, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "client.key",
            "-out", "client.csr", "-subj", "/CN=test-client")
    openssl(d, "x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "client.crt", "-days", "1", "-extfile", "client.ext")


def der_of(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def not_after(path):
    """The file's not-after in seconds since the epoch."""
    r = run(["openssl", "x509", "-noout", "-enddate", "-in", path], check_rc=0)
    return ssl.cert_time_to_seconds(r.stdout.strip().split("=", 1)[1])


def presented(c, ip, port):
    """The DER certificate etcd presents on ip:port now (a new handshake, with the test's client cert)."""
    ctx = ssl.create_default_context(cafile=os.path.join(c.dir, "ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(os.path.join(c.dir, "client.crt"), os.path.join(c.dir, "client.key"))
    with socket.create_connection((ip, port), timeout=2) as s, ctx.wrap_socket(s) as t:
        return t.getpeercert(binary_form=True)


def metrics(n):
    return parse_prometheus(n.http("/metrics")[1])


def renewals(n, kind):
    return metrics(n).get(("quorate_tls_renewals_total", frozenset({("kind", kind)})), 0)


def test():
    require("etcd")
    require("etcdctl")
    require("openssl")
    c = Cluster(3)
    c.nodes = [TlsNode(c, i) for i in range(1, 4)]
    c.discovery = ["--initial-cluster", c.initial_cluster()]
    make_ca(c.dir)
    # The test's etcdctl (the writer, member list) presents its own certificate; quorate must not take
    # these, so that its upkeep dials etcd with the client leaf it renews.
    node_env = dict(os.environ)
    os.environ.update({"ETCDCTL_CACERT": os.path.join(c.dir, "ca.crt"),
                       "ETCDCTL_CERT": os.path.join(c.dir, "client.crt"),
                       "ETCDCTL_KEY": os.path.join(c.dir, "client.key")})
    for n in c.nodes:
        os.makedirs(n.file(""), mode=0o700)
        n.env = node_env

    log("0. a CA key that is not the CA's: exit 2 with one line, nothing written")
    n1 = c.nodes[0]
    openssl(c.dir, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.key")
    argv = n1.args()
    argv[argv.index("--tls-ca-key-file") + 1] = os.path.join(c.dir, "other.key")
    r = run([QUORATE, "run", "--etcd", "etcd"] + argv, env=node_env, timeout=30)
    check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "is not the key of the CA" in r.stderr,
          f"a mismatched CA key: exit {r.returncode}, {r.stderr!r}")
    check(os.listdir(n1.file("")) == [] and not os.path.exists(n1.data_dir), "bad input wrote something")

    log("1. three nodes with no leaves yet: quorate issues them before etcd starts")
    run_together(c.nodes)
    wait_healthy(c, timeout=90)
    for n in c.nodes:
        for leaf in ("peer", "server"):
            check(os.stat(n.file(f"{leaf}.key")).st_mode & 0o777 == 0o600, f"{n.name}'s {leaf}.key is not 0600")
        check("rule T2: " + n.file("peer.crt") + " does not exist" in open(n.log_path).read(),
              f"{n.name} did not say it issued its missing peer leaf")
    pids = {n.name: n.etcd_pid() for n in c.nodes}
    first = {n.name: der_of(n.file("peer.crt")) for n in c.nodes}

    log(f"2. a writer through every member while the {LIFETIME} s leaves are renewed twice over")
    w = Writer(c, c.endpoints())
    w.start()
    began = time.time()
    wait_until(lambda: all(renewals(n, "peer") >= 3 and renewals(n, "client") >= 3 for n in c.nodes),
               3 * LIFETIME, "every node's peer and client leaves renewed twice after the first issue")
    took = time.time() - began
    # Every listener serves its file's certificate: etcd took the swap at its next handshake.
    for n in c.nodes:
        for port, leaf in ((2380, "peer"), (2379, "server")):
            wait_until(lambda: presented(c, n.ip, port) == der_of(n.file(f"{leaf}.crt")), 10,
                       f"{n.name}:{port} to present its {leaf}.crt")
        check(der_of(n.file("peer.crt")) != first[n.name], f"{n.name}'s peer leaf was never renewed")
    time.sleep(1)  # a few more puts over the newest leaves
    w.finish()
    log(f"   {len(w.ok)} puts in {took:.0f}s of renewals, {len(w.failures)} failed")
    check(not w.failures, f"writes failed while leaves were renewed: {w.failures[:5]}")
    check(len(w.ok) > 20, f"only {len(w.ok)} puts went through")
    check({n.name: n.etcd_pid() for n in c.nodes} == pids, "etcd was restarted to take a new leaf")
    log("3. /metrics: the expiry of every certificate file, as the file says; member list: as the handshake says")
    for n in c.nodes:
        m = metrics(n)
        check(m.get(("quorate_etcd_restarts_total", frozenset()), 0) == 0, f"{n.name} restarted etcd")
        check(m.get(("quorate_tls_renewal_failures_total", frozenset({("kind", "peer")}))) == 0,
              f"{n.name} failed a renewal")

        for kind, name in (("peer", "peer.crt"), ("client", "server.crt")):
            got = m.get(("quorate_tls_not_after_seconds", frozenset({("file", n.file(name)), ("kind", kind)})))
            # A renewal may fall between the scrape and the read: one life apart at most.
            check(got is not None and abs(got - not_after(n.file(name))) <= LIFETIME,
                  f"{n.name}: quorate_tls_not_after_seconds for {name} is {got}")
        check(m.get(("quorate_tls_not_after_seconds",
                     frozenset({("file", os.path.join(c.dir, "ca.crt")), ("kind", "peer-ca")}))) is not None,
              f"{n.name}: no quorate_tls_not_after_seconds for the CA file")
        status, body = n.http("/readyz")
        check(status == 200 and "warning: peer certificate" in body,
              f"{n.name}: /readyz does not warn of leaves expiring within 7 days: {status} {body!r}")

    listed = json.loads(run([QUORATE, "member", "list", "-w", "json", "--endpoints", c.endpoints()], check_rc=0).stdout)
    for m in listed["members"]:
        n = next(n for n in c.nodes if n.name == m["name"])
        got = ssl.cert_time_to_seconds(time.strftime("%b %d %H:%M:%S %Y GMT",
                                                     time.strptime(m["peerCertNotAfter"], "%Y-%m-%dT%H:%M:%SZ")))
        check(abs(got - not_after(n.file("peer.crt"))) <= LIFETIME,
              f"member list: {n.name}'s peer certificate expires {m['peerCertNotAfter']}, its file says otherwise")

    log("4. n3 stopped until its leaves expired: renewed before etcd starts, and it rejoins")
    n3 = c.nodes[2]
    n3.stop()
    expired_at = max(not_after(n3.file("peer.crt")), not_after(n3.file("server.crt")))
    c.etcdctl("put", "/while-off", "yes", endpoints=c.endpoints(c.nodes[:2]))
    wait_until(lambda: time.time() > expired_at + 1, LIFETIME + 5, "n3's leaves to expire")
    since = log_size(n3)
    n3.run()
    wait_log(n3, "rule T2: it expired at", 30, since=since)
    wait_healthy(c, timeout=60)
    got = keys_caught_up(c, n3, "/while-off", lambda k: k.get("/while-off") == "yes")
    check(got.get("/while-off") == "yes", f"n3 does not have the key written while it was off: {got}")
    check(not_after(n3.file("peer.crt")) > time.time(), "n3's peer leaf is still expired")

    log("5. the init-container variant: `quorate init` renews expired leaves before etcd starts on them")
    n3.stop()
    expired_at = max(not_after(n3.file("peer.crt")), not_after(n3.file("server.crt")))
    wait_until(lambda: time.time() > expired_at + 1, LIFETIME + 5, "n3's leaves to expire")
    r = run([QUORATE, "init"] + n3.args(), env=node_env, timeout=90)
    check(r.returncode == 0, f"quorate init exited {r.returncode}: {r.stderr[-2000:]}")
    check("rule T2: it expired at" in r.stderr, f"quorate init did not say it renewed an expired leaf:\n{r.stderr[-2000:]}")
    for leaf in ("peer.crt", "server.crt"):
        check(not_after(n3.file(leaf)) > time.time(), f"quorate init left n3's {leaf} expired")


if __name__ == "__main__":
    main(test)
