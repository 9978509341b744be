"""Issue 4, `etcd` provider: nodes rendezvous in a separate, real etcd (the registry) with etcd
3.6's v3 discovery key layout: 3 nodes at once form one cluster with the predicted IDs, and 6
processes racing for 5 seats always agree on one set, the 6th told it is extra."""
import os

from harness import NET, Cluster, check, log, main, require, spawn, wait_until


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


if __name__ == "__main__":
    main(test)
