"""Reverse sync of the Delta 3.x-4.x features (issue 42): variant columns (plain and shredded)
as jsonb, geometry/geography as PostGIS types or WKB bytea, column defaults as DEFAULT.

The judge for `../shared/delta-features/`: DuckDB 1.5.5's delta_scan (delta-kernel-rs), which
reads variant; a variant is compared as JSON (DuckDB's `CAST(v AS JSON)` against psycopg's
jsonb), a SQL NULL apart from the variant null (`IS NULL` on both sides). delta-rs 1.6.6 is no
judge here: it refuses the variantType and geospatial reader features.

Geospatial tables: no Delta reader here reads them (delta_scan refuses the type, see
rig/geo.py), so the values are judged through the Parquet files the log keeps active: their
bytes (pyarrow) for WKB bytea, DuckDB's read_parquet GEOMETRY as WKB for PostGIS.
"""

import json
import os
import shutil
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from acceptance.lakebase.test_lakebase import pg_rows
from rig import geo, judge
from rig.delta_log import DeltaLog, column

REPO = Path(__file__).resolve().parents[3]


def features_dir() -> Path:
    return Path(os.environ.get("LAKEMIRROR_DELTA_FEATURES", REPO.parent / "shared" / "delta-features")).resolve()


def feature_tables() -> list[str]:
    root = features_dir()
    return sorted(p.name for p in root.iterdir() if (p / "_delta_log").is_dir()) if root.is_dir() else []


@pytest.fixture(scope="module")
def delta_features_dir() -> Path:
    path = features_dir()
    if not path.is_dir():
        pytest.fail(f"the Delta feature tables are missing at {path}; set LAKEMIRROR_DELTA_FEATURES", pytrace=False)
    return path


def schema_fields(path) -> list[dict]:
    """The top-level fields of the newest metaData in the log (read here, not by lakemirror)."""
    fields = None
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "metaData" in action:
                fields = json.loads(action["metaData"]["schemaString"])["fields"]
    return fields


def holds_variant(delta_type) -> bool:
    if isinstance(delta_type, str):
        return delta_type == "variant"
    return any(holds_variant(t) for t in (
        *(f["type"] for f in delta_type.get("fields", [])),
        *(delta_type[k] for k in ("elementType", "keyType", "valueType") if k in delta_type)))


def nested(delta_type) -> bool:
    return not isinstance(delta_type, str) or delta_type == "variant"


def duckdb_rows(path, fields, version=None):
    """Rows as delta_scan reads them: columns holding a variant as parsed JSON, with a flag
    per top-level variant telling a SQL NULL (True) from the variant null."""
    select = []
    for f in fields:
        name = '"' + f["name"].replace('"', '""') + '"'
        select.append(f"CAST({name} AS JSON)" if holds_variant(f["type"]) else name)
        if f["type"] == "variant":
            select.append(f"{name} IS NULL")
    con = judge.duckdb_connect("delta")
    at = "" if version is None else f", version => {int(version)}"
    rows = con.execute(f"SELECT {', '.join(select)} FROM delta_scan(?{at})", [str(path)]).fetchall()
    return [tuple(json.loads(v) if isinstance(v, str) and kind else v for v, kind in zip(row, json_columns(fields)))
            for row in rows]


def json_columns(fields) -> list[bool]:
    """Per selected value: whether it is JSON text (see duckdb_rows and postgres_rows)."""
    kinds = []
    for f in fields:
        kinds.append(holds_variant(f["type"]))
        if f["type"] == "variant":
            kinds.append(False)
    return kinds


def postgres_rows(url, table_sql, fields):
    """The same columns from PostgreSQL (jsonb parsed by psycopg), the same NULL flags."""
    columns = [f["name"] for f in fields]
    rows = pg_rows(url, table_sql, columns)
    out = []
    for row in rows:
        values = []
        for f, v in zip(fields, row):
            values.append(v)
            if f["type"] == "variant":
                values.append(v is None)
        out.append(tuple(values))
    if any(f["type"] == "variant" for f in fields):
        # psycopg reads the jsonb null and SQL NULL both as None: the flags come from SQL.
        flags = [f'"{f["name"]}" IS NULL' for f in fields if f["type"] == "variant"]
        with psycopg.connect(url) as con:
            nulls = con.execute(f"SELECT {', '.join(flags)} FROM {table_sql}").fetchall()
        out = [fix_flags(row, fields, flag_row) for row, flag_row in zip(out, nulls)]
    return out


def fix_flags(row, fields, flags):
    row, flags = list(row), iter(flags)
    i = 0
    for f in fields:
        i += 1
        if f["type"] == "variant":
            row[i] = next(flags)
            i += 1
    return tuple(row)


def column_types(url, table="t") -> dict:
    with psycopg.connect(url) as con:
        return dict(con.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped", [f'"public"."{table}"']).fetchall())


def column_defaults(url, table="t") -> dict:
    with psycopg.connect(url) as con:
        return dict(con.execute(
            "SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d "
            "JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum WHERE d.adrelid = %s::regclass",
            [f'"public"."{table}"']).fetchall())


def sync(lakemirror, url, path, *extra, table="t", check=True):
    return lakemirror("lakebase-sync", "--source-path", path, "--target-table", table, "--postgres-url", url,
                      *extra, check=check)


# ------------------------------------------------------------------ ../shared/delta-features


@pytest.mark.parametrize("name", feature_tables())
def test_every_delta_features_table_reverse_syncs_equal_to_delta(name, delta_features_dir, postgres_url, lakemirror):
    path = delta_features_dir / name
    fields = schema_fields(path)
    result = sync(lakemirror, postgres_url, path)
    types = column_types(postgres_url)
    for f in fields:
        if nested(f["type"]):
            assert types[f["name"]] == "jsonb", f
    if name == "table-with-geo":
        # delta_scan refuses geometry ("Unsupported Delta table type"); the table is a schema
        # without data files (its log has no add action), so the rows are none.
        assert types == {"geom": "bytea", "geog": "bytea"}
        assert result.json["geospatial"] == "wkb_bytea"
        expected = []
    else:
        assert "geospatial" not in result.json
        expected = duckdb_rows(path, fields)
    actual = postgres_rows(postgres_url, '"public"."t"', fields)
    judge.assert_same_rows(expected, actual)
    assert result.json["rows_inserted"] == len(expected)


def test_variant_tables_apply_incrementally_at_every_version(delta_features_dir, postgres_url, lakemirror):
    """databricks153-variant (a key per insert, deletion vectors enabled) and the shredded
    variant-stats-no-checkpoint, version by version by primary key."""
    for name, key in [("databricks153-variant", "col_int"), ("variant-stats-no-checkpoint", "i")]:
        path = delta_features_dir / name
        fields = schema_fields(path)
        versions = sorted(int(p.stem) for p in (path / "_delta_log").glob("*.json"))
        modes = []
        for v in versions:
            result = sync(lakemirror, postgres_url, path, "--mode", "incremental", "--primary-key", key,
                          "--to-version", v, table=name)
            modes.append(result.json["mode"])
            judge.assert_same_rows(duckdb_rows(path, fields, version=v),
                                   postgres_rows(postgres_url, f'"public"."{name}"', fields))
        assert modes[1:] == ["incremental"] * (len(versions) - 1), (name, modes)


def test_allow_column_defaults_table_gets_its_default(delta_features_dir, postgres_url, lakemirror):
    sync(lakemirror, postgres_url, delta_features_dir / "allow_column_defaults")
    assert column_defaults(postgres_url) == {"b": "16"}
    with psycopg.connect(postgres_url) as con:
        con.execute('INSERT INTO "public"."t" (a) VALUES (2)')
        assert con.execute('SELECT b FROM "public"."t" WHERE a = 2').fetchone() == (16,)


# ------------------------------------------------------------------ column defaults


def test_literal_defaults_carry_over_and_others_are_named_in_a_warning(tmp_path, postgres_url, lakemirror):
    log = DeltaLog(tmp_path / "defaults")
    defaults = {"n": ("long", "-7L"), "s": ("string", "'it\\'s'"), "d": ("date", "DATE '2020-02-29'"),
                "ts": ("timestamp", "TIMESTAMP '2020-01-01 10:00:00+02:00'"),
                "ntz": ("timestamp_ntz", "TIMESTAMP_NTZ '2020-01-01 10:00:00'"), "ok": ("boolean", "true"),
                "dec": ("decimal(10,2)", "1.5"), "now": ("timestamp", "current_timestamp()")}
    fields = [column("id", "long")] + [
        column(name, t, metadata={"CURRENT_DEFAULT": text, "EXISTS_DEFAULT": text}) for name, (t, text) in defaults.items()]
    log.commit({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["allowColumnDefaults"]}},
               log.metadata(fields), log.add("a.parquet", pa.table({"id": pa.array([1], pa.int64())})))
    result = sync(lakemirror, postgres_url, log.uri, "--mode", "incremental", "--primary-key", "id")
    assert set(column_defaults(postgres_url)) == {"n", "s", "d", "ts", "ntz", "ok", "dec"}
    assert any('"now"' in w and "current_timestamp()" in w for w in result.json["warnings"]), result.json
    assert "now" in result.stderr
    with psycopg.connect(postgres_url) as con:
        con.execute('INSERT INTO "public"."t" (id) VALUES (2)')
        row = con.execute('SELECT n, s, d::text, ts = %s::timestamptz, ntz::text, ok, dec::text, now '
                          'FROM "public"."t" WHERE id = 2', ["2020-01-01 08:00:00+00"]).fetchone()
        con.execute('DELETE FROM "public"."t" WHERE id = 2')  # the mirror's rows are Delta's only
    assert row == (-7, "it's", "2020-02-29", True, "2020-01-01 10:00:00", True, "1.50", None)

    # Later: s's default changes, n's goes, a column is added with one. The rows there read
    # the new column as null (their files predate it), as Delta readers read them.
    defaults["s"] = ("string", "'new'")
    del defaults["n"]
    fields = [column("id", "long"), column("n", "long")] + [
        column(name, t, metadata={"CURRENT_DEFAULT": text}) for name, (t, text) in defaults.items()] + [
        column("added", "integer", metadata={"CURRENT_DEFAULT": "5", "EXISTS_DEFAULT": "5"})]
    log.commit(log.metadata(fields), log.add("b.parquet", pa.table({"id": pa.array([3], pa.int64())})))
    result = sync(lakemirror, postgres_url, log.uri, "--mode", "incremental", "--primary-key", "id")
    assert result.json["mode"] == "incremental"
    got = column_defaults(postgres_url)
    assert (got["s"], got["added"], "n" in got) == ("'new'::text", "5", False), got
    with psycopg.connect(postgres_url) as con:
        assert con.execute('SELECT id, added FROM "public"."t" ORDER BY id').fetchall() == [(1, None), (3, None)]


# ------------------------------------------------------------------ geometry / geography


def geo_history(root):
    """Version 1: four rows; version 2: row 2's values change (its file rewritten), row 4 is
    deleted, row 5 arrives. Returns the log and the active files at each version."""
    log = geo.geo_log(root)
    first = geo.geo_table(
        [1, 2, 3, 4],
        [geo.point(1, 2), geo.linestring((0, 0), (1, 1), (2, 0)), geo.point_z(1, 2, 3), None],
        [geo.point(-122.4, 37.8), geo.polygon((0, 0), (1, 0), (1, 1), (0, 1), (0, 0)), None,
         geo.point(13.4, 52.5, big_endian=True)],
        [geo.point(1_000_000, 2_000_000), None, geo.point(0, 0, big_endian=True), geo.point(5, 5)])
    a, b = first.slice(0, 2), first.slice(2, 2)
    log.commit(log.add("a.parquet", a), log.add("b.parquet", b))
    changed = geo.geo_table([1, 2], [geo.point(1, 2), geo.point(7, 8, big_endian=True)],
                            [geo.point(-122.4, 37.8), geo.point(2.35, 48.85)], [geo.point(1_000_000, 2_000_000), None])
    kept = b.slice(0, 1)
    new = geo.geo_table([5], [geo.polygon((0, 0), (2, 0), (2, 2), (0, 0))], [None], [geo.point(1, 1)])
    log.commit(remove("a.parquet"), remove("b.parquet"), log.add("a2.parquet", changed),
               log.add("b2.parquet", kept), log.add("c.parquet", new))
    return log, {1: ["a.parquet", "b.parquet"], 2: ["a2.parquet", "b2.parquet", "c.parquet"]}


def remove(path):
    return {"remove": {"path": path, "deletionTimestamp": 0, "dataChange": True, "partitionValues": {}}}


def parquet_values(root, files):
    """(id, geom, geog, merc) as the Parquet files hold them: WKB bytes."""
    rows = []
    for name in files:
        table = pq.read_table(Path(root) / name)
        storage = {c: (table[c].combine_chunks().storage if isinstance(table[c].type, pa.ExtensionType)
                       else table[c].combine_chunks()) for c in table.column_names}
        rows += list(zip(*(storage[c].to_pylist() for c in ("id", "geom", "geog", "merc"))))
    return rows


def duckdb_wkb(root, files):
    """(id, geom, geog, merc) by DuckDB's read_parquet (GEOMETRY), as little-endian WKB."""
    con = judge.duckdb_connect()
    paths = [str(Path(root) / f) for f in files]
    return con.execute("SELECT id, ST_AsWKB(geom), ST_AsWKB(geog), ST_AsWKB(merc) FROM read_parquet(?)",
                       [paths]).fetchall()


def postgis_available(url):
    with psycopg.connect(url) as con:
        if not con.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'postgis'").fetchone():
            pytest.fail("PostGIS is not installed for this PostgreSQL: apt-get install postgresql-15-postgis-3 "
                        "(tests/run.sh installs it)", pytrace=False)


def test_geo_columns_are_wkb_bytea_without_postgis(tmp_path, postgres_url, lakemirror):
    log, active = geo_history(tmp_path / "geo")
    for version in (1, 2):
        result = sync(lakemirror, postgres_url, log.uri, "--mode", "incremental", "--primary-key", "id",
                      "--to-version", version)
        assert result.json["geospatial"] == "wkb_bytea"
        assert column_types(postgres_url) == {"id": "bigint", "geom": "bytea", "geog": "bytea", "merc": "bytea"}
        actual = pg_rows(postgres_url, '"public"."t"', ["id", "geom", "geog", "merc"])
        judge.assert_same_rows(parquet_values(log.root, active[version]), actual)
    assert result.json["mode"] == "incremental"


def test_geo_columns_are_postgis_types_with_their_srid_where_postgis_is_installed(
        tmp_path, delta_features_dir, postgres_url, lakemirror):
    postgis_available(postgres_url)
    with psycopg.connect(postgres_url) as con:
        con.execute("CREATE SCHEMA gis")
        con.execute("CREATE EXTENSION postgis SCHEMA gis")  # off the search path: types are qualified
        con.commit()
    log, active = geo_history(tmp_path / "geo")
    for version in (1, 2):
        result = sync(lakemirror, postgres_url, log.uri, "--mode", "incremental", "--primary-key", "id",
                      "--to-version", version)
        assert result.json["geospatial"] == "postgis"
        # No type modifier (it would fix the dimensions: the POINT Z row); the values carry
        # the SRID.
        assert column_types(postgres_url) == {"id": "bigint", "geom": "gis.geometry", "geog": "gis.geography",
                                              "merc": "gis.geometry"}
        with psycopg.connect(postgres_url) as con:
            actual = con.execute(
                "SELECT id, gis.ST_AsBinary(geom, 'NDR'), gis.ST_AsBinary(geog, 'NDR'), gis.ST_AsBinary(merc, 'NDR') "
                'FROM "public"."t"').fetchall()
            srids = con.execute(
                'SELECT DISTINCT gis.ST_SRID(geom), gis.ST_SRID(geog), gis.ST_SRID(merc) FROM "public"."t" '
                "WHERE geom IS NOT NULL AND geog IS NOT NULL AND merc IS NOT NULL").fetchall()
        judge.assert_same_rows(duckdb_wkb(log.root, active[version]), actual)
        assert srids == [(4326, 4326, 3857)]
    assert result.json["mode"] == "incremental"
    assert (result.json["rows_inserted"], result.json["rows_updated"], result.json["rows_deleted"]) == (1, 1, 1)

    # The schema-only table of delta-features, into the same database.
    result = sync(lakemirror, postgres_url, delta_features_dir / "table-with-geo", table="g")
    assert result.json["geospatial"] == "postgis"
    assert column_types(postgres_url, "g") == {"geom": "gis.geometry", "geog": "gis.geography"}


def test_a_target_that_gains_postgis_asks_for_one_full_refresh(tmp_path, postgres_url, lakemirror):
    postgis_available(postgres_url)
    log, _ = geo_history(tmp_path / "geo")
    sync(lakemirror, postgres_url, log.uri, "--mode", "incremental", "--primary-key", "id", "--to-version", 1)
    with psycopg.connect(postgres_url) as con:
        con.execute("CREATE EXTENSION postgis")
        con.commit()
    failed = sync(lakemirror, postgres_url, log.uri, "--mode", "incremental", "--primary-key", "id", check=False)
    assert failed.returncode != 0
    assert "PostGIS was installed" in failed.stderr and "full refresh" in failed.stderr, failed.stderr
    result = sync(lakemirror, postgres_url, log.uri, "--primary-key", "id")
    assert result.json["geospatial"] == "postgis"
    assert column_types(postgres_url)["geom"] == "geometry"


def test_a_shredded_variant_table_applies_a_deletion_vector_incrementally(tmp_path, delta_features_dir, postgres_url,
                                                                        lakemirror):
    """variant-stats-no-checkpoint, copied and given a commit that deletes one row with a
    deletion vector (its shredded file kept as Databricks wrote it): the increment reads the
    shredded file again for the row that left. A file rewritten by pyarrow would lose the
    Parquet Variant annotation, and DuckDB 1.5.5 reads shredded variants only with it ("Shredded
    Variants are not supported yet")."""
    from acceptance.glue_sync.test_deletion_vectors import inline_deletion_vector, with_deletion_vector

    path = tmp_path / "shredded"
    shutil.copytree(delta_features_dir / "variant-stats-no-checkpoint", path)
    fields = schema_fields(path)
    sync(lakemirror, postgres_url, path, "--mode", "incremental", "--primary-key", "i")
    commit = [json.loads(line) for line in (path / "_delta_log" / "00000000000000000001.json").read_text().splitlines()]
    (add,) = [a["add"] for a in commit if "add" in a]
    position = pq.read_table(path / add["path"], columns=["i"])["i"].to_pylist().index(105)
    protocol = next(json.loads(line)["protocol"] for line in
                    (path / "_delta_log" / "00000000000000000000.json").read_text().splitlines() if '"protocol"' in line)
    protocol = {**protocol, "readerFeatures": [*protocol["readerFeatures"], "deletionVectors"],
                "writerFeatures": [*protocol["writerFeatures"], "deletionVectors"]}
    (path / "_delta_log" / "00000000000000000002.json").write_text("\n".join(json.dumps(a) for a in [
        {"commitInfo": {"timestamp": 1769217570000, "operation": "DELETE"}},
        {"protocol": protocol},
        {"remove": {"path": add["path"], "deletionTimestamp": 1769217570000, "dataChange": True,
                    "partitionValues": {}, "size": add["size"]}},
        {"add": with_deletion_vector(add, inline_deletion_vector([position]))}]))
    result = sync(lakemirror, postgres_url, path, "--mode", "incremental", "--primary-key", "i")
    assert (result.json["mode"], result.json["rows_deleted"]) == ("incremental", 1)
    expected = duckdb_rows(path, fields)
    assert len(expected) == 9
    judge.assert_same_rows(expected, postgres_rows(postgres_url, '"public"."t"', fields))
