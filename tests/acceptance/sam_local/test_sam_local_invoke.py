"""`sam local invoke` of the three functions, laid out as `sam build` lays them out (the test
command: its debug build, tests/rig/sam_debug_build.sh; localstack/sam-local.sh: `sam build`
itself), in Lambda's container (tests/rig/sam_local.py: a local provided.al2023 stand-in on a
private Docker engine without a network, loopback relays to moto, PostgreSQL and uc-server).

Each function gets the README's event file (its bucket and keys pointed at this test's table)
and the checked-in `functions/*/events/env.json` with its placeholders filled in, and must
leave what `lakemirror invoke` leaves for the same event: the same answer, and, read by an
independent reader, the same Iceberg table in Glue (pyiceberg, against Delta's rows at every
version), the same PostgreSQL rows (psycopg), the same Unity Catalog entry (the UC API)."""

import json
import re
import subprocess
import uuid
from urllib.parse import urlparse

import boto3
import psycopg
import pyarrow as pa
import pytest
from botocore.config import Config
from deltalake import DeltaTable, write_deltalake

from acceptance.lakebase.test_lakebase import pg_rows
from conftest import REPO
from rig import judge, sam_local, unity
from rig.postgres import PASSWORD, USER

EVENTS = REPO / "functions"
PLACEHOLDER_BUCKET = "amzn-s3-demo-bucket"
TOKEN = "uc-sam-local-token"


@pytest.fixture(scope="module")
def sam(moto_endpoint, postgres_server, unity_server, tmp_path_factory):
    why = sam_local.missing_build()
    if why:
        pytest.fail(f"`sam local invoke` needs the x86_64 build: {why} (tests/run.sh makes it)", pytrace=False)
    uc_port = urlparse(unity_server.url).port
    with sam_local.SamLocal(moto_endpoint, relay_ports=[postgres_server.port, uc_port],
                            log_dir=tmp_path_factory.mktemp("sam-local")) as local:
        yield local


def checked_in_env(function: str, folder: str, bucket: str, **overrides) -> dict[str, str]:
    """functions/<folder>/events/env.json, the placeholder bucket replaced, then `overrides`."""
    env = json.loads((EVENTS / folder / "events" / "env.json").read_text())[function]
    env = {name: value.replace(PLACEHOLDER_BUCKET, bucket) for name, value in env.items()}
    return {**env, **overrides}


def assert_invoked(result: sam_local.Invocation):
    assert result.returncode == 0, f"sam local invoke exited {result.returncode}\n--- stdout\n" \
                                   f"{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-6000:]}"
    assert result.json is not None, f"no JSON answer on stdout: {result.stdout[-2000:]}\n{result.stderr[-3000:]}"


def orders(ids, day="2026-12-01"):
    return pa.table({"order_id": pa.array(ids, pa.int64()),
                     "amount": pa.array([i * 1.5 for i in ids], pa.float64()),
                     "day": pa.array([day] * len(ids), pa.string())})


def write_orders(uri, storage_options):
    """Three versions: a partitioned create, an append to a new partition, a delete."""
    write_deltalake(uri, orders([1, 2, 3]), partition_by=["day"], storage_options=storage_options)
    write_deltalake(uri, orders([4, 5], day="2026-12-02"), mode="append", storage_options=storage_options)
    DeltaTable(uri, storage_options=storage_options).delete("order_id = 2")


def test_glue_sync_in_the_container_mirrors_as_lakemirror_invoke_does(
        sam, bucket, glue, delta_storage_options, lakemirror, tmp_path):
    uri = f"s3://{bucket}/warehouse/orders"
    write_orders(uri, delta_storage_options)
    # The README's SQS batch (functions/glue-sync/events/sqs-s3-notification.json): a commit
    # notification, S3's test event and a message that is not JSON, pointed at this table.
    event_text = (EVENTS / "glue-sync" / "events" / "sqs-s3-notification.json").read_text()
    event_text = event_text.replace('\\"name\\":\\"lake\\"', f'\\"name\\":\\"{bucket}\\"') \
        .replace("arn:aws:s3:::lake", f"arn:aws:s3:::{bucket}") \
        .replace("00000000000000000007.json", "00000000000000000002.json")
    assert bucket in event_text and "00000000000000000002.json" in event_text
    event_file = tmp_path / "sqs.json"
    event_file.write_text(event_text)
    databases = {}
    for how in ("sam", "cli"):
        databases[how] = f"lm_{how}_{uuid.uuid4().hex[:12]}"
        glue.create_database(DatabaseInput={"Name": databases[how]})

    env = lambda how: checked_in_env("GlueSyncFunction", "glue-sync", bucket, GLUE_DATABASE=databases[how])
    in_container = sam.invoke("GlueSyncFunction", event_file, env("sam"))
    assert_invoked(in_container)
    in_process = lakemirror("invoke", "glue-sync", "--event", event_file, env=env("cli"))

    assert in_container.json == in_process.json == {"batchItemFailures": [{"itemIdentifier": "m-3"}]}
    snapshots = {how: judge.iceberg_snapshots(db, "orders") for how, db in databases.items()}
    versions = {how: [s["summary"]["delta.version"] for s in snaps] for how, snaps in snapshots.items()}
    assert versions["sam"] == versions["cli"] == ["0", "1", "2"]
    columns = ["order_id", "amount", "day"]
    for sam_snapshot, cli_snapshot in zip(snapshots["sam"], snapshots["cli"]):
        version = int(sam_snapshot["summary"]["delta.version"])
        expected = judge.delta_rows(uri, delta_storage_options, version=version, columns=columns)
        for how, snapshot in (("sam", sam_snapshot), ("cli", cli_snapshot)):
            judge.assert_same_rows(expected, judge.iceberg_rows_pyiceberg(
                databases[how], "orders", snapshot_id=snapshot["snapshot_id"], columns=columns), columns)
        for key in ("total-records", "total-data-files", "total-delete-files", "operation"):
            assert sam_snapshot["summary"].get(key) == cli_snapshot["summary"].get(key), key


def test_lakebase_sync_in_the_container_copies_as_lakemirror_invoke_does(
        sam, bucket, delta_storage_options, postgres_server, postgres_url, lakemirror, tmp_path):
    uri = f"s3://{bucket}/warehouse/orders"
    write_orders(uri, delta_storage_options)
    secrets = boto3.client("secretsmanager")
    password = secrets.create_secret(Name=f"pg-{bucket}", SecretString=json.dumps(
        {"username": USER, "password": PASSWORD}))["ARN"]
    ca = secrets.create_secret(Name=f"pg-ca-{bucket}", SecretString=open(postgres_server.ca_file).read())["ARN"]
    databases = {"sam": postgres_url.split("?")[0].rsplit("/", 1)[1], "cli": f"t_{uuid.uuid4().hex[:12]}"}
    with psycopg.connect(postgres_server.url, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{databases["cli"]}"')

    def env(how):
        # The checked-in env.json's table list (s3://…/warehouse/orders -> public.orders by
        # order_id) against this machine's server, verified with its CA as in production.
        return checked_in_env("LakebaseSyncFunction", "lakebase-sync", bucket,
                              POSTGRES_URL=f"postgres://{USER}@localhost:{postgres_server.port}/{databases[how]}",
                              POSTGRES_PASSWORD_SECRET_ARN=password, POSTGRES_CA_SECRET_ARN=ca)

    schedule = EVENTS / "lakebase-sync" / "events" / "schedule.json"
    in_container = sam.invoke("LakebaseSyncFunction", schedule, env("sam"))
    assert_invoked(in_container)
    # The same variables, "" (a SAM parameter left empty) included: unset for both.
    in_process = lakemirror("invoke", "lakebase-sync", "--event", schedule, env=env("cli"))

    for answer in (in_container.json, in_process.json):
        assert [(r["target"], r["delta_version"]) for r in answer["synced"]] == [('"public"."orders"', 2)], answer
        assert answer["failed"] == []
    expected = judge.delta_rows(uri, delta_storage_options, columns=["order_id", "amount", "day"])
    url = lambda how: f"postgres://{USER}:{PASSWORD}@localhost:{postgres_server.port}/{databases[how]}" \
                      f"?sslmode=verify-full&sslrootcert={postgres_server.ca_file}"
    rows = {how: pg_rows(url(how), '"public"."orders"', ["order_id", "amount", "day"]) for how in databases}
    judge.assert_same_rows(expected, rows["sam"], ["order_id", "amount", "day"])
    assert sorted(rows["sam"]) == sorted(rows["cli"])


def test_unity_register_in_the_container_registers_as_lakemirror_invoke_does(
        sam, bucket, delta_storage_options, unity_server, lakemirror, tmp_path):
    uri = f"s3://{bucket}/warehouse/orders"
    write_orders(uri, delta_storage_options)
    uc = unity.schema_over_bucket(unity_server, bucket)
    token = boto3.client("secretsmanager").create_secret(Name=f"uc-{bucket}", SecretString=TOKEN)["ARN"]
    # The README's commit event (EventBridge "Object Created"), pointed at this table.
    event_text = (EVENTS / "glue-sync" / "events" / "commit.json").read_text().replace(PLACEHOLDER_BUCKET, bucket)
    assert "warehouse/orders/_delta_log/00000000000000000000.json" in event_text
    event_file = tmp_path / "commit.json"
    event_file.write_text(event_text)
    env = checked_in_env("UnityRegisterFunction", "unity-register", bucket, UC_URL=uc.url,
                         UC_TOKEN_SECRET_ARN=token, UC_CATALOG=uc.catalog, UC_SCHEMA=uc.schema)

    in_container = sam.invoke("UnityRegisterFunction", event_file, env)
    assert_invoked(in_container)
    registered = uc.table("orders")
    assert registered is not None, in_container.stderr[-3000:]
    unity_server.api("DELETE", f"/tables/{uc.catalog}.{uc.schema}.orders").raise_for_status()
    in_process = lakemirror("invoke", "unity-register", "--event", event_file, env=env)
    again = uc.table("orders")

    def entry(table):
        keep = ("name", "catalog_name", "schema_name", "table_type", "data_source_format", "storage_location",
                "columns", "properties", "comment")
        return {k: table.get(k) for k in keep}

    assert entry(registered) == entry(again)
    assert registered["storage_location"].rstrip("/") == uri
    assert [c["name"] for c in registered["columns"]] == ["order_id", "amount", "day"]
    timing = lambda answer: [{k: v for k, v in r.items() if k not in ("elapsed_ms", "io")} for r in answer["registered"]]
    assert timing(in_container.json) == timing(in_process.json)
    assert [r["action"] for r in timing(in_container.json)] == ["created"]
    assert in_container.json["failed"] == in_process.json["failed"] == []


def test_the_built_functions_run_on_the_glibc_of_provided_al2023():
    """The local image carries this machine's glibc (Debian 12: 2.36); Lambda's provided.al2023
    has 2.34. A bootstrap that needs a newer symbol would pass here and fail on AWS."""
    why = sam_local.missing_build()
    if why:
        pytest.fail(why, pytrace=False)
    for function in ("GlueSyncFunction", "LakebaseSyncFunction", "UnityRegisterFunction"):
        bootstrap = sam_local.sam_build_dir() / function / "bootstrap"
        symbols = subprocess.run(["readelf", "--version-info", "--wide", str(bootstrap)], check=True,
                                 capture_output=True, text=True).stdout
        needed = {tuple(map(int, v.split("."))) for v in re.findall(r"Name: GLIBC_([0-9.]+)", symbols)}
        assert needed, f"{bootstrap}: no GLIBC version needs found; is it dynamically linked?"
        assert max(needed) <= (2, 34), f"{bootstrap} needs GLIBC_{'.'.join(map(str, max(needed)))}"
        header = subprocess.run(["readelf", "--file-header", str(bootstrap)], check=True, capture_output=True,
                                text=True).stdout
        assert "X86-64" in header, f"{bootstrap} is not an x86_64 build"


def test_start_lambda_answers_an_sdk_invoke(sam, bucket, glue, delta_storage_options):
    """`sam local start-lambda`, and the function invoked through an AWS SDK's Lambda client,
    as a Step Function or a test harness would call it."""
    uri = f"s3://{bucket}/warehouse/orders"
    write_orders(uri, delta_storage_options)
    database = f"lm_api_{uuid.uuid4().hex[:12]}"
    glue.create_database(DatabaseInput={"Name": database})
    commit = json.loads((EVENTS / "glue-sync" / "events" / "commit.json").read_text()
                        .replace(PLACEHOLDER_BUCKET, bucket))
    env = {"GlueSyncFunction": checked_in_env("GlueSyncFunction", "glue-sync", bucket, GLUE_DATABASE=database)}
    with sam.lambda_endpoint(env) as url:
        client = boto3.client("lambda", endpoint_url=url, region_name="us-east-1",
                              config=Config(retries={"max_attempts": 0}, read_timeout=600))
        response = client.invoke(FunctionName="GlueSyncFunction", Payload=json.dumps(commit).encode())
        answer = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, answer
    assert [(s["database"], s["table"], s["delta_version"], s["snapshots_committed"]) for s in answer["synced"]] == \
        [(database, "orders", 2, 3)]
    columns = ["order_id", "amount", "day"]
    judge.assert_same_rows(judge.delta_rows(uri, delta_storage_options, columns=columns),
                           judge.iceberg_rows_pyiceberg(database, "orders", columns=columns), columns)
