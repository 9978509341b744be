"""Issue 15 item 6, full disk: n1's --state-dir is a small tmpfs in a mount namespace of the test's
own, filled to the last byte while the cluster runs. Then n1's etcd is killed. Before, the
re-decision rewrote etcd.conf.yml, etcd.env and the bucket, the write failed, and `quorate run`
exited 1 with etcd down. Now an unchanged decision writes nothing: etcd (whose data dir is fine)
comes back, quorate keeps running, and the state files are as they were.

Then etcd.env is replaced by a directory, so the re-decision's write of it fails whatever the
disk: `quorate run`, which does not read that file, warns and restarts etcd all the same."""
import os
import signal
import subprocess
import sys

from harness import (Cluster, check, log, log_since, log_size, main, require, run_together, stop_together,
                     wait_healthy, wait_until)

INSIDE = "QUORATE_FULL_DISK_INSIDE"


def fill(path):
    """Writes into `path` until the filesystem under it refuses with ENOSPC."""
    fd = os.open(os.path.join(path, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    r = subprocess.run(["df", "--output=avail", path], capture_output=True, text=True)
    check(r.stdout.split()[-1] == "0", f"{path} is not full: {r.stdout}")


def kill_etcd_and_wait(c, n1, why):
    pid = n1.etcd_pid()
    check(pid, "no etcd child under n1's quorate run")
    offset = log_size(n1)
    log(f"kill -9 etcd (pid {pid}) with {why}")
    os.kill(pid, signal.SIGKILL)
    new_pid = wait_until(lambda: n1.quorate.poll() is not None or (n1.etcd_pid() not in (None, pid) and n1.etcd_pid()),
                         30, "etcd restarted (or quorate exited)")
    check(n1.quorate.poll() is None, f"quorate run exited ({n1.quorate.returncode}) with {why}:\n{n1.log_tail()}")
    log(f"etcd restarted as pid {new_pid}")
    wait_healthy(c)
    return log_since(n1, offset)


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1 = c.nodes[0]
    state = os.path.join(c.dir, "n1-state")
    os.makedirs(state)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", state], check=True)
    extra = {n.name: [] for n in c.nodes}
    extra["n1"] = ["--state-dir", state]
    for n in c.nodes:
        n.run(extra[n.name])
    wait_healthy(c)
    before = {f: open(os.path.join(state, f), "rb").read() for f in ("bucket.json", "etcd.conf.yml", "etcd.env")}

    fill(state)
    text = kill_etcd_and_wait(c, n1, "the state dir full")
    check("decision: restart" in text, f"n1's log does not show a restart decision:\n{text[-2000:]}")
    after = {f: open(os.path.join(state, f), "rb").read() for f in before}
    check(after == before, "the state files changed on a full disk")
    os.remove(os.path.join(state, "filler"))

    env = os.path.join(state, "etcd.env")
    os.remove(env)
    os.mkdir(env)
    text = kill_etcd_and_wait(c, n1, "etcd.env unwritable")
    check("not updated, etcd does not read it under quorate run" in text,
          f"n1's log does not warn about etcd.env:\n{text[-2000:]}")
    c.etcdctl("put", "/k/after", "full disk")

    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes on SIGTERM: {codes}")


def enter_mount_namespace():
    """Runs this test again in a private mount namespace, so its tmpfs is seen by nothing else."""
    if os.environ.get(INSIDE):
        return
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "true"])
    if r.returncode != 0:
        print("SKIP: cannot make a mount namespace (unshare -m)", flush=True)
        sys.exit(77)
    env = dict(os.environ, **{INSIDE: "1"})
    os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", sys.executable,
                           os.path.abspath(sys.argv[0])], env)


if __name__ == "__main__":
    enter_mount_namespace()
    main(test)
