"""Delta statistics that are not exact bounds must not make readers skip rows.

Readers prune data files by the Iceberg bounds lakemirror derives from `add.stats`. Delta
writes some stats that are not bounds in Iceberg's sense: Delta before 3.3 truncated a long
string max to 32 UTF-16 units plus U+FFFD, which sorts *below* the real max in UTF-8 when the
cut character is an emoji; and timestamps are kept at millisecond precision, so the real max
lies up to 999 µs above the written one. Here a log is written by hand with exactly those
stats over two data files, and filtered reads of the real extreme values must find their rows,
while a filter no row matches still prunes (so the bounds are really there and used).
"""

import datetime as dt
import json
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual

from rig import judge

PREFIX = "a" * 32
UTC = dt.timezone.utc
# File 1 holds the extremes that Delta's stats understate; file 2 ordinary values.
FILES = {
    "extremes": {
        "id": [1, 2],
        "s": ["a", PREFIX + "\U0001F600 and more"],
        "ts": [dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=UTC)],
    },
    "ordinary": {
        "id": [3, 4],
        "s": ["m", "n"],
        "ts": [dt.datetime(2023, 1, 1, tzinfo=UTC), dt.datetime(2023, 6, 1, tzinfo=UTC)],
    },
}
SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": n, "type": t, "nullable": True, "metadata": {}}
    for n, t in (("id", "long"), ("s", "string"), ("ts", "timestamp"))]})


def delta_stats(columns) -> str:
    """Stats as Delta before 3.3 wrote them: long strings truncated (max gets U+FFFD),
    timestamps truncated to the millisecond."""

    def ms(t):
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"

    def max_string(s):
        return s if len(s) <= 32 else s[:32] + "\ufffd"

    return json.dumps({
        "numRecords": len(columns["id"]),
        "minValues": {"id": min(columns["id"]), "s": min(columns["s"])[:32], "ts": ms(min(columns["ts"]))},
        "maxValues": {"id": max(columns["id"]), "s": max_string(max(columns["s"])), "ts": ms(max(columns["ts"]))},
        "nullCount": {"id": 0, "s": 0, "ts": 0},
    })


def write_table(root: Path):
    adds = []
    for name, columns in FILES.items():
        table = pa.table({"id": pa.array(columns["id"], pa.int64()), "s": columns["s"],
                          "ts": pa.array(columns["ts"], pa.timestamp("us", tz="UTC"))})
        root.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, root / f"{name}.parquet")
        adds.append({"add": {"path": f"{name}.parquet", "partitionValues": {},
                             "size": (root / f"{name}.parquet").stat().st_size,
                             "modificationTime": int(time.time() * 1000), "dataChange": True,
                             "stats": delta_stats(columns)}})
    (root / "_delta_log").mkdir()
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000)}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": SCHEMA, "partitionColumns": [], "configuration": {},
                      "createdTime": int(time.time() * 1000)}},
        *adds,
    ]
    (root / "_delta_log" / f"{0:020}.json").write_text("\n".join(json.dumps(a) for a in actions))


def test_understated_string_and_timestamp_maxima_still_find_their_rows(tmp_path, bucket, glue_database, upload_dir, lakemirror):
    write_table(tmp_path / "t")
    upload_dir(tmp_path / "t", bucket, "tables/stats")
    uri = f"s3://{bucket}/tables/stats"
    result = lakemirror("glue-sync", "--table-uri", uri, "--database", glue_database, "--table", "t")
    tbl = judge.glue_catalog().load_table((glue_database, "t"))
    longest, latest = FILES["extremes"]["s"][1], FILES["extremes"]["ts"][1]

    def ids(row_filter):
        return sorted(tbl.scan(row_filter=row_filter, selected_fields=("id",)).to_arrow()["id"].to_pylist())

    def planned(row_filter):
        return sorted(Path(t.file.file_path).name for t in tbl.scan(row_filter=row_filter).plan_files())

    def where(column, keep):
        return sorted(i for f in FILES.values() for i, v in zip(f["id"], f[column]) if keep(v))

    assert ids(EqualTo("s", longest)) == [2]
    assert ids(GreaterThanOrEqual("s", longest)) == where("s", lambda v: v >= longest) == [2, 3, 4]
    assert ids(EqualTo("ts", latest.isoformat())) == [2]
    assert ids(GreaterThanOrEqual("ts", latest.isoformat())) == where("ts", lambda v: v >= latest) == [2]
    # The bounds are there and prune: only the file that can hold the value is planned.
    assert planned(EqualTo("s", longest)) == ["extremes.parquet"]
    assert planned(EqualTo("s", "zzz")) == []
    assert planned(EqualTo("ts", dt.datetime(2023, 6, 1, tzinfo=UTC).isoformat())) == ["ordinary.parquet"]

    # DuckDB, which also prunes by manifest bounds, agrees.
    con = judge.duckdb_connect("avro", "iceberg")
    scan = f"iceberg_scan({judge._sql_str(result.json['metadata_location'])})"
    assert con.execute(f"SELECT id FROM {scan} WHERE s = ?", [longest]).fetchall() == [(2,)]
    assert con.execute(f"SELECT id FROM {scan} WHERE ts >= ?", [latest]).fetchall() == [(2,)]


def test_stats_kept_only_as_a_struct_in_the_checkpoint_are_read_there(bucket, glue_database, delta_storage_options,
                                                                      lakemirror):
    """With `delta.checkpoint.writeStatsAsJson=false` a checkpoint keeps each file's stats only
    in `add.stats_parsed`. The mirror takes record counts and bounds from there instead of
    reading every data file's footer (two ranged GETs each)."""
    from deltalake import DeltaTable, write_deltalake

    from acceptance.mirror_check import assert_mirrors

    uri, files = f"s3://{bucket}/tables/struct-stats", 12
    for n in range(files):
        write_deltalake(uri, pa.table({"id": pa.array(range(10 * n, 10 * n + 5), pa.int64()),
                                       "day": pa.array([dt.date(2026, 1, 1 + n)] * 5, pa.date32())}),
                        mode="append", storage_options=delta_storage_options,
                        configuration={"delta.checkpoint.writeStatsAsJson": "false",
                                       "delta.checkpoint.writeStatsAsStruct": "true"})
    DeltaTable(uri, storage_options=delta_storage_options).create_checkpoint()
    result = lakemirror("glue-sync", "--table-uri", uri, "--database", glue_database, "--table", "struct_stats")
    assert result.json["io"]["requests"] < 2 * files, result.json["io"]
    assert_mirrors(uri, glue_database, "struct_stats", result, storage_options=delta_storage_options)
    tbl = judge.glue_catalog().load_table((glue_database, "struct_stats"))
    assert sorted(t.file.record_count for t in tbl.scan().plan_files()) == [5] * files
    # The date bounds came through (as dates): a filter on one day plans one file.
    assert len(tbl.scan(row_filter=EqualTo("day", "2026-01-03")).plan_files()) == 1
