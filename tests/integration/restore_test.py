"""Issue 12, restore: 1,000 keys are written to a 3-node cluster under `quorate run`, backed up, and
more keys written. A restore started on one node while the other two still have quorum is refused
and moves nothing. Then two of three data dirs are lost and all three start with --restore-from and
a new --initial-cluster-token: every key up to the backup's revision is there and none written
after it, the cluster ID is new, and the survivor's old data is moved aside, not deleted. A node
killed during its restore (as etcd's restore tool runs) and started again converges; one killed
after it and started again with the same flags just restarts on its restored data."""
import glob
import json
import os
import signal

from backup_test import put_keys, quorate
from harness import (Cluster, check, keys_on, log, log_since, log_size, main, require, run_together, stop_together,
                     wait_healthy, wait_until)


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1, n2, n3 = c.nodes
    run_together(c.nodes)
    wait_healthy(c)
    old_ids = set(c.cluster_ids().values())
    put_keys(c, "/k/", 1000)
    store = os.path.join(c.dir, "store")
    os.makedirs(store)
    r = quorate(c, "backup", "save", "--endpoints", c.endpoints(), "--backup-to", f"file://{store}")
    url = r.stdout.strip().splitlines()[-1]
    log(f"backup {url}")
    put_keys(c, "/after/", 100)

    old_token = c.token
    new_token = old_token + "-restored"
    restore = ["--restore-from", url]

    # Refused while n2 and n3 still have quorum: n1 alone is asked to restore.
    n1.stop()
    c.token = new_token
    offset = log_size(n1)
    n1.run(restore)
    rc = n1.quorate.wait(timeout=60)
    text = log_since(n1, offset)
    check(rc == 1, f"a restore over a live quorum exited {rc}:\n{text[-2000:]}")
    check("live quorum" in text and "--force" in text, f"the refusal does not say why:\n{text[-2000:]}")
    check(os.path.isdir(os.path.join(n1.data_dir, "member")), "n1's member/ moved though the restore was refused")
    check(not glob.glob(os.path.join(n1.data_dir, "member.*")), "n1's data was moved aside by a refused restore")
    n1.quorate = None

    # The old token again is bad input.
    c.token = old_token
    codes = stop_together([n2, n3])
    check(all(rc == 0 for rc in codes.values()), f"stop: {codes}")
    r = quorate(c, "run", *n1.args(restore), "--status-listen", f"{n1.ip}:2383", check_rc=2)
    check("new one" in r.stderr, f"same token: {r.stderr}")

    # Two data dirs lost; all three restore with the new token.
    n2.wipe()
    n3.wipe()
    c.token = new_token
    # n3 is killed (SIGKILL, its etcdctl with it) as etcd's restore tool starts, then started again.
    offset = log_size(n3)
    n3.run(restore)
    wait_until(lambda: "snapshot restore" in log_since(n3, offset), 60, "n3 to start etcd's restore tool",
               interval=0.005)
    os.killpg(n3.quorate.pid, signal.SIGKILL)
    n3.quorate.wait()
    log("n3 killed during its restore")
    run_together(c.nodes, restore)
    wait_healthy(c)
    new_ids = set(c.cluster_ids().values())
    check(len(new_ids) == 1 and not (new_ids & old_ids), f"cluster IDs: old {old_ids}, new {new_ids}")
    for n in c.nodes:
        keys = keys_on(c, n, "/")
        got = [k for k in keys if k.startswith("/k/")]
        check(len(got) == 1000, f"{n.name} has {len(got)} of the 1,000 backed-up keys")
        check(not any(k.startswith("/after/") for k in keys), f"{n.name} has keys written after the backup")
    aside = glob.glob(os.path.join(n1.data_dir, "member.before-restore-*"))
    check(len(aside) == 1 and os.path.isdir(os.path.join(aside[0], "wal")), f"n1's old data not kept aside: {aside}")
    marker = json.load(open(os.path.join(n1.data_dir, "quorate", "restore.json")))
    check(marker["from"] == url and marker["token"] == new_token, f"marker: {marker}")

    # Killed and started again with the same flags: restored already, it restarts on its data.
    n2.kill()
    offset = log_size(n2)
    n2.run(restore)
    wait_healthy(c)
    check("was restored from" in log_since(n2, offset), "n2 did not see its own restore")
    check(len(glob.glob(os.path.join(n2.data_dir, "member.before-restore-*"))) == 0, "n2's restored data moved")
    check(len(keys_on(c, n2, "/k/")) == 1000, "n2 lost keys after its restart")
    for n in c.nodes:
        n.kill()


if __name__ == "__main__":
    main(test)
