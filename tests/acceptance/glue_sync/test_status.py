"""`lakemirror status`: one line per mirror of a Glue database. A table with commits the
mirror lacks shows as behind (by how many versions), and caught up once synced; the error the
dead-letter queue holds for a table is shown beside it; a table whose Delta log is gone shows
as source-missing; --table-prefixes narrows the list."""

import json

import boto3
import pyarrow as pa
from deltalake import write_deltalake

from acceptance.glue_sync.test_invoke import moto_style_s3_record


def status(lakemirror, glue_database, *args):
    result = lakemirror("status", "--glue-database", glue_database, "--json", *args)
    return {t["glue_table"].split(".", 1)[1]: t for t in result.json["tables"]}


def append(uri, start, storage_options):
    write_deltalake(uri, pa.table({"id": pa.array(range(start, start + 2), pa.int64())}), mode="append",
                    storage_options=storage_options)


def test_status_shows_a_mirror_behind_then_caught_up(bucket, glue_database, delta_storage_options, lakemirror):
    orders, returns = f"s3://{bucket}/lake/orders", f"s3://{bucket}/other/returns"
    for uri in (orders, returns):
        append(uri, 0, delta_storage_options)
        lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database)

    caught_up = status(lakemirror, glue_database)
    assert sorted(caught_up) == ["orders", "returns"]
    line = caught_up["orders"]
    assert line["delta_table"] == orders
    assert (line["state"], line["mirrored_version"], line["newest_version"], line["lag_versions"],
            line["lag_seconds"]) == ("caught-up", 0, 0, 0, 0), line
    assert line["mirrored_at"].endswith("Z")

    for start in (2, 4, 6):  # versions 1, 2, 3: committed, not synced
        append(orders, start, delta_storage_options)
    behind = status(lakemirror, glue_database)["orders"]
    assert (behind["state"], behind["mirrored_version"], behind["newest_version"], behind["lag_versions"]) == \
        ("behind", 0, 3, 3), behind
    assert isinstance(behind["lag_seconds"], int) and behind["lag_seconds"] >= 0

    text = lakemirror("status", "--glue-database", glue_database).stdout.splitlines()
    assert text[0].split()[:3] == ["GLUE", "TABLE", "DELTA"]
    orders_line = next(line for line in text if line.startswith(f"{glue_database}.orders "))
    assert orders_line.split()[1:3] == [orders, "behind"]

    only = status(lakemirror, glue_database, "--table-prefixes", f"s3://{bucket}/lake")
    assert sorted(only) == ["orders"], "--table-prefixes keeps only mirrors of tables under them"

    lakemirror("glue-sync", "--table-uri", orders, "--glue-database", glue_database)
    after = status(lakemirror, glue_database)["orders"]
    assert (after["state"], after["mirrored_version"], after["newest_version"], after["lag_versions"],
            after["lag_seconds"]) == ("caught-up", 3, 3, 0, 0), after


def test_status_shows_the_parked_error_and_a_missing_source(
        bucket, glue_database, delta_storage_options, lakemirror, tmp_path):
    uri = f"s3://{bucket}/lake/orders"
    append(uri, 0, delta_storage_options)
    lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database)
    # Version 1 needs a reader feature nobody knows: its sync can never succeed, and the
    # function parks the event with the reason.
    s3 = boto3.client("s3")
    s3.put_object(Bucket=bucket, Key="lake/orders/_delta_log/00000000000000000001.json", Body=json.dumps(
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["featureFromTheFuture"],
                      "writerFeatures": ["featureFromTheFuture"]}}).encode())
    queue = boto3.client("sqs").create_queue(QueueName=f"dlq-{bucket}")["QueueUrl"]
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"Records": [moto_style_s3_record(bucket, "lake/orders/_delta_log/00000000000000000001.json")]}))
    parked = lakemirror("invoke", "glue-sync", "--event", event, "--glue-database", glue_database,
                        "--dead-letter-queue-url", queue)
    assert parked.json["parked"] == 1

    line = status(lakemirror, glue_database, "--dead-letter-queue-url", queue)["orders"]
    assert (line["state"], line["mirrored_version"], line["newest_version"]) == ("behind", 0, 1)
    assert "featureFromTheFuture" in line["last_error"], line
    assert line["last_error_at"].endswith("Z")
    again = status(lakemirror, glue_database, "--dead-letter-queue-url", queue)["orders"]
    assert again["last_error"] == line["last_error"], "reading the queue is a peek: the message stays"
    assert status(lakemirror, glue_database)["orders"]["last_error"] is None, "no queue given, no error shown"

    for key in [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="lake/orders/_delta_log/")["Contents"]]:
        s3.delete_object(Bucket=bucket, Key=key)
    gone = status(lakemirror, glue_database)["orders"]
    assert (gone["state"], gone["newest_version"]) == ("source-missing", None), gone


def test_status_of_a_database_without_mirrors_is_empty(glue_database, lakemirror):
    assert lakemirror("status", "--glue-database", glue_database, "--json").json == {"tables": []}
    missing = lakemirror("status", "--glue-database", f"{glue_database}_none", check=False)
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr
