"""Taking a Bitnami etcd release over in place with the chart (k8s/chart/README.md, "Migrating from
Bitnami's chart"). A cluster started as Bitnami's chart starts it (release etcd: StatefulSet etcd,
headless Service etcd-headless, its pod labels, peer URLs http://etcd-N.etcd-headless.<ns>.svc.
cluster.local:2380, PVCs data-etcd-N mounted at /bitnami/etcd with the data in /bitnami/etcd/data,
plain etcd configured by its ETCD_* environment with token etcd-cluster-k8s) is upgraded to the
chart with the migration values; the StatefulSet's rolling update replaces one pod at a time,
highest ordinal first. Each new pod's quorate finds Bitnami's data and no member bucket, and
restarts etcd on it: same cluster ID, same member IDs, every key, no member added or removed, no
write refused. Then every pod deleted at once comes back with its member ID and data.

One difference from Bitnami's pods: etcd listens on the pod's IP, not 0.0.0.0, since the harness's
pods share one network namespace. Listen URLs are not part of a member's identity."""
import harness
import statefulset
from harness import check, log

REPLICAS = 3
NS = statefulset.NAMESPACE
LABELS = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": "etcd",
          "app.kubernetes.io/component": "etcd", "app.kubernetes.io/managed-by": "Helm",
          "helm.sh/chart": "etcd-11.3.6"}
SELECTOR = {k: LABELS[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance",
                                   "app.kubernetes.io/component")}
# The values of k8s/chart/README.md's migration section for this release.
MIGRATION_VALUES = {"replicaCount": REPLICAS, "persistence": {"mountPath": "/bitnami/etcd", "size": "8Gi"},
                    "dataDir": "/bitnami/etcd/data", "initialClusterToken": "etcd-cluster-k8s"}


def bitnami_objects():
    """What `helm install etcd bitnami/etcd --set replicaCount=3 --set auth.rbac.create=false`
    creates that etcd's start depends on: the two Services and the StatefulSet, its etcd container
    given the environment Bitnami's templates give it."""
    headless = f"etcd-headless.{NS}.svc.cluster.local"
    initial = ",".join(f"etcd-{i}=http://etcd-{i}.{headless}:2380" for i in range(REPLICAS))
    env = [{"name": "MY_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "MY_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "ETCD_NAME", "value": "$(MY_POD_NAME)"},
           {"name": "ETCD_DATA_DIR", "value": "/bitnami/etcd/data"},
           {"name": "ETCD_LOG_LEVEL", "value": "info"},
           {"name": "ETCD_ADVERTISE_CLIENT_URLS",
            "value": f"http://$(MY_POD_NAME).{headless}:2379,http://etcd.{NS}.svc.cluster.local:2379"},
           {"name": "ETCD_LISTEN_CLIENT_URLS", "value": "http://$(MY_POD_IP):2379"},
           {"name": "ETCD_INITIAL_ADVERTISE_PEER_URLS", "value": f"http://$(MY_POD_NAME).{headless}:2380"},
           {"name": "ETCD_LISTEN_PEER_URLS", "value": "http://$(MY_POD_IP):2380"},
           {"name": "ETCD_INITIAL_CLUSTER_TOKEN", "value": "etcd-cluster-k8s"},
           {"name": "ETCD_INITIAL_CLUSTER_STATE", "value": "new"},
           {"name": "ETCD_INITIAL_CLUSTER", "value": initial},
           {"name": "ETCD_CLUSTER_DOMAIN", "value": headless}]
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "etcd", "namespace": NS, "labels": LABELS},
           "spec": {"replicas": REPLICAS, "selector": {"matchLabels": SELECTOR}, "serviceName": "etcd-headless",
                    "podManagementPolicy": "Parallel", "updateStrategy": {"type": "RollingUpdate"},
                    "template": {"metadata": {"labels": LABELS},
                                 "spec": {"serviceAccountName": "etcd",
                                          "containers": [{"name": "etcd", "image": "docker.io/bitnami/etcd:3.5.17",
                                                          "command": ["etcd"], "env": env,
                                                          "ports": [{"name": "client", "containerPort": 2379},
                                                                    {"name": "peer", "containerPort": 2380}],
                                                          "volumeMounts": [{"name": "data",
                                                                            "mountPath": "/bitnami/etcd"}]}]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                              "spec": {"accessModes": ["ReadWriteOnce"],
                                                       "resources": {"requests": {"storage": "8Gi"}}}}]}}
    ports = [{"name": "client", "port": 2379}, {"name": "peer", "port": 2380}]
    services = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS, "labels": LABELS},
                 "spec": dict(spec, selector=SELECTOR, ports=ports)}
                for name, spec in (("etcd-headless", {"clusterIP": "None", "publishNotReadyAddresses": True}),
                                   ("etcd", {"type": "ClusterIP"}))]
    return {(o["kind"], o["metadata"]["name"]): o for o in [sts] + services}


def test():
    c = statefulset.StatefulSetCluster("bitnami", objects=bitnami_objects())
    c.create()
    before = c.wait_ready()
    cluster_id = set(c.cluster_ids().values())
    for i in range(50):
        c.put(f"/bitnami/{i}", str(i))

    log("helm upgrade etcd k8s/chart -f migration values: the rolling update, etcd-2 first")
    chart = statefulset.load_chart(MIGRATION_VALUES)
    check(set(chart) >= set(bitnami_objects()), f"the chart renders {sorted(chart)}")
    check(chart[("StatefulSet", "etcd")]["spec"]["selector"] == c.sts["spec"]["selector"],
          "the chart's StatefulSet selector is not Bitnami's (immutable: the upgrade would be refused)")
    check(chart[("StatefulSet", "etcd")]["spec"]["volumeClaimTemplates"] == c.sts["spec"]["volumeClaimTemplates"],
          "the chart's volumeClaimTemplates are not Bitnami's (immutable: the upgrade would be refused)")
    c.upgrade(chart)
    writer = statefulset.Writer(c, c.pod_list())
    writer.start()
    watch = harness.ClusterIdWatch(c, c.pod_list())
    watch.start()
    for ordinal in reversed(range(REPLICAS)):
        pod, = c.delete_pods([f"etcd-{ordinal}"])
        after = c.wait_ready(timeout=120)
        check(after == before, f"after {pod.name} the member IDs are {after}, not {before}")
        check(c.decisions(pod) == ["restart"], f"{pod.name} decided {c.decisions(pod)} on Bitnami's data")
    writer.finish()
    seen = watch.finish()
    log(f"clusters seen {seen}")
    check(set(c.cluster_ids().values()) == cluster_id, f"cluster ID {cluster_id} became {c.cluster_ids()}")
    check(set(seen) <= cluster_id, f"another cluster was seen: {seen}")
    writer.check_failures("during the migration")
    for p in c.pod_list():
        for i in range(50):
            check(c.get(f"/bitnami/{i}", p) == str(i), f"{p.name} lost /bitnami/{i}")

    log("every pod of the migrated cluster deleted at once: now each has quorate's member bucket")
    pods = c.delete_pods([p.name for p in c.pod_list()])
    check(c.wait_ready() == before, "the member IDs changed when every pod was deleted")
    check(all(set(c.decisions(p)) == {"restart"} for p in pods), f"decisions {[c.decisions(p) for p in pods]}")
    check(c.get("/bitnami/49", pods[0]) == "49", "the data did not survive")


if __name__ == "__main__":
    statefulset.main(test)
