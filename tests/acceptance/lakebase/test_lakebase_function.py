"""`lakemirror invoke lakebase-sync`: the lakebase-sync function's handler, in-process, on a
schedule tick and on commit events, with the password from (moto's) Secrets Manager."""

import json

import boto3
import psycopg
import pyarrow as pa
from deltalake import write_deltalake

from acceptance.glue_sync.test_invoke import moto_style_s3_record
from acceptance.lakebase.test_lakebase import pg_rows
from rig.postgres import PASSWORD

SCHEDULE = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.scheduler", "detail": {}}


def without_password(url):
    assert f":{PASSWORD}@" in url
    return url.replace(f":{PASSWORD}@", "@")


def config(*tables):
    return "\n".join(
        f'[[tables]]\nsource.path = "{uri}"\ntarget.table_name = "{target}"\nsync.interval = "{interval}"\n'
        f'sync.mode = "incremental"\nsync.primary_key = "id"\n'
        for uri, target, interval in tables)


def invoke(lakemirror, tmp_path, event, lakebase_config, postgres_env, secret_arn, check=True):
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(event))
    return lakemirror("invoke", "lakebase-sync", "--event", event_file,
                      env={"LAKEBASE_CONFIG": lakebase_config, **postgres_env,
                           "POSTGRES_URL": without_password(postgres_env["POSTGRES_URL"]),
                           "POSTGRES_PASSWORD_SECRET_ARN": secret_arn}, check=check)


def test_ticks_sync_due_tables_and_commit_events_sync_their_table(
        bucket, delta_storage_options, postgres_url, function_postgres_env, lakemirror, tmp_path):
    secret_arn = boto3.client("secretsmanager").create_secret(
        Name=f"lakebase-{bucket}", SecretString=json.dumps({"username": "lakemirror", "password": PASSWORD}))["ARN"]
    fast, slow = f"s3://{bucket}/gold/fast", f"s3://{bucket}/gold/slow"
    for uri in (fast, slow):
        write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64())}), storage_options=delta_storage_options)
    lakebase_config = config((fast, "app.fast", "15 minutes"), (slow, "app.slow", "1 hour"))
    run = lambda event, **kw: invoke(lakemirror, tmp_path, event, lakebase_config, function_postgres_env, secret_arn, **kw)

    first = run(SCHEDULE).json
    assert sorted(r["target"] for r in first["synced"]) == ['"app"."fast"', '"app"."slow"']
    for uri in (fast, slow):
        write_deltalake(uri, pa.table({"id": pa.array([3], pa.int64())}), mode="append",
                        storage_options=delta_storage_options)
    # Just synced: nothing is due.
    assert run(SCHEDULE).json == {"synced": [], "failed": [], "skipped": 2}
    # 20 minutes later the 15-minute table is due, the hourly one is not.
    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute("UPDATE lakemirror.sync_state SET synced_at = synced_at - interval '20 minutes'")
    tick = run(SCHEDULE).json
    assert [(r["target"], r["mode"], r["delta_version"], r["rows_inserted"]) for r in tick["synced"]] == \
        [('"app"."fast"', "incremental", 1, 1)]
    assert tick["skipped"] == 1
    # A commit event syncs its table whatever the interval.
    event = {"Records": [moto_style_s3_record(bucket, "gold/slow/_delta_log/00000000000000000001.json")]}
    announced = run(event).json
    assert [(r["target"], r["delta_version"]) for r in announced["synced"]] == [('"app"."slow"', 1)]
    for table in ('"app"."fast"', '"app"."slow"'):
        assert sorted(pg_rows(postgres_url, table, ["id"])) == [(1,), (2,), (3,)]


def test_an_unreadable_secret_fails_clearly_without_leaking_the_password(
        bucket, delta_storage_options, function_postgres_env, lakemirror, tmp_path):
    uri = f"s3://{bucket}/gold/t"
    write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}), storage_options=delta_storage_options)
    missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:nope-AbCdEf"
    result = invoke(lakemirror, tmp_path, SCHEDULE, config((uri, "t", "15 minutes")), function_postgres_env, missing,
                    check=False)
    assert result.returncode != 0
    assert missing in result.stderr and "secretsmanager:GetSecretValue" in result.stderr, result.stderr
    bad = invoke(lakemirror, tmp_path, SCHEDULE, 'tables = "no"', function_postgres_env, missing, check=False)
    assert bad.returncode != 0 and "LAKEBASE_CONFIG" in bad.stderr
    for r in (result, bad):
        assert PASSWORD not in r.stdout + r.stderr


def test_from_its_queue_only_the_messages_of_a_table_that_failed_come_back(
        bucket, delta_storage_options, postgres_url, function_postgres_env, lakemirror, tmp_path):
    from acceptance.glue_sync.test_invoke import sqs_record
    secret_arn = boto3.client("secretsmanager").create_secret(
        Name=f"lakebase-queue-{bucket}", SecretString=PASSWORD)["ARN"]
    good, gone = f"s3://{bucket}/gold/good", f"s3://{bucket}/gold/gone"
    write_deltalake(good, pa.table({"id": pa.array([1, 2], pa.int64())}), storage_options=delta_storage_options)
    lakebase_config = config((good, "app.good", "1 hour"), (gone, "app.gone", "1 hour"))
    announce = lambda message_id, root: sqs_record(message_id, json.dumps(
        {"Records": [moto_style_s3_record(bucket, f"{root}/_delta_log/00000000000000000000.json")]}))
    batch = {"Records": [announce("m-good", "gold/good"), announce("m-gone", "gold/gone")]}
    result = invoke(lakemirror, tmp_path, batch, lakebase_config, function_postgres_env, secret_arn)
    assert result.json == {"batchItemFailures": [{"itemIdentifier": "m-gone"}]}
    assert sorted(pg_rows(postgres_url, '"app"."good"', ["id"])) == [(1,), (2,)]
