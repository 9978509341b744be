"""The Helm chart (k8s/chart) and the kustomize manifests (k8s/) as Kubernetes would take them:
`helm lint --strict`; `helm template` over a matrix of values, each rendering validated against the
real API schemas (validate.mjs) and checked for what that value must change; values.schema.json
refusing what the chart cannot mean (a Bitnami value with no meaning here among them); and
`kubectl kustomize` of every variant of k8s/, validated the same way. helm and kubectl are the
static binaries scripts/deps unpacks into third_party/helm."""
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

from verdict import verdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "k8s", "chart")
TOOLS = os.path.join(ROOT, "third_party", "helm")
HELM, KUBECTL = os.path.join(TOOLS, "helm"), os.path.join(TOOLS, "kubectl")

TLS = {"secureTransport": True, "existingSecret": "etcd-tls"}
# name -> (values, check of the rendered objects by (kind, name))
MATRIX = {
    "defaults": {},
    "init-container": {"mode": "init-container"},
    "tls-existing-secret": {"auth": {"peer": TLS, "client": TLS}},
    "tls-cert-manager": {"auth": {"peer": {"secureTransport": True}, "client": {"secureTransport": True},
                                  "certManager": {"enabled": True, "issuerRef": {"name": "etcd-ca"}}}},
    "backups-s3-monitoring": {
        "backup": {"enabled": True, "storeUrl": "s3://backups/etcd?region=eu-west-1", "schedule": "1h",
                   "keySecret": {"name": "etcd-backup-key"}, "credentialsSecret": "etcd-backup-s3"},
        "metrics": {"serviceMonitor": {"enabled": True},
                    "prometheusRule": {"enabled": True, "rules": [{"alert": "Mine", "expr": "up == 0"}]},
                    "dashboard": {"enabled": True}}},
    "restore": {"restore": {"fromUrl": "s3://backups/etcd/backups/etcd/main/2026-11-26T08:00:00Z"},
                "initialClusterToken": "etcd-restored-1", "backup": {"keySecret": {"name": "etcd-backup-key"}}},
    "init-container-upstream-etcd": {"mode": "init-container", "etcdImage": {
        "repository": "gcr.io/etcd-development/etcd", "tag": "v3.5.30"}},
    "five-no-persistence": {"replicaCount": 5, "persistence": {"enabled": False}, "pdb": {"minAvailable": 3},
                            "metrics": {"enabled": False}},
    "bitnami-layout": {"persistence": {"mountPath": "/bitnami/etcd"}, "dataDir": "/bitnami/etcd/data",
                       "fullnameOverride": "etcd"},
}
REFUSED = {
    "replicaCount: three": ({"replicaCount": "three"}, "replicaCount: Invalid type"),
    "unknown mode": ({"mode": "sidecar"}, "mode: mode must be one of"),
    "Bitnami's auth.rbac": ({"auth": {"rbac": {"create": True}}}, "Additional property rbac is not allowed"),
    "Bitnami's preUpgradeJob": ({"preUpgradeJob": {"enabled": True}}, "Additional property preUpgradeJob"),
    "backup without store": ({"backup": {"enabled": True}}, "backup.storeUrl is required"),
    "backups in init-container mode": ({"mode": "init-container", "backup": {"enabled": True, "storeUrl": "file:///b"}},
                                       "backup.enabled needs mode: run"),
    "etcdImage in run mode": ({"etcdImage": {"repository": "gcr.io/etcd-development/etcd", "tag": "v3.5.30"}},
                              "etcdImage.repository needs mode: init-container"),
    "etcdImage without a tag": ({"mode": "init-container", "etcdImage": {"repository": "gcr.io/etcd-development/etcd"}},
                                "etcdImage.repository needs etcdImage.tag"),
    "TLS without a Secret": ({"auth": {"peer": {"secureTransport": True}}}, "needs auth.peer.existingSecret"),
}


def chart_version():
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        return str(yaml.safe_load(f)["appVersion"])


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def render(values, release="etcd"):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(values, f)
    try:
        return run([HELM, "template", release, CHART, "--namespace", "db", "-f", f.name])
    finally:
        os.remove(f.name)


def objects_of(text):
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(text) if o}


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def check_rendering(name, objs):
    """What each entry of the matrix must have changed; raises AssertionError naming it."""
    sts = objs[("StatefulSet", "etcd")]
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    etcd = next(c for c in pod["containers"] if c["name"] == "etcd")
    env = env_of(etcd)
    # Whatever the values: the parallel start quorate needs, Bitnami's names, no Job or hook that
    # could fail an install or upgrade, and the PDB's selector matching the pods.
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["serviceName"] == "etcd-headless" and ("Service", "etcd-headless") in objs
    assert not [k for k in objs if k[0] in ("Job", "CronJob")], f"{name}: a Job is rendered"
    hooks = [k for k, o in objs.items() if "helm.sh/hook" in o["metadata"].get("annotations", {})]
    assert hooks == [("Pod", "etcd-test-put-get")], f"{name}: hooks {hooks}"
    labels = spec["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items())
    if ("PodDisruptionBudget", "etcd") in objs:
        assert objs[("PodDisruptionBudget", "etcd")]["spec"]["selector"] == spec["selector"]
    mode_env = env if "QUORATE_DISCOVERY" in env else env_of(pod["initContainers"][0])
    assert "statefulset=etcd" in mode_env["QUORATE_DISCOVERY"]

    if name == "defaults":
        assert spec["replicas"] == 3 and etcd["command"] == ["quorate", "run"]
        assert env["ETCD_INITIAL_ADVERTISE_PEER_URLS"] == \
            "http://$(POD_NAME).etcd-headless.$(POD_NAMESPACE).svc.cluster.local:2380"
        assert env["ETCD_DATA_DIR"] == "/var/lib/etcd" and env["QUORATE_ETCD"] == "/usr/bin/etcd"
        assert etcd["securityContext"]["runAsUser"] == 1001
        assert spec["persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Delete"
    elif name == "init-container":
        assert [c["command"] for c in pod["initContainers"]] == [["quorate", "init"]]
        assert etcd["command"] == ["/usr/bin/etcd", "--config-file", "/var/lib/etcd/quorate/etcd.conf.yml"]
        assert [c["command"] for c in pod["containers"][1:]] == [["quorate", "upkeep"]]
    elif name == "init-container-upstream-etcd":
        # etcd from etcd's own image; quorate's containers keep the chart's image.
        assert etcd["image"] == "gcr.io/etcd-development/etcd:v3.5.30", etcd["image"]
        assert etcd["command"] == ["/usr/local/bin/etcd", "--config-file", "/var/lib/etcd/quorate/etcd.conf.yml"]
        quorate_images = {c["image"] for c in pod["initContainers"] + pod["containers"][1:]}
        assert quorate_images == {"quorate:" + chart_version()}, quorate_images
    elif name.startswith("tls-"):
        secret = "etcd-tls" if name == "tls-existing-secret" else "etcd-peer-tls"
        assert env["ETCD_INITIAL_ADVERTISE_PEER_URLS"].startswith("https://")
        assert "scheme=https" in env["QUORATE_DISCOVERY"]
        assert env["ETCD_PEER_CLIENT_CERT_AUTH"] == "true" and env["ETCD_CLIENT_CERT_AUTH"] == "true"
        volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"]}
        assert volumes["peer-tls"] == secret, volumes
        if name == "tls-cert-manager":
            cert = objs[("Certificate", "etcd-peer")]["spec"]
            assert "*.etcd-headless.db.svc.cluster.local" in cert["dnsNames"]
            assert {"server auth", "client auth"} <= set(cert["usages"])
    elif name == "backups-s3-monitoring":
        assert env["QUORATE_BACKUP_TO"].startswith("s3://") and env["QUORATE_BACKUP_SCHEDULE"] == "1h"
        assert env["QUORATE_BACKUP_KEY_FILE"] == "/etc/quorate/backup-key/backup.key"
        assert {"secretRef": {"name": "etcd-backup-s3"}} in etcd["envFrom"]
        with open(os.path.join(CHART, "files", "alerts.yaml")) as f:
            alerts = yaml.safe_load(f)
        groups = objs[("PrometheusRule", "etcd")]["spec"]["groups"]
        assert groups == alerts["groups"] + [{"name": "etcd-extra", "rules": [{"alert": "Mine", "expr": "up == 0"}]}]
        monitor = objs[("ServiceMonitor", "etcd")]["spec"]
        assert [e["port"] for e in monitor["endpoints"]] == ["metrics", "status"], monitor
        selected = [name for (kind, name), o in objs.items() if kind == "Service" and
                    all(o["metadata"]["labels"].get(k) == v for k, v in monitor["selector"]["matchLabels"].items())]
        assert selected == ["etcd-headless"], f"the ServiceMonitor selects {selected}"
        headless = {p["name"] for p in objs[("Service", "etcd-headless")]["spec"]["ports"]}
        assert {"metrics", "status"} <= headless, headless
        assert "quorate-etcd.json" in objs[("ConfigMap", "etcd-dashboard")]["data"]
    elif name == "restore":
        assert env["QUORATE_RESTORE_FROM"].startswith("s3://") and "QUORATE_BACKUP_TO" not in env
        assert env["ETCD_INITIAL_CLUSTER_TOKEN"] == "etcd-restored-1" and "QUORATE_BACKUP_KEY_FILE" in env
    elif name == "five-no-persistence":
        assert spec["replicas"] == 5 and "volumeClaimTemplates" not in spec
        assert {"name": "data", "emptyDir": {}} in pod["volumes"]
        assert objs[("PodDisruptionBudget", "etcd")]["spec"] == {"minAvailable": 3, "selector": spec["selector"]}
        assert "ETCD_LISTEN_METRICS_URLS" not in env
    elif name == "bitnami-layout":
        assert env["ETCD_DATA_DIR"] == "/bitnami/etcd/data"
        assert {"name": "data", "mountPath": "/bitnami/etcd"} in etcd["volumeMounts"]
        assert spec["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


def save(out, folder, name, text):
    """A rendering kept for validate.mjs, which reads a tree of files."""
    os.makedirs(os.path.join(out, folder), exist_ok=True)
    with open(os.path.join(out, folder, f"{name}.yaml"), "w") as f:
        f.write(text)


def validate(directory):
    r = run(["node", os.path.join(HERE, "validate.mjs"), directory], cwd=HERE)
    print(r.stdout, r.stderr, sep="", end="")
    return r.returncode == 0


def main():
    for tool in (HELM, KUBECTL):
        if not os.access(tool, os.X_OK):
            print(f"SKIP: {tool} missing (scripts/deps unpacks helm and kubectl there)")
            return 77
    if shutil.which("node") is None or not os.path.isdir(os.path.join(HERE, "node_modules", "kubernetes-models")):
        print("SKIP: node or tests/manifests/node_modules missing (scripts/deps installs them)")
        return 77
    failures = []
    lint = run([HELM, "lint", "--strict", CHART])
    if lint.returncode != 0:
        failures.append(f"helm lint:\n{lint.stdout}{lint.stderr}")

    with tempfile.TemporaryDirectory() as out:
        for name, values in MATRIX.items():
            r = render(values)
            if r.returncode != 0:
                failures.append(f"helm template ({name}) failed: {r.stderr}")
                continue
            save(out, "chart", name, r.stdout)
            try:
                check_rendering(name, objects_of(r.stdout))
                print(f"ok   helm template ({name}): checked")
            except (AssertionError, KeyError, StopIteration) as e:
                failures.append(f"helm template ({name}): {type(e).__name__} {e}")
        for variant in ("run", "init-container", "tls"):
            r = run([KUBECTL, "kustomize", os.path.join(ROOT, "k8s", variant)])
            if r.returncode != 0:
                failures.append(f"kubectl kustomize k8s/{variant} failed: {r.stderr}")
                continue
            save(out, "kustomize", variant, r.stdout)
            kinds = sorted(k for k, _ in objects_of(r.stdout))
            if kinds.count("StatefulSet") != 1 or "PodDisruptionBudget" not in kinds:
                failures.append(f"kubectl kustomize k8s/{variant} gave {kinds}")
        if not validate(out):
            failures.append("a rendering does not validate against the API schemas")

    for name, (values, why) in REFUSED.items():
        r = render(values)
        if r.returncode == 0 or why not in r.stderr:
            failures.append(f"helm template with {name} was not refused with '{why}': rc {r.returncode} {r.stderr}")
        else:
            print(f"ok   refused: {name}")

    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
