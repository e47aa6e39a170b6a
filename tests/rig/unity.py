"""A local Unity Catalog REST server for the tests: `uc-server` (crates.io olai-uc-server, a
Rust implementation of the UC REST API), installed and cached by tests/rig/uc-server.sh.

Where it differs from the official spec (../shared/specs/unitycatalog-all.yaml), lakemirror
follows the spec and copes with both; the README lists the differences."""

import os
import re
import subprocess
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import requests

from rig import local_aws

INSTALLER = Path(__file__).with_name("uc-server.sh")
START_TIMEOUT_S = 60
API = "/api/2.1/unity-catalog"


@dataclass
class UnityServer:
    url: str  # base URL, without /api/2.1/unity-catalog
    process: subprocess.Popen
    log: Path

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(method, f"{self.url}{API}{path}", timeout=30, **kwargs)

    def stop(self):
        local_aws.stop_process(self.process)


def binary() -> str:
    return subprocess.run(["bash", str(INSTALLER)], check=True, capture_output=True, text=True).stdout.strip()


# The server's default store is an in-memory SQLite database that lives in its one pooled
# connection. sqlx replaces a pooled connection 30 minutes after it opened (its default
# max_lifetime), and the new one opens an empty database without tables: from then on every
# request answers 500 "INTERNAL_ERROR". The session's server starts with an early
# deployment test and the Unity Catalog tests run last, past 30 minutes on a slow machine,
# so the tests keep the catalog in a SQLite file. A file database needs its own
# key-encryption key (any 32 bytes; these are not secret) and a `migrate` before `serve`.
TEST_KEK = "bGFrZW1pcnJvci10ZXN0cy1rZXktZW5jcnlwdGlvbiE="


def start(workdir: Path, config_yaml: str = "") -> UnityServer:
    """Starts uc-server on a free loopback port (port 0; it logs the one it bound) and waits
    for its `Listening on` line. `config_yaml` is added to its config file (e.g. an auth
    mode); the catalog is kept in a SQLite file in `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "uc-server.yaml"
    config.write_text(config_yaml + f"""backend:
  engine: sqlite
  path: {workdir / 'catalog.db'}
encryption:
  active:
    id: lakemirror-tests
    key: {TEST_KEK}
""")
    log = workdir / "uc-server.log"
    env = {**os.environ, "RUST_LOG": "info", "NO_COLOR": "1"}
    server = binary()
    migrated = subprocess.run([server, "migrate", "-c", str(config)], capture_output=True, text=True, env=env)
    if migrated.returncode != 0:
        raise RuntimeError(f"uc-server migrate failed:\n{migrated.stdout[-2000:]}{migrated.stderr[-2000:]}")
    process = subprocess.Popen([server, "serve", "-c", str(config), "--host", "127.0.0.1", "-p", "0", "--no-ui"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    listening = threading.Event()
    address: list[str] = []

    def drain():
        with open(log, "w") as out:
            for line in process.stdout:
                out.write(line)
                out.flush()
                if not listening.is_set() and (m := re.search(r"Listening on: (\S+)", line)):
                    address.append(m.group(1))
                    listening.set()
        listening.set()

    threading.Thread(target=drain, daemon=True).start()
    if not listening.wait(START_TIMEOUT_S) or not address:
        process.kill()
        raise RuntimeError(f"uc-server did not start; log:\n{log.read_text()[-3000:]}")
    return UnityServer(url=f"http://{address[0]}", process=process, log=log)


@dataclass
class UnitySchema:
    """A catalog and schema whose external location covers s3://<bucket>/."""
    server: UnityServer
    catalog: str
    schema: str

    @property
    def url(self) -> str:
        return self.server.url

    def table(self, name: str) -> dict | None:
        r = self.server.api("GET", f"/tables/{self.catalog}.{self.schema}.{name}")
        if r.status_code == 404:
            return None
        r.raise_for_status()
        return r.json()

    def tables(self) -> list[dict]:
        r = self.server.api("GET", "/tables", params={"catalog_name": self.catalog, "schema_name": self.schema})
        r.raise_for_status()
        return r.json().get("tables", [])


def schema_over_bucket(server: UnityServer, bucket: str) -> UnitySchema:
    """What a UC admin sets up before external tables can be registered: a storage
    credential, an external location over the bucket, a catalog and a schema."""
    tag = uuid.uuid4().hex[:10]
    steps = [
        ("/credentials", {"name": f"cred_{tag}", "purpose": "STORAGE",
                          "aws_iam_role": {"role_arn": "arn:aws:iam::123456789012:role/uc-test", "region": "us-east-1"}}),
        ("/external-locations", {"name": f"loc_{tag}", "url": f"s3://{bucket}/", "credential_name": f"cred_{tag}",
                                 "skip_validation": True}),
        ("/catalogs", {"name": f"cat_{tag}", "storage_root": f"s3://{bucket}/managed"}),
        ("/schemas", {"name": "gold", "catalog_name": f"cat_{tag}"}),
    ]
    for path, body in steps:
        r = server.api("POST", path, json=body)
        assert r.status_code == 200, \
            f"POST {path}: {r.status_code} {r.text}\n--- {server.log}:\n{server.log.read_text()[-3000:]}"
    return UnitySchema(server=server, catalog=f"cat_{tag}", schema="gold")
