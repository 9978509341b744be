"""Issue 23, the OCI image: scripts/image builds it around the quorate under test (with Debian's etcd
3.5 of scripts/deps), umoci unpacks it as a runtime bundle, and 3 nodes run from the image's own root
file system the way its config says (entrypoint `quorate run`, uid 1001, its environment and working
directory), each as PID 1 of a PID and mount namespace of its own with its volume at /var/lib/etcd,
all in a network namespace of the test's on 127.0.0.1-3. One cluster of 3 started voters forms, a key
put through n1 with the image's etcdctl is read through n3, the data on the volumes belongs to uid
1001, and every node stops with exit 0 on SIGTERM. A shared library, binary or path missing from the
image, or a directory the user cannot write, fails here. Logs the image's size."""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time

import harness
from harness import QUORATE, check, log, run, wait_until

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
IMAGE = os.path.join(ROOT, "scripts", "image")
VOLUME = "/var/lib/etcd"

# Inside the node's new mount and PID namespaces (sh is their PID 1, and execs into the node): the
# image's root gets /proc, /dev and the node's volume, as a container runtime gives them; then the
# image's process runs with its root, working directory and user.
CONTAINER = ('root=$1 volume=$2 wd=$3 uid=$4 gid=$5; shift 5; '
             'mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" && '
             f'mount --bind "$volume" "$root{VOLUME}" && '
             'exec unshare --root="$root" --wd="$wd" --setuid "$uid" --setgid "$gid" -- "$@"')


class Image:
    """The unpacked image: its root file system and the process its config describes."""

    def __init__(self, bundle, netns, scratch):
        with open(os.path.join(bundle, "config.json")) as f:
            process = json.load(f)["process"]
        self.rootfs = os.path.join(bundle, "rootfs")
        self.entrypoint = process["args"]
        self.env = dict(e.split("=", 1) for e in process["env"])
        self.cwd = process["cwd"]
        self.uid, self.gid = process["user"]["uid"], process["user"]["gid"]
        self.netns = netns
        self.scratch = scratch  # the volume of the commands run, as the image's user

    def container_prefix(self, volume):
        """Runs a command of the image as a container does: PID 1 of PID and mount namespaces of its
        own (with /proc, /dev and `volume` at /var/lib/etcd), in the image's root and working
        directory, as its user, in the test's network namespace."""
        return self.netns.prefix + ["unshare", "--mount", "--propagation", "private", "--pid", "--fork",
                                    "--kill-child", "--", "sh", "-c", CONTAINER, "container", self.rootfs, volume,
                                    self.cwd, str(self.uid), str(self.gid)]

    def run(self, argv, check_rc=0):
        return run(argv, prefix=self.container_prefix(self.scratch), check_rc=check_rc, env=self.env)

    def start(self, volume, args, log_path):
        """The image's entrypoint with `args`."""
        return harness.spawn(self.entrypoint + args, log_path, prefix=self.container_prefix(volume), env=self.env)

    def etcdctl(self, endpoint, *args, check_rc=0):
        """The image's etcdctl."""
        return self.run(["/usr/bin/etcdctl", "--endpoints", endpoint, "--dial-timeout", "2s",
                         "--command-timeout", "5s"] + list(args), check_rc=check_rc)


def blob(layout, digest):
    algorithm, hexdigest = digest.split(":")
    with open(os.path.join(layout, "blobs", algorithm, hexdigest)) as f:
        return json.load(f)


def check_layout(layout, version):
    """The manifest tagged `version` and its config: what a runtime reads before it runs anything."""
    with open(os.path.join(layout, "index.json")) as f:
        manifests = json.load(f)["manifests"]
    check([m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in manifests] == [version],
          f"the layout's tags are not [{version}]: {manifests}")
    manifest = blob(layout, manifests[0]["digest"])
    config = blob(layout, manifest["config"]["digest"])["config"]
    check(config.get("User") == "1001:1001", f"image user {config.get('User')}")
    check(config.get("Entrypoint") == ["/usr/bin/quorate", "run"], f"entrypoint {config.get('Entrypoint')}")
    check(VOLUME in config.get("Volumes", {}) and config.get("WorkingDir") == VOLUME,
          f"volumes {config.get('Volumes')}, working directory {config.get('WorkingDir')}")
    compressed = sum(layer["size"] for layer in manifest["layers"])
    log(f"image quorate:{version}: {len(manifest['layers'])} layer(s), {compressed / 1e6:.1f} MB compressed")


def check_bad_input(work):
    """scripts/image refuses what the operator typed wrong with exit 2 and one line naming it, before
    it writes anything."""
    target = os.path.join(work, "never")
    for args, named in (([target, "--quorate", "/nonexistent"], "/nonexistent"), ([ROOT], ROOT),
                        ([target, "--squash"], "--squash"), ([target, ROOT], ROOT)):
        r = subprocess.run([IMAGE] + args, capture_output=True, text=True)
        check(r.returncode == 2 and len(r.stderr.splitlines()) == 1 and named in r.stderr,
              f"scripts/image {args}: exit {r.returncode}, {r.stderr!r}")
        check(not os.path.exists(target), f"scripts/image {args} wrote {target}")


def check_stripped(binary):
    if shutil.which("readelf") is None:
        return
    sections = run(["readelf", "-S", "--wide", binary], check_rc=0).stdout
    check(".symtab" not in sections and ".debug_info" not in sections, f"{binary} is not stripped")


def test():
    if os.geteuid() != 0:
        harness.skip("needs root: namespaces, mounts and a root directory of the image's")
    for tool in ("mmdebstrap", "umoci", "unshare", "ip"):
        harness.require(tool)
    harness.require_etcd35()
    status, answer = harness.http_get("http://deb.debian.org/debian/dists/")
    if status == 0:
        harness.skip(f"Debian's archive, which mmdebstrap fetches the image's packages from, does not answer: {answer}")
    work = tempfile.mkdtemp(prefix="quorate-image-")
    if not harness.KEEP:
        harness._cleanups.append(lambda: shutil.rmtree(work, ignore_errors=True))

    check_bad_input(work)
    layout = os.path.join(work, "image")
    started = time.time()
    built = subprocess.run([IMAGE, layout, "--quorate", QUORATE],
                           capture_output=True, text=True)
    check(built.returncode == 0, f"scripts/image exited {built.returncode}:\n{built.stderr[-4000:]}")
    log(f"scripts/image took {time.time() - started:.0f} s: {built.stderr.strip().splitlines()[-1]}")
    version = json.loads(run([QUORATE, "version", "-w", "json", "--etcd", "/nonexistent"],
                             prefix=("env", f"--chdir={work}"), check_rc=0).stdout)
    check_layout(layout, version["quorate"])

    bundle = os.path.join(work, "bundle")
    run(["umoci", "unpack", "--image", f"{layout}:{version['quorate']}", bundle], check_rc=0, timeout=600)
    size = run(["du", "-sm", os.path.join(bundle, "rootfs")], check_rc=0).stdout.split()[0]
    log(f"unpacked root file system: {size} MB")
    scratch = os.path.join(work, "scratch")
    os.mkdir(scratch)
    image = Image(bundle, harness.Netns(), scratch)
    os.chown(scratch, image.uid, image.gid)
    check_stripped(os.path.join(image.rootfs, "usr", "bin", "quorate"))
    # Its quorate loads (every library is there) and is the one under test; its etcd is 3.5.
    stated = json.loads(image.run(["/usr/bin/quorate", "version", "-w", "json"]).stdout)
    check(stated["quorate"] == version["quorate"] and stated["commit"] == version["commit"],
          f"the image's quorate says {stated}, the one under test {version}")
    check(re.fullmatch(r"3\.5\.\d+", stated["etcd"]) and stated["etcdPath"] == "etcd", f"the image's etcd: {stated}")

    names = ["n1", "n2", "n3"]
    ips = {name: f"127.0.0.{i}" for i, name in enumerate(names, 1)}
    initial_cluster = ",".join(f"{n}=http://{ips[n]}:2380" for n in names)
    token = f"image-{random.randrange(1 << 30):x}"
    nodes = {}
    for name in names:
        volume = os.path.join(work, name)
        os.mkdir(volume, 0o700)
        os.chown(volume, image.uid, image.gid)
        ip = ips[name]
        args = ["--name", name, "--data-dir", f"{VOLUME}/data", "--initial-cluster", initial_cluster,
                "--initial-cluster-token", token, "--initial-advertise-peer-urls", f"http://{ip}:2380",
                "--listen-peer-urls", f"http://{ip}:2380", "--advertise-client-urls", f"http://{ip}:2379",
                "--listen-client-urls", f"http://{ip}:2379", "--agent-listen", f"{ip}:2382",
                "--status-listen", f"{ip}:2383", "--timeout", "60s"]
        nodes[name] = (volume, image.start(volume, args, os.path.join(work, f"{name}.log")))

    def started_voters():
        members = json.loads(image.etcdctl(f"http://{ips['n1']}:2379", "member", "list", "-w", "json").stdout)
        return len(members["members"]) == 3 and all(m.get("clientURLs") and not m.get("isLearner")
                                                     for m in members["members"])
    try:
        wait_until(started_voters, 120, "3 started voters, run from the image")
        endpoints = ",".join(f"http://{ips[n]}:2379" for n in names)
        wait_until(lambda: image.etcdctl(endpoints, "endpoint", "health", check_rc=None).returncode == 0, 60,
                   "every member healthy")
    except AssertionError:
        for name in names:
            log(f"--- {name}\n{harness.tail(os.path.join(work, f'{name}.log'), 40)}")
        raise
    image.etcdctl(f"http://{ips['n1']}:2379", "put", "/image", "from the image")
    got = image.etcdctl(f"http://{ips['n3']}:2379", "get", "/image", "--print-value-only").stdout.strip()
    check(got == "from the image", f"n3 read {got!r}")
    log("3 nodes from the image: one cluster, a key put on n1 read on n3")

    for name, (volume, proc) in nodes.items():
        wal = os.path.join(volume, "data", "member", "wal")
        check(os.path.isdir(wal) and all(os.stat(os.path.join(wal, f)).st_uid == image.uid for f in os.listdir(wal)),
              f"{name}'s WAL is not uid {image.uid}'s")
        # To the node itself, PID 1 of its namespace (the child of unshare, which waits for it).
        node_pid = run(["pgrep", "-P", str(proc.pid)], check_rc=0).stdout.split()[0]
        os.kill(int(node_pid), signal.SIGTERM)
    for name, (_, proc) in nodes.items():
        check(proc.wait(timeout=60) == 0, f"{name} exited {proc.returncode} on SIGTERM")


if __name__ == "__main__":
    harness.main(test)
