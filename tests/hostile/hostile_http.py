"""A hostile HTTP server for tests: it answers the way a broken proxy, a compromised peer or a slow
attacker would, so that every client in quorate (peer probe, S3, Kubernetes and cloud APIs) can be
tried against it. Standard library only; plain sockets, so it can send what no HTTP library would.

    server = HostileHttp("127.0.0.2", 2380)       # or port 0 for a free one; server.url
    server = HostileHttp(tls=("srv.crt", "srv.key"))  # https; server.url says so
    server.behave(Answer(500, b"boom"))           # every request from now on gets this
    server.behave(Answer(200, body, {"X-Etcd-Cluster-Id": "2a"}), path="/members")
    server.behave(Answer(200), method="PUT")      # every PUT, whatever its path
    server.behave(Fresh(lambda n: f"page {n}"))   # a body made anew for the n-th request (0, 1, ...)
    server.behave(DribbleBody(200, b"[...]", every=0.3))
    server.behave(DribbleHeaders(every=0.3))
    server.behave(EndlessChunks())
    server.behave(HugeBody())                      # says 10 GB, and sends them
    server.behave(Silent())                        # accepts, reads, never answers
    server.behave(Close())                         # accepts and hangs up at once
    server.behave(k8s_list_continuing())           # a continue token with CR LF and NUL (s3_listing_continuing too)
    server.requests                                # [(method, path, headers)] seen so far
    server.stop()

Every behaviour ends by itself: dribbling and endless bodies stop after `limit` seconds (default 60)
or when the client goes away, so a test can never leave a server sending forever.
"""
import itertools
import json
import socket
import ssl
import threading
import time


class Answer:
    """A complete answer: status, body (bytes or str) and extra headers."""

    def __init__(self, status=200, body=b"", headers=None, content_type="application/json"):
        self.status = status
        self.body = body.encode() if isinstance(body, str) else body
        self.headers = dict(headers or {})
        self.content_type = content_type

    def send(self, conn, limit):
        head = _head(self.status, {"Content-Type": self.content_type, "Content-Length": str(len(self.body)),
                                   **self.headers})
        conn.sendall(head + self.body)


class Fresh(Answer):
    """A complete answer whose body `make(n)` makes for the n-th request it serves: a list that hands
    out a new continuation token on every page, say."""

    def __init__(self, make, status=200, headers=None, content_type="application/json"):
        super().__init__(status, b"", headers, content_type)
        self.make = make
        self._served = itertools.count()

    def send(self, conn, limit):
        body = self.make(next(self._served))
        Answer(self.status, body, self.headers, self.content_type).send(conn, limit)


def endless_k8s_list(kind="PodList"):
    """A Kubernetes list with no items and a new `continue` token on every page."""
    return Fresh(lambda n: json.dumps({"kind": kind, "apiVersion": "v1", "metadata": {"continue": f"token-{n}"},
                                       "items": []}))


def endless_s3_listing():
    """An S3 ListObjectsV2 page with no keys, truncated, with a new continuation token every time."""
    return Fresh(lambda n: ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>true</IsTruncated>'
                            f"<NextContinuationToken>token-{n}</NextContinuationToken></ListBucketResult>"),
                 content_type="application/xml")


SMUGGLED = "x\r\nX-Smuggled: 1\r\n\r\nGET /steal HTTP/1.1\r\nHost: evil\r\n\0"


def k8s_list_continuing(token=SMUGGLED, kind="PodList"):
    """A Kubernetes list with no items whose `continue` token is `token`: by default CR LF, a second
    request and a NUL, what a compromised API server would hand back to be sent on."""
    return Answer(200, json.dumps({"kind": kind, "apiVersion": "v1", "metadata": {"continue": token}, "items": []}))


def s3_listing_continuing(token=SMUGGLED, keys=()):
    """An S3 ListObjectsV2 page, truncated, whose NextContinuationToken is `token` (CR LF and all, as
    XML character references; XML 1.0 has no NUL, so it is left out) and whose keys are `keys`."""
    def escaped(text):
        return "".join(f"&#{ord(ch)};" if ord(ch) < 0x20 else ch for ch in text.replace("\0", ""))
    contents = "".join(f"<Contents><Key>{escaped(k)}</Key><Size>1</Size></Contents>" for k in keys)
    return Answer(200, '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>true</IsTruncated>'
                  f"<NextContinuationToken>{escaped(token)}</NextContinuationToken>{contents}</ListBucketResult>",
                  content_type="application/xml")


def smuggled(server):
    """The requests `server` saw that the smuggling answers above tried to make: none, unless broken."""
    return [r for r in server.requests if r[1].startswith("/steal") or "x-smuggled" in r[2]]


def deep_json(levels=60000, around='{"kind":"PodList","apiVersion":"v1","items":%s}'):
    """`levels` nested lists (2 bytes each) inside `around`: what crashed a recursive JSON copy."""
    return around % ("[" * levels + "]" * levels)


class DribbleBody(Answer):
    """Headers at once, then the body one byte every `every` seconds."""

    def __init__(self, status=200, body=b"", headers=None, every=0.3):
        super().__init__(status, body, headers)
        self.every = every

    def send(self, conn, limit):
        conn.sendall(_head(self.status, {"Content-Length": str(len(self.body)), **self.headers}))
        _dribble(conn, self.body, self.every, limit)


class DribbleHeaders:
    """The status line and headers one byte every `every` seconds, never finished."""

    def __init__(self, every=0.3):
        self.every = every

    def send(self, conn, limit):
        _dribble(conn, b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 100000, self.every, limit)


class EndlessChunks:
    """A chunked body that never ends, `chunk` bytes at a time, as fast as the client reads."""

    def __init__(self, chunk=65536, status=200, headers=None):
        self.chunk = chunk
        self.status = status
        self.headers = dict(headers or {})

    def send(self, conn, limit):
        conn.sendall(_head(self.status, {"Transfer-Encoding": "chunked", **self.headers}))
        piece = b"%x\r\n" % self.chunk + b"[" * self.chunk + b"\r\n"
        end = time.monotonic() + limit
        while time.monotonic() < end:
            conn.sendall(piece)


class HugeBody:
    """A body that says it is `size` bytes (10 GB by default) and is sent, as fast as the client
    reads, until the client or `limit` stops it."""

    def __init__(self, size=10 * 10**9, chunk=65536, status=200, headers=None):
        self.size = size
        self.chunk = chunk
        self.status = status
        self.headers = dict(headers or {})

    def send(self, conn, limit):
        conn.sendall(_head(self.status, {"Content-Length": str(self.size), **self.headers}))
        piece = b"[" * self.chunk
        end = time.monotonic() + limit
        while time.monotonic() < end:
            conn.sendall(piece)


class Silent:
    """Reads the request and never answers until the client gives up (or `limit`)."""

    def send(self, conn, limit):
        conn.settimeout(limit)
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass


class Close:
    """Hangs up without a word."""

    def send(self, conn, limit):
        pass


def _head(status, headers):
    lines = [f"HTTP/1.1 {status} Hostile"] + [f"{k}: {v}" for k, v in headers.items()] + ["Connection: close", "", ""]
    return "\r\n".join(lines).encode()


def _dribble(conn, data, every, limit):
    end = time.monotonic() + limit
    for i in range(len(data)):
        if time.monotonic() >= end:
            return
        conn.sendall(data[i:i + 1])
        time.sleep(every)


class HostileHttp:
    def __init__(self, host="127.0.0.1", port=0, limit=60.0, tls=None):
        self.limit = limit
        self._tls = None
        if tls:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        self.requests = []
        self._behaviours = {}
        self._default = Answer(404, b"not found")
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(64)
        self.host = host
        self.port = self._sock.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}"
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def behave(self, behaviour, path=None, method=None):
        """From now on, requests for `path` (every path when None) with `method` (every method when
        None) get `behaviour`; the most specific rule wins. Neither given: the only rule from now on."""
        with self._lock:
            if path is None and method is None:
                self._behaviours.clear()
                self._default = behaviour
            else:
                self._behaviours[(method, path)] = behaviour

    def stop(self):
        self._stopping = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def _serve(self):
        while not self._stopping:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            conn.settimeout(10)
            if self._tls:
                conn = self._tls.wrap_socket(conn, server_side=True)
            data = b""
            while b"\r\n\r\n" not in data and len(data) < 65536:
                got = conn.recv(4096)
                if not got:
                    return
                data += got
            head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            method, path = (head[0].split(" ") + ["", ""])[:2]
            headers = dict(line.split(":", 1) for line in head[1:] if ":" in line)
            with self._lock:
                self.requests.append((method, path, {k.strip().lower(): v.strip() for k, v in headers.items()}))
                bare = path.split("?", 1)[0]
                behaviour = next((self._behaviours[k] for k in ((method, bare), (None, bare), (method, None))
                                  if k in self._behaviours), self._default)
            conn.settimeout(None)
            behaviour.send(conn, self.limit)
        except OSError:
            pass  # the client went away: that is its right
        finally:
            conn.close()
