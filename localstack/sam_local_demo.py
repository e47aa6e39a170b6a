"""The three functions under `sam local invoke`, on this machine only (see sam-local.sh)."""

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlparse

import boto3
import psycopg
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from rig import judge, local_aws, postgres, sam_local, unity  # noqa: E402

# The checked-in sample files name this bucket; moto has it, so they work as written.
BUCKET = "amzn-s3-demo-bucket"
EVENTS = REPO / "functions"


def step(text):
    print(f"\n== {text}", flush=True)


def start_moto(work: Path):
    proc, line = local_aws.start_moto(stderr=(work / "moto.log").open("wb"))
    if not line.startswith("ready "):
        proc.kill()
        raise SystemExit(f"moto did not start ({line!r}); see {work / 'moto.log'}")
    endpoint = line.split()[1]
    os.environ.update(local_aws.aws_env(endpoint))
    for name in local_aws.LEAKY_VARIABLES:
        os.environ.pop(name, None)
    return proc, endpoint


def env_of(function: str, folder: str, **overrides) -> dict[str, str]:
    return {**json.loads((EVENTS / folder / "events" / "env.json").read_text())[function], **overrides}


def invoke(sam, function: str, event: Path, env: dict[str, str]):
    step(f"sam local invoke {function} -e {event.relative_to(REPO)}")
    print("  " + shlex.join(sam.command(function, event.relative_to(REPO), Path("env.json"))), flush=True)
    result = sam.invoke(function, event, env)
    for line in result.stderr.splitlines():
        if '"level"' in line or "START" in line or "REPORT" in line or "rror" in line:
            print(f"  | {line[:300]}")
    if result.returncode != 0 or result.json is None:
        sys.stderr.write(result.stderr[-5000:])
        raise SystemExit(f"{function} failed (exit {result.returncode})")
    print(f"  answer ({result.seconds:.1f} s): {json.dumps(result.json)}", flush=True)
    return result.json


def show(title, rows, columns):
    print(f"  {title}")
    print("    " + " | ".join(columns))
    for row in sorted(rows):
        print("    " + " | ".join(str(v) for v in row))


def main():
    work = Path(tempfile.mkdtemp(prefix="lakemirror-sam-local-"))
    why = sam_local.missing_build()
    if why:
        raise SystemExit(why)
    moto, endpoint = start_moto(work)
    pg = uc = None
    try:
        step("local services on loopback")
        pg = postgres.start()
        uc = unity.start(work / "unity")
        print(f"  moto {endpoint}, PostgreSQL 127.0.0.1:{pg.port}, Unity Catalog {uc.url}")
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        boto3.client("glue").create_database(DatabaseInput={"Name": "sales"})
        uri, opts = f"s3://{BUCKET}/warehouse/orders", judge.delta_storage_options()
        table = lambda ids, day: pa.table({"order_id": pa.array(ids, pa.int64()),
                                           "amount": pa.array([i * 2.5 for i in ids], pa.float64()),
                                           "day": pa.array([day] * len(ids), pa.string())})
        write_deltalake(uri, table([1, 2, 3], "2026-12-01"), partition_by=["day"], storage_options=opts)
        write_deltalake(uri, table([4, 5], "2026-12-02"), mode="append", storage_options=opts)
        DeltaTable(uri, storage_options=opts).delete("order_id = 2")
        print(f"  Delta table {uri}: versions 0-2 (create, append, delete order 2)")
        secrets = boto3.client("secretsmanager")
        password = secrets.create_secret(Name="lakemirror-postgres", SecretString=json.dumps(
            {"username": postgres.USER, "password": postgres.PASSWORD}))["ARN"]
        ca = secrets.create_secret(Name="lakemirror-postgres-ca", SecretString=Path(pg.ca_file).read_text())["ARN"]
        token = secrets.create_secret(Name="lakemirror-uc-token", SecretString="demo-token")["ARN"]
        schema = unity.schema_over_bucket(uc, BUCKET)

        with sam_local.SamLocal(endpoint, relay_ports=[pg.port, urlparse(uc.url).port], log_dir=work) as sam:
            print(f"  Docker engine {sam.docker_host}, base image {sam.image}")
            # The README's commit event (version 0 of warehouse/orders): a sync goes to the
            # newest version, one snapshot per version.
            commit = EVENTS / "glue-sync" / "events" / "commit.json"
            invoke(sam, "GlueSyncFunction", commit, env_of("GlueSyncFunction", "glue-sync"))
            snapshots = judge.iceberg_snapshots("sales", "orders")
            print("  Iceberg snapshots in Glue: " + ", ".join(
                f"delta.version {s['summary']['delta.version']}" for s in snapshots))
            columns = ["order_id", "amount", "day"]
            show("pyiceberg reads sales.orders through Glue:", judge.iceberg_rows_pyiceberg("sales", "orders",
                                                                                      columns=columns), columns)

            invoke(sam, "LakebaseSyncFunction", EVENTS / "lakebase-sync" / "events" / "schedule.json",
                   env_of("LakebaseSyncFunction", "lakebase-sync",
                          POSTGRES_URL=f"postgres://{postgres.USER}@localhost:{pg.port}/postgres",
                          POSTGRES_PASSWORD_SECRET_ARN=password, POSTGRES_CA_SECRET_ARN=ca))
            with psycopg.connect(pg.url) as con:
                rows = con.execute('SELECT order_id, amount, day FROM "public"."orders"').fetchall()
            show("PostgreSQL public.orders:", rows, columns)

            invoke(sam, "UnityRegisterFunction", commit,
                   env_of("UnityRegisterFunction", "unity-register", UC_URL=uc.url, UC_TOKEN_SECRET_ARN=token,
                          UC_CATALOG=schema.catalog, UC_SCHEMA=schema.schema))
            entry = schema.table("orders")
            print(f"  Unity Catalog {schema.catalog}.{schema.schema}.orders: {entry['table_type']} "
                  f"{entry['data_source_format']} at {entry['storage_location']}, columns "
                  + ", ".join(f"{c['name']} {c['type_text']}" for c in entry["columns"]))
        step(f"done; logs in {work}")
    finally:
        for server in (uc, pg):
            if server is not None:
                server.stop()
        moto.terminate()
        moto.wait()


if __name__ == "__main__":
    main()
