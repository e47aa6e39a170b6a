"""End to end through the local event loop: delta-rs commits -> moto S3 notifications -> SQS
-> poller -> glue-sync under `cargo lambda watch` (the real Lambda runtime API) -> Glue.

Nothing here calls lakemirror directly: the mirror must follow the Delta table by itself."""

import json
import sys
import uuid
from urllib.parse import quote

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from conftest import REPO, put_future_protocol_table
from rig import judge

sys.path.insert(0, str(REPO / "localstack"))
from event_loop import EventLoop, LoopSettings, glue_delta_version, wait_until  # noqa: E402

CONVERGE_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def event_loop(moto_endpoint, tmp_path_factory):
    tag = uuid.uuid4().hex[:12]
    settings = LoopSettings(
        bucket=f"lm-loop-{tag}",
        glue_database=f"lm_loop_{tag}",
        queue_name=f"lm-loop-{tag}",
        endpoint=moto_endpoint,
        log_dir=tmp_path_factory.mktemp("event-loop"),
        batch_size=10,
        batching_window_seconds=0.5,
        max_concurrency=2,
        max_receive_count=3,
        visibility_timeout_seconds=60,
    )
    with EventLoop(settings) as loop:
        yield loop


def notification(bucket, key):
    """An S3 notification as moto sends it (keys percent-encoded, fields missing)."""
    return json.dumps({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": "2026-11-30T10:00:00.000Z", "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": bucket}, "object": {"key": quote(key, safe=""), "size": 1}}}]})


def list_objects(bucket, prefix):
    return boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])


def eventbridge_event(bucket, key):
    """What the deployed stack delivers: an EventBridge "Object Created" event as SQS body."""
    return json.dumps({"version": "0", "id": str(uuid.uuid4()), "detail-type": "Object Created",
                       "source": "aws.s3", "account": "123456789012", "time": "2026-11-30T10:00:00Z",
                       "region": "us-east-1", "resources": [f"arn:aws:s3:::{bucket}"],
                       "detail": {"version": "0", "bucket": {"name": bucket}, "object": {"key": key, "size": 1},
                                  "reason": "PutObject"}})


def drained(loop):
    """True once nothing is queued or in flight."""
    queued, _ = loop.queue_depths()
    return queued == 0


def test_burst_with_duplicated_and_reordered_deliveries_converges(event_loop, delta_storage_options):
    s = event_loop.settings
    root = "burst/orders"
    uri = f"s3://{s.bucket}/{root}"
    commits = 20
    for v in range(commits):
        write_deltalake(uri, pa.table({"id": pa.array(range(v * 5, v * 5 + 5), pa.int64()),
                                       "v": pa.array([v] * 5, pa.int32())}),
                        mode="append" if v % 7 else "overwrite" if v else "append",
                        storage_options=delta_storage_options)
    # Deliveries the real world produces too: every commit announced again, newest first,
    # half of them in the deployed stack's EventBridge shape.
    sqs = boto3.client("sqs")
    for v in reversed(range(commits)):
        key = f"{root}/_delta_log/{v:020}.json"
        body = eventbridge_event(s.bucket, key) if v % 2 else notification(s.bucket, key)
        sqs.send_message(QueueUrl=event_loop.queue_url, MessageBody=body)

    wait_until(lambda: glue_delta_version(s.glue_database, "orders") == commits - 1 and drained(event_loop),
               CONVERGE_TIMEOUT_S, f"the mirror to reach Delta version {commits - 1} and the queue to drain")

    snapshots = judge.iceberg_snapshots(s.glue_database, "orders")
    versions = [int(snap["summary"]["delta.version"]) for snap in snapshots]
    assert versions == sorted(set(versions)), f"each snapshot a distinct Delta version, in order: {versions}"
    assert versions[-1] == commits - 1

    table = judge.glue_catalog().load_table((s.glue_database, "orders"))
    data_files = [task.file.file_path for task in table.scan().plan_files()]
    assert len(data_files) == len(set(data_files)), "no data file appears twice"
    delta = DeltaTable(uri, storage_options=delta_storage_options)
    assert sorted(data_files) == sorted(delta.file_uris())

    for snap, version in zip(snapshots, versions):
        judge.assert_same_rows(judge.delta_rows(uri, delta_storage_options, version=version),
                               judge.iceberg_rows_pyiceberg(s.glue_database, "orders", snapshot_id=snap["snapshot_id"]))
    assert event_loop.queue_depths() == (0, 0), "nothing was parked"


def test_a_table_that_can_never_mirror_is_parked_once_not_looped(event_loop):
    s = event_loop.settings
    commit_keys = put_future_protocol_table(s.bucket, "poison/future", versions=3)

    wait_until(lambda: drained(event_loop) and event_loop.queue_depths()[1] >= len(commit_keys),
               CONVERGE_TIMEOUT_S, "the poison table's events to reach the dead-letter queue")

    sqs = boto3.client("sqs")
    parked = []
    while True:
        got = sqs.receive_message(QueueUrl=event_loop.dead_letter_queue_url, MaxNumberOfMessages=10,
                                  MessageAttributeNames=["All"], AttributeNames=["All"]).get("Messages", [])
        if not got:
            break
        parked.extend(got)
    assert len(parked) == len(commit_keys), "each announcement parked exactly once"
    for m in parked:
        attributes = m["MessageAttributes"]
        assert "featureFromTheFuture" in attributes["lakemirror-error"]["StringValue"]
        assert attributes["lakemirror-table"]["StringValue"] == f"s3://{s.bucket}/poison/future"
        assert m["Attributes"]["ApproximateReceiveCount"] == "1", "parked by the function, not by redrive"
    assert glue_delta_version(s.glue_database, "future") is None, "nothing half-written"
    assert not list_objects(s.bucket, "poison/future/_lakemirror/"), "nothing written at all"
