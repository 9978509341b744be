"""A StatefulSet life-cycle harness: acts out what Kubernetes does with the manifests in k8s/ or the
objects the chart in k8s/chart renders, with local processes instead of containers.

What is real: the manifests (read from k8s/<variant>, or rendered by the real helm from k8s/chart
with a test's values; not retyped: each container's command, args,
env with the downward API and $(VAR) expansion, volume mounts, probes, grace period, replicas, the
PVC retention policy), quorate, etcd 3.4, and a dnsmasq answering the pods' StatefulSet DNS names.
What is emulated: the API server (tests/k8s/apiserver_emulator.py, which the k8s provider talks to
over HTTPS with a service-account token), the kubelet and the StatefulSet controller (this file).

A test runs inside a network namespace of its own (main() re-executes the test there), where
dnsmasq on 127.0.0.1:53 is the resolver. Every "pod" runs on a loopback address of its own that
changes when the pod is recreated (as a pod IP does), with its own mount namespace: the PVC, the
service-account token and any Secret are bind-mounted at the paths the manifest names, and the pod's
host name is its name. Containers restart when they exit, as with restartPolicy Always.
"""
import json
import os
import shlex
import socket
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import yaml

import harness
from harness import check, fail, log, run, spawn, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
K8S = os.path.normpath(os.path.join(HERE, "..", "..", "k8s"))
HELM = os.path.normpath(os.path.join(HERE, "..", "..", "third_party", "helm", "helm"))
EMULATOR = os.path.join(HERE, "apiserver_emulator.py")
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_PORT = 6443
INSIDE = "QUORATE_K8S_NETNS"  # set in the re-executed test: the namespace it runs in
NAMESPACE = "default"
CLUSTER_DOMAIN = "cluster.local"


def load_variant(variant):
    """The objects `kubectl apply -k k8s/<variant>` would create, by (kind, name)."""
    objects = {}

    def load(directory):
        with open(os.path.join(directory, "kustomization.yaml")) as f:
            kustomization = yaml.safe_load(f)
        for resource in kustomization.get("resources", []):
            path = os.path.join(directory, resource)
            if os.path.isdir(path):
                load(path)
                continue
            with open(path) as f:
                for obj in yaml.safe_load_all(f):
                    if obj:
                        objects[(obj["kind"], obj["metadata"]["name"])] = obj
    load(os.path.join(K8S, variant))
    return objects


def load_chart(values, release="etcd"):
    """The objects `helm install <release> k8s/chart -f values` would create, by (kind, name), and
    the `helm test` pod."""
    if not os.access(HELM, os.X_OK):
        harness.skip(f"{HELM} missing (scripts/deps unpacks helm there)")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(values, f)
        f.flush()
        rendered = run([HELM, "template", release, os.path.join(K8S, "chart"), "--namespace", NAMESPACE,
                        "-f", f.name], check_rc=0).stdout
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(rendered) if o}


# etcd's upstream image (etcd-io/etcd's Dockerfile): distroless, etcd, etcdctl and etcdutl in
# /usr/local/bin and nothing else, no quorate. A container of it runs here with those three, etcd
# 3.5's, over an empty /usr/local/bin and the image's PATH: quorate is not on it.
UPSTREAM_ETCD_IMAGE = "gcr.io/etcd-development/etcd"
UPSTREAM_ETCD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def upstream_etcd(spec):
    return spec.get("image", "").rsplit(":", 1)[0] == UPSTREAM_ETCD_IMAGE


def peer_scheme(sts):
    """http or https, as the StatefulSet's pods advertise their peer URLs (TLS uses the Secret
    etcd-tls)."""
    pod = sts["spec"]["template"]["spec"]
    for c in pod.get("initContainers", []) + pod["containers"]:
        for var in c.get("env", []):
            if var["name"] == "ETCD_INITIAL_ADVERTISE_PEER_URLS":
                return var["value"].split("://")[0]
    fail("no container of the StatefulSet sets ETCD_INITIAL_ADVERTISE_PEER_URLS")


def expand(text, env):
    """Kubernetes' $(VAR) expansion: a variable defined earlier is replaced, $$ escapes, and an
    unknown reference stays as it is."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            name = text[i + 2:end]
            out.append(env.get(name, text[i:end + 1]))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class ApiServer:
    """The API-server emulator in the namespace, with a CA, a serving certificate for 127.0.0.1 and
    a service-account token, and a client for what the StatefulSet controller and kubelet write."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "apiserver")
        os.makedirs(self.dir)
        self.ca = os.path.join(self.dir, "ca.crt")
        key, csr, cert = (os.path.join(self.dir, n) for n in ("server.key", "server.csr", "server.crt"))
        ca_key = os.path.join(self.dir, "ca.key")
        ext = os.path.join(self.dir, "san.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n")
        for argv in (["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                      "-nodes", "-keyout", ca_key, "-out", self.ca, "-days", "2", "-subj", "/CN=emulated-cluster-ca"],
                     ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", key, "-out", csr, "-subj", "/CN=kube-apiserver"],
                     ["openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial",
                      "-out", cert, "-days", "2", "-extfile", ext]):
            run(argv, check_rc=0)
        self.token = f"emulated-token-{os.getpid()}"
        self.token_file = os.path.join(self.dir, "token")
        with open(self.token_file, "w") as f:
            f.write(self.token)
        self.log_path = os.path.join(workdir, "apiserver.log")
        self.proc = spawn(["python3", EMULATOR, "--listen", f"127.0.0.1:{API_PORT}", "--cert", cert, "--key", key,
                           "--token-file", self.token_file,
                           "--service-account", f"system:serviceaccount:{NAMESPACE}:etcd"],
                          self.log_path)
        wait_until(lambda: "listening on" in open(self.log_path).read(), 15, "the API-server emulator to listen")
        self._ssl = ssl.create_default_context(cafile=self.ca)

    def call(self, method, path, body=None):
        """One request with the CA and the token, as any in-cluster client would: (status, JSON)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"https://127.0.0.1:{API_PORT}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self._ssl) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def must(self, method, path, body=None, ok=(200, 201)):
        code, answer = self.call(method, path, body)
        check(code in ok, f"{method} {path} answered {code}: {answer}")
        return answer

    def sa_volume(self, workdir):
        """The files the kubelet projects into every pod at SERVICE_ACCOUNT_DIR."""
        path = os.path.join(workdir, "serviceaccount")
        if not os.path.isdir(path):
            os.makedirs(path)
            shutil.copy(self.ca, os.path.join(path, "ca.crt"))
            shutil.copy(self.token_file, os.path.join(path, "token"))
            with open(os.path.join(path, "namespace"), "w") as f:
                f.write(NAMESPACE)
        return path


class DnsServer:
    """dnsmasq answering <pod>.<service>.<namespace>.svc.cluster.local for the pods that exist, as
    the cluster DNS does for a headless Service with publishNotReadyAddresses."""

    def __init__(self, workdir):
        self.hosts = os.path.join(workdir, "pods.hosts")
        self.records = {}
        self._write()
        dnsmasq = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
        if not os.path.exists(dnsmasq):
            harness.skip("dnsmasq is not installed (scripts/deps installs dnsmasq-base)")
        self.proc = spawn([dnsmasq, "-k", "--no-resolv", "--no-hosts", f"--addn-hosts={self.hosts}",
                           f"--local=/{CLUSTER_DOMAIN}/", "--local=/svc/", "--bind-interfaces",
                           "--listen-address=127.0.0.1",
                           "--port=53", "--user=root", "--log-facility=-", "--neg-ttl=0", "--local-ttl=0",
                           # No /var/run/dnsmasq.pid: tests side by side would race on it, and the loser exits.
                           "--pid-file"],
                          os.path.join(workdir, "dnsmasq.log"))
        wait_until(lambda: "127.0.0.1:53 " in run(["ss", "-lun"]).stdout, 30,
                   "dnsmasq to listen on 127.0.0.1:53")

    def set(self, names, ip):
        for name in names:
            if ip is None:
                self.records.pop(name, None)
            else:
                self.records[name] = ip
        self._write()
        if getattr(self, "proc", None):
            self.proc.send_signal(signal.SIGHUP)  # dnsmasq re-reads --addn-hosts and clears its cache

    def _write(self):
        with open(self.hosts + ".tmp", "w") as f:
            for name, ip in sorted(self.records.items()):
                f.write(f"{ip} {name}\n")
        os.replace(self.hosts + ".tmp", self.hosts)


class Container:
    """One container of a pod: a process group, restarted when it exits while the pod lives, and
    killed and restarted when its liveness probe fails (after its startup probe passed)."""

    def __init__(self, pod, spec):
        self.pod, self.spec, self.name = pod, spec, spec["name"]
        self.proc = None
        self.restarts = 0
        self.env = pod.container_env(spec)
        self.argv = [expand(a, self.env) for a in spec.get("command", []) + spec.get("args", [])]
        self.probes = {}

    def start(self):
        self.proc = self.pod.exec(self.argv, self.env, log_path=self.pod.log_path, wait=False, container=self.spec)
        self.started = "startupProbe" not in self.spec
        self.probes = {kind: {"next": time.time() + self.spec[kind].get("initialDelaySeconds", 0), "failures": 0}
                       for kind in ("startupProbe", "livenessProbe") if kind in self.spec}

    def exited(self):
        return self.proc is not None and self.proc.poll() is not None

    def check_probes(self):
        """The startup, then the liveness probe, each at its periodSeconds. Returns why the kubelet
        would restart the container now, or None."""
        for kind in ("startupProbe", "livenessProbe"):
            state = self.probes.get(kind)
            if state is None or (kind == "livenessProbe" and not self.started) or (kind == "startupProbe" and self.started):
                continue
            if time.time() < state["next"]:
                continue
            probe = self.spec[kind]
            state["next"] = time.time() + probe.get("periodSeconds", 10)
            if self.pod.probe_ok(probe):
                state["failures"] = 0
                self.started = True
                continue
            state["failures"] += 1
            if state["failures"] >= probe.get("failureThreshold", 3):
                return f"{kind} failed {state['failures']} times"
        return None

    def kill(self, grace):
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log(f"{self.pod.name}: {self.name} still running after the {grace}s grace period: SIGKILL")
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Pod:
    def __init__(self, cluster, ordinal, ip):
        self.cluster = cluster
        self.ordinal = ordinal
        self.name = f"{cluster.sts_name}-{ordinal}"
        self.ip = ip
        self.spec = cluster.sts["spec"]["template"]["spec"]
        self.log_path = os.path.join(cluster.dir, f"{self.name}.log")
        self.containers = []
        self.ready = False
        self.deleting = False
        self._thread = None
        svc = cluster.sts["spec"]["serviceName"]
        self.fqdn = f"{self.name}.{svc}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}"
        scheme = cluster.scheme
        # What the manifests advertise; harness.ClusterIdWatch and the writers use these.
        self.peer_url = f"{scheme}://{self.fqdn}:2380"
        self.client_url = f"{scheme}://{self.fqdn}:2379"

    # --- what the kubelet does ---

    def container_env(self, spec):
        """The container's environment as the kubelet builds it: service links, the downward API
        (metadata.name, metadata.namespace, status.podIP) and $(VAR) expansion in order."""
        env = {"PATH": UPSTREAM_ETCD_PATH if upstream_etcd(spec) else self.cluster.path, "HOSTNAME": self.name,
               "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(API_PORT),
               "KUBERNETES_SERVICE_PORT_HTTPS": str(API_PORT)}
        fields = {"metadata.name": self.name, "metadata.namespace": NAMESPACE, "status.podIP": self.ip,
                  "spec.serviceAccountName": self.spec.get("serviceAccountName", "default")}
        for var in spec.get("env", []):
            if "valueFrom" in var:
                ref = var["valueFrom"].get("fieldRef", {}).get("fieldPath")
                check(ref in fields, f"the harness does not emulate valueFrom {var['valueFrom']}")
                env[var["name"]] = fields[ref]
            else:
                env[var["name"]] = expand(str(var.get("value", "")), env)
        return env

    def mounts(self, spec):
        """(host dir, mount path) for each volumeMount, plus the service-account token."""
        out = [(self.cluster.api.sa_volume(self.cluster.dir), SERVICE_ACCOUNT_DIR)]
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        claims = {c["metadata"]["name"] for c in self.cluster.sts["spec"].get("volumeClaimTemplates", [])}
        for m in spec.get("volumeMounts", []):
            if m["name"] in claims:
                out.append((self.cluster.pvc(m["name"], self.name), m["mountPath"]))
            elif "secret" in volumes.get(m["name"], {}):
                out.append((self.cluster.secret_dir(volumes[m["name"]]["secret"]["secretName"]), m["mountPath"]))
            else:
                fail(f"the harness does not emulate volume {m['name']}")
        return out

    def exec(self, argv, env, log_path=None, wait=True, timeout=120, container=None):
        """Runs argv as a process of this pod: its network, its mounts, its host name. With
        wait=False, a tracked process group writing to log_path; else a CompletedProcess."""
        spec = container or self.spec["containers"][0]
        binds = "".join(f"mkdir -p {shlex.quote(path)} && mount --bind {shlex.quote(src)} {shlex.quote(path)} && "
                        for src, path in self.mounts(spec))
        if upstream_etcd(spec):
            etcd35 = harness.require_etcd35()
            binds += "mount -t tmpfs tmpfs /usr/local/bin && " + "".join(
                f"ln -s {shlex.quote(os.path.join(etcd35, tool))} /usr/local/bin/{tool} && "
                for tool in ("etcd", "etcdctl", "etcdutl") if os.path.exists(os.path.join(etcd35, tool)))
        script = f"hostname {shlex.quote(self.name)} && {binds}exec \"$@\""
        full = ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script, "pod"] + list(argv)
        if not wait:
            return spawn(full, log_path, env=env)
        return run(full, env=env, timeout=timeout)

    def kubectl_exec(self, argv, container=None, timeout=120):
        """`kubectl exec <pod> [-c container] -- argv`, with that container's environment and mounts
        (an init container's too: the harness can run it again)."""
        specs = self.spec["containers"] + self.spec.get("initContainers", [])
        spec = next(c for c in specs if c["name"] == container) if container else specs[0]
        return self.exec(argv, Container(self, spec).env, timeout=timeout, container=spec)

    def start(self):
        self._thread = threading.Thread(target=self._live, daemon=True)
        self._thread.start()

    def _live(self):
        """Init containers one after another (each retried until it succeeds), then the containers,
        restarted with a capped back-off whenever they exit."""
        for spec in self.spec.get("initContainers", []):
            backoff = 1.0
            while not self.deleting:
                c = Container(self, spec)
                c.start()
                self.containers = [c]
                if c.proc.wait() == 0:
                    break
                c.restarts += 1
                log(f"{self.name}: init container {c.name} exited {c.proc.returncode}; again in {backoff:.0f}s")
                time.sleep(backoff)
                backoff = min(backoff * 2, 10)
            if self.deleting:
                return
        self.containers = [Container(self, spec) for spec in self.spec["containers"]]
        for c in self.containers:
            c.start()
        backoff = {c.name: 1.0 for c in self.containers}
        while not self.deleting and not harness._cleaning:
            for c in self.containers:
                why = None if c.exited() else c.check_probes()
                if why and not self.deleting:
                    log(f"{self.name}: {c.name}: {why}: restarting it")
                    c.kill(self.spec.get("terminationGracePeriodSeconds", 30))
                if c.exited() and not self.deleting:
                    log(f"{self.name}: container {c.name} exited {c.proc.returncode}; restarting")
                    time.sleep(backoff[c.name])
                    backoff[c.name] = min(backoff[c.name] * 2, 10)
                    if not self.deleting:
                        c.restarts += 1
                        c.start()
            self._report_readiness()
            time.sleep(0.5)

    def _report_readiness(self):
        """Each container's readiness probe (asked every second at most, not at its periodSeconds,
        to keep the tests short), reported to the API server as the pod's Ready condition."""
        if time.time() < getattr(self, "_next_readiness", 0):
            return
        self._next_readiness = time.time() + 1
        ready = all(c.started and not c.exited() and (not c.spec.get("readinessProbe") or
                                                      self.probe_ok(c.spec["readinessProbe"]))
                    for c in self.containers)
        if ready != self.ready:
            self.ready = ready
            self.cluster.report_status(self)

    def probe_ok(self, probe):
        port = self.port_number(probe.get("httpGet", probe.get("tcpSocket", {}))["port"])
        if "tcpSocket" in probe:
            try:
                socket.create_connection((self.ip, port), timeout=1).close()
                return True
            except OSError:
                return False
        get = probe["httpGet"]
        return 200 <= self.http(get.get("scheme", "HTTP").lower(), port, get["path"])[0] < 400

    def port_number(self, port):
        if isinstance(port, int):
            return port
        for c in self.spec.get("initContainers", []) + self.spec["containers"]:
            for p in c.get("ports", []):
                if p.get("name") == port:
                    return p["containerPort"]
        fail(f"no container port named {port}")

    def http(self, scheme, port, path):
        """(status, body) of GET path on this pod, as the kubelet probes it: 0 when nothing answers."""
        context = ssl._create_unverified_context() if scheme == "https" else None
        return harness.http_get(f"{scheme}://{self.ip}:{port}{path}", context)

    def probe(self, path):
        """GET path on quorate run's status port, as the manifest's probes ask."""
        return self.http("http", 2383, path)

    def terminate(self, grace):
        """SIGTERM to every container at once, SIGKILL to what is left after the grace period."""
        self.deleting = True
        threads = [threading.Thread(target=c.kill, args=(grace,)) for c in self.containers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self._thread:
            self._thread.join(timeout=15)

    def log_tail(self, n=40):
        return harness.tail(self.log_path, n)


class StatefulSetCluster:
    """The objects of k8s/<variant> (or those given: the chart's rendering, a test's own) applied to
    the emulated API server, and the StatefulSet controller: pods by ordinal, created in parallel
    (podManagementPolicy: Parallel), recreated after a delete, added and removed on scale (with the
    PVC retention policy), and given a new template by an upgrade."""

    def __init__(self, variant="run", replicas=None, objects=None):
        harness.require("etcd")
        harness.require("curl")
        harness.require("unshare")
        self.variant = variant
        self.objects = objects if objects is not None else load_variant(variant)
        self.scheme = peer_scheme(next(o for (kind, _), o in self.objects.items() if kind == "StatefulSet"))
        self.sts = next(o for (kind, _), o in self.objects.items() if kind == "StatefulSet")
        if replicas is not None:
            self.sts["spec"]["replicas"] = replicas
        self.sts_name = self.sts["metadata"]["name"]
        self.dir = tempfile.mkdtemp(prefix="quorate-k8s-")
        if not harness.KEEP:
            harness._cleanups.append(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        else:
            log(f"keeping {self.dir}")
        # The container image: quorate (the build under test) and etcd on PATH.
        bindir = os.path.join(self.dir, "bin")
        os.makedirs(bindir)
        os.symlink(os.path.abspath(harness.QUORATE), os.path.join(bindir, "quorate"))
        if harness.ETCD_DIR:  # the etcd under test comes before the system's
            for tool in ("etcd", "etcdctl"):
                os.symlink(os.path.join(harness.ETCD_DIR, tool), os.path.join(bindir, tool))
        self.path = f"{bindir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        check(os.environ.get(INSIDE), "StatefulSetCluster runs inside the test's namespace: use statefulset.main")
        self.dns = DnsServer(self.dir)
        self.api = ApiServer(self.dir)
        self.pods = {}
        self.lock = threading.Lock()
        self.next_ip = 10
        self.token = f"etcd-{NAMESPACE}"
        for (kind, name), obj in self.objects.items():
            path = {"Service": f"/api/v1/namespaces/{NAMESPACE}/services",
                    "StatefulSet": f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets"}.get(kind)
            if path:
                self.api.must("POST", path, obj)

    @property
    def replicas(self):
        return self.sts["spec"]["replicas"]

    def pvc(self, claim, pod_name):
        path = os.path.join(self.dir, "pvc", f"{claim}-{pod_name}")
        os.makedirs(path, exist_ok=True)
        return path

    def secret_dir(self, name):
        path = os.path.join(self.dir, "secrets", name)
        check(os.path.isdir(path), f"Secret {name} does not exist: create it first (the README says how)")
        return path

    def create_tls_secret(self, name):
        """The Secret k8s/README.md asks for: ca.crt, and tls.crt/tls.key good for server and client
        auth, naming every pod of the headless Service and the client Service. And 127.0.0.1: etcd
        checks a peer's certificate against the address it connects from (a wildcard name by the
        address's PTR record), and these pods all connect from 127.0.0.1, not from their pod IP."""
        path = os.path.join(self.dir, "secrets", name)
        os.makedirs(path)
        svc = self.sts["spec"]["serviceName"]
        sans = (f"DNS:*.{svc}.{NAMESPACE}.svc.{CLUSTER_DOMAIN},DNS:*.{svc}.{NAMESPACE}.svc,"
                f"DNS:{svc}-client.{NAMESPACE}.svc,IP:127.0.0.1")
        ext = os.path.join(path, "ext.cnf")
        with open(ext, "w") as f:
            f.write(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\n")
        ca_key, csr = os.path.join(path, "ca.key"), os.path.join(path, "tls.csr")
        for argv in (["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", ca_key, "-out", f"{path}/ca.crt", "-days", "2", "-subj", "/CN=etcd-ca"],
                     ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", f"{path}/tls.key", "-out", csr, "-subj", f"/CN={svc}"],
                     ["openssl", "x509", "-req", "-in", csr, "-CA", f"{path}/ca.crt", "-CAkey", ca_key,
                      "-CAcreateserial", "-out", f"{path}/tls.crt", "-days", "2", "-extfile", ext]):
            run(argv, check_rc=0)
        for extra in (ca_key, csr, ext, f"{path}/ca.srl"):
            os.remove(extra)

    def report_status(self, pod):
        status = {"phase": "Running", "podIP": pod.ip, "podIPs": [{"ip": pod.ip}],
                  "conditions": [{"type": "Ready", "status": "True" if pod.ready else "False"}]}
        code, _ = self.api.call("PUT", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod.name}/status",
                                {"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": pod.name, "namespace": NAMESPACE}, "status": status})
        if code not in (200, 404):  # 404: deleted meanwhile
            log(f"{pod.name}: status update answered {code}")

    def _create_pod(self, ordinal):
        with self.lock:
            ip = f"127.0.0.{self.next_ip}"
            self.next_ip += 1
            check(self.next_ip < 255, "out of pod addresses")
        pod = Pod(self, ordinal, ip)
        labels = dict(self.sts["spec"]["template"]["metadata"].get("labels", {}))
        labels["statefulset.kubernetes.io/pod-name"] = pod.name
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod.name, "namespace": NAMESPACE, "labels": labels,
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                                  "name": self.sts_name, "uid": "emulated", "controller": True}]},
                "spec": dict(pod.spec, hostname=pod.name, subdomain=self.sts["spec"]["serviceName"])}
        self.api.must("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body)
        self.report_status(pod)
        self.dns.set([pod.fqdn], ip)
        self.pods[pod.name] = pod
        pod.start()
        return pod

    def create(self):
        """Every ordinal at once (podManagementPolicy: Parallel)."""
        check(self.sts["spec"].get("podManagementPolicy") == "Parallel", "the manifest's StatefulSet is not Parallel")
        for i in range(self.replicas):
            self._create_pod(i)
        return list(self.pods.values())

    def delete_pods(self, names, recreate=True, grace=None):
        """`kubectl delete pod` of several at once: each gets its deletionTimestamp (so discovery
        skips it), SIGTERM, the manifest's grace period, then it is gone; the controller then
        recreates those below replicas, with the same name and volume and a new IP."""
        grace = grace if grace is not None else self.sts["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        pods = [self.pods[n] for n in names]
        for p in pods:
            self.api.must("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{p.name}?gracePeriodSeconds={grace}")
        threads = [threading.Thread(target=p.terminate, args=(grace,)) for p in pods]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in pods:
            self.api.must("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{p.name}?gracePeriodSeconds=0", ok=(200, 404))
            self.dns.set([p.fqdn], None)
            del self.pods[p.name]
        if recreate:
            for p in pods:
                if p.ordinal < self.replicas:
                    self._create_pod(p.ordinal)
        return [self.pods[p.name] for p in pods if p.name in self.pods]

    def upgrade(self, objects):
        """`helm upgrade` to these objects: the StatefulSet's new pod template (replicas stay as they
        are), which pods get when they are next created; nothing is rolled."""
        sts = next(o for (kind, _), o in objects.items() if kind == "StatefulSet")
        check(sts["metadata"]["name"] == self.sts_name, f"the upgrade renders StatefulSet {sts['metadata']['name']}")
        self.sts["spec"]["template"] = sts["spec"]["template"]

    def delete_pvc(self, claim, pod_name):
        """`kubectl delete pvc` while its pod runs: the pvc-protection finalizer holds it until the
        pod is deleted; the recreated pod gets a new, empty volume."""
        path = os.path.join(self.dir, "pvc", f"{claim}-{pod_name}")
        self.delete_pods([pod_name], recreate=False)
        shutil.rmtree(path)
        pod = self._create_pod(int(pod_name.rsplit("-", 1)[1]))
        return pod

    def scale(self, replicas):
        """`kubectl scale statefulset --replicas=N`: the scale subresource, then the controller adds
        the missing ordinals at once or deletes the highest ones at once, and with
        persistentVolumeClaimRetentionPolicy.whenScaled: Delete, their volumes too."""
        self.api.must("PUT", f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/{self.sts_name}/scale",
                      {"apiVersion": "autoscaling/v1", "kind": "Scale",
                       "metadata": {"name": self.sts_name, "namespace": NAMESPACE}, "spec": {"replicas": replicas}})
        old = self.replicas
        self.sts["spec"]["replicas"] = replicas
        if replicas > old:
            for i in range(old, replicas):
                self._create_pod(i)
            return
        gone = [f"{self.sts_name}-{i}" for i in range(replicas, old)]
        self.delete_pods(gone, recreate=False)
        if self.sts["spec"].get("persistentVolumeClaimRetentionPolicy", {}).get("whenScaled") == "Delete":
            for claim in self.sts["spec"].get("volumeClaimTemplates", []):
                for name in gone:
                    shutil.rmtree(os.path.join(self.dir, "pvc", f"{claim['metadata']['name']}-{name}"),
                                  ignore_errors=True)

    # --- looking at the cluster from inside the namespace, as a client pod would ---

    def pod_list(self):
        return sorted(self.pods.values(), key=lambda p: p.ordinal)

    @property
    def nodes(self):  # what harness.ClusterIdWatch walks
        return self.pod_list()

    prefix = ()  # what harness.ClusterIdWatch runs etcdctl under: the test already runs in the namespace

    def endpoints(self, pods=None):
        return ",".join(p.client_url for p in (pods or self.pod_list()))

    def etcdctl(self, *args, endpoints=None, check_rc=0, timeout=30):
        return run(["etcdctl", "--endpoints", endpoints or self.endpoints(), "--dial-timeout", "2s",
                    "--command-timeout", "5s"] + self.etcdctl_tls() + list(args),
                   check_rc=check_rc, timeout=timeout)

    def etcdctl_tls(self):
        if self.scheme != "https":
            return []
        d = self.secret_dir("etcd-tls")
        return ["--cacert", f"{d}/ca.crt", "--cert", f"{d}/tls.crt", "--key", f"{d}/tls.key"]

    def member_list(self, endpoint=None):
        return json.loads(self.etcdctl("member", "list", "-w", "json", endpoints=endpoint).stdout)

    def voters(self):
        """{name: hex ID} when every listed member is a started voter, else None."""
        members = self.member_list()["members"]
        if not all(m.get("name") and m.get("clientURLs") and not m.get("isLearner") for m in members):
            return None
        return {m["name"]: harness.to_hex(m["ID"]) for m in members}

    def wait_ready(self, count=None, timeout=90):
        """Waits for `count` started voters, named as the pods, and every pod Ready by its probe."""
        count = count or self.replicas

        def ready():
            voters = self.voters()
            return (voters is not None and sorted(voters) == sorted(p.name for p in self.pod_list())
                    and len(voters) == count and all(p.ready for p in self.pod_list()) and voters)
        try:
            return wait_until(ready, timeout, f"{count} started voters and every pod Ready", interval=0.5)
        except AssertionError:
            self.dump_logs()
            raise

    def predicted(self):
        """`quorate discover -w json` in etcd-0, in the container configured for discovery: the IDs
        etcd will assign to the set the k8s provider finds."""
        pod = self.pod_list()[0]
        specs = pod.spec["containers"] + pod.spec.get("initContainers", [])
        container = next(c["name"] for c in specs if any(e["name"] == "QUORATE_DISCOVERY" for e in c.get("env", [])))
        r = pod.kubectl_exec(["quorate", "discover", "-w", "json", "--timeout", "30s"], container=container)
        check(r.returncode == 0, f"quorate discover in {pod.name} exited {r.returncode}: {r.stderr}")
        return json.loads(r.stdout)

    def cluster_ids(self):
        ids = {}
        for p in self.pod_list():
            ml = self.member_list(endpoint=p.client_url)
            ids[p.name] = harness.to_hex(ml["header"]["cluster_id"])
        return ids

    def raft_term(self):
        """The highest raft term the members that answer report: each election raises it by one."""
        r = self.etcdctl("endpoint", "status", "-w", "json", check_rc=None)
        try:
            status = json.loads(r.stdout or "[]")
        except ValueError:
            status = []
        terms = [int(s["Status"]["raftTerm"]) for s in status]
        check(terms, f"no member reported its raft term: {r.stderr.strip()[-300:]}")
        return max(terms)

    def leaders(self):
        """The leader every endpoint names, as hex IDs (one when they agree)."""
        status = json.loads(self.etcdctl("endpoint", "status", "-w", "json").stdout)
        return {harness.to_hex(s["Status"]["leader"]) for s in status}

    def make_leader(self, member_id):
        """etcdctl move-leader, asked of the current leader; waits until every endpoint names it."""
        status = json.loads(self.etcdctl("endpoint", "status", "-w", "json").stdout)
        current = harness.to_hex(status[0]["Status"]["leader"])
        if current != member_id:
            url = next(s["Endpoint"] for s in status if harness.to_hex(s["Status"]["header"]["member_id"]) == current)
            self.etcdctl("move-leader", member_id, endpoints=url)
        wait_until(lambda: self.leaders() == {member_id}, 30, f"{member_id} to lead")

    def put(self, key, value):
        self.etcdctl("put", key, value)

    def get(self, key, pod):
        r = self.etcdctl("get", key, "--print-value-only", "--consistency=s", endpoints=pod.client_url)
        return r.stdout.strip()

    @staticmethod
    def decisions(pod):
        """The actions quorate decided in this pod, in order, from its JSON log lines
        ("decision: restart: ...")."""
        out = []
        for line in pod.log_tail(100000).splitlines():
            if not line.startswith("{"):
                continue
            try:
                msg = json.loads(line).get("msg", "")
            except ValueError:
                continue
            if msg.startswith("decision: "):
                out.append(msg.split(":")[1].strip())
        return out

    def dump_logs(self):
        for p in self.pod_list():
            print(f"----- {p.name} ({p.ip}) log tail -----\n{p.log_tail()}", flush=True)
        try:
            print(f"----- apiserver emulator log tail -----\n{open(self.api.log_path).read()[-3000:]}", flush=True)
        except OSError:
            pass


class Writer(harness.Writer):
    """harness.Writer through the pods' client URLs, from inside the namespace."""

    # When the leader goes, etcd loses the proposals followers had forwarded to it while it handed
    # over, and each such put fails at its client's deadline. That is etcd's behaviour, not a gap in
    # the cluster: the writer may lose this many puts per election (the raft term counts them), and
    # more would mean the cluster was unwritable for longer than its leader changes.
    LOST_TO_A_LEADER_CHANGE = 2

    def __init__(self, cluster, pods, pause=0.05):
        super().__init__(cluster, cluster.endpoints(pods), pause)
        self.term_before = cluster.raft_term()

    def check_failures(self, what):
        """No put failed but those the elections in the writer's time may cost (after finish())."""
        elections = self.cluster.raft_term() - self.term_before
        allowed = self.LOST_TO_A_LEADER_CHANGE * elections
        log(f"{len(self.ok)} writes, {len(self.failures)} failed, {elections} election(s) meanwhile")
        for f in self.failures:
            log(f"  failed: {f}")
        check(len(self.failures) <= allowed,
              f"{len(self.failures)} writes failed {what} ({elections} elections allow {allowed}): {self.failures[:5]}")


def main(test):
    """Runs test() inside a network namespace of its own whose resolver is 127.0.0.1 (the pods'
    dnsmasq): creates it, re-executes this script there, and on the way out kills whatever still
    runs in it before deleting it."""
    if os.environ.get(INSIDE):
        harness.main(test)
        return
    netns = harness.Netns()
    harness._cleanups.append(lambda: run(["sh", "-c", f"ip netns pids {netns.name} | xargs -r kill -9"]))
    env = dict(os.environ, **{INSIDE: netns.name})
    inner = subprocess.Popen(netns.prefix + [sys.executable, os.path.abspath(sys.argv[0])], env=env,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    harness._track(inner)
    sys.exit(inner.wait())
