"""The restore part's time, step by step, from a kept work dir (bench/run --only restore --keep):
python3 bench/restore_phases.py /tmp/quorate-bench-XXXX

Each node log of a way holds the bench's own lines (start, first accepted put), quorate's lines and
etcd's, all with wall-clock times; this prints, per way, round and node, the seconds from the start
at which each step was first seen, then the median per way and step (of the steps every row shows):
  q:decided  quorate's rule 7 decision (after its start, discovery and rule 7c's probes)
  q:read     the backup read back, inflated, sha256 checked and copied to the node
  q:tool     etcd's own `snapshot restore` done (quorate's; by hand, its end is etcd:run)
  q:init     init's decision on the restored data (its peer probes wait on a peer's etcd that is
             starting: it has bound the peer port and answers once it serves)
  q:etcd     etcd started by quorate
  etcd:run, etcd:backend, etcd:kvstore, etcd:serve, etcd:peer, etcd:leader: etcd's own start, to
             the leader it sees elected
  W          the first put the new cluster accepted
"""
import datetime
import glob
import json
import os
import re
import statistics
import sys

QUORATE = (("decision: restore:", "q:decided"), ("checked (sha256", "q:read"), ("restored as member", "q:tool"),
           ("decision: restart:", "q:init"), ("etcd started (pid", "q:etcd"))
# etcd's messages, zap (3.5, and 3.4 where it logs JSON) and capnslog (3.4's default), to a step.
ETCD = (("Running: ", "etcd:run"), ("etcd Version:", "etcd:run"), ("opened backend db", "etcd:backend"),
        ("restarting member", "etcd:backend"), ("restarting local member", "etcd:backend"),
        ("kvstore restored", "etcd:kvstore"), ("now serving peer/client/metrics", "etcd:serve"),
        ("starting server...", "etcd:serve"), ("established TCP streaming connection", "etcd:peer"),
        ("established a TCP streaming connection", "etcd:peer"), ("elected leader", "etcd:leader"))
ORDER = ["q:decided", "q:read", "q:tool", "q:init", "q:etcd", "etcd:run", "etcd:backend", "etcd:kvstore",
         "etcd:serve", "etcd:peer", "etcd:leader", "W"]


def seconds(text):
    """Seconds since the epoch of a log time: ISO with or without Z and fraction, or a number."""
    if isinstance(text, (int, float)):
        return float(text)
    text = text.strip().rstrip("Z").replace(" ", "T")
    for form in ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.datetime.strptime(text, form).replace(tzinfo=datetime.timezone.utc).timestamp()
        except ValueError:
            pass
    return None


def step_of(line):
    """(time, step) of a log line that marks one, else None."""
    if line.startswith("{"):
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        message = entry.get("msg", "")
        for key, step in ETCD:
            if message.startswith(key) or key in message:
                return seconds(entry.get("ts")), step
        return None
    head = re.match(r"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d\.\d+)Z? ", line)
    if not head:
        return None
    for key, step in QUORATE + ETCD:
        if key in line:
            return seconds(head.group(1)), step
    return None


def rounds(path):
    """[(token, {step: seconds from the start})] of one node's log, a round per bench start line."""
    out = []
    for line in open(path, errors="replace"):
        mark = re.match(r"bench: (\S+) (\S+) (started|writable)", line)
        if mark:
            t = seconds(mark.group(1))
            if mark.group(3) == "started":
                out.append((mark.group(2), t, {}))
            elif out:
                out[-1][2].setdefault("W", t - out[-1][1])
            continue
        seen = step_of(line) if out else None
        if seen and seen[0] is not None:
            out[-1][2].setdefault(seen[1], seen[0] - out[-1][1])
    return [(token, steps) for token, _, steps in out]


def main(work):
    per_way = {}
    for path in sorted(glob.glob(os.path.join(work, "restore-*-node*.log"))):
        if "-source-" in path:
            continue
        node = re.search(r"node(\d+)\.log$", path).group(1)
        for token, steps in rounds(path):
            way = token.rsplit("-", 1)[0]
            per_way.setdefault(way, {}).setdefault(token, {})[node] = steps
    for way, tokens in per_way.items():
        print(f"{way}: seconds from the start")
        print("  " + " ".join(f"{s:>12}" for s in ["round/node"] + ORDER))
        gathered, rows = {}, 0
        for token, nodes in tokens.items():
            for node, steps in sorted(nodes.items()):
                cells = [f"{steps[s]:12.2f}" if s in steps else f"{'-':>12}" for s in ORDER]
                print("  " + f"{token.rsplit('-', 1)[1] + '/' + node:>12} " + " ".join(cells))
                rows += 1
                for s, t in steps.items():
                    gathered.setdefault(s, []).append(t)
        # Only of a step every row shows: a median of the rows that happen to show it says nothing.
        print("  " + f"{'median':>12} " + " ".join(
            f"{statistics.median(gathered[s]):12.2f}" if len(gathered.get(s, [])) == rows else f"{'-':>12}"
            for s in ORDER))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
