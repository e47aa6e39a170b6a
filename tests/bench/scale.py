"""How the first sync (bootstrap) of a very large Delta table scales (a benchmark, not a test).

Large Databricks and Spark tables hold millions of files; their log is a checkpoint of one add
per file plus the commits after it. For each N (active files) and each checkpoint layout this
generates such a log with pyarrow, in the Delta checkpoint schema with `stats` (JSON) and
`stats_parsed` (struct), without writing any data file:

- classic: one Parquet checkpoint file;
- multi-part: `--parts` files (`<v>.checkpoint.<part>.<parts>.parquet`);
- v2: a checkpoint naming `--parts` sidecar files in `_delta_log/_sidecars/` (v2Checkpoint
  table feature);

then, on a local moto Glue with the table on the local file system, runs `lakemirror
glue-sync` (its own process, under GNU time) for the bootstrap, commits one more file and runs
it again for the one-commit sync. It prints, per table: bootstrap wall time, peak RSS,
requests, and the one-commit sync's time and requests, beside the targets of issue 19, and
the peak RSS per file (the figure that decides which tables fit in a Lambda of 10 GB).

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/scale.py \\
        [--sizes 1000000] [--layouts classic,multi-part,v2] [--parts 10] [--memory-limit-gb 0] \\
        [--before path/to/older/lakemirror]

--before runs another build on the same logs, each bootstrap right after the other's: this
machine's speed drifts by 2x within an hour, so only figures of one run compare.

With --memory-limit-gb, a sync that needs more address space fails (recorded as such)
instead of pushing the machine into swap (10,000,000 files need about 20 GB today).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from rig import local_aws  # noqa: E402

import common  # noqa: E402  (tests/bench, the script's own folder)

DATABASE = "bench_scale"
VERSION = 10  # the checkpoint's version; commit 11 is the one-commit sync
BATCH = 500_000  # checkpoint rows generated at once
TARGETS = {  # issue 19, on this machine
    1_000_000: {"seconds": 60, "rss_mb": 1024},
    10_000_000: {"seconds": 600, "rss_mb": 2048},
}
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


def definition_rows(schema: pa.Schema, v2: bool) -> pa.Table:
    now = int(time.time() * 1000)
    protocol = ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"],
                 "writerFeatures": ["v2Checkpoint"]} if v2 else
                {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": None, "writerFeatures": None})
    metadata = {"id": "scale-bench", "name": None, "description": None,
                "format": {"provider": "parquet", "options": []}, "schemaString": SCHEMA_STRING,
                "partitionColumns": [], "configuration": [], "createdTime": now}
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


def generate(root: Path, n: int, layout: str, parts: int) -> dict:
    """The log of a table of `n` files: a checkpoint at VERSION in `layout`, `_last_checkpoint`."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    started = time.perf_counter()
    v = f"{VERSION:020}"
    if layout == "classic":
        write_adds(log / f"{v}.checkpoint.parquet", CHECKPOINT, 0, n, definition_rows(CHECKPOINT, False))
        hint = {"version": VERSION, "size": n + 2}
    elif layout == "multi-part":
        per = -(-n // parts)
        for p in range(parts):
            first = p * per
            write_adds(log / f"{v}.checkpoint.{p + 1:010}.{parts:010}.parquet", CHECKPOINT, first,
                       max(0, min(per, n - first)), definition_rows(CHECKPOINT, False) if p == 0 else None)
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
        top = definition_rows(V2_TOP, True)
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


def commit_one_file(root: Path, n: int):
    add = {"add": {"path": f"part-{n:09}-new.c000.snappy.parquet", "partitionValues": {}, "size": 1000,
                   "modificationTime": int(time.time() * 1000), "dataChange": True,
                   "stats": json.dumps({"numRecords": 10, "minValues": {"id": 0}, "maxValues": {"id": 9},
                                        "nullCount": {"id": 0}})}}
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    (root / "_delta_log" / f"{VERSION + 1:020}.json").write_text(json.dumps(info) + "\n" + json.dumps(add) + "\n")


def sync(binary: str, root: Path, table: str, limit_gb: float, metadata: Path) -> dict:
    """`lakemirror glue-sync` under GNU time with an address-space limit: its report, wall
    seconds and peak RSS, or the failure."""
    def limit():
        if limit_gb > 0:
            cap = int(limit_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.NamedTemporaryFile() as rss:
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, binary, "glue-sync", "--table-uri",
                               str(root), "--glue-database", DATABASE, "--glue-table", table,
                               "--metadata-uri", str(metadata)],
                              capture_output=True, text=True, preexec_fn=limit if limit_gb > 0 else None)
        seconds = time.perf_counter() - started
        text = Path(rss.name).read_text().split()
        peak_mb = int(text[-1]) / 1024 if text and text[-1].isdigit() else None
    if done.returncode != 0:
        return {"failed": (done.stderr.strip().splitlines() or ["killed"])[-1][-300:], "seconds": seconds,
                "peak_rss_mb": peak_mb}
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seconds": seconds, "peak_rss_mb": peak_mb, "requests": report["io"]["requests"], "report": report}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000", help="comma-separated N (active files), e.g. 1000000,10000000")
    parser.add_argument("--layouts", default="classic,multi-part,v2", help="checkpoint layouts to generate")
    parser.add_argument("--parts", type=int, default=10, help="parts of a multi-part checkpoint / v2 sidecars")
    parser.add_argument("--memory-limit-gb", type=float, default=0,
                        help="address space a sync may use, 0 for no limit (a limit slows syncs by about 25%%)")
    parser.add_argument("--work", type=Path, help="where the logs are generated [default: a temporary folder]")
    parser.add_argument("--before", help="another lakemirror binary, run beside --binary on the same logs, "
                                         "each bootstrap right after the other's (this machine's speed drifts)")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    sizes = [int(s) for s in args.sizes.split(",")]
    layouts = args.layouts.split(",")
    if unknown := set(layouts) - {"classic", "multi-part", "v2"}:
        sys.exit(f"--layouts: unknown {sorted(unknown)}; use classic, multi-part, v2")

    moto, line = local_aws.start_moto(stderr=subprocess.DEVNULL)
    if not line.startswith("ready "):
        sys.exit(f"moto did not start: {line!r}")
    os.environ.update(local_aws.aws_env(line.split()[1]))
    rows = []
    try:
        boto3.client("glue").create_database(DatabaseInput={"Name": DATABASE})
        with tempfile.TemporaryDirectory(prefix="scale-bench-", dir=args.work) as work:
            for n in sizes:
                for layout in layouts:
                    root = Path(work) / f"{layout}-{n}"
                    made = generate(root, n, layout, args.parts)
                    print(f"  {layout} {n:,}: log of {made['log_mb']:.0f} MB generated in {made['seconds']:.0f} s",
                          file=sys.stderr)
                    binaries = [("this build", args.binary)] + ([("before", args.before)] if args.before else [])
                    boots = {}
                    for name, binary in binaries:
                        table = f"{layout.replace('-', '_')}_{n}_{len(boots)}"
                        metadata = root / f"_lakemirror_{len(boots)}"
                        boots[name] = (binary, table, metadata,
                                       sync(binary, root, table, args.memory_limit_gb, metadata))
                        print(f"    {name} bootstrap: {boots[name][3]}"[:300], file=sys.stderr)
                    commit_one_file(root, n)
                    for name, (binary, table, metadata, boot) in boots.items():
                        one = None if "failed" in boot else sync(binary, root, table, args.memory_limit_gb, metadata)
                        rows.append((n, layout, made, name, boot, one))
    finally:
        moto.terminate()
    print(report(rows, args))


def report(rows, args) -> str:
    lines = [f"bootstrap at scale ({common.machine()}; local file system + moto Glue; {common.today_and_commit()}; "
             f"binary {args.binary}; {args.parts} parts / sidecars)", "",
             "| files | layout | build | log MB | bootstrap s | peak RSS MB | RSS KB per file | requests | "
             "one-commit sync s | its requests | target |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for n, layout, made, name, boot, one in rows:
        target = TARGETS.get(n)
        rss = boot.get("peak_rss_mb")
        if "failed" in boot:
            verdict = f"failed: {boot['failed'][:80]}"
        elif target:
            met = boot["seconds"] <= target["seconds"] and rss is not None and rss <= target["rss_mb"]
            verdict = f"{'met' if met else 'NOT met'} (<= {target['seconds']} s, <= {target['rss_mb']} MB)"
        else:
            verdict = "-"
        rss_text = "-" if rss is None else f"{rss:.0f}"
        per_file = "-" if rss is None else f"{rss * 1024 / n:.2f}"
        synced = one is not None and "failed" not in one
        one_seconds = f"{one['seconds']:.2f}" if synced else "-"
        one_requests = one["requests"] if synced else "-"
        lines.append(
            f"| {n:,} | {layout} | {name} | {made['log_mb']:.0f} | {boot['seconds']:.1f} | {rss_text} | {per_file} | "
            f"{boot.get('requests', '-')} | {one_seconds} | {one_requests} | {verdict} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
