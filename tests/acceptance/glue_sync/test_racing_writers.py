"""Racing writers (issue 8, property 2): eight sync loops run against one table while a writer
keeps committing, against the moto Glue that enforces `VersionId` as AWS does. No commit is
lost, no data file is referenced twice, each Delta version lands in at most one Iceberg
snapshot, a conflict is retried within lakemirror's bound, and the final mirror is what the
Delta readers read."""

import json
import subprocess
import threading

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from acceptance.mirror_check import assert_mirrors, files_of_current_snapshot
from rig import judge

COMMITS = 100
RACERS = 8
MAX_ATTEMPTS = 8  # shared/mirror/src/sync.rs


def test_eight_racing_syncs_while_commits_arrive_lose_nothing(
        bucket, glue_database, delta_storage_options, lakemirror, lakemirror_bin):
    uri = f"s3://{bucket}/race/orders"
    write = lambda ids, **kw: write_deltalake(uri, pa.table({"id": pa.array(ids, pa.int64())}),
                                              storage_options=delta_storage_options, **kw)
    write([0])
    args = [str(lakemirror_bin), "glue-sync", "--table-uri", uri, "--glue-database", glue_database]
    writer_done = threading.Event()
    outcomes, lock = [], threading.Lock()

    def racer():
        # Keep syncing until the writer is done; every run either succeeds or gives up with
        # the conflict error after its bounded retries.
        while not writer_done.is_set():
            run = subprocess.run(args, capture_output=True, text=True, timeout=300)
            with lock:
                outcomes.append(run)

    threads = [threading.Thread(target=racer) for _ in range(RACERS)]
    for t in threads:
        t.start()
    try:
        for i in range(1, COMMITS):
            write([i], mode="append")
    finally:
        writer_done.set()
        for t in threads:
            t.join()

    conflicts = [o for o in outcomes if o.returncode != 0]
    for o in conflicts:
        assert "was changed by another writer" in o.stderr and "panicked" not in o.stderr, o.stderr
    reports = [json.loads(o.stdout.strip().splitlines()[-1]) for o in outcomes if o.returncode == 0]
    assert reports, "some syncs succeeded"
    assert all(r["attempts"] <= MAX_ATTEMPTS for r in reports)
    committed = sum(r["snapshots_committed"] for r in reports)

    final = lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database)
    committed += final.json["snapshots_committed"]
    print(f"{len(outcomes)} racing syncs, {len(conflicts)} gave up after retries, "
          f"{sum(r['attempts'] - 1 for r in reports)} retries, {committed} snapshots")
    snapshots = assert_mirrors(uri, glue_database, "orders", final, storage_options=delta_storage_options)
    versions = [int(s["summary"]["delta.version"]) for s in snapshots]
    assert versions == sorted(set(versions)), f"each Delta version in at most one snapshot: {versions}"
    assert versions[-1] == COMMITS - 1 and committed == len(versions)
    files = files_of_current_snapshot(glue_database, "orders")
    assert len(files) == len(set(files)) == len(DeltaTable(uri, storage_options=delta_storage_options).file_uris())
    # Every tenth snapshot holds the rows of its Delta version.
    for snap, version in list(zip(snapshots, versions))[::10]:
        judge.assert_same_rows(judge.delta_rows(uri, delta_storage_options, version=version),
                               judge.iceberg_rows_pyiceberg(glue_database, "orders", snapshot_id=snap["snapshot_id"]))
