"""Injected faults (issue 8, property 4): glue-sync through a proxy that fails 10% of the
S3 and Glue requests (500, 503, throttling, connection resets before and after the request
was executed, slow answers). Every sync converges within a bounded number of runs, a failed
run says what failed and never panics, and the final mirror is what the Delta readers read."""

import os

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from acceptance.mirror_check import assert_mirrors
from rig.fault_proxy import FaultProxy

RUNS_PER_SYNC = 4  # a sync that fails is re-run, as the queue redelivers it


def test_syncs_converge_through_a_network_that_fails_one_request_in_ten(
        bucket, glue_database, moto_endpoint, delta_storage_options, lakemirror):
    uri = f"s3://{bucket}/faulty/orders"
    rows = lambda ids: pa.table({"id": pa.array(ids, pa.int64()), "day": pa.array([i % 3 for i in ids], pa.int32())})
    steps = [
        lambda: write_deltalake(uri, rows([0, 1, 2]), partition_by=["day"], storage_options=delta_storage_options),
        *[lambda i=i: write_deltalake(uri, rows([10 * i, 10 * i + 1]), mode="append", partition_by=["day"],
                                      storage_options=delta_storage_options) for i in range(1, 8)],
        lambda: DeltaTable(uri, storage_options=delta_storage_options).update(predicate="id = 10",
                                                                                updates={"day": "2"}),
        lambda: DeltaTable(uri, storage_options=delta_storage_options).delete(predicate="id = 1"),
        lambda: write_deltalake(uri, rows([99]).append_column("note", pa.array(["x"])), mode="append",
                                partition_by=["day"], schema_mode="merge", storage_options=delta_storage_options),
        lambda: DeltaTable(uri, storage_options=delta_storage_options).optimize.compact(),
        lambda: write_deltalake(uri, rows([5, 6]).append_column("note", pa.array(["y", "z"])), mode="overwrite",
                                partition_by=["day"], storage_options=delta_storage_options),
    ]
    runs, failed = 0, []
    with FaultProxy(moto_endpoint, rate=float(os.environ.get("FAULT_RATE", "0.1")), seed=int(os.environ.get("FAULT_SEED", "8"))) as proxy:
        for step in steps:
            step()  # the writer talks to S3 directly; only lakemirror goes through the faults
            for attempt in range(1, RUNS_PER_SYNC + 1):
                runs += 1
                result = lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database,
                                    env={"AWS_ENDPOINT_URL": proxy.url}, check=False)
                assert "panicked" not in result.stderr, result.stderr
                if result.returncode == 0:
                    break
                failed.append(result.stderr.strip().splitlines()[-1])
            else:
                raise AssertionError(f"a sync did not converge in {RUNS_PER_SYNC} runs: {failed[-RUNS_PER_SYNC:]}")
    print(f"{proxy.requests} requests, faults injected: {dict(proxy.injected)}, {runs} sync runs for "
          f"{len(steps)} commits, {len(failed)} failed runs: {failed}")
    assert sum(proxy.injected.values()) >= 10, "the proxy injected faults"
    for message in failed:
        assert message.startswith("error: "), message
    final = lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database)
    assert final.json["snapshots_committed"] == 0, "the last faulty run had already converged"
    assert_mirrors(uri, glue_database, "orders", final, storage_options=delta_storage_options)


def test_a_burst_of_glue_throttling_is_retried_within_one_sync_run(
        bucket, glue_database, moto_endpoint, delta_storage_options, lakemirror):
    # Glue throttles a busy account for several calls in a row. Four throttled answers are more
    # than the SDK's default 3 attempts survive; glue::GLUE_MAX_ATTEMPTS (6) rides them out
    # inside the run instead of failing it and waiting for the queue to redeliver.
    uri = f"s3://{bucket}/faulty/burst"
    write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64())}), storage_options=delta_storage_options)
    with FaultProxy(moto_endpoint, rate=0, glue_burst=["throttle"] * 4) as proxy:
        result = lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database,
                            env={"AWS_ENDPOINT_URL": proxy.url}, check=False)
    assert result.returncode == 0, result.stderr
    assert proxy.injected == {"throttle": 4} and not proxy.glue_burst
    assert_mirrors(uri, glue_database, "burst", result, storage_options=delta_storage_options)
