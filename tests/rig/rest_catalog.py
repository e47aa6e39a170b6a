"""A local Iceberg REST catalog for the tests: `rustberg` (crates.io, Apache-2.0 OR MIT, an
Iceberg REST server on iceberg-rust with an embedded store), installed and cached outside the
clone by tests/rig/rustberg.sh, started on loopback with a file:// warehouse and an API key,
and stopped after. Also a loopback OAuth2 token endpoint (rustberg issues no tokens; it takes
its API key as a bearer token, so a token endpoint that hands out that key exercises the
client-credentials exchange, expiry and refresh end to end)."""

import json
import os
import re
import secrets
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import requests

from rig import local_aws

INSTALLER = Path(__file__).with_name("rustberg.sh")
START_TIMEOUT_S = 60


@dataclass
class RestServer:
    url: str  # base URL, without /v1
    key: str  # the API key, sent as a bearer token
    warehouse: Path  # tables live under it (the server refuses locations elsewhere)
    process: subprocess.Popen
    log: Path

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.key}", **kwargs.pop("headers", {})}
        return requests.request(method, f"{self.url}/v1{path}", headers=headers, timeout=30, **kwargs)

    def create_namespace(self, name: str) -> None:
        r = self.api("POST", "/namespaces", json={"namespace": [name], "properties": {}})
        assert r.status_code in (200, 201), r.text

    def catalog(self):
        """pyiceberg's RestCatalog on this server."""
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog("rest", uri=self.url, token=self.key)

    def env(self) -> dict[str, str]:
        """The settings that point lakemirror at this server."""
        return {"REST_CATALOG_URI": self.url, "REST_CATALOG_TOKEN": self.key}

    def stop(self):
        local_aws.stop_process(self.process)


def binary() -> str:
    return subprocess.run(["bash", str(INSTALLER)], check=True, capture_output=True, text=True).stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(workdir: Path) -> RestServer:
    """Starts rustberg on a loopback port and waits for the line it logs once it is bound."""
    workdir.mkdir(parents=True, exist_ok=True)
    warehouse = workdir / "lake"
    warehouse.mkdir(exist_ok=True)
    key = "rb_" + secrets.token_urlsafe(24).replace("-", "x")
    config = workdir / "rustberg.toml"
    config.write_text(f"""
[server.auth]
api_key_enabled = true

[[server.auth.api_keys]]
name = "lakemirror-tests"
tenant = "default"
roles = ["admin"]
key_env = "RUSTBERG_KEY_TESTS"

[storage]
catalog_url = "file://{workdir / 'catalog'}"
warehouse_location = "file://{warehouse}"
# Mirrors live in their Delta tables' folders, not where the catalog would put a new table.
location_scope = "warehouse"

[rate_limit]
enabled = false

[audit]
sink = "none"
""")
    (workdir / "catalog").mkdir(exist_ok=True)
    port = free_port()
    log = workdir / "rustberg.log"
    env = {**os.environ, "RUSTBERG_KEY_TESTS": key, "NO_COLOR": "1", "RUST_LOG": "info"}
    process = subprocess.Popen(
        [binary(), "--dev", "--insecure-http", "--host", "127.0.0.1", "--port", str(port), "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    started = threading.Event()

    def drain():
        with open(log, "w") as out:
            for line in process.stdout:
                out.write(line)
                out.flush()
                if re.search(r"Server starting at http://", line):
                    started.set()
        started.set()

    threading.Thread(target=drain, daemon=True).start()
    if not started.wait(START_TIMEOUT_S) or process.poll() is not None:
        process.kill()
        raise RuntimeError(f"rustberg did not start; log:\n{log.read_text()[-3000:]}")
    return RestServer(url=f"http://127.0.0.1:{port}", key=key, warehouse=warehouse, process=process, log=log)


def answer_json(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
    """Sends `data` (JSON) as the answer of a request `handler` serves."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def serve_on_loopback(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """An HTTP server on a free loopback port, serving `handler` in a thread of its own."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop_serving(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


@dataclass
class TokenEndpoint:
    """An OAuth2 client-credentials endpoint on loopback handing out `token` for `client_id`
    and `client_secret`, valid `expires_in` seconds; it counts the tokens it issued."""
    token: str
    client_id: str = "lakemirror"
    client_secret: str = field(default_factory=lambda: secrets.token_hex(8))
    expires_in: int = 3600
    issued: int = 0
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1/oauth/tokens"

    def start(self) -> "TokenEndpoint":
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
                ok = (form.get("grant_type") == ["client_credentials"]
                      and form.get("client_id") == [endpoint.client_id]
                      and form.get("client_secret") == [endpoint.client_secret])
                if ok:
                    endpoint.issued += 1
                    body = {"access_token": endpoint.token, "token_type": "bearer", "expires_in": endpoint.expires_in}
                else:
                    body = {"error": "invalid_client"}
                answer_json(self, 200 if ok else 401, json.dumps(body).encode())

            def log_message(self, *args):
                pass

        self.server = serve_on_loopback(Handler)
        return self

    def stop(self):
        stop_serving(self.server)
