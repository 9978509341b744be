"""Issue 13, refusals (docs/DESIGN.md §4 rule 6): on a member of a 3-node cluster at etcd 3.5, a start
that etcd would refuse or that breaks its upgrade rules ends `quorate run` and `quorate init` with exit
1 and one line naming both versions and what to do, before etcd starts and without waiting out
--timeout: the real etcd 3.4.23 (older than the cluster version), a binary saying 3.7.0 (a minor
skipped) and one saying 3.6.5 (3.6 beside members on 3.5.30, older than 3.5.32). The last two are
scripts that only answer --version: they are refused before anything would run them."""
import json
import os
import time

from harness import (QUORATE, check, healthy_cluster_on, http_get, log, main, require_etcd34_and_35, run,
                     stop_together, wait_healthy, wait_until)


def fake_etcd(directory, version):
    path = os.path.join(directory, f"etcd-{version}")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho 'etcd Version: {version}'\necho 'Git SHA: test'\n")
    os.chmod(path, 0o755)
    return path


def test():
    etcd34, etcd35 = require_etcd34_and_35()
    c = healthy_cluster_on(etcd35)
    n1 = c.nodes[0]
    server35 = json.loads(http_get(f"{n1.client_url}/version")[1])["etcdserver"]
    wait_until(lambda: json.loads(http_get(f"{n1.client_url}/version")[1])["etcdcluster"] == "3.5.0", 30,
               "cluster version 3.5.0")
    n1.stop()

    cases = [
        (etcd34, "etcd 3.4.23 (--etcd) is older than the cluster version 3.5, which etcd never goes back "
                      "from: run etcd 3.5 or later here"),
        (fake_etcd(c.dir, "3.7.0"), "etcd 3.7.0 (--etcd) is more than one minor version ahead of the cluster "
                                    "version 3.5: etcd upgrades one minor version at a time, so upgrade every "
                                    "member to etcd 3.6 first"),
    ]
    if server35 < "3.5.32":  # Debian's pinned 3.5.30 (or the trixie fallback): the 3.6 rule applies
        cases.append((fake_etcd(c.dir, "3.6.5"),
                      f"etcd 3.6.5 (--etcd) cannot join n2, which runs etcd {server35}: etcd 3.6 needs every 3.5 "
                      f"member at 3.5.32 or later first, so upgrade n2 to etcd 3.5.32 before moving any member "
                      f"to 3.6"))
    for binary, line in cases:
        for command in (["run", "--status-listen", f"{n1.ip}:2383"], ["init"]):
            started = time.monotonic()
            r = run([QUORATE] + command + ["--etcd", binary] + n1.args(), prefix=c.prefix, timeout=60)
            took = time.monotonic() - started
            errors = [l for l in r.stderr.splitlines() if l.startswith("quorate: error:")]
            log(f"{command[0]} --etcd {os.path.basename(binary)}: exit {r.returncode} after {took:.1f} s: {errors}")
            check(r.returncode == 1 and errors == [f"quorate: error: {line}"],
                  f"{command[0]} --etcd {binary}: exit {r.returncode}, stderr:\n{r.stderr[-3000:]}")
            check(took < 20, f"{command[0]} took {took:.1f} s to refuse: it waited instead")
            check("etcd started" not in r.stderr, f"{command[0]} started etcd:\n{r.stderr[-2000:]}")

    # The right binary starts as usual, and the cluster is whole again.
    n1.run(etcd=etcd35)
    wait_healthy(c)
    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes on SIGTERM: {codes}")


if __name__ == "__main__":
    main(test)
