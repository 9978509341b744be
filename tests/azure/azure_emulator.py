"""Starts tests/azure/emulator.py for a test: a self-signed certificate for 127.0.0.1 made with openssl
(the CA that quorate's ca_file= and Node's NODE_EXTRA_CA_CERTS trust), the emulator on free ports, and
its /_emulator/ controls as methods. Used by emulator_test.py and tests/integration/azure_test.py."""
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SUBSCRIPTION = "8c3a5d1e-0000-4000-8000-00000000e7cd"
TENANT = "72f988bf-0000-4000-8000-0000000000aa"
CLIENT_ID = "04b07795-0000-4000-8000-0000000000c1"
CLIENT_SECRET = "quorate-azure-secret-Zq8~"


class Emulator:
    def __init__(self, workdir, spawn=None):
        """`spawn(argv, log_path)` starts the process (the integration harness's, so it is cleaned up);
        without it, subprocess.Popen."""
        if shutil.which("openssl") is None:
            raise FileNotFoundError("openssl")
        self.ca = os.path.join(workdir, "azure-ca.pem")
        key = os.path.join(workdir, "azure-key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", self.ca, "-days", "1", "-subj", "/CN=azure emulator",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        argv = [sys.executable, os.path.join(HERE, "emulator.py"), "--listen", "127.0.0.1:0", "--imds-listen",
                "127.0.0.1:0", "--cert", self.ca, "--key", key, "--subscription", SUBSCRIPTION, "--tenant", TENANT,
                "--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET]
        out = os.path.join(workdir, "azure-emulator.out")
        with open(out, "w") as f:
            self.proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT) if spawn is None else None
        if spawn is not None:
            self.proc = spawn(argv, out)
        line = self._first_line(out)
        parts = line.split()
        if len(parts) != 5 or parts[0] != "listening":
            raise RuntimeError(f"the emulator's first line: {line!r}")
        self.base, self.imds = "https://" + parts[2], "http://" + parts[4]
        self.context = ssl.create_default_context(cafile=self.ca)

    def _first_line(self, path):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(path) as f:
                # The harness's spawn writes the command line first.
                lines = [line for line in f if line.startswith("listening on ")]
            if lines:
                return lines[0].strip()
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        with open(path) as f:
            raise RuntimeError(f"the emulator did not start: {f.read()!r}")

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def control(self, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + "/_emulator/" + path, data=data,
                                         method="GET" if body is None else "POST")
        with urllib.request.urlopen(request, context=self.context) as r:
            return json.loads(r.read())

    def scale_set(self, name, capacity, resource_group="etcd-rg", orchestration_mode="Uniform"):
        return self.control("scale_set", {"resource_group": resource_group, "name": name, "capacity": capacity,
                                          "orchestration_mode": orchestration_mode})

    def add_instance(self, ip, vm_scale_set=None, name=None, resource_group="etcd-rg", **fields):
        body = dict(fields, resource_group=resource_group, ip=ip)
        if vm_scale_set:
            body["vm_scale_set"] = vm_scale_set
        else:
            body["name"] = name
        return self.control("instances", body)["id"]

    def update_instance(self, vm_id, **fields):
        self.control("instances/update", dict(fields, id=vm_id))

    def delete_instance(self, vm_id):
        self.control("instances/delete", {"id": vm_id})

    def configure(self, **config):
        self.control("config", config)

    def requests(self):
        return self.control("requests")

    def call(self, method, url, headers=None, data=None):
        """(status, headers, parsed JSON or raw text) of a call to the emulator's API."""
        request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        context = self.context if url.startswith("https://") else None
        try:
            with urllib.request.urlopen(request, context=context) as r:
                status, head, raw = r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            status, head, raw = e.code, dict(e.headers), e.read().decode()
        try:
            return status, head, json.loads(raw)
        except ValueError:
            return status, head, raw
