"""Peak memory of lakebase-sync loading one large Parquet file (a benchmark, not a test).

A table compacted by OPTIMIZE holds files of about 1 GB, each of row groups of about 128 MB
(Spark's parquet.block.size). lakebase-sync reads a data file one row group at a time by
ranged reads, so its memory should follow the row group, not the file. In one run, on a
throwaway local PostgreSQL (tests/rig/postgres.py), this generates two local Delta tables of
one Parquet file each, with row groups of the same size:

- baseline: one row group (--row-group-mb, default 128);
- large: a file of --file-mb (default 1024) of such row groups;

and runs `lakemirror lakebase-sync` (full refresh) on each under GNU time, printing wall time,
rows per second and peak RSS, and the ratio of the large file's peak RSS to the baseline's
(1.0: memory does not grow with the file). --before BINARY measures another build beside it
(e.g. one that read files whole).

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/reverse_sync_memory.py \\
        [--file-mb 1024] [--row-group-mb 128] [--before path/to/older/lakemirror]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from rig import postgres  # noqa: E402

import common  # noqa: E402  (tests/bench, the script's own folder)

TARGETS = {"large_rss_mb": 512}
PAYLOAD_BYTES = 100  # random bytes per row, as 200 hex characters: incompressible text
ROW_BYTES = 8 + 8 + 2 * PAYLOAD_BYTES  # id, amount, payload


def row_group(first_id: int, rows: int) -> pa.Table:
    payload = os.urandom(rows * PAYLOAD_BYTES).hex()
    step = 2 * PAYLOAD_BYTES
    return pa.table({
        "id": pa.array(range(first_id, first_id + rows), pa.int64()),
        "amount": pa.array([i * 0.25 for i in range(rows)], pa.float64()),
        "payload": pa.array([payload[i * step:(i + 1) * step] for i in range(rows)], pa.string()),
    })


def write_table(path: Path, file_mb: int, row_group_mb: int) -> int:
    """A Delta table of one Parquet file of about `file_mb` in row groups of about
    `row_group_mb`; its log written by hand (protocol, metaData, one add). Returns the rows."""
    (path / "_delta_log").mkdir(parents=True)
    rows_per_group = row_group_mb * 2**20 // ROW_BYTES
    groups = max(1, round(file_mb / row_group_mb))
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    schema = row_group(0, 1).schema
    with pq.ParquetWriter(path / name, schema, compression="snappy") as writer:
        for g in range(groups):
            writer.write_table(row_group(g * rows_per_group, rows_per_group), row_group_size=rows_per_group)
    rows = groups * rows_per_group
    delta_schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "amount", "type": "double", "nullable": True, "metadata": {}},
        {"name": "payload", "type": "string", "nullable": True, "metadata": {}}]}
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(delta_schema), "partitionColumns": [], "configuration": {},
                      "createdTime": int(time.time() * 1000)}},
        {"add": {"path": name, "partitionValues": {}, "size": (path / name).stat().st_size,
                 "modificationTime": int(time.time() * 1000), "dataChange": True,
                 "stats": json.dumps({"numRecords": rows})}},
    ]
    (path / "_delta_log" / f"{0:020}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return rows


def load(binary: str, table: Path, url: str, target: str) -> dict:
    """A full refresh under GNU time: wall seconds, peak RSS (MB), the report."""
    with tempfile.NamedTemporaryFile() as rss:
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, binary, "lakebase-sync",
                               "--source-path", str(table), "--target-table", target, "--mode", "full_refresh",
                               "--postgres-url", url], capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"lakemirror lakebase-sync failed: {done.stderr[-2000:]}")
        peak_mb = int(Path(rss.name).read_text().split()[-1]) / 1024  # KiB
    return {"seconds": seconds, "peak_rss_mb": peak_mb, "report": json.loads(done.stdout.strip().splitlines()[-1])}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file-mb", type=int, default=1024, help="size of the large file")
    parser.add_argument("--row-group-mb", type=int, default=128, help="size of each row group")
    parser.add_argument("--before", help="another lakemirror binary to measure beside --binary")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    binaries = [("this build", args.binary)] + ([("before", args.before)] if args.before else [])
    server = postgres.start()
    rows_out = []
    try:
        with tempfile.TemporaryDirectory(prefix="reverse-sync-memory-") as work:
            began = time.perf_counter()
            tables = {}
            for label, mb in (("baseline", args.row_group_mb), ("large", args.file_mb)):
                path = Path(work) / label
                rows = write_table(path, mb, args.row_group_mb)
                file = next(path.glob("*.parquet"))
                tables[label] = (path, rows, file.stat().st_size / 2**20)
            print(f"  generated the tables in {time.perf_counter() - began:.0f} s", file=sys.stderr)
            for n, (name, binary) in enumerate(binaries):
                for label, (path, rows, size_mb) in tables.items():
                    result = load(binary, path, server.url, f"bench_{label}_{n}")
                    assert result["report"]["rows_inserted"] == rows, result["report"]
                    rows_out.append((name, label, size_mb, rows, result))
                    print(f"  {name}, {label}: {result['seconds']:.1f} s, {result['peak_rss_mb']:.0f} MB",
                          file=sys.stderr)
    finally:
        server.stop()
    print(report(rows_out, args))


def report(rows_out, args) -> str:
    lines = [f"lakebase-sync peak memory ({common.machine()}; local PostgreSQL; {common.today_and_commit()}; "
             f"binary {args.binary}; row groups of {args.row_group_mb} MB)", "",
             "| build | table | file MB | rows | seconds | rows/s | peak RSS MB | RSS vs baseline |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    baseline = {name: r["peak_rss_mb"] for name, label, _, _, r in rows_out if label == "baseline"}
    for name, label, size_mb, rows, r in rows_out:
        lines.append(f"| {name} | {label} | {size_mb:.0f} | {rows:,} | {r['seconds']:.1f} | {rows / r['seconds']:,.0f} | "
                     f"{r['peak_rss_mb']:.0f} | {r['peak_rss_mb'] / baseline[name]:.2f}x |")
    large = next(r for name, label, _, _, r in rows_out if name == "this build" and label == "large")
    verdict = "met" if large["peak_rss_mb"] <= TARGETS["large_rss_mb"] else "NOT met"
    lines += ["", f"Target: the large file loads with peak RSS <= {TARGETS['large_rss_mb']} MB: **{verdict}** "
              f"({large['peak_rss_mb']:.0f} MB)."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
