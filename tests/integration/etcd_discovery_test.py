"""Issue 4, `etcd` provider: nodes rendezvous in a separate, real etcd (the registry) with etcd
3.6's v3 discovery key layout: 3 nodes at once form one cluster with the predicted IDs, and 6
processes racing for 5 seats always agree on one set, the 6th told it is extra. A claim planted in
the registry with a name that is not UTF-8, or that holds a newline, is refused: `discover` retries
it within --timeout, then exits 1 with one escaped line naming the key (issue 15 §3, §12).

Issue 28 §10 and §12, sharing a registry with etcd 3.6's v3 discovery (no 3.6 binary here: the claims
are written as its discovery.go writes them, with etcdctl): token= that is not --initial-cluster-token
is refused at once, exit 2, and nothing is written; a claim of a member named with a space is taken;
a registry whose first `size` claims are others' gets no key from a 4th node, which exits 1 as extra;
two claims of one name are a runtime answer (exit 1 at --timeout), not bad input; user= with
password_file= or ETCD_DISCOVERY_PASSWORD reaches a registry with auth enabled, and a wrong password
is exit 2 naming the user, never the password; and two `quorate run` nodes bootstrap one cluster
with a member that follows 3.6's steps by hand under the name "node a"."""
import base64
import hashlib
import json
import os
import time

from harness import NET, QUORATE, Cluster, check, log, main, require, run, spawn, wait_until


def start_registry(c):
    ip = f"{NET}.20"
    d = os.path.join(c.dir, "registry")
    spawn(["etcd", "--name", "registry", "--data-dir", d, "--listen-peer-urls", f"http://{ip}:2380",
           "--initial-advertise-peer-urls", f"http://{ip}:2380", "--listen-client-urls", f"http://{ip}:2379",
           "--advertise-client-urls", f"http://{ip}:2379", "--initial-cluster", f"registry=http://{ip}:2380"],
          os.path.join(c.dir, "registry.log"))
    url = f"http://{ip}:2379"
    wait_until(lambda: c.etcdctl("endpoint", "health", endpoints=url, check_rc=None).returncode == 0, 30,
               "the registry etcd to be healthy")
    return url


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    registry = start_registry(c)
    c.discovery = ["--discovery", f"provider=etcd endpoints={registry}", "--cluster-size", "3"]
    c.bootstrap(c.discover_as_first, "etcd provider")
    keys = c.etcdctl("get", f"/_etcd/registry/{c.token}/", "--prefix", "--keys-only", endpoints=registry).stdout.split()
    check(f"/_etcd/registry/{c.token}/_config/size" in keys and
          sum(k.startswith(f"/_etcd/registry/{c.token}/members/") for k in keys) == 3,
          f"registry layout: {keys}")

    racers = Cluster(6)
    discovery = ["--discovery", f"provider=etcd endpoints={registry}"]
    for r, sets, failed in racers.race(5, lambda r: discovery, 5):
        check(len(sets) == 1 and len(sets[0]) == 5, f"round {r}: sets {sets}")
        check(len(failed) == 1 and "extra" in failed[0], f"round {r}: extra {failed}")
    log("5 rounds of 6 racing for 5 in the registry: one set each, the extra node told so")

    n1 = c.nodes[0]
    # "\udcff" leaves Python as the byte 0xff (os.fsencode), a name that is not UTF-8.
    for planted, name in ((f"{c.token}-badutf8", "\udcff"), (f"{c.token}-newline", "a\nb")):
        c.etcdctl("put", f"/_etcd/registry/{planted}/_config/size", "2", endpoints=registry)
        key = f"/_etcd/registry/{planted}/members/0000000000000001"
        c.etcdctl("put", key, f"{name}=http://{NET}.99:2380", endpoints=registry)
        started = time.monotonic()
        r = run([QUORATE, "discover", "-w", "json", "--name", n1.name, "--initial-advertise-peer-urls", n1.peer_url,
                 "--initial-cluster-token", planted, "--timeout", "3s", "--cluster-size", "2",
                 "--discovery", f"provider=etcd endpoints={registry}"], prefix=c.prefix, timeout=60)
        took = time.monotonic() - started
        lines = [ln for ln in r.stderr.strip().split("\n") if " info " not in ln]  # the progress log aside
        log(f"planted claim {name!r}: exit {r.returncode} after {took:.1f}s: {r.stderr.strip()}")
        check(r.returncode == 1, f"a planted claim is a runtime failure, exit 1, not {r.returncode}")
        check(len(lines) == 1 and key in lines[0], f"one error line naming {key}: {lines}")
        check("\udcff" not in r.stderr and "\x1b" not in r.stderr, f"raw bytes reached the message: {r.stderr!r}")
        check(2.5 < took < 20, f"--timeout 3s took {took:.1f}s: not retried within it, or not bounded by it")
        check(r.stdout == "", f"nothing printed on stdout: {r.stdout!r}")

    shared_with_etcd36(c, registry)
    mixed_bootstrap(registry)
    auth_protected(c, registry)


def member_id(urls, token):
    """etcd's member ID of `urls` under `token`, as etcd 3.6 names a member's registry key."""
    digest = hashlib.sha1(("".join(sorted(urls)) + token).encode()).digest()
    return format(int.from_bytes(digest[:8], "big"), "x")


def discover(c, node, extra, env=None, timeout="3s"):
    started = time.monotonic()
    r = run([QUORATE, "discover", "-w", "json", "--name", node.name, "--initial-advertise-peer-urls", node.peer_url,
             "--timeout", timeout] + list(extra), prefix=c.prefix, timeout=60, env=env)
    return r, time.monotonic() - started


def plant(c, registry, token, size, claims_by_name):
    """A registry of `size` with the claims [(name, peer URL)], written as etcd 3.6 writes them."""
    c.etcdctl("put", f"/_etcd/registry/{token}/_config/size", str(size), endpoints=registry)
    for name, url in claims_by_name:
        c.etcdctl("put", f"/_etcd/registry/{token}/members/{member_id([url], token)}", f"{name}={url}",
                  endpoints=registry)


def claims(c, registry, token):
    out = c.etcdctl("get", f"/_etcd/registry/{token}/members/", "--prefix", "--keys-only", endpoints=registry).stdout
    return out.split()


def shared_with_etcd36(c, registry):
    n1 = c.nodes[0]
    spec = ["--discovery", f"provider=etcd endpoints={registry}"]

    # token= without the same --initial-cluster-token: the IDs would not be the cluster's.
    r, took = discover(c, n1, spec[:1] + [spec[1] + " token=tokB"] + ["--cluster-size", "1"])
    log(f"token= alone: exit {r.returncode} after {took:.1f}s: {r.stderr.strip()}")
    check(r.returncode == 2, f"token= that differs from --initial-cluster-token is bad input: {r.returncode}")
    check("--initial-cluster-token tokB" in r.stderr, f"the fix is named: {r.stderr}")
    check(claims(c, registry, "tokB") == [], "nothing was written under tokB")

    # A member etcd 3.6 registered with a name etcd accepts and quorate refused: "node a".
    token = f"{c.token}-space"
    url = f"http://{NET}.51:2380"
    plant(c, registry, token, 2, [("node a", url)])
    r, took = discover(c, n1, spec + ["--initial-cluster-token", token])
    log(f"a claim of 'node a': exit {r.returncode}: {r.stdout.strip()[:300]} {r.stderr.strip()[-300:]}")
    check(r.returncode == 0, f"a member name with a space is taken: {r.stderr}")
    members = {m["name"]: m["id"] for m in json.loads(r.stdout)["members"]}
    check(members == {"node a": member_id([url], token), n1.name: member_id([n1.peer_url], token)},
          f"members and IDs as etcd 3.6 computes them: {members}")

    # A full registry: three claims of size 3; a fourth node writes nothing and is told it is extra.
    token = f"{c.token}-full"
    plant(c, registry, token, 3, [(f"m{i}", f"http://{NET}.{i}:2380") for i in (61, 62, 63)])
    r, took = discover(c, n1, spec + ["--initial-cluster-token", token])
    log(f"a full registry: exit {r.returncode} after {took:.1f}s: {r.stderr.strip()[-300:]}")
    check(r.returncode == 1 and "extra" in r.stderr, f"the 4th node is extra: {r.returncode} {r.stderr}")
    check(len(claims(c, registry, token)) == 3, f"the 4th node wrote a key: {claims(c, registry, token)}")

    # Two claims of one name (at two addresses): what the registry answered, retried, then exit 1.
    token = f"{c.token}-twice"
    plant(c, registry, token, 3, [("twin", f"http://{NET}.{i}:2380") for i in (71, 72)])
    r, took = discover(c, n1, spec + ["--initial-cluster-token", token, "--cluster-size", "3"])
    log(f"two claims of one name: exit {r.returncode} after {took:.1f}s: {r.stderr.strip()[-300:]}")
    check(r.returncode == 1 and "appears twice" in r.stderr, f"a runtime answer, exit 1: {r.returncode} {r.stderr}")
    check(2.5 < took < 20, f"--timeout 3s took {took:.1f}s: not retried within it")


def mixed_bootstrap(registry):
    """Two `quorate run` nodes and one member that does what etcd 3.6 does with --discovery-endpoints
    (discovery.go's joinCluster, by hand with etcd 3.4: its claim put, the first 3 claims by create
    revision as --initial-cluster, the discovery token as the cluster token), named "node a"."""
    m = Cluster(3)
    token = m.token
    m.discovery = ["--discovery", f"provider=etcd endpoints={registry}", "--cluster-size", "3"]
    n1, n2, plain = m.nodes
    plant(m, registry, token, 3, [("node a", plain.peer_url)])
    for n in (n1, n2):
        n.run()
    prefix = f"/_etcd/registry/{token}/members/"
    wait_until(lambda: len(claims(m, registry, token)) == 3, 60, "three claims in the registry")
    kvs = json.loads(m.etcdctl("get", prefix, "--prefix", "-w", "json", endpoints=registry).stdout)["kvs"]
    initial = ",".join(base64.b64decode(kv["value"]).decode()
                       for kv in sorted(kvs, key=lambda kv: int(kv["create_revision"])))
    spawn(["etcd", "--name", "node a", "--data-dir", plain.data_dir, "--listen-peer-urls", plain.peer_url,
           "--initial-advertise-peer-urls", plain.peer_url, "--listen-client-urls", plain.client_url,
           "--advertise-client-urls", plain.client_url, "--initial-cluster", initial,
           "--initial-cluster-token", token, "--initial-cluster-state", "new"], plain.log_path)
    try:
        wait_until(lambda: m.all_started(), 60, "one cluster of the two quorate nodes and 'node a'")
    except AssertionError:
        m.dump_logs()
        raise
    ids = m.cluster_ids()
    names = sorted(member["name"] for member in m.member_list()["members"])
    log(f"mixed bootstrap with 'node a': cluster IDs {ids}, members {names}")
    check(len(set(ids.values())) == 1 and names == ["n1", "n2", "node a"], f"one cluster: {ids} {names}")
    m.stop_all()


def auth_protected(c, registry):
    """Last: auth stays enabled on the registry from here on."""
    n1 = c.nodes[0]
    token = f"{c.token}-auth"
    for args in (("user", "add", "root:rootpw"), ("user", "add", "disco:s3cretpw"), ("role", "add", "disco"),
                 ("role", "grant-permission", "disco", "readwrite", "/_etcd/registry/", "--prefix=true"),
                 ("user", "grant-role", "disco", "disco"), ("auth", "enable")):
        c.etcdctl(*args, endpoints=registry)
    password_file = os.path.join(c.dir, "registry-password")
    with open(password_file, "w") as f:
        f.write("s3cretpw\n")
    spec = f"provider=etcd endpoints={registry} user=disco"
    r, _ = discover(c, n1, ["--discovery", f"{spec} password_file={password_file}", "--cluster-size", "1",
                                   "--initial-cluster-token", token])
    log(f"auth with password_file=: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    check(r.returncode == 0, f"an auth-protected registry is reached: {r.stderr}")
    keys = c.etcdctl("get", f"/_etcd/registry/{token}/", "--prefix", "--keys-only", "--user", "root:rootpw",
                     endpoints=registry).stdout.split()
    check(f"/_etcd/registry/{token}/members/{member_id([n1.peer_url], token)}" in keys, f"n1 registered: {keys}")

    env = dict(os.environ, ETCD_DISCOVERY_PASSWORD="s3cretpw")
    r, _ = discover(c, n1, ["--discovery", spec, "--cluster-size", "1", "--initial-cluster-token", token], env=env)
    check(r.returncode == 0, f"the password from ETCD_DISCOVERY_PASSWORD: {r.stderr}")

    env = dict(os.environ, ETCD_DISCOVERY_PASSWORD="wrongpw")
    r, took = discover(c, n1, ["--discovery", spec, "--cluster-size", "1", "--initial-cluster-token", token],
                       env=env)
    log(f"a wrong password: exit {r.returncode} after {took:.1f}s: {r.stderr.strip()[-300:]}")
    check(r.returncode == 2 and "disco" in r.stderr and "wrongpw" not in r.stderr,
          f"a wrong password is bad input naming the user, not the password: {r.returncode} {r.stderr}")

    r, _ = discover(c, n1, ["--discovery", f"{spec} password=s3cretpw", "--cluster-size", "1",
                                   "--initial-cluster-token", token])
    check(r.returncode == 2 and "password_file" in r.stderr and "s3cretpw" not in r.stderr,
          f"password= is refused without echoing it: {r.returncode} {r.stderr}")


if __name__ == "__main__":
    main(test)
