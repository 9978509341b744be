"""Backup throughput and memory (issue 12): quorate backup save against `etcdctl snapshot save`
followed by `gzip` in the same run, on one etcd filled to each size, and quorate's peak RSS (GNU
time's) per size: the goal is a time ratio of at most 1.0 and an RSS flat in the database's size.
Then the way back: the time from starting `quorate run --restore-from <that backup>` on 3 empty
nodes (127.0.0.1-3, a new token) to the first write the restored cluster accepts.

Run it in a network namespace of its own (etcd takes 127.0.0.1-3:2379/2380):
    unshare -n sh -c 'ip link set lo up && python3 bench/backup_bench.py --sizes 64,256'
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENDPOINT = "http://127.0.0.1:2379"


def timed(argv, **kwargs):
    """(seconds, peak RSS in MB) of argv run to completion; exits on failure. The peak is GNU time's
    report of argv's own: the ru_maxrss os.wait4 gives for a child of this script counts this
    script's RSS at the fork as well (the kernel keeps a task's peak across exec), some 30 MB of
    Python that stood in for quorate's own peak whenever that was lower."""
    with tempfile.NamedTemporaryFile("r") as peak:
        start = time.monotonic()
        p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", peak.name] + argv, **kwargs)
        status = p.wait()
        seconds = time.monotonic() - start
        if status != 0:
            sys.exit(f"{' '.join(argv)} failed")
        return seconds, int(peak.read().split()[-1]) / 1024


def fill(megabytes):
    """Values of random base64 (they compress about as etcd's real data does: 3/4), 1 MB a txn."""
    for _ in range(megabytes):
        ops = "".join(f"put /bench/{base64.b16encode(os.urandom(8)).decode()} "
                      f"{base64.b64encode(os.urandom(7500)).decode()}\n" for _ in range(100))
        subprocess.run(["etcdctl", "--endpoints", ENDPOINT, "txn"], input=f"\n{ops}\n\n", text=True, check=True,
                       capture_output=True)


def restore_to_writable(quorate, backup_url, work):
    """Seconds from starting 3 `quorate run --restore-from` nodes to a put the new cluster accepts."""
    nodes = [f"127.0.0.{i}" for i in (1, 2, 3)]
    initial = ",".join(f"r{i}=http://{ip}:2380" for i, ip in enumerate(nodes, 1))
    procs = []
    start = time.monotonic()
    try:
        for i, ip in enumerate(nodes, 1):
            log = open(os.path.join(work, f"restore-r{i}.log"), "wb")
            procs.append(subprocess.Popen(
                [quorate, "run", "--name", f"r{i}", "--data-dir", os.path.join(work, f"r{i}"),
                 "--initial-advertise-peer-urls", f"http://{ip}:2380", "--listen-peer-urls", f"http://{ip}:2380",
                 "--advertise-client-urls", f"http://{ip}:2379", "--listen-client-urls", f"http://{ip}:2379",
                 "--agent-listen", f"{ip}:2382", "--status-listen", f"{ip}:2383", "--initial-cluster", initial, "--initial-cluster-token", "restored",
                 "--restore-from", backup_url, "--timeout", "300s"], stdout=log, stderr=subprocess.STDOUT))
        endpoints = ",".join(f"http://{ip}:2379" for ip in nodes)
        while time.monotonic() - start < 600:
            for i, p in enumerate(procs, 1):
                if p.poll() is not None:
                    sys.exit(f"quorate run on r{i} exited {p.returncode} during the restore; see {work}/restore-r{i}.log")
            if subprocess.run(["etcdctl", "--endpoints", endpoints, "--dial-timeout", "1s", "--command-timeout", "2s",
                               "put", "/bench/after-restore", "x"], capture_output=True).returncode == 0:
                return time.monotonic() - start
            time.sleep(0.1)
        sys.exit("the restored cluster took no write within 600 s")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="64,256", help="database sizes in MB, comma-separated")
    parser.add_argument("--quorate", default=os.path.join(HERE, "..", "build", "quorate"))
    args = parser.parse_args()
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        work = tempfile.mkdtemp(prefix="quorate-backup-bench-")
        etcd = subprocess.Popen(["etcd", "--data-dir", os.path.join(work, "etcd"), "--quota-backend-bytes",
                                 str(8 << 30), "--listen-client-urls", ENDPOINT, "--advertise-client-urls",
                                 ENDPOINT, "--listen-peer-urls", "http://127.0.0.1:2380"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if subprocess.run(["etcdctl", "--endpoints", ENDPOINT, "endpoint", "health"],
                                  capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
            fill(size)
            snap = os.path.join(work, "snap.db")
            t_save, _ = timed(["etcdctl", "--endpoints", ENDPOINT, "snapshot", "save", snap],
                              stdout=subprocess.DEVNULL)
            t_gzip, _ = timed(["gzip", snap])
            db_bytes = os.path.getsize(snap + ".gz")
            store = os.path.join(work, "store")
            os.makedirs(store)
            saved = os.path.join(work, "saved")
            with open(saved, "w") as out:
                t_quorate, rss = timed([args.quorate, "backup", "save", "--endpoints", ENDPOINT, "--backup-to",
                                        f"file://{store}", "--log-level", "warn", "-w", "simple"], stdout=out)
            with open(saved) as f:
                backup_url = f.read().split()[-1]
            # The old cluster is gone (a restore refuses while it has a leader), then the way back.
            etcd.kill()
            etcd.wait()
            t_restore = restore_to_writable(args.quorate, backup_url, work)
            row = {"size_mb": size, "etcdctl_save_s": round(t_save, 2), "gzip_s": round(t_gzip, 2),
                   "quorate_s": round(t_quorate, 2), "ratio": round(t_quorate / (t_save + t_gzip), 2),
                   "quorate_peak_rss_mb": round(rss, 1), "gzip_bytes": db_bytes,
                   "restore_to_writable_s": round(t_restore, 2)}
            print(json.dumps(row), flush=True)
            results.append(row)
        finally:
            etcd.kill()
            etcd.wait()
            shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(HERE, "results", "backup.json"), "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load": os.getloadavg()[0],
                   "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
