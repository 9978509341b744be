#!/usr/bin/env python3
"""An Azure emulator for quorate's tests: python3 standard library only. It speaks the documented JSON
of the few calls the `azure` provider and Azure's own JavaScript clients make, with the real paths
(matched without case, as ARM does), api-version required, and ARM's error objects:
  - HTTPS (ARM and the Microsoft identity platform, which Azure's clients only speak over TLS):
    GET  /subscriptions/{sub}/providers/Microsoft.Network/networkInterfaces          the standalone
         and Flexible VMs' NICs (a Uniform scale set's NICs are not in it, as in Azure)
    GET  .../resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces       the same, one group's
    GET  .../resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines[?$filter=virtualMachineScaleSet/id
         eq '...'[&$expand=instanceView]]   a group's standalone and Flexible VMs, or one set's
    GET  .../resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}   sku.capacity,
         orchestrationMode
    GET  .../virtualMachineScaleSets/{name}/virtualMachines[?$expand=instanceView]   (Uniform only)
    GET  .../virtualMachineScaleSets/{name}/networkInterfaces                        (Uniform only)
         every list paged by `nextLink` (absolute, a $skiptoken) after max_page entries;
    POST /{tenant}/oauth2/v2.0/token   client_credentials with the client secret (form), scope
         https://management.azure.com/.default; errors as {"error", "error_description"}
    GET  /{tenant}/v2.0/.well-known/openid-configuration   what MSAL reads before asking for a token
  - plain HTTP (IMDS, at 169.254.169.254 on Azure), every call needing `Metadata: true`:
    GET  /metadata/instance?api-version=...      compute.{subscriptionId,resourceGroupName,vmScaleSetName,name}
    GET  /metadata/identity/oauth2/token?api-version=...&resource=...[&client_id=...]   (strings, as IMDS)
ARM calls need `Authorization: Bearer` with a token this emulator issued and that has not expired
(401 AuthenticationFailed / InvalidAuthenticationToken / ExpiredAuthenticationToken).

What it does not do: no writes through ARM, no resource groups or VMs as resources of their own (a
GET of one), no public IPs, no scopes or roles beyond the denials a test configures. A scale
set's capacity is what the test sets: deleting or adding an instance leaves it, as a scale set's
automatic repair does.

Test-only controls, without authentication, under /_emulator/ on the HTTPS port:
  POST /_emulator/config     {"deny": ["Microsoft.Network/networkInterfaces/read", ...]  (403 AuthorizationFailed),
                              "fail": [{"method", "path_prefix", "status", "body", "times", "retry_after"}]
                                       (that answer instead, `times` defaulting to 1, -1 for ever),
                              "max_page": N, "token_lifetime": seconds}  each key given replaces that setting
  POST /_emulator/scale_set  {"resource_group", "name", "capacity"}  creates or resizes
  POST /_emulator/instances  {"resource_group", "ip", and "vm_scale_set" or "name", optional "computer_name",
                              "tags" (on the NIC), "provisioning_state", "power_state"} -> {"id", "nic_id"}
  POST /_emulator/instances/update {"id", and any field above}
  POST /_emulator/instances/delete {"id"}
  POST /_emulator/imds       {"vm": VM id, "identity": true|false, "client_id": a user-assigned identity's}
  GET  /_emulator/requests   [{"method", "path", "query", "authorized", "status"}] (the token calls give
                              grant_type and client_id, never the secret)
  POST /_emulator/reset      no instances, scale sets, settings or log

Usage: emulator.py --listen HOST:PORT --imds-listen HOST:PORT --cert CERT --key KEY
       --subscription SUB --tenant TENANT --client-id ID --client-secret SECRET
Prints `listening on HOST:PORT imds HOST:PORT` (the real ports) once it serves.
"""
import argparse
import base64
import http.server
import json
import re
import secrets
import ssl
import sys
import threading
import time
import urllib.parse
import uuid

ARM_RESOURCE = "https://management.azure.com/"
SUB = r"/subscriptions/(?P<sub>[^/]+)"
VMSS = SUB + r"/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/virtualMachineScaleSets/(?P<vmss>[^/]+)"
GROUP = SUB + r"/resourceGroups/(?P<rg>[^/]+)/providers"
ROUTES = [
    ("nics", re.compile(SUB + r"/providers/Microsoft\.Network/networkInterfaces$", re.I),
     "Microsoft.Network/networkInterfaces/read"),
    ("group_nics", re.compile(GROUP + r"/Microsoft\.Network/networkInterfaces$", re.I),
     "Microsoft.Network/networkInterfaces/read"),
    ("group_vms", re.compile(GROUP + r"/Microsoft\.Compute/virtualMachines$", re.I),
     "Microsoft.Compute/virtualMachines/read"),
    ("vmss", re.compile(VMSS + "$", re.I), "Microsoft.Compute/virtualMachineScaleSets/read"),
    ("vmss_vms", re.compile(VMSS + "/virtualMachines$", re.I),
     "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read"),
    ("vmss_nics", re.compile(VMSS + "/networkInterfaces$", re.I),
     "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read"),
]
TOKEN_PATH = re.compile(r"^/(?P<tenant>[^/]+)/oauth2/v2\.0/token$")
OPENID_PATH = re.compile(r"^/(?P<tenant>[^/]+)/v2\.0/\.well-known/openid-configuration$")


class ArmError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Emulator:
    def __init__(self, subscription, tenant, client_id, client_secret):
        self.subscription, self.tenant = subscription, tenant
        self.client_id, self.client_secret = client_id, client_secret
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.scale_sets = {}  # (rg lower, name lower) -> {"resource_group", "name", "capacity", "next_instance"}
        self.instances = {}  # VM id lower -> instance dict
        self.tokens = {}  # access token -> expiry (time.time())
        self.deny, self.fail, self.max_page, self.token_lifetime = set(), [], 100, 3599
        self.imds = {"vm": None, "identity": True, "client_id": None}
        self.log = []

    def configure(self, config):
        if "deny" in config:
            self.deny = set(config["deny"])
        if "fail" in config:
            self.fail = [dict(f, times=f.get("times", 1)) for f in config["fail"]]
        if "max_page" in config:
            self.max_page = int(config["max_page"])
        if "token_lifetime" in config:
            self.token_lifetime = int(config["token_lifetime"])

    def take_failure(self, method, path):
        for f in self.fail:
            if f["times"] != 0 and f.get("method", method) == method and path.startswith(f.get("path_prefix", "")):
                f["times"] -= 1
                return f
        return None

    # -- the test's world --------------------------------------------------------------------------

    def set_scale_set(self, body):
        key = (body["resource_group"].lower(), body["name"].lower())
        s = self.scale_sets.setdefault(key, {"resource_group": body["resource_group"], "name": body["name"],
                                             "next_instance": 0, "unique_id": str(uuid.uuid4())})
        s["capacity"] = int(body["capacity"])
        s["mode"] = body.get("orchestration_mode", s.get("mode", "Uniform"))
        return {"id": self.vmss_id(s)}

    def vmss_id(self, s):
        return (f"/subscriptions/{self.subscription}/resourceGroups/{s['resource_group']}/providers/"
                f"Microsoft.Compute/virtualMachineScaleSets/{s['name']}")

    def add_instance(self, body):
        rg = body["resource_group"]
        inst = {"resource_group": rg, "ip": body["ip"], "tags": dict(body.get("tags", {})),
                "provisioning_state": body.get("provisioning_state", "Succeeded"),
                "power_state": body.get("power_state", "running"), "vm_uuid": str(uuid.uuid4())}
        if body.get("vm_scale_set"):
            s = self.scale_sets.get((rg.lower(), body["vm_scale_set"].lower()))
            if s is None:
                raise ValueError(f"no scale set {rg}/{body['vm_scale_set']}")
            n = s["next_instance"]
            s["next_instance"] += 1
            inst.update(vmss=s["name"], uniform=s["mode"] == "Uniform",
                        computer_name=body.get("computer_name", f"{s['name']}{n:06x}"))
            if inst["uniform"]:
                inst.update(instance_id=str(n), name=f"{s['name']}_{n}")
                inst["id"] = f"{self.vmss_id(s)}/virtualMachines/{n}"
                inst["nic_id"] = f"{inst['id']}/networkInterfaces/{s['name']}-nic"
        else:
            inst.update(vmss=None, uniform=False, name=body["name"],
                        computer_name=body.get("computer_name", body["name"]))
        if not inst["uniform"]:
            # A Flexible set's instances are plain VMs, named after the set and a suffix of their own.
            if inst["vmss"]:
                inst["name"] = f"{inst['vmss']}_{inst['vm_uuid'][:8]}"
            group = f"/subscriptions/{self.subscription}/resourceGroups/{rg}/providers"
            inst["id"] = f"{group}/Microsoft.Compute/virtualMachines/{inst['name']}"
            inst["nic_id"] = f"{group}/Microsoft.Network/networkInterfaces/{inst['name']}-nic"
        self.instances[inst["id"].lower()] = inst
        return {"id": inst["id"], "nic_id": inst["nic_id"]}

    def update_instance(self, body):
        inst = self.instances[body["id"].lower()]
        for k in ("ip", "tags", "provisioning_state", "power_state", "computer_name"):
            if k in body:
                inst[k] = body[k]
        return {"id": inst["id"]}

    # -- ARM -------------------------------------------------------------------------------------

    def check_token(self, header):
        if not header:
            raise ArmError(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
        if not header.startswith("Bearer "):
            raise ArmError(401, "AuthenticationFailed",
                           "Authentication failed. The 'Authorization' header is provided in an invalid format.")
        expiry = self.tokens.get(header[len("Bearer "):])
        if expiry is None:
            raise ArmError(401, "InvalidAuthenticationToken", "The access token is invalid.")
        if expiry <= time.time():
            stamp = time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(expiry))
            now = time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime())
            raise ArmError(401, "ExpiredAuthenticationToken",
                           f"The access token expiry UTC time '{stamp}' is earlier than current UTC time '{now}'.")

    def arm(self, path, query, host):
        for name, pattern, action in ROUTES:
            route = pattern.match(path)
            if route:
                break
        else:
            raise ArmError(404, "InvalidResourceType", f"The resource type could not be found for {path}.")
        if not query.get("api-version"):
            raise ArmError(400, "MissingApiVersionParameter",
                           "The api-version query parameter (?api-version=) is required for all requests.")
        fields = route.groupdict()
        if fields["sub"].lower() != self.subscription.lower():
            raise ArmError(404, "SubscriptionNotFound", f"The subscription '{fields['sub']}' could not be found.")
        scope = path[:path.lower().find("/providers/")]
        if action in self.deny:
            raise ArmError(403, "AuthorizationFailed",
                           f"The client '{self.client_id}' with object id '{self.client_id}' does not have "
                           f"authorization to perform action '{action}' over scope '{scope}' or the scope is "
                           "invalid. If access was recently granted, please refresh your credentials.")
        if name == "nics":
            items = [self.nic(i) for i in self.sorted_instances() if not i["uniform"]]
            return self.page(items, path, query, host)
        if name == "group_nics":
            items = [self.nic(i) for i in self.sorted_instances()
                     if not i["uniform"] and i["resource_group"].lower() == fields["rg"].lower()]
            return self.page(items, path, query, host)
        if name == "group_vms":
            return self.page(self.group_vms(fields["rg"], query), path, query, host)
        s = self.scale_sets.get((fields["rg"].lower(), fields["vmss"].lower()))
        if s is None:
            raise ArmError(404, "ResourceNotFound",
                           f"The Resource 'Microsoft.Compute/virtualMachineScaleSets/{fields['vmss']}' under resource "
                           f"group '{fields['rg']}' was not found. For more details please go to "
                           "https://aka.ms/ARMResourceNotFoundFix")
        members = [i for i in self.sorted_instances() if i["vmss"] == s["name"]
                   and i["resource_group"].lower() == s["resource_group"].lower()]
        if name == "vmss":
            return self.scale_set(s)
        if s["mode"] != "Uniform":
            operation = "VMScaleSetVMs.List" if name == "vmss_vms" else "VMScaleSetNetworkInterfaces.List"
            raise ArmError(400, "OperationNotAllowed",
                           f"Operation '{operation}' is not allowed on Virtual Machine Scale Set '{s['name']}' since "
                           "it is marked for Flexible orchestration mode.")
        if name == "vmss_vms":
            expand = query.get("$expand", "").lower() == "instanceview"
            return self.page([self.vmss_vm(i, expand) for i in members], path, query, host)
        return self.page([self.nic(i) for i in members], path, query, host)

    def group_vms(self, rg, query):
        """A resource group's VMs (not a Uniform set's): all, or with the one $filter ARM takes there,
        those of one scale set; the instance view only with that filter."""
        wanted = None
        if "$filter" in query:
            match = re.fullmatch(r"\s*virtualMachineScaleSet/id\s+eq\s+'([^']+)'\s*", query["$filter"], re.I)
            if not match:
                raise ArmError(400, "InvalidParameter",
                               f"The value of parameter $filter is invalid: {query['$filter']}. Allowed value is "
                               "'virtualMachineScaleSet/id' eq '/subscriptions/...'.")
            wanted = match.group(1).lower()
        expand = query.get("$expand", "").lower() == "instanceview"
        if expand and wanted is None:
            raise ArmError(400, "InvalidParameter", "$expand=instanceView can only be specified with a valid $filter.")
        out = []
        for i in self.sorted_instances():
            if i["uniform"] or i["resource_group"].lower() != rg.lower():
                continue
            set_id = self.vmss_id(self.scale_sets[(rg.lower(), i["vmss"].lower())]) if i["vmss"] else None
            if wanted is not None and (set_id or "").lower() != wanted:
                continue
            out.append(self.vm(i, expand, set_id))
        return out

    def sorted_instances(self):
        return sorted(self.instances.values(), key=lambda i: (i["name"].lower()))

    def page(self, items, path, query, host):
        start = 0
        if "$skiptoken" in query:
            try:
                start = int(base64.urlsafe_b64decode(query["$skiptoken"].encode()).decode())
            except ValueError:
                raise ArmError(400, "InvalidSkipToken", "The skip token is invalid.")
        body = {"value": items[start:start + self.max_page]}
        if start + self.max_page < len(items):
            token = base64.urlsafe_b64encode(str(start + self.max_page).encode()).decode()
            rest = urllib.parse.urlencode({"api-version": query["api-version"], "$skiptoken": token}, safe="")
            for k in ("$filter", "$expand"):
                if k in query:
                    rest += "&" + urllib.parse.urlencode({k: query[k]})
            body["nextLink"] = f"https://{host}{path}?{rest}"
        return body

    def scale_set(self, s):
        return {"name": s["name"], "id": self.vmss_id(s), "type": "Microsoft.Compute/virtualMachineScaleSets",
                "location": "westeurope",
                "sku": {"name": "Standard_D2s_v3", "tier": "Standard", "capacity": s["capacity"]},
                "properties": {"singlePlacementGroup": s["mode"] == "Uniform", "orchestrationMode": s["mode"],
                               "upgradePolicy": {"mode": "Manual"}, "provisioningState": "Succeeded",
                               "overprovision": False, "uniqueId": s["unique_id"],
                               "timeCreated": "2026-11-24T09:00:00.0000000+00:00"}}

    def vmss_vm(self, i, expand):
        vm = {"name": i["name"], "id": i["id"], "type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
              "location": "westeurope", "instanceId": i["instance_id"],
              "sku": {"name": "Standard_D2s_v3", "tier": "Standard"},
              "properties": {"latestModelApplied": True, "vmId": i["vm_uuid"],
                             "provisioningState": i["provisioning_state"],
                             "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
                             "osProfile": {"computerName": i["computer_name"], "adminUsername": "azureuser",
                                           "secrets": []},
                             "networkProfile": {"networkInterfaces": [{"id": i["nic_id"],
                                                                       "properties": {"primary": True}}]}}}
        if expand:
            vm["properties"]["instanceView"] = {"platformUpdateDomain": 0, "platformFaultDomain": 0,
                                                "computerName": i["computer_name"], "osName": "debian",
                                                "statuses": self.statuses(i)}
        return vm

    def vm(self, i, expand, set_id):
        """A standalone or Flexible instance as Microsoft.Compute/virtualMachines."""
        vm = {"name": i["name"], "id": i["id"], "type": "Microsoft.Compute/virtualMachines", "location": "westeurope",
              "properties": {"vmId": i["vm_uuid"], "provisioningState": i["provisioning_state"],
                             "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
                             "osProfile": {"computerName": i["computer_name"], "adminUsername": "azureuser",
                                           "secrets": []},
                             "networkProfile": {"networkInterfaces": [{"id": i["nic_id"],
                                                                       "properties": {"primary": True}}]}}}
        if set_id:
            vm["properties"]["virtualMachineScaleSet"] = {"id": set_id}
        if expand:
            vm["properties"]["instanceView"] = {"computerName": i["computer_name"], "osName": "debian",
                                                "statuses": self.statuses(i)}
        return vm

    @staticmethod
    def statuses(i):
        out = [{"code": f"ProvisioningState/{i['provisioning_state'].lower()}", "level": "Info",
                "displayStatus": f"Provisioning {i['provisioning_state'].lower()}"}]
        if i["power_state"]:
            out.append({"code": f"PowerState/{i['power_state']}", "level": "Info",
                        "displayStatus": f"VM {i['power_state']}"})
        return out

    def nic(self, i):
        config_id = f"{i['nic_id']}/ipConfigurations/ipconfig1"
        subnet = (f"/subscriptions/{self.subscription}/resourceGroups/{i['resource_group']}/providers/"
                  "Microsoft.Network/virtualNetworks/etcd/subnets/default")
        nic = {"name": i["nic_id"].rsplit("/", 1)[1], "id": i["nic_id"], "etag": f'W/"{i["vm_uuid"]}"',
               "location": "westeurope",
               "properties": {"provisioningState": "Succeeded", "resourceGuid": i["vm_uuid"],
                              "ipConfigurations": [{"name": "ipconfig1", "id": config_id, "etag": f'W/"{i["vm_uuid"]}"',
                                                    "properties": {"provisioningState": "Succeeded",
                                                                   "privateIPAddress": i["ip"],
                                                                   "privateIPAllocationMethod": "Dynamic",
                                                                   "subnet": {"id": subnet}, "primary": True,
                                                                   "privateIPAddressVersion": "IPv4"}}],
                              "dnsSettings": {"dnsServers": [], "appliedDnsServers": []},
                              "macAddress": "00-0D-3A-00-00-01", "enableAcceleratedNetworking": False,
                              "enableIPForwarding": False, "primary": True,
                              "virtualMachine": {"id": i["id"]}, "nicType": "Standard"},
               "type": "Microsoft.Network/networkInterfaces"}
        if i["tags"]:
            nic["tags"] = i["tags"]
        return nic

    # -- tokens ------------------------------------------------------------------------------------

    def issue(self):
        token = "eyJ0eXAiOiJKV1QifQ." + secrets.token_urlsafe(24)
        self.tokens[token] = time.time() + self.token_lifetime
        return token

    def client_credentials(self, tenant, form):
        if tenant != self.tenant:
            return 400, {"error": "invalid_request",
                         "error_description": f"AADSTS90002: Tenant '{tenant}' not found. Check to make sure you "
                                              "have the correct tenant ID and are signing into the correct cloud."}
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type",
                         "error_description": "AADSTS70003: The app requested an unsupported grant type."}
        if form.get("client_id") != self.client_id:
            return 400, {"error": "unauthorized_client",
                         "error_description": f"AADSTS700016: Application with identifier '{form.get('client_id')}' "
                                              f"was not found in the directory '{tenant}'."}
        if form.get("client_secret") != self.client_secret:
            return 401, {"error": "invalid_client",
                         "error_description": "AADSTS7000215: Invalid client secret provided. Ensure the secret "
                                              "being sent in the request is the client secret value, not the "
                                              "client secret ID."}
        if form.get("scope") != ARM_RESOURCE + ".default":
            return 400, {"error": "invalid_scope",
                         "error_description": f"AADSTS70011: The provided value for scope {form.get('scope')} is "
                                              "not valid."}
        return 200, {"token_type": "Bearer", "expires_in": self.token_lifetime,
                     "ext_expires_in": self.token_lifetime, "access_token": self.issue()}

    def imds_call(self, path, query, headers):
        if headers.get("Metadata", "").lower() != "true":
            return 400, {"error": "Bad request. Required metadata header not specified"}
        if not query.get("api-version"):
            return 400, {"error": "Bad request. api-version was not specified in the request. For more "
                                  "information refer to aka.ms/azureimds"}
        vm = self.instances.get((self.imds["vm"] or "").lower())
        if path == "/metadata/instance":
            if vm is None:
                return 404, {"error": "Not found"}
            return 200, {"compute": {"name": vm["name"], "resourceGroupName": vm["resource_group"],
                                     "subscriptionId": self.subscription, "vmScaleSetName": vm["vmss"] or "",
                                     "vmId": vm["vm_uuid"], "location": "westeurope", "osType": "Linux",
                                     "vmSize": "Standard_D2s_v3", "zone": ""},
                         "network": {"interface": [{"ipv4": {"ipAddress": [{"privateIpAddress": vm["ip"],
                                                                            "publicIpAddress": ""}]}}]}}
        if path == "/metadata/identity/oauth2/token":
            if query.get("resource") != ARM_RESOURCE:
                return 400, {"error": "invalid_resource",
                             "error_description": "AADSTS500011: The resource principal was not found."}
            if not self.imds["identity"] or query.get("client_id", self.imds["client_id"]) != self.imds["client_id"]:
                return 400, {"error": "invalid_request", "error_description": "Identity not found"}
            now = int(time.time())
            return 200, {"access_token": self.issue(), "client_id": self.imds["client_id"] or "system-assigned",
                         "expires_in": str(self.token_lifetime), "expires_on": str(now + self.token_lifetime),
                         "ext_expires_in": str(self.token_lifetime), "not_before": str(now),
                         "resource": ARM_RESOURCE, "token_type": "Bearer"}
        return 404, {"error": "Not found"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    emulator = None

    def log_message(self, *args):
        pass  # the request log at /_emulator/requests is what tests read

    def send_json(self, code, body, headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def read_raw(self):
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        raw = self.read_raw()
        if url.path.startswith("/_emulator/"):
            return self.control(method, url.path, raw)
        em = self.emulator
        entry = {"method": method, "path": url.path, "query": query, "authorized": False}
        headers = ()
        with em.lock:
            em.log.append(entry)
            failure = em.take_failure(method, url.path)
            try:
                if failure:
                    code, body = failure["status"], failure.get("body", "").encode()
                    if "retry_after" in failure:
                        headers = (("Retry-After", str(failure["retry_after"])),)
                elif TOKEN_PATH.match(url.path) and method == "POST":
                    form = dict(urllib.parse.parse_qsl(raw.decode(errors="replace")))
                    entry["query"] = {k: v for k, v in form.items() if k in ("grant_type", "client_id", "scope")}
                    code, body = em.client_credentials(TOKEN_PATH.match(url.path)["tenant"], form)
                elif OPENID_PATH.match(url.path) and method == "GET":
                    code, body = 200, self.openid(OPENID_PATH.match(url.path)["tenant"])
                elif method == "GET":
                    em.check_token(self.headers.get("Authorization"))
                    entry["authorized"] = True
                    code, body = 200, em.arm(url.path, query, self.headers.get("Host", ""))
                else:
                    raise ArmError(404, "InvalidResourceType", f"The resource type could not be found for {url.path}.")
            except ArmError as e:
                code, body = e.status, {"error": {"code": e.code, "message": e.message}}
            entry["status"] = code
        if code >= 400:
            headers += (("x-ms-failure-cause", "gateway"),)
        self.send_json(code, body, headers)

    def openid(self, tenant):
        base = f"https://{self.headers.get('Host', '')}/{tenant}"
        return {"token_endpoint": f"{base}/oauth2/v2.0/token",
                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                "issuer": f"{base}/v2.0", "jwks_uri": f"{base}/discovery/v2.0/keys",
                "end_session_endpoint": f"{base}/oauth2/v2.0/logout", "response_types_supported": ["code", "token"],
                "token_endpoint_auth_methods_supported": ["client_secret_post"]}

    def control(self, method, path, raw):
        em = self.emulator
        try:
            body = json.loads(raw) if raw else {}
        except ValueError as e:
            return self.send_json(400, {"error": str(e)})
        with em.lock:
            try:
                if method == "GET" and path == "/_emulator/requests":
                    return self.send_json(200, em.log)
                if method == "POST" and path == "/_emulator/reset":
                    em.reset()
                    return self.send_json(200, {})
                if method == "POST" and path == "/_emulator/config":
                    em.configure(body)
                    return self.send_json(200, {})
                if method == "POST" and path == "/_emulator/scale_set":
                    return self.send_json(200, em.set_scale_set(body))
                if method == "POST" and path == "/_emulator/instances":
                    return self.send_json(200, em.add_instance(body))
                if method == "POST" and path == "/_emulator/instances/update":
                    return self.send_json(200, em.update_instance(body))
                if method == "POST" and path == "/_emulator/instances/delete":
                    del em.instances[body["id"].lower()]
                    return self.send_json(200, {})
                if method == "POST" and path == "/_emulator/imds":
                    em.imds.update(body)
                    return self.send_json(200, {})
            except (ValueError, TypeError, KeyError) as e:
                return self.send_json(400, {"error": repr(e)})
        self.send_json(404, {"error": f"no emulator control {method} {path}"})

    def do_GET(self):
        self.serve("GET")

    def do_POST(self):
        self.serve("POST")


class ImdsHandler(Handler):
    def serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        self.read_raw()
        em = self.emulator
        entry = {"method": method, "path": url.path, "query": query, "authorized": False}
        with em.lock:
            em.log.append(entry)
            failure = em.take_failure(method, url.path)
            if failure:
                code, body = failure["status"], failure.get("body", "").encode()
            elif method != "GET":
                code, body = 405, {"error": "Method not allowed"}
            else:
                code, body = em.imds_call(url.path, query, self.headers)
            entry["status"] = code
        headers = (("Retry-After", str(failure["retry_after"])),) if failure and "retry_after" in failure else ()
        self.send_json(code, body, headers)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that rejects our certificate or hangs up mid-request is part of the tests.
        print(f"azure emulator: connection from {client_address[0]} failed: {sys.exc_info()[1]}",
              file=sys.stderr, flush=True)


def split(listen):
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def main():
    p = argparse.ArgumentParser(description="Azure ARM, token endpoint and IMDS emulator for tests.")
    p.add_argument("--listen", required=True, help="HOST:PORT of ARM and the token endpoint (HTTPS), port 0 for any")
    p.add_argument("--imds-listen", required=True, help="HOST:PORT of IMDS (plain HTTP), port 0 for any")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--subscription", required=True)
    p.add_argument("--tenant", required=True)
    p.add_argument("--client-id", required=True)
    p.add_argument("--client-secret", required=True)
    args = p.parse_args()
    Handler.emulator = Emulator(args.subscription, args.tenant, args.client_id, args.client_secret)
    server = Server(split(args.listen), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    # The handshake then happens in the request's own thread, so a silent client blocks nobody.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    imds = Server(split(args.imds_listen), ImdsHandler)
    threading.Thread(target=imds.serve_forever, daemon=True).start()
    print(f"listening on {server.server_address[0]}:{server.server_address[1]} "
          f"imds {imds.server_address[0]}:{imds.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
