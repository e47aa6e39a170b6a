"""Hand-written Delta tables: JSON commits and Parquet files written by pyarrow, with column
mapping (physical names, field IDs) the way Spark writes it. For histories delta-rs cannot
write (renames, drops, upgrades, void columns); DuckDB's delta_scan (delta-kernel-rs) reads
them back in the tests, which keeps the hand-written logs honest."""

import json
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def field_id(i: int) -> dict:
    return {b"PARQUET:field_id": str(i).encode()}


def column(name: str, type_, cm_id: int | None = None, physical: str | None = None, nested_ids=None,
           metadata=None) -> dict:
    """A Delta schema field; with `cm_id`, column-mapped (physical name `physical`, by default
    `col-<uuid>`)."""
    meta = dict(metadata or {})
    if cm_id is not None:
        meta["delta.columnMapping.id"] = cm_id
        meta["delta.columnMapping.physicalName"] = physical or f"col-{uuid.uuid4()}"
    if nested_ids:
        meta["delta.columnMapping.nested.ids"] = nested_ids
    return {"name": name, "type": type_, "nullable": True, "metadata": meta}


def schema_string(fields: list[dict]) -> str:
    return json.dumps({"type": "struct", "fields": fields})


class DeltaLog:
    """A Delta table on local disk, written one commit at a time."""

    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "_delta_log").mkdir(parents=True, exist_ok=True)
        self.version = -1
        self.table_id = str(uuid.uuid4())
        self.started = int(time.time() * 1000) - 60_000

    def metadata(self, fields, configuration=None, partition_columns=()) -> dict:
        return {"metaData": {"id": self.table_id, "format": {"provider": "parquet", "options": {}},
                             "schemaString": schema_string(fields), "partitionColumns": list(partition_columns),
                             "createdTime": self.started, "configuration": dict(configuration or {})}}

    def add(self, name: str, table: pa.Table, partition_values=None) -> dict:
        """Writes `table` as `name` and returns its add action (with numRecords)."""
        (self.root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, self.root / name)
        return {"add": {"path": name, "partitionValues": dict(partition_values or {}),
                        "size": (self.root / name).stat().st_size, "modificationTime": self.started,
                        "dataChange": True, "stats": json.dumps({"numRecords": table.num_rows})}}

    def commit(self, *actions, info=None) -> int:
        """Writes the next commit; `info` replaces the commitInfo (timestamp: started + version)."""
        self.version += 1
        info = {"commitInfo": info or {"timestamp": self.started + self.version}}
        path = self.root / "_delta_log" / f"{self.version:020}.json"
        path.write_text("\n".join(json.dumps(a) for a in (info, *actions)))
        return self.version

    @property
    def uri(self) -> str:
        return str(self.root)


COLUMN_MAPPING_PROTOCOL = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}


def column_mapping(max_id: int, **more) -> dict:
    return {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": str(max_id), **more}
