"""What one small commit costs to mirror, at growing table sizes (a benchmark, not a test).

Writes Delta logs with N active files (stats carry numRecords, so no data file is opened),
bootstraps the mirror, then measures the sync of a one-file append and of a one-file
update (remove 1 + add 1): wall time, S3+Glue requests, bytes read and written. Prints a
markdown table with ratios against the smallest N measured in the same run.

    $(tests/rig/venv.sh)/bin/python tests/bench/one_commit.py [N ...]   (default 1000 10000)
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import boto3

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from rig import local_aws  # noqa: E402
BIN = os.environ.get("LAKEMIRROR_BIN", str(REPO / "target" / "release" / "lakemirror"))
SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "part", "type": "integer", "nullable": True, "metadata": {}}]})


def start_moto():
    proc, line = local_aws.start_moto(stderr=subprocess.DEVNULL)
    if not line.startswith("ready "):
        sys.exit(f"moto did not start: {line!r}")
    os.environ.update(local_aws.aws_env(line.split()[1]))
    return proc


def add(i, now):
    stats = json.dumps({"numRecords": 10, "minValues": {"id": i}, "maxValues": {"id": i}, "nullCount": {"id": 0}})
    return {"add": {"path": f"part={i % 100}/part-{i:07}.snappy.parquet", "partitionValues": {"part": str(i % 100)},
                    "size": 1000, "modificationTime": now, "dataChange": True, "stats": stats}}


def put_commit(s3, bucket, prefix, version, actions):
    body = "\n".join(json.dumps(a) for a in actions) + "\n"
    s3.put_object(Bucket=bucket, Key=f"{prefix}/_delta_log/{version:020}.json", Body=body.encode())


def sync(uri):
    started = time.perf_counter()
    out = subprocess.run([BIN, "glue-sync", "--table-uri", uri, "--glue-database", "bench"],
                         capture_output=True, text=True, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    report["wall_ms"] = (time.perf_counter() - started) * 1000
    return report


def measure(s3, n):
    now = int(time.time() * 1000)
    prefix = f"t{n}"
    uri = f"s3://bench/{prefix}"
    put_commit(s3, "bench", prefix, 0, [
        {"commitInfo": {"timestamp": now, "operation": "WRITE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": prefix, "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                      "partitionColumns": ["part"], "configuration": {}, "createdTime": now}},
        *[add(i, now) for i in range(n)]])
    bootstrap = sync(uri)
    put_commit(s3, "bench", prefix, 1, [{"commitInfo": {"timestamp": now}}, add(n, now)])
    append = sync(uri)
    put_commit(s3, "bench", prefix, 2, [{"commitInfo": {"timestamp": now}},
                                        {"remove": {"path": add(0, now)["add"]["path"], "dataChange": True}},
                                        add(n + 1, now)])
    update = sync(uri)
    return {"n": n, "bootstrap": bootstrap, "append": append, "update": update}


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 10000]
    moto = start_moto()
    try:
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="bench")
        boto3.client("glue").create_database(DatabaseInput={"Name": "bench"})
        rows = [measure(s3, n) for n in sizes]
    finally:
        moto.terminate()
    base = rows[0]
    print(f"lakemirror one-commit sync cost ({BIN}; local moto; one process per sync)\n")
    print("| files | kind | wall ms | lakemirror ms | requests | KiB read | KiB written | wall vs first N |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        for kind in ("bootstrap", "append", "update"):
            x = r[kind]
            io = x["io"]
            print(f"| {r['n']} | {kind} | {x['wall_ms']:.0f} | {x['elapsed_ms']} | {io['requests']} | "
                  f"{io['bytes_read'] / 1024:.1f} | {io['bytes_written'] / 1024:.1f} | "
                  f"{x['wall_ms'] / base[kind]['wall_ms']:.2f}x |")


if __name__ == "__main__":
    main()
