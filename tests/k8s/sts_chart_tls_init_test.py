"""The chart's other variant and its TLS, through the StatefulSet life-cycle harness: k8s/chart
rendered by helm with mode init-container (`quorate init`, then plain etcd on the config file init
wrote, `quorate upkeep` beside it), the etcd container from etcd's upstream image (etcdImage: etcd
alone in /usr/local/bin, no quorate), and mutual TLS for peers and clients from the existing Secret
etcd-tls. Every pod created at once bootstraps one cluster over TLS with the IDs `quorate discover`
predicts, a client without a certificate is refused, and every pod deleted at once comes back with
its member ID."""
import json

import harness
import statefulset
import sts_tls_test
from harness import check

TLS = {"secureTransport": True, "existingSecret": "etcd-tls"}
UPSTREAM_ETCD = {"repository": statefulset.UPSTREAM_ETCD_IMAGE, "tag": "v3.5.30"}


def test():
    # The init container runs quorate's image, whose etcd is 3.5 (scripts/image) as the upstream
    # image's is. On the harness's default (Debian's 3.4), init refused the restart after every pod
    # was deleted whenever upkeep had recorded the cluster's 3.5 in the bucket first (rule 6): a
    # race one CI run lost.
    harness.ETCD_DIR = harness.require_etcd35()
    c = statefulset.StatefulSetCluster("chart", objects=statefulset.load_chart(
        {"mode": "init-container", "etcdImage": UPSTREAM_ETCD, "auth": {"peer": TLS, "client": TLS}}))
    check(c.scheme == "https", f"the chart's pods advertise {c.scheme} peer URLs")
    etcd = next(s for s in c.sts["spec"]["template"]["spec"]["containers"] if s["name"] == "etcd")
    check(statefulset.upstream_etcd(etcd) and etcd["command"][0] == "/usr/local/bin/etcd",
          f"the etcd container runs {etcd['image']}: {etcd['command']}")
    voters = sts_tls_test.bootstrap_over_tls(c)
    # The members are the image's etcd (3.5; the harness's own default is Debian's 3.4), and the
    # container had no quorate to call.
    status = json.loads(c.etcdctl("endpoint", "status", "-w", "json").stdout)
    versions = {s["Status"]["version"].rsplit(".", 1)[0] for s in status}
    check(versions == {"3.5"}, f"the members run etcd {versions}, not the upstream image's 3.5")
    r = c.pod_list()[0].kubectl_exec(["sh", "-c", "command -v quorate || echo none"], container="etcd")
    check(r.stdout.strip() == "none", f"quorate is on the etcd container's PATH: {r.stdout.strip()}")
    pods = c.delete_pods([p.name for p in c.pod_list()])
    check(c.wait_ready() == voters, "the member IDs changed when every pod was deleted")
    check(all(c.decisions(p)[1:] == ["restart"] for p in pods), f"decisions {[c.decisions(p) for p in pods]}")


if __name__ == "__main__":
    statefulset.main(test)
