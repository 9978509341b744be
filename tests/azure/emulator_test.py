"""The Azure emulator's own interface (tests/azure/emulator.py), and with --clients the proof that its
answers are Azure's shapes: Azure's official JavaScript clients (clients.mjs, pinned in
package.json) read them and see exactly what the emulator holds. Exits 77 without openssl, and with
--clients without node or tests/azure/node_modules (scripts/deps installs it)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

from azure_emulator import CLIENT_ID, CLIENT_SECRET, SUBSCRIPTION, TENANT, HERE, Emulator

RG = "etcd-rg"
SUB = f"/subscriptions/{SUBSCRIPTION}"
VMSS = f"{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/etcd"
NICS = f"{SUB}/providers/Microsoft.Network/networkInterfaces"


def check(cond, msg):
    if not cond:
        print(f"FAIL: {msg}", flush=True)
        sys.exit(1)


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(77)


def token(em, secret=CLIENT_SECRET, tenant=TENANT):
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": CLIENT_ID,
                                   "client_secret": secret, "scope": "https://management.azure.com/.default"})
    return em.call("POST", f"{em.base}/{tenant}/oauth2/v2.0/token",
                   {"Content-Type": "application/x-www-form-urlencoded"}, form.encode())


def arm(em, path, bearer, api_version="2023-09-01"):
    url = em.base + path + (f"?api-version={api_version}" if api_version else "")
    return em.call("GET", url, {"Authorization": f"Bearer {bearer}"} if bearer else {})


def all_pages(em, path, bearer, api_version):
    """Every item of a list and the number of pages, following nextLink as a client does."""
    status, _, doc = arm(em, path, bearer, api_version)
    items, pages = [], 1
    while True:
        check(status == 200, f"GET {path}: {status} {doc}")
        items += doc["value"]
        if "nextLink" not in doc:
            return items, pages
        check(doc["nextLink"].startswith(em.base + path + "?"), f"nextLink {doc['nextLink']}")
        status, _, doc = em.call("GET", doc["nextLink"], {"Authorization": f"Bearer {bearer}"})
        pages += 1


def expect_error(result, status, code):
    got, _, doc = result
    check(got == status and isinstance(doc, dict) and doc.get("error", {}).get("code") == code
          and doc["error"].get("message"), f"wanted {status} {code}, got {got} {doc}")
    return doc["error"]["message"]


def interface(em):
    # Tokens: the client secret, and ARM's refusals of anything but a live token it issued.
    status, _, doc = token(em, secret="wrong")
    check(status == 401 and doc["error"] == "invalid_client" and "AADSTS7000215" in doc["error_description"],
          f"a wrong secret: {status} {doc}")
    status, _, doc = token(em, tenant="other-tenant")
    check(status == 400 and "AADSTS90002" in doc["error_description"], f"an unknown tenant: {status} {doc}")
    status, _, doc = token(em)
    check(status == 200 and doc["token_type"] == "Bearer" and isinstance(doc["expires_in"], int), f"token: {doc}")
    bearer = doc["access_token"]
    expect_error(arm(em, NICS, None), 401, "AuthenticationFailed")
    expect_error(arm(em, NICS, "made-up"), 401, "InvalidAuthenticationToken")
    em.configure(token_lifetime=0)
    expect_error(arm(em, NICS, token(em)[2]["access_token"]), 401, "ExpiredAuthenticationToken")
    em.configure(token_lifetime=3599)
    expect_error(arm(em, NICS, bearer, api_version=None), 400, "MissingApiVersionParameter")
    expect_error(arm(em, f"/subscriptions/other{NICS[len(SUB):]}", bearer), 404, "SubscriptionNotFound")
    expect_error(arm(em, VMSS, bearer), 404, "ResourceNotFound")

    # A scale set of 5 and two standalone VMs, listed 2 to a page.
    em.scale_set("etcd", 5)
    ids = [em.add_instance(f"127.0.0.{i}", vm_scale_set="etcd") for i in range(2, 7)]
    em.add_instance("127.0.0.20", name="tagged", tags={"role": "etcd"})
    em.add_instance("127.0.0.21", name="other")
    em.configure(max_page=2)
    status, _, doc = arm(em, VMSS.lower(), bearer)  # ARM's paths are not case-sensitive
    check(status == 200 and doc["sku"]["capacity"] == 5, f"the scale set: {status} {doc}")
    nics, pages = all_pages(em, VMSS + "/networkInterfaces", bearer, "2018-10-01")
    check(pages == 3 and [n["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"] for n in nics]
          == [f"127.0.0.{i}" for i in range(2, 7)], f"{pages} pages of scale set NICs: {nics}")
    check([n["properties"]["virtualMachine"]["id"] for n in nics] == ids, "the NICs' virtualMachine ids")
    vms, pages = all_pages(em, VMSS + "/virtualMachines", bearer, "2023-09-01")
    check(pages == 3 and [v["id"] for v in vms] == ids and "instanceView" not in vms[0]["properties"],
          f"scale set VMs without the instance view: {vms}")
    standalone, pages = all_pages(em, NICS, bearer, "2023-09-01")
    check(pages == 1 and [n.get("tags") for n in standalone] == [None, {"role": "etcd"}],
          f"the subscription's NICs (the scale set's are not among them): {standalone}")

    # The test's controls: a deleting instance, a stopped one, one gone.
    em.update_instance(ids[0], provisioning_state="Deleting")
    em.update_instance(ids[1], power_state="deallocated")
    em.delete_instance(ids[4])
    status, _, doc = em.call("GET", f"{em.base}{VMSS}/virtualMachines?api-version=2023-09-01&$expand=instanceView"
                             f"&$top=10", {"Authorization": f"Bearer {bearer}"})
    states = [(v["properties"]["provisioningState"],
               [s["code"] for s in v["properties"]["instanceView"]["statuses"] if s["code"].startswith("PowerState/")])
              for v in doc["value"]]
    check(states == [("Deleting", ["PowerState/running"]), ("Succeeded", ["PowerState/deallocated"])],
          f"the first page's states: {states}")
    check(len(all_pages(em, VMSS + "/networkInterfaces", bearer, "2018-10-01")[0]) == 4, "the deleted one's NIC")

    # A Flexible set: plain VMs and NICs of the group, the VMs listed by the set's filter.
    em.scale_set("flex", 2, orchestration_mode="Flexible")
    flex = [em.add_instance(f"127.0.0.{i}", vm_scale_set="flex") for i in (30, 31)]
    group = f"{SUB}/resourceGroups/{RG}/providers"
    set_id = VMSS[:-len("etcd")] + "flex"
    check(all(v.startswith(f"{group}/Microsoft.Compute/virtualMachines/flex_") for v in flex), f"Flexible VMs {flex}")
    status, _, doc = arm(em, VMSS[:-len("etcd")] + "flex", bearer)
    check(doc["properties"]["orchestrationMode"] == "Flexible", f"the Flexible set: {doc}")
    expect_error(arm(em, set_id + "/networkInterfaces", bearer, "2018-10-01"), 400, "OperationNotAllowed")
    query = urllib.parse.urlencode({"api-version": "2023-09-01", "$filter": f"virtualMachineScaleSet/id eq '{set_id}'",
                                    "$expand": "instanceView"})
    status, _, doc = em.call("GET", f"{em.base}{group}/Microsoft.Compute/virtualMachines?{query}",
                             {"Authorization": f"Bearer {bearer}"})
    check(status == 200 and [v["id"] for v in doc["value"]] == sorted(flex, key=str.lower)
          and all(v["properties"]["virtualMachineScaleSet"]["id"] == set_id
                  and v["properties"]["instanceView"]["statuses"] for v in doc["value"]), f"the set's VMs: {doc}")
    query = urllib.parse.urlencode({"api-version": "2023-09-01", "$expand": "instanceView"})
    expect_error(em.call("GET", f"{em.base}{group}/Microsoft.Compute/virtualMachines?{query}",
                         {"Authorization": f"Bearer {bearer}"}), 400, "InvalidParameter")
    group_nics, _ = all_pages(em, f"{group}/Microsoft.Network/networkInterfaces", bearer, "2023-09-01")
    check(sorted(n["properties"]["virtualMachine"]["id"] for n in group_nics) ==
          sorted([f"{group}/Microsoft.Compute/virtualMachines/{n}" for n in ("other", "tagged")] + flex, key=str.lower),
          f"the group's NICs: {group_nics}")

    # Faults: a denial naming the action, a throttle with Retry-After, garbage.
    em.configure(deny=["Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read"])
    message = expect_error(arm(em, VMSS + "/networkInterfaces", bearer), 403, "AuthorizationFailed")
    check("'Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read'" in message, message)
    em.configure(deny=[], fail=[{"path_prefix": NICS, "status": 429, "retry_after": 1, "times": 2,
                                 "body": json.dumps({"error": {"code": "TooManyRequests", "message": "slow down"}})},
                                {"path_prefix": VMSS, "status": 200, "body": "<html>proxy</html>"}])
    for _ in range(2):
        status, head, _ = arm(em, NICS, bearer)
        check(status == 429 and head.get("Retry-After") == "1", f"the throttle: {status} {head}")
    check(arm(em, NICS, bearer)[0] == 200, "after the throttle")
    check(arm(em, VMSS, bearer)[2] == "<html>proxy</html>", "the garbage answer")

    # IMDS: the Metadata header, this VM's scale set, the managed identity's token (numbers as strings).
    em.control("imds", {"vm": ids[2]})
    check(em.call("GET", f"{em.imds}/metadata/instance?api-version=2021-02-01")[0] == 400, "IMDS without Metadata")
    status, _, doc = em.call("GET", f"{em.imds}/metadata/instance?api-version=2021-02-01", {"Metadata": "true"})
    check(status == 200 and doc["compute"]["vmScaleSetName"] == "etcd" and doc["compute"]["resourceGroupName"] == RG
          and doc["compute"]["subscriptionId"] == SUBSCRIPTION, f"instance metadata: {doc}")
    mi = (f"{em.imds}/metadata/identity/oauth2/token?api-version=2018-02-01"
          "&resource=https%3A%2F%2Fmanagement.azure.com%2F")
    status, _, doc = em.call("GET", mi, {"Metadata": "true"})
    check(status == 200 and isinstance(doc["expires_on"], str) and doc["token_type"] == "Bearer", f"MI token: {doc}")
    check(arm(em, NICS, doc["access_token"])[0] == 200, "ARM takes the managed identity's token")
    check(em.call("GET", mi + "&client_id=someone-else", {"Metadata": "true"})[0] == 400, "an unknown identity")
    logged = [e for e in em.requests() if e["path"].endswith("/oauth2/v2.0/token")]
    check(logged and all("client_secret" not in e["query"] for e in logged), "the secret is in the request log")
    print("the emulator's interface: ok", flush=True)


def clients(em, workdir):
    if shutil.which("node") is None:
        skip("node is not installed")
    if not os.path.isdir(os.path.join(HERE, "node_modules", "@azure", "arm-network")):
        skip("tests/azure/node_modules is missing (run scripts/deps)")
    em.scale_set("etcd", 3)
    ids = [em.add_instance(f"127.0.0.{i}", vm_scale_set="etcd") for i in range(2, 5)]
    em.update_instance(ids[2], power_state="starting", provisioning_state="Creating")
    tagged = em.add_instance("127.0.0.20", name="tagged", tags={"role": "etcd"})
    em.scale_set("flex", 2, orchestration_mode="Flexible")
    flex = [em.add_instance(f"127.0.0.{i}", vm_scale_set="flex") for i in (30, 31)]
    em.update_instance(flex[1], power_state="deallocated")
    em.configure(max_page=2)
    env = dict(os.environ, AZURE_EMULATOR=em.base, AZURE_TENANT=TENANT, AZURE_CLIENT_ID=CLIENT_ID,
               AZURE_CLIENT_SECRET=CLIENT_SECRET, AZURE_SUBSCRIPTION=SUBSCRIPTION, AZURE_RESOURCE_GROUP=RG,
               AZURE_SCALE_SET="etcd", AZURE_FLEX_SCALE_SET="flex", NODE_EXTRA_CA_CERTS=em.ca)
    r = subprocess.run(["node", os.path.join(HERE, "clients.mjs")], env=env, capture_output=True, text=True,
                       timeout=60, cwd=HERE)
    check(r.returncode == 0, f"Azure's clients failed on the emulator's answers: {r.stdout}{r.stderr}")
    seen = json.loads(r.stdout)
    check(seen["capacity"] == 3, f"ComputeManagementClient read sku.capacity {seen['capacity']}")
    check(seen["pages"] == {"nics": 2, "scaleSetNics": 2, "vms": 2}, f"the clients read the pages {seen['pages']}")
    nic_of = lambda vm: f"{vm}/networkInterfaces/etcd-nic"
    check(seen["scaleSetNics"] == [{"id": nic_of(v), "vm": v, "primary": True, "ip": f"127.0.0.{i}", "tags": {}}
                                   for v, i in zip(ids, range(2, 5))], f"scale set NICs: {seen['scaleSetNics']}")
    check([n for n in seen["nics"] if n["vm"] == tagged] ==
          [{"id": tagged.replace("Microsoft.Compute/virtualMachines/tagged",
                                 "Microsoft.Network/networkInterfaces/tagged-nic"),
            "vm": tagged, "primary": True, "ip": "127.0.0.20", "tags": {"role": "etcd"}}]
          and len(seen["nics"]) == 3, f"the subscription's NICs: {seen['nics']}")
    check([(v["id"], v["computerName"], v["provisioningState"], v["power"]) for v in seen["vms"]] ==
          [(ids[0], "etcd000000", "Succeeded", "PowerState/running"),
           (ids[1], "etcd000001", "Succeeded", "PowerState/running"),
           (ids[2], "etcd000002", "Creating", "PowerState/starting")], f"scale set VMs: {seen['vms']}")
    set_id = VMSS[:-len("etcd")] + "flex"
    check(seen["flex"]["mode"] == "Flexible" and seen["flex"]["capacity"] == 2, f"the Flexible set: {seen['flex']}")
    check(seen["flex"]["vms"] == [{"id": v, "set": set_id, "computerName": f"flex{n:06x}", "power": f"PowerState/{p}"}
                                  for v, n, p in sorted(zip(flex, (0, 1), ("running", "deallocated")),
                                                        key=lambda t: t[0].lower())],
          f"the Flexible set's VMs: {seen['flex']['vms']}")
    check(sorted(n["vm"] for n in seen["flex"]["nics"]) == sorted(flex + [tagged], key=str.lower)
          and all(n["primary"] and n["ip"] for n in seen["flex"]["nics"]), f"the group's NICs: {seen['flex']['nics']}")
    calls = [(e["method"], e["path"].split("/")[-1], e["status"]) for e in em.requests()]
    check(("POST", "token", 200) in calls and all(e["authorized"] for e in em.requests()
                                                  if e["path"].startswith("/subscriptions/")),
          f"the clients' calls: {calls}")
    print("Azure's JavaScript clients read the emulator's answers: ok", flush=True)


def main():
    if shutil.which("openssl") is None:
        skip("openssl is not installed")
    with tempfile.TemporaryDirectory(prefix="quorate-azure-") as workdir:
        em = Emulator(workdir)
        try:
            if "--clients" in sys.argv:
                clients(em, workdir)
            else:
                interface(em)
        finally:
            em.stop()


if __name__ == "__main__":
    main()
