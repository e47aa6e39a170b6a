"""The format version 3 Java judge (rig/java_generic.py) reads what a mirror's readers must:
Parquet files without field IDs through the table's name mapping, on a table pyiceberg
writes (no lakemirror binary involved)."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.schema import Schema
from pyiceberg.types import ListType, LongType, NestedField, StringType, StructType

from rig import judge


def test_files_without_field_ids_are_read_through_the_name_mapping(tmp_path, glue_database, java_generic):
    """The file's columns, nested ones too, come in another order than the table's: a reader
    that falls back to positions, as IcebergGenerics does (apache/iceberg#6122; the kit's
    read_generic.py fails here with "Not a list type: long"), cannot read it."""
    point = StructType(NestedField(8, "p", LongType()), NestedField(9, "q", StringType()))
    schema = Schema(NestedField(1, "a", LongType()), NestedField(2, "b", StringType()),
                    NestedField(3, "s", StructType(NestedField(4, "x", LongType()), NestedField(5, "y", StringType()))),
                    NestedField(6, "l", ListType(7, point, element_required=False)))
    table = judge.glue_catalog().create_table((glue_database, "t"), schema=schema, location=tmp_path.as_uri())
    data = pa.table({"l": pa.array([[{"q": "q1", "p": 10}], None], pa.list_(pa.struct([("q", pa.string()), ("p", pa.int64())]))),
                     "s": pa.array([{"y": "y1", "x": 5}, None], pa.struct([("y", pa.string()), ("x", pa.int64())])),
                     "b": ["b1", "b2"], "a": pa.array([1, 2], pa.int64())})
    pq.write_table(data, Path(tmp_path) / "f.parquet")
    table.add_files([(Path(tmp_path) / "f.parquet").as_uri()])  # sets schema.name-mapping.default
    table = judge.glue_catalog().load_table((glue_database, "t"))
    assert "schema.name-mapping.default" in table.properties

    rows, meta = java_generic.read(table.metadata_location)
    assert rows == [{"a": 1, "b": "b1", "s": {"x": 5, "y": "y1"}, "l": [{"p": 10, "q": "q1"}],
                     "_row_id": None, "_last_updated_sequence_number": None},
                    {"a": 2, "b": "b2", "s": None, "l": None, "_row_id": None, "_last_updated_sequence_number": None}]
    assert meta["name-mapping-applied"] and meta["format-version"] == 2
    assert [f["name"] for f in meta["fields"]] == ["a", "b", "s", "l", "s.x", "s.y", "l.element", "l.element.p",
                                                   "l.element.q"]
    rows, _ = java_generic.read(table.metadata_location, columns=["a", "s.y"])
    assert [{k: r[k] for k in ("a", "s")} for r in rows] == [{"a": 1, "s": {"y": "y1"}}, {"a": 2, "s": None}]
