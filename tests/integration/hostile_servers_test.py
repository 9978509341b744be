"""Issue 15, item 4 (and the deep JSON of item 3): `--timeout` is a deadline for every network read,
every body has a size cap and every paging loop a page cap, whatever a server does.

Each case runs quorate with `--timeout 4s` against one hostile behaviour of tests/hostile/ and
asserts that it ends within --timeout + 2 s, exits 1 with one error line naming the server and what
was wrong, stays small (peak RSS, from wait4, under 100 MB) and writes nothing:
- the etcd peer probe (`quorate init` on a 2-node static cluster whose other peer URL is the hostile
  server): a /members body dribbled a byte every 0.3 s, headers dribbled, an endless chunked body, a
  body of 10 GB (said and sent);
- the k8s provider (`quorate discover` against an https API server): a list that hands out a new
  continue token on every page, and a PodList nested 60,000 levels deep (which crashed quorate);
- the s3 provider (`quorate discover` with endpoint= at the server): a listing that hands out a new
  continuation token on every page, and a listing served a byte every 0.3 s;
- issue 28 §5: a k8s continue token and an S3 continuation token holding CR LF (and NUL) are refused
  before use, and no smuggled request reaches the server;
- the S3 backup store (`quorate backup list | verify` with --backup-timeout 4s): an endless
  listing, metadata nested 30,000 levels deep, a 10 GB object and an object served a byte every 0.3 s.
Before the fix the dribbles, the endless lists and the slow listing kept quorate running 35 s and
more, the endless body grew it past 6 GB, and the deep JSON killed it with SIGSEGV.
"""
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hostile"))

import harness  # noqa: E402
from harness import QUORATE, Cluster, check, log, main, run  # noqa: E402
from hostile_http import (Answer, DribbleBody, DribbleHeaders, EndlessChunks, HostileHttp, HugeBody,  # noqa: E402
                          deep_json, endless_k8s_list, endless_s3_listing, k8s_list_continuing,
                          s3_listing_continuing, smuggled)

TIMEOUT_S = 4
GRACE_S = 2
MAX_RSS_MB = 100
MEMBERS = b'[{"id":1,"name":"n2","peerURLs":["http://127.0.0.2:2380"]}]'


def measured(argv, cwd, env=None):
    """(exit code, seconds, peak RSS in MB, stderr) of argv, killed if it outlives the grace by far."""
    err_path = os.path.join(cwd, "..", os.path.basename(cwd) + ".stderr")
    with open(err_path, "w") as err:
        start = time.monotonic()
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=err, start_new_session=True)
        harness._track(p)
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > TIMEOUT_S + GRACE_S + 30:
                os.killpg(p.pid, signal.SIGKILL)
            time.sleep(0.02)
        seconds = time.monotonic() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(err_path) as f:
        stderr = f.read()
    return p.returncode, seconds, usage.ru_maxrss / 1024, stderr


def check_bounded(what, argv, server, says, cwd, env=None, written=None):
    rc, seconds, rss, stderr = measured(argv, cwd, env)
    errors = [line for line in stderr.splitlines() if line.startswith("quorate: error: ")]
    log(f"{what}: exit {rc} after {seconds:.1f}s, peak RSS {rss:.0f} MB: {errors[-1] if errors else stderr[-300:]}")
    check(seconds < TIMEOUT_S + GRACE_S, f"{what}: ran {seconds:.1f}s with --timeout {TIMEOUT_S}s")
    check(rc == 1, f"{what}: exited {rc}, wanted 1\n{stderr[-2000:]}")
    check(len(errors) == 1, f"{what}: wanted one error line, got {errors}")
    error = errors[0] if errors else ""
    check(server in error, f"{what}: the error does not name {server}: {error}")
    check(says in error, f"{what}: the error does not say '{says}': {error}")
    check(rss < MAX_RSS_MB, f"{what}: peak RSS {rss:.0f} MB")
    check(os.listdir(cwd) == [], f"{what}: wrote {os.listdir(cwd)} in its working directory")
    if written:
        check(not os.path.exists(written) or os.listdir(written) == [], f"{what}: wrote {written}")


_cases = itertools.count()


def workdir(base, kind):
    """An empty directory of its own for each run: quorate runs there, and must leave it empty."""
    path = os.path.join(base, f"{kind}-{next(_cases)}")
    os.makedirs(path)
    return path


def peer_probe(base):
    """n1's init probes n2's peer URL, which the hostile server holds."""
    for name, behaviour, says in [
        ("a /members body dribbled a byte every 0.3 s",
         DribbleBody(200, MEMBERS, {"X-Etcd-Cluster-Id": "2a"}), "not whole within"),
        ("/members headers dribbled a byte every 0.3 s", DribbleHeaders(), "not whole within"),
        ("an endless chunked /members body", EndlessChunks(headers={"X-Etcd-Cluster-Id": "2a"}), "larger than"),
        ("a 10 GB /members body", HugeBody(headers={"X-Etcd-Cluster-Id": "2a"}), "would be 10000000000"),
    ]:
        c = Cluster(2, timeout=f"{TIMEOUT_S}s")
        n1, n2 = c.nodes
        server = HostileHttp(n2.ip, 2380)
        server.behave(behaviour)
        try:
            check_bounded(f"peer probe, {name}", [QUORATE, "init"] + n1.args(), f"{n2.peer_url}/members", says,
                          workdir(base, "peer"), written=n1.data_dir)
        finally:
            server.stop()


def tls_files(base):
    """A self-signed certificate for 127.0.0.1, which is also the CA that trusts it."""
    crt, key = os.path.join(base, "server.crt"), os.path.join(base, "server.key")
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"], check_rc=0)
    return crt, key


def kubernetes(base):
    crt, key = tls_files(base)
    token = os.path.join(base, "token")
    with open(token, "w") as f:
        f.write("hostile\n")
    for name, behaviour, says in [
        ("a pod list with a new continue token on every page", endless_k8s_list(), "pages"),
        ("a pod list nested 60,000 levels deep", Answer(200, deep_json()), "nested deeper than 64 levels"),
        ("a pod list whose continue token holds CR LF and NUL", k8s_list_continuing(), "continue token ("),
    ]:
        server = HostileHttp(tls=(crt, key))
        server.behave(behaviour)
        spec = (f"provider=k8s service=etcd namespace=db label_selector=app=etcd api_server={server.url} "
                f"token_file={token} ca_file={crt}")
        try:
            check_bounded(f"k8s, {name}",
                          [QUORATE, "discover", "--cluster-size", "3", "--timeout", f"{TIMEOUT_S}s", "--discovery", spec],
                          server.url, says, workdir(base, "k8s"))
            check(smuggled(server) == [], f"k8s, {name}: a smuggled request reached the server: {smuggled(server)}")
        finally:
            server.stop()


def s3(base):
    env = dict(os.environ, AWS_ACCESS_KEY_ID="hostile", AWS_SECRET_ACCESS_KEY="hostile")
    listing = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>false</IsTruncated>'
               "</ListBucketResult>")
    for name, behaviour, says in [
        ("a listing with a new continuation token on every page", endless_s3_listing(), "continuation token"),
        ("a listing served a byte every 0.3 s", DribbleBody(200, listing), "not whole within"),
        ("a listing whose continuation token holds CR LF", s3_listing_continuing(), "NextContinuationToken ("),
    ]:
        server = HostileHttp()
        # Registering and looking for a sealed set go through; the listing of registrations is hostile.
        server.behave(Answer(404, b"", content_type="application/xml"))
        server.behave(Answer(200, b""), method="PUT")
        server.behave(behaviour, path="/quorate", method="GET")
        spec = f"provider=s3 bucket=quorate prefix=boot endpoint={server.url}"
        try:
            check_bounded(f"s3, {name}",
                          [QUORATE, "discover", "--name", "n1", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                           "--cluster-size", "3", "--timeout", f"{TIMEOUT_S}s", "--discovery", spec],
                          f"127.0.0.1:{server.port}", says, workdir(base, "s3"), env=env)
            check(smuggled(server) == [], f"s3, {name}: a smuggled request reached the server: {smuggled(server)}")
        finally:
            server.stop()


def backup_store(base):
    """The S3 backup store's reads (issue 12): `backup list` and `backup verify` with --backup-timeout
    as the budget; the metadata or the object (read in ranged GETs) is hostile."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID="hostile", AWS_SECRET_ACCESS_KEY="hostile")
    folder = "/quorate/p/backups/etcd/main/2026-11-23T00%3A00%3A00Z"
    meta = (b'{"etcdVersion":"3.4.23","quorate":{"format":1,"object":"etcd.backup.gz","compression":"gzip",'
            b'"encryption":"none","keyID":"","sha256":"00","dbBytes":1}}')
    for name, command, hostile_path, behaviour, says in [
        ("a backup listing with a new continuation token on every page", "list", "/quorate",
         endless_s3_listing(), "continuation token"),
        ("backup metadata nested 30,000 levels deep", "verify", folder + "/_etcd_backup.meta",
         Answer(200, deep_json(levels=30000, around="%s")), "nested deeper than 64 levels"),
        ("a backup object of 10 GB", "verify", folder + "/etcd.backup.gz", HugeBody(), "10000000000"),
        ("a backup object served a byte every 0.3 s", "verify", folder + "/etcd.backup.gz",
         DribbleBody(206, b"\x1f\x8b" * 1000), "not whole within"),
    ]:
        server = HostileHttp()
        server.behave(Answer(200, meta, content_type="application/json"), path=folder + "/_etcd_backup.meta")
        server.behave(behaviour, path=hostile_path, method="GET")
        store = f"s3://quorate/p?endpoint={server.url}"
        argv = [QUORATE, "backup", command, "--backup-timeout", f"{TIMEOUT_S}s"]
        if command == "list":
            argv += ["--backup-to", store]
        else:
            argv += [f"s3://quorate/p/backups/etcd/main/2026-11-23T00:00:00Z?endpoint={server.url}"]
        try:
            check_bounded(f"backup store, {name}", argv, f"127.0.0.1:{server.port}", says, workdir(base, "backup"),
                          env=env)
        finally:
            server.stop()


def test():
    harness.require("openssl")
    base = tempfile.mkdtemp(prefix="quorate-hostile-")
    harness._cleanups.append(lambda: shutil.rmtree(base, ignore_errors=True))
    peer_probe(base)
    kubernetes(base)
    s3(base)
    backup_store(base)


if __name__ == "__main__":
    main(test)
