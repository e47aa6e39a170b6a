"""Delta's row tracking as Iceberg row lineage in a format version 3 mirror (issue 42).

A Delta table with `delta.enableRowTracking` gives each row a stable row ID and row commit
version (PROTOCOL.md "Row Tracking"): the value of the materialized column
(`delta.rowTracking.materializedRowIdColumnName` / `...materializedRowCommitVersionColumnName`)
where a file has one and it is not null, else the add's `baseRowId` plus the row's physical
index in the file (a deletion vector removes rows, not their indices) and the add's
`defaultRowCommitVersion`. The mirror carries them as UniForm does (delta#7023): a data
file's `first_row_id` is its `baseRowId`, its data and file sequence numbers are its
`defaultRowCommitVersion`, the table's `next-row-id` is one past the `delta.rowTracking`
high-water mark, and the name mapping maps the materialized columns to `_row_id` and
`_last_updated_sequence_number`.

The history is written by hand (tests/rig/delta_log.py) as Spark writes it: appends, an
UPDATE that rewrites a file (moved rows keep their row IDs in the materialized column, the
updated rows get the new commit version), a DELETE with a deletion vector, an OPTIMIZE that
compacts files keeping both values materialized, and a DELETE on the compacted file.

No Delta reader here exposes row IDs (delta-rs 1.6.6 has no such API and refuses this table's
deletionVectors reader feature; DuckDB 1.5.5's delta_scan knows no `_metadata`, `_row_id` or
materialized column), so the expected row IDs and commit versions are the protocol's rules
applied to the log and the files (`delta_row_lineage` below). DuckDB's delta_scan
(delta-kernel-rs) reads the rows themselves, which keeps the log honest.

Judges of `_row_id` and `_last_updated_sequence_number`, per row by its key: Java Iceberg
1.10.2's generic reader with the name mapping applied (tests/rig/java_generic.py; Java
applies a name mapping only to files without any field IDs, which Delta's files without
column mapping are) and DuckDB 1.5.5 iceberg_scan (its virtual columns of those names).
Java 1.10.2 reads `_last_updated_sequence_number` from the file sequence number instead of the
data sequence number (fixed by apache/iceberg#17039, not in 1.10.2): the mirror sets both.
"""

import json
import uuid
import zlib
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap

from acceptance.glue_sync.test_deletion_vectors import MAGIC, Z85, deletion_vector_file
from rig import judge
from rig.delta_log import DeltaLog, column

ROW_ID = "_row_id"
LAST_UPDATED = "_last_updated_sequence_number"
ROW_ID_FIELD_ID, LAST_UPDATED_FIELD_ID = 2147483540, 2147483539
ROW_ID_COLUMN = "_row-id-col-6c7f0a57-0b5e-4d0b-9d44-5c2d8f1e3a01"
COMMIT_VERSION_COLUMN = "_row-commit-version-col-0d9e8b1c-7a44-4f0e-b1a2-93c5e6f7d802"
FIELDS = [column("id", "long"), column("v", "string")]
ROW_TRACKING_PROTOCOL = {"protocol": {
    "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors", "domainMetadata", "rowTracking"]}}
ROW_TRACKING = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true",
                "delta.rowTracking.materializedRowIdColumnName": ROW_ID_COLUMN,
                "delta.rowTracking.materializedRowCommitVersionColumnName": COMMIT_VERSION_COLUMN}
LAST_VERSION = 5


# ---------------------------------------------------------------- the Delta history


def data(ids, values, row_ids=None, commit_versions=None) -> pa.Table:
    """A data file's rows; with the materialized row tracking columns when given."""
    columns = {"id": pa.array(ids, pa.int64()), "v": pa.array(values, pa.string())}
    if row_ids is not None:
        columns[ROW_ID_COLUMN] = pa.array(row_ids, pa.int64())
        columns[COMMIT_VERSION_COLUMN] = pa.array(commit_versions, pa.int64())
    return pa.table(columns)


def tracked(add: dict, base_row_id: int, commit_version: int, data_change=True) -> dict:
    add["add"].update(baseRowId=base_row_id, defaultRowCommitVersion=commit_version, dataChange=data_change)
    return add


def with_deletion_vector(add: dict, dv: dict) -> dict:
    stats = {**json.loads(add["add"]["stats"]), "tightBounds": False}
    return {"add": {**add["add"], "stats": json.dumps(stats), "deletionVector": dv}}


def remove(add: dict, log: DeltaLog, data_change=True) -> dict:
    """The remove of `add`, carrying its row tracking fields and vector as the protocol asks."""
    a = add["add"]
    action = {"path": a["path"], "deletionTimestamp": log.started, "dataChange": data_change,
              "extendedFileMetadata": True, "partitionValues": a["partitionValues"], "size": a["size"]}
    for key in ("baseRowId", "defaultRowCommitVersion", "deletionVector"):
        if key in a:
            action[key] = a[key]
    return {"remove": action}


def high_water_mark(mark: int) -> dict:
    return {"domainMetadata": {"domain": "delta.rowTracking", "removed": False,
                               "configuration": json.dumps({"rowIdHighWaterMark": mark})}}


def write_history(root: Path) -> DeltaLog:
    """Versions 0-5 of a table with row tracking, as Spark commits them (row IDs and commit
    versions in the comments: Delta's stable values by the protocol's rules)."""
    log = DeltaLog(root)
    # v0: create with two files: a holds row IDs 0-9, b 10-14; commit version 0.
    a = tracked(log.add("a.parquet", data(range(100, 110), [f"a{i}" for i in range(10)])), 0, 0)
    b = tracked(log.add("b.parquet", data(range(200, 205), [f"b{i}" for i in range(5)])), 10, 0)
    log.commit(ROW_TRACKING_PROTOCOL, log.metadata(FIELDS, ROW_TRACKING), a, b, high_water_mark(14))
    # v1: append c, row IDs 15-22. The mark goes to 24: a writer may reserve IDs it does not
    # use (the protocol asks only that the mark is at least the highest ID assigned).
    c = tracked(log.add("c.parquet", data(range(300, 308), [f"c{i}" for i in range(8)])), 15, 1)
    log.commit(c, high_water_mark(24))
    # v2: UPDATE a SET v = ... WHERE id IN (102, 105) rewrites a into a2: every row keeps its
    # row ID materialized; the copied rows keep commit version 0 materialized, the updated rows
    # (written last, so no row is at its old index) get null: the new file's version, 2.
    copied = [0, 1, 3, 4, 6, 7, 8, 9]
    a2 = tracked(log.add("a2.parquet", data(
        [100 + i for i in copied] + [102, 105], [f"a{i}" for i in copied] + ["a2-updated", "a5-updated"],
        row_ids=copied + [2, 5], commit_versions=[0] * len(copied) + [None, None])), 25, 2)
    log.commit(remove(a, log), a2, high_water_mark(34))
    # v3: DELETE FROM t WHERE id IN (301, 306): a deletion vector on c. c keeps its row IDs
    # (15 + physical index) and commit version 1; no ID is assigned.
    [dv] = deletion_vector_file(root, "", [1, 6])
    c3 = with_deletion_vector(c, dv)
    log.commit(remove(c, log), c3)
    # v4: OPTIMIZE compacts a2 and c (less its deleted rows) into d, in another order; every
    # row keeps its row ID and commit version materialized. d's own IDs are 35-50.
    kept = [  # (id, v, row ID, commit version)
        *((300 + i, f"c{i}", 15 + i, 1) for i in (0, 2, 3, 4, 5, 7)),
        *((100 + i, f"a{i}", i, 0) for i in copied), (102, "a2-updated", 2, 2), (105, "a5-updated", 5, 2)]
    kept.sort(key=lambda r: r[1], reverse=True)
    d = tracked(log.add("d.parquet", data(*zip(*kept))), 35, 4, data_change=False)
    log.commit(remove(a2, log, data_change=False), remove(c3, log, data_change=False), d, high_water_mark(50),
               info={"commitInfo": {"timestamp": log.started + 4, "operation": "OPTIMIZE"}})
    # v5: DELETE FROM t WHERE id IN (105, 303): a deletion vector on the compacted file.
    positions = sorted(i for i, r in enumerate(kept) if r[0] in (105, 303))
    [dv] = deletion_vector_file(root, "", positions)
    log.commit(remove(d, log), with_deletion_vector(d, dv))
    assert log.version == LAST_VERSION
    return log


# ---------------------------------------------------------------- Delta's row IDs, by the protocol


def z85_decode(text: str) -> bytes:
    values = [Z85.index(ch) for ch in text]
    words = (sum(v * 85 ** (4 - k) for k, v in enumerate(values[i:i + 5])) for i in range(0, len(values), 5))
    return b"".join(w.to_bytes(4, "big") for w in words)


def deleted_positions(root: Path, dv: dict | None) -> set[int]:
    """The row indices an on-disk deletion vector ('u') deletes, read from its file."""
    if dv is None:
        return set()
    assert dv["storageType"] == "u", dv
    prefix, encoded_id = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
    blob = (root / prefix / f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded_id))}.bin").read_bytes()
    size = int.from_bytes(blob[dv["offset"]:dv["offset"] + 4], "big")
    bitmap = blob[dv["offset"] + 4:dv["offset"] + 4 + size]
    assert zlib.crc32(bitmap).to_bytes(4, "big") == blob[dv["offset"] + 4 + size:dv["offset"] + 8 + size]
    assert int.from_bytes(bitmap[:4], "little") == MAGIC and int.from_bytes(bitmap[4:12], "little") == 1
    assert int.from_bytes(bitmap[12:16], "little") == 0, "only row indices below 2^32 here"
    return set(BitMap.deserialize(bitmap[16:]))


def active_adds(root: Path, version: int) -> tuple[dict[str, dict], int | None]:
    """The live add actions at `version` by path, and the row ID high-water mark (log replay)."""
    adds, mark = {}, None
    for v in range(version + 1):
        for line in (root / "_delta_log" / f"{v:020}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                adds.pop(action["remove"]["path"], None)
            elif action.get("domainMetadata", {}).get("domain") == "delta.rowTracking":
                mark = json.loads(action["domainMetadata"]["configuration"])["rowIdHighWaterMark"]
    return adds, mark


def delta_row_lineage(root: Path, version: int) -> dict[int, tuple[str, int, int]]:
    """Every live row at `version` by its key: (v, stable row ID, stable row commit version),
    by PROTOCOL.md's reader requirements for row tracking."""
    rows = {}
    for path, add in active_adds(root, version)[0].items():
        table = pq.read_table(root / path).to_pydict()
        deleted = deleted_positions(root, add.get("deletionVector"))
        materialized_ids = table.get(ROW_ID_COLUMN, [None] * len(table["id"]))
        materialized_versions = table.get(COMMIT_VERSION_COLUMN, [None] * len(table["id"]))
        for index, key in enumerate(table["id"]):
            if index in deleted:
                continue
            row_id = materialized_ids[index] if materialized_ids[index] is not None else add["baseRowId"] + index
            commit_version = (materialized_versions[index] if materialized_versions[index] is not None
                              else add["defaultRowCommitVersion"])
            assert key not in rows
            rows[key] = (table["v"][index], row_id, commit_version)
    return rows


# ---------------------------------------------------------------- the mirror and its readers


def sync(lakemirror, uri, database, version, table="t"):
    return lakemirror("glue-sync", "--table-uri", uri, "--database", database, "--table", table,
                      "--to-version", version, "--iceberg-format-version", 3)


def metadata_json(location: str) -> dict:
    return json.loads(Path(urlparse(location).path).read_text())


def snapshots_by_version(metadata: dict) -> dict[int, dict]:
    return {int(s["summary"]["delta.version"]): s for s in metadata["snapshots"]}


def java_lineage(java_generic, location, snapshot_id) -> tuple[dict[int, tuple], dict]:
    rows, meta = java_generic.read(location, columns=["id", "v"], snapshot_id=snapshot_id)
    return keyed([(r["id"], r["v"], r[ROW_ID], r[LAST_UPDATED]) for r in rows]), meta


def duckdb_lineage(location, snapshot_id) -> dict[int, tuple]:
    con = judge.duckdb_connect("avro", "iceberg")
    rows = con.execute(f"""SELECT id, v, {ROW_ID}, {LAST_UPDATED}
                           FROM iceberg_scan({judge._sql_str(location)}, snapshot_from_id => {int(snapshot_id)})""")
    return keyed(rows.fetchall())


def keyed(rows) -> dict[int, tuple]:
    out = {}
    for key, *rest in rows:
        assert key not in out, f"row {key} read twice"
        out[key] = tuple(rest)
    return out


def manifest_entries(snapshot: dict) -> dict[str, dict]:
    """The live data file entries of `snapshot` as its manifests hold them (read as Avro), by
    file name. The sequence numbers of an ADDED entry left null are inherited from its
    manifest, as the spec says readers do; a first row ID is shown as stated."""
    con = judge.duckdb_connect("avro")
    listed = judge._sql_str(snapshot["manifest-list"])
    manifests = con.execute(
        f"SELECT manifest_path, sequence_number FROM read_avro({listed}) WHERE content = 0").fetchall()
    rows = []
    for manifest, inherited in manifests:
        for p, f, s, fs, status in con.execute(f"""
                SELECT data_file.file_path, data_file.first_row_id, sequence_number, file_sequence_number, status
                FROM read_avro({judge._sql_str(manifest)}) WHERE status < 2""").fetchall():
            added = status == 1
            rows.append((p, f, inherited if s is None and added else s, inherited if fs is None and added else fs))
    assert len({p for p, *_ in rows}) == len(rows), f"a data file twice: {rows}"
    return {Path(urlparse(p).path).name: {"first_row_id": f, "sequence_number": s, "file_sequence_number": fs}
            for p, f, s, fs in rows}


def assert_snapshot_carries_delta_row_ids(root: Path, java_generic, location: str, version: int):
    """The snapshot of `version` in the metadata at `location`, read by Java and DuckDB, has
    Delta's rows with Delta's row IDs and row commit versions."""
    metadata = metadata_json(location)
    snapshot = snapshots_by_version(metadata)[version]
    want = delta_row_lineage(root, version)
    # The hand-written log holds these rows for delta-kernel-rs too.
    judge.assert_same_rows([(k, v) for k, (v, _, _) in want.items()],
                           judge.delta_rows_duckdb(str(root), version=version, columns=["id", "v"]))
    java, meta = java_lineage(java_generic, location, snapshot["snapshot-id"])
    assert java == want, f"Java at version {version}: {diff(want, java)}"
    duck = duckdb_lineage(location, snapshot["snapshot-id"])
    assert duck == want, f"DuckDB at version {version}: {diff(want, duck)}"

    # Each data file's first row ID is its baseRowId, stated in its manifest entry (not
    # inherited), and its data and file sequence numbers are its defaultRowCommitVersion.
    adds = active_adds(root, version)[0]
    assert {Path(f["path"]).name: f["first-row-id"] for f in meta["data-files"]} == \
        {path: add["baseRowId"] for path, add in adds.items()}, version
    entries = manifest_entries(snapshot)
    assert entries == {path: {"first_row_id": add["baseRowId"], "sequence_number": add["defaultRowCommitVersion"],
                              "file_sequence_number": add["defaultRowCommitVersion"]}
                       for path, add in adds.items()}, version


def diff(want: dict, got: dict) -> str:
    wrong = {k: (want.get(k), got.get(k)) for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)}
    return f"{len(wrong)} rows differ (key: (expected, read)): {dict(list(wrong.items())[:8])}"


# ---------------------------------------------------------------- tests


def test_the_expected_row_ids_follow_the_protocol_through_update_delete_and_optimize(tmp_path):
    """The expectation itself, stated by hand for the last version: the replay applies the
    rules as meant (a mistake there would make every judgement below meaningless)."""
    log = write_history(tmp_path / "t")
    lineage = delta_row_lineage(log.root, LAST_VERSION)
    assert {k: r[1:] for k, r in lineage.items()} == {
        **{100 + i: (i, 0) for i in (0, 1, 3, 4, 6, 7, 8, 9)}, 102: (2, 2),  # updated at v2, 105 deleted at v5
        **{200 + i: (10 + i, 0) for i in range(5)},                         # b: never moved
        **{300 + i: (15 + i, 1) for i in (0, 2, 4, 5, 7)}}                  # c: 301, 306 at v3, 303 at v5


@pytest.mark.parametrize("how", ["commit-by-commit", "in-one-go"])
def test_row_ids_and_commit_versions_read_from_the_mirror_equal_deltas_at_every_version(
        how, tmp_path, glue_database, lakemirror, java_generic):
    log = write_history(tmp_path / "t")
    for version in (range(LAST_VERSION + 1) if how == "commit-by-commit" else [LAST_VERSION]):
        result = sync(lakemirror, log.uri, glue_database, version)
        assert result.json["delta_version"] == version
        assert_snapshot_carries_delta_row_ids(log.root, java_generic, result.json["metadata_location"], version)
        metadata = metadata_json(result.json["metadata_location"])
        mark = active_adds(log.root, version)[1]
        assert metadata["next-row-id"] == mark + 1, "one past Delta's row ID high-water mark"

    # Every version stays readable with Delta's row IDs by time travel, also those synced in
    # one go (one snapshot per version).
    location = result.json["metadata_location"]
    assert sorted(snapshots_by_version(metadata_json(location))) == list(range(LAST_VERSION + 1))
    for version in range(LAST_VERSION):
        assert_snapshot_carries_delta_row_ids(log.root, java_generic, location, version)

    properties = judge.glue_catalog().load_table((glue_database, "t")).properties
    assert properties.get("lakemirror.delta.row-lineage") == "true"
    mapping = json.loads(properties["schema.name-mapping.default"])
    assert {"field-id": ROW_ID_FIELD_ID, "names": [ROW_ID_COLUMN]} in mapping
    assert {"field-id": LAST_UPDATED_FIELD_ID, "names": [COMMIT_VERSION_COLUMN]} in mapping


# A table whose row IDs are not Delta's: row tracking absent, or supported (files carry
# baseRowId, rewritten files materialized values) but not enabled, when the protocol says
# those IDs cannot be relied upon. The mirror assigns its own, as before.
NOT_ENABLED = {
    "without-row-tracking": ({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {}),
    "supported-not-enabled": (
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                      "writerFeatures": ["domainMetadata", "rowTracking"]}},
        {key: value for key, value in ROW_TRACKING.items() if key.startswith("delta.rowTracking.")}),
}


@pytest.mark.parametrize("kind", NOT_ENABLED)
def test_a_table_without_row_tracking_enabled_keeps_the_mirrors_own_row_ids(
        kind, tmp_path, glue_database, lakemirror, java_generic):
    protocol, configuration = NOT_ENABLED[kind]
    supported = bool(configuration)
    log = DeltaLog(tmp_path / "t")

    def add(name, table, base_row_id, version, data_change=True):
        action = log.add(name, table)
        return tracked(action, base_row_id, version, data_change) if supported else action

    x = add("x.parquet", data(range(1, 6), list("abcde")), 1000, 0)
    log.commit(protocol, log.metadata(FIELDS, configuration), x, *([high_water_mark(1004)] if supported else []))
    y = add("y.parquet", data(range(6, 9), list("fgh")), 1005, 1)
    log.commit(y, *([high_water_mark(1007)] if supported else []))
    # A compaction; with row tracking supported, Delta's row IDs are kept materialized.
    z = add("z.parquet", data(range(1, 9), list("abcdefgh"), *(
        (range(1000, 1008), [0] * 5 + [1] * 3) if supported else ())), 1008, 2, data_change=False)
    log.commit(remove(x, log, False), remove(y, log, False), z, *([high_water_mark(1015)] if supported else []))

    before = {}
    for version in range(3):
        result = sync(lakemirror, log.uri, glue_database, version)
        location = result.json["metadata_location"]
        metadata = metadata_json(location)
        snapshot_id = metadata["current-snapshot-id"]
        java, _ = java_lineage(java_generic, location, snapshot_id)
        duck = duckdb_lineage(location, snapshot_id)
        keys = range(1, 6) if version == 0 else range(1, 9)
        assert {k: r[0] for k, r in java.items()} == {k: "abcdefgh"[k - 1] for k in keys}
        assert duck == java, f"DuckDB and Java agree on every row's lineage: {diff(java, duck)}"
        row_ids = [r[1] for r in java.values()]
        # The mirror's own IDs: present, unique, below the table's next row ID (so neither
        # Delta's baseRowIds nor its materialized values), and the same across an append.
        assert None not in row_ids and len(set(row_ids)) == len(row_ids), row_ids
        assert max(row_ids) < metadata["next-row-id"] < 1000, (row_ids, metadata["next-row-id"])
        if version == 1:
            assert {k: java[k][1] for k in before} == before, "an append leaves the rows already there their row IDs"
        before = {k: r[1] for k, r in java.items()}
    properties = judge.glue_catalog().load_table((glue_database, "t")).properties
    assert "lakemirror.delta.row-lineage" not in properties


@pytest.mark.parametrize("how", ["commit-by-commit", "in-one-go"])
def test_the_rows_a_commit_inserted_or_updated_are_those_whose_last_updated_sequence_number_is_its_snapshots(
        how, tmp_path, glue_database, lakemirror):
    """Iceberg's contract for incremental readers: `_last_updated_sequence_number` is the
    sequence number of the snapshot that last changed the row. Delta's row commit versions
    are Delta versions, so each snapshot's sequence number must be its Delta version, as
    UniForm makes it: delta-io/delta's IcebergConversionTransaction.TransactionHelper.commit
    sets Iceberg's last sequence number to version - 1 before each commit, so version 0 gets
    sequence number 0 (Java's TableMetadata.Builder.addSnapshot, like iceberg-rust's, accepts
    a sequence number not past the last for a snapshot without a parent)."""
    log = write_history(tmp_path / "t")
    for version in (range(LAST_VERSION + 1) if how == "commit-by-commit" else [LAST_VERSION]):
        result = sync(lakemirror, log.uri, glue_database, version)
    location = result.json["metadata_location"]
    metadata = metadata_json(location)
    snapshots = snapshots_by_version(metadata)
    changed_by = {version: {k for k, (_, _, commit_version) in delta_row_lineage(log.root, version).items()
                            if commit_version == version} for version in snapshots}
    assert changed_by == {0: set(range(100, 110)) | set(range(200, 205)), 1: set(range(300, 308)),
                          2: {102, 105}, 3: set(), 4: set(), 5: set()}
    read = {version: {k for k, (_, _, sequence_number) in duckdb_lineage(location, s["snapshot-id"]).items()
                      if sequence_number == s["sequence-number"]} for version, s in snapshots.items()}
    sequence_numbers = {v: s["sequence-number"] for v, s in sorted(snapshots.items())}
    assert read == changed_by, f"sequence numbers of the snapshots by Delta version: {sequence_numbers}"
    assert sequence_numbers == {v: v for v in snapshots}
    assert metadata["last-sequence-number"] == LAST_VERSION
