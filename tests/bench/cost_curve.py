"""The cost curve of a sync: what mirroring one commit costs as the table grows, beside the
seed's add_files approach (a benchmark, not a test).

For each N (active files), on a local moto S3 + Glue, it writes a Delta table of N small real
Parquet files (partitioned and not) with ten commits and a classic checkpoint at version 10, as
Spark leaves it, then measures in the same run:

Every sync is one run of the deployed glue-sync handler in its own process (`lakemirror invoke
glue-sync`) on the S3 notification of the commit, as Lambda receives it.

- bootstrap: lakemirror's first sync of the whole table (wall time, requests, peak RSS);
- incremental: the sync of a commit adding 1 file, and of one removing 1 and adding 1 (an
  update); median of 3 each; wall time, S3 + Glue requests, bytes read and written;
- verify: `lakemirror verify` of the mirror afterwards (metadata only; wall time, requests);
- seed approach (unpartitioned table, N <= --seed-max): what the seed did on every sync, drop
  the Iceberg table, re-create it, pyiceberg add_files over a listing of the folder;
- add_files (unpartitioned, N <= --add-files-max): pyiceberg add_files of Delta's active set
  into a new table, the obvious one-off way to bootstrap.

It prints a markdown table with the ratios the targets are stated in, writes it to
docs/benchmarks.md and the plots docs/bench-time.png and docs/bench-requests.png.

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/cost_curve.py \\
        [--sizes 1000,10000,100000] [--seed-max 10000] [--add-files-max 100000]
"""

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from rig import judge  # noqa: E402

import common  # noqa: E402  (tests/bench, the script's own folder)

DATABASE = "bench"
ROWS_PER_FILE = 10
SCHEMA = [("id", "long"), ("name", "string")]
TARGETS = {
    "incremental_growth": 1.5,  # time at the largest N / time at the smallest
    "incremental_requests": 9,  # issue 54
    "seed_speedup": 100,  # at 10,000 files
    "add_files_speedup": 10,  # bootstrap at 100,000 files
    "bootstrap_rss_mb": 512,
    "verify_s": 10,  # lakemirror verify at 100,000 files (issue 20)
}


def parquet_bytes(first_id: int) -> bytes:
    ids = list(range(first_id, first_id + ROWS_PER_FILE))
    out = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}), out)
    return out.getvalue()


class Table:
    """A generated Delta table on moto S3."""

    def __init__(self, s3, n: int, partitioned: bool, files_of=None):
        """`files_of`: an unpartitioned table of the same N whose data files this one's log
        references by absolute path (valid Delta, as in a shallow clone) instead of uploading
        N more; partition values live in the log, so the files need no partition folders."""
        self.s3, self.n, self.partitioned, self.files_of = s3, n, partitioned, files_of
        self.prefix = f"{'p' if partitioned else 'u'}{n}"
        # A bucket per table: moto lists a prefix by scanning every key of the bucket, which
        # would make each table's syncs pay for the objects of all the others.
        self.bucket = f"bench-{self.prefix}"
        s3.create_bucket(Bucket=self.bucket)
        self.uri = f"s3://{self.bucket}/{self.prefix}"
        self.version = -1
        self.next_file = 0
        self.live: list[str] = []


    def env(self) -> dict:
        """The environment of lakemirror for this table: a shallow clone's source is an allowed
        external root (any other path outside a table's root is refused)."""
        if self.files_of is None:
            return dict(os.environ)
        return {**os.environ, "ALLOWED_EXTERNAL_ROOTS": self.files_of.uri}
    def new_files(self, count: int, upload: bool = True) -> list[dict]:
        """Uploads `count` new data files (same bytes, distinct keys) and returns their adds."""
        body = parquet_bytes(0)
        stats = json.dumps({"numRecords": ROWS_PER_FILE, "minValues": {"id": 0, "name": "n0"},
                            "maxValues": {"id": ROWS_PER_FILE - 1, "name": f"n{ROWS_PER_FILE - 1}"},
                            "nullCount": {"id": 0, "name": 0}})
        first, self.next_file = self.next_file, self.next_file + count
        indexes = range(first, first + count)
        if upload:
            paths = [f"part-{i:07}.parquet" for i in indexes]
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda p: self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{p}", Body=body), paths))
        else:
            paths = [f"{self.files_of.uri}/part-{i:07}.parquet" for i in indexes]
        now = int(time.time() * 1000)
        self.live += paths
        return [{"add": {"path": p, "size": len(body), "modificationTime": now, "dataChange": True, "stats": stats,
                         "partitionValues": {"part": str(i % 100)} if self.partitioned else {}}}
                for i, p in zip(indexes, paths)]

    def commit(self, actions: list[dict]):
        self.version += 1
        info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
        body = "\n".join(json.dumps(a) for a in [info, *actions]) + "\n"
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/_delta_log/{self.version:020}.json", Body=body.encode())

    def create(self):
        """Version 0 with N - 10 files, versions 1-10 with one each, a checkpoint at 10."""
        schema = json.dumps({"type": "struct", "fields": [
            {"name": n, "type": t, "nullable": True, "metadata": {}}
            for n, t in SCHEMA + ([("part", "integer")] if self.partitioned else [])]})
        self.commit([{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                     {"metaData": {"id": self.prefix, "format": {"provider": "parquet", "options": {}},
                                   "schemaString": schema, "partitionColumns": ["part"] if self.partitioned else [],
                                   "configuration": {}, "createdTime": int(time.time() * 1000)}},
                     *self.new_files(self.n - 10, upload=self.files_of is None)])
        for _ in range(10):
            self.commit(self.new_files(1, upload=self.files_of is None))
        from deltalake import DeltaTable

        DeltaTable(self.uri, storage_options=judge.delta_storage_options()).create_checkpoint()

    def append(self):
        self.commit(self.new_files(1))

    def update(self):
        gone = self.live.pop(0)
        self.commit([{"remove": {"path": gone, "dataChange": True, "deletionTimestamp": int(time.time() * 1000)}},
                     *self.new_files(1)])


def sync(binary: str, table: Table) -> dict:
    """One run of the deployed glue-sync handler (`lakemirror invoke glue-sync`, in its own
    process) on the S3 notification of the table's newest commit, as Lambda would receive
    it; the sync's report plus wall time and peak RSS. GNU time measures the RSS: a child
    forked from this Python would count the interpreter's pages too."""
    key = f"{table.prefix}/_delta_log/{table.version:020}.json"
    event = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                          "s3": {"bucket": {"name": table.bucket}, "object": {"key": key}}}]}
    with tempfile.NamedTemporaryFile() as rss, tempfile.NamedTemporaryFile("w", suffix=".json") as event_file:
        json.dump(event, event_file)
        event_file.flush()
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, binary, "invoke", "glue-sync",
                               "--event", event_file.name, "--glue-database", DATABASE],
                              capture_output=True, text=True, env=table.env())
        wall_ms = (time.perf_counter() - started) * 1000
        if done.returncode != 0:
            sys.exit(f"lakemirror failed on {table.uri}: {done.stderr[-2000:]}")
        response = json.loads(done.stdout.strip().splitlines()[-1])
        if len(response.get("synced", [])) != 1:
            sys.exit(f"lakemirror did not sync {table.uri}: {response}")
        report = response["synced"][0]
        if report["delta_version"] != table.version:
            sys.exit(f"lakemirror synced {table.uri} to version {report['delta_version']}, not {table.version}")
        report["peak_rss_mb"] = int(Path(rss.name).read_text().split()[-1]) / 1024  # KiB
    report["wall_ms"] = wall_ms
    return report


def verify_mirror(binary: str, table: Table, glue_table: str) -> dict:
    """`lakemirror verify` of the mirror at its current version: wall time, requests, peak RSS;
    stops the benchmark unless the mirror verifies equal."""
    with tempfile.NamedTemporaryFile() as rss:
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, binary, "verify", "--table-uri",
                               table.uri, "--glue-database", DATABASE, "--glue-table", glue_table],
                              capture_output=True, text=True, env=table.env())
        wall_ms = (time.perf_counter() - started) * 1000
        if done.returncode != 0:
            sys.exit(f"lakemirror verify failed on {table.uri}: {done.stderr[-2000:]}")
        report = json.loads(done.stdout.strip().splitlines()[-1])
        report["peak_rss_mb"] = int(Path(rss.name).read_text().split()[-1]) / 1024  # KiB
    report["wall_ms"] = wall_ms
    return report


def median_of(binary, table, step, times=3) -> dict:
    runs = []
    for _ in range(times):
        step()
        runs.append(sync(binary, table))
    middle = statistics.median_low(r["wall_ms"] for r in runs)
    return next(r for r in runs if r["wall_ms"] == middle)


def iceberg_schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    return Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def seed_approach(catalog, table: Table) -> float:
    """The seed's sync: list the folder, drop and re-create the table, add_files everything."""
    started = time.perf_counter()
    s3 = boto3.client("s3")
    listing = [f"s3://{table.bucket}/{o['Key']}"
               for page in s3.get_paginator("list_objects_v2").paginate(Bucket=table.bucket, Prefix=f"{table.prefix}/")
               for o in page.get("Contents", [])
               if o["Key"].endswith(".parquet") and "/_delta_log/" not in o["Key"] and "/_lakemirror/" not in o["Key"]]
    name = (DATABASE, f"seed_{table.prefix}")
    if catalog.table_exists(name):
        catalog.drop_table(name)
    iceberg = catalog.create_table(name, iceberg_schema(), location=f"s3://{table.bucket}/seed/{table.prefix}")
    iceberg.add_files(listing)
    return (time.perf_counter() - started) * 1000


def add_files_of_active_set(catalog, table: Table) -> float:
    from deltalake import DeltaTable

    started = time.perf_counter()
    files = DeltaTable(table.uri, storage_options=judge.delta_storage_options()).file_uris()
    iceberg = catalog.create_table((DATABASE, f"adopt_{table.prefix}"), iceberg_schema(),
                                   location=f"s3://{table.bucket}/adopt/{table.prefix}")
    iceberg.add_files(files)
    return (time.perf_counter() - started) * 1000


def measure(binary, s3, catalog, n, partitioned, args, files_of=None) -> dict:
    table = Table(s3, n, partitioned, files_of)
    began = time.perf_counter()
    table.create()
    print(f"  generated {table.uri}: {n} files in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    row = {"n": n, "partitioned": partitioned, "bootstrap": sync(binary, table),
           "append": median_of(binary, table, table.append), "update": median_of(binary, table, table.update)}
    row["verify"] = verify_mirror(binary, table, row["update"]["table"])
    if not partitioned and n <= args.seed_max:
        row["seed_ms"] = seed_approach(catalog, table)
    if not partitioned and n <= args.add_files_max:
        row["add_files_ms"] = add_files_of_active_set(catalog, table)
    print(f"  measured {table.uri}", file=sys.stderr)
    return row, table


def caption() -> str:
    return f"{common.machine()}; local moto S3 + Glue; {common.today_and_commit()}"


def report(rows, binary) -> str:
    first = {(r["partitioned"], k): r[k]["wall_ms"] for r in rows for k in ("append", "update")
             if r["n"] == rows[0]["n"]}
    lines = [f"lakemirror sync cost ({caption()}; `{Path(binary).name}` {'debug' if '/debug/' in str(binary) else 'release'} build, the glue-sync handler on an S3 notification, one process per sync; "
             "requests are S3 + Glue calls)", "",
             "| files | partitioned | step | wall ms | requests | KiB read | KiB written | peak RSS MB | vs first N |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        for step in ("append", "update", "bootstrap", "verify"):
            if step not in r:
                continue
            x = r[step]
            ratio = f"{x['wall_ms'] / first[(r['partitioned'], step)]:.2f}x" if step in ("append", "update") else ""
            lines.append(f"| {r['n']:,} | {'yes' if r['partitioned'] else 'no'} | {step} | {x['wall_ms']:,.0f} | "
                         f"{x['io']['requests']} | {x['io']['bytes_read'] / 1024:,.1f} | "
                         f"{x['io']['bytes_written'] / 1024:,.1f} | {x['peak_rss_mb']:.0f} | {ratio} |")
    # Every request accounted for (issue 54): which call, for what, of one append and one update.
    calls = sorted({c for r in rows for s in ("append", "update") for c in r[s]["io"].get("calls", {})})
    if calls:
        columns = [(r["n"], r["partitioned"], s) for r in rows for s in ("append", "update")]
        lines += ["", "Requests of one incremental sync, by call and what it was for:", "",
                  "| call | " + " | ".join(f"{n:,} {'part.' if p else 'flat'} {s}" for n, p, s in columns) + " |",
                  "|---|" + "---:|" * len(columns)]
        by = {(r["n"], r["partitioned"]): r for r in rows}
        for call in calls:
            lines.append(f"| {call} | " + " | ".join(
                str(by[(n, p)][s]["io"].get("calls", {}).get(call, 0)) for n, p, s in columns) + " |")
    lines += ["", "| files | seed approach ms | seed / lakemirror update | add_files ms | add_files / lakemirror bootstrap |",
              "|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["partitioned"]:
            continue
        seed, adopt = r.get("seed_ms"), r.get("add_files_ms")
        seed_cells = [f"{seed:,.0f}", f"{seed / r['update']['wall_ms']:,.0f}x"] if seed else ["not run", ""]
        adopt_cells = [f"{adopt:,.0f}", f"{adopt / r['bootstrap']['wall_ms']:,.1f}x"] if adopt else ["not run", ""]
        lines.append("| " + " | ".join([f"{r['n']:,}", *seed_cells, *adopt_cells]) + " |")
    lines += ["", "Targets:"] + [f"- {t}" for t in verdicts(rows)]
    return "\n".join(lines) + "\n"


def verdicts(rows) -> list[str]:
    out = []
    by = {(r["n"], r["partitioned"]): r for r in rows}
    small, large = min(r["n"] for r in rows), max(r["n"] for r in rows)
    for part in (False, True):
        for step in ("append", "update"):
            if (small, part) in by and (large, part) in by and large > small:
                growth = by[(large, part)][step]["wall_ms"] / by[(small, part)][step]["wall_ms"]
                ok = growth <= TARGETS["incremental_growth"]
                out.append(f"{'met' if ok else 'MISSED'}: {step} ({'partitioned' if part else 'unpartitioned'}) at "
                           f"{large:,} files is {growth:.2f}x the time at {small:,} (target <= {TARGETS['incremental_growth']}x)")
    worst = max(r[s]["io"]["requests"] for r in rows for s in ("append", "update"))
    out.append(f"{'met' if worst <= TARGETS['incremental_requests'] else 'MISSED'}: at most {worst} S3/Glue requests "
               f"per incremental sync (target <= {TARGETS['incremental_requests']})")
    for r in rows:
        if not r["partitioned"] and r["n"] == 10_000 and "seed_ms" in r:
            x = r["seed_ms"] / r["update"]["wall_ms"]
            out.append(f"{'met' if x >= TARGETS['seed_speedup'] else 'MISSED'}: {x:,.0f}x faster than the seed approach "
                       f"at 10,000 files (target >= {TARGETS['seed_speedup']}x)")
        if not r["partitioned"] and r["n"] == 100_000 and "add_files_ms" in r:
            x = r["add_files_ms"] / r["bootstrap"]["wall_ms"]
            out.append(f"{'met' if x >= TARGETS['add_files_speedup'] else 'MISSED'}: bootstrap of 100,000 files "
                       f"{x:,.1f}x faster than pyiceberg add_files (target >= {TARGETS['add_files_speedup']}x)")
        if r["n"] == 100_000 and "verify" in r:
            seconds = r["verify"]["wall_ms"] / 1000
            out.append(f"{'met' if seconds <= TARGETS['verify_s'] else 'MISSED'}: lakemirror verify of 100,000 files "
                       f"({'partitioned' if r['partitioned'] else 'unpartitioned'}) takes {seconds:.1f} s "
                       f"(target <= {TARGETS['verify_s']} s)")
        if r["n"] == 100_000:
            rss = r["bootstrap"]["peak_rss_mb"]
            out.append(f"{'met' if rss <= TARGETS['bootstrap_rss_mb'] else 'MISSED'}: bootstrap of 100,000 files "
                       f"({'partitioned' if r['partitioned'] else 'unpartitioned'}) peaks at {rss:.0f} MB RSS "
                       f"(target <= {TARGETS['bootstrap_rss_mb']} MB)")
    return out


def plot(rows, out_dir: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("append", False, "incremental: append 1 file"), ("update", False, "incremental: update (remove 1, add 1)"),
              ("append", True, "incremental: append, partitioned"), ("bootstrap", False, "bootstrap (first sync)")]

    def figure(name, ylabel, title, value, extra=()):
        """One log-log plot of `value(step report)` per lakemirror series, plus `extra` series
        given as (row key, label, value of the row)."""
        fig, ax = plt.subplots(figsize=(8, 5.5))
        for step, part, label in series:
            pts = [(r["n"], value(r[step])) for r in rows if r["partitioned"] == part]
            ax.plot(*zip(*pts), marker="o", label=f"lakemirror {label}")
        for key, label in extra:
            pts = [(r["n"], r[key] / 1000) for r in rows if key in r]
            if pts:
                ax.plot(*zip(*pts), marker="s", linestyle="--", label=label)
        ax.set(xscale="log", yscale="log", xlabel="active data files in the Delta table (N)", ylabel=ylabel,
               title=title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.text(0.01, 0.01, caption(), fontsize=7)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(out_dir / name, dpi=110)

    figure("bench-time.png", "wall time per sync (seconds)", "Cost of mirroring one commit vs table size",
           lambda x: x["wall_ms"] / 1000,
           extra=(("seed_ms", "seed approach: drop + re-create + add_files of a listing"),
                  ("add_files_ms", "pyiceberg add_files of the active set")))
    figure("bench-requests.png", "S3 + Glue requests per sync", "Requests per sync vs table size",
           lambda x: x["io"]["requests"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated N (active files)")
    parser.add_argument("--seed-max", type=int, default=10_000, help="largest N to run the seed approach on")
    parser.add_argument("--add-files-max", type=int, default=100_000, help="largest N to run add_files on")
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="where the table and plots go")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    sizes = [int(s) for s in args.sizes.split(",")]
    if min(sizes) < 11:
        sys.exit("--sizes: each N must be at least 11 (ten commits of one file precede the checkpoint)")

    moto, _ = common.local_moto()
    try:
        s3 = boto3.client("s3")
        boto3.client("glue").create_database(DatabaseInput={"Name": DATABASE})
        catalog = judge.glue_catalog()
        rows = []
        for n in sizes:
            row, unpartitioned = measure(args.binary, s3, catalog, n, False, args)
            rows.append(row)
            rows.append(measure(args.binary, s3, catalog, n, True, args, files_of=unpartitioned)[0])
    finally:
        moto.terminate()
    text = report(rows, args.binary)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "benchmarks.md").write_text("# Benchmark: the cost curve of a sync\n\n"
                                            "Written by `tests/bench/cost_curve.py`.\n\n" + text +
                                            "\n![time](bench-time.png)\n\n![requests](bench-requests.png)\n")
    plot(rows, args.out)
    print(f"wrote {args.out / 'benchmarks.md'}, {args.out / 'bench-time.png'}, {args.out / 'bench-requests.png'}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
