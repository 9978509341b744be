"""Restore of a backup on 3 empty nodes (issue 27), quorate against the same restore done by hand,
alternating within one run, for each etcd version given. bench/bench.py runs it as the part
`restore` (bench/run --only restore, and one line of bench/run --check).

One etcd is filled to --restore-mb of database and saved twice: `quorate backup save` (default
compression, gzip) and `etcdctl snapshot save`. Then, per round and version, in an order that
alternates:
  (a) by hand, on each of 127.0.0.1-3 at once as on 3 machines: etcd's own `snapshot restore`
      (etcdutl, or etcdctl where there is none: 3.4) of the plain snapshot with the node's --name,
      --initial-cluster, --initial-advertise-peer-urls and a new --initial-cluster-token, then etcd
      started on it;
  (b) `quorate run --restore-from <backup>` on each of them at once, with a new token;
each timed from the start to the first put the new cluster accepts; and, with --restore-baseline
BIN, (c) the same as (b) with another build of quorate (an earlier commit's, for a before and after
taken in the same run). quorate's logs keep its steps' times (with --keep, in the work dir).
"""
import datetime
import os
import shlex
import subprocess
import time

import backup_bench

# etcd's binaries per version: the system's (Debian's 3.4) and scripts/deps' 3.5.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = {"3.4": "/usr/bin", "3.5": os.path.join(ROOT, "third_party", "etcd-3.5", "usr", "bin")}
NODES = (1, 2, 3)


def tool(version):
    """etcd's restore tool for `version`: etcdutl beside its etcd, else etcdctl (3.4 has no etcdutl)."""
    etcdutl = os.path.join(BIN[version], "etcdutl")
    return [etcdutl] if os.access(etcdutl, os.X_OK) else [os.path.join(BIN[version], "etcdctl")]


def save(b, megabytes, work):
    """A database of `megabytes` in one etcd, as a plain snapshot and as quorate's backup; the
    snapshot's path and the backup's URL. The etcd is gone afterwards (a restore refuses while an old
    member has a leader)."""
    import bench as bench_mod
    endpoint = backup_bench.ENDPOINT
    b.reset()
    b.spawn(1, ["etcd", "--data-dir", os.path.join(work, "source"), "--quota-backend-bytes", str(8 << 30),
                "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
                "--listen-peer-urls", "http://127.0.0.1:2380"], "restore-source")
    b.wait(lambda: bench_mod.etcd_healthy(1), b.args.timeout, "restore: source etcd healthy")
    backup_bench.fill(megabytes)
    snap = os.path.join(work, "snap.db")
    subprocess.run(["etcdctl", "--endpoints", endpoint, "snapshot", "save", snap], check=True, capture_output=True)
    store = os.path.join(work, "store")
    os.makedirs(store)
    out = subprocess.run([b.args.quorate, "backup", "save", "--endpoints", endpoint, "--backup-to", f"file://{store}",
                          "--log-level", "warn", "-w", "simple"], check=True, capture_output=True, text=True).stdout
    b.kill_all()
    return snap, out.split()[-1]


def mark(b, tag, what):
    """A line in each node's log with the wall-clock time (UTC, as etcd's and quorate's own lines), so
    that a kept log's steps line up against the start and the first accepted put of its way."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for i in NODES:
        with open(os.path.join(b.work, f"{tag}-node{i}.log"), "a") as f:
            f.write(f"bench: {now} {what}\n")


def by_hand(b, version, snap, token):
    import bench as bench_mod
    ic = b.static_cluster(len(NODES))
    mark(b, f"restore-hand-{version}", f"{token} started")
    t0 = time.monotonic()
    for i in NODES:
        restore = tool(version) + ["snapshot", "restore", snap, "--name", f"node{i}", "--data-dir", b.data_dir(i),
                                   "--initial-cluster", ic, "--initial-cluster-token", token,
                                   "--initial-advertise-peer-urls", f"http://{bench_mod.ip(i)}:2380"]
        etcd = [os.path.join(BIN[version], "etcd")] + b.etcd_args(i, token)[1:] + ["--initial-cluster", ic]
        # One shell per node, as one operator's terminal per machine: the restore, then etcd.
        b.spawn(i, ["sh", "-c", 'ETCDCTL_API=3 "$@" >/dev/null && exec ' + shlex.join(etcd), "sh"] + restore,
                f"restore-hand-{version}")
    t = b.wait(lambda: bench_mod.writable(list(NODES)), b.args.timeout, f"restore by hand ({version}): writable")
    mark(b, f"restore-hand-{version}", f"{token} writable")
    return t - t0


def by_quorate(b, version, url, token, quorate, tag):
    import bench as bench_mod
    ic = b.static_cluster(len(NODES))
    mark(b, f"restore-{tag}-{version}", f"{token} started")
    t0 = time.monotonic()
    for i in NODES:
        argv = b.quorate_args(i, token) + ["--initial-cluster", ic, "--restore-from", url,
                                           "--etcd", os.path.join(BIN[version], "etcd")]
        b.spawn(i, [quorate] + argv[1:], f"restore-{tag}-{version}")
    t = b.wait(lambda: bench_mod.writable(list(NODES)), b.args.timeout, f"restore by quorate ({version}): writable")
    mark(b, f"restore-{tag}-{version}", f"{token} writable")
    return t - t0


def run(b, megabytes, runs, versions):
    """{version: {"hand": [s...], "quorate": [s...], "ratio": [...], "load": [...]}} of `runs` rounds,
    with "baseline" and "baseline_ratio" too where --restore-baseline names a build."""
    import bench as bench_mod
    work = os.path.join(b.work, "restore")
    os.makedirs(work, exist_ok=True)
    snap, url = save(b, megabytes, work)
    baseline = getattr(b.args, "restore_baseline", None)
    out = {v: {"hand": [], "quorate": [], "ratio": [], "load": []} for v in versions}
    for r in range(runs):
        for v in versions:
            ways = [("hand", lambda t: by_hand(b, v, snap, t)),
                    ("quorate", lambda t: by_quorate(b, v, url, t, b.args.quorate, "quorate"))]
            if baseline:
                ways.append(("baseline", lambda t: by_quorate(b, v, url, t, baseline, "baseline")))
            # Rotated by round, so that no way always goes first (warmer caches, the load of the moment).
            ways = ways[r % len(ways):] + ways[:r % len(ways)]
            got = {}
            for name, way in ways:
                b.reset()
                # The way before wrote three restored members (3 x the database): flushed here, or the
                # kernel's writeback of them lands in this way's restore tool. The rotation alone does
                # not even it out: each way always follows the same one (seen: 1.8 s against 0.8 s
                # for the same etcdctl restore, at 256 MB).
                os.sync()
                out[v]["load"].append(bench_mod.loadavg())
                b.loads.append(out[v]["load"][-1])
                try:
                    got[name] = round(way(f"restore-{name}-{v}-{r}"), 3)
                except bench_mod.Timeout as e:
                    print(f"  {e} (logs in {b.work} with --keep)", flush=True)
                    got[name] = None
                finally:
                    b.kill_all()
            for name in got:
                out[v].setdefault(name, []).append(got[name])
            ratio = round(got["quorate"] / got["hand"], 2) if got["hand"] and got["quorate"] else None
            out[v]["ratio"].append(ratio)
            shown = ""
            if baseline:
                before = round(got["baseline"] / got["hand"], 2) if got["hand"] and got["baseline"] else None
                out[v].setdefault("baseline_ratio", []).append(before)
                shown = f", baseline {got['baseline']} s, ratio {before}"
            print(f"restore {megabytes} MB, etcd {v}, round {r + 1}/{runs}: by hand {got['hand']} s, quorate "
                  f"{got['quorate']} s, ratio {ratio}{shown} (load {out[v]['load'][-1]:.1f})", flush=True)
    return out
