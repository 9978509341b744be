"""Issue 28 item 11, backups shared with kOps' etcd-manager, both ways, with real etcd. quorate's gzip
backup has an `_etcd_backup.meta` that a reader as strict as etcd-manager's (protobuf JSON of its
BackupInfo, an unknown field refused) accepts, quorate's own fields in `_quorate_backup.json` beside
it; and a backup shaped as etcd-manager writes it (gzip of etcd's snapshot, its metadata alone,
`timestamp` as the string protobuf JSON makes of an int64) is listed, verified with the checks it
could not make named, and restored by `quorate run --restore-from` into a new one-node cluster."""
import gzip
import json
import os
import shutil
import time

from backup_test import backup_store, put_keys, quorate, save_backup
from harness import Cluster, check, keys_on, log, main, require, run, wait_healthy

# etcd-manager's BackupInfo and ClusterSpec (pkg/apis/etcd/etcdapi.proto), by their JSON names and
# the types protobuf JSON accepts for them: string, int64 (a number or a string of digits), int32.
BACKUP_INFO = {"etcdVersion": "string", "timestamp": "int64", "clusterSpec": {"memberCount": "int32",
                                                                               "etcdVersion": "string"}}


def strict_read(text, fields=BACKUP_INFO, where="BackupInfo"):
    """Raises ValueError where etcd-manager's reader (jsonpb.UnmarshalString) would refuse `text`."""
    doc = json.loads(text) if isinstance(text, str) else text
    if not isinstance(doc, dict):
        raise ValueError(f"{where} is not an object")
    for key, value in doc.items():
        if key not in fields:
            raise ValueError(f'unknown field "{key}" in {where}')
        kind = fields[key]
        if isinstance(kind, dict):
            strict_read(value, kind, key)
        elif kind == "string" and not isinstance(value, str):
            raise ValueError(f"{key} is not a string")
        elif kind in ("int64", "int32") and not (isinstance(value, int) or (kind == "int64" and isinstance(value, str)
                                                                          and value.isdigit())):
            raise ValueError(f"{key} is not an integer")
    return doc


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(1)
    n1 = c.nodes[0]
    n1.run()
    wait_healthy(c)
    put_keys(c, "/k/", 200)
    store, to = backup_store(c)

    # quorate's backup, read as etcd-manager reads it.
    ours = save_backup(c, to)
    folder = ours[len("file://"):]
    check(sorted(os.listdir(folder)) == ["_etcd_backup.meta", "_quorate_backup.json", "etcd.backup.gz"],
          f"layout: {os.listdir(folder)}")
    with open(os.path.join(folder, "_etcd_backup.meta")) as f:
        meta = strict_read(f.read())
    check(meta["etcdVersion"].startswith("3.") and meta["clusterSpec"]["memberCount"] == 1, f"metadata: {meta}")
    with open(os.path.join(folder, "_quorate_backup.json")) as f:
        own = json.load(f)
    try:
        strict_read(dict(meta, quorate=own))
        check(False, "the strict reader took quorate's fields inside _etcd_backup.meta, as etcd-manager does not")
    except ValueError as e:
        log(f"the strict reader refuses the former layout: {e}")

    # etcd-manager's backup: etcdctl's snapshot (etcd's stream, hash appended), gzipped, its metadata alone.
    snapshot = os.path.join(c.dir, "snapshot.db")
    run(["etcdctl", "--endpoints", c.endpoints(), "snapshot", "save", snapshot], prefix=c.prefix, check_rc=0)
    put_keys(c, "/after/", 10)
    name = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 5)) + "-000001"
    theirs_dir = os.path.join(store, "backups", "etcd", "main", name)
    os.makedirs(theirs_dir)
    with open(snapshot, "rb") as src, gzip.open(os.path.join(theirs_dir, "etcd.backup.gz"), "wb") as out:
        shutil.copyfileobj(src, out)
    with open(os.path.join(theirs_dir, "_etcd_backup.meta"), "w") as f:
        f.write(json.dumps({"etcdVersion": meta["etcdVersion"], "timestamp": str(int(time.time())),
                            "clusterSpec": {"memberCount": 1, "etcdVersion": meta["etcdVersion"]}}, indent=2))
    theirs = f"file://{theirs_dir}"

    listed = json.loads(quorate(c, "backup", "list", *to, "-w", "json").stdout)["backups"]
    check([(b["url"], b["metadata"]) for b in listed] == [(ours, "quorate"), (theirs, "etcd-manager")],
          f"backup list: {listed}")
    verified = json.loads(quorate(c, "backup", "verify", theirs, "-w", "json").stdout)
    check(len(verified["sha256"]) == 64 and verified["notChecked"], f"verify of etcd-manager's backup: {verified}")
    log(f"verified etcd-manager's backup; not checked: {verified['notChecked']}")

    # Restored by quorate: a new cluster, a new token, the keys of the snapshot and none after it.
    old_id = c.cluster_ids()["n1"]
    n1.stop()
    n1.wipe()
    c.token += "-restored"
    n1.run(["--restore-from", theirs])
    wait_healthy(c)
    keys = keys_on(c, n1, "/")
    check(sum(k.startswith("/k/") for k in keys) == 200 and not any(k.startswith("/after/") for k in keys),
          f"restored keys: {len(keys)}")
    new_id = c.cluster_ids()["n1"]
    check(new_id != old_id, f"the restored cluster kept its ID {old_id}")
    log(f"restored etcd-manager's backup: 200 keys, cluster {old_id} -> {new_id}")
    n1.kill()


if __name__ == "__main__":
    main(test)
