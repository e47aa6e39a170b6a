"""One memory budget for the whole process (issue 51). Each test is what the writer of table
A (who may write anything in A's folder, `_lakemirror/` included) or a service the function
talks to would try, in one SQS batch with table B: A fails alone (or syncs), B syncs, and the
lakemirror process's own peak RSS (/usr/bin/time on it, not a parent's rusage) is printed and
stays within MEMORY_SIZE, at 128 MB and at 1024 MB. Each failed on the code before the budget:
the reads of a batch added up, a parse multiplied what it read, ranged reads were cut as a log
or a footer stated, and some work had no end."""

import http.server
import json
import struct
import threading

import boto3
import psycopg
import pytest

from acceptance.deployment.test_bad_bytes import batch, last_json, metadata_location
from acceptance.glue_sync.test_hostile_input import METADATA, PROTOCOL, HandWrittenTable
from acceptance.glue_sync.test_invoke import moto_style_s3_record, sqs_record
from acceptance.lakebase.test_lakebase import pg_rows
from acceptance.lakebase.test_lakebase_function import config, without_password
from rig import judge
from rig.postgres import PASSWORD

MB = 1024 * 1024
MEMORY = [128, 1024]


def table(bucket, name, first_id, prefix="warehouse/team_a"):
    t = HandWrittenTable(bucket, f"{prefix}/{name}")
    t.commit(0, [PROTOCOL, METADATA, t.add("own.parquet", [first_id])])
    return t


def mirrored(lakemirror, glue_database, *tables):
    for t in tables:
        lakemirror("glue-sync", "--table-uri", t.uri, "--glue-database", glue_database)


def measured(lakemirror_bin, tmp_path, memory_mb, *args, env=None, timeout=600):
    """`lakemirror *args` under /usr/bin/time at MEMORY_SIZE=`memory_mb`: (returncode, stdout,
    stderr, peak RSS in MB of the lakemirror process itself)."""
    import os
    import subprocess
    rss = tmp_path / "rss"
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(rss), str(lakemirror_bin), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {}), "MEMORY_SIZE": str(memory_mb)})
    peak_mb = int(rss.read_text().strip().splitlines()[-1]) / 1024
    print(f"peak RSS of lakemirror {' '.join(map(str, args[:2]))}: {peak_mb:.0f} MB (MEMORY_SIZE {memory_mb})")
    return proc.returncode, proc.stdout, proc.stderr, peak_mb


def sync_batch(lakemirror_bin, tmp_path, bucket, glue_database, memory_mb, versions, *extra, env=None):
    """glue-sync on one SQS batch announcing each `(table, version)`: the batch's redelivered
    message ids, stderr and peak RSS; fails the test on a panic or a peak past the memory."""
    code, stdout, stderr, peak_mb = measured(
        lakemirror_bin, tmp_path, memory_mb, "invoke", "glue-sync", "--event", batch(tmp_path, bucket, versions),
        "--glue-database", glue_database, *extra, env=env)
    assert code == 0 and "panicked" not in stderr, stderr[-3000:]
    assert peak_mb < memory_mb, f"{peak_mb:.0f} MB at MEMORY_SIZE={memory_mb}"
    return sorted(f["itemIdentifier"] for f in last_json(stdout)["batchItemFailures"]), stderr


def b_synced(glue_database, b, ids=(200, 201)):
    judge.assert_same_rows([(i,) for i in ids], judge.iceberg_rows_pyiceberg(glue_database, "b"))


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_sixteen_large_commits_of_one_table_are_read_within_its_share(
        memory_mb, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    """Sixteen commits of 12 MB each (a padded commitInfo, each far under the per-object
    bound): fetched 16 at once, they took 192 MB of a 128 MB function. Now each waits for room
    in A's part of the budget (or A runs again alone): A syncs, within memory."""
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    mirrored(lakemirror, glue_database, a, b)
    for v in range(1, 17):
        padded = json.dumps({"commitInfo": {"timestamp": v, "padding": "x" * (12 * MB)}})
        a.commit(v, text=padded + "\n" + json.dumps(a.add(f"f{v}.parquet", [100 + v])) + "\n")
    b.commit(1, [b.add("second.parquet", [201])])
    failed, stderr = sync_batch(lakemirror_bin, tmp_path, bucket, glue_database, memory_mb, [(a, 16), (b, 1)])
    assert failed == [], stderr[-3000:]
    b_synced(glue_database, b)
    judge.assert_same_rows([(i,) for i in range(100, 117)], judge.iceberg_rows_pyiceberg(glue_database, "a"))


def padded_metadata(bucket, key, size):
    """Replaces the metadata file at `key` with `{"format-version":2,"pad":[0,0,…]}` of `size`."""
    body = b'{"format-version":2,"pad":[' + b"0," * (size // 2) + b"0]}"
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_a_planted_metadata_file_is_refused_before_it_is_parsed(
        memory_mb, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    """A's writer replaces A's current metadata file with 30 MB of `[0,0,…]`: parsed into a
    JSON tree it took 971 MB of a 128 MB function. Now its JSON values are counted first."""
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    mirrored(lakemirror, glue_database, a, b)
    planted = metadata_location(glue_database, "a")
    padded_metadata(bucket, planted.split(f"s3://{bucket}/", 1)[1], 30 * MB)
    a.commit(1, [a.add("second.parquet", [101])])
    b.commit(1, [b.add("second.parquet", [201])])
    failed, stderr = sync_batch(lakemirror_bin, tmp_path, bucket, glue_database, memory_mb, [(a, 1), (b, 1)])
    assert failed == ["a"], stderr[-3000:]
    assert planted in stderr, stderr[-3000:]
    b_synced(glue_database, b)


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_a_planted_metadata_file_does_not_stop_the_catch_up_of_the_others(
        memory_mb, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    """The scheduled catch-up reads every mirror's metadata: one planted file stopped it for
    the whole database. Now that mirror is reported unreadable, and B, behind, is synced."""
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    mirrored(lakemirror, glue_database, a, b)
    planted = metadata_location(glue_database, "a")
    padded_metadata(bucket, planted.split(f"s3://{bucket}/", 1)[1], 30 * MB)
    b.commit(1, [b.add("second.parquet", [201])])
    event = tmp_path / "catch-up.json"
    event.write_text(json.dumps({"lakemirror": "catch-up"}))
    code, stdout, stderr, peak_mb = measured(lakemirror_bin, tmp_path, memory_mb, "invoke", "glue-sync",
                                             "--event", event, "--glue-database", glue_database)
    assert code == 0 and "panicked" not in stderr, stderr[-3000:]
    assert peak_mb < memory_mb, f"{peak_mb:.0f} MB at MEMORY_SIZE={memory_mb}"
    lines = {line["glue_table"]: line for line in last_json(stdout)["caught_up"]}
    assert lines[f"{glue_database}.b"]["synced_to"] == 1, lines
    assert planted in lines[f"{glue_database}.a"]["error"], lines
    b_synced(glue_database, b)


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_a_commit_line_parsed_into_many_empty_strings_is_refused_as_it_is_parsed(
        memory_mb, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    """A metaData line of 24 MB (under the 32 MB a 128 MB function read at once) whose
    partitionColumns are 8 million empty strings: 24 bytes of String for each 3 bytes read,
    190 MB. Now a list holds at most 4,096 entries."""
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    mirrored(lakemirror, glue_database, a, b)
    metadata = json.loads(json.dumps(METADATA))
    metadata["metaData"]["partitionColumns"] = [""] * (8 * 1024 * 1024)
    a.commit(1, text=json.dumps(metadata, separators=(",", ":")) + "\n")
    b.commit(1, [b.add("second.parquet", [201])])
    failed, stderr = sync_batch(lakemirror_bin, tmp_path, bucket, glue_database, memory_mb, [(a, 1), (b, 1)])
    assert failed == ["a"], stderr[-3000:]
    assert "more than 4096 entries" in stderr, stderr[-3000:]
    b_synced(glue_database, b)


def parquet_with_footer_of(ids, footer_bytes):
    """A Parquet file of `ids` whose footer carries about `footer_bytes` of key-value metadata
    (valid: readers decode it)."""
    import io
    import pyarrow as pa
    import pyarrow.parquet as pq
    sink = io.BytesIO()
    # The key-value pair, and the Arrow schema (which holds it again, in base64): 2.33 times.
    t = pa.table({"id": pa.array(ids, pa.int64())}).replace_schema_metadata({"pad": "x" * (footer_bytes * 3 // 7)})
    pq.write_table(t, sink)
    return sink.getvalue()


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_parquet_footers_of_10_mb_are_read_within_the_share(
        memory_mb, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    """Sixteen data files without stats (their record counts come from their footers), each
    footer 10 MB of key-value metadata: read and decoded 16 at once, 320 MB. Now each
    footer's read waits for room in A's share: A syncs."""
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    mirrored(lakemirror, glue_database, a, b)
    adds = []
    for n in range(16):
        body = parquet_with_footer_of([101 + n], 10 * MB)
        a.put(f"f{n}.parquet", body)
        adds.append({"add": {"path": f"f{n}.parquet", "partitionValues": {}, "size": len(body),
                             "modificationTime": 1, "dataChange": True}})
    a.commit(1, adds)
    b.commit(1, [b.add("second.parquet", [201])])
    failed, stderr = sync_batch(lakemirror_bin, tmp_path, bucket, glue_database, memory_mb, [(a, 1), (b, 1)])
    assert failed == [], stderr[-3000:]
    b_synced(glue_database, b)
    judge.assert_same_rows([(i,) for i in range(100, 117)], judge.iceberg_rows_pyiceberg(glue_database, "a"))


def padded_deletion_vector(deleted, size):
    """A deletion vector block (size, data, CRC) whose data is the serialized vector of
    `deleted` followed by zeros up to `size` bytes: valid (a reader reads the bitmap and stops),
    and `size` bytes long as the log states it."""
    import zlib
    from acceptance.glue_sync.test_deletion_vectors import serialized_deletion_vector
    data = serialized_deletion_vector(deleted)
    data += b"\0" * (size - len(data))
    return len(data).to_bytes(4, "big") + data + zlib.crc32(data).to_bytes(4, "big")


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_a_deletion_vector_is_read_at_its_stated_size_only_within_the_share(
        memory_mb, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    """A file whose deletion vector is 150 MB as the log states it (valid: a one-row vector
    padded): read whole as stated. Now the read is checked against the share before it is
    made: at 128 MB A fails alone, naming the vector's file and MEMORY_SIZE; at 1024 MB it is
    read, and A syncs without the deleted row."""
    a = HandWrittenTable(bucket, "warehouse/team_a/a")
    dv_protocol = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}}
    a.commit(0, [dv_protocol, METADATA, a.add("own.parquet", [100])])
    b = table(bucket, "b", 200)
    mirrored(lakemirror, glue_database, a, b)
    a.put("deletion_vector_planted.bin", b"\x01" + padded_deletion_vector([0], 150 * MB))
    dv = {"storageType": "p", "pathOrInlineDv": f"{a.uri}/deletion_vector_planted.bin", "offset": 1,
          "sizeInBytes": 150 * MB, "cardinality": 1}
    a.commit(1, [a.add("second.parquet", [1000, 101], deletionVector=dv, stats=json.dumps({"numRecords": 2}))])
    b.commit(1, [b.add("second.parquet", [201])])
    failed, stderr = sync_batch(lakemirror_bin, tmp_path, bucket, glue_database, memory_mb, [(a, 1), (b, 1)])
    b_synced(glue_database, b)
    if memory_mb == 128:
        assert failed == ["a"], stderr[-3000:]
        assert "deletion_vector_planted.bin" in stderr and "MEMORY_SIZE" in stderr, stderr[-3000:]
    else:
        assert failed == [], stderr[-3000:]
        judge.assert_same_rows([(100,), (101,)], judge.iceberg_rows_pyiceberg(glue_database, "a"))


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_an_event_for_a_version_far_ahead_lists_the_log_once(
        memory_mb, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    """A's writer commits `_delta_log/00000000009999999999.json` and its event announces it:
    the sync asked for every version up to it by name until the deadline cut it off (and so
    on, redelivery after redelivery). Now the log is listed once: its gap fails A for good."""
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    mirrored(lakemirror, glue_database, a, b)
    a.commit(9_999_999_999, [a.add("second.parquet", [101])])
    b.commit(1, [b.add("second.parquet", [201])])
    failed, stderr = sync_batch(lakemirror_bin, tmp_path, bucket, glue_database, memory_mb,
                                [(a, 9_999_999_999), (b, 1)], "--timeout-seconds", "120")
    assert failed == ["a"], stderr[-3000:]
    assert "commit 1 is missing" in stderr and "did not finish" not in stderr, stderr[-3000:]
    b_synced(glue_database, b)


class FakeUnityCatalog(http.server.BaseHTTPRequestHandler):
    """A Unity Catalog without the managed-tables route, whose table listing of its one schema
    never ends (a next_page_token on every page). Counts the listing requests it answers."""
    lists = []

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path.endswith("/delta/preview/commits"):
            return self.answer(404, b"no such route", "text/plain")
        FakeUnityCatalog.lists.append(path)
        if path.endswith("/catalogs"):
            return self.answer(200, json.dumps({"catalogs": [{"name": "main"}]}).encode())
        if path.endswith("/schemas"):
            return self.answer(200, json.dumps({"schemas": [{"name": "default"}]}).encode())
        if path.endswith("/tables"):
            return self.answer(200, json.dumps({"tables": [], "next_page_token": "more"}).encode())
        return self.answer(404, b'{"error_code":"NOT_FOUND"}')

    def answer(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def catalog_managed(bucket, name, table_id):
    t = HandWrittenTable(bucket, f"warehouse/team_a/{name}")
    managed = json.loads(json.dumps(METADATA))
    managed["metaData"]["configuration"] = {"io.unitycatalog.tableId": table_id}
    t.commit(0, [{"commitInfo": {"timestamp": 1, "inCommitTimestamp": 1}},
                 {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                               "readerFeatures": ["catalogManaged", "vacuumProtocolCheck"],
                               "writerFeatures": ["catalogManaged", "vacuumProtocolCheck", "inCommitTimestamp"]}},
                 managed, t.add("own.parquet", [100])])
    return t


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_a_made_up_catalog_table_id_costs_one_bounded_walk_of_the_catalog(
        memory_mb, bucket, glue_database, lakemirror, lakemirror_bin, tmp_path):
    """Two tables whose configuration names a table id Unity Catalog does not hold, on a
    catalog whose table listing never ends: each sync listed until the deadline. Now a listing
    stops at 100 pages, and the id it did not find is remembered: one walk for both."""
    FakeUnityCatalog.lists = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeUnityCatalog)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        a1, a2 = catalog_managed(bucket, "a1", "made-up"), catalog_managed(bucket, "a2", "made-up")
        b = table(bucket, "b", 200)
        mirrored(lakemirror, glue_database, b)
        b.commit(1, [b.add("second.parquet", [201])])
        failed, stderr = sync_batch(lakemirror_bin, tmp_path, bucket, glue_database, memory_mb,
                                    [(a1, 0), (a2, 0), (b, 1)], "--timeout-seconds", "120",
                                    env={"UC_URL": f"http://127.0.0.1:{server.server_port}"})
    finally:
        server.shutdown()
    assert failed == ["a1", "a2"], stderr[-3000:]
    assert "more than 100 pages" in stderr, stderr[-3000:]
    tables = [p for p in FakeUnityCatalog.lists if p.endswith("/tables")]
    assert len(tables) == 100, f"one walk of 100 pages, not {len(tables)}"
    b_synced(glue_database, b)


class HugeAnswer(http.server.BaseHTTPRequestHandler):
    """An HTTP server answering every request with a 200 MB JSON body (its length declared,
    or not: chunked)."""
    declared = True
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        size = 200 * MB
        if HugeAnswer.declared:
            self.send_header("Content-Length", str(size))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b" " * MB
        try:
            for _ in range(size // MB):
                self.wfile.write(chunk if HugeAnswer.declared else b"%x\r\n%s\r\n" % (len(chunk), chunk))
            if not HugeAnswer.declared:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "chunked"])
@pytest.mark.parametrize("memory_mb", MEMORY)
def test_a_catalog_answering_200_mb_is_read_no_further_than_32(
        memory_mb, declared, bucket, lakemirror_bin, tmp_path):
    """An Iceberg REST catalog (or whatever answers at its address) sends 200 MB: the whole
    body was read into memory. Now an answer stops at 32 MB, naming the request."""
    HugeAnswer.declared = declared
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HugeAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        b = table(bucket, "b", 200)
        code, stdout, stderr, peak_mb = measured(
            lakemirror_bin, tmp_path, memory_mb, "glue-sync", "--table-uri", b.uri, "--glue-database", "ns",
            "--rest-catalog-uri", f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
    assert code > 0 and "panicked" not in stderr, stderr[-3000:]
    assert peak_mb < memory_mb, f"{peak_mb:.0f} MB at MEMORY_SIZE={memory_mb}"
    assert "/v1/config" in stderr and "more than" in stderr, stderr[-3000:]


def stated_footer(size):
    """`size` bytes that end as Parquet does, their footer stating all but 12 of them."""
    return b"PAR1" + b"\0" * (size - 12) + struct.pack("<I", size - 12) + b"PAR1"


@pytest.mark.parametrize("memory_mb", MEMORY)
def test_a_data_file_footer_larger_than_the_memory_fails_that_table_alone_in_the_reverse_sync(
        memory_mb, bucket, postgres_url, function_postgres_env, lakemirror_bin, tmp_path):
    """A's data file states a 120 MB footer: the reverse sync read it whole. Now the read is
    checked against the share (at 128 MB: refused unread) and A fails alone."""
    secret_arn = boto3.client("secretsmanager").create_secret(
        Name=f"lakebase-budget-{bucket}-{memory_mb}", SecretString=PASSWORD)["ARN"]
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    body = stated_footer(120 * MB)
    a.put("huge.parquet", body)
    a.commit(1, [{"add": {"path": "huge.parquet", "partitionValues": {}, "size": len(body),
                          "modificationTime": 1, "dataChange": True}}])
    b.commit(1, [b.add("second.parquet", [201])])
    announce = lambda t: sqs_record(t.prefix.rsplit("/", 1)[-1], json.dumps(
        {"Records": [moto_style_s3_record(bucket, f"{t.prefix}/_delta_log/{1:020}.json")]}))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"Records": [announce(a), announce(b)]}))
    code, stdout, stderr, peak_mb = measured(
        lakemirror_bin, tmp_path, memory_mb, "invoke", "lakebase-sync", "--event", event,
        env={"LAKEBASE_CONFIG": config((a.uri, "app.a", "1 hour"), (b.uri, "app.b", "1 hour")),
             **function_postgres_env, "POSTGRES_URL": without_password(function_postgres_env["POSTGRES_URL"]),
             "POSTGRES_PASSWORD_SECRET_ARN": secret_arn})
    assert code == 0 and "panicked" not in stderr, stderr[-3000:]
    assert peak_mb < memory_mb, f"{peak_mb:.0f} MB at MEMORY_SIZE={memory_mb}"
    assert last_json(stdout) == {"batchItemFailures": [{"itemIdentifier": "a"}]}, stderr[-3000:]
    assert "huge.parquet" in stderr, stderr[-3000:]
    assert sorted(pg_rows(postgres_url, '"app"."b"', ["id"])) == [(200,), (201,)]


def test_a_table_slow_every_time_does_not_push_the_next_past_the_deadline(
        bucket, postgres_url, function_postgres_env, lakemirror, tmp_path):
    """lakebase-sync runs its tables one after another on one session. A, listed first, is
    slow every time (here: its target is locked by another session): it ran until the deadline
    cut it off, and B, never reached, came back with it until the queue parked both. Now A is
    cut off at its share of the time and B syncs."""
    secret_arn = boto3.client("secretsmanager").create_secret(
        Name=f"lakebase-fair-{bucket}", SecretString=PASSWORD)["ARN"]
    a, b = table(bucket, "a", 100), table(bucket, "b", 200)
    lakebase_config = config((a.uri, "app.a", "1 hour"), (b.uri, "app.b", "1 hour"))
    env = {"LAKEBASE_CONFIG": lakebase_config, **function_postgres_env,
           "POSTGRES_URL": without_password(function_postgres_env["POSTGRES_URL"]),
           "POSTGRES_PASSWORD_SECRET_ARN": secret_arn}
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"version": "0", "detail-type": "Scheduled Event", "source": "aws.scheduler",
                                    "detail": {}}))
    lakemirror("invoke", "lakebase-sync", "--event", schedule, env=env)
    for t, first in ((a, 101), (b, 201)):
        t.commit(1, [t.add("second.parquet", [first])])
    announce = lambda t: sqs_record(t.prefix.rsplit("/", 1)[-1], json.dumps(
        {"Records": [moto_style_s3_record(bucket, f"{t.prefix}/_delta_log/{1:020}.json")]}))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"Records": [announce(a), announce(b)]}))
    with psycopg.connect(postgres_url) as blocker:
        blocker.execute('LOCK TABLE "app"."a" IN ACCESS EXCLUSIVE MODE')
        result = lakemirror("invoke", "lakebase-sync", "--event", event, "--timeout-seconds", "40", env=env)
        blocker.rollback()
    assert result.json == {"batchItemFailures": [{"itemIdentifier": "a"}]}, result.stderr[-3000:]
    assert "its share of the invocation's time" in result.stderr, result.stderr[-3000:]
    assert sorted(pg_rows(postgres_url, '"app"."b"', ["id"])) == [(200,), (201,)]
    assert sorted(pg_rows(postgres_url, '"app"."a"', ["id"])) == [(100,)], "A was rolled back"
