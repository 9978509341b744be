"""A small IMDSv2 for the aws tests: moto's IMDS hands out a token but never checks it, and its
instance ID is not one of moto's instances. This one, per instance:
- PUT /latest/api/token (with the TTL header, as IMDSv2 requires) gives a session token;
- every GET without a token it gave is refused with 401, as an instance with IMDSv1 turned off does;
- it serves the instance's ID, its region, the instance identity document, and the role's
  credentials, a new set at each fetch, each expiring within the 5 minutes before which AWS's SDKs
  (and quorate) fetch the next: so a node running for seconds rotates them as one running for hours
  does."""
import datetime
import http.server
import json
import secrets
import threading


class Imds:
    def __init__(self, instance_id, region="us-east-1", role="etcd-role"):
        self.instance_id, self.region, self.role = instance_id, region, role
        self.tokens = set()
        self.refused = 0          # GETs without a valid session token
        self.credential_sets = []  # the access key IDs handed out, in order
        self.lock = threading.Lock()
        imds = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body=b"", kind="text/plain"):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self):
                if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self.answer(400)
                token = secrets.token_urlsafe(24)
                with imds.lock:
                    imds.tokens.add(token)
                self.answer(200, token.encode())

            def do_GET(self):
                with imds.lock:
                    if self.headers.get("X-aws-ec2-metadata-token") not in imds.tokens:
                        imds.refused += 1
                        return self.answer(401)
                body = imds.serve(self.path)
                if body is None:
                    return self.answer(404)
                self.answer(200, body.encode(), "application/json" if body.startswith("{") else "text/plain")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self, path):
        if path == "/latest/meta-data/instance-id":
            return self.instance_id
        if path == "/latest/meta-data/placement/region":
            return self.region
        if path == "/latest/dynamic/instance-identity/document":
            return json.dumps({"instanceId": self.instance_id, "region": self.region})
        if path == "/latest/meta-data/iam/security-credentials/":
            return self.role
        if path == f"/latest/meta-data/iam/security-credentials/{self.role}":
            with self.lock:
                key = f"ASIA{len(self.credential_sets) + 1:04d}{self.instance_id[-6:].upper()}"
                self.credential_sets.append(key)
            expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=4)
            return json.dumps({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": key,
                               "SecretAccessKey": secrets.token_urlsafe(30), "Token": secrets.token_urlsafe(60),
                               "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")})
        return None

    def close(self):
        self.server.shutdown()
