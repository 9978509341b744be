"""StatefulSet life cycle, k8s/tls: with the Secret etcd-tls made as k8s/README.md describes (one
wildcard certificate for every pod, server and client auth), every pod created at once bootstraps one
cluster over mutual TLS, with the IDs `quorate discover` predicts for the https peer URLs, and the
client port refuses a client without a certificate."""
import statefulset
from harness import check, log, run


def bootstrap_over_tls(c):
    """Creates every pod at once with the Secret etcd-tls made first; checks the cluster, the IDs
    and the refusal. Returns the pods' member IDs."""
    c.create_tls_secret("etcd-tls")
    pods = c.create()
    voters = c.wait_ready()
    predicted = c.predicted()
    log(f"voters {voters}, predicted cluster {predicted['clusterID']}")
    check(all(m["peerURLs"][0].startswith("https://") for m in predicted["members"]), f"not https: {predicted}")
    check(set(c.cluster_ids().values()) == {predicted["clusterID"]}, f"cluster IDs {c.cluster_ids()} != predicted")
    check(voters == {m["name"]: m["id"] for m in predicted["members"]}, f"member IDs {voters} != {predicted}")
    r = run(["etcdctl", "--endpoints", pods[0].client_url, "--dial-timeout", "2s", "--command-timeout", "3s",
             "--cacert", f"{c.secret_dir('etcd-tls')}/ca.crt", "member", "list"])
    check(r.returncode != 0, f"etcd served a client without a certificate: {r.stdout}")
    return voters


def test():
    bootstrap_over_tls(statefulset.StatefulSetCluster("tls"))


if __name__ == "__main__":
    statefulset.main(test)
