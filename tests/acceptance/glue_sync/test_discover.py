"""`lakemirror glue-sync --discover`: every Delta table under a prefix is found (at any depth,
without entering tables, hidden folders or Hive partition folders) and mirrored; a table that
cannot be mirrored is reported in the summary and makes the exit status non-zero, while the
others are mirrored and read back equal by pyiceberg. --dry-run mirrors nothing."""

import os
import re
import shlex
import subprocess

import boto3
import pyarrow as pa
from deltalake import write_deltalake

from conftest import put_future_protocol_table
from rig import judge

GOOD = ["lake/sales/orders", "lake/sales/returns", "lake/hr/people", "lake/top"]
BROKEN = "lake/legacy/broken"


def make_lake(bucket, storage_options):
    for n, prefix in enumerate(GOOD):
        write_deltalake(f"s3://{bucket}/{prefix}", pa.table({"id": pa.array(range(n + 1), pa.int64())}),
                        partition_by=None, storage_options=storage_options)
    put_future_protocol_table(bucket, BROKEN)
    s3 = boto3.client("s3")
    # Not tables: plain Parquet in Hive partitions, and lakemirror's own folder.
    s3.put_object(Bucket=bucket, Key="lake/raw/day=1/part-0.parquet", Body=b"x")
    s3.put_object(Bucket=bucket, Key="lake/_lakemirror/ghost/_delta_log/00000000000000000000.json", Body=b"{}")
    return sorted(f"s3://{bucket}/{p}" for p in GOOD + [BROKEN])


def test_discover_mirrors_every_table_and_reports_the_broken_one(
        bucket, glue_database, delta_storage_options, lakemirror):
    tables = make_lake(bucket, delta_storage_options)

    dry = lakemirror("glue-sync", "--discover", f"s3://{bucket}/lake", "--glue-database", glue_database,
                     "--dry-run")
    assert dry.json["dry_run"] is True
    assert [(t["table_uri"], t["glue_table"]) for t in dry.json["tables"]] == [
        (uri, f"{glue_database}.{uri.rsplit('/', 1)[1]}") for uri in tables]
    assert judge.glue_catalog().list_tables(glue_database) == [], "a dry run mirrors nothing"

    run = lakemirror("glue-sync", "--discover", f"s3://{bucket}/lake", "--glue-database", glue_database,
                     "--concurrency", "2", check=False)
    assert run.returncode == 1, run.stderr
    assert (run.json["discovered"], run.json["mirrored"], run.json["failed"]) == (5, 4, 1)
    failed = [t for t in run.json["tables"] if "error" in t]
    assert [t["table_uri"] for t in failed] == [f"s3://{bucket}/{BROKEN}"]
    assert "featureFromTheFuture" in failed[0]["error"]
    assert "4 of 5 table(s) mirrored, 1 failed" in run.stderr
    progress = [line for line in run.stderr.splitlines() if line.startswith("[") and "/5] " in line]
    assert len(progress) == 5, "one plain progress line per table when stderr is not a terminal"
    summary = run.stderr[run.stderr.index("DELTA TABLE"):]
    assert f"s3://{bucket}/{BROKEN}" in summary and "failed" in summary

    mirrored = sorted(t[1] for t in judge.glue_catalog().list_tables(glue_database))
    assert mirrored == ["orders", "people", "returns", "top"]
    for n, prefix in enumerate(GOOD):
        name = prefix.rsplit("/", 1)[1]
        rows = judge.iceberg_rows_pyiceberg(glue_database, name)
        judge.assert_same_rows(judge.delta_rows(f"s3://{bucket}/{prefix}", delta_storage_options), rows)
        assert len(rows) == n + 1

    again = lakemirror("glue-sync", "--discover", f"s3://{bucket}/lake", "--glue-database", glue_database,
                       check=False)
    assert again.returncode == 1
    assert sorted(t["report"]["action"] for t in again.json["tables"] if "report" in t) == ["unchanged"] * 4


def test_discover_refuses_a_table_uri_too_and_names_collisions(bucket, glue_database, delta_storage_options,
                                                               lakemirror):
    both = lakemirror("glue-sync", "--discover", f"s3://{bucket}/lake", "--table-uri", f"s3://{bucket}/x",
                      "--glue-database", glue_database, check=False)
    assert both.returncode == 2 and "cannot be used with" in both.stderr
    for prefix in ("lake/a/orders", "lake/b/orders"):
        write_deltalake(f"s3://{bucket}/{prefix}", pa.table({"id": [1]}), storage_options=delta_storage_options)
    dry = lakemirror("glue-sync", "--discover", f"s3://{bucket}/lake", "--glue-database", glue_database,
                     "--dry-run")
    assert [t["collides_with"] for t in dry.json["tables"]] == [[f"s3://{bucket}/lake/b/orders"],
                                                                [f"s3://{bucket}/lake/a/orders"]]
    assert "--table-name-from-path path" in dry.stderr
    by_path = lakemirror("glue-sync", "--discover", f"s3://{bucket}/lake", "--glue-database", glue_database,
                         "--dry-run", "--table-name-from-path", "path")
    assert [t["glue_table"] for t in by_path.json["tables"]] == [f"{glue_database}.lake_a_orders",
                                                                 f"{glue_database}.lake_b_orders"]


def test_discover_draws_a_progress_bar_on_a_terminal(bucket, glue_database, delta_storage_options,
                                                     lakemirror_bin, moto_endpoint):
    """On a terminal (util-linux `script` gives the command one) the bar is redrawn in place and
    failures are printed above it."""
    make_lake(bucket, delta_storage_options)
    command = shlex.join([str(lakemirror_bin), "glue-sync", "--discover", f"s3://{bucket}/lake",
                          "--glue-database", glue_database, "--concurrency", "1"])
    run = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True, timeout=300,
                         env={**os.environ, "LAKEMIRROR_LOG": "off"})
    screen = run.stdout.decode()  # bytes: text mode would turn each \r into a line break
    assert run.returncode == 1, screen
    bars = re.findall(r"\r\x1b\[2K(\[[#.]{20}\] \d/5 tables  \d failed)", screen)
    assert [b.split("]", 1)[1].split(" tables")[0] for b in bars] == [" 1/5", " 2/5", " 3/5", " 4/5", " 5/5"], screen
    assert bars[-1] == "[####################] 5/5 tables  1 failed"
    assert "\r\x1b[2KFAILED  s3://" in screen and "[1/5]" not in screen, "no plain lines on a terminal"
