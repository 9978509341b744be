"""Issue 11, the `gce` provider against the Compute Engine emulator (tests/gce/emulator.py: the Compute
API, the metadata server and the OAuth token endpoint on 127.0.0.1), in a network namespace of the
test's own. Every instance the emulator lists has a 127.0.0.x address this test gives it.
- a managed instance group of 3 (targetSize 3; a stopped instance of the group and another group's
  instance listed beside it, pages of 2) bootstraps 3 real etcd nodes with `quorate run --discovery
  'provider=gce mig=etcd ...'` and no --cluster-size, with the IDs `quorate discover` predicted; the
  token comes from a service-account key (an RS256 JWT the emulator verifies);
- instance churn (DESIGN §4 rule 9): one instance is terminated and its node killed with its data,
  the group creates a replacement at a new address; its quorate removes the departed member and
  joins, and the cluster ends with 3 healthy voters and the key written before;
- the metadata server: `mig=auto` and no project_name, so the project, the group (the instance's
  created-by attribute) and the token all come from it;
- a misspelt key is bad input (exit 2), a missing project with no metadata server fails (exit 1),
  each on one line; the key file's private key and the tokens show in no output or log."""
import json
import os
import sys
import urllib.request

from harness import (QUORATE, Cluster, check, free_port, keys_caught_up, log, main, require, run, spawn, started_voters,
                     wait_healthy, wait_listening, wait_until)

EMULATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gce", "emulator.py")
PROJECT = "quorate-test"
ZONE = "us-central1-a"


def test():
    require("etcd")
    require("etcdctl")
    require("openssl")
    c = Cluster(3)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    pem = run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], check_rc=0).stdout
    key_file = os.path.join(c.dir, "sa.json")
    with open(key_file, "w") as f:
        json.dump({"type": "service_account", "project_id": PROJECT, "private_key_id": "0123abcd", "private_key": pem,
                   "client_email": f"etcd@{PROJECT}.iam.gserviceaccount.com", "client_id": "1",
                   "token_uri": f"{base}/token"}, f)
    spawn([sys.executable, EMULATOR, "--listen", f"127.0.0.1:{port}", "--project", PROJECT, "--key-file", key_file],
          os.path.join(c.dir, "emulator.log"))
    wait_listening(port, "the gce emulator")

    def control(what, body):
        req = urllib.request.Request(f"{base}/_emulator/{what}", data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            check(r.status == 200, f"emulator control {what}: {r.status}")

    control("migs", {"name": "etcd", "zone": ZONE, "target_size": 3})
    control("migs", {"name": "web", "zone": ZONE, "target_size": 1})
    for node in c.nodes:
        node.name = f"etcd-{node.index:04x}"
        control("instances", {"name": node.name, "zone": ZONE, "ip": node.ip, "mig": "etcd"})
    control("instances", {"name": "etcd-dead", "zone": ZONE, "ip": "127.0.0.50", "mig": "etcd", "status": "STOPPED"})
    control("instances", {"name": "web-0001", "zone": ZONE, "ip": "127.0.0.60", "mig": "web"})
    control("config", {"max_page": 2, "created_by": f"projects/123456789012/zones/{ZONE}/instanceGroupManagers/etcd"})
    spec = f"provider=gce project_name={PROJECT} mig=etcd mig_zone={ZONE} credentials_file={key_file} endpoint={base}"
    c.discovery = ["--discovery", spec]
    # Nothing may reach a real metadata server (or anything else off loopback).
    os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
    os.environ["GCE_METADATA_HOST"] = f"127.0.0.1:{free_port()}"
    secret = pem.strip().splitlines()[5]  # a line from the middle of the private key
    outputs = []

    # Bad input: exit 2 for the operator's own mistake, exit 1 for what the platform does not answer.
    r = run([QUORATE, "discover", "--discovery", spec + " zone_patern=us-.*"], check_rc=2)
    check("zone_patern" in r.stderr and len(r.stderr.strip().splitlines()) == 1, f"a misspelt key: {r.stderr}")
    log(f"a misspelt key: {r.stderr.strip()}")
    r = run([QUORATE, "discover", "--timeout", "2s", "--discovery", f"provider=gce mig=etcd mig_zone={ZONE} "
             f"endpoint={base}"], check_rc=1)
    check("project_name" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          f"a missing project with no metadata server: {r.stderr}")
    log(f"no project, no metadata server: {r.stderr.strip()}")
    outputs.append(r.stdout + r.stderr)

    # The group's members and size, through pages and a service account's token.
    predicted = c.discover()
    check(sorted(m["name"] for m in predicted["members"]) == sorted(n.name for n in c.nodes),
          f"discover does not list the group's running instances: {predicted}")
    check(predicted.get("clusterSize") == 3 and "etcd" in predicted.get("clusterSizeFrom", ""),
          f"the size is not the group's targetSize: {predicted}")
    log(f"cluster size {predicted['clusterSize']}, from {predicted['clusterSizeFrom']}")
    outputs.append(json.dumps(predicted))
    # From the metadata server alone: its project, its token and the instance's created-by group.
    r = run([QUORATE, "discover", "-w", "json", "--timeout", "10s", "--discovery", f"provider=gce mig=auto endpoint={base}"],
            env=dict(os.environ, GCE_METADATA_HOST=f"127.0.0.1:{port}"), check_rc=0)
    check(sorted(m["name"] for m in json.loads(r.stdout)["members"]) == sorted(n.name for n in c.nodes),
          f"mig=auto through the metadata server: {r.stdout}")
    outputs.append(r.stdout + r.stderr)

    for node in c.nodes:
        node.run()
    wait_healthy(c)
    c.check_prediction(predicted)
    log(f"the managed instance group of 3 bootstrapped: {sorted(n.name for n in c.nodes)}")
    c.etcdctl("put", "/before-churn", "kept")

    # Churn: an instance dies with its disk; the group creates another at a new address.
    victim = c.nodes[0]
    victim.kill()
    victim.wipe()
    control(f"instances/{victim.name}", {"status": "TERMINATED"})
    newcomer = c.add_node()
    newcomer.name = f"etcd-{newcomer.index:04x}"
    control("instances", {"name": newcomer.name, "zone": ZONE, "ip": newcomer.ip, "mig": "etcd"})
    c.nodes.remove(victim)
    newcomer.run()
    wait_until(lambda: started_voters(c, 3) and newcomer.name in str(c.member_list()), 60,
               f"{newcomer.name} to take {victim.name}'s seat")
    wait_healthy(c)
    names = sorted(m["name"] for m in c.member_list()["members"])
    check(victim.name not in names, f"the departed {victim.name} keeps its seat: {names}")
    kept = keys_caught_up(c, newcomer, "/", lambda k: k.get("/before-churn") == "kept")
    check(kept.get("/before-churn") == "kept", "the key written before the churn is gone")
    with open(newcomer.log_path, errors="replace") as f:
        check("its instance has departed" in f.read(), "the newcomer's log does not say the instance departed")
    log(f"{newcomer.name} ({newcomer.ip}) took the seat of departed {victim.name}: members {names}")

    for node in c.nodes + [victim]:
        with open(node.log_path, errors="replace") as f:
            outputs.append(f.read())
    for text in outputs:
        check(secret not in text and "PRIVATE KEY" not in text, "the service account's private key shows")
        check("ya29." not in text, "an access token shows")


if __name__ == "__main__":
    main(test)
