"""Drives real quorate, real etcd (3.4, or 3.5 with QUORATE_TEST_ETCD_DIR) and real dnsmasq for the
integration tests.

Nodes take loopback addresses PREFIX.1, PREFIX.2, ... (PREFIX from QUORATE_TEST_NET, default
127.0.0) with etcd's standard ports, so the tests never run in parallel. Every process a test starts
is in a process group of its own and is killed when the test ends, whatever way it ends.
"""
import atexit
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

QUORATE = os.environ.get("QUORATE_BIN", "quorate")
NET = os.environ.get("QUORATE_TEST_NET", "127.0.0")
KEEP = os.environ.get("QUORATE_KEEP") == "1"
SKIP = 77

_lock = threading.RLock()  # re-entrant: the signal handler may run while the main thread holds it
_procs = []
_cleanups = []
_cleaning = False
_cleaner = None  # the thread running _cleanup: what it starts itself (ip netns delete) must run


def _killpg(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _track(p):
    """Registers a child (its own process group) for the final clean-up; if that already began,
    kills it at once so nothing started by a late thread outlives the test (the clean-ups' own
    commands excepted)."""
    with _lock:
        late = _cleaning and threading.get_ident() != _cleaner
        _procs.append(p)
    if late:
        _killpg(p)


def _cleanup():
    """Kills every process group the harness started, then runs the registered clean-ups (netns,
    temp dirs). Runs once: at exit, or from a signal handler."""
    global _cleaning, _cleaner
    with _lock:
        if _cleaning:
            return
        _cleaning = True
        _cleaner = threading.get_ident()
        procs = list(_procs)
    for p in procs:
        if p.poll() is None:  # a reaped leader's group id may belong to someone else by now
            _killpg(p)
    for p in procs:
        try:
            p.wait(timeout=5)
        except Exception:
            pass
    for fn in reversed(_cleanups):
        try:
            fn()
        except Exception as e:  # cleanup must go on
            print(f"cleanup: {e}", file=sys.stderr)


def _on_signal(signum, _frame):
    # Clean up here rather than by raising: the interpreter would first wait for the bootstrap
    # threads (each blocked in `quorate init`), and meson SIGKILLs the test 0.5 s after its SIGTERM.
    print(f"harness: signal {signum}: killing every process the test started", file=sys.stderr, flush=True)
    _cleanup()
    os._exit(128 + signum)


atexit.register(_cleanup)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, _on_signal)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fail(msg):
    raise AssertionError(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def require(binary):
    if shutil.which(binary) is None:
        skip(f"{binary} is not installed (scripts/deps installs it)")


# The etcd under test. By default the one on PATH (Debian bookworm's 3.4.23); with
# QUORATE_TEST_ETCD_DIR, the etcd and etcdctl in that directory (the `-etcd35` tests give
# third_party/etcd-3.5/usr/bin, where scripts/deps unpacks Debian's 3.5), put first on PATH so that
# every etcd and etcdctl a test starts is that one, and given to `quorate run` as --etcd.
SYSTEM_ETCD = shutil.which("etcd")
ETCD35_DIR = os.environ.get("QUORATE_ETCD35_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "third_party", "etcd-3.5", "usr", "bin")
ETCD_DIR = os.environ.get("QUORATE_TEST_ETCD_DIR", "")


def require_etcd35():
    """The directory of etcd 3.5's binaries; exits 77 when scripts/deps has not fetched them."""
    if not os.access(os.path.join(ETCD35_DIR, "etcd"), os.X_OK):
        skip(f"etcd 3.5 is not in {os.path.normpath(ETCD35_DIR)} (scripts/deps fetches it)")
    return os.path.normpath(ETCD35_DIR)


def require_etcd34_and_35():
    """(etcd 3.4 on PATH, etcd 3.5 of scripts/deps), for the tests that need both; exits 77 without."""
    require("etcdctl")
    if SYSTEM_ETCD is None:
        skip("no etcd 3.4 on PATH (scripts/deps installs it)")
    return SYSTEM_ETCD, os.path.join(require_etcd35(), "etcd")


if ETCD_DIR:
    if not os.access(os.path.join(ETCD_DIR, "etcd"), os.X_OK):
        skip(f"no etcd in QUORATE_TEST_ETCD_DIR={ETCD_DIR} (scripts/deps fetches etcd 3.5)")
    ETCD_DIR = os.path.normpath(ETCD_DIR)
    os.environ["PATH"] = ETCD_DIR + os.pathsep + os.environ.get("PATH", "")
ETCD = shutil.which("etcd") or "etcd"


def wait_until(fn, timeout, what, interval=0.1):
    """Polls fn until it returns a truthy value; fails naming `what` after `timeout` seconds."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # not there yet
            last = e
        time.sleep(interval)
    fail(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last})" if last else ""))


def spawn(argv, log_path, prefix=(), env=None):
    full = list(prefix) + list(argv)
    with open(log_path, "ab") as out:
        out.write(f"\n$ {' '.join(full)}\n".encode())
        out.flush()
        p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True, env=env)
    _track(p)
    return p


def run(argv, prefix=(), timeout=120, check_rc=None, env=None):
    """Runs a command to completion (a CompletedProcess), in a process group of its own that the
    clean-up kills if the test ends first; after `timeout` it is killed and TimeoutExpired raised."""
    full = list(prefix) + list(argv)
    p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, env=env)
    _track(p)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _killpg(p)
        p.communicate()
        raise
    finally:
        with _lock:
            if p in _procs:
                _procs.remove(p)
    r = subprocess.CompletedProcess(full, p.returncode, out, err)
    if check_rc is not None and r.returncode != check_rc:
        fail(f"{' '.join(argv)} exited {r.returncode}, wanted {check_rc}\nstdout: {r.stdout}\nstderr: {r.stderr}")
    return r


def http_get(url, context=None):
    """(status, body) of GET url; status 0 when nothing answers there (yet)."""
    import urllib.request
    import urllib.error
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:
        return 0, str(e)


def tail(path, n):
    """The last n lines of a log file ("" while it does not exist)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except FileNotFoundError:
        return ""


def to_hex(i):
    return format(int(i), "x")


class Node:
    def __init__(self, cluster, index):
        self.cluster = cluster
        self.index = index
        self.name = f"n{index}"
        self.ip = f"{NET}.{index}"
        self.host = self.ip
        self.data_dir = os.path.join(cluster.dir, self.name)
        self.log_path = os.path.join(cluster.dir, f"{self.name}.log")
        self.etcd = None     # etcd started by the test (init mode)
        self.quorate = None  # quorate run
        self.env = None      # quorate run's environment; None: the test's

    @property
    def peer_url(self):
        return f"http://{self.host}:2380"

    @property
    def client_url(self):
        return f"http://{self.ip}:2379"

    def args(self, extra=()):
        return ["--name", self.name, "--data-dir", self.data_dir,
                "--initial-advertise-peer-urls", self.peer_url,
                "--advertise-client-urls", self.client_url,
                "--listen-peer-urls", f"http://{self.ip}:2380",
                "--listen-client-urls", self.client_url,
                "--initial-cluster-token", self.cluster.token,
                "--agent-listen", f"{self.ip}:2382",
                "--timeout", self.cluster.timeout] + list(self.cluster.discovery) + list(extra)

    def init(self, extra=(), check_rc=0):
        r = run([QUORATE, "init", "-w", "json"] + self.args(extra), prefix=self.cluster.prefix, check_rc=check_rc)
        with open(self.log_path, "a") as f:
            f.write(f"$ quorate init ... -> {r.returncode}\n{r.stdout}{r.stderr}")
        return json.loads(r.stdout) if r.returncode == 0 else r

    def start_etcd(self):
        conf = os.path.join(self.data_dir, "quorate", "etcd.conf.yml")
        self.etcd = spawn([ETCD, "--config-file", conf], self.log_path, prefix=self.cluster.prefix)

    def init_and_start(self, delay=0.0):
        time.sleep(delay)
        out = self.init()
        self.start_etcd()
        return out

    def run(self, extra=(), etcd_args=(), etcd=None):
        argv = [QUORATE, "run", "--status-listen", f"{self.ip}:2383", "--etcd", etcd or ETCD] + self.args(extra)
        if etcd_args:
            argv += ["--"] + list(etcd_args)
        self.quorate = spawn(argv, self.log_path, prefix=self.cluster.prefix, env=self.env)
        return self.quorate

    def etcd_pid(self):
        """The etcd child of `quorate run`."""
        # By its data dir: quorate also runs `etcd --version` before each start (rule 6), a short-lived
        # child by the same name.
        r = run(["pgrep", "-P", str(self.quorate.pid), "-f", "etcd.* --data-dir"])
        pids = r.stdout.split()
        return int(pids[0]) if pids else None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        for p in (self.quorate, self.etcd):
            if p is None or p.poll() is not None:
                continue
            p.send_signal(sig)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.quorate = self.etcd = None

    def kill(self):
        for p in (self.quorate, self.etcd):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.quorate = self.etcd = None

    def wipe(self):
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def http(self, path):
        return http_get(f"http://{self.ip}:2383{path}")

    def log_tail(self, n=40):
        return tail(self.log_path, n)


class Cluster:
    def __init__(self, size, discovery=None, token=None, timeout="60s", prefix=(), dns_names=False):
        self.dir = tempfile.mkdtemp(prefix="quorate-it-")
        if not KEEP:
            _cleanups.append(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        else:
            log(f"keeping {self.dir}")
        self.token = token or f"it-{random.randrange(1 << 30):x}"
        self.timeout = timeout
        self.prefix = list(prefix)
        self.nodes = [Node(self, i) for i in range(1, size + 1)]
        if dns_names:
            for n in self.nodes:
                n.host = f"{n.name}.quorate.test"
        self.discovery = discovery if discovery is not None else ["--initial-cluster", self.initial_cluster()]

    def add_node(self):
        n = Node(self, len(self.nodes) + 1)
        if self.nodes and self.nodes[0].host != self.nodes[0].ip:
            n.host = f"{n.name}.quorate.test"
        self.nodes.append(n)
        return n

    def initial_cluster(self, nodes=None):
        return ",".join(f"{n.name}={n.peer_url}" for n in (nodes or self.nodes))

    def endpoints(self, nodes=None):
        return ",".join(n.client_url for n in (nodes or self.nodes))

    def etcdctl(self, *args, endpoints=None, check_rc=0, timeout=30):
        return run(["etcdctl", "--endpoints", endpoints or self.endpoints(), "--dial-timeout", "2s",
                    "--command-timeout", "5s"] + list(args), check_rc=check_rc, timeout=timeout,
                   prefix=self.prefix)

    def member_list(self, endpoint=None):
        r = self.etcdctl("member", "list", "-w", "json", endpoints=endpoint)
        return json.loads(r.stdout)

    def discover(self, extra=()):
        r = run([QUORATE, "discover", "-w", "json", "--initial-cluster-token", self.token, "--timeout", "30s"]
                + list(self.discovery) + list(extra), prefix=self.prefix, check_rc=0)
        return json.loads(r.stdout)

    def all_started(self, count=None):
        """True when one cluster has `count` started voters, each answering with the same cluster ID."""
        count = count or len(self.nodes)
        ml = self.member_list()
        members = ml["members"]
        if len(members) != count:
            return False
        return all(m.get("clientURLs") and m.get("name") and not m.get("isLearner") for m in members)

    def cluster_ids(self, nodes=None):
        ids = {}
        for n in nodes or self.nodes:
            r = self.etcdctl("member", "list", "-w", "json", endpoints=n.client_url)
            ids[n.name] = to_hex(json.loads(r.stdout)["header"]["cluster_id"])
        return ids

    def check_prediction(self, predicted, nodes=None):
        """One cluster ID everywhere, equal to quorate discover's; member IDs equal too."""
        ids = self.cluster_ids(nodes)
        check(len(set(ids.values())) == 1, f"more than one cluster: {ids}")
        check(set(ids.values()) == {predicted["clusterID"]},
              f"cluster ID {ids} differs from the predicted {predicted['clusterID']}")
        actual = {m["name"]: to_hex(m["ID"]) for m in self.member_list()["members"]}
        want = {m["name"]: m["id"] for m in predicted["members"]}
        check(actual == want, f"member IDs {actual} differ from the predicted {want}")

    def start_all(self, fn, max_delay=3.0):
        """Runs fn(node, delay) for every node at once, each after a random delay."""
        errors = []

        def go(n):
            try:
                fn(n, random.uniform(0, max_delay))
            except BaseException as e:  # reported below
                errors.append(f"{n.name}: {e}")
        # Daemon threads: a test that ends early must not wait for an `init` still blocked.
        threads = [threading.Thread(target=go, args=(n,), daemon=True) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            fail("; ".join(errors))

    def bootstrap(self, predict, label):
        """Starts every node at once (init, then etcd), waits for one cluster of started members and
        checks its IDs against `predict`: a `quorate discover` answer, or a function that makes one
        once the nodes have registered (the rendezvous providers only know the set then)."""
        decisions = {}

        def start(node, delay):
            decisions[node.name] = node.init_and_start(delay)["decision"]
        self.start_all(start)
        log(f"{label}, {len(self.nodes)} nodes decided {decisions}")
        check(set(decisions.values()) <= {"new", "late-initial"}, f"unexpected decisions {decisions}")
        predicted = predict() if callable(predict) else predict
        try:
            wait_until(lambda: self.all_started(), 60, f"all {len(self.nodes)} members started")
            self.check_prediction(predicted)
        except AssertionError:
            self.dump_logs()
            raise
        self.stop_all()

    def discover_as_first(self):
        """The sealed set, as the first node sees it."""
        return self.discover(["--name", self.nodes[0].name, "--initial-advertise-peer-urls", self.nodes[0].peer_url])

    def race(self, seats, discovery, rounds, timeout="5s"):
        """Every node runs `quorate discover` at once for `seats` seats, `rounds` times; discovery(r)
        gives round r's flags. Yields, per round, the sealed sets seen and the stderr of those that failed.
        The extra node waits out `timeout` (a seat may free); the others need it to cover the lag
        between the first and the last of the processes started, seconds on a loaded machine."""
        for r in range(rounds):
            procs = [subprocess.Popen(
                [QUORATE, "discover", "-w", "json", "--name", n.name, "--initial-advertise-peer-urls", n.peer_url,
                 "--cluster-size", str(seats), "--timeout", timeout, "--initial-cluster-token", f"{self.token}-{r}"]
                + discovery(r), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in self.nodes]
            results = [(p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for p in procs]
            sets = {json.dumps(sorted(m["name"] for m in json.loads(out)["members"]))
                    for rc, out, _ in results if rc == 0}
            yield r, [json.loads(x) for x in sets], [err for rc, _, err in results if rc != 0]

    def stop_all(self):
        threads = [threading.Thread(target=n.stop) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def dump_logs(self):
        for n in self.nodes:
            print(f"----- {n.name} log tail -----\n{n.log_tail()}", file=sys.stderr)


class Netns:
    """A network namespace of the test's own with lo up and a resolver of its own on 127.0.0.1."""

    def __init__(self):
        require("ip")
        self.name = f"quorate-{os.getpid()}"
        r = run(["ip", "netns", "add", self.name])
        if r.returncode != 0:
            skip(f"cannot create a network namespace: {r.stderr.strip()}")
        _cleanups.append(self.delete)
        run(["ip", "-n", self.name, "link", "set", "lo", "up"], check_rc=0)
        os.makedirs(f"/etc/netns/{self.name}", exist_ok=True)
        with open(f"/etc/netns/{self.name}/resolv.conf", "w") as f:
            f.write("nameserver 127.0.0.1\n")
        self.prefix = ["ip", "netns", "exec", self.name]

    def delete(self):
        run(["ip", "netns", "delete", self.name])
        shutil.rmtree(f"/etc/netns/{self.name}", ignore_errors=True)


class Dns:
    """A real dnsmasq answering for quorate.test inside `netns` (unknown names: NXDOMAIN)."""

    def __init__(self, netns, workdir):
        self.netns = netns
        self.conf = os.path.join(workdir, "dnsmasq.conf")
        self.log_path = os.path.join(workdir, "dnsmasq.log")
        self.proc = None
        self.lines = []

    def records(self, lines):
        self.lines = list(lines)
        with open(self.conf, "w") as f:
            f.write("\n".join(self.lines) + "\n")
        self.restart()

    def restart(self):
        dnsmasq = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
        if not os.path.exists(dnsmasq):
            skip("dnsmasq is not installed (scripts/deps installs dnsmasq-base)")
        self.stop()
        self.proc = spawn([dnsmasq, "-k", f"--conf-file={self.conf}", "--no-resolv", "--no-hosts",
                           "--local=/quorate.test/", "--bind-interfaces", "--listen-address=127.0.0.1",
                           "--port=53", "--user=root", "--log-facility=-",
                           # No /var/run/dnsmasq.pid: tests side by side would race on it, and the loser exits.
                           "--pid-file"],
                          self.log_path, prefix=self.netns.prefix)
        wait_until(self._listening, 30, "dnsmasq to listen on 127.0.0.1:53")

    def _listening(self):
        check(self.proc.poll() is None, f"dnsmasq exited; see {self.log_path}")
        return "127.0.0.1:53 " in run(["ss", "-lun"], prefix=self.netns.prefix).stdout

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=5)
        self.proc = None

    @staticmethod
    def srv_records(nodes, service="etcd-server", port=2380):
        lines = []
        for n in nodes:
            lines.append(f"srv-host=_{service}._tcp.quorate.test,{n.name}.quorate.test,{port},0,10")
            lines.append(f"host-record={n.name}.quorate.test,{n.ip}")
        return lines


def main(test):
    """Runs test(); prints a verdict; the exit code is what meson reads."""
    start = time.time()
    try:
        test()
    except SystemExit:
        raise
    except BaseException:
        import traceback
        traceback.print_exc()
        print(f"FAIL after {time.time() - start:.1f}s", flush=True)
        sys.exit(1)
    print(f"PASS in {time.time() - start:.1f}s", flush=True)


# --- quorate run scenarios (issue 3): several nodes at once, health, a writer, a cluster-ID watch ---

def peer_members(node):
    """etcd's GET /members on the node's peer URL (answered before quorum, unlike the client API):
    (cluster ID in hex, the members as JSON), or None when nothing answers there."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"{node.peer_url}/members", timeout=1) as r:
            return r.headers.get("X-Etcd-Cluster-Id"), json.loads(r.read().decode())
    except (OSError, ValueError):
        return None


def healthy_cluster_on(etcd, size=3):
    """`size` nodes under `quorate run --etcd ETCD`, started one after the other, once healthy."""
    c = Cluster(size)
    for n in c.nodes:
        n.run(etcd=etcd)
    wait_healthy(c)
    return c


def free_port():
    """A TCP port on 127.0.0.1 nothing listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(port, what, timeout=30):
    def listening():
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    wait_until(listening, timeout, f"{what} to listen on 127.0.0.1:{port}")


def start_moto(cluster):
    """moto_server (EC2, Auto Scaling, STS, S3...) on 127.0.0.1 at a free port, logging into the
    cluster's dir; its endpoint URL. Skips the test (77) where moto is not installed."""
    moto = shutil.which("moto_server")
    if moto is None:
        skip("moto_server is not installed (python3 -m pip install 'moto[server]')")
    port = free_port()
    spawn([moto, "-H", "127.0.0.1", "-p", str(port)], os.path.join(cluster.dir, "moto.log"))
    wait_listening(port, "moto_server")
    return f"http://127.0.0.1:{port}"


def run_together(nodes, extra=()):
    """Starts `quorate run` on every node at the same moment."""
    threads = [threading.Thread(target=n.run, args=(extra,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def stop_together(nodes):
    """SIGTERM to every node's quorate at once; waits for them all; their exit codes by name."""
    codes = {}

    def stop(n):
        p = n.quorate
        n.stop()
        codes[n.name] = p.returncode if p is not None else None
    threads = [threading.Thread(target=stop, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def member_ids(cluster, endpoint=None):
    """{name: hex member ID} of the started members, as etcd lists them."""
    return {m["name"]: to_hex(m["ID"]) for m in cluster.member_list(endpoint)["members"] if m.get("name")}


def started_voters(cluster, count, endpoint=None):
    """True when etcd lists exactly `count` members, each started and none a learner."""
    ml = cluster.member_list(endpoint)["members"]
    return len(ml) == count and all(m.get("name") and m.get("clientURLs") and not m.get("isLearner") for m in ml)


def keys_on(cluster, node, prefix="/"):
    """{key: value} under `prefix` from the node's own store (a serializable read, so it is this
    member's copy of the data, not the leader's)."""
    import base64
    r = cluster.etcdctl("get", prefix, "--prefix", "--consistency=s", "-w", "json", endpoints=node.client_url)
    return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode()
            for kv in json.loads(r.stdout).get("kvs", [])}


def keys_caught_up(cluster, node, prefix, holds, timeout=30):
    """The node's own keys under `prefix` (keys_on) once `holds(keys)`: writes are acknowledged by a
    quorum that may not include this node, and a member that just started applies the leader's
    entries a moment after it answers. The last read when it never holds, for the caller's check to
    show: a key lost for good is still a failure."""
    deadline = time.time() + timeout
    while True:
        try:
            got = keys_on(cluster, node, prefix)
        except Exception:  # not serving yet
            got = {}
        if holds(got) or time.time() >= deadline:
            return got
        time.sleep(0.1)


def all_ready(nodes):
    return all(n.http("/readyz")[0] == 200 for n in nodes)


def wait_healthy(cluster, count=None, nodes=None, timeout=60):
    """Waits for `count` started voters and /readyz 200 on `nodes` (default: all); dumps logs if not."""
    nodes = nodes or cluster.nodes
    count = count or len(cluster.nodes)
    try:
        wait_until(lambda: started_voters(cluster, count) and all_ready(nodes), timeout,
                   f"{count} started voters, /readyz 200 on {','.join(n.name for n in nodes)}")
    except AssertionError:
        cluster.dump_logs()
        raise


def log_size(node):
    try:
        return os.path.getsize(node.log_path)
    except FileNotFoundError:
        return 0


def log_since(node, offset=0):
    with open(node.log_path, errors="replace") as f:
        f.seek(offset)
        return f.read()


def wait_log(node, text, timeout, since=0, interval=0.02):
    """Waits until `text` appears in the node's log after byte `since`."""
    return wait_until(lambda: text in log_since(node, since), timeout, f"{node.name}'s log to say {text!r}",
                      interval=interval)


class Writer(threading.Thread):
    """Puts /w/NNNNN through `endpoints` one after another until stopped, counting what failed."""

    def __init__(self, cluster, endpoints, pause=0.05):
        super().__init__(daemon=True)
        self.cluster, self.endpoints, self.pause = cluster, endpoints, pause
        self.ok = []
        self.failures = []
        self._halt = threading.Event()

    def run(self):
        i = 0
        while not self._halt.is_set():
            key = f"/w/{i:05d}"
            r = self.cluster.etcdctl("put", key, str(i), endpoints=self.endpoints, check_rc=None)
            if r.returncode == 0:
                self.ok.append(key)
            else:
                self.failures.append(f"{time.strftime('%H:%M:%S')} {key}: {r.stderr.strip()[-200:]}")
            i += 1
            self._halt.wait(self.pause)

    def finish(self):
        self._halt.set()
        self.join()
        return self


class Sampler(threading.Thread):
    """Calls sample() every `interval` seconds until finish(), and once more after finish() was
    called: a test stops its sampler when the condition it waited for holds, and the last sample
    must see that state, not one from before it (a node that came back a moment ago, say)."""

    def __init__(self, interval):
        super().__init__(daemon=True)
        self.interval = interval
        self._halt = threading.Event()

    def sample(self):
        raise NotImplementedError

    def run(self):
        while True:
            last = self._halt.is_set()  # read before the pass: that pass starts after finish()
            self.sample()
            if last:
                return
            self._halt.wait(self.interval)

    def finish(self):
        self._halt.set()
        self.join()


class ClusterIdWatch(Sampler):
    """Asks every node's etcd for its cluster ID, on its peer URL and its client URL, every 0.3 s
    until stopped, and once more over every node after; records every (cluster ID, node) it sees.
    Nodes that do not answer are skipped."""

    def __init__(self, cluster, nodes=None):
        super().__init__(0.3)
        self.cluster, self.nodes = cluster, nodes or cluster.nodes
        self.seen = {}  # cluster ID -> set of node names

    def sample(self):
        for n in self.nodes:
            peer = peer_members(n)  # etcd answers on its peer URL before it has quorum
            if peer and peer[0]:
                self.seen.setdefault(peer[0], set()).add(n.name)
            r = run(["etcdctl", "--endpoints", n.client_url, "--dial-timeout", "1s", "--command-timeout", "2s",
                     "endpoint", "status", "-w", "json"], prefix=self.cluster.prefix, check_rc=None, timeout=10)
            if r.returncode == 0:
                for st in json.loads(r.stdout):
                    self.seen.setdefault(to_hex(st["Status"]["header"]["cluster_id"]), set()).add(n.name)

    def finish(self):
        super().finish()
        return self.seen


_PROM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_PROM_SAMPLE = re.compile(r"^(" + _PROM_NAME + r")(\{(?:[a-zA-Z_][a-zA-Z0-9_]*=\"(?:[^\"\\]|\\.)*\",?)*\})?"
                          r" ([-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|NaN|[-+]?Inf))( -?[0-9]+)?$")
_PROM_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\]|\\.)*)\"")


def parse_prometheus(text):
    """Parses Prometheus text format 0.0.4 strictly: every line a HELP, a TYPE, another comment or a
    sample `name{labels} value`, and every sample's family declared by both HELP and TYPE before it.
    Returns {(name, frozenset of (label, value)): float}."""
    helps, types, samples = set(), {}, {}
    suffixes = {"counter": ("_total", ""), "histogram": ("_bucket", "_sum", "_count"),
                "summary": ("", "_sum", "_count")}
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "HELP":
                check(re.fullmatch(_PROM_NAME, parts[2]), f"bad HELP line {line!r}")
                helps.add(parts[2])
            elif len(parts) >= 3 and parts[1] == "TYPE":
                check(len(parts) == 4 and parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"),
                      f"bad TYPE line {line!r}")
                check(parts[2] not in types, f"TYPE given twice for {parts[2]}")
                types[parts[2]] = parts[3]
            continue
        m = _PROM_SAMPLE.match(line)
        check(m, f"not a Prometheus sample line: {line!r}")
        name = m.group(1)
        family = next((f for f in types for s in suffixes.get(types[f], ("",))
                       if name == f + s or (s == "" and name == f)), None)
        check(family is not None, f"sample {name} has no # TYPE before it")
        check(family in helps, f"sample {name} has no # HELP")
        labels = frozenset(_PROM_LABEL.findall(m.group(2) or ""))
        key = (name, labels)
        check(key not in samples, f"sample given twice: {line!r}")
        samples[key] = float(m.group(3))
    return samples
