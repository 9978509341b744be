"""StatefulSet life cycle, k8s/run: one pod deleted, then every pod deleted at once (no preStop hook,
nothing removed from the cluster): each comes back with a new IP, its volume and the same member
ID, restarts on its data, and the data survives."""
import harness
import statefulset
from harness import check, log, wait_until


def delete_all_and_recreate(c):
    pods = c.create()
    before = c.wait_ready()
    cluster_id = set(c.cluster_ids().values())
    for i in range(20):
        c.put(f"/before/{i}", str(i))
    ips = {p.name: p.ip for p in pods}
    log(f"deleting all of {sorted(before)} at once")
    pods = c.delete_pods([p.name for p in pods])
    check(all(p.ip != ips[p.name] for p in pods), "a recreated pod kept its IP")
    watch = harness.ClusterIdWatch(c, pods)
    watch.start()
    after = c.wait_ready()
    seen = watch.finish()
    check(after == before, f"member IDs changed: {before} -> {after}")
    check(set(c.cluster_ids().values()) == cluster_id, f"cluster ID changed: {cluster_id} -> {c.cluster_ids()}")
    check(set(seen) <= cluster_id, f"another cluster was seen: {seen}")
    for p in pods:
        for i in range(20):
            check(c.get(f"/before/{i}", p) == str(i), f"{p.name} lost /before/{i}")
    return pods


def delete_one(c, name):
    """Deletes pod `name`, made the leader first (the hard case, every run), under a writer."""
    before = c.wait_ready()
    c.make_leader(before[name])
    writer = statefulset.Writer(c, [p for p in c.pod_list() if p.name != name])
    writer.start()
    wait_until(lambda: len(writer.ok) >= 5, 30, "the writer to get going")
    log(f"deleting pod {name} (the leader)")
    pod, = c.delete_pods([name])
    try:
        after = c.wait_ready()
        wait_until(lambda: len(writer.ok) >= 20, 60, "the writer to get 20 writes through")
    finally:
        writer.finish()
    check(after == before, f"member IDs changed: {before} -> {after}")
    writer.check_failures(f"while {name} was away")
    check(set(c.decisions(pod)[1:]) == {"restart"}, f"{name} decided {c.decisions(pod)} (first pod, then recreated)")


def test():
    c = statefulset.StatefulSetCluster("run")
    pods = delete_all_and_recreate(c)
    for p in pods:
        check(c.decisions(p)[1:] == ["restart"], f"{p.name} decided {c.decisions(p)} (first pod, then recreated)")
    delete_one(c, pods[2].name)


if __name__ == "__main__":
    statefulset.main(test)
