"""Issue 25, the leader's maintenance (docs/DESIGN.md §12) against real etcd, 3 nodes under `quorate run`
with an 8 MiB quota (`--quota-backend-bytes`) and a writer:
1. a healthy small database is left alone (no defragmentation, by /metrics, after several rounds);
2. a fragmented one (keys written, deleted and compacted by the test) is defragmented by rule M5,
   every member, one at a time, the leader last;
3. filled past the quota, the cluster raises NOSPACE and every put fails; with no operator, the
   leader's quorate compacts, defragments each member one at a time (the leader last) and disarms,
   and the writer's puts go through again; `quorate maintenance status` then has nothing to do;
4. a cluster of one member, which can never spare a voter, filled past the quota recovers the same
   way (M3 defragments one or two voters without the margin).
Never two members defragmented at once: each defragmentation's span (its decision line to its
"defragmented" line) is read from the logs of all three nodes."""
import json
import re

from harness import (QUORATE, Cluster, Writer, check, fail, log, log_since, main, parse_prometheus, require, run,
                     run_together, stop_together, wait_healthy, wait_until)

QUOTA = 8 * 1024 * 1024
BIG = "x" * (100 * 1024)
LINE = re.compile(r"^\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d+)")


def defrags(node):
    return parse_prometheus(node.http("/metrics")[1]).get(
        ("quorate_maintenance_actions_total", frozenset({("action", "defragment")})), 0)


def total_defrags(c):
    return sum(defrags(n) for n in c.nodes)


def statuses(c):
    out = json.loads(c.etcdctl("endpoint", "status", "-w", "json", endpoints=c.endpoints()).stdout)
    return {format(s["Status"]["header"]["member_id"], "x"): s["Status"] for s in out}


def spans(c):
    """(start, end, node, member) of every defragmentation, from the decision line to the done line."""
    out = []
    for n in c.nodes:
        start = None
        for line in log_since(n).splitlines():
            stamp = LINE.match(line)
            if "maintenance: defragment (rule" in line and stamp:
                start = stamp.group(1)
            m = re.search(r"maintenance: (\S+) defragmented in", line)
            if m and stamp and start:
                out.append((start, stamp.group(1), n.name, m.group(1)))
                start = None
    return sorted(out)


def check_one_at_a_time(c, what):
    s = spans(c)
    for a, b in zip(s, s[1:]):
        check(a[1] <= b[0], f"{what}: two defragmentations at once: {a} and {b}")
    return s


def fill_past_quota(c):
    """One key overwritten until the history fills the quota and etcd refuses puts (NOSPACE); the
    number of puts it took."""
    for i in range(400):
        r = c.etcdctl("put", "/fill", BIG, check_rc=None)
        if r.returncode != 0 and "database space exceeded" in r.stderr:
            return i
    fail(f"{len(c.nodes)} member(s) never raised NOSPACE with an 8 MiB quota")


def wait_for_writes_back(c):
    wait_until(lambda: c.etcdctl("put", "/after", "ok", check_rc=None).returncode == 0, 120,
               f"a put accepted again by {len(c.nodes)} member(s), with no operator")


def test():
    require("etcd")
    require("etcdctl")
    c = Cluster(3)
    run_together(c.nodes, extra=["--quota-backend-bytes", str(QUOTA), "--maintenance-pause", "1s",
                                 "--defrag-min-bytes", "1500000", "--defrag-min-percent", "45"])
    wait_healthy(c)

    # 1. Small and healthy: maintenance rounds run (every 5 s) and do nothing.
    for i in range(20):
        c.etcdctl("put", f"/small/{i}", "v")
    wait_until(lambda: any("maintenance: none" in log_since(n) for n in c.nodes), 30,
               "a maintenance round on the leader")
    check(total_defrags(c) == 0, "a healthy small database was defragmented")

    # 2. Fragmented: 3 MB written, deleted and compacted away leaves free pages past the thresholds.
    for i in range(30):
        c.etcdctl("put", f"/frag/{i}", BIG)
    c.etcdctl("del", "/frag/", "--prefix")
    rev = json.loads(c.etcdctl("get", "/small/0", "-w", "json").stdout)["header"]["revision"]
    c.etcdctl("compact", str(rev), "--physical")

    # bbolt frees the compacted pages at the next commit, as a writer's next put makes one.
    def freed():
        c.etcdctl("put", "/poke", "1")
        return all(s.get("dbSizeInUse", 0) * 2 < s["dbSize"] for s in statuses(c).values())
    wait_until(freed, 30, "the compacted pages free on every member")
    log(f"fragmented: {[(k, s['dbSize'], s.get('dbSizeInUse')) for k, s in statuses(c).items()]}")
    wait_until(lambda: total_defrags(c) >= 3, 90, "every member defragmented by rule M5")
    after = statuses(c)
    for mid, s in after.items():
        check(s["dbSize"] < 1500000, f"member {mid} not defragmented by M5: {s}")
    m6 = check_one_at_a_time(c, "M5")
    log(f"M5 defragmentations: {m6}")

    # 3. NOSPACE: one key overwritten until the history fills the quota.
    w = Writer(c, c.endpoints(), pause=0.05)
    w.start()
    puts = fill_past_quota(c)
    log(f"NOSPACE raised after {puts} puts of 100 KiB; the writer's failures so far: {len(w.failures)}")
    wait_for_writes_back(c)
    w.finish()
    alarms = c.etcdctl("alarm", "list").stdout.strip()
    check(alarms == "", f"alarms still raised: {alarms}")
    text = "".join(log_since(n) for n in c.nodes)
    for step in ("maintenance: compact (rule M3)", "maintenance: compacted up to revision",
                 "maintenance: disarm (rule M3)", "NOSPACE alarm of"):
        check(step in text, f"no {step!r} in the logs")
    s = check_one_at_a_time(c, "M3")
    m4 = [x for x in s if x not in m6]
    check(len(m4) >= 3, f"NOSPACE: {len(m4)} defragmentations, want every member: {m4}")
    # The leader last: the member defragmented last under NOSPACE is the leader's own.
    last = m4[-1]
    check(last[3] == last[2], f"the last defragmentation under NOSPACE was of {last[3]}, by {last[2]}'s quorate, "
          f"not of the leader itself: {m4}")
    check(len(w.ok) > 0, "the writer never got a put through")

    r = run([QUORATE, "maintenance", "status", "--endpoints", c.endpoints(),
             "--quota-backend-bytes", str(QUOTA)], prefix=c.prefix, check_rc=0)
    check("now: none" in r.stdout, f"maintenance status after the recovery:\n{r.stdout}")

    codes = stop_together(c.nodes)
    check(all(rc == 0 for rc in codes.values()), f"quorate run exit codes: {codes}")

    # 4. One voter, which can never be spared: filled past the quota, NOSPACE is cleared all the same
    #    (M3 defragments one or two voters without the margin), with no operator.
    one = Cluster(1)
    run_together(one.nodes, extra=["--quota-backend-bytes", str(QUOTA), "--maintenance-pause", "1s"])
    wait_healthy(one)
    fill_past_quota(one)
    wait_for_writes_back(one)
    text = log_since(one.nodes[0])
    for step in ("maintenance: defragment (rule M3)", "maintenance: disarm (rule M3)"):
        check(step in text, f"one member: no {step!r} in its log")
    codes = stop_together(one.nodes)
    check(all(rc == 0 for rc in codes.values()), f"the single member's quorate run exit code: {codes}")


if __name__ == "__main__":
    main(test)
