#!/usr/bin/env python3
"""The gce emulator's own checks and fault controls (tests/gce/emulator.py), then `quorate discover`
against each error answer it can give: the exit code, one line, and what the line names.
- the emulator: a bearer token is required and an expired one refused; a JWT signed by another key
  is refused (invalid_grant); the metadata server wants Metadata-Flavor: Google and says it; a filter
  it cannot parse is a 400; throttles, denials and unreachable zones have Google's shapes;
- quorate (QUORATE_BIN): throttles are waited out; a denied permission, an unreachable zone of the
  group, a garbage answer, a key the token endpoint refuses, a nextPageToken or access token with CR LF
  and an address no member has (0.0.0.0, 300.1.1.1) each end in exit 1 with one line naming
  it, no token shown; a missing key file is exit 2.
Binds 127.0.0.1 at a free port only; the metadata server quorate could ask is the emulator or a closed
port on 127.0.0.1."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import check, free_port  # noqa: E402 (the path above first)
PROJECT = "quorate-test"
ZONE = "us-central1-a"


def request(base, path, method="GET", body=None, headers=None):
    """(status, headers, body text)."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def new_key(workdir, name, token_uri):
    pem = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
                         check=True, capture_output=True, text=True).stdout
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        json.dump({"type": "service_account", "project_id": PROJECT, "private_key_id": name, "private_key": pem,
                   "client_email": f"etcd@{PROJECT}.iam.gserviceaccount.com", "token_uri": token_uri}, f)
    return path, pem


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main():
    if shutil.which("openssl") is None:
        print("skip: no openssl to make a service-account key")
        return 77
    workdir = tempfile.mkdtemp(prefix="quorate-gce-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    key_file, pem = new_key(workdir, "sa.json", f"{base}/token")
    other_key, _ = new_key(workdir, "other.json", f"{base}/token")
    emulator = subprocess.Popen([sys.executable, os.path.join(HERE, "emulator.py"), "--listen", f"127.0.0.1:{port}",
                                 "--project", PROJECT, "--key-file", key_file, "--token", "fixed"],
                                stdout=subprocess.PIPE, text=True)
    try:
        check("listening on" in emulator.stdout.readline(), "the emulator did not start")
        emulator_checks(base)
        if os.environ.get("QUORATE_BIN"):
            quorate_checks(base, port, workdir, key_file, other_key, pem)
    finally:
        emulator.kill()
        emulator.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    print("PASS")
    return 0


def emulator_checks(base):
    request(base, "/_emulator/migs", "POST", {"name": "etcd", "zone": ZONE, "target_size": 3})
    for i in range(1, 4):
        request(base, "/_emulator/instances", "POST", {"name": f"etcd-{i}", "zone": ZONE, "ip": f"127.0.0.{i}", "mig": "etcd"})
    status, _, body = request(base, "/_emulator/instances", "POST", {"name": "x", "zone": ZONE, "ip": "10.0.0.1"})
    check(status == 400, f"an address off loopback was taken: {status} {body}")
    listing = f"/compute/v1/projects/{PROJECT}/aggregated/instances?returnPartialSuccess=true"
    auth = {"Authorization": "Bearer fixed"}

    status, _, body = request(base, listing)
    check(status == 401 and json.loads(body)["error"]["status"] == "UNAUTHENTICATED", f"no token: {status} {body}")
    status, _, body = request(base, listing + "&filter=" + urllib.request.quote('labels.role ~ "x"'), headers=auth)
    check(status == 400 and json.loads(body)["error"]["errors"][0]["reason"] == "invalid", f"a bad filter: {body}")

    # A token handed out for a second, then refused once expired.
    request(base, "/_emulator/config", "POST", {"token_ttl": 1})
    status, headers, body = request(base, "/computeMetadata/v1/instance/service-accounts/default/token",
                                    headers={"Metadata-Flavor": "Google"})
    check(status == 200 and headers["Metadata-Flavor"] == "Google", f"the metadata token: {status} {body}")
    token = json.loads(body)
    check(token["expires_in"] == 1 and token["token_type"] == "Bearer", f"the metadata token: {token}")
    status, _, _ = request(base, listing, headers={"Authorization": f"Bearer {token['access_token']}"})
    check(status == 200, f"a fresh token refused: {status}")
    time.sleep(1.1)  # the token's whole life
    status, _, _ = request(base, listing, headers={"Authorization": f"Bearer {token['access_token']}"})
    check(status == 401, f"an expired token taken: {status}")
    request(base, "/_emulator/config", "POST", {"token_ttl": 3600})
    status, headers, body = request(base, "/computeMetadata/v1/project/project-id")
    check(status == 403 and headers["Metadata-Flavor"] == "Google", f"no Metadata-Flavor: {status} {body}")

    # The jwt-bearer grant: a JWT signed with a key the emulator does not know is refused.
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    now = int(time.time())
    claims = b64url(json.dumps({"iss": f"etcd@{PROJECT}.iam.gserviceaccount.com", "aud": f"{base}/token",
                                "scope": "https://www.googleapis.com/auth/compute.readonly", "iat": now,
                                "exp": now + 3600}).encode())
    form = f"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={header}.{claims}.{b64url(b'x' * 256)}"
    status, _, body = request(base, "/token", "POST", form.encode(),
                              {"Content-Type": "application/x-www-form-urlencoded"})
    check(status == 400 and json.loads(body)["error"] == "invalid_grant", f"a forged JWT: {status} {body}")

    # Fault controls in Google's shapes.
    request(base, "/_emulator/config", "POST", {"throttle": 1, "deny": ["compute.instanceGroupManagers.get"],
                                                "unreachables": [f"zones/{ZONE}"]})
    status, _, body = request(base, listing, headers=auth)
    error = json.loads(body)["error"]
    check(status == 429 and error["errors"][0]["reason"] == "rateLimitExceeded" and error["status"] == "RESOURCE_EXHAUSTED",
          f"a throttle: {status} {body}")
    status, _, body = request(base, listing, headers=auth)
    answer = json.loads(body)
    check(status == 200 and answer["unreachables"] == [f"zones/{ZONE}"] and f"zones/{ZONE}" not in answer["items"],
          f"an unreachable zone: {body}")
    check(answer["items"]["zones/us-central1-b"]["warning"]["code"] == "NO_RESULTS_ON_PAGE", f"no warning: {body}")
    status, _, body = request(base, f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/instanceGroupManagers/etcd", headers=auth)
    error = json.loads(body)["error"]
    check(status == 403 and error["status"] == "PERMISSION_DENIED" and "compute.instanceGroupManagers.get" in error["message"],
          f"a denial: {body}")
    request(base, "/_emulator/config", "POST", {"deny": [], "unreachables": []})
    log = json.loads(request(base, "/_emulator/requests")[2])
    check(any(e["status"] == 429 for e in log) and all("status" in e for e in log), "the request log")


def quorate_checks(base, port, workdir, key_file, other_key, pem):
    env = dict(os.environ, GCE_METADATA_HOST=f"127.0.0.1:{free_port()}")
    env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
    spec = f"provider=gce project_name={PROJECT} mig=etcd mig_zone={ZONE} endpoint={base} credentials_file="

    def discover(key, timeout="1s", rc=0):
        r = subprocess.run([os.environ["QUORATE_BIN"], "discover", "-w", "json", "--timeout", timeout, "--discovery",
                            spec + key], capture_output=True, text=True, env=env, timeout=60)
        check(r.returncode == rc, f"quorate discover exited {r.returncode}, wanted {rc}: {r.stdout} {r.stderr}")
        secret = pem.strip().splitlines()[5]
        check(secret not in r.stdout + r.stderr and "ya29." not in r.stdout + r.stderr, "a secret shows")
        if rc:
            check(len(r.stderr.strip().splitlines()) == 1, f"more than one line: {r.stderr}")
            print(f"exit {rc}: {r.stderr.strip()}")
        return r

    def configure(config):
        request(base, "/_emulator/config", "POST", config)

    configure({"throttle": 3, "max_page": 1})
    r = discover(key_file, timeout="20s")
    check(sorted(m["name"] for m in json.loads(r.stdout)["members"]) == ["etcd-1", "etcd-2", "etcd-3"],
          f"pages of 1 after 3 throttles: {r.stdout}")
    configure({"throttle": 3, "throttle_status": 403})
    discover(key_file, timeout="20s")
    # A regional group: regionInstanceGroupManagers.get, its instances in the region's zones.
    request(base, "/_emulator/migs", "POST", {"name": "etcd-r", "region": "us-central1", "target_size": 2})
    for i, zone in ((7, "us-central1-b"), (8, "us-central1-c")):
        request(base, "/_emulator/instances", "POST", {"name": f"etcd-r{i}", "zone": zone, "ip": f"127.0.0.{i}",
                                                       "mig": "etcd-r"})
    r = subprocess.run([os.environ["QUORATE_BIN"], "discover", "-w", "json", "--timeout", "5s", "--discovery",
                        f"provider=gce project_name={PROJECT} mig=etcd-r mig_region=us-central1 endpoint={base} "
                        f"credentials_file={key_file}"], capture_output=True, text=True, env=env, timeout=60)
    answer = json.loads(r.stdout) if r.returncode == 0 else {}
    check(sorted(m["name"] for m in answer.get("members", [])) == ["etcd-r7", "etcd-r8"] and answer["clusterSize"] == 2,
          f"a regional group: {r.stdout} {r.stderr}")
    for config, named in [({"deny": ["compute.instances.list"]}, "compute.instances.list"),
                          ({"deny": ["compute.instanceGroupManagers.get"]}, "compute.instanceGroupManagers.get"),
                          ({"unreachables": [f"zones/{ZONE}"]}, f"could not reach zones/{ZONE}"),
                          ({"fail": [{"path_prefix": f"/compute/v1/projects/{PROJECT}/aggregated", "status": 200,
                                      "body": "<html>captive portal</html>", "times": -1}]}, "not Compute Engine's")]:
        configure(config)
        r = discover(key_file, rc=1)
        check(named in r.stderr, f"the error does not name {named}: {r.stderr}")
        configure({"deny": [], "unreachables": [], "fail": []})
    # Hostile answers: a page token that would break the request line, an access token with CR LF
    # (never shown, not even its start: discover() checks), an address no member has.
    garbled = json.dumps({"access_token": "ya29.secret\r\nX-Smuggled: 1", "expires_in": 3600, "token_type": "Bearer"})
    crlf_page = json.dumps({"kind": "compute#instanceAggregatedList", "items": {}, "nextPageToken": "p2\r\nX: 1"})
    for config, named in [({"fail": [{"path_prefix": f"/compute/v1/projects/{PROJECT}/aggregated", "status": 200,
                                      "body": crlf_page, "times": -1}]}, "nextPageToken"),
                          ({"fail": [{"path_prefix": "/token", "status": 200, "body": garbled, "times": -1}]},
                           "access_token")]:
        configure(config)
        r = discover(key_file, rc=1)
        check(named in r.stderr, f"the error does not name {named}: {r.stderr}")
        configure({"fail": []})
    for ip in ("0.0.0.0", "300.1.1.1"):
        request(base, "/_emulator/instances", "POST", {"name": "etcd-9", "zone": ZONE, "ip": ip, "mig": "etcd"})
        r = discover(key_file, rc=1)
        check(ip in r.stderr, f"the address {ip} is not refused by name: {r.stderr}")
    request(base, "/_emulator/instances/etcd-9", "DELETE")
    # The emulator's unreachable zone outside the group's: not the group's concern.
    configure({"unreachables": ["zones/us-central1-c"]})
    discover(key_file)
    configure({"unreachables": []})
    r = discover(other_key, rc=1)
    check("invalid_grant" in r.stderr, f"a key the token endpoint refuses: {r.stderr}")
    r = discover(os.path.join(workdir, "missing.json"), rc=2)
    check("credentials_file" in r.stderr, f"a missing key file: {r.stderr}")


if __name__ == "__main__":
    sys.exit(main())
