"""Runs the lakemirror demo against a throwaway moto server (see demo.sh)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import boto3
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from rig import judge  # noqa: E402

BIN = os.environ["LAKEMIRROR_BIN"]
MOTO = Path(__file__).resolve().parent.parent / "tests" / "rig" / "moto_strict.py"


def start_moto():
    log = Path(tempfile.mkdtemp(prefix="lakemirror-demo-")) / "moto.log"
    proc = subprocess.Popen([sys.executable, str(MOTO), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=log.open("w"), text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("ready "):
        proc.kill()
        raise SystemExit(f"moto did not start ({line!r}); see {log}")
    endpoint = line.split(" ", 1)[1]
    os.environ.update({
        "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
        "AWS_EC2_METADATA_DISABLED": "true",
    })
    return proc, endpoint


def glue_sync(uri, database):
    out = subprocess.run([BIN, "glue-sync", "--table-uri", uri, "--glue-database", database],
                         capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    if out.returncode != 0:
        raise SystemExit(f"lakemirror failed ({out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])


def show(title, table: pa.Table):
    print(f"\n== {title}")
    print("  " + " | ".join(table.column_names))
    for row in table.sort_by("id").to_pylist():
        print("  " + " | ".join(str(v) for v in row.values()))


def main():
    moto, endpoint = start_moto()
    try:
        boto3.client("s3").create_bucket(Bucket="lake")
        boto3.client("glue").create_database(DatabaseInput={"Name": "sales"})
        uri, opts = "s3://lake/warehouse/orders", judge.delta_storage_options()
        print(f"moto at {endpoint}; Delta table {uri}; Glue database sales")

        orders = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()),
                           "amount": [10.0, 20.5, 7.25, 99.0],
                           "region": ["eu west", "us east", "eu west", "ap/south"]})
        write_deltalake(uri, orders, partition_by=["region"], storage_options=opts)
        report = glue_sync(uri, "sales")
        print(f"first sync: Delta v{report['delta_version']} -> snapshot {report['snapshot_id']}")

        more = pa.table({"id": pa.array([5, 6], pa.int64()), "amount": [1.0, 2.0], "region": ["us east", "région"]})
        write_deltalake(uri, more, partition_by=["region"], mode="append", storage_options=opts)
        DeltaTable(uri, storage_options=opts).update(predicate="id = 2", updates={"amount": "amount * 2"})
        DeltaTable(uri, storage_options=opts).delete("id = 3")
        report = glue_sync(uri, "sales")
        print(f"catch-up sync: {report['snapshots_committed']} snapshots, now at Delta v{report['delta_version']}")
        print(f"last line of `lakemirror glue-sync`: {json.dumps({k: report[k] for k in ('delta_version', 'snapshot_id', 'snapshots_committed', 'added_files', 'removed_files', 'elapsed_ms')})}")

        delta = DeltaTable(uri, storage_options=opts)
        print("\n== Delta history (delta-rs)")
        for h in sorted(delta.history(), key=lambda h: h["version"]):
            print(f"  v{h['version']}: {h.get('operation')}")
        print("\n== Iceberg snapshots in Glue sales.orders (pyiceberg)")
        for s in judge.iceberg_snapshots("sales", "orders"):
            summary = s["summary"]
            print(f"  {s['snapshot_id']}: {summary['operation']:<9} delta.version={summary['delta.version']} "
                  f"+{summary.get('added-data-files')} -{summary.get('deleted-data-files')} files")

        table = judge.glue_catalog().load_table(("sales", "orders"))
        show("Delta table read by delta-rs", delta.to_pyarrow_table())
        show("Iceberg table read by pyiceberg through Glue", table.scan().to_arrow())
        con = judge.duckdb_connect("avro", "iceberg")
        duck = con.sql(f"SELECT * FROM iceberg_scan('{table.metadata_location}')").to_arrow_table()
        show("Iceberg table read by DuckDB iceberg_scan", duck)

        same = judge.arrow_rows(delta.to_pyarrow_table(), ["id", "amount", "region"])
        judge.assert_same_rows(same, judge.arrow_rows(table.scan().to_arrow(), ["id", "amount", "region"]))
        judge.assert_same_rows(same, judge.arrow_rows(duck, ["id", "amount", "region"]))
        print("\nAll three readers return the same rows.")
        # And without reading a row: the mirror's metadata against the Delta log.
        out = subprocess.run([BIN, "verify", "--table-uri", uri, "--glue-database", "sales"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"lakemirror verify found the mirror different ({out.returncode}):\n{out.stderr}")
        verified = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"`lakemirror verify`: sales.orders equals Delta v{verified['delta_version']} "
              f"({verified['delta_files']} files, {verified['io']['requests']} requests, metadata only)")
    finally:
        moto.terminate()
        moto.wait()


if __name__ == "__main__":
    main()
