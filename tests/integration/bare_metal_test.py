"""The bare-metal example: deploy/bare-metal/quorate-boot writes each host's YAML config, and the
command line of quorate.service's ExecStart (read from the unit, with only the binary and the
config path moved to the test's) starts 3 nodes at once. One cluster forms; stopped as systemd
stops it (SIGTERM to quorate) every node exits 0; started again, each restarts on its data."""
import os
import shlex
import subprocess

import harness
from harness import QUORATE, check, log

DEPLOY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "bare-metal")


def exec_start():
    with open(os.path.join(DEPLOY, "quorate.service")) as f:
        lines = [line.strip() for line in f if line.startswith("ExecStart=")]
    check(len(lines) == 1, f"quorate.service has {len(lines)} ExecStart lines")
    return shlex.split(lines[0][len("ExecStart="):])


def test():
    harness.require("etcd")
    argv = exec_start()
    check(argv[:2] == ["/usr/local/bin/quorate", "run"] and argv[2:] == ["--config", "/etc/quorate/quorate.yaml"],
          f"ExecStart is {argv}")
    c = harness.Cluster(3)
    initial_cluster = c.initial_cluster()
    for n in c.nodes:
        n.config = os.path.join(c.dir, f"{n.name}.yaml")
        env = dict(os.environ, QUORATE_NAME=n.name, QUORATE_IP=n.ip, QUORATE_INITIAL_CLUSTER=initial_cluster,
                   QUORATE_TOKEN=c.token, QUORATE_DATA_DIR=n.data_dir, QUORATE_CONFIG=n.config)
        r = subprocess.run([os.path.join(DEPLOY, "quorate-boot"), "--write-only"], env=env, capture_output=True,
                           text=True)
        check(r.returncode == 0, f"quorate-boot exited {r.returncode}: {r.stderr}")
    bad = subprocess.run([os.path.join(DEPLOY, "quorate-boot"), "--write-only"], capture_output=True, text=True,
                         env=dict(os.environ, QUORATE_IP="127.0.0.1", QUORATE_CONFIG=os.path.join(c.dir, "bad.yaml")))
    check(bad.returncode == 2 and "QUORATE_DISCOVERY" in bad.stderr, f"no discovery: {bad.returncode} {bad.stderr}")
    check(not os.path.exists(os.path.join(c.dir, "bad.yaml")), "quorate-boot wrote a config from bad input")

    def start(n):
        n.quorate = harness.spawn([QUORATE] + argv[1:-1] + [n.config], n.log_path)
    for n in c.nodes:  # at once, as hosts booting together
        start(n)
    harness.wait_healthy(c)
    ids = harness.member_ids(c)
    c.etcdctl("put", "/bare-metal", "yes")
    log(f"one cluster {c.cluster_ids()}, members {ids}")
    check(len(set(c.cluster_ids().values())) == 1, f"more than one cluster: {c.cluster_ids()}")

    codes = harness.stop_together(c.nodes)  # systemctl stop: KillMode=mixed sends SIGTERM to quorate
    check(all(code == 0 for code in codes.values()), f"exit codes on SIGTERM: {codes}")
    for n in c.nodes:
        start(n)
    harness.wait_healthy(c)
    check(harness.member_ids(c) == ids, f"member IDs changed across the restart: {ids} -> {harness.member_ids(c)}")
    check(c.etcdctl("get", "/bare-metal", "--print-value-only").stdout.strip() == "yes", "data lost across restart")
    for n in c.nodes:
        check("decision: restart" in n.log_tail(200), f"{n.name} did not restart on its data:\n{n.log_tail()}")
    harness.stop_together(c.nodes)


if __name__ == "__main__":
    harness.main(test)
