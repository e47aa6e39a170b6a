"""Crash at every step (issue 8, properties 3 and 6): the process is aborted
(`LAKEMIRROR_CRASH_AT=<step>`, SIGABRT, as a killed Lambda stops) after each externally visible
step of a sync, for each kind of commit. The table stays readable at the old or the new
version, never broken; the next sync converges; the judges are pyiceberg, DuckDB and Java
Iceberg (Glue) and a Delta reader (PostgreSQL)."""

import signal
import subprocess

import psycopg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from acceptance.mirror_check import _delta_rows, assert_mirrors
from acceptance.lakebase.test_lakebase import pg_rows
from rig import judge

ABORTED = (-signal.SIGABRT, 128 + signal.SIGABRT, 134)
SYNC_STEPS = ["mirror-after-manifest", "mirror-after-manifest-list", "mirror-after-metadata", "mirror-before-commit",
              "mirror-after-commit"]


def ids(values):
    return pa.table({"id": pa.array(values, pa.int64()), "part": pa.array([v % 2 for v in values], pa.int64())})


COMMITS = {
    "append": lambda uri, so: write_deltalake(uri, ids([10, 11]), mode="append", storage_options=so),
    "delete": lambda uri, so: DeltaTable(uri, storage_options=so).delete("id = 2"),
    "overwrite": lambda uri, so: write_deltalake(uri, ids([7]), mode="overwrite", partition_by=["part"],
                                                 storage_options=so),
    "schema-change": lambda uri, so: write_deltalake(
        uri, ids([20]).append_column("note", pa.array(["new"])), mode="append", schema_mode="merge",
        partition_by=["part"], storage_options=so),
}


def delta_rows(uri, so, version):
    delta = DeltaTable(uri, storage_options=so, version=version)
    return _delta_rows(delta, uri, version, [f.name for f in delta.schema().fields])


@pytest.mark.parametrize("step", SYNC_STEPS)
@pytest.mark.parametrize("kind", sorted(COMMITS))
def test_a_glue_sync_killed_at_any_step_leaves_a_readable_table_and_the_next_sync_converges(
        kind, step, tmp_path, glue_database, lakemirror, java_iceberg):
    # A local table, so that Java Iceberg judges the table the crash left too.
    name = kind.replace("-", "_")
    uri = str(tmp_path / name)
    write_deltalake(uri, ids([1, 2, 3]), partition_by=["part"])
    args = ["glue-sync", "--table-uri", uri, "--glue-database", glue_database]
    lakemirror(*args)
    COMMITS[kind](uri, None)

    crashed = lakemirror(*args, env={"LAKEMIRROR_CRASH_AT": step}, check=False)
    assert crashed.returncode in ABORTED, crashed
    # Readable, at the version before the commit or (crashed after the Glue update) after it.
    committed = step == "mirror-after-commit"
    version = 1 if committed else 0
    columns = [f.name for f in DeltaTable(uri, version=version).schema().fields]
    want = delta_rows(uri, None, version)
    judge.assert_same_rows(want, judge.iceberg_rows_pyiceberg(glue_database, name, columns=columns))
    location = judge.glue_catalog().load_table((glue_database, name)).metadata_location
    judge.assert_same_rows(want, java_iceberg.rows(location, columns=columns))

    result = lakemirror(*args)
    assert result.json["snapshots_committed"] == (0 if committed else 1)
    assert_mirrors(uri, glue_database, name, result, java=java_iceberg)


LAKEBASE_FULL_STEPS = ["lakebase-after-copy", "lakebase-after-index", "lakebase-after-swap", "lakebase-after-state"]
LAKEBASE_INCREMENT_STEPS = ["lakebase-increment-after-copy", "lakebase-increment-after-apply", "lakebase-after-state"]


@pytest.mark.parametrize("mode,step", [("full_refresh", s) for s in LAKEBASE_FULL_STEPS]
                         + [("incremental", s) for s in LAKEBASE_INCREMENT_STEPS])
def test_a_reverse_sync_killed_at_any_step_changes_nothing_and_the_next_run_converges(
        mode, step, tmp_path, postgres_url, lakemirror):
    path = str(tmp_path / "t")
    write_deltalake(path, ids([1, 2, 3]))
    args = ["lakebase-sync", "--source-path", path, "--target-table", "t", "--primary-key", "id", "--mode", mode,
            "--postgres-url", postgres_url]
    lakemirror(*args)
    DeltaTable(path).delete("id = 2")
    write_deltalake(path, ids([4]), mode="append")

    crashed = lakemirror(*args, env={"LAKEMIRROR_CRASH_AT": step}, check=False)
    assert crashed.returncode in ABORTED, crashed
    assert sorted(pg_rows(postgres_url, '"public"."t"', ["id"])) == [(1,), (2,), (3,)]
    with psycopg.connect(postgres_url) as con:
        assert con.execute("SELECT delta_version, rows FROM lakemirror.sync_state").fetchall() == [(0, 3)]
        assert con.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'lakemirror_new_%'").fetchone() == (0,)

    done = lakemirror(*args).json
    assert (done["mode"], done["delta_version"]) == (mode, 2)
    assert sorted(pg_rows(postgres_url, '"public"."t"', ["id"])) == [(1,), (3,), (4,)]


def test_concurrent_reverse_syncs_of_one_target_serialise(tmp_path, postgres_url, lakemirror_bin):
    path = str(tmp_path / "t")
    write_deltalake(path, ids(list(range(1000))))
    args = [str(lakemirror_bin), "lakebase-sync", "--source-path", path, "--target-table", "t",
            "--primary-key", "id", "--postgres-url", postgres_url]
    runs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outcomes = [(run.wait(timeout=300), run.stderr.read()) for run in runs]
    for run in runs:
        run.stdout.close()
        run.stderr.close()
    assert [code for code, _ in outcomes] == [0, 0, 0, 0], outcomes
    assert sorted(pg_rows(postgres_url, '"public"."t"', ["id"])) == [(i,) for i in range(1000)]
    with psycopg.connect(postgres_url) as con:
        assert con.execute("SELECT delta_version, rows FROM lakemirror.sync_state").fetchall() == [(0, 1000)]
        assert con.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'lakemirror_new_%'").fetchone() == (0,)
