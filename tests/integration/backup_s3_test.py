"""Issue 12, backups in S3 against moto's S3 (`moto_server`, python moto 5.2; skipped without it): a
single-node cluster with ~16 MB of incompressible values is backed up to s3://, which takes a
multipart upload of several 8 MiB parts; the backup is listed and verified (read back in ranged
GETs), encrypted too; then the node's data is lost and `quorate run --restore-from s3://...` with a
new token brings every key back. Nothing of a save cut short (an unreachable etcd) is listed."""
import base64
import json
import os
import urllib.request

from backup_test import put_keys, quorate
from harness import Cluster, check, keys_on, log, main, require, run_together, start_moto, wait_healthy, wait_until


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(1)
    endpoint = start_moto(c)
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/backups", method="PUT"), timeout=10).read()
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    store = f"s3://backups/prod?endpoint={endpoint}&timeout=30s"
    to = ["--backup-to", store]

    n1 = c.nodes[0]
    n1.run()
    wait_healthy(c)
    # Random bytes in base64 barely compress: ~16 MB of values is more than one 8 MiB part.
    values = [base64.b64encode(os.urandom(750)).decode() for _ in range(16000)]
    put_keys(c, "/k/", 16000, value=lambda i: values[i])

    r = quorate(c, "backup", "save", "--endpoints", c.endpoints(), *to, "-w", "json")
    meta = json.loads(r.stdout)
    log(f"saved {meta['url']}: {meta['dbBytes']} bytes of database, {meta['storedBytes']} stored")
    check(meta["storedBytes"] > 9 * 1024 * 1024, f"too small for a multipart upload: {meta}")
    check(meta["url"].startswith("s3://backups/prod/backups/etcd/main/"), f"url: {meta['url']}")
    listed = json.loads(quorate(c, "backup", "list", *to, "-w", "json").stdout)["backups"]
    check([b["url"] for b in listed] == [meta["url"]], f"listed: {listed}")
    quorate(c, "backup", "verify", meta["url"])

    key = os.path.join(c.dir, "key")
    with open(key, "w") as f:
        f.write("ab" * 32)
    sealed = json.loads(quorate(c, "backup", "save", "--endpoints", c.endpoints(), *to, "--backup-key-file", key,
                                "-w", "json").stdout)
    quorate(c, "backup", "verify", sealed["url"], check_rc=2)
    quorate(c, "backup", "verify", sealed["url"], "--backup-key-file", key)

    quorate(c, "backup", "save", "--endpoints", "http://127.0.0.99:2379", *to, check_rc=1)
    listed = json.loads(quorate(c, "backup", "list", *to, "-w", "json").stdout)["backups"]
    check(len(listed) == 2, f"after a failed save: {listed}")

    n1.stop()
    n1.wipe()
    c.token += "-restored"
    run_together(c.nodes, ["--restore-from", sealed["url"], "--backup-key-file", key])
    wait_healthy(c)
    keys = keys_on(c, n1, "/k/")
    check(len(keys) == 16000 and all(keys[f"/k/{i:05d}"] == values[i] for i in range(16000)),
          f"{len(keys)} keys after the restore, or values changed")
    n1.kill()


if __name__ == "__main__":
    main(test)
