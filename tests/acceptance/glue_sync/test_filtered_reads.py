"""Filtered reads of every mirrored shared table return the rows Delta holds.

lakemirror turns Delta's `add.stats` into Iceberg bounds and null counts
(shared/plan/src/metrics.rs), and readers skip whole data files by them: a bound tighter
than the data silently loses rows from a filtered read, while the unfiltered reads of
assert_mirrors never notice. So each column with stats is read with the predicates that sit
exactly on the edges of its data (= max, = min, >= max, <= min, IS NULL), through Glue with
pyiceberg and from the metadata JSON with DuckDB, and compared with the same predicate applied
to the Delta rows.
"""

import datetime as dt
import json
import operator
import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual, IsNull, LessThanOrEqual

from acceptance.mirror_check import (_as_pyiceberg_reads_them, _columns_duckdb_can_read, _delta_rows, _project,
                                     omitted_columns, without_paths)
from acceptance.glue_sync.test_shared_tables import OMITTED, REFUSED, shared_tables, upload
from conftest import REPO
from rig import judge

# Delta types whose stats become bounds, riskiest conversion first (see metrics.rs); binary,
# boolean and nested columns are left out.
KINDS = ["timestamp", "timestamp_ntz", "float", "decimal", "string", "double", "date",
         "long", "integer", "short", "byte"]
PREDICATES = {"=": (EqualTo, operator.eq), ">=": (GreaterThanOrEqual, operator.ge), "<=": (LessThanOrEqual, operator.le)}


def _kind(field):
    return getattr(field.type, "type", "").split("(")[0]


def filter_columns(name, limit=4):
    """Up to `limit` top-level primitive columns some active file has Delta stats for, one of
    each kind first (partition columns have no stats), leaving out the columns the mirror
    leaves out."""
    root = Path(os.environ.get("LAKEMIRROR_DELTA_TABLES", REPO.parent / "shared" / "delta-tables"))
    delta = DeltaTable(str(root / name))
    adds = pa.table(delta.get_add_actions(flatten=True))
    with_min = {c for c in adds.column_names if c.startswith("min.") and adds[c].null_count < adds.num_rows}
    seen, ranked = Counter(), []
    for f in delta.schema().fields:
        physical = f.metadata.get("delta.columnMapping.physicalName", f.name)
        if _kind(f) in KINDS and f"min.{physical}" in with_min and f.name not in OMITTED.get(name, []):
            ranked.append((seen[_kind(f)], KINDS.index(_kind(f)), f.name))
            seen[_kind(f)] += 1
    return [name for *_, name in sorted(ranked)[:limit]]


def sql_literal(value, field):
    """`value` as a DuckDB literal of the column's own type, so that the comparison happens in
    that type and can be pushed down to the bounds: a FLOAT literal is the exact float32 value,
    a TIMESTAMPTZ one says its offset (not the session time zone's)."""
    kind = _kind(field)
    if kind == "string":
        return judge._sql_str(value)
    if kind in ("long", "integer", "short", "byte"):
        return str(value)
    if kind == "timestamp":
        return f"CAST({judge._sql_str(value.astimezone(dt.timezone.utc).isoformat())} AS TIMESTAMPTZ)"
    if kind == "timestamp_ntz":
        return f"CAST({judge._sql_str(value.isoformat())} AS TIMESTAMP)"
    text = repr(value) if kind in ("float", "double") else str(value)  # float, double, decimal, date
    return f"CAST({judge._sql_str(text)} AS {field.type.type.upper()})"


def assert_manifests_carry_bounds(tbl):
    # Without bounds every filtered read would pass, whatever the bounds would have been.
    manifests = [m.manifest_path for m in tbl.current_snapshot().manifests(tbl.io) if m.content.name == "DATA"]
    con = judge.duckdb_connect("avro")
    bounded = con.execute(
        f"""SELECT count(*) FROM read_avro([{", ".join(judge._sql_str(m) for m in manifests)}])
            WHERE status < 2 AND cardinality(data_file.lower_bounds) > 0""").fetchone()[0]
    assert bounded > 0, "no live data file in the mirror has lower bounds"


@pytest.mark.parametrize("name", [n for n in shared_tables() if n not in REFUSED and filter_columns(n)])
def test_filtered_reads_at_the_edges_of_the_data_lose_no_rows(name, delta_tables_dir, bucket, glue_database, upload_dir, lakemirror, subtests):
    uri = upload(delta_tables_dir, name, bucket, upload_dir)
    result = lakemirror("glue-sync", "--table-uri", uri, "--database", glue_database, "--table", "t")
    delta = DeltaTable(uri, storage_options=judge.delta_storage_options())
    fields = delta.schema().fields
    columns = [f.name for f in fields]
    rows = _delta_rows(delta, uri, None, columns)
    tbl = judge.glue_catalog().load_table((glue_database, "t"))
    # Compared without the columns the mirror leaves out for Java's sake (see mirror_check).
    rows, columns = without_paths(rows, columns, omitted_columns(tbl.properties))
    fields = [f for f in fields if f.name in columns]
    duckdb_columns = _columns_duckdb_can_read(delta, columns)
    assert_manifests_carry_bounds(tbl)
    con = judge.duckdb_connect("avro", "iceberg")
    scan = f"SELECT {judge._select_list(duckdb_columns)} FROM iceberg_scan({judge._sql_str(result.json['metadata_location'])})"

    for column in filter_columns(name):
        i, field = columns.index(column), fields[columns.index(column)]
        values = [r[i] for r in rows if r[i] is not None]
        low, high = min(values), max(values)
        cases = [("=", high), ("=", low), (">=", high), ("<=", low)]
        quoted = judge._select_list([column])
        for op, value in cases + ([("IS NULL", None)] if len(values) < len(rows) else []):
            if op == "IS NULL":
                want = [r for r in rows if r[i] is None]
                expr, where = IsNull(column), f"{quoted} IS NULL"
            else:
                # pyiceberg takes the values as the Delta reader gives them: an aware datetime
                # is a timestamptz literal, a naive one a timestamp; a float32 value is exact
                # as a Python float; a Decimal has the column's scale, as pyiceberg requires.
                make, holds = PREDICATES[op]
                want = [r for r in rows if r[i] is not None and holds(r[i], value)]
                expr, where = make(column, value), f"{quoted} {op} {sql_literal(value, field)}"
            with subtests.test(msg=f"pyiceberg: {column} {op} {value!r}"):
                reader = tbl.scan(row_filter=expr).to_arrow_batch_reader()
                got = [row for batch in reader for row in judge.arrow_rows(pa.Table.from_batches([batch]), columns)]
                judge.assert_same_rows(_as_pyiceberg_reads_them(want, columns, fields), got, columns)
            with subtests.test(msg=f"duckdb: WHERE {where}"):
                got = judge._duckdb_rows(con, f"{scan} WHERE {where}")
                judge.assert_same_rows(_project(want, columns, duckdb_columns), got, duckdb_columns)
