"""StatefulSet life cycle, k8s/run: scale 3→5 (the new pods join as raft learners and are promoted)
and 5→3 the documented way (k8s/README.md: `quorate member remove` the highest ordinals first, then
`kubectl scale`), with a writer writing throughout: no write fails but those an election costs, one
cluster all along. The
removed members' pods keep etcd stopped until they go, and with their volumes deleted by the
retention policy, a second 3→5 brings them back as new members."""
import harness
import statefulset
from harness import check, log


def scale_up(c, three):
    """3→5: the new pods join as learners and are promoted; the first members stay. Their IDs."""
    c.scale(5)
    five = c.wait_ready(5, timeout=120)
    check(all(five[n] == three[n] for n in three), f"the first members changed: {three} -> {five}")
    for p in c.pod_list()[3:]:
        check(c.decisions(p)[:1] == ["join"], f"{p.name} decided {c.decisions(p)}")
        check("promoted" in p.log_tail(100000), f"{p.name} never logged its promotion")
    return five


def three_under_a_writer():
    """A 3-pod StatefulSet of k8s/run, its member IDs, and a writer and a cluster-ID watch started."""
    c = statefulset.StatefulSetCluster("run")
    pods = c.create()
    three = c.wait_ready()
    writer = statefulset.Writer(c, pods)
    writer.start()
    watch = harness.ClusterIdWatch(c, pods)
    watch.start()
    return c, three, writer, watch


def test():
    c, three, writer, watch = three_under_a_writer()

    log("kubectl scale statefulset etcd --replicas=5")
    five = scale_up(c, three)

    log("documented scale-down: quorate member remove etcd-4 etcd-3, then kubectl scale --replicas=3")
    first = c.pod_list()[0]
    r = first.kubectl_exec(["quorate", "member", "remove", "etcd-4", "etcd-3"])
    check(r.returncode == 0, f"quorate member remove exited {r.returncode}: {r.stderr}{r.stdout}")
    log(r.stdout.strip())
    removed = c.pod_list()[3:]

    def held():
        answers = {p.name: (p.probe("/readyz"), p.probe("/healthz")[0]) for p in removed}
        return all(ready[0] == 503 and "removed" in ready[1] and live == 200 for ready, live in answers.values())
    harness.wait_until(held, 30, "the removed members' quorate to keep etcd stopped: alive, not ready")
    check(all(x.restarts == 0 for p in removed for x in p.containers), "a removed member's container restarted")
    c.scale(3)
    after = c.wait_ready(3, timeout=60)
    writer.finish()
    seen = watch.finish()
    log(f"clusters seen {seen}")
    check(after == three, f"after 3->5->3 the members are {after}, not {three}")
    writer.check_failures("while scaling")
    check(len(seen) == 1, f"more than one cluster was seen: {seen}")

    log("kubectl scale statefulset etcd --replicas=5 again: the scaled-away volumes were deleted")
    c.scale(5)
    again = c.wait_ready(5, timeout=120)
    for p in c.pod_list()[3:]:
        check(again[p.name] != five[p.name], f"{p.name} came back with its removed member ID {five[p.name]}")
        check(c.decisions(p)[-1:] == ["join"], f"{p.name} decided {c.decisions(p)}")


if __name__ == "__main__":
    statefulset.main(test)
