"""Issue 12, backups against real etcd: `quorate backup save | list | verify` on a 3-node cluster
under `quorate run`. 1,000 keys are written, a backup is saved (its URL alone on the last line of
-w simple), listed and verified; an encrypted one cannot be read without its key, and a wrong key
is refused naming the key ID it needs; one flipped byte makes verify fail; nothing is listed for a
save that could not finish."""
import json
import os
import subprocess

from harness import QUORATE, Cluster, check, log, main, require, run, run_together, wait_healthy


def put_keys(c, prefix, count, value="v"):
    """`count` keys in transactions of 100 puts (etcd's default cap is 128 operations a txn); the
    value of key i is value(i), or `value` followed by i."""
    def value_of(i):
        return value(i) if callable(value) else f"{value}{i}"
    for start in range(0, count, 100):
        ops = "".join(f"put {prefix}{i:05d} {value_of(i)}\n" for i in range(start, min(start + 100, count)))
        r = subprocess.run(c.prefix + ["etcdctl", "--endpoints", c.endpoints(), "txn"], input=f"\n{ops}\n\n",
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and "SUCCESS" in r.stdout, f"etcdctl txn: {r.stdout} {r.stderr}")


def quorate(c, *args, check_rc=0):
    return run([QUORATE] + list(args), prefix=c.prefix, check_rc=check_rc, timeout=120)


def backup_store(c):
    """A directory store in the cluster's folder, and the flag naming it."""
    store = os.path.join(c.dir, "store")
    os.makedirs(store)
    return store, ["--backup-to", f"file://{store}"]


def save_backup(c, to, *args):
    """`quorate backup save` of the cluster into `to`: the backup's URL, alone on the last line."""
    r = quorate(c, "backup", "save", "--endpoints", c.endpoints(), *to, "-w", "simple", *args)
    return r.stdout.strip().splitlines()[-1]


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    run_together(c.nodes)
    wait_healthy(c)
    put_keys(c, "/k/", 1000)
    store, to = backup_store(c)

    url = save_backup(c, to)
    log(f"saved {url}")
    check(url.startswith(f"file://{store}/backups/etcd/main/"), f"the last line is not the backup URL: {url}")
    folder = url[len("file://"):]
    check(sorted(os.listdir(folder)) == ["_etcd_backup.meta", "_quorate_backup.json", "etcd.backup.gz"],
          f"layout: {os.listdir(folder)}")
    meta = json.load(open(os.path.join(folder, "_etcd_backup.meta")))
    check(meta["clusterSpec"]["memberCount"] == 3 and meta["etcdVersion"].startswith("3."), f"metadata: {meta}")
    # etcd-manager's file is plain gzip of etcd's snapshot: gunzip and etcdctl read it.
    db = os.path.join(c.dir, "plain.db")
    with open(db, "wb") as out:
        subprocess.run(["gzip", "-dc", os.path.join(folder, "etcd.backup.gz")], stdout=out, check=True)
    st = run(["etcdctl", "snapshot", "status", db, "-w", "json"], check_rc=0)
    check(json.loads(st.stdout)["totalKey"] >= 1000, f"etcdctl snapshot status: {st.stdout}")

    listed = json.loads(quorate(c, "backup", "list", *to, "-w", "json").stdout)["backups"]
    check([b["url"] for b in listed] == [url], f"backup list: {listed}")
    check(listed[0]["revision"] >= 10, f"revision: {listed[0]}")
    quorate(c, "backup", "verify", url)

    # Encrypted: with zstd and the first of two key files.
    key1, key2 = os.path.join(c.dir, "key1"), os.path.join(c.dir, "key2")
    with open(key1, "w") as f:
        f.write("11" * 32 + "\n")
    with open(key2, "w") as f:
        f.write("22" * 32 + "\n")
    r = quorate(c, "backup", "save", "--endpoints", c.endpoints(), *to, "--backup-key-file", key1,
                "--backup-compression", "zstd", "-w", "json")
    sealed = json.loads(r.stdout)
    check(sealed["keyID"] and sealed["compression"] == "zstd", f"encrypted save: {sealed}")
    check(os.path.exists(sealed["url"][len("file://"):] + "/etcd.backup.zst.aes"), "no etcd.backup.zst.aes")
    r = quorate(c, "backup", "verify", sealed["url"], check_rc=2)
    check(sealed["keyID"] in r.stderr, f"verify without the key does not name its ID: {r.stderr}")
    r = quorate(c, "backup", "verify", sealed["url"], "--backup-key-file", key2, check_rc=2)
    check(sealed["keyID"] in r.stderr, f"verify with a wrong key does not name the ID: {r.stderr}")
    # Rotation: key2 now encrypts, key1 still reads the older backup.
    quorate(c, "backup", "verify", sealed["url"], "--backup-key-file", f"{key2},{key1}")

    # One flipped byte in the middle of the stored snapshot.
    gz = os.path.join(folder, "etcd.backup.gz")
    flip_byte(gz, os.path.getsize(gz) // 2)
    r = quorate(c, "backup", "verify", url, check_rc=1)
    log(f"flipped byte: {r.stderr.strip()}")
    flip_byte(gz, os.path.getsize(gz) // 2)
    quorate(c, "backup", "verify", url)

    # A save against a cluster that cannot answer leaves nothing listed.
    r = quorate(c, "backup", "save", "--endpoints", "http://127.0.0.99:2379", *to, check_rc=1)
    listed = json.loads(quorate(c, "backup", "list", *to, "-w", "json").stdout)["backups"]
    check(len(listed) == 2, f"after a failed save: {listed}")
    for n in c.nodes:
        n.kill()


if __name__ == "__main__":
    main(test)
