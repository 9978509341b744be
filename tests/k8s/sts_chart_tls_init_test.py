"""The chart's other variant and its TLS, through the StatefulSet life-cycle harness: k8s/chart
rendered by helm with mode init-container (`quorate init`, then plain etcd on the config file init
wrote, `quorate upkeep` beside it) and mutual TLS for peers and clients from the existing Secret
etcd-tls. Every pod created at once bootstraps one cluster over TLS with the IDs `quorate discover`
predicts, a client without a certificate is refused, and every pod deleted at once comes back with
its member ID."""
import statefulset
import sts_tls_test
from harness import check

TLS = {"secureTransport": True, "existingSecret": "etcd-tls"}


def test():
    c = statefulset.StatefulSetCluster("chart", objects=statefulset.load_chart(
        {"mode": "init-container", "auth": {"peer": TLS, "client": TLS}}))
    check(c.scheme == "https", f"the chart's pods advertise {c.scheme} peer URLs")
    voters = sts_tls_test.bootstrap_over_tls(c)
    pods = c.delete_pods([p.name for p in c.pod_list()])
    check(c.wait_ready() == voters, "the member IDs changed when every pod was deleted")
    check(all(c.decisions(p)[1:] == ["restart"] for p in pods), f"decisions {[c.decisions(p) for p in pods]}")


if __name__ == "__main__":
    statefulset.main(test)
