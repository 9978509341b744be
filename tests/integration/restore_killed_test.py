"""Issue 28 item 2, a restore killed after any of its steps converges (DESIGN §4 rule 7): a 3-node
cluster under `quorate run` holds 200 keys and is backed up. Then, round N (N = 1, 2, ...): every
node is stopped and restored from that backup with a new token by quorate_faults (quorate with a
test-only hook), which kills itself with SIGKILL right after the restore's Nth file step or rename;
then all three start again with the same flags under the real quorate. Each round ends with one
new cluster on every node, every key of the backup, the data that was there before the round moved
aside exactly once, and no copy of the snapshot left. The rounds count up until the faulty run is
no longer killed: every step has been gone through."""
import glob
import os
import signal

from backup_test import put_keys, quorate
from harness import (ETCD, Cluster, check, fail, keys_caught_up, log, log_since, log_size, main, require,
                     run_together, spawn, stop_together, wait_until)

FAULTS = os.environ.get("QUORATE_FAULTS_BIN", "quorate_faults")
KEYS = 200


def run_faulty(n, step, restore):
    """quorate_faults run on `n`, killed after the restore's step number `step`."""
    env = dict(os.environ, QUORATE_TEST_KILL_AFTER_RESTORE_STEP=str(step))
    argv = [FAULTS, "run", "--status-listen", f"{n.ip}:2383", "--etcd", ETCD] + n.args(restore)
    n.quorate = spawn(argv, n.log_path, prefix=n.cluster.prefix, env=env)


def healthy_or_exited(c):
    """The cluster IDs once one healthy cluster runs on every node; fails at once, with its log,
    when a quorate exits instead."""
    def settled():
        exited = [n for n in c.nodes if n.quorate.poll() is not None]
        if exited:
            return exited
        ids = c.cluster_ids()
        return len(set(ids.values())) == 1 and all(n.http("/readyz")[0] == 200 for n in c.nodes) and ids
    got = wait_until(settled, 90, "one healthy cluster on every node")
    if isinstance(got, list):
        fail("; ".join(f"{n.name}'s quorate exited {n.quorate.returncode} instead of converging:\n{n.log_tail(15)}"
                       for n in got))
    return got


def asides(n):
    return sorted(glob.glob(os.path.join(n.data_dir, "member.before-restore-*")))


def test():
    require("etcd")
    require("etcdctl")
    if not os.access(FAULTS, os.X_OK):
        fail(f"QUORATE_FAULTS_BIN={FAULTS} is not an executable (tests/meson.build builds quorate_faults)")
    c = Cluster(3)
    base_token = c.token
    run_together(c.nodes)
    healthy_or_exited(c)
    put_keys(c, "/k/", KEYS)
    store = os.path.join(c.dir, "store")
    os.makedirs(store)
    url = quorate(c, "backup", "save", "--endpoints", c.endpoints(), "--backup-to", f"file://{store}").stdout
    url = url.strip().splitlines()[-1]
    restore = ["--restore-from", url]
    old_ids = set(c.cluster_ids().values())
    steps = []
    step = 1
    while True:
        check(step <= 30, f"the restore was still killed at step {step}: {steps}")
        codes = stop_together(c.nodes)
        check(all(rc == 0 for rc in codes.values()), f"stop before round {step}: {codes}")
        before = {n.name: asides(n) for n in c.nodes}
        c.token = f"{base_token}-{step}"
        offsets = {n.name: log_size(n) for n in c.nodes}
        for n in c.nodes:
            run_faulty(n, step, restore)
        killed = {}
        for n in c.nodes:
            wait_until(lambda: n.quorate.poll() is not None or " restored as member " in log_since(n, offsets[n.name]),
                       60, f"{n.name}'s faulty restore")
            if n.quorate.poll() == -signal.SIGKILL:
                text = log_since(n, offsets[n.name])
                killed[n.name] = text[text.index("killed after restore step"):].splitlines()[0]
        if killed:
            check(len(killed) == 3, f"step {step}: only {sorted(killed)} were killed: {killed}")
            names = {line.split(": ", 1)[1] for line in killed.values()}
            check(len(names) == 1, f"step {step}: the nodes were killed after different steps: {killed}")
            steps.append(names.pop())
            log(f"round {step}: every node killed after the restore's step {steps[-1]!r}; started again")
            for n in c.nodes:
                n.quorate = None
            run_together(c.nodes, restore)
        ids = healthy_or_exited(c)
        new_ids = set(ids.values())
        check(not (new_ids & old_ids), f"round {step}: cluster ID {new_ids} is an old one ({old_ids})")
        old_ids |= new_ids
        for n in c.nodes:
            got = keys_caught_up(c, n, "/k/", lambda keys: len(keys) == KEYS)
            check(len(got) == KEYS, f"round {step}: {n.name} has {len(got)} of the backup's {KEYS} keys")
            added = [a for a in asides(n) if a not in before[n.name]]
            check(len(added) == 1, f"round {step}: {n.name}'s data before the round moved aside {len(added)} times: "
                                   f"{added}")
            check(os.path.isdir(os.path.join(added[0], "wal")), f"round {step}: {added[0]} holds no WAL")
            left = [p for p in (os.path.join(n.data_dir, "restore.tmp"),
                                os.path.join(n.data_dir, "quorate", "restore", "snapshot.db"),
                                os.path.join(n.data_dir, "quorate", "restore", "snapshot.db.part")) if os.path.exists(p)]
            check(not left, f"round {step}: {n.name} kept copies of the snapshot: {left}")
        if not killed:
            break
        step += 1
    log(f"a restore killed after each of its {len(steps)} steps converged: {steps}")
    check(len(steps) >= 8, f"fewer steps than the restore has: {steps}")
    for n in c.nodes:
        n.kill()


if __name__ == "__main__":
    main(test)
