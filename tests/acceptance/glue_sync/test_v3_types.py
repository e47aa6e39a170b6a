"""Delta's variant, geometry / geography and column defaults, mirrored in Iceberg format
versions 2 and 3 (issue 42).

Tables: every table of ../shared/delta-features (written by Spark / Delta 4.x, Databricks
Runtime 15.3, Trino's and delta-kernel-rs's tests; `crc-full` and `table-with-geo` hold a
schema only), geospatial tables written here (Parquet GEOMETRY / GEOGRAPHY from pyarrow,
tests/rig/geo_parquet.py) and column-default histories (logs by hand, tests/rig/delta_log.py).

Expected rows come from DuckDB's delta_scan (delta-kernel-rs, which reads variant); delta-rs
1.6.6 refuses these tables' reader features (deletionVectors, variantShredding-preview). No
Delta reader here reads geospatial tables (delta-kernel-rs in DuckDB 1.5.5: "Unsupported
Delta table type: 'geometry(OGC:CRS84)'"): those are judged against the values written.

Judges:
- format version 2 (variant and geo columns left out, each declared in
  `lakemirror.omitted-columns` with a reason naming format version 3): pyiceberg through
  Glue, DuckDB iceberg_scan and Java Iceberg on Spark 3.5 (tests/rig/java_iceberg.py, which
  applies the name mapping) read every column kept equal to Delta (assert_mirrors). pyiceberg
  maps every column of a data file through the name mapping, the variant groups' `metadata`,
  `value` and `typed_value` too: the mirror's mapping must name them, also for a column it
  leaves out ("Could not find field with name: v.value" otherwise).
- format version 3: the schema in the metadata file (types, names, defaults) and as Java
  Iceberg parses it; Java Iceberg's generic reader with the name mapping applied
  (tests/rig/java_generic.py: IcebergGenerics itself ignores the mapping, apache/iceberg#6122)
  and DuckDB iceberg_scan read every column equal to Delta, variant values compared as JSON;
  pyiceberg too where it can load the table (it has no variant type in 0.12).

Reader limits met on the way, each asserted where it shows so that a fixed reader is noticed:
- DuckDB 1.5.5 iceberg_scan takes a Parquet group as a variant only with Parquet's VARIANT
  annotation, which Databricks 15.3 and Spark 4.0 did not write ("Can't change source type
  (STRUCT(value BLOB, metadata BLOB)) to target type (VARIANT)"). Its structural detection
  of such groups was made internal to the delta extension (duckdb/duckdb#21710: setting
  `__delta_only_variant_encoding_enabled`, which loading the delta extension turns on), so
  DuckDB judges those mirrors on a connection that has the delta extension loaded.
- DuckDB 1.5.5 iceberg_scan refuses a table with any geography column ("Not implemented
  Error: Geography support"), and a table without columns (an internal error); DuckDB judges
  geometry on a geometry-only table.
- DuckDB 1.5.5 casts a NULL variant to the JSON text 'null': variants are cast where not null.
- Java Iceberg 1.10.2's Parquet reader has no GEOMETRY / GEOGRAPHY logical type (added after
  1.11, apache/iceberg#16982): Java judges the geo types in its parsed metadata and reads the
  other columns of those tables.
- Java Iceberg 1.10.2 on Spark 3.5 cannot read a data file with a VARIANT-annotated group
  (Spark 4.1's), even when the table has no such column: its Spark readers visit every file
  column and do not implement variant ("Not implemented for variant",
  TypeWithSchemaVisitor.java:242). The generic reader judges those v2 mirrors for Java.
- Spark 3.5 has no variant or geo type, so the Spark-based Java judge is not used in v3;
  pyiceberg 0.12 has no variant type and cannot parse `geometry(EPSG:3857)`.
- DuckDB 1.5.5 cannot hand VARIANT to Arrow (duckdb/duckdb#24091): variants are read as JSON.
"""

import datetime as dt
import decimal
import json
import shutil
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from acceptance.mirror_check import assert_mirrors, omitted_columns, omitted_declarations
from conftest import REPO
from rig import geo_parquet as geo
from rig import judge
from rig.delta_log import DeltaLog, column
from rig.java_iceberg import JavaReadError

FEATURES = REPO.parent / "shared" / "delta-features"
FEATURE_TABLES = sorted(p.name for p in FEATURES.glob("*") if (p / "_delta_log").is_dir())

# The Iceberg schema of each format version 3 mirror: [name, type(, defaults)], a struct as
# its list of fields, ["list", element], ["map", key, value]; no field is required.
V3_SCHEMAS = {
    "allow_column_defaults": [["a", "int"], ["b", "int", {"initial-default": 16, "write-default": 16}]],
    "crc-full": [["id", "long"]],
    "databricks153-variant": [
        ["col_int", "int"], ["simple_variant", "variant"], ["array_variant", ["list", "variant"]],
        ["map_variant", ["map", "string", "variant"]], ["struct_variant", [["x", "variant"]]],
        ["col_string", "string"]],
    "spark-shredded-variant-preview-delta": [
        ["id", "long"], ["v", "variant"], ["array_of_variants", ["list", "variant"]],
        ["struct_of_variants", [["v", "variant"]]], ["map_of_variants", ["map", "string", "variant"]],
        ["array_of_struct_of_variants", ["list", [["v", "variant"]]]],
        ["struct_of_array_of_variants", [["v", ["list", "variant"]]]]],
    "table-with-geo": [["geom", "geometry"], ["geog", "geography"]],
    "variant-stats-no-checkpoint": [["i", "int"], ["v", "variant"], ["nv", [["v", "variant"]]]],
}
# In format version 2 each column holding a variant or geo value is left out whole: these
# tables have no struct with other fields beside one (the geo table below has).
V2_OMITTED = {
    "allow_column_defaults": [],
    "crc-full": [],
    "databricks153-variant": ["simple_variant", "array_variant", "map_variant", "struct_variant"],
    "spark-shredded-variant-preview-delta": ["v", "array_of_variants", "struct_of_variants", "map_of_variants",
                                             "array_of_struct_of_variants", "struct_of_array_of_variants"],
    "table-with-geo": ["geom", "geog"],
    "variant-stats-no-checkpoint": ["v", "nv"],
}


# ---------------------------------------------------------------- helpers


def local_copy(name, tmp_path) -> str:
    shutil.copytree(FEATURES / name, tmp_path / name)
    return str(tmp_path / name)


def sync(lakemirror, uri, database, format_version, *more, table="t"):
    return lakemirror("glue-sync", "--table-uri", uri, "--database", database, "--table", table,
                      "--iceberg-format-version", format_version, *more)


def metadata_json(result) -> dict:
    return json.loads(Path(urlparse(result.json["metadata_location"]).path).read_text())


def current_schema(metadata: dict) -> dict:
    return next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])


def shape(type_):
    """An Iceberg schema JSON type without field IDs (see V3_SCHEMAS)."""
    if isinstance(type_, str):
        return type_
    if type_["type"] == "struct":
        return [field_shape(f) for f in type_["fields"]]
    if type_["type"] == "list":
        return ["list", shape(type_["element"])] + (["element-required"] if type_["element-required"] else [])
    return ["map", shape(type_["key"]), shape(type_["value"])] + (["value-required"] if type_["value-required"] else [])


def field_shape(field):
    out = [field["name"], shape(field["type"])]
    defaults = {k: field[k] for k in ("initial-default", "write-default") if k in field}
    return out + ([defaults] if defaults else []) + (["required"] if field["required"] else [])


def schema_shape(metadata: dict):
    return shape(current_schema(metadata))


def without_defaults(fields):
    return [[f[0], without_defaults(f[1]) if isinstance(f[1], list) and f[1] and isinstance(f[1][0], list) else f[1]]
            for f in fields]


def delta_fields(uri, version=None) -> list[dict]:
    """The Delta schema (the log's schemaString) at `version` (newest when None)."""
    fields = None
    for commit in sorted((Path(uri) / "_delta_log").glob("*.json")):
        if version is not None and int(commit.stem) > version:
            break
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                fields = json.loads(action["metaData"]["schemaString"])["fields"]
    return fields


def has_variant(type_) -> bool:
    if type_ == "variant":
        return True
    if isinstance(type_, str):
        return False
    if type_["type"] == "struct":
        return any(has_variant(f["type"]) for f in type_["fields"])
    if type_["type"] == "array":
        return has_variant(type_["elementType"])
    return has_variant(type_["keyType"]) or has_variant(type_["valueType"])


def is_geo(type_) -> bool:
    return isinstance(type_, str) and type_.startswith(("geometry", "geography"))


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def duckdb_select(fields) -> str:
    """A select list that turns each variant into its JSON text (geometry into WKB), keeping
    nulls null at every level: DuckDB 1.5.5 casts a NULL variant to the JSON text 'null'."""
    depth = iter(range(1000))

    def convert(type_, expr):
        if type_ == "variant":
            return f"CASE WHEN {expr} IS NULL THEN NULL ELSE CAST({expr} AS JSON) END"
        if is_geo(type_):
            return f"ST_AsWKB({expr})"
        if isinstance(type_, str) or not (has_variant(type_) or has_geo(type_)):
            return expr
        if type_["type"] == "array":
            x = f"x{next(depth)}"
            return f"list_transform({expr}, {x} -> {convert(type_['elementType'], x)})"
        if type_["type"] == "map":
            e = f"e{next(depth)}"
            value = convert(type_["valueType"], f"{e}['value']")
            return f"map_from_entries(list_transform(map_entries({expr}), {e} -> {{'key': {e}['key'], 'value': {value}}}))"
        members = ", ".join(f"{quote(f['name'])} := {convert(f['type'], expr + '.' + quote(f['name']))}"
                            for f in type_["fields"])
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE struct_pack({members}) END"

    return ", ".join(f"{convert(f['type'], quote(f['name']))} AS {quote(f['name'])}" for f in fields)


def has_geo(type_) -> bool:
    if isinstance(type_, str):
        return is_geo(type_)
    if type_["type"] == "struct":
        return any(has_geo(f["type"]) for f in type_["fields"])
    if type_["type"] == "array":
        return has_geo(type_["elementType"])
    return has_geo(type_["keyType"]) or has_geo(type_["valueType"])


def canonical(type_, value, java=False):
    """A value as every judge should see it: variant as ("variant", its JSON with sorted
    keys), maps as (key, value) pairs; from the Java reader (`java`), its JSON forms
    (days, microseconds, hex, decimal strings) turned into Python values."""
    if value is None:
        return None
    if type_ == "variant":
        return ("variant", json.dumps(json.loads(value), sort_keys=True))
    if isinstance(type_, dict):
        if type_["type"] == "struct":
            return {f["name"]: canonical(f["type"], value[f["name"]], java) for f in type_["fields"]}
        if type_["type"] == "array":
            return [canonical(type_["elementType"], v, java) for v in value]
        return [(canonical(type_["keyType"], k, java), canonical(type_["valueType"], v, java)) for k, v in value]
    if not java:
        return value
    if type_ == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    if type_ in ("timestamp", "timestamp_ntz"):
        moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value)
        return moment.replace(tzinfo=dt.timezone.utc) if type_ == "timestamp" else moment
    if type_.startswith("decimal"):
        return decimal.Decimal(value)
    if type_ == "binary" or is_geo(type_):
        return bytes.fromhex(value)
    if type_ in ("float", "double"):
        return float(value)
    return value


def canonical_rows(fields, rows, java=False) -> list[tuple]:
    """Rows (tuples in `fields` order, or the Java reader's dicts) in canonical form."""
    out = []
    for row in rows:
        values = [row[f["name"]] for f in fields] if isinstance(row, dict) else row
        out.append(tuple(canonical(f["type"], v, java) for f, v in zip(fields, values)))
    return out


def delta_rows(uri, fields, version=None) -> list[tuple]:
    """What DuckDB's delta_scan (delta-kernel-rs) reads, variant as JSON."""
    con = judge.duckdb_connect("delta")
    options = "" if version is None else f", version => {int(version)}"
    rows = judge.arrow_rows(con.execute(
        f"SELECT {duckdb_select(fields)} FROM delta_scan({judge._sql_str(uri)}{options})").to_arrow_table())
    return canonical_rows(fields, rows)


def duckdb_iceberg_rows(result, fields, *extensions) -> list[tuple]:
    con = judge.duckdb_connect(*extensions, "avro", "iceberg")
    location = judge._sql_str(result.json["metadata_location"])
    rows = judge.arrow_rows(con.execute(f"SELECT {duckdb_select(fields)} FROM iceberg_scan({location})").to_arrow_table())
    return canonical_rows(fields, rows)


def java_rows(java_generic, result, fields, columns=None) -> tuple[list[tuple], dict]:
    rows, meta = java_generic.read(result.json["metadata_location"], columns=columns)
    return canonical_rows(fields, rows, java=True), meta


def variant_groups_annotated(uri) -> bool:
    """Whether every data file marks its variant groups with Parquet's VARIANT annotation
    (Spark 4.1 does; Databricks 15.3 and Spark 4.0 did not)."""
    return all("(Variant(" in str(pq.ParquetFile(f).metadata.schema) for f in Path(uri).glob("*.parquet"))


def java_types(meta) -> dict[str, str]:
    return {f["name"]: f["type"] for f in meta["fields"]}


def java_defaults(meta) -> dict[str, dict]:
    return {f["name"]: {k: f[k] for k in ("initial-default", "write-default") if f[k] is not None}
            for f in meta["fields"] if f["initial-default"] is not None or f["write-default"] is not None}


def expected_java_types(fields, prefix="") -> dict[str, str]:
    """The primitive types of V3_SCHEMAS-style fields by Java's column names (a list's
    element is `<list>.element`, a map's key and value `<map>.key` / `<map>.value`)."""
    out = {}

    def walk(name, type_):
        if isinstance(type_, str):
            out[name] = type_
        elif type_[0] == "list":
            walk(f"{name}.element", type_[1])
        elif type_[0] == "map":
            walk(f"{name}.key", type_[1])
            walk(f"{name}.value", type_[2])
        else:
            for f in type_:
                walk(f"{name}.{f[0]}", f[1])

    for f in fields:
        walk(prefix + f[0], f[1])
    return out


def expected_defaults(fields) -> dict[str, dict]:
    return {f[0]: f[2] for f in fields if len(f) > 2 and isinstance(f[2], dict)}


def assert_reasons_name_format_version_3(properties, omitted, kinds):
    declared = omitted_declarations(properties)
    assert [d["column"] for d in declared] == omitted
    for d in declared:
        assert "format version 3" in d["reason"], d
        assert any(kind in d["reason"] for kind in kinds), f"the reason names the Delta type: {d}"


# ---------------------------------------------------------------- ../shared/delta-features


@pytest.mark.parametrize("name", FEATURE_TABLES)
def test_a_delta_features_table_mirrors_in_format_version_2_without_only_its_variant_and_geo_columns(
        name, tmp_path, glue_database, lakemirror, java_iceberg, java_generic):
    uri = local_copy(name, tmp_path)
    omitted = V2_OMITTED[name]
    fields = delta_fields(uri)
    kept = [f for f in fields if f["name"] not in omitted]
    if not kept:
        # table-with-geo: both columns left out would be an Iceberg table without columns,
        # which DuckDB 1.5.5 cannot bind ("Table function must return at least one column")
        # and pyiceberg 0.12 reads as no rows, however many the table holds (a zero-field
        # struct array loses its length). Refused, naming format version 3; nothing written.
        refused = lakemirror("glue-sync", "--table-uri", uri, "--database", glue_database, "--table", "t",
                             "--iceberg-format-version", 2, check=False)
        assert refused.returncode > 0 and "panicked" not in refused.stderr, refused
        assert "every column is one this mirror cannot hold" in refused.stderr, refused.stderr
        assert "--iceberg-format-version 3" in refused.stderr, refused.stderr
        assert not (Path(uri) / "_lakemirror").exists(), "nothing was written"
        return
    result = sync(lakemirror, uri, glue_database, 2)
    assert result.json["omitted_columns"] == omitted
    metadata = metadata_json(result)
    assert metadata["format-version"] == 2
    # Defaults exist from format version 3 on: none here.
    assert schema_shape(metadata) == without_defaults([f for f in V3_SCHEMAS[name] if f[0] not in omitted])
    properties = judge.glue_catalog().load_table((glue_database, "t")).properties
    assert_reasons_name_format_version_3(properties, omitted, ("variant", "geometry", "geography"))

    # Expected rows: DuckDB's delta_scan of the kept columns, the omitted ones as
    # placeholders (assert_mirrors drops them; DuckDB 1.5.5 cannot hand VARIANT to Arrow,
    # duckdb/duckdb#24091).
    expected = [_fill(row, fields, omitted) for row in delta_rows(uri, kept)]
    names = [f["name"] for f in kept]
    want = [tuple(row[i] for i, f in enumerate(fields) if f["name"] not in omitted) for row in expected]
    location = result.json["metadata_location"]
    judge.assert_same_rows(want, judge.iceberg_rows_duckdb(location, columns=names))
    if any(has_variant(f["type"]) for f in fields) and variant_groups_annotated(uri):
        # Java Iceberg 1.10.2's Spark readers visit every column of a file, and a group with
        # Parquet's VARIANT annotation goes to a variant() they do not implement
        # (TypeWithSchemaVisitor.java:242), also when the table has no such column: Spark
        # 3.5 cannot read files Spark 4.1 wrote with a variant, whatever the mirror says.
        # The generic reader (the same library without Spark) reads them.
        with pytest.raises(JavaReadError, match="Not implemented for variant"):
            java_iceberg.rows(location, columns=names)
        got_java, _ = java_rows(java_generic, result, kept)
        judge.assert_same_rows(want, got_java)
    else:
        judge.assert_same_rows(want, java_iceberg.rows(location, columns=names))
    # pyiceberg through Glue, and the snapshots and files (DuckDB again). pyiceberg needs
    # every field of a file in the name mapping, also inside a column the table does not have:
    # pyiceberg 0.12's NameMappingProjectionVisitor refuses every file leaf the mapping lacks
    # (pyiceberg/table/name_mapping.py:372) before it projects. A shredded variant's
    # `typed_value` holds fields only a file's footer names: the mirror reads the footers of
    # the files it adds and maps those fields to IDs no schema has.
    assert_mirrors(uri, glue_database, "t", result, expected_rows=expected)


def _fill(row, fields, omitted):
    values = iter(row)
    return tuple(None if f["name"] in omitted else next(values) for f in fields)


@pytest.mark.parametrize("name", FEATURE_TABLES)
def test_a_delta_features_table_mirrors_in_format_version_3_with_every_column_its_types_and_defaults(
        name, tmp_path, glue_database, lakemirror, java_generic):
    uri = local_copy(name, tmp_path)
    result = sync(lakemirror, uri, glue_database, 3)
    assert result.json["omitted_columns"] == []
    metadata = metadata_json(result)
    assert metadata["format-version"] == 3
    assert schema_shape(metadata) == V3_SCHEMAS[name]
    tbl_properties = metadata["properties"]
    assert omitted_columns(tbl_properties) == []

    fields = delta_fields(uri)
    got_java, meta = java_rows(java_generic, result, fields)
    assert meta["format-version"] == 3
    assert java_types(meta).items() >= expected_java_types(V3_SCHEMAS[name]).items(), "Java parses the types"
    assert java_defaults(meta) == expected_defaults(V3_SCHEMAS[name])

    schema_only = not any(Path(uri).glob("*.parquet"))
    expected = [] if schema_only else delta_rows(uri, fields)
    assert schema_only or expected, "DuckDB's delta_scan reads the table's rows"
    judge.assert_same_rows(expected, got_java)

    if any(has_geo(f["type"]) and "geography" in json.dumps(f["type"]) for f in fields):
        with pytest.raises(duckdb.NotImplementedException, match="Geography support"):
            duckdb_iceberg_rows(result, fields)
    elif any(has_variant(f["type"]) for f in fields) and not variant_groups_annotated(uri):
        with pytest.raises(duckdb.BinderException, match=r"Can't change source type .* to target type \(VARIANT\)"):
            duckdb_iceberg_rows(result, fields)
        judge.assert_same_rows(expected, duckdb_iceberg_rows(result, fields, "delta"))
    else:
        judge.assert_same_rows(expected, duckdb_iceberg_rows(result, fields))

    if not any(has_variant(f["type"]) for f in fields):
        tbl = judge.glue_catalog().load_table((glue_database, "t"))
        assert tbl.metadata.format_version == 3
        rows = judge.iceberg_rows_pyiceberg(glue_database, "t")
        judge.assert_same_rows(expected, canonical_rows(fields, rows))


# ---------------------------------------------------------------- geospatial, with data

GEOSPATIAL = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                           "readerFeatures": ["geospatial"], "writerFeatures": ["geospatial"]}}
ARRAY_OF_GEOMETRY = {"type": "array", "elementType": "geometry(OGC:CRS84)", "containsNull": True}
PLACE = {"type": "struct", "fields": [column("name", "string"), column("at", "geometry(OGC:CRS84)")]}
# Delta's schema strings as delta-kernel writes them (table-with-geo): the default CRS spelled
# out, and a CRS and an edge algorithm that are not the defaults.
GEO_FIELDS = [column("id", "long"), column("geom", "geometry(OGC:CRS84)"), column("geom_mercator", "geometry(EPSG:3857)"),
              column("place", PLACE), column("route", ARRAY_OF_GEOMETRY),
              column("geog", "geography(OGC:CRS84, spherical)"), column("geog_karney", "geography(EPSG:4269, karney)")]
GEOMETRY_FIELDS = [f for f in GEO_FIELDS if not f["name"].startswith("geog")]
# The Iceberg types: bare `geometry` / `geography` for the default CRS and algorithm.
GEO_V3_SCHEMA = [["id", "long"], ["geom", "geometry"], ["geom_mercator", "geometry(EPSG:3857)"],
                 ["place", [["name", "string"], ["at", "geometry"]]], ["route", ["list", "geometry"]],
                 ["geog", "geography"], ["geog_karney", "geography(EPSG:4269, karney)"]]
GEO_V2_OMITTED = ["geom", "geom_mercator", "place.at", "route", "geog", "geog_karney"]

P = geo.point(1, 2)
MERCATOR = geo.point(111319.49, 222684.21)
LINE = geo.linestring((0, 0), (1, 1), (2, 1))
TRIANGLE = geo.polygon([(0, 0), (1, 0), (1, 1), (0, 0)])
# Two files (one per commit); the rows as written, by column.
GEO_FILES = [
    {"id": [1, 2], "geom": [P, None], "geom_mercator": [MERCATOR, None],
     "place": [{"name": "a", "at": P}, {"name": "b", "at": None}], "route": [[P, LINE], None],
     "geog": [P, None], "geog_karney": [LINE, None]},
    {"id": [3], "geom": [LINE], "geom_mercator": [TRIANGLE], "place": [None], "route": [[]],
     "geog": [TRIANGLE], "geog_karney": [P]},
]


def geo_column(field, values) -> pa.Array:
    type_ = field["type"]
    if isinstance(type_, str) and type_.startswith("geometry"):
        return geo.array(values, geo.geometry_type(type_[len("geometry("):-1]))
    if isinstance(type_, str) and type_.startswith("geography"):
        crs = type_[len("geography("):-1].split(",")[0].strip()
        return geo.array(values, geo.geography_type(crs))
    if field["name"] == "place":
        names = pa.array([None if v is None else v["name"] for v in values], pa.string())
        ats = geo.array([None if v is None else v["at"] for v in values], geo.geometry_type())
        return pa.StructArray.from_arrays([names, ats], names=["name", "at"],
                                          mask=pa.array([v is None for v in values]))
    if field["name"] == "route":
        offsets = [0]
        for v in values:
            offsets.append(offsets[-1] + len(v or []))
        points = geo.array([p for v in values for p in (v or [])], geo.geometry_type())
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), points,
                                        mask=pa.array([v is None for v in values]))
    return pa.array(values, pa.int64())


def geo_table(root: Path, fields) -> DeltaLog:
    """A Delta table with the geospatial feature, one commit per file of GEO_FILES, with
    Parquet's GEOMETRY / GEOGRAPHY logical types (checked after writing)."""
    log = DeltaLog(root)
    karney = {"geog_karney": "karney"} if any(f["name"] == "geog_karney" for f in fields) else {}
    for i, values in enumerate(GEO_FILES):
        name = f"part-{i}.parquet"
        table = pa.table({f["name"]: geo_column(f, values[f["name"]]) for f in fields})
        geo.write(table, root / name, karney)
        types = geo.logical_types(root / name)
        assert types["geom"] == "Geometry(crs=)" and types["geom_mercator"] == "Geometry(crs=EPSG:3857)", types
        assert types["place.at"] == "Geometry(crs=)" and types["route.list.element"] == "Geometry(crs=)", types
        if karney:
            assert types["geog"] == "Geography(crs=, algorithm=spherical)", types
            assert types["geog_karney"] == "Geography(crs=EPSG:4269, algorithm=karney)", types
        add = {"add": {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size,
                       "modificationTime": log.started, "dataChange": True,
                       "stats": json.dumps({"numRecords": table.num_rows})}}
        log.commit(*([GEOSPATIAL, log.metadata(fields)] if i == 0 else []), add)
    return log


def geo_rows(fields) -> list[tuple]:
    """The rows written, in `fields` order, as every judge should return them."""
    rows = []
    for values in GEO_FILES:
        for i in range(len(values["id"])):
            rows.append(tuple(canonical(f["type"], values[f["name"]][i]) for f in fields))
    return rows


def kept_place(fields_rows):
    return [(i, None if place is None else {"name": place["name"]}) for i, place in fields_rows]


@pytest.mark.parametrize("how", ["commit-by-commit", "in-one-go"])
def test_geo_columns_are_left_out_by_name_in_format_version_2_and_the_rest_reads_equal(
        how, tmp_path, glue_database, lakemirror, java_iceberg):
    log = geo_table(tmp_path / "t", GEO_FIELDS)
    for version in ([0, 1] if how == "commit-by-commit" else [1]):
        result = sync(lakemirror, log.uri, glue_database, 2, "--to-version", version)
        assert result.json["omitted_columns"] == GEO_V2_OMITTED
        # A struct keeps its other fields; a list holding a geometry goes whole.
        assert schema_shape(metadata_json(result)) == [["id", "long"], ["place", [["name", "string"]]]]
        want = kept_place([(r[0], r[3]) for r in geo_rows(GEO_FIELDS)][: 2 if version == 0 else 3])
        judge.assert_same_rows(want, judge.iceberg_rows_pyiceberg(glue_database, "t"))
        judge.assert_same_rows(want, judge.iceberg_rows_duckdb(result.json["metadata_location"]))
        judge.assert_same_rows(want, java_iceberg.rows(result.json["metadata_location"]))
    properties = judge.glue_catalog().load_table((glue_database, "t")).properties
    assert_reasons_name_format_version_3(properties, GEO_V2_OMITTED, ("geometry", "geography"))


@pytest.mark.parametrize("how", ["commit-by-commit", "in-one-go"])
def test_geo_columns_mirror_in_format_version_3_with_their_crs_and_edge_algorithm(
        how, tmp_path, glue_database, lakemirror, java_generic):
    log = geo_table(tmp_path / "t", GEO_FIELDS)
    for version in ([0, 1] if how == "commit-by-commit" else [1]):
        result = sync(lakemirror, log.uri, glue_database, 3, "--to-version", version)
        assert result.json["omitted_columns"] == []
    metadata = metadata_json(result)
    assert schema_shape(metadata) == GEO_V3_SCHEMA
    # Java Iceberg parses the types with their CRS and algorithm (the bare forms mean
    # OGC:CRS84 and spherical) and reads the other columns.
    got, meta = java_rows(java_generic, result, [GEO_FIELDS[0], {"name": "place", "type": {
        "type": "struct", "fields": [column("name", "string")]}}], columns=["id", "place.name"])
    judge.assert_same_rows(kept_place([(r[0], r[3]) for r in geo_rows(GEO_FIELDS)]), got)
    by_name = {f["name"]: f for f in meta["fields"]}
    assert java_types(meta).items() >= expected_java_types(GEO_V3_SCHEMA).items()
    assert (by_name["geom"]["type"], by_name["geom"]["crs"]) == ("geometry", None)
    assert (by_name["geom_mercator"]["type"], by_name["geom_mercator"]["crs"]) == ("geometry(EPSG:3857)", "EPSG:3857")
    assert (by_name["geog"]["type"], by_name["geog"]["crs"], by_name["geog"]["algorithm"]) == ("geography", None, None)
    karney = by_name["geog_karney"]
    assert (karney["type"], karney["crs"], karney["algorithm"]) == ("geography(EPSG:4269, karney)", "EPSG:4269", "karney")
    # Java 1.10.2 reads no geo values; DuckDB 1.5.5 reads no table with a geography column.
    with pytest.raises(JavaReadError, match="Unsupported logical type: GEOMETRY"):
        java_generic.read(result.json["metadata_location"])
    with pytest.raises(duckdb.NotImplementedException, match="Geography support"):
        duckdb_iceberg_rows(result, GEO_FIELDS)


def test_geometry_values_read_back_from_a_format_version_3_mirror_as_written(tmp_path, glue_database, lakemirror):
    log = geo_table(tmp_path / "t", GEOMETRY_FIELDS)
    result = sync(lakemirror, log.uri, glue_database, 3)
    assert schema_shape(metadata_json(result)) == [f for f in GEO_V3_SCHEMA if not f[0].startswith("geog")]
    # DuckDB reads every geometry, as WKB and as WKT, and keeps the column's CRS.
    judge.assert_same_rows(geo_rows(GEOMETRY_FIELDS), duckdb_iceberg_rows(result, GEOMETRY_FIELDS))
    con = judge.duckdb_connect("avro", "iceberg")
    location = judge._sql_str(result.json["metadata_location"])
    wkt = con.execute(f"SELECT id, ST_AsText(geom), ST_AsText(geom_mercator) FROM iceberg_scan({location})").fetchall()
    assert sorted(wkt) == [(1, "POINT (1 2)", "POINT (111319.49 222684.21)"), (2, None, None),
                           (3, "LINESTRING (0 0, 1 1, 2 1)", "POLYGON ((0 0, 1 0, 1 1, 0 0))")]
    types = dict(con.execute(
        f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM iceberg_scan({location}))").fetchall())
    assert "3857" in types["geom_mercator"], types


# ---------------------------------------------------------------- column defaults

DEFAULTS = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["allowColumnDefaults"]}}


def with_default(field, exists=None, current=None):
    """A Delta field with Spark's default metadata: EXISTS_DEFAULT is the value of rows
    written before the column existed (Spark's folded literal, `Literal.sql`), CURRENT_DEFAULT
    what a writer puts in when it names no value (the SQL text of the DEFAULT clause)."""
    metadata = dict(field["metadata"])
    if exists is not None:
        metadata["EXISTS_DEFAULT"] = exists
    if current is not None:
        metadata["CURRENT_DEFAULT"] = current
    return {**field, "metadata": metadata}


def test_column_defaults_of_each_type_become_initial_and_write_defaults_in_format_version_3_only(
        tmp_path, glue_database, lakemirror, java_iceberg, java_generic):
    log = DeltaLog(tmp_path / "t")
    fields = [column("id", "long"),
              with_default(column("s", "string"), "'hello'", "'hello'"),
              with_default(column("l", "long"), "7L", "7"),
              with_default(column("d", "date"), "DATE '2024-01-02'", "DATE'2024-01-02'"),
              with_default(column("flag", "boolean"), "true", "true"),
              with_default(column("x", "double"), "1.5D", "1.5")]
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["hello", "other"], "l": pa.array([7, None], pa.int64()),
                     "d": [dt.date(2024, 1, 2), None], "flag": [True, False], "x": [1.5, -0.5]})
    log.commit(DEFAULTS, log.metadata(fields), log.add("part-0.parquet", data))
    expected = delta_rows(log.uri, fields)
    assert expected == canonical_rows(fields, judge.arrow_rows(data)), "DuckDB's delta_scan reads what was written"
    v3_schema = [["id", "long"], ["s", "string", {"initial-default": "hello", "write-default": "hello"}],
                 ["l", "long", {"initial-default": 7, "write-default": 7}],
                 ["d", "date", {"initial-default": "2024-01-02", "write-default": "2024-01-02"}],
                 ["flag", "boolean", {"initial-default": True, "write-default": True}],
                 ["x", "double", {"initial-default": 1.5, "write-default": 1.5}]]

    v2 = sync(lakemirror, log.uri, glue_database, 2)
    assert schema_shape(metadata_json(v2)) == without_defaults(v3_schema), "format version 2 has no defaults"
    assert_mirrors(log.uri, glue_database, "t", v2, java=java_iceberg)

    copy = tmp_path / "v3"
    shutil.copytree(log.root, copy, ignore=shutil.ignore_patterns("_lakemirror"))
    v3 = sync(lakemirror, str(copy), glue_database, 3, table="t3")
    assert schema_shape(metadata_json(v3)) == v3_schema
    got, meta = java_rows(java_generic, v3, fields)
    assert java_defaults(meta) == expected_defaults(v3_schema), "Java parses every default"
    judge.assert_same_rows(expected, got)
    judge.assert_same_rows(expected, duckdb_iceberg_rows(v3, fields))
    judge.assert_same_rows(expected, canonical_rows(fields, judge.iceberg_rows_pyiceberg(glue_database, "t3")))


def default_set_after_the_column_was_added(root) -> tuple[DeltaLog, list]:
    """Delta refuses ADD COLUMN with a DEFAULT on an existing table; the default comes with
    ALTER COLUMN SET DEFAULT, which sets only CURRENT_DEFAULT, and goes with DROP DEFAULT.
    Rows written before keep null: the default is for writes only."""
    log = DeltaLog(root)
    id_, a, b = column("id", "long"), column("a", "string"), column("b", "integer")
    log.commit(DEFAULTS, log.metadata([id_, a]), log.add("part-0.parquet", pa.table({
        "id": pa.array([1], pa.int64()), "a": ["x"]})))
    log.commit(log.metadata([id_, a, b]))
    log.commit(log.metadata([id_, a, with_default(b, current="16")]))
    log.commit(log.add("part-1.parquet", pa.table({"id": pa.array([2], pa.int64()), "a": ["y"],
                                                   "b": pa.array([16], pa.int32())})))
    log.commit(log.metadata([id_, a, b]))
    no_default, defaulted = [["id", "long"], ["a", "string"], ["b", "int"]], {"write-default": 16}
    schemas = {1: no_default, 2: no_default[:2] + [["b", "int", defaulted]], 3: no_default[:2] + [["b", "int", defaulted]],
               4: no_default}
    return log, schemas


@pytest.mark.parametrize("how", ["commit-by-commit", "in-one-go"])
def test_a_default_set_on_an_existing_column_is_a_write_default_and_older_rows_stay_null(
        how, tmp_path, glue_database, lakemirror, java_generic):
    log, schemas = default_set_after_the_column_was_added(tmp_path / "t")
    for version in (range(1, 5) if how == "commit-by-commit" else [4]):
        result = sync(lakemirror, log.uri, glue_database, 3, "--to-version", version)
        assert schema_shape(metadata_json(result)) == schemas[version]
        fields = delta_fields(log.uri, version)
        expected = delta_rows(log.uri, fields, version)
        assert sorted(expected) == ([(1, "x", None)] if version < 3 else [(1, "x", None), (2, "y", 16)])
        got, meta = java_rows(java_generic, result, fields)
        assert java_defaults(meta) == expected_defaults(schemas[version])
        judge.assert_same_rows(expected, got)
        judge.assert_same_rows(expected, duckdb_iceberg_rows(result, fields))
