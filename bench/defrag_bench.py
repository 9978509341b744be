"""How long defragmentation holds writes up (issue 25): three members under a writer, their databases
fragmented the same way each round (keys written, half deleted, compacted), then defragmented either
by quorate's maintenance (rule M5 of DESIGN §12: one member at a time, followers first, the leader
last, a health check and --maintenance-pause between) or by `etcdctl defrag --cluster` (every member
in a row, as Bitnami's CronJob does), alternating. The writer puts to each member's client URL in
turn through etcd's gRPC gateway; a stall is a put that took longer than 100 ms. Reported per way:
the longest put, the sum of the stalls, and the window from the compaction to the last member
defragmented.

Run it in a network namespace of its own (the members take 127.0.0.1-3:2379/2380):
    unshare -n sh -c 'ip link set lo up && python3 bench/defrag_bench.py --rounds 3 --megabytes 96'
"""
import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
NODES = [f"127.0.0.{i}" for i in (1, 2, 3)]
ENDPOINTS = ",".join(f"http://{ip}:2379" for ip in NODES)
STALL_S = 0.1


def etcdctl(*args, check=True):
    return subprocess.run(["etcdctl", "--endpoints", ENDPOINTS, "--command-timeout", "60s"] + list(args),
                          capture_output=True, text=True, check=check)


def gateway(ip, path, body, timeout=30):
    data = json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(f"http://{ip}:2379{path}", data=data), timeout=timeout) as r:
        return json.loads(r.read().decode())


def wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except (OSError, ValueError, subprocess.CalledProcessError):
            pass
        time.sleep(0.1)
    sys.exit(f"timed out: {what}")


def statuses():
    out = json.loads(etcdctl("endpoint", "status", "-w", "json").stdout)
    return [s["Status"] for s in out]


class Writer(threading.Thread):
    """Puts one small key after another, to each member in turn, timing each."""

    def __init__(self):
        super().__init__(daemon=True)
        self.latencies = []  # (start, seconds)
        self.failures = 0
        self.halt = threading.Event()

    def run(self):
        i = 0
        while not self.halt.is_set():
            ip = NODES[i % len(NODES)]
            key = base64.b64encode(f"/w/{i}".encode()).decode()
            start = time.monotonic()
            try:
                gateway(ip, "/v3/kv/put", {"key": key, "value": base64.b64encode(b"x").decode()})
                self.latencies.append((start, time.monotonic() - start))
            except OSError:
                self.failures += 1
            i += 1
            self.halt.wait(0.01)

    def window(self, begin, end):
        return [s for t, s in self.latencies if begin <= t <= end]


def fragment(megabytes):
    """`megabytes` of values written, half of the keys deleted, the history compacted: the pages of
    the deleted half are free, and bbolt marks them so at its next commit (the writer's)."""
    value = base64.b64encode(os.urandom(7500)).decode()
    for batch in range(megabytes):
        ops = "".join(f"put /bench/{batch:04d}/{k:03d} {value}\n" for k in range(100))
        subprocess.run(["etcdctl", "--endpoints", ENDPOINTS, "txn"], input=f"\n{ops}\n\n", text=True, check=True,
                       capture_output=True)
    for batch in range(0, megabytes, 2):
        etcdctl("del", f"/bench/{batch:04d}/", "--prefix")
    revision = json.loads(etcdctl("get", "/none", "-w", "json").stdout)["header"]["revision"]
    compacted = time.monotonic()
    etcdctl("compact", str(revision), "--physical")
    wait(lambda: all(s["dbSizeInUse"] * 100 < s["dbSize"] * 60 for s in statuses()), 60, "the free pages counted")
    return compacted


def start(way, work, quorate):
    initial = ",".join(f"n{i}=http://{ip}:2380" for i, ip in enumerate(NODES, 1))
    procs = []
    for i, ip in enumerate(NODES, 1):
        common = ["--name", f"n{i}", "--data-dir", os.path.join(work, f"n{i}"),
                  "--initial-advertise-peer-urls", f"http://{ip}:2380", "--listen-peer-urls", f"http://{ip}:2380",
                  "--advertise-client-urls", f"http://{ip}:2379", "--listen-client-urls", f"http://{ip}:2379",
                  "--initial-cluster", initial, "--initial-cluster-token", "defrag-bench"]
        if way == "quorate":
            # The thresholds low enough for the bench's database; quorate's defaults otherwise.
            argv = [quorate, "run"] + common + ["--agent-listen", f"{ip}:2382", "--status-listen", f"{ip}:2383",
                                                "--defrag-min-bytes", str(16 << 20), "--defrag-min-percent", "40",
                                                "--quota-backend-bytes", str(4 << 30)]
        else:
            argv = ["etcd"] + common + ["--quota-backend-bytes", str(4 << 30)]
        log = open(os.path.join(work, f"{way}-n{i}.log"), "wb")
        procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
    wait(lambda: len(statuses()) == 3 and all(s["leader"] for s in statuses()), 60, f"{way}: 3 members up")
    return procs


def defragmented():
    """quorate's defragmentations so far, from the three nodes' /metrics."""
    total = 0
    for ip in NODES:
        with urllib.request.urlopen(f"http://{ip}:2383/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                if line.startswith('quorate_maintenance_actions_total{action="defragment"}'):
                    total += int(float(line.split()[-1]))
    return total


def one_round(way, work, quorate, megabytes):
    procs = start(way, work, quorate)
    writer = Writer()
    try:
        writer.start()
        compacted = fragment(megabytes)
        if way == "quorate":
            # quorate's rounds run all along: its window opens at the compaction, when the free pages
            # first pass the thresholds.
            begin = compacted
            wait(lambda: defragmented() >= 3, 300, "quorate defragmented every member")
        else:
            begin = time.monotonic()
            etcdctl("defrag", "--cluster")
        end = time.monotonic()
        time.sleep(0.5)  # the puts under way when the last defragmentation ended finish
    finally:
        writer.halt.set()
        writer.join()
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
    puts = writer.window(begin, end)
    return {"way": way, "window_s": round(end - begin, 2), "longest_put_s": round(max(puts, default=0), 3),
            "stalled_s": round(sum(s for s in puts if s > STALL_S), 2), "puts": len(puts),
            "failed_puts": writer.failures}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=96, help="values written before half are deleted")
    parser.add_argument("--quorate", default=os.path.join(HERE, "..", "build", "quorate"))
    args = parser.parse_args()
    rows = []
    for r in range(args.rounds):
        for way in (("quorate", "etcdctl") if r % 2 == 0 else ("etcdctl", "quorate")):
            work = tempfile.mkdtemp(prefix="quorate-defrag-bench-")
            try:
                row = one_round(way, work, args.quorate, args.megabytes)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            row["load"] = round(os.getloadavg()[0], 1)
            print(json.dumps(row), flush=True)
            rows.append(row)
    for way in ("quorate", "etcdctl"):
        mine = [x for x in rows if x["way"] == way]
        print(f"{way}: longest put median {statistics.median(x['longest_put_s'] for x in mine):.3f} s, "
              f"stalled median {statistics.median(x['stalled_s'] for x in mine):.2f} s, window median "
              f"{statistics.median(x['window_s'] for x in mine):.1f} s over {len(mine)} rounds")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "defrag.json"), "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "megabytes": args.megabytes,
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
