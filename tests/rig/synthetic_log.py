"""Synthetic Delta logs of very many files, in the checkpoint schema with `stats` (JSON) and
`stats_parsed` (struct), without any data file: one add per file in a checkpoint at VERSION,
laid out as

- classic: one Parquet checkpoint file;
- multi-part: `parts` files (`<v>.checkpoint.<part>.<parts>.parquet`);
- v2: a checkpoint naming `parts` sidecar files in `_delta_log/_sidecars/` (v2Checkpoint
  table feature).

Used by tests/bench/scale.py (1M and 10M files), tests/bench/floor.py (also catalog-managed, with
its protocol and table id) and the fan-out tests (a few thousand).
"""

import json
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

VERSION = 10  # the checkpoint's version; commit 11 is the one-commit sync
BATCH = 500_000  # checkpoint rows generated at once
SCHEMA_STRING = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "name", "type": "string", "nullable": True, "metadata": {}}]})

STATS_PARSED = pa.struct([
    ("numRecords", pa.int64()),
    ("minValues", pa.struct([("id", pa.int64()), ("name", pa.string())])),
    ("maxValues", pa.struct([("id", pa.int64()), ("name", pa.string())])),
    ("nullCount", pa.struct([("id", pa.int64()), ("name", pa.int64())])),
])
ADD = pa.struct([
    ("path", pa.string()), ("partitionValues", pa.map_(pa.string(), pa.string())), ("size", pa.int64()),
    ("modificationTime", pa.int64()), ("dataChange", pa.bool_()), ("stats", pa.string()),
    ("tags", pa.map_(pa.string(), pa.string())), ("stats_parsed", STATS_PARSED),
])
PROTOCOL = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
                      ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string()))])
METADATA = pa.struct([
    ("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
    ("format", pa.struct([("provider", pa.string()), ("options", pa.map_(pa.string(), pa.string()))])),
    ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
    ("configuration", pa.map_(pa.string(), pa.string())), ("createdTime", pa.int64()),
])
REMOVE = pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_())])
SIDECAR = pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64()),
                     ("tags", pa.map_(pa.string(), pa.string()))])
CHECKPOINT = pa.schema([("add", ADD), ("remove", REMOVE), ("metaData", METADATA), ("protocol", PROTOCOL)])
V2_TOP = pa.schema([("checkpointMetadata", pa.struct([("version", pa.int64())])), ("sidecar", SIDECAR),
                    ("metaData", METADATA), ("protocol", PROTOCOL)])
SIDECAR_SCHEMA = pa.schema([("add", ADD), ("remove", REMOVE)])


def adds(first: int, count: int, now: int) -> pa.Array:
    ids = range(first, first + count)
    stats = [f'{{"numRecords":10,"minValues":{{"id":{i * 10},"name":"n{i}"}},'
             f'"maxValues":{{"id":{i * 10 + 9},"name":"n{i}z"}},"nullCount":{{"id":0,"name":0}}}}' for i in ids]
    parsed = pa.array([{"numRecords": 10, "minValues": {"id": i * 10, "name": f"n{i}"},
                        "maxValues": {"id": i * 10 + 9, "name": f"n{i}z"}, "nullCount": {"id": 0, "name": 0}}
                       for i in ids], STATS_PARSED)
    return pa.StructArray.from_arrays([
        pa.array([f"part-{i:09}-7d3c0d55-93d1-4e0d-9b4a-{i:012}.c000.snappy.parquet" for i in ids]),
        pa.array([[] for _ in ids], pa.map_(pa.string(), pa.string())),
        pa.array([1000 + i % 1000 for i in ids], pa.int64()),
        pa.array([now] * count, pa.int64()),
        pa.array([False] * count),
        pa.array(stats),
        pa.nulls(count, pa.map_(pa.string(), pa.string())),
        parsed,
    ], fields=list(ADD))


def definition_rows(schema: pa.Schema, v2: bool, protocol: dict | None = None,
                    configuration: dict | None = None) -> pa.Table:
    """The protocol and metaData rows; `protocol` and `configuration` replace the defaults (a
    catalog-managed table's features and its catalog's table id)."""
    now = int(time.time() * 1000)
    protocol = protocol or ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"],
                             "writerFeatures": ["v2Checkpoint"]} if v2 else
                            {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": None,
                             "writerFeatures": None})
    metadata = {"id": "scale-bench", "name": None, "description": None,
                "format": {"provider": "parquet", "options": []}, "schemaString": SCHEMA_STRING,
                "partitionColumns": [], "configuration": list((configuration or {}).items()), "createdTime": now}
    columns = {f.name: pa.nulls(2, f.type) for f in schema}
    columns["protocol"] = pa.array([protocol, None], PROTOCOL)
    columns["metaData"] = pa.array([None, metadata], METADATA)
    return pa.table(columns, schema=schema)


def write_adds(path: Path, schema: pa.Schema, first: int, count: int, definition: pa.Table | None = None):
    """A Parquet file of `count` add rows (after the definition rows, when given)."""
    now = int(time.time() * 1000)
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        if definition is not None:
            writer.write_table(definition)
        for start in range(first, first + count, BATCH):
            n = min(BATCH, first + count - start)
            columns = {f.name: pa.nulls(n, f.type) for f in schema}
            columns["add"] = adds(start, n, now)
            writer.write_table(pa.table(columns, schema=schema))


def generate(root: Path, n: int, layout: str, parts: int, protocol: dict | None = None,
             configuration: dict | None = None) -> dict:
    """The log of a table of `n` files: a checkpoint at VERSION in `layout`, `_last_checkpoint`;
    `protocol` and `configuration` as definition_rows takes them."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    started = time.perf_counter()
    v = f"{VERSION:020}"
    definition = definition_rows(CHECKPOINT, False, protocol, configuration)
    if layout == "classic":
        write_adds(log / f"{v}.checkpoint.parquet", CHECKPOINT, 0, n, definition)
        hint = {"version": VERSION, "size": n + 2}
    elif layout == "multi-part":
        per = -(-n // parts)
        for p in range(parts):
            first = p * per
            write_adds(log / f"{v}.checkpoint.{p + 1:010}.{parts:010}.parquet", CHECKPOINT, first,
                       max(0, min(per, n - first)), definition if p == 0 else None)
        hint = {"version": VERSION, "size": n + 2, "parts": parts}
    else:  # v2: the top-level checkpoint names its sidecars
        (log / "_sidecars").mkdir()
        per = -(-n // parts)
        sidecars = []
        for p in range(parts):
            name = f"{uuid.uuid4()}.parquet"
            first = p * per
            write_adds(log / "_sidecars" / name, SIDECAR_SCHEMA, first, max(0, min(per, n - first)))
            sidecars.append({"path": name, "sizeInBytes": (log / "_sidecars" / name).stat().st_size,
                             "modificationTime": int(time.time() * 1000), "tags": None})
        top = definition_rows(V2_TOP, True, protocol, configuration)
        rows = {f.name: pa.nulls(parts, f.type) for f in V2_TOP}
        rows["sidecar"] = pa.array(sidecars, SIDECAR)
        meta = {f.name: pa.nulls(1, f.type) for f in V2_TOP}
        meta["checkpointMetadata"] = pa.array([{"version": VERSION}], V2_TOP.field("checkpointMetadata").type)
        pq.write_table(pa.concat_tables([top, pa.table(rows, schema=V2_TOP), pa.table(meta, schema=V2_TOP)]),
                       log / f"{v}.checkpoint.{uuid.uuid4()}.parquet")
        hint = {"version": VERSION, "size": n + 2 + parts}
    (log / "_last_checkpoint").write_text(json.dumps(hint))
    size_mb = sum(f.stat().st_size for f in log.rglob("*") if f.is_file()) / 2**20
    return {"seconds": time.perf_counter() - started, "log_mb": size_mb}


def commit_one_file(root: Path, n: int, version: int = VERSION + 1):
    """Commits `version` (the one after the checkpoint by default): one more file, the n-th."""
    add = {"add": {"path": f"part-{n:09}-new.c000.snappy.parquet", "partitionValues": {}, "size": 1000,
                   "modificationTime": int(time.time() * 1000), "dataChange": True,
                   "stats": json.dumps({"numRecords": 10, "minValues": {"id": 0}, "maxValues": {"id": 9},
                                        "nullCount": {"id": 0}})}}
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    (root / "_delta_log" / f"{version:020}.json").write_text(json.dumps(info) + "\n" + json.dumps(add) + "\n")
