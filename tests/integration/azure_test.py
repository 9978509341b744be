"""Issue 11, the `azure` provider against the Azure emulator (tests/azure/emulator.py: ARM, the token
endpoint and IMDS, HTTPS with a CA made here, which quorate trusts through ca_file=), in a network
namespace of the test's own. Every instance's address is one the test names, on 127.0.0.x.
- a scale set of 3 bootstraps 3 real etcd nodes with `quorate run --discovery 'provider=azure
  resource_group=... vm_scale_set=...'` and no --cluster-size (the size is sku.capacity; the lists
  come 2 to a page), with the IDs `quorate discover -w json` predicted;
- instance churn (DESIGN §4 rule 9): one instance is deleted, its node killed and its data gone; the
  scale set gets a new instance at a new address, whose quorate removes the departed member ("its
  instance has departed") and joins; 3 voters again, and a key written before is still there;
- vm_scale_set=auto with the managed identity from IMDS, a throttle waited out, a Flexible scale set,
  and a denial named; a nextLink or a token with CR LF and the unspecified address refused, by name,
  exit 1, no token shown;
- tag and scale set keys mixed are bad input (exit 2, one line, nothing written), and the client
  secret shows in no output or log."""
import json
import os
import sys

from harness import (QUORATE, Cluster, check, log, main, require, run, skip, spawn, started_voters, wait_healthy,
                     wait_until)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "azure"))
from azure_emulator import CLIENT_ID, CLIENT_SECRET, SUBSCRIPTION, TENANT, Emulator  # noqa: E402


def test():
    require("etcd")
    require("etcdctl")
    require("openssl")
    c = Cluster(3)
    try:
        em = Emulator(c.dir, spawn=spawn)
    except FileNotFoundError as e:
        skip(f"{e} is not installed")
    em.scale_set("etcd", 3)
    em.configure(max_page=2)
    vm_ids = {}
    for node in c.nodes:
        vm_ids[node] = em.add_instance(node.ip, vm_scale_set="etcd")
        node.name = f"etcd{len(vm_ids) - 1:06x}"  # the emulator's computer names, as a scale set's hostnames
    # The secret in the environment, as go-discover reads it: the harness logs command lines.
    os.environ.update(ARM_CLIENT_SECRET=CLIENT_SECRET)
    spec = (f"provider=azure tenant_id={TENANT} client_id={CLIENT_ID} subscription_id={SUBSCRIPTION} "
            f"resource_group=etcd-rg vm_scale_set=etcd endpoint={em.base} authority_host={em.base} ca_file={em.ca}")
    c.discovery = ["--discovery", spec]

    # Bad input: exit 2, one line, nothing written.
    bad_dir = os.path.join(c.dir, "bad")
    r = run([QUORATE, "init", "--name", "x", "--data-dir", bad_dir, "--initial-advertise-peer-urls",
             "http://127.0.0.9:2380", "--discovery", spec + " tag_name=role tag_value=etcd"], check_rc=2)
    check(r.stderr.strip().count("\n") == 0 and "tag_name" in r.stderr, f"mixed keys: {r.stderr}")
    check(not os.path.exists(bad_dir), "bad input wrote the data dir")
    # The size from the scale set, the members from its NICs, every page read.
    r = run([QUORATE, "discover", "-w", "json", "--initial-cluster-token", c.token, "--discovery", spec], check_rc=0)
    predicted = json.loads(r.stdout)
    check(sorted(m["name"] for m in predicted["members"]) == sorted(n.name for n in c.nodes),
          f"discover lists {predicted}")
    check(predicted.get("clusterSize") == 3 and "azure scale set etcd" in predicted.get("clusterSizeFrom", ""),
          f"the size is not the scale set's capacity: {predicted}")
    # The secret given as a key is not shown either.
    r2 = run([QUORATE, "discover", "--discovery", spec + f" secret_access_key={CLIENT_SECRET}"], check_rc=0,
             env={k: v for k, v in os.environ.items() if k != "ARM_CLIENT_SECRET"})
    check(CLIENT_SECRET not in r.stdout + r.stderr + r2.stdout + r2.stderr, "the client secret shows in discover")
    pages = [e for e in em.requests() if e["path"].endswith("/networkInterfaces") and "$skiptoken" in e["query"]]
    check(pages, "discover did not follow the NIC list's nextLink")
    # This VM's own scale set from IMDS, with its managed identity's token; a throttle waited out.
    em.control("imds", {"vm": vm_ids[c.nodes[1]]})
    em.configure(fail=[{"path_prefix": "/subscriptions/", "status": 429, "retry_after": 1,
                        "body": json.dumps({"error": {"code": "TooManyRequests", "message": "slow down"}})}])
    auto = f"provider=azure vm_scale_set=auto endpoint={em.base} imds_endpoint={em.imds} ca_file={em.ca}"
    r = run([QUORATE, "discover", "-w", "json", "--initial-cluster-token", c.token, "--discovery", auto], check_rc=0,
            env={k: v for k, v in os.environ.items() if k != "ARM_CLIENT_SECRET"})
    check(json.loads(r.stdout)["members"] == predicted["members"], f"vm_scale_set=auto found {r.stdout}")
    check(any(e["status"] == 429 for e in em.requests()), "the throttle was not met")
    # A Flexible scale set (the default orchestration mode of new sets): plain VMs and NICs of the group.
    em.scale_set("etcd-flex", 2, orchestration_mode="Flexible")
    for ip in ("127.0.0.8", "127.0.0.9"):
        em.add_instance(ip, vm_scale_set="etcd-flex")
    flex_spec = spec.replace("vm_scale_set=etcd", "vm_scale_set=etcd-flex")
    r = run([QUORATE, "discover", "-w", "json", "--discovery", flex_spec], check_rc=0)
    flex = json.loads(r.stdout)
    check(sorted(m["name"] for m in flex["members"]) == ["etcd-flex000000", "etcd-flex000001"]
          and flex.get("clusterSize") == 2, f"the Flexible set: {r.stdout}")
    # A denial: exit 1 after --timeout, one line naming the action the identity lacks.
    em.configure(deny=["Microsoft.Compute/virtualMachineScaleSets/read"])
    r = run([QUORATE, "discover", "--timeout", "1s", "--discovery", spec], check_rc=1)
    check(r.stderr.strip().count("\n") == 0 and "Microsoft.Compute/virtualMachineScaleSets/read" in r.stderr
          and "AuthorizationFailed" in r.stderr, f"a denial: {r.stderr}")
    em.configure(deny=[])
    # Hostile answers: a nextLink with CR LF (the bearer token goes nowhere), a token answer with
    # CR LF in its access_token (never shown), an address no member has: exit 1, one line naming it.
    vms = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/etcd-rg/providers/Microsoft.Compute/virtualMachineScaleSets/etcd"
    smuggled = json.dumps({"value": [], "nextLink": f"{em.base}{vms}/virtualMachines?$skiptoken=1\r\nGET /steal"})
    garbled = json.dumps({"token_type": "Bearer", "expires_in": 3599, "access_token": "eyJ0eXAi.secret\r\nX: 1"})
    for fail, named in [({"path_prefix": f"{vms}/virtualMachines", "status": 200, "body": smuggled}, "nextLink"),
                        ({"path_prefix": f"/{TENANT}/oauth2", "status": 200, "body": garbled}, "access_token")]:
        em.configure(fail=[dict(fail, times=-1)])
        r = run([QUORATE, "discover", "--timeout", "1s", "--discovery", spec], check_rc=1)
        check(r.stderr.strip().count("\n") == 0 and named in r.stderr and "eyJ0eXAi" not in r.stderr,
              f"a hostile {named}: {r.stderr}")
        em.configure(fail=[])
    em.scale_set("etcd-odd", 1)
    em.add_instance("0.0.0.0", vm_scale_set="etcd-odd")
    r = run([QUORATE, "discover", "--timeout", "1s", "--discovery", spec.replace("vm_scale_set=etcd", "vm_scale_set=etcd-odd")],
            check_rc=1)
    check("0.0.0.0" in r.stderr and r.stderr.strip().count("\n") == 0, f"the unspecified address: {r.stderr}")

    for node in c.nodes:
        node.run()
    wait_healthy(c)
    c.check_prediction(predicted)
    c.etcdctl("put", "/before-churn", "kept")
    log(f"the scale set of 3 bootstrapped as predicted: {sorted(n.name for n in c.nodes)}")

    # Churn: an instance dies with its disk; the scale set gets another at a new address.
    victim = c.nodes[0]
    victim.kill()
    victim.wipe()
    em.delete_instance(vm_ids[victim])
    newcomer = c.add_node()
    em.add_instance(newcomer.ip, vm_scale_set="etcd")
    newcomer.name = "etcd000003"
    c.nodes.remove(victim)
    newcomer.run()
    wait_until(lambda: started_voters(c, 3) and newcomer.name in str(c.member_list()), 60,
               f"{newcomer.name} to take {victim.name}'s seat")
    wait_healthy(c)
    names = sorted(m["name"] for m in c.member_list()["members"])
    check(victim.name not in names, f"the departed {victim.name} keeps its seat: {names}")
    r = c.etcdctl("get", "/before-churn", "--print-value-only")
    check(r.stdout.strip() == "kept", f"the key written before the churn: {r.stdout!r}")
    with open(newcomer.log_path, errors="replace") as f:
        text = f.read()
    check("its instance has departed" in text, "the newcomer's log does not say the instance departed")
    for node in c.nodes + [victim]:
        with open(node.log_path, errors="replace") as f:
            check(CLIENT_SECRET not in f.read(), f"the client secret shows in {node.name}'s log")
    log(f"{newcomer.name} ({newcomer.ip}) took the seat of departed {victim.name}: members {names}")


if __name__ == "__main__":
    main(test)
