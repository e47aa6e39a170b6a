"""What a sync costs as a streaming table's history grows (a benchmark, not a test).

A streaming job commits one small file every few seconds for weeks; Delta keeps every version
of its retention period (7 days by default). For each history length H it writes such a
table on the local file system, with synthetic one-file commits `--cadence-s` apart ending
now (so all of them inside Delta's retention), mirrors it on a local moto Glue with the
history a long-running mirror would have (the first version, then the rest in one catch-up),
then measures a one-commit sync (median of 3), each in its own process as the function runs:

- seconds, S3 + Glue requests, bytes written, and the size of the metadata file it wrote;

and a catch-up of `--catch-up` versions in one sync (after an outage): seconds, requests,
bytes written, the snapshots kept, and the size of what the mirror holds afterwards (every
file in its metadata folder).

Each figure is printed beside the same figure of `--before` (the build before a change),
run on the same table right after this build, and the ratio. A history the older build would
take too long to set up (its catch-up writes every version) is skipped for it with
--before-max-versions.

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/history.py \\
        [--versions 100,5000,60000] [--catch-up 5000] [--cadence-s 10] \\
        [--before path/to/older/lakemirror] [--before-max-versions 5000] [--markdown docs/history.md] \\
        [--plot docs/history.png]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import common  # noqa: E402  (tests/bench, the script's own folder)

DATABASE = "bench_history"
SCHEMA_STRING = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "name", "type": "string", "nullable": True, "metadata": {}}]})
TARGETS = {
    "one_commit_ratio": 1.5,  # one-commit sync at 5,000 and 60,000 versions / at 100
    "metadata_mb": 1.0,  # metadata.json at any history length, default settings
    "catch_up_s": 30,  # 5,000 versions in one sync
    "catch_up_write_ratio": 10,  # bytes written / what the mirror holds afterwards
}


class StreamingTable:
    """A Delta table of one-file commits `cadence_ms` apart, the last one at `end_ms`."""

    def __init__(self, root: Path, versions: int, cadence_ms: int, end_ms: int):
        self.root, self.cadence_ms = root, cadence_ms
        self.log = root / "_delta_log"
        self.log.mkdir(parents=True)
        self.start_ms = end_ms - (versions - 1) * cadence_ms
        self.versions = 0
        header = [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"metaData": {"id": f"history-{root.name}", "format": {"provider": "parquet", "options": {}},
                          "schemaString": SCHEMA_STRING, "partitionColumns": [], "configuration": {},
                          "createdTime": self.start_ms}},
        ]
        self.commit(header)
        while self.versions < versions:
            self.commit([])

    def commit(self, extra: list):
        """The next version: `extra` actions and one new file."""
        v = self.versions
        at = self.start_ms + v * self.cadence_ms
        add = {"add": {"path": f"part-{v:09}-3c1b.c000.snappy.parquet", "partitionValues": {}, "size": 1000,
                       "modificationTime": at, "dataChange": True,
                       "stats": json.dumps({"numRecords": 10, "minValues": {"id": v * 10},
                                            "maxValues": {"id": v * 10 + 9}, "nullCount": {"id": 0}})}}
        info = {"commitInfo": {"timestamp": at, "operation": "STREAMING UPDATE"}}
        lines = [info, *extra, add]
        (self.log / f"{v:020}.json").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
        self.versions += 1


def sync(binary: str, table: Path, name: str, *extra: str, database: str = DATABASE, env=None) -> dict:
    """`lakemirror glue-sync` of one table in its own process: seconds, its report, peak RSS.
    `env` is added to the process's environment (a REST catalog's settings)."""
    with tempfile.NamedTemporaryFile() as rss:
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, binary, "glue-sync",
                               "--table-uri", str(table), "--glue-database", database, "--glue-table", name,
                               *extra], capture_output=True, text=True, env={**os.environ, **(env or {})})
        seconds = time.perf_counter() - started
        peak = Path(rss.name).read_text().split()
    if done.returncode != 0:
        sys.exit(f"{binary} glue-sync of {table} failed: {done.stderr.strip()[-2000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    io = report.get("io", {})
    metadata = report.get("metadata_location") or ""
    size = Path(metadata.removeprefix("file://")).stat().st_size if metadata.startswith("file://") else None
    return {"seconds": seconds, "requests": io.get("requests"), "written": io.get("bytes_written"),
            "metadata_bytes": size, "rss_mb": int(peak[-1]) / 1024 if peak and peak[-1].isdigit() else None,
            "snapshots": report.get("snapshots_committed"), "report": report}


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def snapshots_kept(metadata_location: str) -> int:
    return len(json.loads(Path(metadata_location.removeprefix("file://")).read_text()).get("snapshots", []))


def one_commit(binary: str, work: Path, versions: int, cadence_ms: int, label: str) -> dict:
    """A mirror of a history of `versions` versions, then three one-commit syncs."""
    now = int(time.time() * 1000)
    table = StreamingTable(work / f"h{versions}-{label}", versions, cadence_ms, now - 3 * cadence_ms)
    name = f"h{versions}_{label}"
    sync(binary, table.root, name, "--to-version", "0")
    setup = sync(binary, table.root, name)
    runs = []
    for _ in range(3):
        table.commit([])
        runs.append(sync(binary, table.root, name))
    median = sorted(runs, key=lambda r: r["seconds"])[1]
    return {"setup_s": setup["seconds"], "seconds": statistics.median(r["seconds"] for r in runs),
            "requests": median["requests"], "written": median["written"],
            "metadata_bytes": max(r["metadata_bytes"] or 0 for r in runs),
            "kept": snapshots_kept(runs[-1]["report"]["metadata_location"])}


def catch_up(binary: str, work: Path, versions: int, cadence_ms: int, label: str) -> dict:
    """The first version mirrored, then `versions` more in one sync."""
    now = int(time.time() * 1000)
    table = StreamingTable(work / f"c{versions}-{label}", versions + 1, cadence_ms, now)
    name = f"c{versions}_{label}"
    sync(binary, table.root, name, "--to-version", "0")
    run = sync(binary, table.root, name)
    held = folder_bytes(table.root / "_lakemirror")
    return {"seconds": run["seconds"], "requests": run["requests"], "written": run["written"],
            "held": held, "rss_mb": run["rss_mb"], "metadata_bytes": run["metadata_bytes"],
            "kept": snapshots_kept(run["report"]["metadata_location"])}


def mb(n) -> str:
    return "–" if n is None else f"{n / 2**20:.2f} MB"


def ratio(a, b) -> str:
    return "–" if not a or not b else f"{a / b:.2f}×"


def table(rows: list[tuple], header: tuple) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", default="100,5000,60000", help="history lengths, comma-separated")
    parser.add_argument("--catch-up", type=int, default=5000, help="versions applied in one sync")
    parser.add_argument("--cadence-s", type=float, default=10, help="seconds between commits")
    parser.add_argument("--before", help="the build before the change, run on the same tables after this one")
    parser.add_argument("--before-max-versions", type=int, default=5000,
                        help="longest history the older build sets up (its catch-up writes every version)")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--plot", type=Path, help="also draw one-commit time and metadata size to this PNG")
    parser.add_argument("--work", type=Path, help="where tables are written [default: a temporary folder]")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    lengths = [int(v) for v in args.versions.split(",")]
    cadence_ms = int(args.cadence_s * 1000)

    moto, _ = common.local_moto()
    builds = [("this build", args.binary)] + ([("before", args.before)] if args.before else [])
    results: dict[tuple, dict] = {}
    try:
        boto3.client("glue").create_database(DatabaseInput={"Name": DATABASE})
        with tempfile.TemporaryDirectory(prefix="history-bench-", dir=args.work) as work:
            for n in lengths:
                for label, binary in builds:
                    if label == "before" and n > args.before_max_versions:
                        continue
                    results[("one", n, label)] = r = one_commit(binary, Path(work), n, cadence_ms, label.split()[0])
                    print(f"  {label}, {n:,} versions: set up in {r['setup_s']:.1f} s; one commit "
                          f"{r['seconds']:.3f} s, {r['requests']} requests, {mb(r['written'])} written, "
                          f"metadata {mb(r['metadata_bytes'])}, {r['kept']} snapshots", file=sys.stderr)
            for label, binary in builds:
                results[("catch", label)] = r = catch_up(binary, Path(work), args.catch_up, cadence_ms,
                                                         label.split()[0])
                print(f"  {label}, catch-up of {args.catch_up:,}: {r['seconds']:.1f} s, {r['requests']} requests, "
                      f"{mb(r['written'])} written, {mb(r['held'])} held", file=sys.stderr)
    finally:
        moto.terminate()

    base = results.get(("one", lengths[0], "this build"))
    rows = []
    for n in lengths:
        now, before = results.get(("one", n, "this build")), results.get(("one", n, "before"))
        rows.append((f"{n:,}",
                     f"{now['seconds']:.3f} s ({ratio(now['seconds'], base['seconds'])} of {lengths[0]:,})",
                     "–" if not before else f"{before['seconds']:.3f} s",
                     now["requests"], "–" if not before else before["requests"],
                     mb(now["written"]), "–" if not before else mb(before["written"]),
                     mb(now["metadata_bytes"]), "–" if not before else mb(before["metadata_bytes"]),
                     now["kept"], "–" if not before else before["kept"]))
    one = table(rows, ("versions kept by Delta", "one-commit sync", "before", "requests", "before",
                       "written", "before", "metadata.json", "before", "snapshots", "before"))
    catch = [(label, f"{r['seconds']:.1f} s", r["requests"], mb(r["written"]), mb(r["held"]),
              ratio(r["written"], r["held"]), mb(r["metadata_bytes"]), r["kept"],
              "–" if r["rss_mb"] is None else f"{r['rss_mb']:.0f} MB")
             for label, r in ((label, results[("catch", label)]) for label, _ in builds)]
    catch_table = table(catch, ("build", f"catch-up of {args.catch_up:,} versions", "requests", "written",
                                "held afterwards", "written / held", "metadata.json", "snapshots", "peak RSS"))
    caption = (f"{common.machine()}; {common.today_and_commit()}; commits {args.cadence_s:g} s apart, all inside "
               f"Delta's retention; moto Glue, the table on the local file system; release build. Targets: "
               f"one-commit sync ≤ {TARGETS['one_commit_ratio']}× the time at {lengths[0]:,}, metadata.json ≤ "
               f"{TARGETS['metadata_mb']} MB, catch-up ≤ {TARGETS['catch_up_s']} s writing ≤ "
               f"{TARGETS['catch_up_write_ratio']}× what the mirror holds.")
    text = f"{one}\n\n{catch_table}\n\n{caption}\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.plot:
        plot(results, lengths, [label for label, _ in builds], args.plot)


def plot(results: dict, lengths: list[int], labels: list[str], out: Path) -> None:
    """One-commit sync time and metadata.json size by history length, one line per build."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (time_ax, size_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for label in labels:
        points = [(n, results[("one", n, label)]) for n in lengths if ("one", n, label) in results]
        xs = [n for n, _ in points]
        time_ax.plot(xs, [r["seconds"] for _, r in points], marker="o", label=label)
        size_ax.plot(xs, [(r["metadata_bytes"] or 0) / 2**20 for _, r in points], marker="o", label=label)
    for ax, title in ((time_ax, "one-commit sync (s)"), (size_ax, "metadata.json (MB)")):
        ax.set_xscale("log")
        ax.set_xlabel("versions in Delta's retention")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    main()
