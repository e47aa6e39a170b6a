"""Snapshot expiry follows Delta's retention: once Delta VACUUM may delete the files an
Iceberg snapshot references, the snapshot is gone, with the metadata files only it used.
Data files are never deleted. The log is written by hand to give commits past timestamps."""

import io
import json
import time

import boto3
import pytest
import pyarrow as pa
import pyarrow.parquet as pq

from acceptance.mirror_check import assert_mirrors
from rig import judge

DAY_MS = 24 * 3600 * 1000
SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})


def keys(s3, bucket, prefix):
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def test_snapshots_expire_with_deltas_retention_and_only_their_metadata_goes(bucket, glue_database, lakemirror):
    s3 = boto3.client("s3")
    prefix = "x/events"
    uri = f"s3://{bucket}/{prefix}"
    now = int(time.time() * 1000)
    ages_days = [30, 20, 10, 1]  # commit v is ages_days[v] days old
    for v, age in enumerate(ages_days):
        body = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array([v], pa.int64())}), body)
        name = f"part-{v}.parquet"
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=body.getvalue())
        actions = [{"commitInfo": {"timestamp": now - age * DAY_MS}}]
        if v == 0:
            actions += [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                        {"metaData": {"id": "e", "format": {"provider": "parquet", "options": {}},
                                      "partitionColumns": [], "configuration": {}, "schemaString": SCHEMA}}]
        actions.append({"add": {"path": name, "partitionValues": {}, "size": len(body.getvalue()),
                                "modificationTime": 1, "dataChange": True, "stats": '{"numRecords":1}'}})
        s3.put_object(Bucket=bucket, Key=f"{prefix}/_delta_log/{v:020}.json",
                      Body="\n".join(json.dumps(a) for a in actions).encode())

    lists, expired = [], 0
    for v in range(len(ages_days)):
        result = lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database, "--to-version", v)
        expired += result.json["expired_snapshots"]
        table = judge.glue_catalog().load_table((glue_database, "events"))
        lists.append(table.current_snapshot().manifest_list)
    data_files = {k for k in keys(s3, bucket, prefix) if k.endswith(".parquet") and "/_lakemirror/" not in k}

    # v0 and v1 are gone: the commits after them (20 and 10 days old) are past the 7-day
    # retention. v2 stays: v3 is a day old, so VACUUM may not yet delete what v2 reads.
    kept = [int(s["summary"]["delta.version"]) for s in judge.iceberg_snapshots(glue_database, "events")]
    assert kept == [2, 3]
    assert expired == 2
    remaining = keys(s3, bucket, prefix)
    assert not any(lst.split(f"{bucket}/", 1)[1] in remaining for lst in lists[:2]), "expired manifest lists deleted"
    assert all(lst.split(f"{bucket}/", 1)[1] in remaining for lst in lists[2:])
    assert data_files <= remaining, "never a data file"
    assert_mirrors(uri, glue_database, "events", result, storage_options=judge.delta_storage_options())


@pytest.mark.parametrize("format_version", [2, 3])
def test_delete_files_of_expired_snapshots_go_and_live_ones_stay(format_version, tmp_path, bucket, glue_database, upload_dir, lakemirror, s3):
    # The deletion-vector history of test_deletion_vectors (a's vector replaced at v3, b and its
    # vector removed at v4), with commits 30, 25, ... 10 days old: every snapshot but the
    # newest expires, and the delete files only they used must go with them.
    from acceptance.test_deletion_vectors import write_table_history

    root = tmp_path / "t"
    history = write_table_history(root, partitioned=False)
    now = int(time.time() * 1000)
    for version in range(len(history)):
        commit = root / "_delta_log" / f"{version:020}.json"
        lines = [json.loads(line) for line in commit.read_text().splitlines()]
        lines[0]["commitInfo"]["timestamp"] = now - (30 - 5 * version) * DAY_MS
        commit.write_text("\n".join(json.dumps(line) for line in lines))
    upload_dir(root, bucket, "tables/dv")
    uri = f"s3://{bucket}/tables/dv"
    data_files = {k for k in keys(s3, bucket, "tables/dv/") if "/_lakemirror/" not in k}
    for version in range(len(history)):
        result = lakemirror("glue-sync", "--table-uri", uri, "--database", glue_database, "--table", "t",
                            "--to-version", version, "--iceberg-format-version", format_version)

    assert [int(s["summary"]["delta.version"]) for s in judge.iceberg_snapshots(glue_database, "t")] == [4]
    assert_mirrors(uri, glue_database, "t", result, storage_options=judge.delta_storage_options())
    tbl = judge.glue_catalog().load_table((glue_database, "t"))
    live = {entry.data_file.file_path.split(f"{bucket}/", 1)[1]
            for manifest in tbl.current_snapshot().manifests(tbl.io) if manifest.content.name == "DELETES"
            for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True)}
    assert len(live) == 1, "a's last vector is the only one live"
    assert keys(s3, bucket, "tables/dv/_lakemirror/iceberg/deletes/") == live
    assert data_files <= keys(s3, bucket, "tables/dv/"), "no data file or Delta deletion vector is ever deleted"
