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
    c.bootstrap(c.discover_as_first, "file provider")


def shared(c, r):
    path = os.path.join(c.dir, f"race{r}")
    os.makedirs(path, exist_ok=True)
    return path


def race(rounds=20, seats=5, nodes=6):
    c = Cluster(nodes)
    for r, sets, failed in c.race(seats, lambda r: ["--discovery", f"provider=file path={shared(c, r)}"], rounds):
        check(len(sets) == 1 and len(sets[0]) == seats, f"round {r}: sealed sets {sets}")
        check(len(failed) == nodes - seats and all("extra" in e for e in failed),
              f"round {r}: the extra node was not told so: {failed}")
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
