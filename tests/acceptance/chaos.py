"""Event chaos (issue 8, property 1): a 50-commit Delta table is committed again, one commit at
a time, into a fresh copy, and the commits' events reach the glue-sync handler in randomized
schedules — delayed and so reordered, duplicated, some lost, in bursts of SQS batches — then
one final sync. After each schedule the mirror must equal the
Delta table (pyiceberg through Glue vs delta-rs), each Delta version must appear in at most
one Iceberg snapshot, and no data file may be referenced twice.

With a fault proxy (`tests/rig/fault_proxy.py`) between the handler and S3/Glue, the handler's
requests fail at random too. A message the handler reports failed goes back to the queue, as
SQS redelivers it, up to MAX_RECEIVES deliveries, after which SQS would park it in the
dead-letter queue; the final sync must still converge. Without a proxy any failed message is a
mismatch.

Shared by the CI test (tests/acceptance/test_event_chaos.py, a few schedules) and the soak
command (tests/soak/chaos.py, 1,000 schedules by default), which prints the counts."""

import json
import os
import random
import subprocess
import uuid
from collections import Counter
from dataclasses import dataclass, field

import boto3
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from acceptance.mirror_check import files_of_current_snapshot
from acceptance.glue_sync.test_invoke import moto_style_s3_record, sqs_record
from rig import judge

COMMITS = 50
MAX_RECEIVES = 5  # template.yaml's MaxReceiveCount default


@dataclass
class Counts:
    schedules: int = 0
    deliveries: int = 0
    duplicated: int = 0
    dropped: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    invocations: int = 0
    snapshots: int = 0
    commits_synced: int = 0
    mismatches: int = 0
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"schedules run: {self.schedules}, deliveries: {self.deliveries} "
                f"({self.duplicated} duplicated, {self.dropped} dropped, {self.redelivered} redelivered "
                f"after a failure, {self.dead_lettered} dead-lettered), handler invocations: "
                f"{self.invocations}, snapshots committed: {self.snapshots}, commits synced: "
                f"{self.commits_synced}, mismatches: {self.mismatches}")


def make_source_table(bucket: str, prefix: str, storage_options: dict) -> str:
    """A 50-commit Delta table: appends, updates, deletes, an overwrite, a checkpoint every 10
    commits. Returns its URI."""
    uri = f"s3://{bucket}/{prefix}"
    rng = random.Random(50)
    rows = lambda ids: pa.table({"id": pa.array(ids, pa.int64()),
                                 "v": pa.array([f"r{i}" for i in ids], pa.string())})
    write_deltalake(uri, rows([0, 1, 2]), storage_options=storage_options,
                    configuration={"delta.checkpointInterval": "10"})
    next_id = 3
    for version in range(1, COMMITS):
        dt = DeltaTable(uri, storage_options=storage_options)
        ids = dt.to_pyarrow_table(columns=["id"])["id"].to_pylist()
        kind = rng.choice(["append", "append", "append", "update", "delete"])
        if version == 30:
            write_deltalake(uri, rows([next_id, next_id + 1]), mode="overwrite", storage_options=storage_options)
            next_id += 2
        elif kind == "update" and ids:
            dt.update(predicate=f"id = {rng.choice(ids)}", updates={"v": f"'u{version}'"})
        elif kind == "delete" and len(ids) > 1:
            dt.delete(predicate=f"id = {rng.choice(ids)}")
        else:
            write_deltalake(uri, rows([next_id]), mode="append", storage_options=storage_options)
            next_id += 1
    assert DeltaTable(uri, storage_options=storage_options).version() == COMMITS - 1
    return uri


def source_table(bucket: str, prefix: str, storage_options: dict) -> tuple[list, int]:
    """The 50-commit table made at `prefix`, and what every schedule must end with: delta-rs's
    rows (id, v), sorted, and its number of data files."""
    uri = make_source_table(bucket, prefix, storage_options)
    rows = sorted(judge.delta_rows(uri, storage_options, columns=["id", "v"]))
    return rows, len(DeltaTable(uri, storage_options=storage_options).file_uris())


def copy_data(bucket: str, source_prefix: str, target_prefix: str) -> dict[int, list[str]]:
    """Copies the data files; returns the log files to reveal per version (the commit, its
    checkpoint), so commits can appear one by one as a writer would make them."""
    s3 = boto3.client("s3")
    log: dict[int, list[str]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{source_prefix}/"):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            relative = key[len(source_prefix) + 1:]
            if relative.startswith("_lakemirror/"):
                continue
            if relative.startswith("_delta_log/"):
                name = relative.split("/", 1)[1]
                if name[:20].isdigit():
                    log.setdefault(int(name[:20]), []).append(relative)
                continue
            s3.copy_object(Bucket=bucket, Key=f"{target_prefix}/{relative}", CopySource={"Bucket": bucket, "Key": key})
    return log


def reveal(bucket: str, source_prefix: str, target_prefix: str, version: int, files: list[str]):
    """Commits `version` in the copy: its commit file, then its checkpoint and the hint."""
    s3 = boto3.client("s3")
    for relative in sorted(files, key=lambda f: not f.endswith(".json")):
        s3.copy_object(Bucket=bucket, Key=f"{target_prefix}/{relative}",
                       CopySource={"Bucket": bucket, "Key": f"{source_prefix}/{relative}"})
    if any(".checkpoint." in f for f in files):
        s3.put_object(Bucket=bucket, Key=f"{target_prefix}/_delta_log/_last_checkpoint",
                      Body=json.dumps({"version": version, "size": 1}).encode())


def deliveries_of(rng: random.Random, version: int, counts: Counts) -> list[int]:
    """The events S3 and the queue make of one commit: none (lost), one, or several."""
    roll = rng.random()
    if roll < 0.1:
        counts.dropped += 1
        return []
    if roll > 0.75:
        counts.duplicated += 1
        return [version] * rng.randint(2, 4)
    return [version]


def take_batch(rng: random.Random, pending: list[int]) -> list[int]:
    """A random SQS batch of the pending events (any of them: delays reorder)."""
    if rng.random() < 0.2:
        pending.sort(reverse=True)  # the worst order: newest first
    else:
        rng.shuffle(pending)
    size = min(len(pending), rng.choice([1, 1, 2, 5, 10]))
    batch = pending[:size]
    del pending[:size]
    return batch


def sqs_event(bucket: str, prefix: str, versions: list[int]) -> tuple[dict, dict[str, int]]:
    """An SQS batch: one message per commit event, each an S3 notification as moto sends it;
    and the version each message id stands for."""
    records, ids = [], {}
    for version in versions:
        key = f"{prefix}/_delta_log/{version:020}.json"
        body = json.dumps({"Records": [moto_style_s3_record(bucket, key)]})
        ids[message_id := uuid.uuid4().hex] = version
        records.append(sqs_record(message_id, body))
    return {"Records": records}, ids


def run_schedule(lakemirror_bin, workdir, bucket: str, source_prefix: str, expected_rows, expected_files: int,
                 rng: random.Random, counts: Counts, proxy_url: str | None = None):
    """One schedule against a fresh copy of the table and a fresh Glue database; counts a
    mismatch (with its reason in counts.failures) instead of raising. With `proxy_url` the
    handler reaches S3 and Glue through that (fault-injecting) proxy."""
    tag = uuid.uuid4().hex[:12]
    prefix, database = f"chaos/{tag}", f"chaos_{tag}"
    log = copy_data(bucket, source_prefix, prefix)
    boto3.client("glue").create_database(DatabaseInput={"Name": database})
    event_file = workdir / f"{tag}.json"
    env = dict(os.environ, AWS_ENDPOINT_URL=proxy_url) if proxy_url else None
    receives: Counter = Counter()  # deliveries per (version, copy), to stop at MAX_RECEIVES

    def deliver(batch) -> bool:
        counts.deliveries += len(batch)
        event, ids = sqs_event(bucket, prefix, [version for version, _ in batch])
        copies = dict(zip(ids, batch))
        event_file.write_text(json.dumps(event))
        run = subprocess.run([str(lakemirror_bin), "invoke", "glue-sync", "--event", str(event_file),
                              "--glue-database", database], capture_output=True, text=True, timeout=300, env=env)
        counts.invocations += 1
        if "panicked" in run.stderr:
            counts.mismatches += 1
            counts.failures.append(f"{tag}: the handler panicked: {run.stderr[-1500:]}")
            return False
        try:
            failed = [copies[f["itemIdentifier"]]
                      for f in json.loads(run.stdout.strip().splitlines()[-1])["batchItemFailures"]]
        except (IndexError, KeyError, ValueError):
            failed = batch  # the invocation itself failed: SQS redelivers the whole batch
        if run.returncode != 0:
            failed = batch
        if failed and not proxy_url:
            counts.mismatches += 1
            counts.failures.append(f"{tag}: batch {batch} failed: {run.stdout[-500:]} {run.stderr[-1500:]}")
            return False
        for copy in failed:
            receives[copy] += 1
            if receives[copy] >= MAX_RECEIVES:
                counts.dead_lettered += 1
            else:
                counts.redelivered += 1
                pending.append(copy)
        return True

    # Commits appear one by one; their events wait in the queue and arrive in random bursts.
    # A pending event is (version, copy): duplicates are separate messages.
    pending: list[tuple[int, int]] = []
    for version in range(COMMITS):
        reveal(bucket, source_prefix, prefix, version, log[version])
        pending.extend((v, copy) for copy, v in enumerate(deliveries_of(rng, version, counts)))
        while pending and rng.random() < 0.5:
            if not deliver(take_batch(rng, pending)):
                return
    while pending:
        if not deliver(take_batch(rng, pending)):
            return
    final = subprocess.run([str(lakemirror_bin), "glue-sync", "--table-uri", f"s3://{bucket}/{prefix}",
                            "--glue-database", database], capture_output=True, text=True, timeout=300)
    if final.returncode != 0:
        counts.mismatches += 1
        counts.failures.append(f"{tag}: final sync failed: {final.stderr[-1500:]}")
        return
    table = tag  # the folder's name
    snapshots = judge.iceberg_snapshots(database, table)
    versions = [int(s["summary"]["delta.version"]) for s in snapshots]
    counts.schedules += 1
    counts.snapshots += len(snapshots)
    counts.commits_synced += versions[-1] + 1 if versions else 0
    problems = []
    if versions != sorted(set(versions)):
        problems.append(f"a Delta version in more than one snapshot, or out of order: {versions}")
    if not versions or versions[-1] != COMMITS - 1:
        problems.append(f"the mirror stopped at {versions[-1:]} instead of {COMMITS - 1}")
    files = files_of_current_snapshot(database, table)
    if len(files) != len(set(files)):
        problems.append("a data file is referenced twice")
    if len(files) != expected_files:
        problems.append(f"{len(files)} data files instead of Delta's {expected_files}")
    got = sorted(judge.iceberg_rows_pyiceberg(database, table, columns=["id", "v"]))
    if got != expected_rows:
        problems.append(f"rows differ: {len(got)} rows instead of {len(expected_rows)}")
    if problems:
        counts.mismatches += 1
        counts.failures.append(f"{tag}: " + "; ".join(problems))
