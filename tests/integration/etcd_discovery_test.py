"""Issue 4, `etcd` provider: nodes rendezvous in a separate, real etcd (the registry) with etcd
3.6's v3 discovery key layout: 3 nodes at once form one cluster with the predicted IDs, and 6
processes racing for 5 seats always agree on one set, the 6th told it is extra. A claim planted in
the registry with a name that is not UTF-8, or that holds a newline, is refused: `discover` retries
it within --timeout, then exits 1 with one escaped line naming the key (issue 15 §3, §12)."""
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


if __name__ == "__main__":
    main(test)
