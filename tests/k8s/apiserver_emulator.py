#!/usr/bin/env python3
"""A Kubernetes API-server emulator for quorate's tests: python3 standard library only, HTTPS always.

It speaks the wire format of the real API server for the few resources quorate's `k8s` provider and
its StatefulSet tests touch, with the real paths, JSON shapes and `Status` error objects:
  - pods (v1): list (labelSelector, limit, continue), create, get, replace status, delete (immediate, or
    graceful: `gracePeriodSeconds=N` sets metadata.deletionTimestamp until a delete with 0);
  - services (v1): create, get, list, delete;
  - statefulsets (apps/v1): create, get, replace (409 Conflict on a stale metadata.resourceVersion),
    list, delete, and the `scale` subresource (autoscaling/v1 Scale: get, replace spec.replicas);
  - endpointslices (discovery.k8s.io/v1): list only, derived on every request from the stored
    Services (spec.selector, spec.ports, publishNotReadyAddresses) and the matching pods that have a
    podIP, by the rules of the real EndpointSlice controller for ready/serving/terminating.
Bearer-token authentication against --token-file, re-read on every request, so rewriting the file
rotates the token.

What it does not do: no controllers (a StatefulSet makes no pods, nothing updates status), no watch,
no RBAC beyond the denials a test configures, no field selectors or set-based label selectors, no
admission or schema validation beyond metadata.name, no list snapshots (a continue token resumes
after the last name given, in the list as it is now), no namespace objects: a namespace exists once
something is created in it (plus `default`), and listing in any other one is 404 where the real server
gives an empty list. EndpointSlice `hostname` is the pod's spec.hostname (the real controller also
wants spec.subdomain to name the Service).

Test-only controls, without authentication, under /_emulator/:
  POST /_emulator/config   {"deny": ["list pods", "get statefulsets/scale", ...],
                            "fail": [{"method", "path_prefix", "status", "body", "times"}],
                                     (answers the matching request with status and the raw body,
                                      after "delay" seconds if given; times defaults to 1, -1 for
                                      ever; auth is checked first)
                            "expire_continue": true | N (the next N requests with a continue token),
                            "max_page": N}   each key given replaces that setting
  GET  /_emulator/requests the API requests so far: [{"method", "path", "query" (name -> value),
                           "authorized", "status"}]
  POST /_emulator/reset    no objects, no settings, an empty log

Usage: apiserver_emulator.py --listen HOST:PORT --cert CERT --key KEY --token-file FILE
       [--service-account system:serviceaccount:default:etcd] [--slice-size 100]
Prints `listening on HOST:PORT` (the real port) once it serves.
"""
import argparse
import base64
import copy
import datetime
import http.server
import json
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import uuid

# (group, version, plural) -> kind; the path prefix is /api/v1 for the core group, else /apis/G/V.
RESOURCES = {
    ("", "v1", "pods"): "Pod",
    ("", "v1", "services"): "Service",
    ("apps", "v1", "statefulsets"): "StatefulSet",
    ("discovery.k8s.io", "v1", "endpointslices"): "EndpointSlice",
}
DERIVED = {"endpointslices"}
EXPIRED_MESSAGE = ("The provided continue parameter is too old to display a consistent list result. "
                   "You can start a new list without the continue parameter.")
PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                  r"/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")
VERBS = {"GET": "get", "POST": "create", "PUT": "update", "DELETE": "delete"}


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def status_object(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


def qualified(group, plural):
    """How the real server names a resource in messages: `pods`, `statefulsets.apps`."""
    return plural if not group else f"{plural}.{group}"


def details(group, plural, name=None):
    """The real server leaves out empty fields: the core group, the name on a collection."""
    return {k: v for k, v in (("name", name), ("group", group), ("kind", plural)) if v}


def not_found(group, plural, name):
    return ApiError(404, "NotFound", f'{qualified(group, plural)} "{name}" not found', details(group, plural, name))


def parse_selector(text):
    """`k=v,k2==v2,k3!=v3,k4`: equality, inequality and existence, the subset quorate uses."""
    terms = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        m = re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)", term) or re.fullmatch(r"(!?)([\w./-]+)", term)
        if not m:
            raise ApiError(400, "BadRequest", f'unable to parse requirement: invalid label selector "{text}"')
        if len(m.groups()) == 3:
            terms.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
        else:
            terms.append((m.group(2), "!" if m.group(1) else "exists", None))
    return terms


def selector_matches(terms, labels):
    for key, op, value in terms:
        ok = {"=": labels.get(key) == value, "!=": labels.get(key) != value,
              "exists": key in labels, "!": key not in labels}[op]
        if not ok:
            return False
    return True


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions", []))


class Emulator:
    def __init__(self, service_account, slice_size):
        self.service_account, self.slice_size = service_account, slice_size
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.objects = {}  # (ns, plural) -> {name: object}
        self.namespaces = {"default"}
        self.revision = 1
        self.deny, self.fail, self.expire_continue, self.max_page = set(), [], 0, None
        self.log = []

    def configure(self, config):
        if "deny" in config:
            self.deny = set(config["deny"])
        if "fail" in config:
            self.fail = [dict(f, times=f.get("times", 1)) for f in config["fail"]]
        if "expire_continue" in config:
            value = config["expire_continue"]
            self.expire_continue = -1 if value is True else int(value or 0)
        if "max_page" in config:
            self.max_page = config["max_page"]

    def next_revision(self):
        self.revision += 1
        return str(self.revision)

    def take_failure(self, method, path):
        for f in self.fail:
            if f["times"] != 0 and f.get("method", method) == method and path.startswith(f.get("path_prefix", "")):
                f["times"] -= 1
                return f
        return None

    def check_allowed(self, verb, group, plural, sub, ns, name):
        resource = f"{plural}/{sub}" if sub else plural
        if f"{verb} {resource}" not in self.deny:
            return
        subject = f'{qualified(group, plural)} "{name}"' if name else qualified(group, plural)
        raise ApiError(403, "Forbidden",
                       f'{subject} is forbidden: User "{self.service_account}" cannot {verb} resource '
                       f'"{resource}" in API group "{group}" in the namespace "{ns}"',
                       details(group, plural, name))

    def store(self, ns, plural):
        return self.objects.setdefault((ns, plural), {})

    def handle(self, method, route, query, body):
        group = route["group"] or ""
        version = route["core"] or route["version"]
        plural, ns, name, sub = route["plural"], route["ns"], route["name"], route["sub"]
        kind = RESOURCES.get((group, version, plural))
        if kind is None or sub not in (None, "status", "scale") or (sub and not name):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        verb = "list" if method == "GET" and not name else VERBS.get(method)
        if verb is None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        self.check_allowed(verb, group, plural, sub, ns, name)
        if ns not in self.namespaces and not (method == "POST" and not name):
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
        if verb == "list":
            return 200, self.list(group, version, plural, kind, ns, query)
        if plural in DERIVED or (method == "POST") == bool(name) or (method == "DELETE" and sub):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        objects = self.store(ns, plural)
        if method == "POST":
            return 201, self.create(group, version, plural, kind, ns, objects, body)
        if name not in objects:
            raise not_found(group, plural, name)
        obj = objects[name]
        if sub == "scale":
            if plural != "statefulsets" or method not in ("GET", "PUT"):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if method == "PUT":
                obj["spec"]["replicas"] = int(body.get("spec", {}).get("replicas", 0))
                self.bump(obj)
            return 200, self.scale(obj)
        if method == "GET":
            return 200, obj
        if method == "DELETE":
            return 200, self.delete(plural, objects, name, query, body)
        if sub == "status" and plural != "pods":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        given = body.get("metadata", {}).get("resourceVersion")
        if given and given != obj["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict",
                           f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": the object has been '
                           "modified; please apply your changes to the latest version and try again",
                           details(group, plural, name))
        if sub == "status":
            obj["status"] = body.get("status", {})
        else:
            for part in ("spec", "status"):
                if part in body:
                    obj[part] = body[part]
            obj["metadata"]["labels"] = body.get("metadata", {}).get("labels", obj["metadata"].get("labels", {}))
        self.bump(obj)
        return 200, obj

    def bump(self, obj):
        obj["metadata"]["resourceVersion"] = self.next_revision()

    def create(self, group, version, plural, kind, ns, objects, body):
        name = body.get("metadata", {}).get("name")
        if not name:
            raise ApiError(422, "Invalid", f'{kind} "" is invalid: metadata.name: Required value: name is required',
                           {"kind": plural, "causes": [{"reason": "FieldValueRequired", "field": "metadata.name"}]})
        if name in objects:
            raise ApiError(409, "AlreadyExists", f'{qualified(group, plural)} "{name}" already exists',
                           details(group, plural, name))
        obj = copy.deepcopy(body)
        obj.update(kind=kind, apiVersion=f"{group}/{version}" if group else version)
        obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now(),
                               resourceVersion=self.next_revision())
        obj.setdefault("spec", {})
        if plural == "pods":
            obj.setdefault("status", {"phase": "Pending"})
        if plural == "statefulsets":
            obj["spec"].setdefault("replicas", 1)
            obj.setdefault("status", {"replicas": 0})
        self.namespaces.add(ns)
        objects[name] = obj
        return obj

    def delete(self, plural, objects, name, query, body):
        grace = query.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
        obj = objects[name]
        if plural == "pods" and grace is not None and int(grace) > 0:
            if "deletionTimestamp" not in obj["metadata"]:
                obj["metadata"].update(deletionTimestamp=now(), deletionGracePeriodSeconds=int(grace))
                self.bump(obj)
            return obj
        del objects[name]
        return obj

    def scale(self, sts):
        match = sts["spec"].get("selector", {}).get("matchLabels", {})
        meta = sts["metadata"]
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")},
                "spec": {"replicas": sts["spec"]["replicas"]},
                "status": {"replicas": sts.get("status", {}).get("replicas", 0),
                           "selector": ",".join(f"{k}={v}" for k, v in sorted(match.items()))}}

    def list(self, group, version, plural, kind, ns, query):
        terms = parse_selector(query.get("labelSelector", ""))
        source = self.endpoint_slices(ns) if plural in DERIVED else list(self.store(ns, plural).values())
        items = sorted((o for o in source if selector_matches(terms, o["metadata"].get("labels", {}))),
                       key=lambda o: o["metadata"]["name"])
        after = None
        if query.get("continue"):
            if self.expire_continue:
                self.expire_continue -= self.expire_continue > 0
                raise ApiError(410, "Expired", EXPIRED_MESSAGE)
            try:
                after = json.loads(base64.urlsafe_b64decode(query["continue"]))["start"]
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "BadRequest", "continue key is not valid: incorrect encoded start resourceVersion")
            items = [o for o in items if o["metadata"]["name"] > after]
        limits = [n for n in (int(query.get("limit") or 0), self.max_page or 0) if n > 0]
        meta = {"resourceVersion": str(self.revision)}
        if limits and len(items) > min(limits):
            page, rest = items[:min(limits)], items[min(limits):]
            token = {"v": "meta.k8s.io/v1", "rv": self.revision, "start": page[-1]["metadata"]["name"]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            meta["remainingItemCount"] = len(rest)
            items = page
        return {"kind": f"{kind}List", "apiVersion": f"{group}/{version}" if group else version, "metadata": meta,
                "items": [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]}

    def endpoint_slices(self, ns):
        slices = []
        for svc in sorted(self.store(ns, "services").values(), key=lambda s: s["metadata"]["name"]):
            selector = svc["spec"].get("selector")
            if not selector:
                continue
            publish = bool(svc["spec"].get("publishNotReadyAddresses"))
            groups = {}
            for pod in sorted(self.store(ns, "pods").values(), key=lambda p: p["metadata"]["name"]):
                ip = pod.get("status", {}).get("podIP")
                if not ip or any(pod["metadata"].get("labels", {}).get(k) != v for k, v in selector.items()):
                    continue
                ports = tuple(self.endpoint_port(svc_port, pod) for svc_port in svc["spec"].get("ports", []))
                groups.setdefault(("IPv6" if ":" in ip else "IPv4", ports), []).append(self.endpoint(pod, ip, publish))
            for (family, ports), endpoints in sorted(groups.items()):
                for start in range(0, len(endpoints), self.slice_size):
                    slices.append(self.endpoint_slice(svc, len(slices), family, ports,
                                                      endpoints[start:start + self.slice_size]))
        return slices

    @staticmethod
    def endpoint_port(svc_port, pod):
        target = svc_port.get("targetPort", svc_port["port"])
        if isinstance(target, str):
            named = [p["containerPort"] for c in pod.get("spec", {}).get("containers", [])
                     for p in c.get("ports", []) if p.get("name") == target]
            target = named[0] if named else None
        return (svc_port.get("name", ""), target, svc_port.get("protocol", "TCP"))

    @staticmethod
    def endpoint(pod, ip, publish_not_ready):
        meta = pod["metadata"]
        serving, terminating = pod_ready(pod), "deletionTimestamp" in meta
        endpoint = {"addresses": [ip],
                    "conditions": {"ready": publish_not_ready or (serving and not terminating),
                                   "serving": serving, "terminating": terminating},
                    "targetRef": {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"],
                                  "uid": meta["uid"]}}
        if pod.get("spec", {}).get("hostname"):
            endpoint["hostname"] = pod["spec"]["hostname"]
        if pod.get("spec", {}).get("nodeName"):
            endpoint["nodeName"] = pod["spec"]["nodeName"]
        return endpoint

    def endpoint_slice(self, svc, index, family, ports, endpoints):
        meta = svc["metadata"]
        return {"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"name": f"{meta['name']}-{index:05x}", "namespace": meta["namespace"],
                             "resourceVersion": str(self.revision), "generateName": f"{meta['name']}-",
                             "labels": {"kubernetes.io/service-name": meta["name"],
                                        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": meta["name"],
                                                  "uid": meta["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "addressType": family, "endpoints": endpoints,
                "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in ports if p is not None]}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    emulator = None
    token_file = None

    def log_message(self, *args):
        pass  # the request log at /_emulator/requests is what tests read

    def send_json(self, code, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"the request body is not JSON: {e}")
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the request body is not a JSON object")
        return body

    def authorized(self):
        try:
            with open(self.token_file) as f:
                token = f.read().strip()
        except OSError:
            return False
        return bool(token) and self.headers.get("Authorization", "") == f"Bearer {token}"

    def serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        em = self.emulator
        if url.path.startswith("/_emulator/"):
            return self.control(method, url.path)
        authorized = self.authorized()
        entry = {"method": method, "path": url.path, "query": query, "authorized": authorized}
        with em.lock:
            em.log.append(entry)
        try:
            request_body = self.read_body()
            with em.lock:
                if not authorized:
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                failure = em.take_failure(method, url.path)
                if not failure:
                    route = PATH.match(url.path)
                    if not route:
                        raise ApiError(404, "NotFound", "the server could not find the requested resource")
                    code, body = em.handle(method, route.groupdict(), query, request_body)
                    body = json.dumps(body).encode()
            if failure:
                # A slow answer lets a test change something (rotate the token) while the client waits.
                time.sleep(failure.get("delay", 0))
                code, body = failure["status"], failure.get("body", "").encode()
        except ApiError as e:
            code, body = e.code, status_object(e.code, e.reason, e.message, e.details)
        except (ValueError, TypeError, KeyError) as e:
            code, body = 400, status_object(400, "BadRequest", f"the request is malformed: {e!r}")
        with em.lock:  # the log may be read out at this moment
            entry["status"] = code
        self.send_json(code, body)

    def control(self, method, path):
        em = self.emulator
        # Read whether used or not: an unread body would be parsed as the connection's next request.
        try:
            body = self.read_body()
        except ApiError as e:
            return self.send_json(400, {"error": e.message})
        with em.lock:
            if method == "GET" and path == "/_emulator/requests":
                return self.send_json(200, em.log)
            if method == "POST" and path == "/_emulator/reset":
                em.reset()
                return self.send_json(200, {})
            if method == "POST" and path == "/_emulator/config":
                try:
                    em.configure(body)
                except (ValueError, TypeError, KeyError) as e:
                    return self.send_json(400, {"error": str(e)})
                return self.send_json(200, {})
        self.send_json(404, {"error": f"no emulator control {method} {path}"})

    def do_GET(self):
        self.serve("GET")

    def do_POST(self):
        self.serve("POST")

    def do_PUT(self):
        self.serve("PUT")

    def do_DELETE(self):
        self.serve("DELETE")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that rejects our certificate or hangs up mid-request is part of the tests.
        print(f"apiserver emulator: connection from {client_address[0]} failed: {sys.exc_info()[1]}",
              file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser(description="Kubernetes API-server emulator for tests (HTTPS).")
    p.add_argument("--listen", required=True, help="HOST:PORT, port 0 for any")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--token-file", required=True, help="the bearer token, re-read on every request")
    p.add_argument("--service-account", default="system:serviceaccount:default:etcd", help="the user in 403s")
    p.add_argument("--slice-size", type=int, default=100, help="endpoints per EndpointSlice")
    args = p.parse_args()
    host, _, port = args.listen.rpartition(":")
    host = host.strip("[]")
    Handler.emulator = Emulator(args.service_account, args.slice_size)
    Handler.token_file = args.token_file
    if ":" in host:
        Server.address_family = socket.AF_INET6
    server = Server((host, int(port)), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    # The handshake then happens in the request's own thread, so a silent client blocks nobody.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on {shown}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
