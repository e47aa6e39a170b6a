"""The judgement of a mirror: independent readers through Glue agree with delta-rs."""

import json

from deltalake import DeltaTable

from rig import judge


def files_of_current_snapshot(database, table, catalog=None) -> list[str]:
    """Every live data file entry of the current snapshot, read from its manifests (a scan
    would skip files that hold no rows)."""
    tbl = (catalog or judge.glue_catalog()).load_table((database, table))
    snapshot = tbl.current_snapshot()
    if snapshot is None:
        return []
    from pyiceberg.manifest import ManifestContent

    return [entry.data_file.file_path
            for manifest in snapshot.manifests(tbl.io) if manifest.content == ManifestContent.DATA
            for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True)]


def omitted_declarations(properties) -> list[dict]:
    """`lakemirror.omitted-columns`: [{"column": path, "reason": text}], each with its reason."""
    declared = json.loads(properties.get("lakemirror.omitted-columns", "[]"))
    assert all(isinstance(d, dict) and d.get("column") and d.get("reason") for d in declared), \
        f"every column left out is declared with its reason: {declared}"
    return declared


def omitted_columns(properties) -> list[str]:
    """The logical paths of the columns a mirror leaves out."""
    return [d["column"] for d in omitted_declarations(properties)]


def assert_mirrors(delta_uri, database, table, result, storage_options=None, version=None, expected_rows=None,
                   java=None, catalog=None):
    """The Glue table at `result` equals the Delta table at `version` (newest when None).

    Judges: pyiceberg through Glue, DuckDB on the metadata file, and Java Iceberg when `java`
    (the `java_iceberg` fixture) is given, which needs a local table. `catalog`: the pyiceberg
    catalog the table is in (Glue unless given). Columns the mirror left
    out for Java's sake (`lakemirror.omitted-columns`, also in the sync report) are left out
    of the comparison, nested ones from inside their structs."""
    delta = DeltaTable(delta_uri, storage_options=storage_options, version=version)
    columns = [f.name for f in delta.schema().fields]
    want = expected_rows if expected_rows is not None else _delta_rows(delta, delta_uri, version, columns)

    assert result.json["delta_version"] == delta.version()
    catalog = catalog or judge.glue_catalog()
    iceberg = catalog.load_table((database, table))
    omitted = omitted_columns(iceberg.properties)
    assert result.json.get("omitted_columns", []) == omitted, "the report names the columns left out"
    want, columns = without_paths(want, columns, omitted)
    got = judge.iceberg_rows_pyiceberg(database, table, columns=columns, catalog=catalog)
    judge.assert_same_rows(_as_pyiceberg_reads_them(want, columns, delta.schema().fields), got)
    duckdb_columns = _columns_duckdb_can_read(delta, columns)
    got_duckdb = judge.iceberg_rows_duckdb(result.json["metadata_location"], columns=duckdb_columns)
    judge.assert_same_rows(_project(want, columns, duckdb_columns), got_duckdb)
    if java is not None:
        judge.assert_same_rows(want, java.rows(result.json["metadata_location"], columns=columns))

    snapshots = judge.iceberg_snapshots(database, table, catalog=catalog)
    assert snapshots[-1]["summary"]["delta.version"] == str(delta.version())
    versions = [int(s["summary"]["delta.version"]) for s in snapshots]
    assert versions == sorted(set(versions)), f"each Delta version in one snapshot, in order: {versions}"
    schema_ids = {s.schema_id for s in iceberg.metadata.schemas}
    for snapshot in iceberg.metadata.snapshots:
        assert snapshot.schema_id in schema_ids, f"snapshot {snapshot.snapshot_id} names a schema the table lacks"

    paths = files_of_current_snapshot(database, table, catalog=catalog)
    assert len(paths) == len(set(paths)), "a data file is referenced twice"
    assert len(paths) == len(delta.file_uris()), "the mirror holds exactly Delta's active files"
    assert snapshots[-1]["summary"]["total-data-files"] == str(len(paths))
    return snapshots


def without_paths(rows, columns, omitted):
    """Rows and columns without the omitted columns: `c` drops a column, `s.f` a struct field,
    `l.element.f` / `m.value.f` a field of the structs inside a list or a map's values."""
    top = {path for path in omitted if "." not in path}
    nested = [path.split(".") for path in omitted if "." in path]
    keep = [i for i, c in enumerate(columns) if c not in top]

    def drop(value, parts):
        if value is None:
            return None
        head, rest = parts[0], parts[1:]
        if head == "element":
            return [drop(v, rest) for v in value]
        if head == "value":
            return [(k, drop(v, rest)) for k, v in value]
        if not rest:
            return {k: v for k, v in value.items() if k != head}
        return {**value, head: drop(value[head], rest)}

    out = []
    for row in rows:
        row = list(row)
        for parts in nested:
            i = columns.index(parts[0])
            row[i] = drop(row[i], parts[1:])
        out.append(tuple(row[i] for i in keep))
    return out, [columns[i] for i in keep]


def _delta_rows(delta, delta_uri, version, columns):
    """delta-rs rows; where delta-rs 1.6.6 refuses a reader feature (deletion vectors) or
    reads wrong values (every column null on column-mapped tables, see the shared tables'
    README), the rows DuckDB's delta extension (delta-kernel-rs) reads."""
    from deltalake.exceptions import DeltaProtocolError

    if delta.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
        return judge.delta_rows_duckdb(delta_uri, version=version, columns=columns)
    try:
        return judge.arrow_rows(delta.to_pyarrow_table())
    except DeltaProtocolError:
        return judge.delta_rows_duckdb(delta_uri, version=version, columns=columns)


def _columns_duckdb_can_read(delta, columns):
    """DuckDB 1.5.5 matches Parquet columns by field ID once a file has any, and does not
    fall back to the name mapping for nested fields without one, as the Iceberg spec asks.
    Spark's column-mapped files carry IDs for struct fields but not for list elements and
    map keys/values, so for those tables DuckDB is judged on the columns without lists or
    maps (duckdb/duckdb-iceberg#903, open: it reads such lists as nulls, without an error);
    pyiceberg (which follows the spec) and Java are judged on every column."""
    from deltalake.schema import ArrayType, MapType, StructType

    if delta.metadata().configuration.get("delta.columnMapping.mode", "none") == "none":
        return columns

    def nested(t):
        if isinstance(t, (ArrayType, MapType)):
            return True
        return isinstance(t, StructType) and any(nested(f.type) for f in t.fields)

    skip = {f.name for f in delta.schema().fields if nested(f.type)}
    return [c for c in columns if c not in skip]


def _project(rows, columns, wanted):
    index = [columns.index(c) for c in wanted]
    return [tuple(row[i] for i in index) for row in rows]


def _as_pyiceberg_reads_them(rows, columns, fields):
    """pyiceberg 0.12 reads a null list<struct> or map<_, struct> as an empty one
    (apache/iceberg-python#3833, open); DuckDB reads them right and is compared unchanged.
    Only those columns' nulls are adjusted for the pyiceberg comparison."""
    from deltalake.schema import ArrayType, MapType, StructType

    def hit(t):
        return (isinstance(t, ArrayType) and isinstance(t.element_type, StructType)) or (
            isinstance(t, MapType) and isinstance(t.value_type, StructType))

    affected = [columns.index(f.name) for f in fields if hit(f.type) and f.name in columns]
    if not affected:
        return rows
    return [tuple([] if i in affected and v is None else v for i, v in enumerate(row)) for row in rows]
