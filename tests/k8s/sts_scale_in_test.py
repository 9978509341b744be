"""Issue 25 item 5, rule M7 (docs/DESIGN.md §12), k8s/run: a StatefulSet scaled 3→5 and then 5→3 with
nothing but `kubectl scale`: the leader's quorate reads spec.replicas through the k8s provider and
removes the members of the ordinals going, the highest first, each while a majority is left. The
cluster ends with the first three members as healthy voters, one cluster all along, and a writer
throughout has no put fail but those an election costs."""
import statefulset
from harness import check, log
from sts_scale_test import scale_up, three_under_a_writer


def test():
    c, three, writer, watch = three_under_a_writer()

    log("kubectl scale statefulset etcd --replicas=5")
    scale_up(c, three)

    log("kubectl scale statefulset etcd --replicas=3, and nothing else")
    c.scale(3)
    after = c.wait_ready(3, timeout=120)
    writer.finish()
    seen = watch.finish()
    log(f"clusters seen {seen}")
    check(after == three, f"after 3->5->3 the members are {after}, not {three}")
    writer.check_failures("while scaling")
    check(len(seen) == 1, f"more than one cluster was seen: {seen}")
    text = "".join(p.log_tail(1000000) for p in c.pod_list())
    # The order (highest ordinal first) is the planner's, tested in tests/unit/maintenance_test.cc.
    for going in ("etcd-4", "etcd-3"):
        check(f"{going} is going; removed" in text, f"no M7 line removing {going} in the remaining pods' logs")


if __name__ == "__main__":
    statefulset.main(test)
