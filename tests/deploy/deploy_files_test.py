"""The cloud deployment files under deploy/ are files a cloud runs as they are, so they are checked
as the tools that run them would: each cloud-config by cloud-init's own schema (`cloud-init schema`,
after rendering its Jinja variables with a made-up instance's values, as cloud-init renders them
on the instance), each systemd unit they write (and the bare-metal one) by `systemd-analyze
verify`, with only the binary's path moved to the build's quorate, the GCE startup script by
`sh -n`, and the IAM policy as JSON naming the actions the README says it grants.

Usage: deploy_files_test.py REPO_ROOT QUORATE_BIN. Exits 77 when cloud-init or systemd-analyze is
missing (scripts/deps installs both)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT, QUORATE = sys.argv[1], sys.argv[2]
DEPLOY = os.path.join(ROOT, "deploy")
INSTANCE = {"v1.instance_id": "i-0123456789abcdef0", "v1.local_hostname": "etcd-vmss000001"}
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def render(text):
    """cloud-init's Jinja header and variables, rendered as on an instance; any variable left over
    is one cloud-init would not know either."""
    text = re.sub(r"^## template: jinja\n", "", text)

    def value(m):
        name = m.group(1).strip()
        check(name in INSTANCE, f"Jinja variable {name} is one of cloud-init's instance data")
        return INSTANCE.get(name, "x")

    return re.sub(r"\{\{([^}]*)\}\}", value, text)


def verify_unit(name, text, where):
    unit_dir = tempfile.mkdtemp()
    path = os.path.join(unit_dir, name)
    with open(path, "w") as f:
        f.write(text.replace("/usr/local/bin/quorate", QUORATE))
    r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True)
    said = (r.stdout + r.stderr).strip()
    check(r.returncode == 0 and said == "", f"systemd-analyze verify {name} of {where}: {said or 'clean'}")
    shutil.rmtree(unit_dir)


def check_cloud_config(rel):
    with open(os.path.join(DEPLOY, rel)) as f:
        rendered = render(f.read())
    check(rendered.startswith("#cloud-config\n"), f"{rel} renders to a #cloud-config")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(rendered)
    r = subprocess.run(["cloud-init", "schema", "--config-file", f.name], capture_output=True, text=True)
    check(r.returncode == 0, f"cloud-init schema {rel}: {(r.stdout + r.stderr).strip()}")
    os.unlink(f.name)
    import yaml  # cloud-init's own dependency, there whenever cloud-init is

    units = [w for w in yaml.safe_load(rendered).get("write_files", []) if w["path"].endswith(".service")]
    check(len(units) == 1, f"{rel} writes one systemd unit")
    for w in units:
        verify_unit(os.path.basename(w["path"]), w["content"], rel)


def check_startup_script(rel):
    path = os.path.join(DEPLOY, rel)
    r = subprocess.run(["sh", "-n", path], capture_output=True, text=True)
    check(r.returncode == 0, f"sh -n {rel}: {r.stderr.strip() or 'clean'}")
    with open(path) as f:
        m = re.search(r"<<'UNIT'\n(.*?)\nUNIT\n", f.read(), re.S)
    check(m is not None, f"{rel} writes its unit from a quoted here-document")
    if m:
        verify_unit("quorate.service", m.group(1) + "\n", rel)


def check_policy(rel):
    with open(os.path.join(DEPLOY, rel)) as f:
        policy = json.load(f)
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    needed = {"ec2:DescribeInstances", "autoscaling:DescribeAutoScalingGroups",
              "autoscaling:DescribeAutoScalingInstances", "s3:ListBucket", "s3:ListBucketMultipartUploads",
              "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"}
    check(policy.get("Version") == "2012-10-17" and actions == needed,
          f"{rel} grants exactly discovery's and the backup store's actions (extra {sorted(actions - needed)}, "
          f"missing {sorted(needed - actions)})")


def main():
    for tool in ("cloud-init", "systemd-analyze"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed: skipped (scripts/deps installs it)")
            return 77
    check_cloud_config("aws/user-data.yaml")
    check_cloud_config("azure/custom-data.yaml")
    check_startup_script("gce/startup.sh")
    with open(os.path.join(DEPLOY, "bare-metal", "quorate.service")) as f:
        verify_unit("quorate.service", f.read(), "bare-metal/quorate.service")
    check_policy("aws/iam-policy.json")
    return 1 if failures else 0


sys.exit(main())
