"""One table's bad bytes fail that table alone (issue 43). Each test is what the writer of
table A (who may write anything in A's folder, `_lakemirror/` included) would try; A fails
with a reason, the table beside it in the same SQS batch syncs, and no process panics or
grows past the function's memory (peak RSS of the lakemirror process itself, measured by
/usr/bin/time and printed)."""

import json
import os
import subprocess
from pathlib import Path

import boto3
import psycopg
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from acceptance.glue_sync.test_hostile_input import METADATA, PROTOCOL, HandWrittenTable
from acceptance.glue_sync.test_invoke import moto_style_s3_record, sqs_record
from acceptance.lakebase.test_lakebase import pg_rows
from acceptance.lakebase.test_lakebase_function import config, invoke
from rig import judge
from rig.postgres import PASSWORD

# The memory of the function under attack, as the deployed one is told it (MEMORY_SIZE, MB):
# it reads at most a quarter of it (32 MB) into memory at once.
MEMORY_MB = 128


def table(bucket, name, first_id):
    t = HandWrittenTable(bucket, f"warehouse/team_a/{name}")
    t.commit(0, [PROTOCOL, METADATA, t.add("own.parquet", [first_id])])
    return t


def batch(tmp_path, bucket, versions):
    """An SQS batch announcing each `(table, version)`, one message per table, by its name."""
    event = tmp_path / "batch.json"
    event.write_text(json.dumps({"Records": [
        sqs_record(t.prefix.rsplit("/", 1)[-1], json.dumps({"Records": [moto_style_s3_record(
            bucket, f"{t.prefix}/_delta_log/{v:020}.json")]})) for t, v in versions]}))
    return event


def invoke_measured(lakemirror_bin, tmp_path, *args, env=None):
    """`lakemirror *args` under /usr/bin/time: (returncode, stdout, stderr, peak RSS in MB)."""
    rss = tmp_path / "rss"
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(rss), str(lakemirror_bin), *map(str, args)],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600)
    peak_mb = int(rss.read_text().strip().splitlines()[-1]) / 1024
    print(f"peak RSS of lakemirror {args[0]} {args[1]}: {peak_mb:.0f} MB (MEMORY_SIZE {MEMORY_MB})")
    return proc.returncode, proc.stdout, proc.stderr, peak_mb


def last_json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def metadata_location(glue_database, name):
    return boto3.client("glue").get_table(DatabaseName=glue_database, Name=name)["Table"]["Parameters"][
        "metadata_location"]


@pytest.mark.parametrize("planted", ["glue-target.json", "current metadata", "deletion vector array",
                                     "stats array"])
def test_bytes_planted_by_a_tables_writer_fail_that_table_alone_within_memory(
        planted, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    for t in (a, b):
        lakemirror("glue-sync", "--table-uri", t.uri, "--glue-database", glue_database)
    before = metadata_location(glue_database, "a")
    s3 = boto3.client("s3")
    padding = 40 * 1024 * 1024  # past the 32 MB a 128 MB function reads at once
    env = {"MEMORY_SIZE": str(MEMORY_MB)}
    if planted == "glue-target.json":
        # Read only where a table's properties may choose its target: with an allowlist.
        env["ALLOWED_GLUE_DATABASES"] = "lm_.*"
        a.put("_lakemirror/iceberg/glue-target.json", "{" + " " * padding + "}")
        a.commit(1, [a.add("second.parquet", [101])])
        wanted = "_lakemirror/iceberg/glue-target.json is"
    elif planted == "current metadata":
        key = before.split(f"s3://{bucket}/", 1)[1]
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        s3.put_object(Bucket=bucket, Key=key, Body=body + b" " * padding)
        a.commit(1, [a.add("second.parquet", [101])])
        wanted = f"{before} is"
    elif planted == "deletion vector array":
        # 25 MB, under the 32 MB bound: a remove whose deletionVector is a long array.
        a.commit(1, text=json.dumps({"remove": {"path": "own.parquet", "deletionTimestamp": 1, "dataChange": True,
                                                "deletionVector": [0] * 8_000_000}}) + "\n")
        wanted = "not a Delta action"
    else:
        action = a.add("second.parquet", [101])
        action["add"]["stats"] = json.dumps([0] * 8_000_000)
        a.commit(1, [action])
        wanted = None  # stats too long to be read: the file is mirrored without them
    b.commit(1, [b.add("second.parquet", [201])])

    code, stdout, stderr, peak_mb = invoke_measured(
        lakemirror_bin, tmp_path, "invoke", "glue-sync", "--event", batch(tmp_path, bucket, [(a, 1), (b, 1)]),
        "--glue-database", glue_database, env=env)
    assert code == 0 and "panicked" not in stderr, stderr[-3000:]
    assert peak_mb < MEMORY_MB, f"{peak_mb:.0f} MB at MEMORY_SIZE={MEMORY_MB}"
    judge.assert_same_rows([(200,), (201,)], judge.iceberg_rows_pyiceberg(glue_database, "b"))
    failures = [f["itemIdentifier"] for f in last_json(stdout)["batchItemFailures"]]
    if wanted is None:
        assert failures == [], stderr[-3000:]
        return
    assert wanted in stderr, stderr[-3000:]
    assert metadata_location(glue_database, "a") == before, "A's mirror stays where it was"


def test_a_log_stating_a_larger_file_fails_that_table_alone_in_the_reverse_sync(
        bucket, postgres_url, function_postgres_env, lakemirror, tmp_path):
    """A's writer states `add.size` 10 bytes past the file's end: the reverse sync panicked
    cutting the footer out of the bytes read, and the process (table B with it) ended."""
    secret_arn = boto3.client("secretsmanager").create_secret(
        Name=f"lakebase-bad-bytes-{bucket}", SecretString=PASSWORD)["ARN"]
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    action = a.add("second.parquet", [101])
    action["add"]["size"] += 10
    a.commit(1, [action])
    b.commit(1, [b.add("second.parquet", [201])])
    announce = lambda t: sqs_record(t.prefix.rsplit("/", 1)[-1], json.dumps(
        {"Records": [moto_style_s3_record(bucket, f"{t.prefix}/_delta_log/{1:020}.json")]}))
    result = invoke(lakemirror, tmp_path, {"Records": [announce(a), announce(b)]},
                    config((a.uri, "app.a", "1 hour"), (b.uri, "app.b", "1 hour")), function_postgres_env,
                    secret_arn, check=False)
    assert result.returncode == 0 and "panicked" not in result.stderr, result.stderr[-3000:]
    assert result.json == {"batchItemFailures": [{"itemIdentifier": "a"}]}
    assert "second.parquet" in result.stderr and "the log and the object disagree" in result.stderr, \
        result.stderr[-3000:]
    assert sorted(pg_rows(postgres_url, '"app"."b"', ["id"])) == [(200,), (201,)]
    with psycopg.connect(postgres_url) as con:
        assert con.execute("SELECT to_regclass('app.a')").fetchone() == (None,), "nothing of A was copied"


def test_a_partition_value_error_names_the_column_not_the_value(tmp_path, lakemirror, postgres_url):
    secret = "999-88-7777"
    root = tmp_path / "people"
    (root / "_delta_log").mkdir(parents=True)
    schema = json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "born", "type": "date", "nullable": True, "metadata": {}}]})
    data = root / "born=x" / "part.parquet"
    data.parent.mkdir()
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), data)
    (root / "_delta_log" / f"{0:020}.json").write_text("\n".join(json.dumps(a) for a in [
        PROTOCOL,
        {"metaData": {"id": "p", "format": {"provider": "parquet", "options": {}}, "partitionColumns": ["born"],
                      "configuration": {}, "createdTime": 1, "schemaString": schema}},
        {"add": {"path": "born=x/part.parquet", "partitionValues": {"born": secret}, "size": data.stat().st_size,
                 "modificationTime": 1, "dataChange": True}}]) + "\n")
    result = lakemirror("lakebase-sync", "--source-path", root, "--target-table", "people_born",
                        "--postgres-url", postgres_url, check=False)
    assert result.returncode > 0 and "panicked" not in result.stderr, result
    assert "partition column born" in result.stderr, result.stderr
    assert secret not in result.stderr + result.stdout, result.stderr


def test_a_forged_table_uri_in_a_mirrors_metadata_is_refused_by_the_scheduled_verify(
        bucket, glue_database, delta_storage_options, lakemirror, tmp_path):
    """A's writer rewrites A's current metadata file so that its `lakemirror.delta.table-uri`
    names B: the scheduled verify read B's log and reported B's files under A's name."""
    a_uri, b_uri = f"s3://{bucket}/warehouse/team_a/a", f"s3://{bucket}/warehouse/hr/b"
    for uri in (a_uri, b_uri):
        write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}), storage_options=delta_storage_options)
        lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database)
    s3 = boto3.client("s3")
    key = metadata_location(glue_database, "a").split(f"s3://{bucket}/", 1)[1]
    metadata = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    metadata["properties"]["lakemirror.delta.table-uri"] = b_uri
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(metadata).encode())
    event = tmp_path / "verify.json"
    event.write_text(json.dumps({"lakemirror": "verify"}))

    run = lakemirror("invoke", "glue-sync", "--event", event, "--glue-database", glue_database)
    verified = {v["glue_table"]: v for v in run.json["verified"]}
    a, b = verified[f"{glue_database}.a"], verified[f"{glue_database}.b"]
    assert a["equal"] is None and a_uri in a["error"] and b_uri in a["error"], a
    assert (b["equal"], b["delta_table"]) == (True, b_uri), b
    drift = [json.loads(line) for line in run.stdout.splitlines() if '"MirrorDrift"' in line]
    assert [m["Table"] for m in drift] == [f"{glue_database}.b"], "no drift is reported under A's name"


@pytest.mark.parametrize("first", ["nested", "sales"])
def test_a_nested_table_gives_up_the_name_it_took_and_a_table_that_is_not_nested_takes_it(
        first, bucket, glue_database, delta_storage_options, lakemirror):
    """A's writer removes A's `_delta_log/` for a moment, mirrors `A/orders` as `orders` (the
    name the sales team's table will want), and restores the log. Since issue 43 the next sync
    of `A/orders` was refused, but `orders` kept serving the attacker's rows and the real
    `sales/orders` was refused the name for good (issue 51). Now the nested table's sync
    removes its mirror from the catalog, and `sales/orders` takes the name, whichever syncs
    first."""
    a = table(bucket, "t", 100)
    lakemirror("glue-sync", "--table-uri", a.uri, "--glue-database", glue_database)
    s3 = boto3.client("s3")
    log_key = f"{a.prefix}/_delta_log/{0:020}.json"
    saved = s3.get_object(Bucket=bucket, Key=log_key)["Body"].read()
    s3.delete_object(Bucket=bucket, Key=log_key)
    nested = f"{a.uri}/orders"
    write_deltalake(nested, pa.table({"id": pa.array([666], pa.int64())}), storage_options=delta_storage_options)
    lakemirror("glue-sync", "--table-uri", nested, "--glue-database", glue_database)
    judge.assert_same_rows([(666,)], judge.iceberg_rows_pyiceberg(glue_database, "orders"))
    s3.put_object(Bucket=bucket, Key=log_key, Body=saved)
    write_deltalake(nested, pa.table({"id": pa.array([667], pa.int64())}), mode="append",
                    storage_options=delta_storage_options)
    sales = f"s3://{bucket}/warehouse/sales/orders"
    write_deltalake(sales, pa.table({"id": pa.array([1, 2], pa.int64())}), storage_options=delta_storage_options)

    if first == "nested":
        result = lakemirror("glue-sync", "--table-uri", nested, "--glue-database", glue_database, check=False)
        assert result.returncode > 0 and "panicked" not in result.stderr, result
        assert f"lies inside the Delta table at {a.uri}" in result.stderr, result.stderr
        assert f"its mirror {glue_database}.orders was removed from the catalog" in result.stderr, result.stderr
        with pytest.raises(boto3.client("glue").exceptions.EntityNotFoundException):
            boto3.client("glue").get_table(DatabaseName=glue_database, Name="orders")
    taken = lakemirror("glue-sync", "--table-uri", sales, "--glue-database", glue_database).json
    assert (taken["table"], taken["action"]) == ("orders", "created"), taken
    judge.assert_same_rows([(1,), (2,)], judge.iceberg_rows_pyiceberg(glue_database, "orders"))
    # The nested table's syncs take nothing back.
    again = lakemirror("glue-sync", "--table-uri", nested, "--glue-database", glue_database, check=False)
    assert again.returncode > 0 and "panicked" not in again.stderr, again
    judge.assert_same_rows([(1,), (2,)], judge.iceberg_rows_pyiceberg(glue_database, "orders"))


def redirecting_server(target_url):
    """A loopback HTTP server answering every request with 307 to `target_url`."""
    import http.server
    import threading

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_any(self):
            self.send_response(307)
            self.send_header("Location", target_url)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_any

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def recording_server():
    """A loopback HTTP server that records what it is sent and answers 200 `{}`."""
    import http.server
    import threading

    seen = []

    class Record(http.server.BaseHTTPRequestHandler):
        def do_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            seen.append((self.command, self.path, self.rfile.read(length).decode(errors="replace"),
                         self.headers.get("Authorization")))
            body = b"{}"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_any

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.mark.parametrize("client", ["rest-oauth2", "unity"])
def test_no_credential_follows_a_redirect(client, tmp_path, glue_database, lakemirror):
    """A token endpoint (or a Unity Catalog server) answering 307 to another address: the
    client secret or token is never sent there; the error names the redirect and the setting."""
    elsewhere, seen = recording_server()
    redirect = redirecting_server(f"http://127.0.0.1:{elsewhere.server_port}/steal")
    try:
        uri = str(tmp_path / "t")
        write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}))
        if client == "rest-oauth2":
            result = lakemirror("glue-sync", "--table-uri", uri, "--glue-database", "ns",
                                "--rest-catalog-uri", f"http://127.0.0.1:{redirect.server_port}",
                                "--rest-catalog-credential", "lakemirror:s3cr3t-client",
                                "--rest-catalog-oauth2-server-uri", f"http://127.0.0.1:{redirect.server_port}/token",
                                check=False)
            setting = "REST_CATALOG_OAUTH2_SERVER_URI"
        else:
            result = lakemirror("unity-register", "--table-uri", uri, "--uc-url",
                                f"http://127.0.0.1:{redirect.server_port}", "--uc-token", "s3cr3t-token",
                                "--catalog", "main", "--schema", "default", check=False)
            setting = "UC_URL"
        assert result.returncode > 0 and "panicked" not in result.stderr, result
        assert "redirect" in result.stderr and setting in result.stderr, result.stderr
        assert seen == [], "nothing reached the address the redirect named"
    finally:
        redirect.shutdown()
        elsewhere.shutdown()
