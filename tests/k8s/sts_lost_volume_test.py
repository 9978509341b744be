"""StatefulSet life cycle, k8s/run: a PVC deleted with its pod. The recreated pod, with an empty
volume, replaces its member through a raft learner (old ID removed, new one promoted) while a writer
keeps writing through the other members: the cluster stays writable throughout."""
import harness
import statefulset
from harness import check, log, wait_until

def lose_volume(c):
    """Deletes the second pod's PVC with the pod; checks the replacement, the data and the writes."""
    pods = c.pod_list()
    before = c.wait_ready()
    for i in range(20):
        c.put(f"/before/{i}", str(i))
    victim = pods[1]
    others = [p for p in pods if p is not victim]
    c.make_leader(before[victim.name])
    writer = statefulset.Writer(c, others)
    writer.start()
    watch = harness.ClusterIdWatch(c, others)
    watch.start()
    wait_until(lambda: len(writer.ok) >= 5, 30, "the writer to get going")
    log(f"deleting PVC data-{victim.name} and pod {victim.name} (the leader)")
    victim = c.delete_pvc("data", victim.name)
    try:
        after = c.wait_ready(timeout=120)
        # Writes on into the healed cluster: on a loaded machine the replace can be over before many
        # writes went through, and the checks below want some to count.
        wait_until(lambda: len(writer.ok) >= 20, 60, "the writer to get 20 writes through")
    finally:
        writer.finish()
        seen = watch.finish()
    log(f"member IDs {before} -> {after}")
    check(set(after) == set(before), f"members {sorted(before)} became {sorted(after)}")
    check(after[victim.name] != before[victim.name], f"{victim.name} kept ID {before[victim.name]} with no data")
    check(all(after[p.name] == before[p.name] for p in others), f"another member changed: {before} -> {after}")
    writer.check_failures("while the member was replaced")
    check(len(seen) == 1, f"more than one cluster was seen: {seen}")
    check(c.decisions(victim)[-1:] == ["replace"], f"{victim.name} decided {c.decisions(victim)}")
    for i in range(20):
        check(c.get(f"/before/{i}", victim) == str(i), f"the replacement lacks /before/{i}")
    harness.wait_until(lambda: c.get(writer.ok[-1], victim) != "", 10, f"the replacement to have {writer.ok[-1]}")


def test():
    c = statefulset.StatefulSetCluster("run")
    c.create()
    lose_volume(c)


if __name__ == "__main__":
    statefulset.main(test)
