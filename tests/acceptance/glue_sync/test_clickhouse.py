"""ClickHouse 26.9 (chDB 4.4.0, in-process) as a fourth Iceberg reader of mirrors, in format
versions 2 and 3 (issue 52).

ClickHouse reads a mirror by its metadata file: `icebergLocal('<table root>', SETTINGS
iceberg_metadata_file_path='_lakemirror/iceberg/metadata/<file>.metadata.json')`. The
metadata's `location` is the Delta table root and ClickHouse resolves manifest and data
paths against the path it is given, so it gets the table root, not `_lakemirror/iceberg`
("Cannot get metadata of file .../_lakemirror/iceberg/_lakemirror/iceberg/metadata/snap-...").

Tables: local copies of ../shared/delta-tables and ../shared/delta-features (never written
to), each format version in its own copy (an existing mirror keeps its version). Expected
rows: DuckDB's delta_scan (delta-kernel-rs), as in test_v3_types.py. ClickHouse has one
String type for Iceberg's string and binary, so strings are compared as their UTF-8 bytes.

Of the shared tables, 14 of 18 read equal to Delta in both format versions, and so do
allow_column_defaults and crc-full. The limits, each asserted where it shows with the exact
error or wrong answer, so that a fixed ClickHouse is noticed:
- Iceberg v3 deletion vectors (Puffin): every read fails, `count()` too: "Position deletes
  are supported only for parquet format" (ClickHouse#107502; read support merged in
  ClickHouse#110781, after 26.9). The v2 mirror's position-delete files read right.
  dv-partitioned-with-checkpoint.
- A NULL struct, list or map reads as a struct of NULLs, `[]` or `{}`, without an error:
  ClickHouse types an Iceberg struct as Tuple, never Nullable(Tuple), which 26.9 has
  (IcebergSchemaProcessor::getFieldType, the root named in ClickHouse#112648); Array and Map
  cannot be Nullable in ClickHouse. parquet-all-types and the column-mapped tables.
- ClickHouse ignores `schema.name-mapping.default`: it matches a file's columns by field ID
  (ClickHouse#83065) or else by name, never through the mapping (no upstream issue found).
  Spark's column-mapped files carry no IDs for list elements, so `array_of_structs` reads
  as `[]` on every row; the same table with its files' field IDs stripped reads NULL in
  every column, 6 rows, no error (pyiceberg reads that copy through the mapping).
- A map whose key is a list (the column-mapped tables' struct_of_arrays_maps_of_structs.ab,
  map<array<int>, struct>) fails the query: ClickHouse's Parquet reader takes the key's
  LIST group for a struct ("parquet type is Tuple, requested type is Array(Nullable(Int32))",
  TYPE_MISMATCH), in any Parquet file (no upstream issue found).
Limits of the v3 types, on ../shared/delta-features:
- variant: a table with one cannot be read at all, whichever columns are selected: "Unknown
  Iceberg type: variant" (support open in ClickHouse#117198). Its v2 mirror, variants left
  out, reads equal to Delta.
- geometry / geography need `allow_geo_types_in_iceberg=1` as a query setting
  (ClickHouse#103113; as an icebergLocal setting it is an "Unknown setting"), then read as
  `Geometry`. table-with-geo holds a schema only; issue 52 read the values right on tables
  written with rig/geo_parquet.py.
- `initial-default` is ignored: rows of a file without the column read NULL (no upstream
  issue found; Altinity/ClickHouse#2390 lists defaults as not started). Shown on a copy of
  allow_column_defaults whose one data file is rewritten without the defaulted column, as a
  file written before the column was added would be.
Not shown here, as no table in ../shared has them (measured in issue 52): INT96 timestamps
outside 1677-09-22 .. 2262-04-11 fail the query ("INT96 timestamp out of range",
VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE; delta-stats-optional's INT96 values are in range and read
right); materialized row lineage (Delta's materialized row-ID and commit-version columns,
which the mirror maps by name) is ignored like the rest of the name mapping, so `_row_id` is
always first_row_id + position; a table without columns fails ("Schema with id 0 is
unknown"), and the mirror never writes one.
"""

import contextlib
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import chdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from acceptance.mirror_check import without_paths
from conftest import REPO
from rig import judge

FEATURES = REPO.parent / "shared" / "delta-features"


def shared_tables():
    """The shared tables' names (test_shared_tables.py); a missing folder fails in the
    delta_tables_dir fixture."""
    root = Path(os.environ.get("LAKEMIRROR_DELTA_TABLES", REPO.parent / "shared" / "delta-tables"))
    expected = root / "expected.json"
    return sorted(json.loads(expected.read_text())) if expected.exists() else []


DELETION_VECTORS = "dv-partitioned-with-checkpoint"
ALL_TYPES = "parquet-all-types"
COLUMN_MAPPED = ["table-with-columnmapping-mode-id", "table-with-columnmapping-mode-name"]
# The shared tables ClickHouse reads equal to Delta in both format versions: all but those
# above, and the delta-features tables without a variant or geo column.
EQUAL_SHARED = [n for n in shared_tables() if n not in {DELETION_VECTORS, ALL_TYPES, *COLUMN_MAPPED}]
EQUAL_FEATURES = ["allow_column_defaults", "crc-full"]
VARIANT_TABLES = ["databricks153-variant", "spark-shredded-variant-preview-delta", "variant-stats-no-checkpoint"]

# chDB 4.4.0 raises chdb._exceptions.ChdbError, a RuntimeError; chdb.ChdbError is another class.
QueryFailed = RuntimeError
DV_ERROR = ("Code: 36. DB::Exception: Position deletes are supported only for parquet format: "
            "While executing ReadFromObjectStorage. (BAD_ARGUMENTS)")
VARIANT_ERROR = "New method error: DB::Exception: Unknown Iceberg type: variant. (BAD_ARGUMENTS)"
GEO_ERROR = ("New method error: DB::Exception: Using geometry/geography types is not allowed without "
             "enabled allow_geo_types_in_iceberg flag. (BAD_ARGUMENTS)")


class ClickHouse:
    """One in-process chDB session for the module; reads a mirror by its metadata file.

    ClickHouse reads local files only under its user_files_path, which chDB leaves at "."
    (and ignores as a connection option), resolved per query: a query runs from `base`, the
    tests' temporary root, the folder the table copies are in."""

    def __init__(self, base: Path):
        self.base = base.resolve()
        self.conn = chdb.connect(":memory:")

    def query(self, sql) -> pa.Table:
        with contextlib.chdir(self.base):
            try:
                data = self.conn.query(sql, "Arrow").bytes()
            except QueryFailed:
                # chDB 4.4.0 keeps what a failed query wrote of its Arrow output (the file
                # header) and prepends it to the next result ("Invalid flatbuffers message",
                # "Unexpected empty message in IPC file format"): a TSV query takes it.
                self.conn.query("SELECT 1", "TSV")
                raise
        return pa.ipc.open_file(pa.BufferReader(data)).read_all()

    def version(self) -> str:
        return str(self.conn.query("SELECT version()", "TSV")).strip()

    @staticmethod
    def source(root, result, table_settings="") -> str:
        """icebergLocal over the table root, naming the metadata file relative to it."""
        root = Path(root).resolve()
        metadata = Path(urlparse(result.json["metadata_location"]).path).relative_to(root)
        return (f"icebergLocal({judge._sql_str(root)}, "
                f"SETTINGS iceberg_metadata_file_path={judge._sql_str(metadata)}{table_settings})")

    def rows(self, root, result, columns, settings="") -> list[tuple]:
        """The rows of `columns`, strings as bytes. In the UTC session time zone Iceberg's
        timestamp (DateTime64(6)) reads as the wall-clock time Delta's timestamp_ntz holds."""
        select = ", ".join("`" + c.replace("`", "\\`") + "`" for c in columns)
        table = self.query(f"SELECT {select} FROM {self.source(root, result)} "
                           f"SETTINGS session_timezone = 'UTC'{settings}")
        return as_bytes(judge.arrow_rows(table, columns))


@pytest.fixture(scope="module")
def clickhouse(tmp_path_factory):
    reader = ClickHouse(tmp_path_factory.getbasetemp())
    yield reader
    reader.conn.close()


def test_clickhouse_is_the_version_these_limits_were_measured_on(clickhouse):
    assert (chdb.__version__, clickhouse.version()) == ("4.4.0", "26.9.2.1"), \
        "a new ClickHouse: measure its limits again and update this file and docs/mirror.md"


# ---------------------------------------------------------------- helpers


def mirrored(lakemirror, source: Path, tmp_path, database, version, table="t"):
    """A fresh local copy of `source` mirrored in format `version`: (its root, the report)."""
    root = tmp_path / f"{source.name}-v{version}"
    shutil.copytree(source, root)
    return root, sync(lakemirror, root, database, version, table)


def sync(lakemirror, root, database, version, table="t"):
    result = lakemirror("glue-sync", "--table-uri", root, "--glue-database", database, "--glue-table", table,
                        "--iceberg-format-version", version)
    assert metadata_json(result)["format-version"] == version
    return result


def metadata_json(result) -> dict:
    return json.loads(Path(urlparse(result.json["metadata_location"]).path).read_text())


def iceberg_fields(result) -> list[dict]:
    metadata = metadata_json(result)
    return next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])["fields"]


def delta_expected(root, result) -> tuple[list[tuple], list[str]]:
    """DuckDB delta_scan's rows of the columns the mirror keeps (a nested one left out of its
    struct), strings as bytes, and those columns' names."""
    con = judge.duckdb_connect("delta")
    columns = [d[0] for d in con.execute(f"SELECT * FROM delta_scan({judge._sql_str(root)}) LIMIT 0").description]
    omitted = result.json["omitted_columns"]
    rows, columns = without_paths(judge.delta_rows_duckdb(root, columns=[c for c in columns if c not in omitted]),
                                  [c for c in columns if c not in omitted], omitted)
    assert sorted(columns) == sorted(f["name"] for f in iceberg_fields(result))
    return as_bytes(rows), columns


def as_bytes(value):
    """Strings as their UTF-8 bytes, at every level (ClickHouse's String is Iceberg's string
    and binary both)."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, list):
        return [as_bytes(v) for v in value]
    if isinstance(value, tuple):
        return tuple(as_bytes(v) for v in value)
    if isinstance(value, dict):
        return {k: as_bytes(v) for k, v in value.items()}
    return value


def clickhouse_null(type_):
    """What ClickHouse 26.9 reads for a NULL of an Iceberg type: a struct of its fields'
    NULLs, an empty list or map; NULL only for a primitive."""
    if isinstance(type_, dict) and type_["type"] == "struct":
        return {f["name"]: clickhouse_null(f["type"]) for f in type_["fields"]}
    if isinstance(type_, dict):
        return []
    return None


def as_clickhouse_reads_it(type_, value):
    """A Delta value with every NULL struct, list or map in it as ClickHouse reads it."""
    if value is None:
        return clickhouse_null(type_)
    if not isinstance(type_, dict):
        return value
    if type_["type"] == "struct":
        return {f["name"]: as_clickhouse_reads_it(f["type"], value[f["name"]]) for f in type_["fields"]}
    if type_["type"] == "list":
        return [as_clickhouse_reads_it(type_["element"], v) for v in value]
    return [(k, as_clickhouse_reads_it(type_["value"], v)) for k, v in value]


def null_composites(type_, value) -> int:
    """How many NULL structs, lists and maps `value` holds, at any depth."""
    if not isinstance(type_, dict):
        return 0
    if value is None:
        return 1
    if type_["type"] == "struct":
        return sum(null_composites(f["type"], value[f["name"]]) for f in type_["fields"])
    if type_["type"] == "list":
        return sum(null_composites(type_["element"], v) for v in value)
    return sum(null_composites(type_["value"], v) for _, v in value)


def fields_by_name(result, columns) -> list[dict]:
    by_name = {f["name"]: f for f in iceberg_fields(result)}
    return [by_name[c] for c in columns]


def rewrite_in_place(root: Path, rewrite):
    """Rewrite every data file of a local Delta table (`rewrite(pa.Table) -> pa.Table`) and
    fix the sizes (and drop the stats) its log's add actions give; the Hadoop .crc files go."""
    for crc in root.glob(".*.crc"):
        crc.unlink()
    sizes = {}
    for path in root.glob("*.parquet"):
        table = rewrite(pq.read_table(path))
        path.chmod(0o644)
        pq.write_table(table, path)
        sizes[path.name] = path.stat().st_size
    for commit in (root / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        for action in actions:
            if "add" in action and action["add"]["path"] in sizes:
                action["add"]["size"] = sizes[action["add"]["path"]]
                action["add"].pop("stats", None)
        commit.chmod(0o644)
        commit.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    for crc in (root / "_delta_log").glob(".*.crc"):
        crc.unlink()


# ---------------------------------------------------------------- tables that read equal


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("where, name", [("delta-tables", n) for n in EQUAL_SHARED]
                         + [("delta-features", n) for n in EQUAL_FEATURES])
def test_clickhouse_reads_the_mirror_equal_to_delta(
        where, name, version, delta_tables_dir, tmp_path, glue_database, lakemirror, clickhouse):
    source = (delta_tables_dir if where == "delta-tables" else FEATURES) / name
    root, result = mirrored(lakemirror, source, tmp_path, glue_database, version)
    expected, columns = delta_expected(root, result)
    judge.assert_same_rows(expected, clickhouse.rows(root, result, columns), columns=columns)


# ---------------------------------------------------------------- deletion vectors


def test_position_deletes_read_right_in_v2_and_v3_deletion_vectors_fail_every_read(
        delta_tables_dir, tmp_path, glue_database, lakemirror, clickhouse):
    source = delta_tables_dir / DELETION_VECTORS
    root, result = mirrored(lakemirror, source, tmp_path, glue_database, 2)
    expected, columns = delta_expected(root, result)
    assert len(expected) == 35
    judge.assert_same_rows(expected, clickhouse.rows(root, result, columns), columns=columns)

    # The same deletes as Puffin deletion vectors (ClickHouse#107502); with
    # use_roaring_bitmap_iceberg_positional_deletes=1 it fails the same way.
    root3, result3 = mirrored(lakemirror, source, tmp_path, glue_database, 3, table="t3")
    for select in ("*", "count()"):
        with pytest.raises(QueryFailed, match=re.escape(DV_ERROR)):
            clickhouse.query(f"SELECT {select} FROM {clickhouse.source(root3, result3)}")



def test_row_ids_of_files_without_materialized_values_read_as_duckdb_reads_them(
        delta_tables_dir, tmp_path, glue_database, lakemirror, clickhouse):
    # ClickHouse's virtual columns `_row_id` (first_row_id + position) and
    # `_last_updated_sequence_number` (the data sequence number) are right for files without
    # materialized values: a table without row tracking, 30 files. (Materialized values it
    # cannot see: they reach the mirror's fields through the name mapping only.)
    root, result = mirrored(lakemirror, delta_tables_dir / "basic-with-checkpoint", tmp_path, glue_database, 3)
    columns = [f["name"] for f in iceberg_fields(result)] + ["_row_id", "_last_updated_sequence_number"]
    duckdb = judge.duckdb_connect("avro", "iceberg").execute(
        f"SELECT {judge._select_list(columns)} FROM iceberg_scan({judge._sql_str(result.json['metadata_location'])})")
    expected = as_bytes(judge.arrow_rows(duckdb.to_arrow_table()))
    assert len({row[-2] for row in expected}) == len(expected) == 150, "distinct row IDs"
    judge.assert_same_rows(expected, clickhouse.rows(root, result, columns), columns=columns)

# ---------------------------------------------------------------- NULL structs, lists and maps


@pytest.mark.parametrize("version", [2, 3])
def test_a_null_struct_list_or_map_reads_as_a_struct_of_nulls_or_empty(
        version, delta_tables_dir, tmp_path, glue_database, lakemirror, clickhouse):
    root, result = mirrored(lakemirror, delta_tables_dir / ALL_TYPES, tmp_path, glue_database, version)
    expected, columns = delta_expected(root, result)
    fields = fields_by_name(result, columns)
    assert sum(null_composites(f["type"], v) for row in expected for f, v in zip(fields, row)) > 0
    # Every primitive equal, every NULL struct / list / map as ClickHouse reads it.
    want = [tuple(as_clickhouse_reads_it(f["type"], v) for f, v in zip(fields, row)) for row in expected]
    judge.assert_same_rows(want, clickhouse.rows(root, result, columns), columns=columns)
    assert str(clickhouse.query(f"SELECT toTypeName(nested_struct) AS t FROM {clickhouse.source(root, result)} "
                                "LIMIT 1").column("t")[0]).startswith("Tuple("), "not Nullable(Tuple(...))"


# ---------------------------------------------------------------- the name mapping


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("name", COLUMN_MAPPED)
def test_a_list_whose_elements_have_no_field_id_reads_empty_and_a_map_keyed_by_a_list_fails(
        name, version, delta_tables_dir, tmp_path, glue_database, lakemirror, clickhouse):
    # Spark's column-mapped files carry field IDs for columns and struct fields but not for
    # list elements and map keys / values; the mirror's name mapping names them (pyiceberg
    # and Java read them through it), ClickHouse does not read the mapping.
    root, result = mirrored(lakemirror, delta_tables_dir / name, tmp_path, glue_database, version)
    expected, columns = delta_expected(root, result)
    # struct_of_arrays_maps_of_structs.ab is a map whose key is a list: ClickHouse's Parquet
    # reader takes a LIST-annotated key group for a struct (Tuple(list Array(Tuple(element
    # ...)))), also in a file of pyarrow's without field IDs, and fails the whole query.
    keyed_by_a_list = "struct_of_arrays_maps_of_structs"
    kept = fields_by_name(result, [keyed_by_a_list])[0]["type"]["fields"]
    assert [(f["name"], f["type"]["type"], f["type"]["key"]["type"]) for f in kept] == [("ab", "map", "list")]
    with pytest.raises(QueryFailed, match=re.escape("(mapped to struct_of_arrays_maps_of_structs.ab) doesn't match "
                                                    "parquet schema: parquet type is Tuple, requested type is "
                                                    "Array(Nullable(Int32))")):
        clickhouse.rows(root, result, [keyed_by_a_list])
    keep = [i for i, c in enumerate(columns) if c != keyed_by_a_list]
    expected, columns = [tuple(row[i] for i in keep) for row in expected], [columns[i] for i in keep]
    # array_of_structs: [] on every row; NULL structs and maps as in
    # test_a_null_struct_list_or_map_reads_as_a_struct_of_nulls_or_empty; the rest equal.
    fields = fields_by_name(result, columns)
    lists = columns.index("array_of_structs")
    assert any(row[lists] for row in expected), "Delta has array_of_structs values"
    want = [tuple([] if i == lists else as_clickhouse_reads_it(f["type"], v)
                  for i, (f, v) in enumerate(zip(fields, row))) for row in expected]
    judge.assert_same_rows(want, clickhouse.rows(root, result, columns), columns=columns)


def without_field_ids(table: pa.Table) -> pa.Table:
    def strip(type_):
        if pa.types.is_struct(type_):
            return pa.struct([pa.field(f.name, strip(f.type), f.nullable) for f in type_])
        if pa.types.is_map(type_):
            return pa.map_(pa.field("key", strip(type_.key_type), False), pa.field("value", strip(type_.item_type)))
        if pa.types.is_list(type_) or pa.types.is_large_list(type_):
            return pa.list_(pa.field("element", strip(type_.value_type), type_.value_field.nullable))
        return type_

    schema = pa.schema([pa.field(f.name, strip(f.type), f.nullable) for f in table.schema])
    return table.cast(schema)


def test_files_without_field_ids_read_null_in_every_column(
        delta_tables_dir, tmp_path, glue_database, lakemirror, clickhouse):
    # table-with-columnmapping-mode-name with its files rewritten without field IDs, as a
    # writer that puts none in its files leaves them: the columns keep their physical names
    # (col-<uuid>), which only the name mapping ties to the Iceberg fields.
    root = tmp_path / "cm-without-ids"
    shutil.copytree(delta_tables_dir / "table-with-columnmapping-mode-name", root)
    rewrite_in_place(root, without_field_ids)
    assert not any(re.search(r"field_id=(?!-1\b)", str(pq.ParquetFile(p).schema)) for p in root.glob("*.parquet"))
    result = sync(lakemirror, root, glue_database, 2)
    expected, columns = delta_expected(root, result)
    fields = fields_by_name(result, columns)
    assert len(expected) == 6
    # pyiceberg applies the mapping and reads the primitive columns equal to Delta.
    primitives = [i for i, f in enumerate(fields) if not isinstance(f["type"], dict)]
    got = as_bytes(judge.iceberg_rows_pyiceberg(glue_database, "t", columns=[columns[i] for i in primitives]))
    judge.assert_same_rows([tuple(row[i] for i in primitives) for row in expected], got)
    # ClickHouse: six rows of NULLs (structs of NULLs, empty lists and maps), no error.
    nulls = tuple(clickhouse_null(f["type"]) for f in fields)
    judge.assert_same_rows([nulls] * 6, clickhouse.rows(root, result, columns), columns=columns)


# ---------------------------------------------------------------- format version 3 types


@pytest.mark.parametrize("name", VARIANT_TABLES)
def test_a_table_with_a_variant_cannot_be_read_in_v3_and_reads_equal_without_it_in_v2(
        name, tmp_path, glue_database, lakemirror, clickhouse):
    root, result = mirrored(lakemirror, FEATURES / name, tmp_path, glue_database, 2)
    assert result.json["omitted_columns"], "v2 leaves the variant columns out"
    expected, columns = delta_expected(root, result)
    assert expected
    judge.assert_same_rows(expected, clickhouse.rows(root, result, columns), columns=columns)

    root3, result3 = mirrored(lakemirror, FEATURES / name, tmp_path, glue_database, 3, table="t3")
    assert result3.json["omitted_columns"] == []
    for select in (f"`{columns[0]}`", "count()"):
        with pytest.raises(QueryFailed, match=re.escape(VARIANT_ERROR)):
            clickhouse.query(f"SELECT {select} FROM {clickhouse.source(root3, result3)}")


def test_geo_columns_need_allow_geo_types_in_iceberg_as_a_query_setting(
        tmp_path, glue_database, lakemirror, clickhouse):
    root, result = mirrored(lakemirror, FEATURES / "table-with-geo", tmp_path, glue_database, 3)
    assert [(f["name"], f["type"]) for f in iceberg_fields(result)] == [("geom", "geometry"), ("geog", "geography")]
    source = clickhouse.source(root, result)
    with pytest.raises(QueryFailed, match=re.escape(GEO_ERROR)):
        clickhouse.query(f"SELECT * FROM {source}")
    with pytest.raises(QueryFailed, match=re.escape("Unknown setting 'allow_geo_types_in_iceberg'")):
        clickhouse.query(f"SELECT * FROM {clickhouse.source(root, result, ', allow_geo_types_in_iceberg = 1')}")
    described = clickhouse.query(f"DESCRIBE {source} SETTINGS allow_geo_types_in_iceberg = 1")
    assert judge.arrow_rows(described, ["name", "type"]) == [("geom", "Geometry"), ("geog", "Geometry")]
    assert clickhouse.rows(root, result, ["geom", "geog"], ", allow_geo_types_in_iceberg = 1") == []


def test_initial_default_is_ignored_and_a_file_without_the_column_reads_null(
        tmp_path, glue_database, lakemirror, clickhouse):
    # allow_column_defaults: `b` has EXISTS_DEFAULT 16, and its one file holds b = 16. Here
    # the file is rewritten without `b`, as one written before `b` was added would be: its
    # row is (1, 16) by Delta's rule and by Iceberg's initial-default.
    root = tmp_path / "defaults"
    shutil.copytree(FEATURES / "allow_column_defaults", root)
    rewrite_in_place(root, lambda table: table.select(["a"]))
    result = sync(lakemirror, root, glue_database, 3)
    assert iceberg_fields(result)[1] == {"id": 2, "name": "b", "required": False, "type": "int",
                                         "initial-default": 16, "write-default": 16}
    assert judge.iceberg_rows_duckdb(result.json["metadata_location"]) == [(1, 16)], "DuckDB applies initial-default"
    assert clickhouse.rows(root, result, ["a", "b"]) == [(1, None)]
