"""Hostile input (issue 8, property 5): logs that are malformed, truncated, not Delta, point
nowhere, name unknown features or reach outside the table. Each sync either gives a clear
error that names what is wrong, never panics and writes nothing — no Iceberg metadata, no
Glue table, no PostgreSQL table — or, where the protocol says to ignore something, mirrors
the table as a Delta reader reads it."""

import io
import json
from pathlib import Path

import boto3
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from rig import judge

PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
METADATA = {"metaData": {"id": "h", "format": {"provider": "parquet", "options": {}}, "partitionColumns": [],
                         "configuration": {}, "createdTime": 1,
                         "schemaString": json.dumps({"type": "struct", "fields": [
                             {"name": "id", "type": "long", "nullable": True, "metadata": {}}]})}}


# 813 bytes, PAR1 at both ends, whose footer declares a key-value list of ~96 million entries:
# found by tests/fuzz; the parquet crate reserved ~4.6 GB for it and the process died.
HOSTILE_FOOTER = (Path(__file__).resolve().parents[3] / "shared/delta/src/testdata/oom-key-value-list.parquet").read_bytes()


def parquet_bytes(ids) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), out)
    return out.getvalue()


class HandWrittenTable:
    def __init__(self, bucket, prefix):
        self.s3, self.bucket, self.prefix = boto3.client("s3"), bucket, prefix
        self.uri = f"s3://{bucket}/{prefix}"

    def put(self, name, body):
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{name}",
                           Body=body if isinstance(body, bytes) else body.encode())

    def add(self, path, ids, **extra):
        body = parquet_bytes(ids)
        if not path.startswith(("../", "s3://", "/")):
            self.put(path, body)
        return {"add": {"path": path, "partitionValues": {}, "size": len(body), "modificationTime": 1,
                        "dataChange": True, **extra}}

    def add_hostile_footer(self, path):
        """Puts the fuzzer's hostile-footer file at `path`; returns its add action (no stats,
        so a sync must read the footer for the record count)."""
        self.put(path, HOSTILE_FOOTER)
        return {"add": {"path": path, "partitionValues": {}, "size": len(HOSTILE_FOOTER), "modificationTime": 1,
                        "dataChange": True}}

    def commit(self, version, actions=None, text=None):
        body = text if text is not None else "\n".join(json.dumps(a) for a in actions) + "\n"
        self.put(f"_delta_log/{version:020}.json", body)

    def written(self):
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=f"{self.prefix}/_lakemirror/")
        return [o["Key"] for o in listed.get("Contents", [])]


def refuses(lakemirror, glue_database, table, *wanted):
    """glue-sync fails with every `wanted` text in its error, without a panic, writing nothing."""
    result = lakemirror("glue-sync", "--table-uri", table.uri, "--glue-database", glue_database, check=False)
    assert result.returncode not in (0, 101) and result.returncode > 0, result
    assert "panicked" not in result.stderr, result.stderr
    for text in wanted:
        assert text in result.stderr, f"{text!r} not in: {result.stderr}"
    assert table.written() == []
    with pytest.raises(boto3.client("glue").exceptions.EntityNotFoundException):
        boto3.client("glue").get_table(DatabaseName=glue_database, Name=table.prefix.rsplit("/", 1)[-1])
    return result


CASES = {
    "truncated-commit": (lambda t: t.commit(0, text=json.dumps(PROTOCOL) + '\n{"metaData": {"id": "h", "sche'),
                         ["commit 0"]),
    "not-json": (lambda t: t.commit(0, text="PK\x03\x04 this is a zip file, not a Delta commit"),
                 ["commit 0"]),
    "json-but-not-actions": (lambda t: t.commit(0, text="[1, 2, 3]\n"), ["commit 0"]),
    "no-metadata": (lambda t: t.commit(0, [PROTOCOL, t.add("a.parquet", [1])]), ["metaData"]),
    "escaping-path": (lambda t: t.commit(0, [PROTOCOL, METADATA, t.add("../other/a.parquet", [1])]),
                      ["../other/a.parquet"]),
    "negative-size": (lambda t: t.commit(0, [PROTOCOL, METADATA,
                                             {"add": {"path": "a.parquet", "partitionValues": {}, "size": -5,
                                                      "modificationTime": 1, "dataChange": True}}]),
                      ["a.parquet"]),
    "unknown-reader-feature": (lambda t: t.commit(0, [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["fancyNewThing"],
                      "writerFeatures": ["fancyNewThing"]}}, METADATA, t.add("a.parquet", [1])]),
                               ["fancyNewThing"]),
    "future-reader-version": (lambda t: t.commit(0, [{"protocol": {"minReaderVersion": 9, "minWriterVersion": 9}},
                                                     METADATA, t.add("a.parquet", [1])]), ["9"]),
    "truncated-checkpoint": (lambda t: (
        t.commit(0, [PROTOCOL, METADATA, t.add("a.parquet", [1])]),
        t.put("_delta_log/00000000000000000000.checkpoint.parquet", parquet_bytes([1])[:40]),
        t.put("_delta_log/_last_checkpoint", json.dumps({"version": 0, "size": 3}))),
        ["checkpoint"]),
    "hostile-checkpoint-footer": (lambda t: (
        t.commit(0, [PROTOCOL, METADATA, t.add("a.parquet", [1])]),
        t.put("_delta_log/00000000000000000000.checkpoint.parquet", HOSTILE_FOOTER),
        t.put("_delta_log/_last_checkpoint", json.dumps({"version": 0, "size": 3}))),
        ["checkpoint", "corrupt Parquet footer"]),
    "hostile-data-file-footer": (lambda t: t.commit(0, [PROTOCOL, METADATA, t.add_hostile_footer("a.parquet")]),
                                 ["a.parquet", "corrupt Parquet footer"]),
    "gap-in-the-log": (lambda t: (t.commit(0, [PROTOCOL, METADATA, t.add("a.parquet", [1])]),
                                  t.commit(2, [t.add("b.parquet", [2])])), ["1"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_log_is_refused_clearly_and_nothing_is_written(case, bucket, glue_database, lakemirror):
    table = HandWrittenTable(bucket, f"hostile/{case.replace('-', '_')}")
    build, wanted = CASES[case]
    build(table)
    refuses(lakemirror, glue_database, table, *wanted)


def test_a_hostile_log_is_refused_by_the_reverse_sync_too(bucket, lakemirror, postgres_url):
    table = HandWrittenTable(bucket, "hostile/reverse")
    table.commit(0, [PROTOCOL, METADATA, table.add("../../etc/passwd", [1])])
    result = lakemirror("lakebase-sync", "--source-path", table.uri, "--target-table", "t",
                        "--postgres-url", postgres_url, check=False)
    assert result.returncode > 0 and "panicked" not in result.stderr and "../../etc/passwd" in result.stderr, result
    with psycopg.connect(postgres_url) as con:
        assert con.execute("SELECT to_regclass('public.t')").fetchone() == (None,)


def test_a_data_file_with_a_hostile_footer_is_refused_by_the_reverse_sync(bucket, lakemirror, postgres_url):
    table = HandWrittenTable(bucket, "hostile/reverse_footer")
    table.commit(0, [PROTOCOL, METADATA, table.add_hostile_footer("a.parquet")])
    result = lakemirror("lakebase-sync", "--source-path", table.uri, "--target-table", "t",
                        "--postgres-url", postgres_url, check=False)
    assert result.returncode > 0 and "panicked" not in result.stderr, result
    assert "a.parquet" in result.stderr and "corrupt Parquet footer" in result.stderr, result.stderr
    with psycopg.connect(postgres_url) as con:
        assert con.execute("SELECT to_regclass('public.t')").fetchone() == (None,)


def test_last_checkpoint_pointing_nowhere_and_unknown_actions_are_ignored(
        bucket, glue_database, delta_storage_options, lakemirror):
    uri = f"s3://{bucket}/hostile/ignored"
    write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64())}), storage_options=delta_storage_options)
    table = HandWrittenTable(bucket, "hostile/ignored")
    # A hint at a checkpoint that was never written, and an action from the future.
    table.put("_delta_log/_last_checkpoint", json.dumps({"version": 99, "size": 1}))
    table.commit(1, [{"commitInfo": {"timestamp": 1764500000000}}, {"someFutureAction": {"x": 1}},
                     table.add("b.parquet", [3])])
    result = lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database)
    assert result.json["delta_version"] == 1
    assert "_last_checkpoint" in result.stderr  # warned about, then the whole log was read
    # The judges read the mirror (delta-rs itself may trip over the bogus hint).
    expected = [(1,), (2,), (3,)]
    judge.assert_same_rows(expected, judge.iceberg_rows_pyiceberg(glue_database, "ignored", columns=["id"]))
    judge.assert_same_rows(expected, judge.iceberg_rows_duckdb(result.json["metadata_location"], columns=["id"]))
