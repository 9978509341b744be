"""The alert rules and the dashboard (k8s/chart/files, linked from k8s/monitoring): `promtool check
rules`, `promtool test rules` (alerts_test.yaml: each alert fires on its failure, after its `for`,
once per cluster where that is what it means, and never on a healthy cluster), and every metric the
rules and the dashboard name is one that etcd 3.4 (etcd_metrics.txt, read from a real member) or
quorate (its sources) exports, so a misspelt or renamed metric cannot leave a panel or an alert
silently empty."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

from verdict import verdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FILES = os.path.join(ROOT, "k8s", "chart", "files")
METRIC = re.compile(r"\b((?:etcd|quorate|grpc|process)_[a-z0-9_]+)")
# What in PromQL names labels, not metrics: matchers, and by/without/on/ignoring lists.
LABELS = re.compile(r"\{[^}]*\}|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def metrics_in(expr):
    return METRIC.findall(LABELS.sub(" ", expr))


def known_metrics():
    with open(os.path.join(HERE, "etcd_metrics.txt")) as f:
        names = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    for path in glob.glob(os.path.join(ROOT, "src", "**", "*.cc"), recursive=True):
        with open(path) as f:
            names |= set(re.findall(r'"(quorate_[a-z0-9_]+)', f.read()))
    return names


def unknown_in(exprs, known):
    """The metric names in these PromQL expressions that nothing exports (a histogram's _bucket,
    _sum and _count are its family's)."""
    out = set()
    for expr in exprs:
        for name in metrics_in(expr):
            if re.sub(r"_(bucket|sum|count)$", "", name) not in known and name not in known:
                out.add(name)
    return out


def main():
    promtool = shutil.which("promtool")
    if promtool is None:
        print("SKIP: promtool missing (scripts/deps installs Debian's prometheus)")
        return 77
    failures = []
    for argv in ([promtool, "check", "rules", os.path.join(FILES, "alerts.yaml")],
                 [promtool, "test", "rules", os.path.join(HERE, "alerts_test.yaml")]):
        r = subprocess.run(argv, capture_output=True, text=True, cwd=HERE)
        print(r.stdout, r.stderr, sep="", end="")
        if r.returncode != 0:
            failures.append(" ".join(argv[1:3]))

    known = known_metrics()
    if "quorate_members" not in known or "etcd_server_has_leader" not in known:
        failures.append(f"the list of known metrics is wrong: {sorted(known)[:10]}...")
    if unknown_in(["rate(etcd_server_has_leaders[5m])"], known) != {"etcd_server_has_leaders"}:
        failures.append("the metric check does not catch a misspelt name")

    with open(os.path.join(FILES, "alerts.yaml")) as f:
        rules_text = f.read()
    exprs = [m for m in re.findall(r"expr: \|?\n?((?:.+\n)+?)\s+for:", rules_text)]
    if len(exprs) < 6:
        failures.append(f"found {len(exprs)} rule expressions in alerts.yaml, expected 6")
    if unknown := unknown_in(exprs, known):
        failures.append(f"alerts.yaml names metrics nothing exports: {sorted(unknown)}")

    with open(os.path.join(FILES, "dashboard.json")) as f:
        dashboard = json.load(f)
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in dashboard["panels"]]
    if len(ids) != len(set(ids)):
        failures.append("dashboard panel ids repeat")
    empty = [p["title"] for p in panels if not p.get("targets") or not all(t.get("expr") for t in p["targets"])]
    if empty:
        failures.append(f"dashboard panels without a query: {empty}")
    used = {n for p in panels for t in p["targets"] for n in metrics_in(t["expr"])}
    if unknown := unknown_in([t["expr"] for p in panels for t in p["targets"]], known):
        failures.append(f"the dashboard names metrics nothing exports: {sorted(unknown)}")
    quorate = {n for n in known if n.startswith("quorate_") and n != "quorate_up"}
    if missing := quorate - used:
        failures.append(f"the dashboard shows none of quorate's {sorted(missing)}")
    print(f"dashboard: {len(panels)} panels over {len(used)} metrics")

    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
