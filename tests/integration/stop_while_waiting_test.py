"""Issue 15 item 7: SIGTERM reaches `quorate run` while its init waits (for peers that do not
answer), and quorate exits 0 at once, saying no membership change was under way: on the first start,
and in the re-decision before an etcd restart. Without it quorate only saw the signal at --timeout
and exited 1, after systemd or the kubelet had long since killed it."""
import os
import shutil
import signal
import time

from harness import (Cluster, check, log, log_since, log_size, main, require, run_together, stop_together,
                     wait_healthy, wait_log, wait_until)


def stop_promptly(node, since, what):
    """SIGTERM to the node's quorate, which must exit 0 within 2 s and say why it stopped."""
    p = node.quorate
    sent = time.time()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=10)
    except Exception:
        rc = None
    took = time.time() - sent
    text = log_since(node, since)
    log(f"{node.name} ({what}) exited {rc} {took:.2f}s after SIGTERM")
    check(rc == 0, f"{node.name} ({what}) exited {rc} on SIGTERM, wanted 0:\n{text[-3000:]}")
    check(took < 2.0, f"{node.name} ({what}) took {took:.2f}s to exit on SIGTERM")
    check("no membership change was under way" in text, f"{node.name} did not say what it left:\n{text[-3000:]}")
    node.quorate = None


def test():
    require("etcd")
    # The first start: n1 alone, its peers never answer; --timeout is far away.
    c = Cluster(3, timeout="300s")
    n1, n2, n3 = c.nodes
    n1.run()
    wait_log(n1, "waiting:", 30)
    stop_promptly(n1, 0, "first start")
    check(not os.path.exists(os.path.join(n1.data_dir, "member")), "n1 made an etcd data dir")

    # The re-decision: a running cluster, n2 and n3 stopped, n1's etcd killed with its data gone, so
    # the decision before the restart waits for peers.
    shutil.rmtree(n1.data_dir, ignore_errors=True)
    run_together(c.nodes)
    wait_healthy(c)
    codes = stop_together([n2, n3])
    check(all(rc == 0 for rc in codes.values()), f"exit codes of n2, n3 on SIGTERM: {codes}")
    offset = log_size(n1)
    etcd = wait_until(n1.etcd_pid, 30, "n1's etcd pid")
    # The data goes first: killed first, etcd could be restarted on it (the first restart is
    # immediate) before the test got to remove it, on a loaded machine.
    shutil.rmtree(os.path.join(n1.data_dir, "member"))
    try:
        os.kill(etcd, signal.SIGKILL)
    except ProcessLookupError:
        pass  # etcd noticed its data go and exited first: the restart's decision is the same
    wait_log(n1, "waiting:", 30, since=offset)
    stop_promptly(n1, offset, "re-decision")


if __name__ == "__main__":
    main(test)
