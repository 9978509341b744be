"""The Kubernetes API-server emulator's own interface, as the k8s provider's tests and the StatefulSet
harness use it: HTTPS with a CA made here, bearer tokens re-read from the file, the object paths and
their Status errors, derived EndpointSlices, and the /_emulator/ controls. Exits 77 without openssl."""
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = "/api/v1/namespaces/default"
APPS = "/apis/apps/v1/namespaces/default"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"


def check(cond, msg):
    if not cond:
        print(f"FAIL: {msg}", flush=True)
        sys.exit(1)


class Emulator:
    def __init__(self, workdir):
        self.token_file = os.path.join(workdir, "token")
        self.set_token("t1")
        cert, key = os.path.join(workdir, "tls.crt"), os.path.join(workdir, "tls.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=emulator",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "apiserver_emulator.py"), "--listen",
                                      "127.0.0.1:0", "--cert", cert, "--key", key, "--token-file", self.token_file],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        check(line.startswith("listening on 127.0.0.1:"), f"first line: {line!r}")
        self.base = "https://" + line.split(" ")[-1]
        self.context = ssl.create_default_context(cafile=cert)

    def set_token(self, token):
        with open(self.token_file, "w") as f:
            f.write(token + "\n")

    def call(self, method, path, body=None, token="t1"):
        """(status, parsed JSON or raw text)."""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, context=self.context) as r:
                status, raw = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read().decode()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def ok(self, method, path, body=None):
        status, doc = self.call(method, path, body)
        check(status in (200, 201), f"{method} {path}: {status} {doc}")
        return doc


def expect_status(result, code, reason, message=None):
    status, doc = result
    check(status == code and doc["kind"] == "Status" and doc["status"] == "Failure" and doc["reason"] == reason
          and doc["code"] == code, f"wanted {code} {reason}, got {status} {doc}")
    if message is not None:
        check(doc["message"] == message, f"message {doc['message']!r}, wanted {message!r}")


def pod(name, ready):
    return ({"metadata": {"name": name, "labels": {"app": "etcd"}},
             "spec": {"hostname": name, "subdomain": "etcd",
                      "containers": [{"name": "etcd", "ports": [{"name": "peer", "containerPort": 2380}]}]}},
            {"status": {"podIP": f"10.0.0.{name[-1]}", "conditions": [{"type": "Ready",
                                                                      "status": "True" if ready else "False"}]}})


def test(emu):
    expect_status(emu.call("GET", f"{CORE}/pods", token=None), 401, "Unauthorized")
    expect_status(emu.call("GET", f"{CORE}/pods", token="wrong"), 401, "Unauthorized")
    empty = emu.ok("GET", f"{CORE}/pods")
    check(empty["kind"] == "PodList" and empty["apiVersion"] == "v1" and empty["items"] == []
          and "resourceVersion" in empty["metadata"], f"empty list {empty}")
    expect_status(emu.call("GET", "/api/v1/namespaces/elsewhere/pods"), 404, "NotFound", 'namespaces "elsewhere" not found')

    for i in range(4):
        created, status = pod(f"etcd-{i}", ready=i != 1)
        check(emu.call("POST", f"{CORE}/pods", created)[0] == 201, "pod created")
        emu.ok("PUT", f"{CORE}/pods/etcd-{i}/status", status)
    expect_status(emu.call("POST", f"{CORE}/pods", pod("etcd-0", True)[0]), 409, "AlreadyExists",
                  'pods "etcd-0" already exists')
    expect_status(emu.call("POST", f"{CORE}/pods", {"metadata": {}}), 422, "Invalid")
    expect_status(emu.call("GET", f"{CORE}/pods/etcd-9"), 404, "NotFound", 'pods "etcd-9" not found')
    check(emu.ok("GET", f"{CORE}/pods/etcd-0")["status"]["podIP"] == "10.0.0.0", "status replaced")

    first = emu.ok("GET", f"{CORE}/pods?labelSelector=app%3Detcd&limit=3")
    check([p["metadata"]["name"] for p in first["items"]] == ["etcd-0", "etcd-1", "etcd-2"]
          and first["metadata"]["remainingItemCount"] == 1, f"first page {first['metadata']}")
    rest = emu.ok("GET", f"{CORE}/pods?limit=3&continue={first['metadata']['continue']}")
    check([p["metadata"]["name"] for p in rest["items"]] == ["etcd-3"] and "continue" not in rest["metadata"],
          "second page")
    check(emu.ok("GET", f"{CORE}/pods?labelSelector=app%3Dother")["items"] == [], "selector filters")

    emu.ok("POST", f"{CORE}/services", {"metadata": {"name": "etcd"}, "spec": {
        "clusterIP": "None", "selector": {"app": "etcd"}, "ports": [{"name": "peer", "port": 2380}]}})
    graceful = emu.ok("DELETE", f"{CORE}/pods/etcd-3?gracePeriodSeconds=30")
    check("deletionTimestamp" in graceful["metadata"], "graceful delete marks the pod")
    slices = emu.ok("GET", f"{SLICES}?labelSelector=kubernetes.io%2Fservice-name%3Detcd")
    check(slices["kind"] == "EndpointSliceList" and len(slices["items"]) == 1, f"slices {slices}")
    endpoints = {e["targetRef"]["name"]: e for e in slices["items"][0]["endpoints"]}
    check(sorted(endpoints) == ["etcd-0", "etcd-1", "etcd-2", "etcd-3"], f"endpoints {sorted(endpoints)}")
    check(endpoints["etcd-1"]["conditions"] == {"ready": False, "serving": False, "terminating": False}, "not ready")
    check(endpoints["etcd-3"]["conditions"] == {"ready": False, "serving": True, "terminating": True}, "terminating")
    check(endpoints["etcd-0"]["hostname"] == "etcd-0" and endpoints["etcd-0"]["addresses"] == ["10.0.0.0"], "endpoint")
    check(slices["items"][0]["ports"] == [{"name": "peer", "port": 2380, "protocol": "TCP"}], "slice ports")
    emu.ok("DELETE", f"{CORE}/pods/etcd-3?gracePeriodSeconds=0")
    expect_status(emu.call("GET", f"{CORE}/pods/etcd-3"), 404, "NotFound")

    sts = emu.ok("POST", f"{APPS}/statefulsets", {"metadata": {"name": "etcd"}, "spec": {
        "replicas": 3, "selector": {"matchLabels": {"app": "etcd"}}}})
    stale = dict(sts, metadata=dict(sts["metadata"], resourceVersion="1"))
    expect_status(emu.call("PUT", f"{APPS}/statefulsets/etcd", stale), 409, "Conflict")
    scale = emu.ok("PUT", f"{APPS}/statefulsets/etcd/scale", {"spec": {"replicas": 5}})
    check(scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1" and scale["spec"]["replicas"] == 5
          and scale["status"]["selector"] == "app=etcd", f"scale {scale}")
    check(emu.ok("GET", f"{APPS}/statefulsets/etcd")["spec"]["replicas"] == 5, "scale sets spec.replicas")
    expect_status(emu.call("GET", f"{APPS}/statefulsets/nope"), 404, "NotFound", 'statefulsets.apps "nope" not found')

    emu.ok("POST", "/_emulator/config", {"deny": ["list pods", "get statefulsets/scale"]})
    expect_status(emu.call("GET", f"{CORE}/pods"), 403, "Forbidden",
                  'pods is forbidden: User "system:serviceaccount:default:etcd" cannot list resource "pods" '
                  'in API group "" in the namespace "default"')
    expect_status(emu.call("GET", f"{APPS}/statefulsets/etcd/scale"), 403, "Forbidden",
                  'statefulsets.apps "etcd" is forbidden: User "system:serviceaccount:default:etcd" cannot get '
                  'resource "statefulsets/scale" in API group "apps" in the namespace "default"')
    emu.ok("POST", "/_emulator/config", {"deny": [], "max_page": 2, "expire_continue": 1,
                                         "fail": [{"method": "GET", "path_prefix": f"{CORE}/services",
                                                   "status": 200, "body": "{not json", "times": 1}]})
    check(emu.call("GET", f"{CORE}/services/etcd") == (200, "{not json"), "injected answer, once")
    check(emu.call("GET", f"{CORE}/services/etcd")[0] == 200, "then the real one")
    capped = emu.ok("GET", f"{CORE}/pods?limit=100")
    check(len(capped["items"]) == 2, "max_page caps limit")
    expect_status(emu.call("GET", f"{CORE}/pods?continue={capped['metadata']['continue']}"), 410, "Expired",
                  "The provided continue parameter is too old to display a consistent list result. "
                  "You can start a new list without the continue parameter.")
    check(emu.call("GET", f"{CORE}/pods?continue={capped['metadata']['continue']}")[0] == 200, "expired only once")

    emu.set_token("t2")
    expect_status(emu.call("GET", f"{CORE}/pods"), 401, "Unauthorized")
    check(emu.call("GET", f"{CORE}/pods", token="t2")[0] == 200, "the rotated token is taken")
    log = emu.ok("GET", "/_emulator/requests")
    check(log[-1] == {"method": "GET", "path": f"{CORE}/pods", "query": {}, "authorized": True, "status": 200}
          and log[-2]["authorized"] is False, f"log tail {log[-2:]}")
    emu.ok("POST", "/_emulator/reset")
    check(emu.ok("GET", "/_emulator/requests") == [], "reset empties the log")
    check(emu.call("GET", f"{CORE}/pods/etcd-0", token="t2")[0] == 404, "reset drops the objects")
    print("apiserver emulator: every interface check passed", flush=True)


def main():
    if shutil.which("openssl") is None:
        print("SKIP: openssl is not on PATH; the emulator's test makes its certificate with it")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="quorate-emulator-") as workdir:
        emu = Emulator(workdir)
        try:
            test(emu)
        finally:
            emu.proc.terminate()
            emu.proc.wait()


if __name__ == "__main__":
    main()
