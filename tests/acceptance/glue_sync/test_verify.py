"""`lakemirror verify`: a mirror equal to its Delta table verifies (exit 0), and a mirror
tampered with does not (exit 1) with a report that names what differs: a manifest entry
removed, a record count changed, delete files dropped, a snapshot's delta.version changed.
Each tampering is a copy of the mirror's metadata that the Glue table is pointed at, written
with pyiceberg's manifest writers; pointing Glue back verifies again, so each failure is the
tampering's. (Every shared table's mirror is verified at every version in
test_shared_tables.py.)"""

import json
import shutil
import uuid
from pathlib import Path

import boto3
import pytest
from pyiceberg.manifest import ManifestContent, write_manifest, write_manifest_list

from conftest import REPO
from rig import judge

TABLE = "dv-partitioned-with-checkpoint"


@pytest.fixture
def mirror(delta_tables_dir, tmp_path, glue_database, lakemirror):
    uri = str(tmp_path / TABLE)
    shutil.copytree(delta_tables_dir / TABLE, uri)
    lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database, "--glue-table", "t")
    return uri


def verify(lakemirror, uri, glue_database, *args):
    return lakemirror("verify", "--table-uri", uri, "--glue-database", glue_database, "--glue-table", "t", *args,
                      check=False)


def point_glue_at(glue_database, location):
    glue = boto3.client("glue")
    table = glue.get_table(DatabaseName=glue_database, Name="t")["Table"]
    parameters = {**table["Parameters"], "metadata_location": location}
    glue.update_table(DatabaseName=glue_database, TableInput={
        "Name": "t", "TableType": table.get("TableType", "EXTERNAL_TABLE"), "Parameters": parameters,
        **({"StorageDescriptor": table["StorageDescriptor"]} if "StorageDescriptor" in table else {})})


def tamper(glue_database, entries=None, keep_manifest=None, snapshot_summary=None):
    """Writes a copy of the mirror's current metadata whose current snapshot is changed, into
    the mirror's own metadata folder, and points Glue at it. `entries(list) -> list` rewrites
    the first data manifest's live entries; `keep_manifest(manifest) -> bool` drops manifests
    from the manifest list; `snapshot_summary(dict)` edits the summary. Returns the original
    metadata location."""
    tbl = judge.glue_catalog().load_table((glue_database, "t"))
    io, snap, original = tbl.io, tbl.current_snapshot(), tbl.metadata_location
    folder = original.rsplit("/", 1)[0]
    manifests = [m for m in snap.manifests(io) if keep_manifest is None or keep_manifest(m)]
    if entries is not None:
        first = next(i for i, m in enumerate(manifests) if m.content == ManifestContent.DATA)
        live = manifests[first].fetch_manifest_entry(io, discard_deleted=True)
        with write_manifest(tbl.format_version, tbl.specs()[manifests[first].partition_spec_id], tbl.schema(),
                            io.new_output(f"{folder}/tampered-{uuid.uuid4()}-m0.avro"), snap.snapshot_id,
                            "null") as writer:
            for entry in entries(live):
                writer.existing(entry)
        manifests[first] = writer.to_manifest_file()
    metadata = json.loads(io.new_input(original).open().read())
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == snap.snapshot_id)
    if entries is not None or keep_manifest is not None:
        manifest_list = f"{folder}/snap-tampered-{uuid.uuid4()}.avro"
        with write_manifest_list(tbl.format_version, io.new_output(manifest_list), snap.snapshot_id,
                                 snap.parent_snapshot_id, snap.sequence_number, "null") as writer:
            writer.add_manifests(manifests)
        current["manifest-list"] = manifest_list
    if snapshot_summary is not None:
        snapshot_summary(current["summary"])
    location = f"{folder}/99999-{uuid.uuid4()}.metadata.json"
    with io.new_output(location).create() as out:
        out.write(json.dumps(metadata).encode())
    point_glue_at(glue_database, location)
    return original


def differences(result):
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.json["equal"] is False
    return [(d["kind"], Path(d.get("file") or "").name, d["message"]) for d in result.json["differences"]]


def test_an_untouched_mirror_verifies_and_a_tampered_one_names_each_difference(mirror, glue_database, lakemirror):
    equal = verify(lakemirror, mirror, glue_database)
    assert equal.returncode == 0, equal.stderr
    report = equal.json
    assert report["equal"] is True and report["differences"] == [] and report["delta_files"] == report["data_files"]
    assert report["delete_files"] > 0, "the table has deletion vectors: their delete files were compared"
    assert report["record_counts_unchecked"] == 0

    # A manifest entry removed: the file is missing.
    removed = {}

    def drop_first(live):
        removed["path"] = live[0].data_file.file_path
        return live[1:]
    original = tamper(glue_database, entries=drop_first)
    found = differences(verify(lakemirror, mirror, glue_database))
    assert ("missing_file", Path(removed["path"]).name, "active in Delta, missing from the snapshot") in found, found
    point_glue_at(glue_database, original)
    assert verify(lakemirror, mirror, glue_database).returncode == 0

    # A record count changed.
    changed = {}

    def miscount(live):
        live[0].data_file[4] = live[0].data_file.record_count + 1  # position 4: record_count (no setter)
        changed["path"], changed["count"] = live[0].data_file.file_path, live[0].data_file.record_count
        return live
    tamper(glue_database, entries=miscount)
    found = differences(verify(lakemirror, mirror, glue_database))
    assert found == [("record_count", Path(changed["path"]).name,
                      f"{changed['count'] - 1} records in Delta, {changed['count']} in the snapshot")], found
    point_glue_at(glue_database, original)

    # The delete files dropped (the delete manifest left out of the manifest list): every file
    # with a deletion vector has rows Delta deleted and the mirror does not.
    tamper(glue_database, keep_manifest=lambda m: m.content == ManifestContent.DATA)
    found = differences(verify(lakemirror, mirror, glue_database))
    assert found and {kind for kind, _, _ in found} == {"deleted_rows"}, found
    assert all("rows deleted in Delta (deletion vector), 0 by the snapshot's delete files" in m for _, _, m in found)
    assert len(found) == report["delete_files"]
    point_glue_at(glue_database, original)

    # The current snapshot's delta.version changed: to the version before (its parent expired
    # long ago, so only the recorded commit hash tells), and to one the log does not have.
    for claimed, message in ((report["delta_version"] - 1, "mirrors another commit"),
                             (report["delta_version"] + 5, "does not exist")):
        tamper(glue_database, snapshot_summary=lambda summary: summary.update({"delta.version": str(claimed)}))
        found = differences(verify(lakemirror, mirror, glue_database))
        assert any(kind == "history" and message in m for kind, _, m in found), found
        point_glue_at(glue_database, original)
    assert verify(lakemirror, mirror, glue_database).returncode == 0


def test_older_versions_verify_while_their_snapshots_are_kept(tmp_path, glue_database, lakemirror):
    # Written now, so that no snapshot is old enough to expire (the shared tables' are).
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    uri = str(tmp_path / "fresh")
    for n in range(3):
        write_deltalake(uri, pa.table({"id": pa.array([n, n + 10], pa.int64())}), mode="append")
    DeltaTable(uri).delete("id = 1")
    for version in range(4):
        lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database, "--glue-table", "t",
                   "--to-version", version)
    for version in range(4):
        result = verify(lakemirror, uri, glue_database, "--version", version)
        assert result.returncode == 0, result.stderr
        assert (result.json["delta_version"], result.json["snapshots_checked"]) == (version, 4)
        assert result.json["delta_files"] == [1, 2, 3, 3][version]


def test_what_cannot_be_verified_exits_2_and_says_why(glue_database, lakemirror, mirror):
    result = lakemirror("verify", "--table-uri", mirror, "--glue-database", glue_database, "--glue-table", "nope",
                        check=False)
    assert result.returncode == 2
    assert "run glue-sync first" in result.stderr, result.stderr
    result = verify(lakemirror, mirror, glue_database, "--version", "999")
    assert result.returncode == 2
    assert "holds no snapshot of Delta version 999" in result.stderr, result.stderr


def test_the_scheduled_verify_emits_mirror_drift_per_mirror(mirror, delta_tables_dir, tmp_path, glue_database,
                                                            lakemirror):
    """VerifySchedule: the glue-sync function, given {"lakemirror": "verify"}, verifies every
    mirror of its database and emits MirrorDrift (CloudWatch embedded metrics): 1 for the
    tampered mirror, 0 for the equal one."""
    other = str(tmp_path / "other")
    shutil.copytree(delta_tables_dir / "simple_table", other)
    lakemirror("glue-sync", "--table-uri", other, "--glue-database", glue_database, "--glue-table", "u")
    tamper(glue_database, keep_manifest=lambda m: m.content == ManifestContent.DATA)
    event = tmp_path / "verify.json"
    event.write_text(json.dumps({"lakemirror": "verify"}))

    run = lakemirror("invoke", "glue-sync", "--event", event, "--glue-database", glue_database)
    verified = {v["glue_table"]: v for v in run.json["verified"]}
    assert sorted(verified) == [f"{glue_database}.t", f"{glue_database}.u"]
    t, u = verified[f"{glue_database}.t"], verified[f"{glue_database}.u"]
    assert (t["equal"], u["equal"]) == (False, True), verified
    assert t["difference_count"] > 0 and t["differences"] and t["error"] is None
    assert u["delta_table"] == f"file://{other}" and u["difference_count"] == 0

    metrics = [json.loads(line) for line in run.stdout.splitlines() if '"MirrorDrift"' in line]
    assert {m["Table"]: m["MirrorDrift"] for m in metrics} == {f"{glue_database}.t": 1, f"{glue_database}.u": 0}
    assert all(m["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [{"Name": "MirrorDrift", "Unit": "Count"}]
               for m in metrics)

    only_u = lakemirror("invoke", "glue-sync", "--event", event, "--glue-database", glue_database,
                        "--table-prefixes", f"file://{other}")
    assert [v["glue_table"] for v in only_u.json["verified"]] == [f"{glue_database}.u"]


def test_another_engines_snapshot_on_top_is_drift_naming_it(tmp_path, glue_database, lakemirror):
    """Someone appends to the mirror with pyiceberg (as an Athena INSERT would): verify checks
    the newest mirrored version below it and reports the foreign snapshot as a difference
    (exit 1), with its id and what its summary says, instead of refusing to verify (exit 2)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    uri = str(tmp_path / "fresh")
    write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64())}))
    lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database, "--glue-table", "t")
    table = judge.glue_catalog().load_table((glue_database, "t"))
    table.append(pa.table({"id": pa.array([3], pa.int64())}))
    foreign = judge.glue_catalog().load_table((glue_database, "t")).current_snapshot().snapshot_id

    result = verify(lakemirror, uri, glue_database)
    found = differences(result)
    assert result.json["delta_version"] == 0
    history = [message for kind, _, message in found if kind == "history"]
    assert len(history) == 1 and f"snapshot {foreign} names no Delta version" in history[0], found
    assert "operation=append" in history[0] and "added-data-files=1" in history[0], history
    assert len(found) == 1, found


@pytest.mark.parametrize("tampered", ["a column dropped from the list", "a column Delta has added to it"])
def test_verify_reports_a_tampered_omitted_columns_property(tampered, tmp_path, glue_database, lakemirror):
    """A v2 mirror of a variant table leaves its variant columns out and names them in
    lakemirror.omitted-columns. Whoever changes the property (a column dropped from it while
    still missing from the schema, or one named that Delta still has) misleads readers about
    which columns exist: verify says so."""
    uri = str(tmp_path / "variant")
    shutil.copytree(REPO.parent / "shared" / "delta-features" / "variant-stats-no-checkpoint", uri)
    lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database, "--glue-table", "t")
    assert verify(lakemirror, uri, glue_database).returncode == 0
    tbl = judge.glue_catalog().load_table((glue_database, "t"))
    declared = json.loads(tbl.properties["lakemirror.omitted-columns"])
    assert [d["column"] for d in declared] == ["v", "nv"], declared
    if tampered == "a column dropped from the list":
        declared = declared[1:]
    else:
        declared.append({"column": "i", "reason": "made up"})
    metadata = json.loads(tbl.io.new_input(tbl.metadata_location).open().read())
    metadata["properties"]["lakemirror.omitted-columns"] = json.dumps(declared)
    location = f"{tbl.metadata_location.rsplit('/', 1)[0]}/99999-{uuid.uuid4()}.metadata.json"
    with tbl.io.new_output(location).create() as out:
        out.write(json.dumps(metadata).encode())
    point_glue_at(glue_database, location)
    found = differences(verify(lakemirror, uri, glue_database))
    assert [kind for kind, _, _ in found] == ["schema"], found
    assert "lakemirror.omitted-columns" in found[0][2], found
