"""Issue 4, `file` provider and cluster-init:
- 3 and 5 nodes started at the same time (random delays up to 3 s) with provider=file on a temp
  directory form one cluster with the IDs `quorate discover` predicts;
- 6 processes race for a 5-member set, 20 rounds: one sealed set, exactly 5 in it, the 6th told
  it is extra;
- `quorate cluster-init --discovery-srv` (real dnsmasq) seals a bucket; nodes started later with only
  --bucket bootstrap from it with no DNS server running."""
import json
import os
import subprocess

from harness import QUORATE, Cluster, Dns, Netns, check, log, main, require, wait_until


def file_bootstrap(size):
    c = Cluster(size)
    shared = os.path.join(c.dir, "shared")
    os.mkdir(shared)
    c.discovery = ["--discovery", f"provider=file path={shared}", "--cluster-size", str(size)]
    decisions = {}

    def start(node, delay):
        decisions[node.name] = node.init_and_start(delay)["decision"]
    c.start_all(start)
    log(f"file provider, {size} nodes decided {decisions}")
    # Once sealed, discover reads the sealed set: the prediction, made with any member's identity.
    predicted = c.discover(["--name", "n1", "--initial-advertise-peer-urls", c.nodes[0].peer_url])
    try:
        wait_until(lambda: c.all_started(), 60, f"all {size} members started")
        c.check_prediction(predicted)
    except AssertionError:
        c.dump_logs()
        raise
    c.stop_all()


def race(rounds=20, seats=5, nodes=6):
    c = Cluster(nodes)
    for r in range(rounds):
        shared = os.path.join(c.dir, f"race{r}")
        os.mkdir(shared)
        procs = [subprocess.Popen(
            [QUORATE, "discover", "-w", "json", "--name", n.name, "--initial-advertise-peer-urls", n.peer_url,
             "--discovery", f"provider=file path={shared}", "--cluster-size", str(seats), "--timeout", "2s",
             "--initial-cluster-token", c.token],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in c.nodes]
        results = [(p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for p in procs]
        sets = {json.dumps(sorted(m["name"] for m in json.loads(out)["members"])) for rc, out, _ in results if rc == 0}
        extra = [err for rc, _, err in results if rc != 0]
        check(len(sets) == 1, f"round {r}: {len(sets)} different sealed sets: {sets}")
        check(len(json.loads(next(iter(sets)))) == seats, f"round {r}: sealed {sets}")
        check(len(extra) == nodes - seats and all("extra" in e for e in extra),
              f"round {r}: the extra node was not told so: {extra}")
    log(f"{rounds} rounds of {nodes} racing for {seats}: one sealed set each, the extra node told so")


def cluster_init_then_bucket():
    netns = Netns()
    c = Cluster(3, prefix=netns.prefix, dns_names=True)
    dns = Dns(netns, c.dir)
    dns.records(Dns.srv_records(c.nodes))
    store = os.path.join(c.dir, "store")
    os.mkdir(store)
    r = subprocess.run(netns.prefix + [QUORATE, "cluster-init", "-w", "json", "--discovery-srv", "quorate.test",
                                       "--cluster-size", "3", "--initial-cluster-token", c.token,
                                       "--bucket", f"file://{store}"], capture_output=True, text=True)
    check(r.returncode == 0, f"cluster-init failed: {r.stderr}")
    predicted = json.loads(r.stdout)
    again = subprocess.run(netns.prefix + [QUORATE, "cluster-init", "--discovery-srv", "quorate.test",
                                           "--cluster-size", "3", "--initial-cluster-token", c.token,
                                           "--bucket", f"file://{store}"], capture_output=True, text=True)
    check(again.returncode == 0, f"cluster-init is idempotent: {again.stderr}")
    # Peer URLs still need names resolved (etcd dials them): /etc/hosts of the namespace does that,
    # so the DNS server, and with it the SRV records, can go.
    with open(f"/etc/netns/{netns.name}/hosts", "w") as f:
        f.write("".join(f"{n.ip} {n.host}\n" for n in c.nodes))
    dns.stop()
    log("DNS server stopped; nodes start from the sealed bucket alone")
    c.discovery = ["--bucket", f"file://{store}"]
    c.start_all(lambda n, d: n.init_and_start(d))
    try:
        wait_until(lambda: c.all_started(), 60, "all 3 members started")
        c.check_prediction(predicted)
    except AssertionError:
        c.dump_logs()
        raise
    c.stop_all()


def test():
    require("etcd")
    require("etcdctl")
    file_bootstrap(3)
    file_bootstrap(5)
    race()
    cluster_init_then_bucket()


if __name__ == "__main__":
    main(test)
