"""StatefulSet life cycle, k8s/run: every pod created at once bootstraps one cluster, with the member
and cluster IDs `quorate discover` predicts, and no second cluster ever shows up."""
import harness
import statefulset
from harness import check, log


def test():
    c = statefulset.StatefulSetCluster("run")
    pods = c.create()
    watch = harness.ClusterIdWatch(c, pods)
    watch.start()
    voters = c.wait_ready()
    seen = watch.finish()
    predicted = c.predicted()
    log(f"voters {voters}, predicted cluster {predicted['clusterID']}, seen {seen}")
    check(set(c.cluster_ids().values()) == {predicted["clusterID"]}, f"cluster IDs {c.cluster_ids()} != predicted")
    check(voters == {m["name"]: m["id"] for m in predicted["members"]}, f"member IDs {voters} != {predicted}")
    check(set(seen) == {predicted["clusterID"]}, f"more than one cluster was seen: {seen}")
    for p in pods:
        check(c.decisions(p)[:1] in (["new"], ["late-initial"]), f"{p.name} decided {c.decisions(p)}")
        check(p.probe("/healthz")[0] == 200, f"{p.name} /healthz: {p.probe('/healthz')}")
        check(all(x.restarts == 0 for x in p.containers), f"{p.name} restarted a container")


if __name__ == "__main__":
    statefulset.main(test)
