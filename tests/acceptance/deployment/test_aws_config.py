"""One AWS configuration for everything: with credentials only in a named profile (as with
`aws configure`, SSO or `credential_process`), S3 works as well as Glue, and nothing asks
the instance metadata endpoint. Before, S3 went through object_store's own credential chain,
which ignores profiles: it fell through to the metadata endpoint and failed."""

import json
import os
import socket
import subprocess
import threading

import pyarrow as pa
from deltalake import write_deltalake

from acceptance.lakebase.test_lakebase import pg_rows
from rig import judge


class Listener:
    """A loopback port standing in for the instance metadata endpoint: counts who calls."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.calls = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.calls += 1
            conn.close()


def profile_only_env(tmp_path, moto_endpoint, metadata_url):
    credentials, config = tmp_path / "credentials", tmp_path / "config"
    credentials.write_text("[lake]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    config.write_text("[profile lake]\nregion = us-east-1\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                        "AWS_DEFAULT_REGION")}
    env.update({
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_CONFIG_FILE": str(config), "AWS_PROFILE": "lake",
        "AWS_ENDPOINT_URL": moto_endpoint, "AWS_EC2_METADATA_DISABLED": "true",
        # Should anything still ask for instance credentials, it asks here and is counted.
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata_url, "AWS_METADATA_ENDPOINT": metadata_url,
    })
    return env


def run(lakemirror_bin, env, *args):
    result = subprocess.run([str(lakemirror_bin), *map(str, args)], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_named_profile_is_enough_for_s3_glue_postgres_and_unity_catalog(
        bucket, glue_database, delta_storage_options, moto_endpoint, postgres_url, unity_schema, lakemirror_bin,
        tmp_path):
    uri = f"s3://{bucket}/lake/orders"
    write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64())}), storage_options=delta_storage_options)
    metadata = Listener()
    env = profile_only_env(tmp_path, moto_endpoint, metadata.url)

    mirrored = run(lakemirror_bin, env, "glue-sync", "--table-uri", uri, "--glue-database", glue_database)
    assert mirrored["action"] == "created"
    judge.assert_same_rows([(1,), (2,)], judge.iceberg_rows_pyiceberg(glue_database, "orders"))

    run(lakemirror_bin, env, "lakebase-sync", "--source-path", uri, "--target-table", "orders",
        "--postgres-url", postgres_url)
    assert sorted(pg_rows(postgres_url, '"public"."orders"', ["id"])) == [(1,), (2,)]

    registered = run(lakemirror_bin, env, "unity-register", "--table-uri", uri, "--catalog", unity_schema.catalog,
                     "--schema", unity_schema.schema, "--uc-url", unity_schema.url)
    assert registered["action"] == "created"

    assert metadata.calls == 0, "nothing asked the instance metadata endpoint"
