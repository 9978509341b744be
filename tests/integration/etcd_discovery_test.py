"""Issue 4, `etcd` provider: nodes rendezvous in a separate, real etcd (the registry) with etcd
3.6's v3 discovery key layout: 3 nodes at once form one cluster with the predicted IDs, and 6
processes racing for 5 seats always agree on one set, the 6th told it is extra."""
import json
import os
import subprocess

from harness import NET, QUORATE, Cluster, check, log, main, require, spawn, wait_until


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
    decisions = {}

    def start(node, delay):
        decisions[node.name] = node.init_and_start(delay)["decision"]
    c.start_all(start)
    log(f"etcd provider, 3 nodes decided {decisions}")
    predicted = c.discover(["--name", "n1", "--initial-advertise-peer-urls", c.nodes[0].peer_url])
    try:
        wait_until(lambda: c.all_started(), 60, "all 3 members started")
        c.check_prediction(predicted)
    except AssertionError:
        c.dump_logs()
        raise
    keys = c.etcdctl("get", f"/_etcd/registry/{c.token}/", "--prefix", "--keys-only", endpoints=registry).stdout.split()
    check(f"/_etcd/registry/{c.token}/_config/size" in keys and
          sum(k.startswith(f"/_etcd/registry/{c.token}/members/") for k in keys) == 3,
          f"registry layout: {keys}")
    c.stop_all()

    racers = Cluster(6)
    for r in range(5):
        token = f"{racers.token}-{r}"
        procs = [subprocess.Popen(
            [QUORATE, "discover", "-w", "json", "--name", n.name, "--initial-advertise-peer-urls", n.peer_url,
             "--discovery", f"provider=etcd endpoints={registry}", "--cluster-size", "5", "--timeout", "2s",
             "--initial-cluster-token", token], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for n in racers.nodes]
        results = [(p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for p in procs]
        sets = {json.dumps(sorted(m["name"] for m in json.loads(out)["members"])) for rc, out, _ in results if rc == 0}
        extra = [err for rc, _, err in results if rc != 0]
        check(len(sets) == 1 and len(json.loads(next(iter(sets)))) == 5, f"round {r}: sets {sets}")
        check(len(extra) == 1 and "extra" in extra[0], f"round {r}: extra {extra}")
    log("5 rounds of 6 racing for 5 in the registry: one set each, the extra node told so")


if __name__ == "__main__":
    main(test)
