"""Geospatial Delta tables (Delta's `geospatial` feature), written by hand: WKB values in
Parquet files with the GEOMETRY / GEOGRAPHY logical types, which pyarrow 26 writes for a
column of the extension type `geoarrow.wkb` (rig/geo_parquet.py) (GEOGRAPHY when its metadata names
`edges`), and a `_delta_log` with the protocol and schema of
`../shared/delta-features/table-with-geo` (`geometry(OGC:CRS84)`,
`geography(OGC:CRS84, spherical)`).

No Delta reader here reads such a table (DuckDB 1.5.5's delta_scan refuses the type:
"Unsupported Delta table type: 'geometry(OGC:CRS84)'"), so the values are judged through the
Parquet files the log keeps active, read by DuckDB's read_parquet (GEOMETRY) and pyarrow.
"""

import json
import struct

import pyarrow as pa

from rig import geo_parquet
from rig.delta_log import DeltaLog, column

GEOSPATIAL_PROTOCOL = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                    "readerFeatures": ["geospatial"], "writerFeatures": ["geospatial"]}}


# One extension type for both geo rigs (rig/geo_parquet.py registers it only while writing).
WkbType = geo_parquet.GeoArrowWkb


class GeoDeltaLog(DeltaLog):
    """A DeltaLog whose data files carry the GEOMETRY / GEOGRAPHY logical types."""

    def add(self, name, table, partition_values=None):
        with geo_parquet.wkb_registered():
            return super().add(name, table, partition_values)


def wkb_array(values, crs="OGC:CRS84", edges=None) -> pa.ExtensionArray:
    """WKB values as a column Parquet stores as GEOMETRY (GEOGRAPHY with `edges`)."""
    meta = {"crs": crs, **({"edges": edges} if edges else {})}
    return pa.ExtensionArray.from_storage(WkbType(json.dumps(meta).encode()), pa.array(values, pa.binary()))


def point(x, y, big_endian=False) -> bytes:
    return struct.pack(">BIdd" if big_endian else "<BIdd", 0 if big_endian else 1, 1, x, y)


def point_z(x, y, z) -> bytes:
    """ISO WKB POINT Z (type 1001)."""
    return struct.pack("<BIddd", 1, 1001, x, y, z)


def linestring(*xy) -> bytes:
    return struct.pack("<BII", 1, 2, len(xy)) + b"".join(struct.pack("<dd", *p) for p in xy)


def polygon(*ring) -> bytes:
    return struct.pack("<BIII", 1, 3, 1, len(ring)) + b"".join(struct.pack("<dd", *p) for p in ring)


def geo_fields() -> list[dict]:
    return [column("id", "long"), column("geom", "geometry(OGC:CRS84)"),
            column("geog", "geography(OGC:CRS84, spherical)"), column("merc", "geometry(EPSG:3857)")]


def geo_table(ids, geoms, geogs, mercs) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "geom": wkb_array(geoms),
                     "geog": wkb_array(geogs, edges="spherical"), "merc": wkb_array(mercs, crs="EPSG:3857")})


def geo_log(root) -> DeltaLog:
    """A new geospatial Delta table at `root` (its first commit: protocol and metadata)."""
    log = GeoDeltaLog(root)
    log.commit(GEOSPATIAL_PROTOCOL, log.metadata(geo_fields()))
    return log
