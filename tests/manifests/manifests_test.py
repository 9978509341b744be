"""Every kustomize manifest under k8s/ (base/ and each variant; the chart is chart_test.py's)
validates against the real Kubernetes API schemas (npm kubernetes-models), and the validator does
fail a manifest that Kubernetes would refuse."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
K8S = os.path.join(HERE, "..", "..", "k8s")


VARIANTS = ("base", "run", "init-container", "tls")


def validate(*directories):
    return subprocess.run(["node", os.path.join(HERE, "validate.mjs"), *directories], capture_output=True, text=True,
                          cwd=HERE)


def main():
    if shutil.which("node") is None or not os.path.isdir(os.path.join(HERE, "node_modules", "kubernetes-models")):
        print("SKIP: node or tests/manifests/node_modules missing (scripts/deps installs them)")
        return 77
    good = validate(*(os.path.join(K8S, v) for v in VARIANTS))
    print(good.stdout, good.stderr, sep="")
    if good.returncode != 0:
        print("FAIL: k8s/ does not validate")
        return 1
    for kind in ("StatefulSet", "Service", "Role", "RoleBinding", "ServiceAccount", "PodDisruptionBudget"):
        if f": {kind} " not in good.stdout:
            print(f"FAIL: no {kind} was validated")
            return 1

    with tempfile.TemporaryDirectory() as bad:
        with open(os.path.join(K8S, "run", "statefulset.yaml")) as f:
            text = f.read()
        with open(os.path.join(bad, "statefulset.yaml"), "w") as f:
            f.write(text.replace("replicas: 3", "replicas: three"))
        refused = validate(bad)
        if refused.returncode == 0 or "/spec/replicas must be integer" not in refused.stderr:
            print(f"FAIL: a StatefulSet with replicas: three passed:\n{refused.stdout}{refused.stderr}")
            return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
