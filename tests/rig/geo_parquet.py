"""Parquet files with GEOMETRY and GEOGRAPHY columns (WKB values), as Delta's geospatial
feature stores them (delta-kernel's ParquetSchemaUtils writes these logical types), written
by pyarrow for tables the tests build by hand.

pyarrow (21 and later) writes the logical types for a column whose type is a registered
extension type named `geoarrow.wkb` (registered here only while `write` writes): metadata `{"crs": …}` gives GEOMETRY(crs), and
`"edges": "spherical"` GEOGRAPHY(crs, spherical). The default CRS (OGC:CRS84) is written as
no CRS. pyarrow 26 refuses the other edge algorithms ("Unsupported GeoArrow edge type"), so
`write` adds the algorithm to the footer itself (two bytes of Thrift) and reads the
logical types back to prove it.
"""

import contextlib
import json
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# Parquet's EdgeInterpolationAlgorithm (parquet.thrift); SPHERICAL is the default.
EDGE_ALGORITHMS = {"spherical": 0, "vincenty": 1, "thomas": 2, "andoyer": 3, "karney": 4}
DEFAULT_CRS = "OGC:CRS84"


class GeoArrowWkb(pa.ExtensionType):
    def __init__(self, metadata: bytes = b"{}"):
        self._metadata = metadata
        super().__init__(pa.binary(), "geoarrow.wkb")

    def __arrow_ext_serialize__(self):
        return self._metadata

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls(serialized)


def point(x: float, y: float) -> bytes:
    return struct.pack("<BIdd", 1, 1, x, y)


def linestring(*points) -> bytes:
    return struct.pack("<BII", 1, 2, len(points)) + b"".join(struct.pack("<dd", x, y) for x, y in points)


def polygon(*rings) -> bytes:
    body = b"".join(struct.pack("<I", len(ring)) + b"".join(struct.pack("<dd", x, y) for x, y in ring) for ring in rings)
    return struct.pack("<BII", 1, 3, len(rings)) + body


def geometry_type(crs: str = DEFAULT_CRS) -> GeoArrowWkb:
    return GeoArrowWkb(json.dumps({"crs": crs}).encode())


def geography_type(crs: str = DEFAULT_CRS) -> GeoArrowWkb:
    """A geography column; its edge algorithm, unless spherical, is given to `write`."""
    return GeoArrowWkb(json.dumps({"crs": crs, "edges": "spherical"}).encode())


@contextlib.contextmanager
def wkb_registered():
    """`geoarrow.wkb` registered for the duration. Only while writing: a registered
    `geoarrow.wkb` makes every later Parquet read in this process return the extension type
    (pyiceberg 0.12 refuses it: "Column 'geom' has an unsupported type"), which readers
    without geoarrow never see. Re-entrant: an outer registration is left as it was."""
    try:
        pa.register_extension_type(GeoArrowWkb())
    except pa.ArrowKeyError:  # registered by a caller
        yield
        return
    try:
        yield
    finally:
        pa.unregister_extension_type("geoarrow.wkb")


def array(values, type_: GeoArrowWkb) -> pa.ExtensionArray:
    return pa.ExtensionArray.from_storage(type_, pa.array(values, pa.binary()))


def write(table: pa.Table, path: Path, edge_algorithms: dict[str, str] | None = None) -> None:
    """Writes `table`; `edge_algorithms` names the top-level geography columns whose edges are
    not spherical. Fails unless the file's logical types say what was asked for."""
    with wkb_registered():
        pq.write_table(table, path)
    for column, algorithm in (edge_algorithms or {}).items():
        _set_edge_algorithm(path, column, EDGE_ALGORITHMS[algorithm])
    got = logical_types(path)
    for column, algorithm in (edge_algorithms or {}).items():
        assert f"algorithm={algorithm}" in got[column], f"{column}: {got[column]}"


def logical_types(path: Path) -> dict[str, str]:
    """The Parquet logical type of every leaf column, by dotted path."""
    schema = pq.ParquetFile(path).schema
    return {schema.column(i).path: str(schema.column(i).logical_type) for i in range(len(schema))}


def _varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def _set_edge_algorithm(path: Path, column: str, code: int) -> None:
    """Adds `algorithm` (field 2) to the GeographyType of a top-level column in the footer.

    In the footer's compact Thrift, pyarrow 26 writes the SchemaElement of such a column as
    … name (field 4: 0x18, length, bytes), logicalType (field 10: 0x6c) holding the union's
    GEOGRAPHY (field 18: 0x0c 0x24) whose struct has the optional crs (field 1) and ends
    (0x00). Data pages come before the footer, so only the footer length changes."""
    data = Path(path).read_bytes()
    length = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - length
    footer = data[start:-8]
    name = column.encode()
    head = b"\x18" + _varint(len(name)) + name + b"\x6c\x0c\x24"
    at = footer.find(head)
    if at < 0 or footer.count(head) != 1:
        raise ValueError(f"no single GEOGRAPHY column {column!r} in the footer of {path}")
    end = at + len(head)
    has_crs = footer[end] == 0x18
    if has_crs:
        size, end = footer[end + 1], end + 2
        if size & 0x80:
            raise ValueError("CRS names longer than 127 bytes are not supported here")
        end += size
    if footer[end] != 0x00:
        raise ValueError(f"unexpected GeographyType layout for {column!r} in {path}")
    # Field 2 (i32) after field 1 (delta 1) or as the first field (delta 2); zigzag value.
    field = (b"\x15" if has_crs else b"\x25") + _varint(code * 2)
    footer = footer[:end] + field + footer[end:]
    Path(path).write_bytes(data[:start] + footer + struct.pack("<I", len(footer)) + b"PAR1")
