"""Issue 28 item 1, `quorate recover --from-member` after a crash: three nodes under `quorate run`,
a writer through each, all SIGKILLed at once; two data dirs lost; recover on the survivor, then
--restore-from everywhere with a new token. Five rounds, each on the cluster the last one restored,
the survivor a different node each time.

What is owed: every acknowledged write that etcd itself holds of the survivor's data, asked by
starting etcd on a copy of it (alone, --force-new-cluster, on free loopback ports). The restored
cluster holds exactly those keys, and the backup's metadata records that etcd's revision. A write
acknowledged through a quorum the survivor was not part of, or whose commit the survivor had not
learnt, is not in what etcd replays from its data, and is counted, not owed."""
import base64
import http.client
import json
import os
import random
import shutil
import signal
import threading

from backup_test import quorate
from harness import (ETCD, Cluster, check, fail, free_port, keys_caught_up, log, main, require, run,
                     run_together, spawn, wait_healthy, wait_until)

ROUNDS = 5


def write_until(node, prefix, halt, acked):
    """Puts prefix + counter through the node's own endpoint until `halt`, over one connection to
    etcd's JSON gateway (an etcdctl process a put would leave most of etcd's 100 ms between backend
    commits without a write); the keys etcd acknowledged."""
    conn = http.client.HTTPConnection(node.ip, 2379, timeout=5)
    i = 0
    while not halt.is_set():
        key = f"{prefix}{i:05d}"
        body = json.dumps({"key": base64.b64encode(key.encode()).decode(), "value": "dg=="})
        try:
            conn.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                acked.append(key)
        except (OSError, http.client.HTTPException):  # etcd killed: nothing more is acknowledged
            return
        i += 1


def kill_all_at_once(c):
    """SIGKILL to every node's process group (quorate and its etcd) in one go."""
    for n in c.nodes:
        os.killpg(n.quorate.pid, signal.SIGKILL)
    for n in c.nodes:
        n.quorate.wait()
        n.quorate = None


def two_free_ports():
    while True:
        a, b = free_port(), free_port()
        if a != b:
            return a, b


def replayed(c, node):
    """(the /w/ keys, the revision) etcd holds of the node's data, read from etcd started on a copy."""
    copy = os.path.join(c.dir, f"replayed-{node.name}")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(os.path.join(node.data_dir, "member"), os.path.join(copy, "member"))
    os.chmod(copy, 0o700)
    client_port, peer_port = two_free_ports()
    client, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    etcd = spawn([ETCD, "--name", node.name, "--data-dir", copy, "--force-new-cluster",
                  "--listen-client-urls", client, "--advertise-client-urls", client,
                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                  "--initial-cluster", f"{node.name}={peer}"], os.path.join(c.dir, "replayed.log"))
    try:
        def read():
            r = run(["etcdctl", "--endpoints", client, "get", "/w/", "--prefix", "--keys-only", "-w", "json"],
                    check_rc=None, timeout=30)
            return json.loads(r.stdout) if r.returncode == 0 else None
        got = wait_until(read, 60, f"etcd on a copy of {node.name}'s data to serve")
    finally:
        os.killpg(etcd.pid, signal.SIGKILL)
        etcd.wait()
        shutil.rmtree(copy, ignore_errors=True)
    keys = {base64.b64decode(kv["key"]).decode() for kv in got.get("kvs", [])}
    return keys, int(got["header"]["revision"])


def backup_meta(store, url):
    folder = url[len(f"file://{store}"):].lstrip("/")
    with open(os.path.join(store, folder, "_etcd_backup.meta")) as f:
        return json.load(f)


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    base_token = c.token
    store = os.path.join(c.dir, "store")
    os.makedirs(store)
    run_together(c.nodes)
    wait_healthy(c)
    not_owed_total = 0
    for r in range(ROUNDS):
        halt = threading.Event()
        acked = []
        writers = [threading.Thread(target=write_until, args=(n, f"/w/{r}/{n.name}/", halt, acked))
                   for n in c.nodes]
        for w in writers:
            w.start()
        wait_until(lambda: len(acked) >= 100, 60, "100 acknowledged writes")
        threading.Event().wait(random.uniform(0, 1))
        kill_all_at_once(c)
        halt.set()
        for w in writers:
            w.join()

        survivor = c.nodes[r % 3]
        for n in c.nodes:
            if n is not survivor:
                n.wipe()
        held, revision = replayed(c, survivor)
        owed = set(acked) & held
        not_owed = sorted(set(acked) - held)
        not_owed_total += len(not_owed)
        log(f"round {r}: {len(acked)} writes acknowledged, {len(owed)} of them in {survivor.name}'s data as "
            f"etcd replays it (revision {revision}), not owed: {not_owed}")

        out = quorate(c, "recover", "--from-member", survivor.name, "--name", survivor.name,
                      "--data-dir", survivor.data_dir, "--backup-to", f"file://{store}").stdout
        url = out.strip().splitlines()[-1]
        scratch = os.path.join(survivor.data_dir, "quorate", "recover")
        check(not os.path.exists(scratch), f"round {r}: recover left its copy {scratch}")
        check(run(["pgrep", "-f", scratch], check_rc=None).returncode == 1, f"round {r}: recover left its etcd running")
        meta = backup_meta(store, url)
        check(meta["quorate"]["revision"] == revision,
              f"round {r}: the backup records revision {meta['quorate']['revision']}, etcd replays {revision}")

        c.token = f"{base_token}-{r}"
        run_together(c.nodes, ["--restore-from", url])
        wait_healthy(c)
        for n in c.nodes:
            got = set(keys_caught_up(c, n, "/w/", lambda keys: held <= set(keys)))
            missing = sorted(held - got)
            if missing:
                fail(f"round {r}: {n.name} lacks {len(missing)} of the {len(held)} keys etcd replays from "
                     f"{survivor.name}'s data ({len(owed & set(missing))} of them acknowledged): {missing[:10]}")
            check(got == held, f"round {r}: {n.name} has keys etcd does not replay: {sorted(got - held)[:10]}")
    log(f"{ROUNDS} rounds: every acknowledged write the survivor's data holds was restored; "
        f"{not_owed_total} acknowledged writes were not in it")
    for n in c.nodes:
        n.kill()


if __name__ == "__main__":
    main(test)
