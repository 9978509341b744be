"""StatefulSet life cycle, k8s/init-container: `quorate init` as the init container, a plain etcd
container started on the config file init wrote, and `quorate upkeep` beside it. Parallel create
gives one cluster with the predicted IDs; deleting every pod at once keeps the data and the IDs; a
lost volume is replaced through a learner that upkeep promotes, the cluster writable throughout."""
import statefulset
import sts_delete_all_test
import sts_lost_volume_test
from harness import check


def test():
    c = statefulset.StatefulSetCluster("init-container")
    pods = sts_delete_all_test.delete_all_and_recreate(c)
    predicted = c.predicted()
    check(c.wait_ready() == {m["name"]: m["id"] for m in predicted["members"]}, "member IDs differ from discover's")
    for p in pods:
        check(c.decisions(p)[1:] == ["restart"], f"{p.name} decided {c.decisions(p)} (first pod, then recreated)")
    sts_lost_volume_test.lose_volume(c)


if __name__ == "__main__":
    statefulset.main(test)
