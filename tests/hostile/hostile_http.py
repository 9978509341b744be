"""A hostile HTTP server for tests: it answers the way a broken proxy, a compromised peer or a slow
attacker would, so that every client in quorate (peer probe, S3, Kubernetes and cloud APIs) can be
tried against it. Standard library only; plain sockets, so it can send what no HTTP library would.

    server = HostileHttp("127.0.0.2", 2380)       # or port 0 for a free one; server.url
    server.behave(Answer(500, b"boom"))           # every request from now on gets this
    server.behave(Answer(200, body, {"X-Etcd-Cluster-Id": "2a"}), path="/members")
    server.behave(DribbleBody(200, b"[...]", every=0.3))
    server.behave(DribbleHeaders(every=0.3))
    server.behave(EndlessChunks())
    server.behave(Silent())                        # accepts, reads, never answers
    server.behave(Close())                         # accepts and hangs up at once
    server.requests                                # [(method, path, headers)] seen so far
    server.stop()

Every behaviour ends by itself: dribbling and endless bodies stop after `limit` seconds (default 60)
or when the client goes away, so a test can never leave a server sending forever.
"""
import socket
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
    def __init__(self, host="127.0.0.1", port=0, limit=60.0):
        self.limit = limit
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
        self.url = f"http://{host}:{self.port}"
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def behave(self, behaviour, path=None):
        """From now on, requests for `path` (every path when None) get `behaviour`."""
        with self._lock:
            if path is None:
                self._behaviours.clear()
                self._default = behaviour
            else:
                self._behaviours[path] = behaviour

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
                behaviour = self._behaviours.get(path.split("?", 1)[0], self._default)
            conn.settimeout(None)
            behaviour.send(conn, self.limit)
        except OSError:
            pass  # the client went away: that is its right
        finally:
            conn.close()
