"""Catalog-managed Delta tables (issue 41), a benchmark, not a test: what a table whose commits
Unity Catalog ratifies costs beside a plain Delta table, on a strict moto and a real
uc-server (0.0.11, tests/rig/uc-server.sh), the catalog behind a counting HTTP proxy.

1. Requests per one-commit sync. After a first sync, ROUNDS rounds of one appended commit
   each (one Parquet file): the plain table's is published as `_delta_log/<v>.json`, the
   catalog-managed table's staged in `_delta_log/_staged_commits/` and ratified by the
   catalog (`add-commit`), not published, as tests/rig/catalog_managed.py's writer does.
   Each round is synced by `lakemirror glue-sync [--uc-url]`, one process per sync: the
   report's `io.requests` (S3 + Glue), the catalog's HTTP requests (counted by the proxy, by
   kind), the report's `elapsed_ms` and the process's wall time; medians.
2. Event-to-visible through the local event loop (localstack/event_loop.py: moto S3
   notification -> SQS -> poller -> glue-sync under `cargo lambda watch`, batching window 0,
   one poller), the function's `UC_URL` the proxy: a plain commit, from its put to the Glue
   table showing its version; a catalog-managed commit staged (its S3 event goes to the
   function) and ratified at once, or 1 s later, from the ratification (and from the
   staging) to the Glue table showing it; and the catalog's requests per event of the warm
   function.

    CARGO_TARGET_DIR=~/.cache/lakemirror/target-lead \\
        $(tests/rig/venv.sh)/bin/python tests/bench/catalog_managed.py [--rounds 10] [--commits 10]

The debug builds by default (`--release` for release builds of both the CLI and the
function): `cargo lambda watch` builds glue-sync itself into CARGO_TARGET_DIR. About 3 minutes
once the function is built. Prints two markdown tables; the raw figures go to stderr as JSON.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import boto3
import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "localstack"))  # before tests/bench: its event_loop, not the benchmark
from event_loop import EventLoop, LoopSettings, _at_least, glue_delta_version, wait_until  # noqa: E402
from rig import catalog_managed as cm  # noqa: E402
from rig import local_aws, unity  # noqa: E402
from rig.fault_proxy import FaultProxy  # noqa: E402

TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
FIELDS = [cm.field_of("id", "long"), cm.field_of("round", "long")]
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / "lakemirror-bench-catalog-managed"
VISIBLE_TIMEOUT_S = 120


def rows(v: int) -> pa.Table:
    return pa.table({"id": pa.array(range(v * 100, v * 100 + 100), pa.int64()),
                     "round": pa.array([v] * 100, pa.int64())})


def plain_first_commit() -> bytes:
    """Version 0 of a plain Delta table of the same schema (no catalog, no table features)."""
    metadata = {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                             "schemaString": json.dumps({"type": "struct", "fields": FIELDS}),
                             "partitionColumns": [], "configuration": {}, "createdTime": int(time.time() * 1000)}}
    return cm.commit_lines(metadata, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                           operation="CREATE TABLE")


def publish_plain(root: str, v: int):
    """Appends version `v` to the plain table at `root`: a data file, then `_delta_log/<v>.json`."""
    add = cm.write_data_file(root, f"part-{v:05}.parquet", rows(v))
    cm.put(f"{root}/_delta_log/{v:020}.json", cm.commit_lines(add))


class CatalogCounter:
    """The catalog's HTTP requests, by kind, as the proxy in front of uc-server saw them."""

    def __init__(self, proxy: FaultProxy):
        self.proxy = proxy

    @property
    def url(self) -> str:
        return self.proxy.url

    def mark(self) -> int:
        with self.proxy.lock:
            return len(self.proxy.seen)

    def since(self, mark: int) -> Counter:
        with self.proxy.lock:
            return Counter(kind(path) for _, path in self.proxy.seen[mark:])


def kind(path: str) -> str:
    path = path.split("?")[0].removeprefix(unity.API)
    if path.startswith("/delta/preview/commits"):
        return "preview/commits"
    if path.startswith("/delta/v1/catalogs/"):
        return "loadTable"
    if path in ("/catalogs", "/schemas", "/tables"):
        return f"list {path[1:]}"
    return path


def finding(kinds: Counter) -> int:
    """The requests that found the table's name by its id (once per process)."""
    return sum(n for k, n in kinds.items() if k.startswith("list "))


def describe(kinds: Counter) -> str:
    order = ["preview/commits", "list catalogs", "list schemas", "list tables", "loadTable"]
    return ", ".join(f"{k} {kinds[k]}" for k in sorted(kinds, key=lambda k: (order + [k]).index(k)))


# ---------------------------------------------------------------- 1. requests per one-commit sync


def cli_sync(binary: str, uri: str, database: str, uc_url: str | None = None) -> tuple[dict, float]:
    catalog = ["--uc-url", uc_url] if uc_url else []
    started = time.perf_counter()
    done = subprocess.run([binary, "glue-sync", "--table-uri", uri, "--glue-database", database, *catalog],
                          capture_output=True, text=True)
    wall_ms = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        sys.exit(f"glue-sync of {uri} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), wall_ms


def requests_per_sync(binary: str, server: unity.UnityServer, counter: CatalogCounter, rounds: int) -> dict:
    bucket, database = f"bench-cm-cli-{uuid.uuid4().hex[:8]}", "bench_cm_cli"
    boto3.client("s3").create_bucket(Bucket=bucket)
    boto3.client("glue").create_database(DatabaseInput={"Name": database})
    schema = unity.schema_over_bucket(server, bucket)
    plain_root = f"s3://{bucket}/warehouse/plain"
    cm.put(f"{plain_root}/_delta_log/{0:020}.json", plain_first_commit())
    managed = cm.create(schema, "orders", FIELDS)
    cli_sync(binary, plain_root, database)
    cli_sync(binary, managed.location, database, counter.url)
    out = {"plain": [], "managed": []}
    for v in range(1, rounds + 1):
        publish_plain(plain_root, v)
        report, wall_ms = cli_sync(binary, plain_root, database)
        check(report, v, plain_root)
        out["plain"].append({"requests": report["io"]["requests"], "elapsed_ms": report["elapsed_ms"],
                             "wall_ms": wall_ms, "catalog": {}, "calls": report["io"].get("calls", {})})
        managed.commit(v, managed.write(f"part-{v:05}.parquet", rows(v)))
        mark = counter.mark()
        report, wall_ms = cli_sync(binary, managed.location, database, counter.url)
        check(report, v, managed.location)
        out["managed"].append({"requests": report["io"]["requests"], "elapsed_ms": report["elapsed_ms"],
                               "wall_ms": wall_ms, "catalog": dict(counter.since(mark)),
                               "calls": report["io"].get("calls", {})})
    return out


def check(report: dict, v: int, uri: str):
    """Not a timing assertion: a round that did not mirror its commit measured nothing."""
    if (report.get("action"), report.get("delta_version")) != ("synced", v):
        sys.exit(f"the sync of {uri} did not mirror version {v}: {json.dumps(report)[:2000]}")


# ---------------------------------------------------------------- 2. event-to-visible


def glue_table_at(database: str, location: str) -> str | None:
    """The Glue table mirroring the Delta table at `location`, once there is one."""
    glue = boto3.client("glue")
    for page in glue.get_paginator("get_tables").paginate(DatabaseName=database):
        for t in page["TableList"]:
            if t.get("StorageDescriptor", {}).get("Location", "").rstrip("/") == location.rstrip("/"):
                return t["Name"]
    return None


def visible(database: str, table: str, v: int) -> float:
    wait_until(lambda: _at_least(glue_delta_version(database, table), v), VISIBLE_TIMEOUT_S,
               f"Delta version {v} of {table} in Glue", interval_s=0.01)
    return time.perf_counter()


def drained(loop: EventLoop):
    wait_until(lambda: loop.queue_depths()[0] == 0, VISIBLE_TIMEOUT_S, "the queue to drain", interval_s=0.02)


def event_latency(server: unity.UnityServer, counter: CatalogCounter, commits: int, release: bool) -> dict:
    settings = LoopSettings(bucket=f"bench-cm-loop-{uuid.uuid4().hex[:8]}", glue_database="bench_cm_loop",
                            queue_name=f"bench-cm-{uuid.uuid4().hex[:8]}", batching_window_seconds=0,
                            max_concurrency=1, release=release, endpoint=os.environ["AWS_ENDPOINT_URL"],
                            function_env={"UC_URL": counter.url}, log_dir=WORK / "event-loop")
    started = time.perf_counter()
    with EventLoop(settings) as loop:
        ready_s = time.perf_counter() - started
        database, bucket = settings.glue_database, settings.bucket
        schema = unity.schema_over_bucket(server, bucket)
        out = {"function_ready_s": ready_s, "plain": [], "at_once": [], "after_1s": []}

        # Version 0 of each: the function's first sync of each table (not timed).
        plain_root = f"s3://{bucket}/warehouse/plain"
        cm.put(f"{plain_root}/_delta_log/{0:020}.json", plain_first_commit())
        managed = cm.create(schema, "orders", FIELDS)
        plain_name = wait_until(lambda: glue_table_at(database, plain_root), VISIBLE_TIMEOUT_S, "the plain mirror")
        mark = counter.mark()
        managed_name = wait_until(lambda: glue_table_at(database, managed.location), VISIBLE_TIMEOUT_S,
                                  "the catalog-managed mirror")
        drained(loop)
        out["first_event_catalog"] = dict(counter.since(mark))

        for v in range(1, commits + 1):
            publish_plain(plain_root, v)
            committed = time.perf_counter()
            out["plain"].append({"visible_ms": (visible(database, plain_name, v) - committed) * 1000})
            drained(loop)

        v = 0
        for case, delay_s in (("at_once", 0.0), ("after_1s", 1.0)):
            for _ in range(commits if delay_s == 0 else max(3, commits // 2)):
                v += 1
                data = managed.write(f"part-{v:05}.parquet", rows(v))
                mark = counter.mark()
                staged = managed.stage(v, data)
                stage_t = time.perf_counter()
                if delay_s:
                    time.sleep(delay_s)  # the writer asks the catalog later: a delay under test, not a wait
                managed.ratify(staged)
                ratified_t = time.perf_counter()
                seen_t = visible(database, managed_name, v)
                drained(loop)
                out[case].append({"from_ratified_ms": (seen_t - ratified_t) * 1000,
                                  "from_staged_ms": (seen_t - stage_t) * 1000,
                                  "catalog": dict(counter.since(mark))})
        queued, parked = loop.queue_depths()
        out["loop"] = {"invocations": loop.stats.invocations, "delivered": loop.stats.delivered,
                       "deleted": loop.stats.deleted, "redelivered": loop.stats.failed,
                       "queued_at_end": queued, "parked": parked}
    return out


# ---------------------------------------------------------------- output


def median(values) -> float:
    return statistics.median(values)


def p95(values) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def print_requests(cli: dict, build: str):
    plain, managed = cli["plain"], cli["managed"]
    n = len(plain)
    p_req, m_req = median([r["requests"] for r in plain]), median([r["requests"] for r in managed])
    p_ms, m_ms = median([r["elapsed_ms"] for r in plain]), median([r["elapsed_ms"] for r in managed])
    p_wall, m_wall = median([r["wall_ms"] for r in plain]), median([r["wall_ms"] for r in managed])
    catalog = [sum(r["catalog"].values()) for r in managed]
    finds = [finding(Counter(r["catalog"])) for r in managed]
    kinds = Counter()
    for r in managed:
        kinds.update(r["catalog"])
    per_sync = Counter({k: round(c / n, 2) for k, c in kinds.items()})
    print(f"Requests per one-commit sync, median of {n} (`lakemirror glue-sync`, {build} build, one process per sync):\n")
    print("| table | S3 + Glue requests | catalog requests | of which finding the table by id | sync (report) | process wall |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| plain (published commit) | {p_req:g} | 0 | - | {p_ms:.0f} ms | {p_wall:.0f} ms |")
    print(f"| catalog-managed (staged + ratified) | {m_req:g} | {median(catalog):g} | {median(finds):g} "
          f"| {m_ms:.0f} ms | {m_wall:.0f} ms |")
    print(f"| ratio | {ratio(m_req, p_req)} | | | {ratio(m_ms, p_ms)} | {ratio(m_wall, p_wall)} |")
    print(f"\nCatalog requests per managed sync, by kind (mean of {n}): {describe(per_sync)}\n")
    # Every request accounted for (issue 54): the last round's, by call and what it was for.
    calls = sorted(set(plain[-1].get("calls", {})) | set(managed[-1].get("calls", {})))
    if calls:
        print("| request (last round) | plain | catalog-managed |")
        print("|---|---:|---:|")
        for call in calls:
            print(f"| {call} | {plain[-1]['calls'].get(call, 0)} | {managed[-1]['calls'].get(call, 0)} |")
        print()


def print_latency(lat: dict, build: str):
    plain = [r["visible_ms"] for r in lat["plain"]]
    base = median(plain)
    print(f"Event-to-visible through the local event loop ({build} glue-sync under `cargo lambda watch`, "
          "batching window 0, one poller):\n")
    print("| case | commits | p50 | p95 | vs plain p50 | from staging, p50 | catalog requests per event |")
    print("|---|---:|---:|---:|---:|---:|---|")
    print(f"| plain: `_delta_log/<v>.json` put -> visible | {len(plain)} | {base:.0f} ms | {p95(plain):.0f} ms "
          f"| 1.00x | | 0 |")
    for case, label in (("at_once", "catalog-managed: ratified at once -> visible"),
                        ("after_1s", "catalog-managed: ratified 1 s after staging -> visible")):
        got = [r["from_ratified_ms"] for r in lat[case]]
        staged = [r["from_staged_ms"] for r in lat[case]]
        kinds = Counter()
        for r in lat[case]:
            kinds.update(r["catalog"])
        per_event = Counter({k: round(c / len(got), 2) for k, c in kinds.items()})
        print(f"| {label} | {len(got)} | {median(got):.0f} ms | {p95(got):.0f} ms | {ratio(median(got), base)} "
              f"| {median(staged):.0f} ms | {describe(per_event)} |")
    loop = lat["loop"]
    print(f"\nFirst event of the managed table in the warm function: catalog {describe(Counter(lat['first_event_catalog']))}. "
          f"Loop: {loop['invocations']} invocations, {loop['delivered']} messages delivered, "
          f"{loop['redelivered']} left for redelivery, {loop['queued_at_end']} queued at the end, "
          f"{loop['parked']} parked.")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=10, help="one-commit syncs by the CLI per table [%(default)s]")
    p.add_argument("--commits", type=int, default=10,
                   help="event-loop commits of the plain table and of the managed table ratified at once; "
                        "half as many (at least 3) ratified 1 s later [%(default)s]")
    p.add_argument("--release", action="store_true", help="release builds of lakemirror and glue-sync")
    p.add_argument("--skip-event-loop", action="store_true", help="part 1 only")
    a = p.parse_args()
    build = "release" if a.release else "debug"
    binary = str(TARGET / build / "lakemirror")
    if not Path(binary).is_file():
        sys.exit(f"{binary} missing: cargo build {'--release ' if a.release else ''}--bin lakemirror "
                 "(with CARGO_TARGET_DIR as here)")
    WORK.mkdir(parents=True, exist_ok=True)
    moto_log = open(WORK / "moto.log", "wb")
    moto, line = local_aws.start_moto(stderr=moto_log, start_new_session=True)
    server = None
    try:
        if not line.startswith("ready "):
            sys.exit(f"moto did not start; see {WORK / 'moto.log'}")
        os.environ.update(local_aws.aws_env(line.split()[1]))
        for name in local_aws.LEAKY_VARIABLES:
            os.environ.pop(name, None)
        server = unity.start(WORK / f"uc-{uuid.uuid4().hex[:8]}")
        with FaultProxy(server.url, rate=0.0) as proxy:
            counter = CatalogCounter(proxy)
            cli = requests_per_sync(binary, server, counter, a.rounds)
            lat = None if a.skip_event_loop else event_latency(server, counter, a.commits, a.release)
        print_requests(cli, build)
        if lat:
            print_latency(lat, build)
        print(json.dumps({"cli": cli, "event_loop": lat}), file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
        local_aws.stop_process(moto)
        moto_log.close()


if __name__ == "__main__":
    main()
