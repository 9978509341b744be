"""Issue 15 item 8, orphaned etcd. (1) kill -9 of `quorate run` on one of 3 nodes: its etcd exits by
itself (the parent-death signal), nothing runs on that data dir unsupervised. (2) What an older
quorate would have left: an etcd started by hand on that data dir with quorate's config, still
running when a new `quorate run` starts there. The new quorate stops it (one line naming its pid),
is healthy within seconds with exactly one etcd on the data dir, its own child. (3) An etcd started
by hand while quorate's is down: quorate stops it before restarting its own. quorate's SIGTERM
leaves no etcd behind."""
import os
import signal

from harness import (Cluster, check, keys_on, log, log_since, log_size, main, require, run_together,
                     stop_together, wait_healthy, wait_until)


def etcds_on(data_dir):
    """Pids of the etcd processes whose command line names `data_dir` (zombies have none)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() != "etcd":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(data_dir in a for a in argv):
            pids.append(int(entry))
    return pids


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1 = c.nodes[0]
    run_together(c.nodes)
    wait_healthy(c)

    # (1) The parent-death signal: etcd goes with its quorate.
    etcd = n1.etcd_pid()
    check(etcd, "no etcd child under n1's quorate run")
    log(f"kill -9 n1's quorate run (pid {n1.quorate.pid}) only, not its etcd (pid {etcd})")
    os.kill(n1.quorate.pid, signal.SIGKILL)
    n1.quorate.wait()
    n1.quorate = None
    wait_until(lambda: not etcds_on(n1.data_dir), 30, f"n1's etcd (pid {etcd}) to exit after its quorate died")

    # (2) An orphan an older quorate would have left: etcd on n1's data dir with quorate's config.
    n1.start_etcd()
    orphan = n1.etcd.pid
    wait_healthy(c, nodes=c.nodes[1:])
    # Running, as an orphan left behind is: serving from its data, so it holds its WAL's lock (an etcd
    # still starting up holds nothing yet: quorate meets it only before its first restart, as in (3)).
    wait_until(lambda: keys_on(c, n1, "/") is not None, 30, f"the orphan etcd (pid {orphan}) to serve n1's data")
    check(etcds_on(n1.data_dir) == [orphan], f"etcds on n1's data dir before the new quorate: {etcds_on(n1.data_dir)}")
    offset = log_size(n1)
    n1.run()
    n1.etcd.wait(timeout=40)
    log(f"the orphan etcd (pid {orphan}) exited: {n1.etcd.returncode}")
    n1.etcd = None
    wait_healthy(c, timeout=60)
    text = log_since(n1, offset)
    check(f"etcd pid {orphan}" in text and "stopping it" in text,
          f"n1's log does not name the orphan it stopped:\n{text[-3000:]}")
    check("address already in use" not in text, f"n1's new etcd met the orphan's ports:\n{text[-3000:]}")
    running = etcds_on(n1.data_dir)
    check(len(running) == 1 and parent_of(running[0]) == n1.quorate.pid,
          f"etcds on n1's data dir: {running}, wanted one child of quorate pid {n1.quorate.pid}")

    # (3) A stray that takes the data dir while quorate's etcd is down: n1's quorate is held
    # (SIGSTOP) so it cannot restart its etcd, which is killed, and an etcd started by hand takes the
    # data dir. Once continued, quorate stops that one before its restart, which would otherwise fail
    # on the stray's WAL lock and ports for ever.
    ours = n1.etcd_pid()
    os.kill(n1.quorate.pid, signal.SIGSTOP)
    try:
        os.kill(ours, signal.SIGKILL)
        wait_until(lambda: not etcds_on(n1.data_dir), 30, f"n1's etcd (pid {ours}) to die")
        n1.start_etcd()
        stray = n1.etcd.pid
        wait_until(lambda: keys_on(c, n1, "/") is not None, 30, f"the etcd started by hand (pid {stray}) to serve")
        offset = log_size(n1)
    finally:
        os.kill(n1.quorate.pid, signal.SIGCONT)
    n1.etcd.wait(timeout=40)
    log(f"the etcd started by hand (pid {stray}) exited: {n1.etcd.returncode}")
    n1.etcd = None
    # quorate's own etcd back on the data dir; /readyz alone could still be a 200 from before the
    # kill, answered before the continued quorate has seen its etcd's exit.
    wait_until(lambda: n1.etcd_pid() not in (None, ours), 60, "n1's quorate to restart its etcd")
    wait_healthy(c, timeout=60)
    text = log_since(n1, offset)
    check(f"etcd pid {stray}" in text and "stopping it" in text,
          f"n1's log does not name the stray it stopped before its restart:\n{text[-3000:]}")
    running = etcds_on(n1.data_dir)
    check(len(running) == 1 and parent_of(running[0]) == n1.quorate.pid,
          f"etcds on n1's data dir: {running}, wanted one child of quorate pid {n1.quorate.pid}")

    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes on SIGTERM: {codes}")
    check(not etcds_on(n1.data_dir), f"an etcd outlived n1's quorate: {etcds_on(n1.data_dir)}")


if __name__ == "__main__":
    main(test)
