"""StatefulSet life cycle of the Helm chart: k8s/chart rendered by the real helm with its default
values and a directory store for backups, acted out from creation to a restore on one cluster:
every pod created at once bootstraps it; every pod deleted at once comes back with its member ID
and data; 3→5 adds learners that are promoted; a lost volume is replaced through a learner; 5→3
NOTES.txt's cautious way (`quorate member remove`, then a lower replicaCount; sts-scale-in tests
the lower replicaCount alone); and a restore:
a backup taken with `quorate backup save`, replicaCount 0 (the retention policy deletes the
volumes), then `helm upgrade` with restore.fromUrl and a new initialClusterToken and replicaCount
3: a new cluster holding every key of the backup and none written after it. And `helm test`'s
pod, run against the cluster, writes its key and reads it back."""
import os
import shutil
import tempfile

import harness
import statefulset
import sts_delete_all_test
import sts_lost_volume_test
import sts_scale_test
from harness import check, log, run


def helm_test(c):
    """`helm test etcd`: the chart's test pod's command, with its environment, against the client
    Service (its DNS name given the address of a ready member, as the Service's would route)."""
    spec = c.objects[("Pod", "etcd-test-put-get")]["spec"]["containers"][0]
    c.dns.set(["etcd"], c.pod_list()[0].ip)
    env = {"PATH": c.path, **{e["name"]: e["value"] for e in spec["env"]}}
    r = run(spec["command"], env=env)
    check(r.returncode == 0 and "wrote and read back" in r.stdout, f"helm test failed: {r.stdout}{r.stderr}")
    log(r.stdout.strip())


def scale_up_and_down(c, three):
    log("helm upgrade --set replicaCount=5")
    sts_scale_test.scale_up(c, three)
    sts_lost_volume_test.lose_volume(c)
    mid = c.wait_ready(5)
    log("NOTES.txt's cautious scale-down: quorate member remove etcd-4 etcd-3, then helm upgrade --set replicaCount=3")
    r = c.pod_list()[0].kubectl_exec(["quorate", "member", "remove", "etcd-4", "etcd-3"])
    check(r.returncode == 0, f"quorate member remove exited {r.returncode}: {r.stderr}{r.stdout}")
    c.scale(3)
    after = c.wait_ready(3, timeout=90)
    check(after == {n: mid[n] for n in three}, f"after 5->3 the members are {after}, not those of {mid}")


def restore(c, values):
    for i in range(20):
        c.put(f"/kept/{i}", str(i))
    first = c.pod_list()[0]
    r = first.kubectl_exec(["quorate", "backup", "save", "-w", "simple"])
    check(r.returncode == 0, f"quorate backup save exited {r.returncode}: {r.stderr}{r.stdout}")
    url = r.stdout.strip().splitlines()[-1]
    log(f"backup {url}")
    c.put("/after-backup", "lost")
    old_cluster = set(c.cluster_ids().values())

    log("helm upgrade --set replicaCount=0, then with restore.fromUrl, a new token and replicaCount=3")
    c.scale(0)
    c.upgrade(statefulset.load_chart(dict(values, initialClusterToken="etcd-restored-1", restore={"fromUrl": url})))
    c.scale(3)
    restored = c.wait_ready(3, timeout=120)
    new_cluster = set(c.cluster_ids().values())
    check(len(new_cluster) == 1 and new_cluster != old_cluster, f"cluster IDs {old_cluster} -> {new_cluster}")
    for p in c.pod_list():
        for i in range(20):
            check(c.get(f"/kept/{i}", p) == str(i), f"{p.name} lacks /kept/{i} after the restore")
        check(c.get("/after-backup", p) == "", f"{p.name} holds a key written after the backup")
    return restored


def test():
    store = tempfile.mkdtemp(prefix="quorate-chart-backups-")
    if not harness.KEEP:
        harness._cleanups.append(lambda: shutil.rmtree(store, ignore_errors=True))
    values = {"backup": {"enabled": True, "storeUrl": f"file://{store}", "schedule": "1h"}}
    c = statefulset.StatefulSetCluster("chart", objects=statefulset.load_chart(values))
    check(c.sts_name == "etcd" and c.sts["spec"]["serviceName"] == "etcd-headless",
          f"the chart renders {c.sts_name} behind {c.sts['spec']['serviceName']}")
    pods = sts_delete_all_test.delete_all_and_recreate(c)
    helm_test(c)
    three = c.wait_ready()
    check(all(c.decisions(p)[1:] == ["restart"] for p in pods), "a recreated pod did not restart on its data")
    scale_up_and_down(c, three)
    restore(c, values)
    check(os.listdir(store), "the store is empty")


if __name__ == "__main__":
    statefulset.main(test)
