#!/usr/bin/env python3
"""A Compute Engine emulator for quorate's tests: the Compute API, the metadata server and the OAuth
token endpoint on one HTTP port, python3 standard library (plus `cryptography`, when installed, to
check JWT signatures).

It speaks the documented JSON of the few calls the `gce` provider and Google's own clients make:
  - GET /compute/v1/projects/P/aggregated/instances (filter, maxResults, pageToken,
    returnPartialSuccess): an instanceAggregatedList whose `items` maps every zone the emulator
    knows to its instances on this page or to a NO_RESULTS_ON_PAGE warning, `nextPageToken` while
    more follow, `unreachables` when a test makes zones unreachable;
  - GET /compute/v1/projects/P/zones/Z/instances (the same, for one zone);
  - GET /compute/v1/projects/P/zones/Z/instanceGroupManagers/N and
    /compute/v1/projects/P/regions/R/instanceGroupManagers/N: an instanceGroupManager with targetSize;
  - the metadata server under /computeMetadata/v1/ (project/project-id, project/numeric-project-id,
    instance/attributes/created-by, instance/service-accounts/default/token), which, like the real
    one, refuses a request without `Metadata-Flavor: Google` and says `Metadata-Flavor: Google`;
  - POST /token: a service account's RS256 JWT (RFC 7523 jwt-bearer grant) for an access token.
Compute calls need `Authorization: Bearer T` with a token this emulator handed out (and not expired)
or one given with --token. Errors are Google's: {"error": {"code", "message", "errors": [{"message",
"domain", "reason"}], "status"}}; the token endpoint's are OAuth's {"error", "error_description"}.

Filters: terms `FIELD = "V"`, `FIELD != "V"`, `FIELD:"V"`, `FIELD:*` (quotes optional) on name, status,
zone, tags.items, labels.KEY, joined by AND, each optionally in parentheses. Anything else is a 400,
as the real API refuses what it cannot parse.

What it does not do: no instance resources beyond what a test puts in (no disks, no machine types),
no list snapshots (a page token is an offset into the list as it is now), no IAM beyond the
permissions a test denies, no operations (the control endpoint changes state at once).

Test-only controls, without authentication, under /_emulator/:
  POST /_emulator/instances {"name", "zone", "ip", "nat_ip", "status", "labels", "tags", "mig"}
                            adds or replaces an instance (status RUNNING unless given; "mig" names a
                            group of that zone or region, which then sets its created-by item)
  POST /_emulator/instances/NAME {"status": "TERMINATED"} changes an instance's status
  DELETE /_emulator/instances/NAME                        deletes it
  POST /_emulator/migs      {"name", "zone" | "region", "target_size"} adds or replaces a group
  POST /_emulator/config    {"deny": ["compute.instances.list", ...],
                             "throttle": N (the next N Compute calls: 429 rateLimitExceeded),
                             "throttle_status": 429 | 403 (the code those throttles carry),
                             "fail": [{"method", "path_prefix", "status", "body", "times"}],
                             "unreachables": ["zones/us-east1-b"], "max_page": N, "token_ttl": S,
                             "created_by": "projects/P/zones/Z/instanceGroupManagers/N" (the asking
                             instance's attribute)}  each key given replaces that setting
  GET  /_emulator/requests  the requests so far: [{"method", "path", "query", "authorized", "status"}]

Usage: emulator.py --listen HOST:PORT --project P [--project-number N] [--key-file SA.json]
       [--token T]... [--zones us-central1-a,...]
Prints `listening on HOST:PORT` (the real port) once it serves.
"""
import argparse
import base64
import json
import re
import sys
import threading
import time
import urllib.parse
import uuid
import http.server

COMPUTE = "https://www.googleapis.com/compute/v1"
INSTANCE_STATUSES = {"PROVISIONING", "STAGING", "RUNNING", "STOPPING", "STOPPED", "SUSPENDING", "SUSPENDED",
                     "TERMINATED", "REPAIRING"}
TERM = re.compile(r'\s*\(?\s*([a-zA-Z_][a-zA-Z0-9_.-]*)\s*(=|!=|:)\s*("([^"\\]*)"|\*|[^\s()"]+)\s*\)?\s*')


class ApiError(Exception):
    def __init__(self, code, status, reason, message, domain="global"):
        super().__init__(message)
        self.code, self.status, self.reason, self.message, self.domain = code, status, reason, message, domain

    def body(self):
        return {"error": {"code": self.code, "message": self.message,
                          "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}],
                          "status": self.status}}


def bad_request(message):
    return ApiError(400, "INVALID_ARGUMENT", "invalid", message)


def parse_filter(text):
    """[(field, op, value)]; value None for `:*`."""
    terms = []
    rest = text.strip()
    while rest:
        m = TERM.match(rest)
        if not m:
            raise bad_request(f"Invalid value for field 'filter': '{text}'. Invalid list filter expression.")
        field, op, raw = m.group(1), m.group(2), m.group(3)
        value = None if raw == "*" else (m.group(4) if m.group(4) is not None else raw)
        if value is None and op != ":":
            raise bad_request(f"Invalid value for field 'filter': '{text}'.")
        if not (field in ("name", "status", "zone", "tags.items") or field.startswith("labels.")):
            raise bad_request(f"Invalid value for field 'filter': '{text}'. Unsupported field '{field}'.")
        terms.append((field, op, value))
        rest = rest[m.end():]
        if rest.startswith("AND ") or rest.startswith("AND("):
            rest = rest[3:]
        elif rest:
            raise bad_request(f"Invalid value for field 'filter': '{text}'. Invalid list filter expression.")
    return terms


def matches(instance, terms):
    for field, op, value in terms:
        if field == "tags.items":
            have = instance["tags"]
        elif field.startswith("labels."):
            key = field[len("labels."):]
            have = [instance["labels"][key]] if key in instance["labels"] else []
        else:
            have = [instance[field]]
        if value is None:
            ok = bool(have)
        elif op == "!=":
            ok = value not in have
        else:
            ok = value in have
        if not ok:
            return False
    return True


class Emulator:
    def __init__(self, project, project_number, zones, key, tokens):
        self.lock = threading.Lock()
        self.project, self.project_number = project, project_number
        self.zones = list(zones)
        self.key = key  # the service-account key JSON whose JWTs /token accepts
        self.public_key = None
        if key is not None:
            try:
                from cryptography.hazmat.primitives import serialization
                self.public_key = serialization.load_pem_private_key(key["private_key"].encode(), None).public_key()
            except ImportError:
                print("gce emulator: no `cryptography`: JWT signatures are not checked", file=sys.stderr, flush=True)
        self.tokens = {t: float("inf") for t in tokens}  # token -> expiry (time.time())
        self.instances = {}  # name -> our record
        self.migs = {}  # (kind, location, name) -> record
        self.log = []
        self.next_id = 1000
        self.deny, self.fail, self.unreachables = set(), [], []
        self.throttle, self.throttle_status, self.max_page, self.token_ttl = 0, 429, 0, 3600
        self.created_by = ""

    # ----- state the tests set -----
    def configure(self, c):
        if "deny" in c:
            self.deny = set(c["deny"])
        if "throttle" in c:
            self.throttle = int(c["throttle"])
        if "throttle_status" in c:
            self.throttle_status = int(c["throttle_status"])
        if "fail" in c:
            self.fail = [dict(f, times=f.get("times", 1)) for f in c["fail"]]
        if "unreachables" in c:
            self.unreachables = list(c["unreachables"])
        if "max_page" in c:
            self.max_page = int(c["max_page"])
        if "token_ttl" in c:
            self.token_ttl = int(c["token_ttl"])
        if "created_by" in c:
            self.created_by = str(c["created_by"])

    def put_instance(self, b):
        name, zone = b["name"], b["zone"]
        status = b.get("status", "RUNNING")
        if status not in INSTANCE_STATUSES:
            raise ValueError(f"status {status} is not an instance status")
        ip = b.get("ip", "")
        # Besides loopback, two addresses no member may have, for the tests that quorate refuses them:
        # nothing connects to either.
        if ip and not ip.startswith("127.0.0.") and ip not in ("0.0.0.0", "300.1.1.1"):
            raise ValueError(f"{ip}: instances get 127.0.0.x addresses only (or 0.0.0.0, 300.1.1.1 to be refused)")
        if zone not in self.zones:
            self.zones.append(zone)
        self.next_id += 1
        self.instances[name] = {"name": name, "zone": zone, "status": status, "ip": ip, "nat_ip": b.get("nat_ip", ""),
                                "labels": dict(b.get("labels", {})), "tags": list(b.get("tags", [])),
                                "created_by": self.mig_path(zone, b["mig"]) if b.get("mig") else "",
                                "id": str(7000000000000000000 + self.next_id),
                                "created": time.strftime("%Y-%m-%dT%H:%M:%S.000-07:00")}

    def mig_path(self, zone, name):
        for (kind, location, n) in self.migs:
            if n == name and (location == zone or (kind == "regions" and zone.startswith(location + "-"))):
                return f"projects/{self.project_number}/{kind}/{location}/instanceGroupManagers/{name}"
        raise ValueError(f"no group {name} holds zone {zone}")

    def put_mig(self, b):
        kind, location = ("zones", b["zone"]) if "zone" in b else ("regions", b["region"])
        self.migs[(kind, location, b["name"])] = {"target_size": int(b["target_size"]), "id": str(5000 + len(self.migs))}

    def take_failure(self, method, path):
        for f in self.fail:
            if f["times"] != 0 and f.get("method", method) == method and path.startswith(f.get("path_prefix", "")):
                f["times"] -= 1
                return f
        return None

    # ----- the documented shapes -----
    def instance_json(self, i):
        zone_url = f"{COMPUTE}/projects/{self.project}/zones/{i['zone']}"
        nic = {"kind": "compute#networkInterface", "name": "nic0", "fingerprint": "ZHVtbXk=",
               "network": f"{COMPUTE}/projects/{self.project}/global/networks/default",
               "subnetwork": f"{COMPUTE}/projects/{self.project}/regions/{i['zone'][:-2]}/subnetworks/default",
               "networkIP": i["ip"], "stackType": "IPV4_ONLY"}
        if i["nat_ip"]:
            nic["accessConfigs"] = [{"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT", "name": "External NAT",
                                     "natIP": i["nat_ip"], "networkTier": "PREMIUM"}]
        items = [{"key": "startup-script", "value": "#!/bin/sh\nexec quorate run\n"}]
        if i["created_by"]:
            items.append({"key": "created-by", "value": i["created_by"]})
        out = {"kind": "compute#instance", "id": i["id"], "creationTimestamp": i["created"], "name": i["name"],
               "tags": {"items": i["tags"], "fingerprint": "dGFncw=="} if i["tags"] else {"fingerprint": "42WmSpB8rSM="},
               "machineType": f"{zone_url}/machineTypes/e2-small", "status": i["status"], "zone": zone_url,
               "canIpForward": False, "networkInterfaces": [nic] if i["ip"] else [],
               "metadata": {"kind": "compute#metadata", "fingerprint": "bWV0YQ==", "items": items},
               "selfLink": f"{zone_url}/instances/{i['name']}", "labelFingerprint": "42WmSpB8rSM=",
               "startRestricted": False, "deletionProtection": False, "cpuPlatform": "Intel Broadwell"}
        if i["labels"]:
            out["labels"] = i["labels"]
        return out

    def page(self, query, instances):
        terms = parse_filter(query.get("filter", ""))
        chosen = sorted((i for i in instances if matches(i, terms)), key=lambda i: (i["zone"], i["name"]))
        size = int(query.get("maxResults", "500"))
        if not 0 <= size <= 500:
            raise bad_request(f"Invalid value for field 'maxResults': '{size}'. Must be less than or equal to 500")
        size = size or 500
        if self.max_page:
            size = min(size, self.max_page)
        start = 0
        if query.get("pageToken"):
            try:
                start = int(base64.urlsafe_b64decode(query["pageToken"].encode()).decode().split(":")[1])
            except (ValueError, IndexError, UnicodeDecodeError):
                raise bad_request(f"Invalid value for field 'pageToken': '{query['pageToken']}'.")
        on_page = chosen[start:start + size]
        token = ""
        if start + size < len(chosen):
            token = base64.urlsafe_b64encode(f"{uuid.uuid4().hex[:8]}:{start + size}".encode()).decode()
        return on_page, token

    def aggregated(self, query):
        if self.unreachables and query.get("returnPartialSuccess") != "true":
            raise ApiError(503, "UNAVAILABLE", "backendError", "The service is currently unavailable.")
        reachable = [i for i in self.instances.values() if f"zones/{i['zone']}" not in self.unreachables]
        on_page, token = self.page(query, reachable)
        items = {}
        for zone in sorted(self.zones):
            scope = f"zones/{zone}"
            if scope in self.unreachables:
                continue
            here = [self.instance_json(i) for i in on_page if i["zone"] == zone]
            items[scope] = {"instances": here} if here else {"warning": {
                "code": "NO_RESULTS_ON_PAGE",
                "message": "There are no results for scope 'zones/" + zone + "' on this page.",
                "data": [{"key": "scope", "value": scope}]}}
        out = {"kind": "compute#instanceAggregatedList", "id": f"projects/{self.project}/aggregated/instances",
               "items": items, "selfLink": f"{COMPUTE}/projects/{self.project}/aggregated/instances"}
        if token:
            out["nextPageToken"] = token
        if self.unreachables:
            out["unreachables"] = list(self.unreachables)
        return out

    def zone_list(self, zone, query):
        on_page, token = self.page(query, [i for i in self.instances.values() if i["zone"] == zone])
        out = {"kind": "compute#instanceList", "id": f"projects/{self.project}/zones/{zone}/instances",
               "items": [self.instance_json(i) for i in on_page],
               "selfLink": f"{COMPUTE}/projects/{self.project}/zones/{zone}/instances"}
        if token:
            out["nextPageToken"] = token
        return out

    def mig(self, kind, location, name):
        m = self.migs.get((kind, location, name))
        if m is None:
            raise ApiError(404, "NOT_FOUND", "notFound",
                           f"The resource 'projects/{self.project}/{kind}/{location}/instanceGroupManagers/{name}' "
                           "was not found")
        base = f"{COMPUTE}/projects/{self.project}/{kind}/{location}"
        out = {"kind": "compute#instanceGroupManager", "id": m["id"], "creationTimestamp": "2026-11-24T09:00:00.000-07:00",
               "name": name, "instanceTemplate": f"{COMPUTE}/projects/{self.project}/global/instanceTemplates/{name}",
               "instanceGroup": f"{base}/instanceGroups/{name}", "baseInstanceName": name, "fingerprint": "bWln",
               "currentActions": {"none": m["target_size"], "creating": 0, "recreating": 0, "deleting": 0,
                                  "abandoning": 0, "restarting": 0, "refreshing": 0, "verifying": 0},
               "status": {"isStable": True}, "targetSize": m["target_size"], "selfLink": f"{base}/instanceGroupManagers/{name}",
               "updatePolicy": {"type": "PROACTIVE"}}
        out["zone" if kind == "zones" else "region"] = base
        return out

    def issue_token(self):
        token = "ya29.emu-" + uuid.uuid4().hex
        self.tokens[token] = time.time() + self.token_ttl
        return {"access_token": token, "expires_in": self.token_ttl, "token_type": "Bearer"}

    def exchange(self, form):
        """The jwt-bearer grant: the JWT's signature, issuer, audience, scope and times checked."""
        def refuse(description):
            return 400, {"error": "invalid_grant", "error_description": description}
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type."}
        if self.key is None:
            return refuse("No service account key is known to this emulator.")
        parts = form.get("assertion", "").split(".")
        if len(parts) != 3:
            return refuse("Invalid JWT: Token must be a short-lived token and in a reasonable timeframe.")
        try:
            header, claims = (json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in parts[:2])
            signature = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        except (ValueError, TypeError):
            return refuse("Invalid JWT: the parts are not base64url JSON.")
        if header.get("alg") != "RS256" or header.get("typ") != "JWT":
            return refuse("Invalid JWT header.")
        if claims.get("iss") != self.key["client_email"] or claims.get("aud") != self.key["token_uri"]:
            return refuse("Invalid JWT: the issuer or audience is not the key's.")
        if "compute" not in claims.get("scope", ""):
            return 400, {"error": "invalid_scope", "error_description": "No compute scope asked."}
        now = time.time()
        if not (claims.get("iat", 0) - 300 <= now <= claims.get("exp", 0)) or claims["exp"] - claims["iat"] > 3600:
            return refuse("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        if self.public_key is not None:
            from cryptography.exceptions import InvalidSignature
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.asymmetric import padding
            try:
                self.public_key.verify(signature, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),
                                       hashes.SHA256())
            except InvalidSignature:
                return refuse("Invalid JWT Signature.")
        return 200, self.issue_token()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    emulator = None

    def log_message(self, *args):
        pass  # the request log at /_emulator/requests is what tests read

    def send(self, code, body, content_type="application/json", headers=()):
        data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def read_raw(self):
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def bearer_ok(self):
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return False
        expiry = self.emulator.tokens.get(auth[len("Bearer "):])
        return expiry is not None and time.time() < expiry

    def serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        em = self.emulator
        raw = self.read_raw()  # read whether used or not: it would be parsed as the next request
        if url.path.startswith("/_emulator/"):
            return self.control(method, url.path, raw)
        with em.lock:
            authorized = self.bearer_ok()
            entry = {"method": method, "path": url.path, "query": query, "authorized": authorized}
            em.log.append(entry)
            headers = ()
            content_type = "application/json"
            try:
                failure = em.take_failure(method, url.path)
                if failure:
                    code, body = failure["status"], failure.get("body", "").encode()
                elif url.path.startswith("/computeMetadata/"):
                    headers = (("Metadata-Flavor", "Google"), ("Server", "Metadata Server for VM"))
                    code, body, content_type = self.metadata(url.path, query)
                elif url.path == "/token" and method == "POST":
                    form = dict(urllib.parse.parse_qsl(raw.decode(errors="replace")))
                    code, body = em.exchange(form)
                elif url.path.startswith("/compute/v1/"):
                    code, body = self.compute(method, url.path, query, authorized)
                else:
                    code, body = 404, ApiError(404, "NOT_FOUND", "notFound", f"Not Found: {url.path}").body()
            except ApiError as e:
                code, body = e.code, e.body()
            entry["status"] = code
        self.send(code, body, content_type, headers)

    def metadata(self, path, query):
        em = self.emulator
        if self.headers.get("Metadata-Flavor") != "Google":
            return 403, "Missing Metadata-Flavor:Google header.\n", "text/html"
        if path == "/computeMetadata/v1/project/project-id":
            return 200, em.project, "application/text"
        if path == "/computeMetadata/v1/project/numeric-project-id":
            return 200, str(em.project_number), "application/text"
        if path == "/computeMetadata/v1/instance/attributes/created-by" and em.created_by:
            return 200, em.created_by, "application/text"
        if path == "/computeMetadata/v1/instance/service-accounts/default/token":
            return 200, json.dumps(em.issue_token()), "application/json"
        return 404, "Not Found\n", "text/html"

    def compute(self, method, path, query, authorized):
        em = self.emulator
        if not authorized:
            raise ApiError(401, "UNAUTHENTICATED", "required",
                           "Request is missing required authentication credential. Expected OAuth 2 access token, "
                           "login cookie or other valid authentication credential.", "global")
        if em.throttle > 0:
            em.throttle -= 1
            raise ApiError(em.throttle_status, "RESOURCE_EXHAUSTED" if em.throttle_status == 429 else "PERMISSION_DENIED",
                           "rateLimitExceeded", "Quota exceeded for quota metric 'Read requests' and limit 'Read "
                           f"requests per minute' of service 'compute.googleapis.com' for consumer 'project_number:"
                           f"{em.project_number}'.", "usageLimits")
        parts = path.split("/")[3:]  # projects, P, ...
        if method != "GET" or len(parts) < 3 or parts[0] != "projects":
            raise ApiError(404, "NOT_FOUND", "notFound", f"Not Found: {path}")
        if parts[1] != em.project:
            raise ApiError(403, "PERMISSION_DENIED", "forbidden",
                           f"Required 'compute.instances.list' permission for 'projects/{parts[1]}'")
        rest = parts[2:]
        if rest == ["aggregated", "instances"]:
            self.check_allowed("compute.instances.list")
            return 200, em.aggregated(query)
        if len(rest) == 3 and rest[0] == "zones" and rest[2] == "instances":
            self.check_allowed("compute.instances.list")
            return 200, em.zone_list(rest[1], query)
        if len(rest) == 4 and rest[0] in ("zones", "regions") and rest[2] == "instanceGroupManagers":
            self.check_allowed("compute.instanceGroupManagers.get")
            return 200, em.mig(rest[0], rest[1], rest[3])
        raise ApiError(404, "NOT_FOUND", "notFound", f"Not Found: {path}")

    def check_allowed(self, permission):
        em = self.emulator
        if permission in em.deny:
            raise ApiError(403, "PERMISSION_DENIED", "forbidden",
                           f"Required '{permission}' permission for 'projects/{em.project}'")

    def control(self, method, path, raw):
        em = self.emulator
        try:
            body = json.loads(raw) if raw else {}
        except ValueError as e:
            return self.send(400, {"error": f"not JSON: {e}"})
        with em.lock:
            try:
                if method == "GET" and path == "/_emulator/requests":
                    return self.send(200, em.log)
                if method == "POST" and path == "/_emulator/config":
                    em.configure(body)
                    return self.send(200, {})
                if method == "POST" and path == "/_emulator/instances":
                    em.put_instance(body)
                    return self.send(200, {})
                if method == "POST" and path == "/_emulator/migs":
                    em.put_mig(body)
                    return self.send(200, {})
                name = path[len("/_emulator/instances/"):]
                if path.startswith("/_emulator/instances/") and name in em.instances:
                    if method == "DELETE":
                        del em.instances[name]
                        return self.send(200, {})
                    if method == "POST":
                        if body.get("status") not in INSTANCE_STATUSES:
                            raise ValueError(f"status {body.get('status')} is not an instance status")
                        em.instances[name]["status"] = body["status"]
                        return self.send(200, {})
            except (ValueError, TypeError, KeyError) as e:
                return self.send(400, {"error": str(e)})
        self.send(404, {"error": f"no emulator control {method} {path}"})

    def do_GET(self):
        self.serve("GET")

    def do_POST(self):
        self.serve("POST")

    def do_DELETE(self):
        self.serve("DELETE")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def main():
    p = argparse.ArgumentParser(description="Compute Engine API, metadata server and OAuth token emulator for tests.")
    p.add_argument("--listen", required=True, help="HOST:PORT, port 0 for any")
    p.add_argument("--project", required=True)
    p.add_argument("--project-number", type=int, default=123456789012)
    p.add_argument("--zones", default="us-central1-a,us-central1-b,us-central1-c",
                   help="the zones every aggregated list names")
    p.add_argument("--key-file", help="the service-account key whose JWTs /token accepts")
    p.add_argument("--token", action="append", default=[], help="a bearer token always accepted")
    args = p.parse_args()
    key = None
    if args.key_file:
        with open(args.key_file) as f:
            key = json.load(f)
    host, _, port = args.listen.rpartition(":")
    Handler.emulator = Emulator(args.project, args.project_number, args.zones.split(","), key, args.token)
    server = Server((host, int(port)), Handler)
    print(f"listening on {host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
