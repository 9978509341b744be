"""Issue 2: every bad input exits 2 with one line on stderr naming what is wrong, and writes nothing."""
import os

from harness import QUORATE, Cluster, Dns, Netns, check, log, main, run


def tree(path):
    out = []
    for root, dirs, files in os.walk(path):
        out += [os.path.join(root, f) for f in dirs + files]
    return sorted(out)


def expect_bad(c, argv, mention, prefix=(), env=None):
    before = tree(c.dir)
    r = run([QUORATE] + argv, prefix=prefix, env=env)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    what = " ".join(argv)
    check(r.returncode == 2, f"`quorate {what}` exited {r.returncode}, wanted 2; stderr: {r.stderr}")
    check(len(lines) == 1, f"`quorate {what}` printed {len(lines)} lines on stderr, wanted one: {r.stderr}")
    check(mention in lines[0], f"`quorate {what}`: '{lines[0]}' does not mention '{mention}'")
    check(tree(c.dir) == before, f"`quorate {what}` wrote {set(tree(c.dir)) - set(before)}")
    log(f"exit 2: {lines[0]}")


def test():
    c = Cluster(3)
    n = c.nodes[0]
    yaml_bad = os.path.join(c.dir, "bad.yaml")
    with open(yaml_bad, "w") as f:
        f.write("name: [unclosed\n")
    yaml_unknown = os.path.join(c.dir, "unknown.yaml")
    with open(yaml_unknown, "w") as f:
        f.write("name: n1\nclustr-size: 3\n")
    base = ["init", "--name", "n1", "--data-dir", n.data_dir, "--agent-listen", f"{n.ip}:0"]
    ic = c.initial_cluster()
    cases = [
        (base + ["--initial-cluster", ic, "--cluster-size", "three"], "--cluster-size"),
        (base + ["--initial-cluster", ic, "--timeout", "soon"], "--timeout"),
        (base + ["--initial-cluster", ic, "--initial-advertise-peer-urls", "127.0.0.1:2380"],
         "--initial-advertise-peer-urls"),
        (base + ["--initial-cluster", "n1=http://127.0.0.1:2380,n2=http://127.0.0.1:2380"], "--initial-cluster"),
        (base + ["--initial-cluster", "n1=http://127.0.0.1:2380,n2"], "--initial-cluster"),
        (base + ["--initial-cluster", "n1=http://127.0.0.1:2380/path"], "--initial-cluster"),
        (base + ["--discovery", "provider=consul"], "unknown provider 'consul'"),
        (base + ["--discovery", "provider=dns-srv domain=quorate.test colour=blue"], "colour"),
        (base + ["--discovery", 'provider=file path="unclosed'], "--discovery"),
        (base + ["--initial-cluster", ic, "--discovery-srv", "quorate.test"], "only one"),
        (base, "no discovery"),
        (base + ["--config", yaml_bad], "--config"),
        (base + ["--config", yaml_unknown], "clustr-size"),
        (base + ["--initial-cluster", ic, "-w", "xml"], "--write-out"),
        (base + ["--initial-cluster", ic, "--no-such-flag"], "--no-such-flag"),
        (["init", "--name", "n9", "--data-dir", n.data_dir, "--initial-cluster", ic], "n9"),
        (["discover", "--initial-cluster", ic, "--name", "a,b"], "--name"),
        (["discovr"], "did you mean 'discover'"),
        (["member", "list", "--endpoints", "http://127.0.0.1"], "--endpoints"),
    ]
    for argv, mention in cases:
        expect_bad(c, argv, mention)
    expect_bad(c, base + ["--initial-cluster", ic], "ETCD_CLUSTER_SIZE" if False else "QUORATE_CLUSTER_SIZE",
               env=dict(os.environ, QUORATE_CLUSTER_SIZE="-3"))

    # Discovery answers that are wrong, from a real DNS server.
    netns = Netns()
    dns = Dns(netns, c.dir)
    dns.records([
        "srv-host=_etcd-server._tcp.quorate.test,n1.quorate.test,2380",
        "srv-host=_etcd-server._tcp.quorate.test,n2.quorate.test,2380",  # no A record: does not resolve
        "host-record=n1.quorate.test,127.0.0.1",
        "srv-host=_etcd-server._tcp.dup.quorate.test,n1.a.quorate.test,2380",
        "srv-host=_etcd-server._tcp.dup.quorate.test,n1.b.quorate.test,2380",  # one name, two hosts
        "host-record=n1.a.quorate.test,127.0.0.1",
        "host-record=n1.b.quorate.test,127.0.0.2",
    ])
    dns_base = ["discover", "--cluster-size", "2", "--timeout", "5s"]
    expect_bad(c, dns_base + ["--discovery-srv", "quorate.test"], "n2.quorate.test", prefix=netns.prefix)
    expect_bad(c, dns_base + ["--discovery-srv", "dup.quorate.test"], "n1", prefix=netns.prefix)
    expect_bad(c, ["discover", "--discovery-srv", "empty.quorate.test"], "_etcd-server", prefix=netns.prefix)
    expect_bad(c, base + ["--discovery-srv", "quorate.test", "--cluster-size", "2"], "n2.quorate.test",
               prefix=netns.prefix)
    dns.stop()


if __name__ == "__main__":
    main(test)
