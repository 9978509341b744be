"""Issue 28 item 1, `quorate recover --from-member` after a crash: three nodes under `quorate run`,
a writer through each, all SIGKILLed at once; two data dirs lost; recover on the survivor, then
--restore-from everywhere with a new token. Five rounds, each on the cluster the last one restored,
the survivor a different node each time.

What is owed: every write whose entry is in the survivor's WAL, and all that etcd itself holds of the
survivor's data. The WAL is read here, apart from quorate, as etcd's decoder reads it (CRC-32C chain,
a torn tail ends it, a later entry at an index overrides); what etcd holds is asked by starting etcd
on a copy (alone, --force-new-cluster, on free loopback ports), which drops the entries past the
commit of the last HardState the survivor saved (etcd saves a commit-only HardState without a sync,
so after SIGKILL it trails acknowledged entries); quorate commits them (DESIGN §4 rule 8). The
restored cluster holds exactly the union, and the backup's metadata records etcd's revision plus one
per put past that commit. A write acknowledged through a quorum the survivor was not part of, whose
entry never reached its WAL, is counted, not owed."""
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


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C = _crc32c_table()


def crc32c(crc, data):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def pb_fields(buf):
    """{field number: [values]} of a protobuf message of varints and length-delimited fields."""
    out, i = {}, 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(buf):
        key = varint()
        if key & 7 == 0:
            val = varint()
        elif key & 7 == 2:
            n = varint()
            val = buf[i:i + n]
            if len(val) != n:
                raise ValueError("cut field")
            i += n
        else:
            raise ValueError(f"wire type {key & 7}")
        out.setdefault(key >> 3, []).append(val)
    return out


def wal_log(data_dir):
    """(the last HardState's commit, {index: entry data} of the raft log) the member's WAL holds, read
    as etcd's decoder reads it: files in order, the CRC chain checked, the last file's records ending
    at a zero word or a record that fails (a torn write: etcd repairs it so)."""
    wal = os.path.join(data_dir, "member", "wal")
    names = sorted(n for n in os.listdir(wal) if n.endswith(".wal"))
    crc, commit, log_ = 0, 0, {}
    for k, name in enumerate(names):
        last = k == len(names) - 1
        with open(os.path.join(wal, name), "rb") as f:
            b = f.read()
        off = 0
        while off + 8 <= len(b):
            word = int.from_bytes(b[off:off + 8], "little")
            if word == 0:
                break
            length, pad = word & ((1 << 56) - 1), (word >> 56) & 7 if word >> 63 else 0
            rec = b[off + 8:off + 8 + length]
            try:
                if len(rec) != length:
                    raise ValueError("cut record")
                f_ = pb_fields(rec)
                typ, rcrc, data = f_.get(1, [0])[0], f_.get(2, [0])[0], f_.get(3, [b""])[0]
                if typ == 4:
                    if crc != 0 and rcrc != crc:
                        raise ValueError("crc record breaks the chain")
                    crc = rcrc
                else:
                    if crc32c(crc, data) != rcrc:
                        raise ValueError("crc mismatch")
                    crc = rcrc
            except (ValueError, IndexError) as e:
                if last:
                    break
                fail(f"{name}: {e} at {off}")
            if typ == 2:
                e = pb_fields(data)
                index = e.get(3, [0])[0]
                for i in [i for i in log_ if i >= index]:
                    del log_[i]
                log_[index] = (e.get(1, [0])[0], e.get(4, [b""])[0])
            elif typ == 3:
                commit = pb_fields(data).get(3, [0])[0]
            off += 8 + length + pad
    return commit, log_


def wal_puts(data_dir):
    """(the /w/ keys put by the entries of the member's WAL, how many puts and how many entries lie
    past its saved commit)."""
    commit, log_ = wal_log(data_dir)
    keys, past = set(), 0
    entries_past = max(0, max(log_, default=0) - commit)
    for index, (etype, data) in log_.items():
        if etype != 0 or not data:  # a conf change, a leader's empty entry
            continue
        try:
            req = pb_fields(data)
        except (ValueError, IndexError):  # a v2 pb.Request (etcd 3.4's member attributes), not v3
            continue
        if 100 not in req or 4 not in req:  # InternalRaftRequest: its header, a put
            continue
        key = pb_fields(req[4][0])[1][0].decode()  # PutRequest.key
        if key.startswith("/w/"):
            keys.add(key)
        if index > commit:
            past += 1
    return keys, past, entries_past


def backup_meta(store, url):
    """quorate's own metadata of a backup (beside etcd-manager's _etcd_backup.meta)."""
    folder = url[len(f"file://{store}"):].lstrip("/")
    with open(os.path.join(store, folder, "_quorate_backup.json")) as f:
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
    kept_total = 0
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
        in_wal, past_commit, entries_past = wal_puts(survivor.data_dir)
        replayed_keys, replayed_revision = replayed(c, survivor)
        held = replayed_keys | in_wal
        revision = replayed_revision + past_commit
        owed = set(acked) & held
        not_owed = sorted(set(acked) - held)
        not_owed_total += len(not_owed)
        kept = sorted(set(acked) & (in_wal - replayed_keys))
        kept_total += len(kept)
        log(f"round {r}: {len(acked)} writes acknowledged, {len(owed)} of them in {survivor.name}'s data; etcd "
            f"replays it to revision {replayed_revision}, its WAL holds {past_commit} puts past its saved commit "
            f"({len(kept)} acknowledged: {kept[:10]}); not owed: {not_owed}")

        done = quorate(c, "recover", "--from-member", survivor.name, "--name", survivor.name,
                       "--data-dir", survivor.data_dir, "--backup-to", f"file://{store}")
        url = done.stdout.strip().splitlines()[-1]
        said = f"recover: {entries_past} entries of {survivor.name}'s WAL past its last saved commit are committed"
        check(said in done.stderr, f"round {r}: recover does not say '{said}': {done.stderr[-2000:]}")
        scratch = os.path.join(survivor.data_dir, "quorate", "recover")
        check(not os.path.exists(scratch), f"round {r}: recover left its copy {scratch}")
        check(run(["pgrep", "-f", scratch], check_rc=None).returncode == 1, f"round {r}: recover left its etcd running")
        meta = backup_meta(store, url)
        check(meta["revision"] == revision,
              f"round {r}: the backup records revision {meta['revision']}, etcd replays "
              f"{replayed_revision} and {past_commit} puts lie past the saved commit")

        c.token = f"{base_token}-{r}"
        run_together(c.nodes, ["--restore-from", url])
        wait_healthy(c)
        for n in c.nodes:
            got = set(keys_caught_up(c, n, "/w/", lambda keys: held <= set(keys)))
            missing = sorted(held - got)
            if missing:
                fail(f"round {r}: {n.name} lacks {len(missing)} of the {len(held)} keys of {survivor.name}'s "
                     f"data and WAL ({len(owed & set(missing))} of them acknowledged): {missing[:10]}")
            check(got == held, f"round {r}: {n.name} has keys neither etcd replays nor the WAL holds: "
                  f"{sorted(got - held)[:10]}")
    log(f"{ROUNDS} rounds: every write the survivor's data and WAL hold was restored, {kept_total} acknowledged "
        f"ones past its saved commit among them; {not_owed_total} acknowledged writes were not in it")
    for n in c.nodes:
        n.kill()


if __name__ == "__main__":
    main(test)
