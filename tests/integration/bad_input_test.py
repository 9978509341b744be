"""Issue 2: every bad input exits 2 with one line on stderr naming what is wrong, and writes nothing.
Issue 15 items 3 and 11: the same for hostile input (a config file that is a directory or a billion
laughs, a --timeout that overflows, a name or token with control characters, bytes that are not
UTF-8), and `version --etcd` runs the binary without a shell, within a deadline."""
import os
import stat
import time

from harness import QUORATE, Cluster, Dns, Netns, check, log, main, run


def tree(path):
    """Every entry under path with its kind, size and mtime: what any write would change. dnsmasq's
    own log is left out (dnsmasq appends to it)."""
    out = {}
    for root, dirs, files in os.walk(path):
        for f in dirs + files:
            full = os.path.join(root, f)
            if f == "dnsmasq.log":
                continue
            st = os.lstat(full)
            out[os.path.relpath(full, path)] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


def changes(before, after):
    return {"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
            "changed": sorted(k for k in set(before) & set(after) if before[k] != after[k])}


def expect_bad(c, argv, mention, prefix=(), env=None, within=None):
    """`mention` is a string, or a list of strings that must all be in the line; `within` bounds
    the seconds it may take."""
    before = tree(c.dir)
    started = time.monotonic()
    r = run([QUORATE] + argv, prefix=prefix, env=env)
    took = time.monotonic() - started
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    what = repr(" ".join(argv)[:300])
    check(r.returncode == 2, f"`quorate {what}` exited {r.returncode}, wanted 2; stderr: {r.stderr[:2000]}")
    check(len(lines) == 1, f"`quorate {what}` printed {len(lines)} lines on stderr, wanted one: {r.stderr[:2000]}")
    for m in [mention] if isinstance(mention, str) else mention:
        check(m in lines[0], f"`quorate {what}`: '{lines[0]}' does not mention '{m}'")
    check(within is None or took < within, f"`quorate {what}` took {took:.1f} s, wanted under {within} s")
    after = tree(c.dir)
    check(after == before, f"`quorate {what}` wrote something: {changes(before, after)}")
    log(f"exit 2: {lines[0]}")


def expect_runtime(c, argv, mention, prefix=()):
    """A wrong answer fetched at run time: exit 1, the last line (the error) names it, nothing written."""
    before = tree(c.dir)
    r = run([QUORATE] + argv, prefix=prefix)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    what = " ".join(argv)
    check(r.returncode == 1, f"`quorate {what}` exited {r.returncode}, wanted 1; stderr: {r.stderr}")
    check(lines and lines[-1].startswith("quorate: error: ") and mention in lines[-1],
          f"`quorate {what}`: the last line does not name '{mention}': {r.stderr}")
    after = tree(c.dir)
    check(after == before, f"`quorate {what}` wrote something: {changes(before, after)}")
    log(f"exit 1: {lines[-1]}")


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

    def config_file(name, text):
        path = os.path.join(c.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    config_dir = os.path.join(c.dir, "config.d")
    os.makedirs(config_dir)
    key_list = config_file("key-list.yaml", "name: n1\n[cluster-size]: 3\n")
    value_list = config_file("value-list.yaml", "data-dir: [a, b]\nname: [n1]\n")
    value_map = config_file("value-map.yaml", "name:\n  first: n1\n")
    # A billion laughs: nine levels of nine aliases each, padded to the 130 KiB of the attack file.
    laughs = ["a: &a [" + ", ".join(["lol"] * 9) + "]"]
    for level in "bcdefghi":
        prev = chr(ord(level) - 1)
        laughs.append(f"{level}: &{level} [" + ", ".join([f"*{prev}"] * 9) + "]")
    laughs_text = "\n".join(laughs) + "\n"
    laughs_text += "# padding\n" * ((130 * 1024 - len(laughs_text)) // 10)
    laughs_file = config_file("laughs.yaml", laughs_text)
    hostile = [
        (base + ["--initial-cluster", ic, "--config", config_dir], [config_dir, "not a regular file"], None),
        (base + ["--initial-cluster", ic, "--config", key_list], [key_list, "line 2"], None),
        (base + ["--initial-cluster", ic, "--config", value_list], [value_list, "data-dir (line 1)"], None),
        (base + ["--initial-cluster", ic, "--config", value_map], [value_map, "name"], None),
        (base + ["--initial-cluster", ic, "--config", laughs_file], [laughs_file, "anchor"], 10),
        (base + ["--initial-cluster", ic, "--timeout", "3000000h"], ["--timeout", "24h"], None),
        # The line break alone is what is refused, before the name is looked up among the members.
        (["init", "--name", "n1\nx", "--data-dir", n.data_dir, "--initial-cluster", f"n1={n.peer_url}",
          "--agent-listen", f"{n.ip}:0"], ["--name", "control character"], None),
        (base + ["--initial-cluster", ic, "--initial-cluster-token", "tok\x1b[31m"], "--initial-cluster-token", None),
        (base + ["--discovery", "provider=static members=n1=http://127.0.0.1:2380 provider=file"], "given twice", None),
        (["discover", "-w", "json", "--initial-cluster", os.fsdecode(b"\xff=http://127.0.0.1:1")], "not UTF-8", None),
    ]
    for argv, mention, within in hostile:
        expect_bad(c, argv, mention, within=within)
    cases = [
        (base + ["--initial-cluster", ic, "--cluster-size", "three"], "--cluster-size"),
        (base + ["--initial-cluster", ic, "--timeout", "soon"], "--timeout"),
        (base + ["--initial-cluster", ic, "--initial-advertise-peer-urls", "127.0.0.1:2380"],
         "--initial-advertise-peer-urls"),
        (base + ["--initial-cluster", "n1=http://127.0.0.1:2380,n2=http://127.0.0.1:2380"], "--initial-cluster"),
        # A name twice with two URLs is one member with two peer URLs (etcd's meaning); the same
        # entry twice is a duplicate.
        (base + ["--initial-cluster", ic + "," + ic.split(",")[0]], "--initial-cluster"),
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
        (["member", "remov", "n1"], "did you mean 'member remove'"),
        (["member", "list", "n1"], "n1"),
        (["member", "remove", "--endpoints", "http://127.0.0.1"], "--endpoints"),
        (["member", "remove", "--ignore-not-found=maybe", "n1"], "--ignore-not-found"),
        (["member", "list", "--endpoints", "http://127.0.0.1"], "--endpoints"),
        # A cloud store's URL is checked before the store is asked anything.
        (["backup", "list", "--backup-to", "gcs://bucket/p"], "--backup-to"),
        (["backup", "list", "--backup-to", "gs://Bad_Bucket/p"], "Bad_Bucket"),
        (["backup", "list", "--backup-to", "azblob://acct01/etcd/p?colour=blue"], "colour=blue"),
    ]
    for argv, mention in cases:
        expect_bad(c, argv, mention)
    # A malformed key is named, never shown.
    key_env = dict(os.environ, AZURE_STORAGE_KEY="not-base64-secret")
    expect_bad(c, ["backup", "list", "--backup-to", "azblob://acct01/etcd/p"], "AZURE_STORAGE_KEY", env=key_env)
    check("secret" not in run([QUORATE, "backup", "list", "--backup-to", "azblob://acct01/etcd/p"], env=key_env).stderr,
          "the key's text is in the message")

    # The same on a node an earlier init has set up (a one-member cluster of its own, decided at
    # once): its state dir (bucket, etcd config and env) must come out exactly as it went in.
    used = c.nodes[1]
    run([QUORATE, "init", "--name", used.name, "--data-dir", used.data_dir,
         "--initial-cluster", f"{used.name}={used.peer_url}", "--initial-advertise-peer-urls", used.peer_url,
         "--advertise-client-urls", used.client_url, "--agent-listen", f"{used.ip}:0", "--timeout", "10s"],
        check_rc=0)
    state = sorted(os.listdir(os.path.join(used.data_dir, "quorate")))
    check({"bucket.json", "etcd.conf.yml", "etcd.env"} <= set(state), f"the earlier init wrote {state}")
    for argv, mention in cases:
        if argv[:1] == ["init"] and n.data_dir in argv:
            expect_bad(c, [used.data_dir if a == n.data_dir else a for a in argv], mention)
    # upkeep runs beside that node's etcd: only for the member its bucket names.
    expect_bad(c, ["upkeep", "--name", "n9", "--data-dir", used.data_dir], "n9")
    expect_bad(c, ["upkeep", "--name", used.name, "--data-dir", used.data_dir, "--status-listen", "nowhere"],
               "--status-listen")
    # A corrupt bucket and a half-made member dir are moved aside only once the input is known good.
    with open(os.path.join(used.data_dir, "quorate", "bucket.json"), "w") as f:
        f.write('{"format": "quorate.bucket/v1", "clus')
    os.makedirs(os.path.join(used.data_dir, "member", "snap"), exist_ok=True)
    expect_bad(c, ["init", "--name", "n9", "--data-dir", used.data_dir, "--initial-cluster", ic], "n9")
    expect_bad(c, base + ["--initial-cluster", ic], "QUORATE_CLUSTER_SIZE",
               env=dict(os.environ, QUORATE_CLUSTER_SIZE="-3"))

    # version --etcd runs the binary itself, not a shell command line, and gives it a deadline.
    planted = os.path.join(c.dir, "planted")
    r = run([QUORATE, "version", "--etcd", f"etcd; touch {planted}"], check_rc=0)
    check("etcd version: not found" in r.stdout and not os.path.exists(planted),
          f"version --etcd ran a shell: {r.stdout} {os.path.exists(planted)}")
    silent = config_file("silent-etcd", "#!/bin/sh\nexec sleep 60\n")
    os.chmod(silent, 0o755)
    started = time.monotonic()
    r = run([QUORATE, "version", "--etcd", silent], check_rc=0, timeout=30)
    took = time.monotonic() - started
    check("etcd version: not found" in r.stdout and took < 15, f"version waited {took:.1f} s for a silent etcd: {r.stdout}")
    log(f"version --etcd: no shell, and a silent binary is given up on after {took:.1f} s")

    # `run` checks --etcd and binds --status-listen before it writes or moves anything.
    run_base = ["run", "--name", "n1", "--data-dir", n.data_dir, "--agent-listen", f"{n.ip}:0",
                "--initial-cluster", ic, "--timeout", "2s"]
    expect_bad(c, run_base + ["--etcd", os.path.join(c.dir, "no-such-etcd"), "--status-listen", f"{n.ip}:0"], "--etcd")
    import socket
    taken = socket.socket()
    taken.bind((n.ip, 0))
    taken.listen(1)
    before = tree(c.dir)
    r = run([QUORATE] + run_base + ["--status-listen", f"{n.ip}:{taken.getsockname()[1]}"])
    taken.close()
    check(r.returncode != 0 and "--status-listen" in r.stderr.splitlines()[-1],
          f"run with its status port taken: exit {r.returncode}: {r.stderr}")
    check(tree(c.dir) == before, f"run with its status port taken wrote something: {changes(before, tree(c.dir))}")
    log(f"exit {r.returncode}: {r.stderr.splitlines()[-1]}")

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
    # What DNS answers is fetched at run time (records are often published after the first node
    # starts): retried within --timeout, then exit 1 with one line naming what was wrong.
    dns_base = ["discover", "--cluster-size", "2", "--timeout", "2s"]
    expect_runtime(c, dns_base + ["--discovery-srv", "quorate.test"], "n2.quorate.test", prefix=netns.prefix)
    expect_runtime(c, dns_base + ["--discovery-srv", "dup.quorate.test"], "n1", prefix=netns.prefix)
    expect_runtime(c, ["discover", "--discovery-srv", "empty.quorate.test"], "_etcd-server", prefix=netns.prefix)
    expect_runtime(c, base + ["--discovery-srv", "quorate.test", "--cluster-size", "2", "--timeout", "2s"],
                   "n2.quorate.test", prefix=netns.prefix)
    dns.stop()


if __name__ == "__main__":
    main(test)
