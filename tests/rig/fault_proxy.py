"""A fault-injecting HTTP proxy in front of the local S3/Glue (moto): a share of requests gets
an injected fault instead of (or after) the real answer.

Faults: `500` (InternalError), `503` (SlowDown / ServiceUnavailable), `throttle` (Glue's
ThrottlingException, S3's SlowDown), `reset` (the connection closes before the request reaches
moto), `reset-after` (moto executes the request, the answer is lost: the nasty case for
non-idempotent calls), `slow` (the answer comes 300 ms late). The seed makes a run repeatable
for a given request order. `glue_burst` lists faults the next Glue requests get, in order,
before the random ones: a burst of throttling is how Glue answers a busy account. `stall`
holds every request whose path contains it for `stall_seconds` before forwarding it: a
table on a slow (or hung) storage path."""

import http.client
import random
import socket
import threading
import time
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULTS = ("500", "503", "throttle", "reset", "reset-after", "slow")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate"}


class FaultProxy:
    def __init__(self, upstream: str, rate: float = 0.1, seed: int = 0, glue_burst=(), stall=None,
                 stall_seconds: float = 60):
        self.upstream = urlsplit(upstream)
        self.stall, self.stall_seconds = stall, stall_seconds
        self.rate = rate
        self.glue_burst = deque(glue_burst)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.injected: Counter = Counter()
        self.requests = 0
        # (method, path with query) of every request, in arrival order.
        self.seen: list[tuple[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                glue = "X-Amz-Target" in self.headers
                with proxy.lock:
                    proxy.seen.append((self.command, self.path))
                if proxy.stall and proxy.stall in self.path:
                    time.sleep(proxy.stall_seconds)  # an injected hang, not synchronisation
                fault = proxy.choose(glue)
                if fault == "reset":
                    self.drop()
                    return
                if fault in ("500", "503", "throttle"):
                    self.reply(*error_answer(fault, glue))
                    return
                status, headers, answer = proxy.forward(self.command, self.path, self.headers, body)
                if fault == "reset-after":
                    self.drop()
                    return
                if fault == "slow":
                    time.sleep(0.3)  # an injected delay, not synchronisation
                self.reply(status, headers, answer)

            def drop(self):
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def reply(self, status, headers, answer):
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(answer)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def choose(self, glue: bool) -> str | None:
        with self.lock:
            self.requests += 1
            if glue and self.glue_burst:
                fault = self.glue_burst.popleft()
                self.injected[fault] += 1
                return fault
            if self.rng.random() >= self.rate:
                return None
            fault = self.rng.choice(FAULTS)
            self.injected[fault] += 1
            return fault

    def forward(self, method, path, headers, body):
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()


def error_answer(fault: str, glue: bool):
    if glue:
        kind, status = {"500": ("InternalServiceException", 500), "503": ("ServiceUnavailableException", 503),
                        "throttle": ("ThrottlingException", 400)}[fault]
        body = f'{{"__type":"{kind}","message":"injected by the test proxy"}}'.encode()
        return status, [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", kind)], body
    code, status = {"500": ("InternalError", 500), "503": ("SlowDown", 503), "throttle": ("SlowDown", 503)}[fault]
    body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
            f"<Message>injected by the test proxy</Message></Error>").encode()
    return status, [("Content-Type", "application/xml")], body
