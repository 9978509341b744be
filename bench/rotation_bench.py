#!/usr/bin/env python3
"""The peer CA rotation's cost (docs/DESIGN.md §14): a 3-node `quorate run` cluster with peer mutual TLS
(openssl certificates), a writer putting one key after another through every endpoint, then
`quorate tls rotate-ca`. Per run: the rotation's time (asked to every member reporting the new CA), the
longest write stall (the longest gap between two puts that succeeded, against the writer's own gap with
no rotation going on), the puts that failed, and each member's restart (its decision to its etcd healthy
again). Runs inside a network namespace of its own (bench/rotation runs it so) on 127.0.0.1-3.

    bench/rotation [--runs 3] [--etcd-dir third_party/etcd-3.5/usr/bin]

Writes bench/results/rotation.json and prints one line per run and a summary."""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def longest_gap(puts):
    """The longest time between the ends of two successful puts in a row."""
    ends = [end for _, end, ok in puts if ok]
    return max((b - a for a, b in zip(ends, ends[1:])), default=0.0)


def one_run(harness, pki, rot):
    c = rot.tls_cluster(3)
    pkidir = os.path.join(c.dir, "pki")
    ca1 = pki.make_ca(os.path.join(c.dir, "cas"), "ca1")
    for n in c.nodes:
        pki.install(pkidir, n, ca1)
    for n in c.nodes:
        n.run(extra=pki.peer_args(pkidir, n))
    harness.wait_healthy(c)
    ca2 = pki.make_ca(os.path.join(c.dir, "cas"), "ca2")
    for n in c.nodes:
        pki.install(pkidir, n, ca2, next_dir=True)

    # The writer's own rhythm first, with nothing going on: a stall is measured against it.
    idle = rot.Writer(c)
    idle.start()
    harness.wait_until(lambda: len(idle.puts) >= 40, 60, "40 puts with no rotation")
    idle.finish()
    offsets = {n.name: harness.log_size(n) for n in c.nodes}
    w = rot.Writer(c)
    w.start()
    harness.wait_until(lambda: len(w.puts) >= 5, 30, "the writer going")
    began = time.time()
    rot.rotate(c, pkidir, c.nodes[0])
    rot.wait_done(c, 300)
    took = time.time() - began
    w.finish()
    spans = rot.restart_spans(c, offsets)
    c.stop_all()
    return {
        "rotation_s": round(took, 2),
        "longest_stall_s": round(longest_gap(w.puts), 3),
        "idle_longest_gap_s": round(longest_gap(idle.puts), 3),
        "puts": len(w.puts),
        "failed_puts": sum(1 for p in w.puts if not p[2]),
        "restarts": [{"member": s[2], "phase": s[3], "s": round(s[1] - s[0], 2)} for s in spans],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quorate", default=os.path.join(ROOT, "build", "quorate"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "rotation.json"))
    args = ap.parse_args()
    os.environ["QUORATE_BIN"] = args.quorate
    import harness
    import pki
    import ca_rotation_test as rot
    harness.QUORATE = rot.QUORATE = args.quorate
    version = harness.run([harness.ETCD, "--version"], check_rc=0).stdout.split("\n")[0]
    runs = []
    for i in range(args.runs):
        r = one_run(harness, pki, rot)
        r["load"] = round(os.getloadavg()[0], 1)
        runs.append(r)
        print(f"run {i + 1}: rotation {r['rotation_s']} s, longest write stall {r['longest_stall_s']} s "
              f"(idle {r['idle_longest_gap_s']} s), {r['failed_puts']}/{r['puts']} puts failed, restarts "
              f"{[x['s'] for x in r['restarts']]} s (load {r['load']})", flush=True)
    summary = {
        "etcd": version,
        "runs": runs,
        "rotation_median_s": statistics.median(r["rotation_s"] for r in runs),
        "longest_stall_worst_s": max(r["longest_stall_s"] for r in runs),
        "failed_puts_total": sum(r["failed_puts"] for r in runs),
    }
    print(f"{version}: rotation median {summary['rotation_median_s']} s, worst write stall "
          f"{summary['longest_stall_worst_s']} s, {summary['failed_puts_total']} puts failed in {args.runs} runs")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
