"""Every Avro file the mirror writes is valid Avro (issue 30): column mapping lets a Delta
partition column be named anything (`Company Very Short`, `a.b`, `1st`, `région`), and a
partition field's name is a record field name in every manifest's schema. Avro names must
match `[A-Za-z_][A-Za-z0-9_]*` and a named type may be defined once; DuckDB aborted on such
manifests and the Apache Avro libraries refuse them. The Python `avro` package checks type
names but not field names, so a parse proves nothing: the schemas are walked here."""

import datetime as dt
import decimal
import json
import re
from pathlib import Path

import boto3
import pyarrow as pa

from acceptance.mirror_check import assert_mirrors
from rig import judge
from rig.delta_log import COLUMN_MAPPING_PROTOCOL, DeltaLog, column, column_mapping, field_id

AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PARTITIONS = ["Company Very Short", "a.b", "1st", "région", "d 1", "d2"]


def avro_header_schema(path: Path) -> dict:
    """The `avro.schema` of an Avro object container file (its header, read by hand)."""
    data = path.read_bytes()
    assert data[:4] == b"Obj\x01", path
    pos = 4

    def long():
        nonlocal pos
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)

    def string():
        nonlocal pos
        n = long()
        pos += n
        return data[pos - n:pos]

    meta = {}
    while (count := long()) != 0:
        if count < 0:
            long()
            count = -count
        for _ in range(count):
            key = string().decode()
            meta[key] = string()
    return json.loads(meta["avro.schema"])


def invalid_names(schema, defined=None, where="") -> list[str]:
    """Every record, field, enum and fixed name that is not a valid Avro name, and every
    named type defined twice."""
    defined = set() if defined is None else defined
    found = []
    if isinstance(schema, list):
        for branch in schema:
            found += invalid_names(branch, defined, where)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "enum", "fixed"):
            full = schema["name"] if "." in schema["name"] else f"{schema.get('namespace', '')}.{schema['name']}"
            for part in schema["name"].split("."):
                if not AVRO_NAME.fullmatch(part):
                    found.append(f"{where}: {kind} name {schema['name']!r}")
            if full in defined:
                found.append(f"{where}: {kind} {schema['name']!r} defined twice")
            defined.add(full)
            for symbol in schema.get("symbols", []):
                if not AVRO_NAME.fullmatch(symbol):
                    found.append(f"{where}: enum symbol {symbol!r}")
            for field in schema.get("fields", []):
                if not AVRO_NAME.fullmatch(field["name"]):
                    found.append(f"{where}: field name {field['name']!r}")
                found += invalid_names(field["type"], defined, f"{where}.{field['name']}")
        elif kind == "array":
            found += invalid_names(schema["items"], defined, where)
        elif kind == "map":
            found += invalid_names(schema["values"], defined, where)
        elif isinstance(kind, (dict, list)):
            found += invalid_names(kind, defined, where)
    return found


def avro_files(root: Path) -> list[Path]:
    return sorted((root / "_lakemirror").rglob("*.avro"))


def oddly_named_table(root: Path) -> tuple[DeltaLog, list[tuple]]:
    """A column-mapped table partitioned by six columns whose names are not Avro names (two
    decimals of one precision too: a named fixed type each), over two commits."""
    log = DeltaLog(root)
    fields = [column("id", "long", 1, "col-id"), column("Company Very Short", "string", 2, "col-company"),
              column("a.b", "integer", 3, "col-ab"), column("1st", "date", 4, "col-first"),
              column("région", "string", 5, "col-region"), column("d 1", "decimal(10,2)", 6, "col-d1"),
              column("d2", "decimal(10,2)", 7, "col-d2")]
    metadata = log.metadata(fields, column_mapping(7), partition_columns=PARTITIONS)
    ids = lambda values: pa.table([pa.array(values, pa.int64())],
                                  schema=pa.schema([pa.field("col-id", pa.int64(), metadata=field_id(1))]))
    values = lambda company, ab, first, region, d1, d2: {"col-company": company, "col-ab": ab, "col-first": first,
                                                         "col-region": region, "col-d1": d1, "col-d2": d2}
    log.commit(COLUMN_MAPPING_PROTOCOL, metadata,
               log.add("p0/f0.parquet", ids([1, 2]), values("ACME Corp", "7", "2024-01-31", "Île-de-France", "1.50", "2.00")))
    log.commit(log.add("p1/f1.parquet", ids([3]), values("Ünïcode GmbH", "-1", "1999-12-31", "Bretagne", "3.25", "0.01")))
    day = lambda s: dt.date.fromisoformat(s)
    dec = decimal.Decimal
    rows = [(1, "ACME Corp", 7, day("2024-01-31"), "Île-de-France", dec("1.50"), dec("2.00")),
            (2, "ACME Corp", 7, day("2024-01-31"), "Île-de-France", dec("1.50"), dec("2.00")),
            (3, "Ünïcode GmbH", -1, day("1999-12-31"), "Bretagne", dec("3.25"), dec("0.01"))]
    return log, rows


def test_every_manifest_and_list_has_valid_avro_names_and_readers_read_the_mirror(
        tmp_path, glue_database, lakemirror, java_iceberg):
    log, rows = oddly_named_table(tmp_path / "t")
    # The expected rows are written out: on this column-mapped log DuckDB 1.5.5's delta_scan
    # gives each partition column the value of the next one (`Company Very Short` = '-1'), and
    # delta-rs 1.6 reads `id` as null; the mirror's three readers below are the judges.
    for version in (0, 1):
        result = lakemirror("glue-sync", "--table-uri", log.uri, "--glue-database", glue_database,
                            "--glue-table", "t", "--to-version", version)
    files = avro_files(log.root)
    assert len(files) >= 4, files
    problems = [p for f in files for p in invalid_names(avro_header_schema(f), where=f.name)]
    assert problems == [], problems
    spec = judge.glue_catalog().load_table((glue_database, "t")).spec()
    assert [f.name for f in spec.fields] == ["Company_x20Very_x20Short", "a_x2Eb", "_1st", "r_xE9gion",
                                             "d_x201", "d2"]
    assert_mirrors(log.uri, glue_database, "t", result, expected_rows=rows, java=java_iceberg)


def test_a_mirror_written_with_invalid_partition_names_is_written_again_with_valid_ones(
        tmp_path, glue_database, lakemirror, java_iceberg):
    """A mirror from before the fix (partition fields named as the columns) is rebuilt by its
    next sync, so its manifests become valid without anyone doing anything."""
    log, rows = oddly_named_table(tmp_path / "t")
    lakemirror("glue-sync", "--table-uri", log.uri, "--glue-database", glue_database, "--glue-table", "t",
               "--to-version", 0)
    # What an older build wrote: the partition fields named exactly as the columns.
    glue = boto3.client("glue")
    entry = glue.get_table(DatabaseName=glue_database, Name="t")["Table"]
    location = entry["Parameters"]["metadata_location"]
    metadata = json.loads(Path(location.removeprefix("file://")).read_text())
    for spec in metadata["partition-specs"]:
        for field, name in zip(spec["fields"], PARTITIONS):
            field["name"] = name
    old = location.replace(".metadata.json", "-old.metadata.json")
    Path(old.removeprefix("file://")).write_text(json.dumps(metadata))
    glue.update_table(DatabaseName=glue_database, TableInput={
        "Name": "t", "TableType": entry.get("TableType", "EXTERNAL_TABLE"),
        "Parameters": {**entry["Parameters"], "metadata_location": old}})

    result = lakemirror("glue-sync", "--table-uri", log.uri, "--glue-database", glue_database, "--glue-table", "t")
    assert result.json["action"] == "rebuilt" and "not a valid Avro name" in result.json["reason"], result.json
    spec = judge.glue_catalog().load_table((glue_database, "t")).spec()
    assert all(re.fullmatch(AVRO_NAME, f.name) for f in spec.fields), spec
    current = judge.glue_catalog().load_table((glue_database, "t")).current_snapshot()
    table = judge.glue_catalog().load_table((glue_database, "t"))
    for manifest in current.manifests(table.io):
        path = Path(manifest.manifest_path.removeprefix("file://"))
        assert invalid_names(avro_header_schema(path), where=path.name) == []
    assert_mirrors(log.uri, glue_database, "t", result, expected_rows=rows, java=java_iceberg)
