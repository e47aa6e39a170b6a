"""Catalog-managed Delta tables (Delta's `catalogManaged` feature) on a real Unity Catalog
server (uc-server 0.0.11 and its commit coordinator), written as a catalog-managed writer
writes them:

- `create`: reserve a staging table (`POST /staging-tables`: the server chooses the table id
  and its location), write the table's first commit there, then create the MANAGED table
  through the UC Delta API (`POST /delta/v1/catalogs/{c}/schemas/{s}/tables`);
- `ManagedTable.stage`: write `_delta_log/_staged_commits/<v:020>.<uuid>.json`;
- `ManagedTable.ratify`: ask the catalog to make it version v (`add-commit`);
- `ManagedTable.publish`: copy the ratified bytes to `_delta_log/<v:020>.json`, then tell the
  catalog (`set-latest-backfilled-version`).

The server never looks at storage (it does not check that a staged file exists, nor what a
file name names), so the rig writes the files itself: to S3 (moto, through boto3) or to a
local folder (`file://`, which Java Iceberg reads).

The expected rows of a catalog-managed table come from an independent Delta reader, as
`../shared/catalog-managed/README.md` says: a local copy with the commits this rig ratified
published into `_delta_log/`, `catalogManaged` dropped from the protocol, and the staged files
left out, read by DuckDB's `delta_scan` (delta-kernel-rs). The rig keeps its own record of
what it ratified; it never asks lakemirror.
"""

import io
import json
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import requests

from rig import judge
from rig.unity import UnitySchema, UnityServer

FEATURE = "catalogManaged"
TABLE_ID_KEY = "io.unitycatalog.tableId"
# What the server asks of a MANAGED table's creation request (its contract, not the log's).
REQUIRED_READER_FEATURES = ["catalogManaged", "v2Checkpoint", "vacuumProtocolCheck"]
REQUIRED_WRITER_FEATURES = REQUIRED_READER_FEATURES + ["inCommitTimestamp"]
REQUIRED_PROPERTIES = {"delta.checkpointPolicy": "v2", "delta.enableInCommitTimestamps": "true",
                       "delta.checkpoint.writeStatsAsStruct": "true", "delta.checkpoint.writeStatsAsJson": "true"}
# The protocol Spark 4.0 / Delta 4.0 writes for a catalog-managed table (catalog_managed_0).
LOG_PROTOCOL = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                             "readerFeatures": ["catalogManaged", "vacuumProtocolCheck"],
                             "writerFeatures": ["catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"]}}


# ---------------------------------------------------------------- storage (s3:// or file://)


def put(location: str, body: bytes):
    url = urlparse(location)
    if url.scheme == "s3":
        boto3.client("s3").put_object(Bucket=url.netloc, Key=url.path.lstrip("/"), Body=body)
    else:
        path = local_path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


def get(location: str) -> bytes:
    url = urlparse(location)
    if url.scheme == "s3":
        return boto3.client("s3").get_object(Bucket=url.netloc, Key=url.path.lstrip("/"))["Body"].read()
    return local_path(location).read_bytes()


def delete(location: str):
    url = urlparse(location)
    if url.scheme == "s3":
        boto3.client("s3").delete_object(Bucket=url.netloc, Key=url.path.lstrip("/"))
    else:
        local_path(location).unlink()


def listing(location: str) -> dict[str, bytes]:
    """Every object under `location`, by its path relative to it."""
    url = urlparse(location)
    if url.scheme == "s3":
        s3 = boto3.client("s3")
        prefix = url.path.strip("/") + "/"
        out = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=url.netloc, Prefix=prefix):
            for obj in page.get("Contents", []):
                out[obj["Key"][len(prefix):]] = s3.get_object(Bucket=url.netloc, Key=obj["Key"])["Body"].read()
        return out
    root = local_path(location)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def local_path(location: str) -> Path:
    url = urlparse(location)
    if url.scheme not in ("file", ""):
        raise ValueError(f"not a local location: {location}")
    return Path(url.path)


def s3_key(location: str) -> str:
    url = urlparse(location)
    assert url.scheme == "s3", location
    return url.path.lstrip("/")


# ---------------------------------------------------------------- a Delta log by hand


def commit_lines(*actions, timestamp: int | None = None, operation: str = "WRITE") -> bytes:
    """A commit's bytes: commitInfo first, with its in-commit timestamp and txnId (both
    required of catalog-managed commits), then the actions."""
    timestamp = timestamp or int(time.time() * 1000)
    info = {"commitInfo": {"inCommitTimestamp": timestamp, "timestamp": timestamp, "operation": operation,
                           "engineInfo": "lakemirror-tests", "txnId": str(uuid.uuid4())}}
    return "\n".join(json.dumps(a) for a in (info, *actions)).encode()


def first_commit(table_id: str, fields: list[dict], partition_columns=(), configuration=None,
                 timestamp: int | None = None) -> bytes:
    """Version 0 of a catalog-managed table whose configuration names catalog id `table_id`,
    committed at `timestamp` (now by default)."""
    timestamp = timestamp or int(time.time() * 1000)
    schema = {"type": "struct", "fields": fields}
    metadata = {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                             "schemaString": json.dumps(schema), "partitionColumns": list(partition_columns),
                             "configuration": {"delta.enableInCommitTimestamps": "true", TABLE_ID_KEY: table_id,
                                               **(configuration or {})},
                             "createdTime": timestamp}}
    return commit_lines(metadata, LOG_PROTOCOL, timestamp=timestamp, operation="CREATE TABLE")


def field_of(name: str, type_: str) -> dict:
    return {"name": name, "type": type_, "nullable": True, "metadata": {}}


def write_data_file(root: str, name: str, table: pa.Table, partition_values=None) -> dict:
    """Writes `table` as Parquet at `root/name`; its add action (with numRecords)."""
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    body = buffer.getvalue()
    put(f"{root}/{name}", body)
    return {"add": {"path": name, "partitionValues": dict(partition_values or {}), "size": len(body),
                    "modificationTime": int(time.time() * 1000), "dataChange": True,
                    "stats": json.dumps({"numRecords": table.num_rows})}}


# ---------------------------------------------------------------- the catalog


@dataclass
class StagedCommit:
    version: int
    file_name: str  # <v:020>.<uuid>.json
    location: str  # its full URI, in _delta_log/_staged_commits/
    body: bytes
    timestamp: int  # the in-commit timestamp

    def as_catalog_commit(self) -> dict:
        """The commit as `add-commit` names it."""
        return {"version": self.version, "timestamp": self.timestamp, "file-name": self.file_name,
                "file-size": len(self.body), "file-modification-timestamp": int(time.time() * 1000)}


class CatalogRefused(AssertionError):
    def __init__(self, response: requests.Response):
        super().__init__(f"{response.request.method} {response.url}: {response.status_code} {response.text}")
        self.response = response


@dataclass
class ManagedTable:
    """A catalog-managed table the Unity Catalog server coordinates."""
    schema: UnitySchema
    name: str
    table_id: str
    location: str  # as the server assigned it: s3://… or file://…, no trailing slash
    columns: list[str] = field(default_factory=list)
    # What this rig ratified, by version (the staged commit the catalog made that version),
    # and the newest version it published.
    ratified: dict[int, StagedCommit] = field(default_factory=dict)
    published: int = 0

    @property
    def server(self) -> UnityServer:
        return self.schema.server

    @property
    def full_name(self) -> str:
        return f"{self.schema.catalog}.{self.schema.schema}.{self.name}"

    @property
    def delta_api(self) -> str:
        return f"/delta/v1/catalogs/{self.schema.catalog}/schemas/{self.schema.schema}/tables/{self.name}"

    def uri(self, relative: str) -> str:
        return f"{self.location}/{relative}"

    def load(self) -> dict:
        """loadTable: the catalog's `commits` and `latest-table-version`."""
        r = self.server.api("GET", self.delta_api)
        if r.status_code != 200:
            raise CatalogRefused(r)
        return r.json()

    def write(self, name: str, table: pa.Table, partition_values=None) -> dict:
        """A data file of this table; its add action."""
        return write_data_file(self.location, name, table, partition_values)

    def stage(self, version: int, *actions, file_uuid: str | None = None,
              timestamp: int | None = None) -> StagedCommit:
        """Writes a staged commit of `version` (its actions after a commitInfo, in-commit
        timestamp `timestamp` or now), as a writer does before it asks the catalog; nothing is
        ratified."""
        timestamp = timestamp or int(time.time() * 1000)
        body = commit_lines(*actions, timestamp=timestamp)
        file_name = f"{version:020}.{file_uuid or uuid.uuid4()}.json"
        staged = StagedCommit(version, file_name, self.uri(f"_delta_log/_staged_commits/{file_name}"), body,
                              timestamp)
        put(staged.location, body)
        return staged

    def staged_file(self, file_name: str) -> StagedCommit:
        """A staged commit already at the table's location (copied with the table)."""
        location = self.uri(f"_delta_log/_staged_commits/{file_name}")
        body = get(location)
        info = json.loads(body.decode().splitlines()[0])["commitInfo"]
        return StagedCommit(int(file_name[:20]), file_name, location, body, info["inCommitTimestamp"])

    def add_commit(self, commit: dict) -> requests.Response:
        """updateTable with `add-commit`, the answer as the server gives it (for commits the
        catalog should refuse, and for what a writer with access to the catalog may send)."""
        return self.server.api("POST", self.delta_api, json={
            "requirements": [{"type": "assert-table-uuid", "uuid": self.table_id}],
            "updates": [{"action": "add-commit", "commit": commit}]})

    def ratify(self, staged: StagedCommit) -> dict:
        """Asks the catalog to make `staged` its version; its loadTable answer."""
        r = self.add_commit(staged.as_catalog_commit())
        if r.status_code != 200:
            raise CatalogRefused(r)
        self.ratified[staged.version] = staged
        return r.json()

    def commit(self, version: int, *actions, timestamp: int | None = None) -> StagedCommit:
        """Stages and ratifies, as a writer that wins its version does."""
        staged = self.stage(version, *actions, timestamp=timestamp)
        self.ratify(staged)
        return staged

    def publish(self, upto: int, notify: bool = True):
        """Publishes the ratified commits up to `upto` into `_delta_log/` (their very bytes),
        then tells the catalog (which then stops listing them)."""
        for version in range(self.published + 1, upto + 1):
            put(self.uri(f"_delta_log/{version:020}.json"), self.ratified[version].body)
        self.published = max(self.published, upto)
        if notify:
            self.notify_published(upto)

    def notify_published(self, upto: int):
        """Tells the catalog that the commits up to `upto` are published (it forgets them)."""
        r = self.server.api("POST", self.delta_api, json={
            "requirements": [{"type": "assert-table-uuid", "uuid": self.table_id}],
            "updates": [{"action": "set-latest-backfilled-version", "latest-published-version": upto}]})
        if r.status_code != 200:
            raise CatalogRefused(r)

    # ------------------------------------------------------------ expected rows

    def reference_copy(self, dest: Path, version: int) -> Path:
        """A local copy of the table at `version` as a plain Delta table: the data files and
        published commits, the commits this rig ratified up to `version` published, nothing
        past it, no staged files, and `catalogManaged` dropped from the protocol."""
        if dest.exists():
            shutil.rmtree(dest)
        for relative, body in listing(self.location).items():
            if relative.startswith("_delta_log/"):
                continue
            path = dest / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
        log = dest / "_delta_log"
        log.mkdir(parents=True)
        for v in range(version + 1):
            body = self.ratified[v].body if v in self.ratified else get(self.uri(f"_delta_log/{v:020}.json"))
            (log / f"{v:020}.json").write_bytes(without_catalog_managed(body))
        return dest

    def expected_rows(self, scratch: Path, version: int, columns=None) -> list[tuple]:
        """The rows of the table at `version`, read by DuckDB's delta_scan from a reference copy."""
        copy = self.reference_copy(scratch / f"reference-{self.name}-{version}", version)
        return judge.delta_rows_duckdb(str(copy), columns=columns or self.columns)

    def active_files(self, version: int) -> set[str]:
        """The data files of `version` (adds minus removes of the commits the rig knows), as
        full URIs."""
        active = set()
        for v in range(version + 1):
            body = self.ratified[v].body if v in self.ratified else get(self.uri(f"_delta_log/{v:020}.json"))
            for line in body.decode().splitlines():
                action = json.loads(line) if line.strip() else {}
                if "add" in action:
                    active.add(self.uri(action["add"]["path"]))
                if "remove" in action:
                    active.discard(self.uri(action["remove"]["path"]))
        return active


def without_catalog_managed(body: bytes) -> bytes:
    """A commit's bytes with `catalogManaged` dropped from any protocol action in it."""
    lines = []
    for line in body.decode().splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "protocol" in action:
            for key in ("readerFeatures", "writerFeatures"):
                if key in action["protocol"]:
                    action["protocol"][key] = [f for f in action["protocol"][key] if f != FEATURE]
        lines.append(json.dumps(action))
    return "\n".join(lines).encode()


def reserve(schema: UnitySchema, name: str) -> tuple[str, str]:
    """A staging table: the id and location the server chose."""
    r = schema.server.api("POST", "/staging-tables",
                          json={"name": name, "catalog_name": schema.catalog, "schema_name": schema.schema})
    if r.status_code != 200:
        raise CatalogRefused(r)
    staging = r.json()
    return staging["id"], staging["staging_location"].rstrip("/")


def create(schema: UnitySchema, name: str, fields: list[dict], partition_columns=(), source: Path | None = None,
           timestamp: int | None = None) -> ManagedTable:
    """Creates a catalog-managed table as a writer does: reserves it, writes version 0 at the
    location the server chose (a copy of the table at `source`, its `io.unitycatalog.tableId`
    rewritten to the id the server issued, or a new first commit of `fields` at `timestamp`),
    and creates the MANAGED table."""
    table_id, location = reserve(schema, name)
    if source is not None:
        for path in sorted(p for p in Path(source).rglob("*") if p.is_file()):
            relative = path.relative_to(source).as_posix()
            body = path.read_bytes()
            if relative == f"_delta_log/{0:020}.json":
                body = with_table_id(body, table_id)
            put(f"{location}/{relative}", body)
    else:
        first = first_commit(table_id, fields, partition_columns, timestamp=timestamp)
        put(f"{location}/_delta_log/{0:020}.json", first)
    r = schema.server.api("POST", f"/delta/v1/catalogs/{schema.catalog}/schemas/{schema.schema}/tables", json={
        "name": name, "location": location, "table-type": "MANAGED", "data-source-format": "DELTA",
        "columns": {"type": "struct", "fields": fields}, "partition-columns": list(partition_columns),
        "protocol": {"min-reader-version": 3, "min-writer-version": 7, "reader-features": REQUIRED_READER_FEATURES,
                     "writer-features": REQUIRED_WRITER_FEATURES},
        "properties": {**REQUIRED_PROPERTIES, TABLE_ID_KEY: table_id},
        "last-commit-timestamp-ms": timestamp or int(time.time() * 1000)})
    if r.status_code != 200:
        raise CatalogRefused(r)
    return ManagedTable(schema=schema, name=name, table_id=table_id, location=location,
                        columns=[f["name"] for f in fields])


def with_table_id(body: bytes, table_id: str) -> bytes:
    """A commit whose metaData configuration names catalog id `table_id`."""
    lines = []
    for line in body.decode().splitlines():
        action = json.loads(line)
        if "metaData" in action:
            action["metaData"]["configuration"][TABLE_ID_KEY] = table_id
        lines.append(json.dumps(action))
    return "\n".join(lines).encode()


def schema_over_directory(server: UnityServer, root: Path) -> UnitySchema:
    """A catalog and schema whose managed tables lie under the local folder `root` (the
    server must allow it: `local_storage: {allowed-roots: [...]}`), for the judges that read
    only local tables. Like schema_over_bucket: a credential, an external location covering
    the folder (the server asks it of a managed root), a catalog and a schema."""
    tag = uuid.uuid4().hex[:10]
    root = root / tag
    root.mkdir(parents=True)
    steps = [
        ("/credentials", {"name": f"cred_{tag}", "purpose": "STORAGE",
                          "aws_iam_role": {"role_arn": "arn:aws:iam::123456789012:role/uc-test",
                                           "region": "us-east-1"}}),
        ("/external-locations", {"name": f"loc_{tag}", "url": root.as_uri(), "credential_name": f"cred_{tag}",
                                 "skip_validation": True}),
        ("/catalogs", {"name": f"cat_{tag}", "storage_root": f"{root.as_uri()}/managed"}),
        ("/schemas", {"name": "gold", "catalog_name": f"cat_{tag}"}),
    ]
    for path, body in steps:
        r = server.api("POST", path, json=body)
        assert r.status_code == 200, f"POST {path}: {r.status_code} {r.text}"
    return UnitySchema(server=server, catalog=f"cat_{tag}", schema="gold")
