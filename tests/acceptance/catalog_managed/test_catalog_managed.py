"""Catalog-managed Delta tables (Delta's `catalogManaged` feature, issue 41) against a real
Unity Catalog server with a commit coordinator (uc-server 0.0.11). The tables are created,
staged, ratified and published there as a catalog-managed writer does
(tests/rig/catalog_managed.py), then mirrored by `lakemirror glue-sync` and its function,
reported by `status` and `verify`, skipped by `unity-register` and copied by `lakebase-sync`.

The judges:
- the rows DuckDB's `delta_scan` (delta-kernel-rs) reads from a copy of the table with the
  commits the test ratified published and `catalogManaged` dropped from its protocol (the rig
  records what it ratified, as ../shared/catalog-managed/README.md says), compared with what
  pyiceberg reads through Glue, DuckDB's `iceberg_scan`, Java Iceberg (for the local table)
  and psycopg (for PostgreSQL);
- the mirror's data files, compared with the active files of the ratified commits;
- the Glue table's `VersionId` and metadata location, for a mirror left untouched;
- the catalog's own answers (loadTable), for what it ratified.

In each attack the victim is left as it was."""

import json
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from acceptance.glue_sync.test_invoke import moto_style_s3_record, sqs_record
from acceptance.mirror_check import files_of_current_snapshot
from conftest import REPO
from rig import catalog_managed as cm
from rig import judge
from rig import unity
from rig.fault_proxy import FaultProxy

CATALOG_MANAGED_0 = REPO.parent / "shared" / "catalog-managed" / "catalog_managed_0"
CM0_FIELDS = [cm.field_of("part1", "integer"), cm.field_of("col1", "integer")]
CM0_CREATED_MS = 1749830855993  # its version 0's in-commit timestamp
FIELDS = [cm.field_of("id", "long"), cm.field_of("writer", "string")]
CATALOG_TABLE_ID_PROPERTY = "lakemirror.delta.catalog-table-id"


def rows(writer, *ids) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "writer": pa.array([writer] * len(ids), pa.string())})


def removed(path: str) -> dict:
    return {"remove": {"path": path, "deletionTimestamp": 1764500000000, "dataChange": True}}


def sync(lakemirror, uri, database, uc_url=None, *args, check=True):
    """`lakemirror glue-sync` of the table at `uri`, asking the catalog at `uc_url` (none: the
    table is read without its catalog)."""
    catalog = ("--uc-url", uc_url) if uc_url else ()
    return lakemirror("glue-sync", "--table-uri", uri, "--glue-database", database, *catalog, *args, check=check)


def plain(path: str) -> str:
    return path.removeprefix("file://")


def assert_mirror(table: cm.ManagedTable, database, glue_table, version, scratch, java=None) -> list[tuple]:
    """The Glue table mirrors `table` at `version`: every judge reads the rows the Delta reader
    reads, each Delta version is in one snapshot, and the current snapshot holds exactly the
    version's data files. Returns the expected rows, sorted."""
    expected = table.expected_rows(scratch, version)
    columns = table.columns
    iceberg = judge.glue_catalog().load_table((database, glue_table))
    judge.assert_same_rows(expected, judge.iceberg_rows_pyiceberg(database, glue_table, columns=columns),
                           columns=columns)
    judge.assert_same_rows(expected, judge.iceberg_rows_duckdb(iceberg.metadata_location, columns=columns),
                           columns=columns)
    if java is not None:
        judge.assert_same_rows(expected, java.rows(iceberg.metadata_location, columns=columns), columns=columns)
    versions = [int(s["summary"]["delta.version"]) for s in judge.iceberg_snapshots(database, glue_table)]
    assert versions == sorted(set(versions)) and versions[-1] == version, f"each version in one snapshot: {versions}"
    files = files_of_current_snapshot(database, glue_table)
    assert sorted(map(plain, files)) == sorted(map(plain, table.active_files(version))), \
        "the mirror holds exactly the data files of the ratified commits"
    assert iceberg.properties.get(CATALOG_TABLE_ID_PROPERTY) == table.table_id
    return sorted(expected)


def glue_state(database, table) -> tuple[str, str]:
    """What a write to the Glue table changes: its VersionId and its metadata location."""
    found = boto3.client("glue").get_table(DatabaseName=database, Name=table)["Table"]
    return found["VersionId"], found["Parameters"]["metadata_location"]


def s3_event(bucket, *locations) -> dict:
    """S3's notification (moto's shape) of the objects at `locations`, delivered directly."""
    return {"Records": [moto_style_s3_record(bucket, cm.s3_key(location)) for location in locations]}


def sqs_message(message_id, bucket, location, receive_count) -> dict:
    """An SQS message carrying the S3 notification of `location`, delivered `receive_count`
    times (SQS's ApproximateReceiveCount)."""
    record = sqs_record(message_id, json.dumps(s3_event(bucket, location)))
    return {**record, "attributes": {"ApproximateReceiveCount": str(receive_count)}}


def invoke(lakemirror, tmp_path, database, event, uc_url, **env):
    """The glue-sync function's handler on `event`, with Unity Catalog at `uc_url`."""
    path = tmp_path / f"event-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(event))
    return lakemirror("invoke", "glue-sync", "--event", path, "--glue-database", database,
                      env={"UC_URL": uc_url, **env})


def redelivered(answer) -> list[str]:
    return sorted(f["itemIdentifier"] for f in answer.json["batchItemFailures"])


@pytest.fixture
def dead_letter_queue(moto_endpoint) -> str:
    return boto3.client("sqs").create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:12]}")["QueueUrl"]


def parked(queue_url) -> list[str]:
    """The errors of the events parked in the dead-letter queue."""
    messages = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                                   MessageAttributeNames=["All"]).get("Messages", [])
    return [m["MessageAttributes"]["lakemirror-error"]["StringValue"] for m in messages]


def closed_loopback_url() -> str:
    """A loopback URL nothing listens on: a catalog that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def uuid_starting(prefix: str) -> str:
    return str(uuid.UUID(prefix + uuid.uuid4().hex[len(prefix):]))


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


# ---------------------------------------------------------------- the shared table, commit by commit


def test_catalog_managed_0_is_mirrored_at_each_version_as_its_catalog_ratifies_it(
        unity_server, unity_local_root, glue_database, lakemirror, java_iceberg, tmp_path):
    # A local table, so that Java Iceberg judges too. The server chose its id and location; the
    # copy's version 0 names that id. Its staged files 1 and 2 come with the copy, unratified.
    table = cm.create(cm.schema_over_directory(unity_server, unity_local_root), "cm0", CM0_FIELDS, ["part1"],
                      source=CATALOG_MANAGED_0, timestamp=CM0_CREATED_MS)
    staged = {int(p.name[:20]): table.staged_file(p.name)
              for p in (CATALOG_MANAGED_0 / "_delta_log" / "_staged_commits").iterdir()}
    assert sorted(staged) == [1, 2]
    commit_times = [CM0_CREATED_MS, staged[1].timestamp, staged[2].timestamp]
    assert commit_times == [1749830855993, 1749830871085, 1749830881799]
    counts = []
    for version in (0, 1, 2):
        if version:
            assert table.ratify(staged[version])["latest-table-version"] == version
        result = sync(lakemirror, table.location, glue_database, unity_server.url)
        assert (result.json["action"], result.json["delta_version"]) == \
            ("created" if version == 0 else "synced", version)
        report = result.json["catalog_managed"]
        assert (report["table_id"], report["ratified_version"], report.get("limited")) == \
            (table.table_id, version, None)
        counts.append(len(assert_mirror(table, glue_database, result.json["table"], version, tmp_path,
                                        java=java_iceberg)))
        # Its commit time is the commit's in-commit timestamp, not when the copy was written.
        newest = judge.iceberg_snapshots(glue_database, result.json["table"])[-1]["summary"]
        assert int(newest["delta.commit-timestamp"]) == commit_times[version]
    assert counts == [0, 100, 200], "the rows catalog_managed_0's README gives for each version"


# ---------------------------------------------------------------- writers, the catalog, publication


def test_a_staged_commit_that_loses_its_version_to_another_is_never_mirrored(
        unity_schema, bucket, glue_database, lakemirror, tmp_path):
    table = cm.create(unity_schema, "orders", FIELDS)
    # Two writers stage version 1; the second one's file is newer and sorts last, so that
    # neither "the newest staged file" nor "the last one listed" is the catalog's choice.
    winner = table.stage(1, table.write("winner.parquet", rows("winner", 3)), file_uuid=uuid_starting("0000"))
    loser = table.stage(1, table.write("loser.parquet", rows("loser", 1, 2)), file_uuid=uuid_starting("ffff"))
    table.ratify(winner)
    late = table.add_commit(loser.as_catalog_commit())
    assert late.status_code == 409, f"the catalog decides a version once: {late.text}"

    result = sync(lakemirror, table.location, glue_database, unity_schema.url)
    name = result.json["table"]
    assert result.json["delta_version"] == 1
    assert assert_mirror(table, glue_database, name, 1, tmp_path) == [(3, "winner")]

    # The loser's own event arrives afterwards: done with (not redelivered), nothing changes.
    before = glue_state(glue_database, name)
    answer = invoke(lakemirror, tmp_path, glue_database,
                    {"Records": [sqs_message("m-loser", bucket, loser.location, 1)]}, unity_schema.url)
    assert redelivered(answer) == []
    assert glue_state(glue_database, name) == before


def test_a_ratified_commit_is_mirrored_before_publication_and_its_publication_later_changes_nothing(
        unity_schema, bucket, glue_database, lakemirror, tmp_path):
    table = cm.create(unity_schema, "orders", FIELDS)
    first = table.commit(1, table.write("a.parquet", rows("a", 1, 2)))
    result = sync(lakemirror, table.location, glue_database, unity_schema.url)
    name = result.json["table"]
    assert (result.json["action"], result.json["delta_version"]) == ("created", 1)
    assert [c["version"] for c in table.load()["commits"]] == [1], "ratified, not published"
    assert_mirror(table, glue_database, name, 1, tmp_path)
    second = table.commit(2, removed("a.parquet"), table.write("b.parquet", rows("b", 3)))
    result = sync(lakemirror, table.location, glue_database, unity_schema.url)
    assert (result.json["action"], result.json["delta_version"]) == ("synced", 2)
    assert assert_mirror(table, glue_database, name, 2, tmp_path) == [(3, "b")]

    # Published much later, and the catalog told: it lists neither commit any more.
    table.publish(2)
    loaded = table.load()
    assert (loaded.get("commits", []), loaded["latest-table-version"]) == ([], 2)
    before = glue_state(glue_database, name)
    backfill = invoke(lakemirror, tmp_path, glue_database,
                      s3_event(bucket, table.uri(f"_delta_log/{1:020}.json"), table.uri(f"_delta_log/{2:020}.json")),
                      unity_schema.url)
    assert [(r["action"], r["delta_version"]) for r in backfill.json["synced"]] == [("unchanged", 2)]
    assert glue_state(glue_database, name) == before

    # The staged copies cleaned up after publication: a new mirror is built from the published
    # log and the staged commit of version 3; the first one catches up.
    for staged in (first, second):
        cm.delete(staged.location)
    table.commit(3, table.write("c.parquet", rows("c", 4)))
    fresh = sync(lakemirror, table.location, glue_database, unity_schema.url, "--glue-table", "fresh")
    assert (fresh.json["action"], fresh.json["delta_version"]) == ("created", 3)
    assert assert_mirror(table, glue_database, "fresh", 3, tmp_path) == [(3, "b"), (4, "c")]
    caught_up = sync(lakemirror, table.location, glue_database, unity_schema.url)
    assert (caught_up.json["action"], caught_up.json["delta_version"]) == ("synced", 3)
    assert_mirror(table, glue_database, name, 3, tmp_path)


def test_a_version_neither_published_nor_listed_by_the_catalog_is_an_error_naming_it(
        unity_schema, glue_database, lakemirror):
    table = cm.create(unity_schema, "orders", FIELDS)
    for version in (1, 2, 3):
        table.commit(version, table.write(f"{version}.parquet", rows("w", version)))
    # Version 2 reported published, but its file never written: the catalog lists only 3.
    table.publish(1, notify=False)
    table.notify_published(2)
    assert [c["version"] for c in table.load()["commits"]] == [3]
    gap = sync(lakemirror, table.location, glue_database, unity_schema.url, check=False)
    assert gap.returncode != 0
    assert "version 2" in last_line(gap.stderr), gap.stderr
    assert judge.glue_catalog().list_tables(glue_database) == [], "nothing written"


def test_the_catalog_down_during_a_sync_fails_it_retryably_and_leaves_the_glue_table_untouched(
        unity_schema, bucket, glue_database, lakemirror, dead_letter_queue, tmp_path):
    table = cm.create(unity_schema, "orders", FIELDS)
    table.commit(1, table.write("a.parquet", rows("a", 1)))
    name = sync(lakemirror, table.location, glue_database, unity_schema.url).json["table"]
    second = table.commit(2, table.write("b.parquet", rows("b", 2)))
    before = glue_state(glue_database, name)
    down = closed_loopback_url()

    failed = sync(lakemirror, table.location, glue_database, down, check=False)
    assert failed.returncode != 0
    message = last_line(failed.stderr)
    assert table.location in message and "retr" in message.lower(), failed.stderr
    assert glue_state(glue_database, name) == before

    # The function: the message comes back for redelivery, and is not parked.
    answer = invoke(lakemirror, tmp_path, glue_database,
                    {"Records": [sqs_message("m-2", bucket, second.location, 1)]}, down,
                    DEAD_LETTER_QUEUE_URL=dead_letter_queue)
    assert redelivered(answer) == ["m-2"]
    assert parked(dead_letter_queue) == []
    assert glue_state(glue_database, name) == before

    back = sync(lakemirror, table.location, glue_database, unity_schema.url)
    assert (back.json["action"], back.json["delta_version"]) == ("synced", 2)
    assert_mirror(table, glue_database, name, 2, tmp_path)


def test_two_syncs_racing_mirror_each_ratified_version_once(unity_schema, glue_database, lakemirror, tmp_path):
    table = cm.create(unity_schema, "orders", FIELDS)
    for version in (1, 2, 3):
        table.commit(version, table.write(f"{version}.parquet", rows("w", version)))
    with ThreadPoolExecutor(max_workers=2) as pool:
        raced = list(pool.map(lambda _: sync(lakemirror, table.location, glue_database, unity_schema.url,
                                             check=False), range(2)))
    for result in raced:
        assert result.returncode == 0 or "retr" in last_line(result.stderr).lower(), result.stderr
    assert any(result.returncode == 0 for result in raced), [r.stderr for r in raced]
    settled = sync(lakemirror, table.location, glue_database, unity_schema.url)
    assert (settled.json["action"], settled.json["delta_version"]) == ("unchanged", 3)
    assert assert_mirror(table, glue_database, settled.json["table"], 3, tmp_path) == [(1, "w"), (2, "w"), (3, "w")]


# ---------------------------------------------------------------- without the catalog; status and verify


def status(lakemirror, database, uc_url=None) -> dict:
    catalog = ("--uc-url", uc_url) if uc_url else ()
    result = lakemirror("status", "--glue-database", database, "--json", *catalog)
    return {t["glue_table"].split(".", 1)[1]: t for t in result.json["tables"]}


def verify(lakemirror, uri, database, uc_url=None):
    catalog = ("--uc-url", uc_url) if uc_url else ()
    return lakemirror("verify", "--table-uri", uri, "--glue-database", database, *catalog, check=False)


def test_without_its_catalog_a_table_is_mirrored_up_to_its_newest_published_version_and_says_what_lifts_that(
        unity_schema, glue_database, lakemirror, tmp_path):
    table = cm.create(unity_schema, "orders", FIELDS)
    table.commit(1, table.write("a.parquet", rows("a", 1)))
    table.commit(2, table.write("b.parquet", rows("b", 2)))
    table.publish(1)  # version 2 is ratified, not published
    uc = unity_schema.url

    limited = sync(lakemirror, table.location, glue_database)
    name = limited.json["table"]
    assert (limited.json["action"], limited.json["delta_version"]) == ("created", 1)
    report = limited.json["catalog_managed"]
    assert (report["table_id"], report["ratified_version"]) == (table.table_id, None)
    assert "UC_URL" in report["limited"], report
    assert_mirror(table, glue_database, name, 1, tmp_path)

    line = status(lakemirror, glue_database)[name]
    assert (line["mirrored_version"], line["catalog_managed"]["ratified_version"],
            line["catalog_managed"]["published_version"]) == (1, None, 1), line
    assert "UC_URL" in line["catalog_managed"]["limited"], line
    checked = verify(lakemirror, table.location, glue_database)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (checked.json["delta_version"], checked.json["catalog_managed"]["ratified_version"],
            checked.json["catalog_managed"]["published_version"]) == (1, None, 1), checked.json
    assert "UC_URL" in checked.json["catalog_managed"]["limited"]

    # With the catalog: behind by the ratified version, then caught up.
    line = status(lakemirror, glue_database, uc)[name]
    assert (line["state"], line["mirrored_version"], line["newest_version"], line["lag_versions"]) == \
        ("behind", 1, 2, 1), line
    assert (line["catalog_managed"]["ratified_version"], line["catalog_managed"]["published_version"],
            line["catalog_managed"].get("limited")) == (2, 1, None), line
    checked = verify(lakemirror, table.location, glue_database, uc)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (checked.json["delta_version"], checked.json["catalog_managed"]["ratified_version"],
            checked.json["catalog_managed"]["published_version"]) == (1, 2, 1), checked.json
    full = sync(lakemirror, table.location, glue_database, uc)
    assert (full.json["action"], full.json["delta_version"]) == ("synced", 2)
    assert_mirror(table, glue_database, name, 2, tmp_path)
    line = status(lakemirror, glue_database, uc)[name]
    assert (line["state"], line["mirrored_version"], line["newest_version"]) == ("caught-up", 2, 2), line
    checked = verify(lakemirror, table.location, glue_database, uc)
    assert (checked.returncode, checked.json["delta_version"], checked.json["catalog_managed"]["ratified_version"]) \
        == (0, 2, 2), checked.stdout + checked.stderr

    # Without the catalog again, the mirror is past the published log: left as it is, never
    # rebuilt backwards; and verify cannot prove it without the catalog, which is not a difference.
    before = glue_state(glue_database, name)
    left = sync(lakemirror, table.location, glue_database)
    assert (left.json["action"], left.json["delta_version"]) == ("unchanged", 2)
    assert "UC_URL" in left.json["catalog_managed"]["limited"]
    assert glue_state(glue_database, name) == before
    line = status(lakemirror, glue_database)[name]
    assert (line["mirrored_version"], line["catalog_managed"]["ratified_version"],
            line["catalog_managed"]["published_version"]) == (2, None, 1), line
    assert "UC_URL" in line["catalog_managed"]["limited"], line
    unproven = verify(lakemirror, table.location, glue_database)
    assert unproven.returncode == 2, f"exit {unproven.returncode}: {unproven.stdout}{unproven.stderr}"
    assert "UC_URL" in unproven.stdout + unproven.stderr


# ---------------------------------------------------------------- the other functions


def test_unity_register_skips_a_catalog_managed_table_naming_why(unity_schema, bucket, lakemirror, tmp_path):
    table = cm.create(unity_schema, "orders", FIELDS)
    staged = table.commit(1, table.write("a.parquet", rows("a", 1)))
    before = unity_schema.tables()
    assert [(t["name"], t["table_type"]) for t in before] == [("orders", "MANAGED")]

    result = lakemirror("unity-register", "--table-uri", table.location, "--catalog", unity_schema.catalog,
                        "--schema", unity_schema.schema, "--uc-url", unity_schema.url)
    assert result.json["action"] == "catalog_managed"
    assert "catalog-managed" in result.json["reason"] and table.table_id in result.json["reason"], result.json
    # The function, on the table's commit events (published and staged).
    path = tmp_path / "event.json"
    path.write_text(json.dumps(s3_event(bucket, table.uri(f"_delta_log/{0:020}.json"), staged.location)))
    function = lakemirror("invoke", "unity-register", "--event", path,
                          env={"UC_URL": unity_schema.url, "UC_CATALOG": unity_schema.catalog,
                               "UC_SCHEMA": unity_schema.schema})
    assert [r["action"] for r in function.json["registered"]] == ["catalog_managed"], function.json
    assert unity_schema.tables() == before, "no second entry, and the catalog's own left as it was"


def test_lakebase_sync_copies_the_ratified_commits_by_path_and_by_name(
        unity_schema, postgres_url, lakemirror, tmp_path):
    from acceptance.lakebase.test_lakebase import pg_rows

    table = cm.create(unity_schema, "orders", FIELDS)
    table.commit(1, table.write("a.parquet", rows("a", 1, 2)))
    table.commit(2, table.write("b.parquet", rows("b", 3)))
    table.publish(1)
    uc = ("--uc-url", unity_schema.url)

    by_path = lakemirror("lakebase-sync", "--source-path", table.location, "--target-table", "by_path",
                         "--postgres-url", postgres_url, *uc)
    assert (by_path.json["delta_version"], by_path.json["catalog_managed"]["ratified_version"]) == (2, 2)
    judge.assert_same_rows(table.expected_rows(tmp_path, 2), pg_rows(postgres_url, "by_path", table.columns))
    by_name = ("lakebase-sync", "--source-table", table.full_name, "--target-table", "by_name", "--mode",
               "incremental", "--primary-key", "id", "--postgres-url", postgres_url, *uc)
    first = lakemirror(*by_name)
    assert (first.json["delta_version"], first.json["rows_inserted"]) == (2, 3)
    table.commit(3, removed("a.parquet"), table.write("c.parquet", rows("c", 4)))
    second = lakemirror(*by_name)
    assert (second.json["delta_version"], second.json["rows_inserted"], second.json["rows_deleted"]) == (3, 1, 2)
    judge.assert_same_rows(table.expected_rows(tmp_path, 3), pg_rows(postgres_url, "by_name", table.columns))

    # Without the catalog: the newest published version, and the report says why.
    published = lakemirror("lakebase-sync", "--source-path", table.location, "--target-table", "published",
                           "--postgres-url", postgres_url)
    assert published.json["delta_version"] == 1
    assert "UC_URL" in published.json["catalog_managed"]["limited"]
    judge.assert_same_rows(table.expected_rows(tmp_path, 1), pg_rows(postgres_url, "published", table.columns))


# ---------------------------------------------------------------- the event path


def test_a_staged_commits_event_is_redelivered_until_its_catalog_ratifies_it_and_never_parked(
        unity_schema, bucket, glue_database, lakemirror, dead_letter_queue, tmp_path):
    table = cm.create(unity_schema, "orders", FIELDS)
    staged = table.stage(1, table.write("a.parquet", rows("a", 1, 2)))
    dlq = {"DEAD_LETTER_QUEUE_URL": dead_letter_queue}

    def deliver(receive_count, **env):
        event = {"Records": [sqs_message("m-1", bucket, staged.location, receive_count)]}
        return redelivered(invoke(lakemirror, tmp_path, glue_database, event, unity_schema.url, **dlq, **env))

    def mirrored():
        [(_, name)] = judge.glue_catalog().list_tables(glue_database)
        return [int(s["summary"]["delta.version"]) for s in judge.iceberg_snapshots(glue_database, name)], \
            files_of_current_snapshot(glue_database, name)

    # Before the catalog ratifies it: asked again within the invocation, then left to the
    # queue; on its last delivery (MAX_RECEIVE_COUNT, 5 by default) let go, never parked.
    assert deliver(2) == ["m-1"]
    assert mirrored() == ([0], []), "nothing of the staged commit mirrored"
    assert deliver(5) == []
    assert deliver(2, MAX_RECEIVE_COUNT="2") == []
    assert parked(dead_letter_queue) == []
    assert mirrored() == ([0], [])

    table.ratify(staged)
    assert deliver(3) == []
    [(_, name)] = judge.glue_catalog().list_tables(glue_database)
    assert assert_mirror(table, glue_database, name, 1, tmp_path) == [(1, "a"), (2, "a")]
    assert parked(dead_letter_queue) == []


# ---------------------------------------------------------------- attacks


def test_a_table_naming_another_tables_catalog_id_is_refused_naming_both_and_gets_nothing_of_it(
        unity_schema, bucket, glue_database, lakemirror, tmp_path):
    victim = cm.create(unity_schema, "payroll", FIELDS)
    victim.commit(1, victim.write("salaries.parquet", rows("victim", 7)))
    victim_name = sync(lakemirror, victim.location, glue_database, unity_schema.url).json["table"]
    victim_before = glue_state(glue_database, victim_name)

    # The attacker's own table names the victim's catalog id in its configuration.
    attacker = f"s3://{bucket}/attacker/orders"
    cm.put(f"{attacker}/_delta_log/{0:020}.json", cm.first_commit(victim.table_id, FIELDS))
    refused = sync(lakemirror, attacker, glue_database, unity_schema.url, check=False)
    assert refused.returncode != 0
    message = last_line(refused.stderr)
    assert attacker in message and victim.table_id in message and victim.location in message, refused.stderr
    assert [t[1] for t in judge.glue_catalog().list_tables(glue_database)] == [victim_name], "no mirror made"

    # Mirrored without the catalog (its published log only), then refused again with it.
    limited = sync(lakemirror, attacker, glue_database)
    attacker_name = limited.json["table"]
    attacker_before = glue_state(glue_database, attacker_name)
    again = sync(lakemirror, attacker, glue_database, unity_schema.url, check=False)
    assert again.returncode != 0 and victim.location in last_line(again.stderr), again.stderr
    assert glue_state(glue_database, attacker_name) == attacker_before
    assert judge.iceberg_rows_pyiceberg(glue_database, attacker_name) == []
    assert files_of_current_snapshot(glue_database, attacker_name) == []
    assert glue_state(glue_database, victim_name) == victim_before
    assert_mirror(victim, glue_database, victim_name, 1, tmp_path)


def test_a_ratified_file_name_that_points_outside_the_table_is_refused_and_nothing_is_read(
        unity_schema, bucket, glue_database, delta_storage_options, lakemirror, dead_letter_queue, tmp_path):
    # The victim: a plain Delta table (delta-rs) in the same bucket, mirrored.
    victim = f"s3://{bucket}/victim/payroll"
    for ids in ((1,), (2,)):
        write_deltalake(victim, rows("victim", *ids), mode="append", storage_options=delta_storage_options)
    victim_name = sync(lakemirror, victim, glue_database).json["table"]
    victim_before = glue_state(glue_database, victim_name)
    victim_commit = f"victim/payroll/_delta_log/{1:020}.json"

    # Attackers: writers with access to the catalog for their own table ratify a file name that
    # leads to the victim's commit: up the folders, as a URI, inside a staged commit's name.
    attackers = []
    for spelling in ("relative", "uri", "inside-a-staged-name"):
        table = cm.create(unity_schema, f"attacker_{spelling.replace('-', '_')}", FIELDS)
        depth = len(cm.s3_key(table.uri("_delta_log/_staged_commits")).split("/"))
        file_name = {"relative": f"{'../' * depth}{victim_commit}",
                     "uri": f"s3://{bucket}/{victim_commit}",
                     "inside-a-staged-name": f"{1:020}.{uuid.uuid4()}/{'../' * (depth + 1)}{victim_commit}"}[spelling]
        name = sync(lakemirror, table.location, glue_database, unity_schema.url).json["table"]
        ratified = table.add_commit({"version": 1, "timestamp": 1764500000000, "file-name": file_name,
                                     "file-size": 100, "file-modification-timestamp": 1764500000000})
        assert ratified.status_code == 200, f"the catalog does not check file names: {ratified.text}"
        attackers.append((table, name, file_name, glue_state(glue_database, name)))

    for table, name, file_name, before in attackers:
        refused = sync(lakemirror, table.location, glue_database, unity_schema.url, check=False)
        assert refused.returncode != 0
        message = last_line(refused.stderr)
        assert json.dumps(file_name) in message and "nothing was read" in message, refused.stderr
        assert glue_state(glue_database, name) == before
        assert files_of_current_snapshot(glue_database, name) == []
    # The function parks such a table's event: the catalog's answer will not change by itself.
    table, name, file_name, before = attackers[0]
    answer = invoke(lakemirror, tmp_path, glue_database,
                    {"Records": [sqs_message("m-0", bucket, table.uri(f"_delta_log/{0:020}.json"), 1)]},
                    unity_schema.url, DEAD_LETTER_QUEUE_URL=dead_letter_queue)
    assert redelivered(answer) == []
    [error] = parked(dead_letter_queue)
    assert file_name in error and "nothing was read" in error, error
    assert glue_state(glue_database, name) == before
    assert glue_state(glue_database, victim_name) == victim_before
    judge.assert_same_rows(judge.delta_rows(victim, delta_storage_options),
                           judge.iceberg_rows_pyiceberg(glue_database, victim_name))


def test_staged_files_a_writer_drops_without_the_catalog_are_never_mirrored(
        unity_schema, bucket, glue_database, lakemirror, tmp_path):
    table = cm.create(unity_schema, "orders", FIELDS)
    table.commit(1, table.write("a.parquet", rows("ratified", 1)))
    name = sync(lakemirror, table.location, glue_database, unity_schema.url).json["table"]
    before = glue_state(glue_database, name)

    # The table's own writer drops commits the catalog never ratified, with their S3 events: a
    # second staged file for version 1, and staged files for versions 2 and 3.
    fakes = [table.stage(version, table.write(f"fake-{version}.parquet", rows("fake", 100 + version))).location
             for version in (1, 2, 3)]
    assert table.load()["latest-table-version"] == 1

    result = sync(lakemirror, table.location, glue_database, unity_schema.url)
    assert (result.json["action"], result.json["delta_version"]) == ("unchanged", 1)
    event = {"Records": [sqs_message(f"m-{i}", bucket, location, 5) for i, location in enumerate(fakes)]}
    answer = invoke(lakemirror, tmp_path, glue_database, event, unity_schema.url)
    assert redelivered(answer) == [], "on their last delivery, let go"
    assert glue_state(glue_database, name) == before
    assert assert_mirror(table, glue_database, name, 1, tmp_path) == [(1, "ratified")]
    # A new mirror, built from the log, takes none of them either.
    fresh = sync(lakemirror, table.location, glue_database, unity_schema.url, "--glue-table", "fresh")
    assert (fresh.json["action"], fresh.json["delta_version"]) == ("created", 1)
    assert assert_mirror(table, glue_database, "fresh", 1, tmp_path) == [(1, "ratified")]


def test_a_commit_published_past_the_catalogs_newest_version_is_not_read(
        unity_schema, glue_database, lakemirror, tmp_path):
    # Version 1 ratified, not published; the writer writes a version 2 straight into
    # `_delta_log/`, which the catalog never ratified. Versions past the catalog's newest do
    # not exist (the RFC: ignore them, published or not).
    table = cm.create(unity_schema, "orders", FIELDS)
    table.commit(1, table.write("a.parquet", rows("ratified", 1)))
    name = sync(lakemirror, table.location, glue_database, unity_schema.url).json["table"]
    before = glue_state(glue_database, name)
    cm.put(table.uri(f"_delta_log/{2:020}.json"), cm.commit_lines(table.write("forged.parquet", rows("fake", 2))))

    kept = sync(lakemirror, table.location, glue_database, unity_schema.url)
    assert (kept.json["action"], kept.json["delta_version"]) == ("unchanged", 1)
    assert glue_state(glue_database, name) == before
    fresh = sync(lakemirror, table.location, glue_database, unity_schema.url, "--glue-table", "fresh")
    assert (fresh.json["action"], fresh.json["delta_version"]) == ("created", 1)
    assert assert_mirror(table, glue_database, "fresh", 1, tmp_path) == [(1, "ratified")]


# ---------------------------------------------------------------- the catalog's name, recorded

CATALOG_TABLE_NAME_PROPERTY = "lakemirror.delta.catalog-table-name"


def catalog_requests(proxy: FaultProxy, since: int) -> list[str]:
    """The catalog requests the proxy saw after the first `since`, by path."""
    with proxy.lock:
        return [path.split("?")[0].removeprefix(unity.API) for _, path in proxy.seen[since:]]


def test_a_fresh_process_asks_the_catalog_once_by_the_name_the_mirror_recorded(
        unity_schema, glue_database, lakemirror, tmp_path):
    table = cm.create(unity_schema, "clicks", FIELDS)
    table.commit(1, table.write("a.parquet", rows("clicks", 1)))
    with FaultProxy(unity_schema.url, rate=0.0) as proxy:
        # The first process finds the table by its id (uc-server 0.0.11 has no preview route).
        first = sync(lakemirror, table.location, glue_database, proxy.url)
        name = first.json["table"]
        first_requests = catalog_requests(proxy, 0)
        assert "/tables" in first_requests, first_requests
        properties = judge.glue_catalog().load_table((glue_database, name)).properties
        assert properties.get(CATALOG_TABLE_NAME_PROPERTY) == table.full_name

        table.commit(2, table.write("b.parquet", rows("clicks", 2)))
        mark = len(proxy.seen)
        second = sync(lakemirror, table.location, glue_database, proxy.url)
        assert second.json["delta_version"] == 2
        assert catalog_requests(proxy, mark) == [table.delta_api], "one loadTable, by the recorded name"
        # status and verify, each a fresh process too, ask by the recorded name as well.
        mark = len(proxy.seen)
        assert status(lakemirror, glue_database, proxy.url)[name]["catalog_managed"]["ratified_version"] == 2
        assert catalog_requests(proxy, mark) == [table.delta_api]
        mark = len(proxy.seen)
        assert verify(lakemirror, table.location, glue_database, proxy.url).returncode == 0
        assert catalog_requests(proxy, mark) == [table.delta_api]
    assert_mirror(table, glue_database, name, 2, tmp_path)


def test_a_recorded_name_pointing_at_another_table_is_checked_and_gets_nothing_of_it(
        unity_schema, glue_database, lakemirror, tmp_path):
    victim = cm.create(unity_schema, "salaries", FIELDS)
    victim.commit(1, victim.write("v.parquet", rows("victim", 7)))
    victim_name = sync(lakemirror, victim.location, glue_database, unity_schema.url).json["table"]
    attacker = cm.create(unity_schema, "orders", FIELDS)
    attacker.commit(1, attacker.write("a.parquet", rows("attacker", 1)))
    attacker_name = sync(lakemirror, attacker.location, glue_database, unity_schema.url).json["table"]
    victim_before = glue_state(glue_database, victim_name)

    # The attacker's writer rewrites its mirror's current metadata file in place: the name
    # recorded for its table is now the victim's.
    _, location = glue_state(glue_database, attacker_name)
    metadata = json.loads(cm.get(location))
    assert metadata["properties"][CATALOG_TABLE_NAME_PROPERTY] == attacker.full_name
    metadata["properties"][CATALOG_TABLE_NAME_PROPERTY] = victim.full_name
    cm.put(location, json.dumps(metadata).encode())

    attacker.commit(2, attacker.write("b.parquet", rows("attacker", 2)))
    synced = sync(lakemirror, attacker.location, glue_database, unity_schema.url)
    assert synced.json["delta_version"] == 2
    assert_mirror(attacker, glue_database, attacker_name, 2, tmp_path)
    properties = judge.glue_catalog().load_table((glue_database, attacker_name)).properties
    assert properties[CATALOG_TABLE_NAME_PROPERTY] == attacker.full_name, "its own name, found by its id"
    assert glue_state(glue_database, victim_name) == victim_before
    assert_mirror(victim, glue_database, victim_name, 1, tmp_path)
