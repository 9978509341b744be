"""Issue 12, `quorate recover --from-member`: 500 keys on a 3-node cluster, all stopped, two data
dirs lost. recover on the survivor n1 stores its own database as a backup (refused on another
node's name, and refused while a quorum is alive); then all three run with --restore-from it and a
new token: the survivor's keys, all of them, are in the new cluster."""
import os

from backup_test import put_keys, quorate
from harness import (Cluster, check, keys_on, log, main, require, run_together, stop_together, wait_healthy,
                     wait_until)


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    n1, n2, n3 = c.nodes
    run_together(c.nodes)
    wait_healthy(c)
    put_keys(c, "/k/", 500)
    c.etcdctl("put", "/last", "written just before the loss")
    # A put is acknowledged once a quorum has it, which may be n2 and n3 alone: n1, the survivor to
    # be, must hold it too before it stops (entries apply in order, so the 500 keys with it).
    wait_until(lambda: "/last" in keys_on(c, n1, "/last"), 30, "n1 to hold /last")
    store = os.path.join(c.dir, "store")
    os.makedirs(store)
    recover = ["recover", "--name", "n1", "--data-dir", n1.data_dir, "--backup-to", f"file://{store}"]

    n1.stop()
    r = quorate(c, *recover, "--from-member", "n1", check_rc=1)
    check("live quorum" in r.stderr, f"recover while n2, n3 have quorum: {r.stderr}")
    r = quorate(c, *recover, "--from-member", "n2", check_rc=2)
    check("run recover on n2" in r.stderr, f"recover naming another node: {r.stderr}")

    codes = stop_together([n2, n3])
    check(all(rc == 0 for rc in codes.values()), f"stop: {codes}")
    n2.wipe()
    n3.wipe()
    r = quorate(c, *recover, "--from-member", "n1")
    url = r.stdout.strip().splitlines()[-1]
    check("--restore-from" in r.stdout, f"recover does not say what to run next: {r.stdout}")
    log(f"recovered into {url}")
    quorate(c, "backup", "verify", url)

    c.token = c.token + "-recovered"
    run_together(c.nodes, ["--restore-from", url])
    wait_healthy(c)
    for n in c.nodes:
        keys = keys_on(c, n, "/")
        check(len([k for k in keys if k.startswith("/k/")]) == 500 and "/last" in keys,
              f"{n.name} has {len(keys)} keys, wanted the survivor's 501")
    for n in c.nodes:
        n.kill()


if __name__ == "__main__":
    main(test)
