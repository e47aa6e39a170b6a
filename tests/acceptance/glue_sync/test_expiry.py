"""Snapshot expiry follows Delta's retention: once Delta VACUUM may delete the files an
Iceberg snapshot references, the snapshot is gone, with the metadata files only it used.
Data files are never deleted. The log is written by hand to give commits past timestamps."""

import io
import json
import time
from pathlib import Path

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


def local_keys(root: Path, under: str = "") -> set[str]:
    """Files under root/under, as paths relative to root (the local twin of keys())."""
    return {p.relative_to(root).as_posix() for p in (root / under).rglob("*") if p.is_file()}


def write_aged_commits(s3, bucket, prefix, ages_days, put=None, removes=None):
    """A Delta log written by hand, commit v holding the row `id = v` and ages_days[v] days old
    (and, with `removes` {v: w}, removing the file of commit w). Written to S3, or with
    `put(relative path, bytes)` elsewhere."""
    put = put or (lambda key, body: s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=body))
    now = int(time.time() * 1000)
    for v, age in enumerate(ages_days):
        body = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array([v], pa.int64())}), body)
        name = f"part-{v}.parquet"
        put(name, body.getvalue())
        actions = [{"commitInfo": {"timestamp": now - age * DAY_MS}}]
        if v == 0:
            actions += [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                        {"metaData": {"id": "e", "format": {"provider": "parquet", "options": {}},
                                      "partitionColumns": [], "configuration": {}, "schemaString": SCHEMA}}]
        actions.append({"add": {"path": name, "partitionValues": {}, "size": len(body.getvalue()),
                                "modificationTime": 1, "dataChange": True, "stats": '{"numRecords":1}'}})
        if (removes or {}).get(v) is not None:
            actions.append({"remove": {"path": f"part-{removes[v]}.parquet", "dataChange": True,
                                       "deletionTimestamp": now - age * DAY_MS}})
        put(f"_delta_log/{v:020}.json", "\n".join(json.dumps(a) for a in actions).encode())


def test_snapshots_expire_with_deltas_retention_and_only_their_metadata_goes(bucket, glue_database, lakemirror):
    s3 = boto3.client("s3")
    prefix = "x/events"
    uri = f"s3://{bucket}/{prefix}"
    ages_days = [30, 20, 10, 1]  # commit v is ages_days[v] days old
    write_aged_commits(s3, bucket, prefix, ages_days)

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
def test_delete_files_of_expired_snapshots_go_and_live_ones_stay(format_version, tmp_path, glue_database, lakemirror, java_iceberg):
    # The deletion-vector history of test_deletion_vectors (a's vector replaced at v3, b and its
    # vector removed at v4), with commits 30, 25, ... 10 days old: every snapshot but the
    # newest expires, and the delete files only they used must go with them. A local table,
    # so that Java Iceberg judges what is left.
    from acceptance.glue_sync.test_deletion_vectors import write_table_history

    root = tmp_path / "t"
    history = write_table_history(root, partitioned=False)
    now = int(time.time() * 1000)
    for version in range(len(history)):
        commit = root / "_delta_log" / f"{version:020}.json"
        lines = [json.loads(line) for line in commit.read_text().splitlines()]
        lines[0]["commitInfo"]["timestamp"] = now - (30 - 5 * version) * DAY_MS
        commit.write_text("\n".join(json.dumps(line) for line in lines))
    uri = str(root)
    data_files = {k for k in local_keys(root) if not k.startswith("_lakemirror/")}
    for version in range(len(history)):
        result = lakemirror("glue-sync", "--table-uri", uri, "--database", glue_database, "--table", "t",
                            "--to-version", version, "--iceberg-format-version", format_version)

    assert [int(s["summary"]["delta.version"]) for s in judge.iceberg_snapshots(glue_database, "t")] == [4]
    assert_mirrors(uri, glue_database, "t", result, java=java_iceberg)
    tbl = judge.glue_catalog().load_table((glue_database, "t"))
    live = {entry.data_file.file_path.split(f"{uri}/", 1)[1]
            for manifest in tbl.current_snapshot().manifests(tbl.io) if manifest.content.name == "DELETES"
            for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True)}
    assert len(live) == 1, "a's last vector is the only one live"
    assert local_keys(root, "_lakemirror/iceberg/deletes") == live
    assert data_files <= local_keys(root), "no data file or Delta deletion vector is ever deleted"


def referenced_metadata(database, table, root) -> set[str]:
    """The manifest lists and manifests every snapshot the Glue table keeps still reads,
    relative to the table root."""
    tbl = judge.glue_catalog().load_table((database, table))
    return {path.split(f"{root}/", 1)[1]
            for snapshot in tbl.metadata.snapshots
            for path in [snapshot.manifest_list] + [m.manifest_path for m in snapshot.manifests(tbl.io)]}


def test_a_sync_killed_while_deleting_expired_files_leaves_a_readable_table_and_only_unreferenced_metadata(
        tmp_path, glue_database, lakemirror, java_iceberg):
    # Issue 8, property 3, the step after the Glue update: expired snapshots' files are deleted
    # after the commit, their manifest lists first. Killed after those, the table must still
    # read right and the files left over must be ones no kept snapshot reads.
    from acceptance.glue_sync.test_crash_steps import ABORTED

    root = tmp_path / "crash"

    def put(key, body):
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(body)

    # v4 removes v0's file: the bucket is rewritten, so the expired snapshots' manifests (not
    # only their lists) are theirs alone (appends add layers that later snapshots list too).
    write_aged_commits(None, None, None, [40, 35, 30, 25, 20, 2, 1], put=put, removes={4: 0})
    uri = str(root)
    args = ["glue-sync", "--table-uri", uri, "--glue-database", glue_database]
    for v in range(4):  # v0..v2 expire on the way; v3 is kept (v4 is 20 days old, so not for long)
        lakemirror(*args, "--to-version", v)
    before = local_keys(root, "_lakemirror")
    going = referenced_metadata(glue_database, "crash", uri)

    crashed = lakemirror(*args, "--to-version", 5, env={"LAKEMIRROR_CRASH_AT": "mirror-during-expiry"}, check=False)
    assert crashed.returncode in ABORTED, crashed
    after = local_keys(root, "_lakemirror")
    kept = referenced_metadata(glue_database, "crash", uri)
    assert [int(s["summary"]["delta.version"]) for s in judge.iceberg_snapshots(glue_database, "crash")] == [4, 5]
    assert kept <= after, "every file a kept snapshot reads is still there"
    left_over = (going - kept) & after
    deleted = before - after
    assert deleted and all(Path(k).name.startswith("snap-") for k in deleted), \
        f"killed after deleting the expired manifest lists: {deleted}"
    assert left_over, "the kill left expired files behind"
    assert all(k.endswith(".avro") for k in left_over), left_over
    judge.assert_same_rows([(v,) for v in range(1, 6)], judge.iceberg_rows_pyiceberg(glue_database, "crash"))
    location = judge.glue_catalog().load_table((glue_database, "crash")).metadata_location
    judge.assert_same_rows([(v,) for v in range(1, 6)], java_iceberg.rows(location))

    # The next sync converges; the files left over stay unreferenced garbage.
    result = lakemirror(*args)
    assert result.json["delta_version"] == 6
    assert_mirrors(uri, glue_database, "crash", result, java=java_iceberg)
    assert not left_over & referenced_metadata(glue_database, "crash", uri)
