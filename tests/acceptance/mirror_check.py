"""The judgement of a mirror: independent readers through Glue agree with delta-rs."""

from deltalake import DeltaTable

from rig import judge


def files_of_current_snapshot(database, table) -> list[str]:
    tbl = judge.glue_catalog().load_table((database, table))
    return [task.file.file_path for task in tbl.scan().plan_files()]


def assert_mirrors(delta_uri, database, table, result, storage_options=None, version=None, expected_rows=None):
    """The Glue table at `result` equals the Delta table at `version` (newest when None)."""
    delta = DeltaTable(delta_uri, storage_options=storage_options, version=version)
    want = judge.arrow_rows(delta.to_pyarrow_table()) if expected_rows is None else expected_rows
    columns = [f.name for f in delta.schema().fields]

    assert result.json["delta_version"] == delta.version()
    got = judge.iceberg_rows_pyiceberg(database, table, columns=columns)
    judge.assert_same_rows(want, got)
    got_duckdb = judge.iceberg_rows_duckdb(result.json["metadata_location"], columns=columns)
    judge.assert_same_rows(want, got_duckdb)

    snapshots = judge.iceberg_snapshots(database, table)
    assert snapshots[-1]["summary"]["delta.version"] == str(delta.version())
    versions = [int(s["summary"]["delta.version"]) for s in snapshots]
    assert versions == sorted(set(versions)), f"each Delta version in one snapshot, in order: {versions}"

    paths = files_of_current_snapshot(database, table)
    assert len(paths) == len(set(paths)), "a data file is referenced twice"
    assert len(paths) == len(delta.file_uris()), "the mirror holds exactly Delta's active files"
    return snapshots
