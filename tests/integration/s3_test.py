"""Issue 4, `s3` provider and S3 buckets, against a real S3 server (s3rver from npm) on 127.0.0.1:
- 3 nodes at once with provider=s3 (listing pages of 2 keys) form one cluster with predicted IDs;
- 6 processes race for 5 seats, 20 rounds: never two different sealed sets (s3rver has no
  conditional PUT, so some rounds may wait as ambiguous, which is the safe answer);
- cluster-init seals a bucket in S3; nodes started with only --bucket s3://... bootstrap from it;
- a wrong bucket, wrong credentials and a server that is down are clear errors that write nothing."""
import json
import os

from harness import (QUORATE, Cluster, check, free_port, log, main, require, run, skip, spawn, wait_listening,
                     wait_until)


def test():
    require("etcd")
    require("etcdctl")
    s3rver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s3", "node_modules", ".bin", "s3rver")
    if not os.path.exists(s3rver):
        skip("s3rver is not installed in tests/s3 (scripts/deps installs it from npm)")
    c = Cluster(3)
    port = free_port()
    os.makedirs(os.path.join(c.dir, "s3"))
    spawn([s3rver, "-d", os.path.join(c.dir, "s3"), "-a", "127.0.0.1", "-p", str(port), "--silent",
           "--configure-bucket", "quorate"], os.path.join(c.dir, "s3rver.log"),
          # s3rver 3.7 makes continuation tokens with a cipher OpenSSL 3 only has in its legacy provider.
          env=dict(os.environ, NODE_OPTIONS="--openssl-legacy-provider"))
    endpoint = f"http://127.0.0.1:{port}"

    wait_listening(port, "s3rver")
    os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")

    c.discovery = ["--discovery", f"provider=s3 bucket=quorate prefix=boot endpoint={endpoint} page_size=2",
                   "--cluster-size", "3"]
    c.bootstrap(c.discover_as_first, "s3 provider")

    racers = Cluster(6)
    sealed_rounds = 0
    discovery = ["--discovery", f"provider=s3 bucket=quorate endpoint={endpoint}"]
    for r, sets, failed in racers.race(5, lambda r: discovery[:1] + [discovery[1] + f" prefix=race{r}"], 20):
        check(len(sets) <= 1, f"round {r}: {len(sets)} different sealed sets: {sets}")
        if sets:
            sealed_rounds += 1
            check(len(sets[0]) == 5, f"round {r}: sealed {sets}")
        else:
            # Waiting is the safe answer: as ambiguous, as the extra node, or out of time when s3rver
            # (one node.js process) answers a loaded machine's listing too late for --timeout.
            check(all("ambiguous" in e or "extra" in e or "is the store up?" in e or "timed out" in e for e in failed),
                  f"round {r}: nobody sealed: {failed}")
    log(f"20 rounds of 6 racing for 5 on s3rver: never two sets; {sealed_rounds} sealed, the rest waited as ambiguous")

    late = Cluster(3)
    bucket = f"s3://quorate/sealed?endpoint={endpoint}"
    r = run([QUORATE, "cluster-init", "-w", "json", "--initial-cluster", late.initial_cluster(),
             "--initial-cluster-token", late.token, "--bucket", bucket], check_rc=0)
    predicted = json.loads(r.stdout)
    late.discovery = ["--bucket", bucket]
    late.start_all(lambda n, d: n.init_and_start(d))
    wait_until(lambda: late.all_started(), 60, "nodes started from the S3 bucket")
    late.check_prediction(predicted)
    late.stop_all()

    def bad(argv, mention, rc):
        before = sorted(os.listdir(os.path.join(c.dir, "s3")))
        res = run([QUORATE] + argv)
        lines = [x for x in res.stderr.splitlines() if x.strip() and "error" in x]
        check(res.returncode == rc and lines and mention in lines[-1],
              f"{' '.join(argv)}: rc {res.returncode}, stderr {res.stderr}")
        check(sorted(os.listdir(os.path.join(c.dir, "s3"))) == before, "an error wrote to the store")
        log(f"exit {rc}: {lines[-1]}")
    ic = ["--initial-cluster", late.initial_cluster(), "--initial-cluster-token", "other"]
    bad(["cluster-init", "--bucket", f"s3://nosuchbucket/x?endpoint={endpoint}"] + ic, "NoSuchBucket", 2)
    # s3rver checks the access key, not the signature: AWS's published vectors check that (s3_test.cc).
    os.environ["AWS_ACCESS_KEY_ID"] = "nobody"
    bad(["cluster-init", "--bucket", f"s3://quorate/x?endpoint={endpoint}"] + ic, "credentials", 2)
    os.environ["AWS_ACCESS_KEY_ID"] = "S3RVER"
    bad(["cluster-init", "--bucket", f"s3://quorate/x?endpoint=http://127.0.0.1:{free_port()}&timeout=1s"] + ic,
        "failed 3 times", 1)


if __name__ == "__main__":
    main(test)
