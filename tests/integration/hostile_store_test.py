"""Issue 28 items 3, 4 and 11 at the command line, against a backup store the test plants (no etcd):
a gzip and a zstd decompression bomb whose metadata declares 135 KiB are refused by `backup verify`
(exit 1, one line naming the backup and its declared size); a `_etcd_backup.meta` that is a symbolic
link to a secret outside the store, a linked object and a linked backup folder are never read or
listed, and no message quotes a metadata file that does not parse; a backup with etcd-manager's
metadata alone is listed with what it does not record as null and verified as far as it can be,
the checks it could not make named."""
import gzip
import hashlib
import json
import os
import tempfile
import time
import zlib

from harness import QUORATE, check, log, main, run

SECRET = "root:$6$SeCrEt:19000:0:99999:7:::"
DECLARED = 135 * 1024
EXPANDED = 64 << 20


def gzip_bomb():
    """gzip of EXPANDED zero bytes, streamed: about 64 KiB."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join(z.compress(zeros) for _ in range(EXPANDED >> 20)) + z.flush()


def zstd_bomb():
    """One zstd frame of RLE blocks (RFC 8878 3.1.1), EXPANDED zero bytes in 4 bytes a 128 KiB block."""
    block = 128 * 1024
    frame = (0xFD2FB528).to_bytes(4, "little") + bytes([0x00, (17 - 10) << 3])  # no size; a 128 KiB window
    count = EXPANDED // block
    for i in range(count):
        frame += ((1 if i == count - 1 else 0) | (1 << 1) | (block << 3)).to_bytes(3, "little") + b"\0"
    return frame


def plant(store, name, files, quorate=None, etcd_manager=None):
    """A backup folder `name` of cluster main holding `files` (name -> bytes) and its metadata."""
    folder = os.path.join(store, "backups", "etcd", "main", name)
    os.makedirs(folder, exist_ok=True)
    for f, content in files.items():
        with open(os.path.join(folder, f), "wb") as out:
            out.write(content)
    if quorate is not None:
        with open(os.path.join(folder, "_quorate_backup.json"), "w") as out:
            json.dump(quorate, out)
    if etcd_manager is not None:
        with open(os.path.join(folder, "_etcd_backup.meta"), "w") as out:
            json.dump(etcd_manager, out)
    return folder


def quorate_meta(obj, compression, stored):
    return {"format": 1, "object": obj, "clusterID": "1", "memberID": "1", "revision": 1, "dbBytes": DECLARED,
            "storedBytes": stored, "sha256": "00" * 32, "compression": compression, "encryption": "none",
            "keyID": "", "source": "planted by the test"}


ETCD_MANAGER_META = {"etcdVersion": "3.4.23", "timestamp": "1764147600",
                     "clusterSpec": {"memberCount": 3, "etcdVersion": "3.4.23"}}


def verify_fails(url, mentions, within=20):
    started = time.monotonic()
    r = run([QUORATE, "backup", "verify", url])
    took = time.monotonic() - started
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    check(r.returncode == 1, f"verify {url} exited {r.returncode}, wanted 1: {r.stderr}")
    check(len(lines) == 1, f"verify {url} printed {len(lines)} lines on stderr, wanted one: {r.stderr}")
    for m in mentions:
        check(m in lines[0], f"verify {url}: '{lines[0]}' does not mention '{m}'")
    check("SeCrEt" not in r.stdout + r.stderr, f"verify {url} quoted the secret: {r.stderr}")
    check(took < within, f"verify {url} took {took:.1f} s")
    log(f"exit 1 in {took:.1f} s: {lines[0]}")


def test():
    holder = tempfile.TemporaryDirectory(prefix="quorate-hostile-store-")  # removed as the test ends
    base = holder.name
    store = os.path.join(base, "store")
    outside = os.path.join(base, "outside")
    os.makedirs(store)
    os.makedirs(outside)
    url = f"file://{store}"

    # Item 3: decompression bombs, refused at the size their metadata declares.
    for name, obj, compression, bomb in [("2026-11-26T09:00:00Z", "etcd.backup.gz", "gzip", gzip_bomb()),
                                         ("2026-11-26T09:01:00Z", "etcd.backup.zst", "zstd", zstd_bomb())]:
        log(f"{compression} bomb: {len(bomb)} bytes expanding to {EXPANDED}, declaring {DECLARED}")
        plant(store, name, {obj: bomb}, quorate_meta(obj, compression, len(bomb)), ETCD_MANAGER_META)
        verify_fails(f"{url}/backups/etcd/main/{name}", [f"{url}/backups/etcd/main/{name}", "dbBytes", str(DECLARED)])

    # Item 4: links out of the store, and metadata that does not parse.
    with open(os.path.join(outside, "shadow"), "w") as f:
        f.write(SECRET)
    linked = plant(store, "2026-11-26T09:02:00Z", {}, quorate=None, etcd_manager=None)
    os.symlink(os.path.join(outside, "shadow"), os.path.join(linked, "_etcd_backup.meta"))
    verify_fails(f"{url}/backups/etcd/main/2026-11-26T09:02:00Z", ["symbolic link", "_etcd_backup.meta"])
    garbled = plant(store, "2026-11-26T09:03:00Z", {"etcd.backup.gz": b""})
    with open(os.path.join(garbled, "_etcd_backup.meta"), "w") as f:
        f.write(SECRET)
    verify_fails(f"{url}/backups/etcd/main/2026-11-26T09:03:00Z", ["_etcd_backup.meta is not JSON"])
    with open(os.path.join(garbled, "_etcd_backup.meta"), "w") as f:
        json.dump(ETCD_MANAGER_META, f)
    with open(os.path.join(garbled, "_quorate_backup.json"), "w") as f:
        json.dump({"compression": SECRET}, f)
    verify_fails(f"{url}/backups/etcd/main/2026-11-26T09:03:00Z", ["_quorate_backup.json", "compression"])

    # A linked object, and a linked backup folder holding a good etcd-manager backup.
    db = os.urandom(100 * 1024)
    stream = gzip.compress(db + hashlib.sha256(db).digest())
    with open(os.path.join(outside, "etcd.backup.gz"), "wb") as f:
        f.write(stream)
    with open(os.path.join(outside, "_etcd_backup.meta"), "w") as f:
        json.dump(ETCD_MANAGER_META, f)
    object_linked = plant(store, "2026-11-26T09:04:00Z", {}, etcd_manager=ETCD_MANAGER_META)
    os.symlink(os.path.join(outside, "etcd.backup.gz"), os.path.join(object_linked, "etcd.backup.gz"))
    verify_fails(f"{url}/backups/etcd/main/2026-11-26T09:04:00Z", ["symbolic link", "etcd.backup.gz"])
    os.symlink(outside, os.path.join(store, "backups", "etcd", "main", "2026-11-26T09:05:00Z-000001"))

    # Item 11: etcd-manager's own backup, its metadata alone.
    plant(store, "2026-11-26T09:06:00Z-000001", {"etcd.backup.gz": stream}, etcd_manager=ETCD_MANAGER_META)
    foreign = f"{url}/backups/etcd/main/2026-11-26T09:06:00Z-000001"

    r = run([QUORATE, "backup", "list", "--backup-to", url, "-w", "json"], check_rc=0)
    check("SeCrEt" not in r.stdout + r.stderr, f"backup list quoted the secret: {r.stdout} {r.stderr}")
    listed = {b["url"]: b for b in json.loads(r.stdout)["backups"]}
    log(f"listed: {sorted(listed)}")
    check(not any("09:05:00Z" in u or "09:02:00Z" in u for u in listed), f"a linked folder or meta listed: {listed}")
    check(foreign in listed, f"the etcd-manager backup is not listed: {listed}")
    entry = listed[foreign]
    check(entry["metadata"] == "etcd-manager" and entry["revision"] is None and entry["sha256"] is None
          and entry["etcdVersion"] == "3.4.23" and entry["memberCount"] == 3, f"etcd-manager backup listed as {entry}")
    r = run([QUORATE, "backup", "list", "--backup-to", url, "-w", "table"], check_rc=0)
    check(any(foreign in line and " - " in line for line in r.stdout.splitlines()),
          f"the table does not mark what is not recorded: {r.stdout}")

    r = run([QUORATE, "backup", "verify", foreign, "-w", "json"], check_rc=0)
    verified = json.loads(r.stdout)
    check(verified["sha256"] == hashlib.sha256(db).hexdigest() and verified["dbBytes"] == len(db),
          f"verify of the etcd-manager backup: {verified}")
    check(verified["notChecked"] and all(verified["notChecked"]), f"the checks not made are not named: {verified}")
    r = run([QUORATE, "backup", "verify", foreign], check_rc=0)
    check("not checked" in r.stdout and hashlib.sha256(db).hexdigest() in r.stdout, f"verify said: {r.stdout}")
    log(f"verified: {r.stdout.splitlines()[0]}")


if __name__ == "__main__":
    main(test)
