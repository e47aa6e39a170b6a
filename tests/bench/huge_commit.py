"""Memory of a sync of one huge commit (a benchmark, not a test; issue 29).

A writer can commit 2,000,000 adds in one commit file (265 MB) before any checkpoint. Before
issue 29 a sync held all of it at once (2.7 GB), so a function of 1 GB was killed with every
table of its batch. Now what one sync reads is bounded by MEMORY_SIZE (the function's
MemorySize): this generates such a table on the local file system, once as a new table (its
first sync) and once as the next commit of a mirrored table, and syncs each under GNU time at
several MEMORY_SIZE values with this build and (--before) an older one, printing the outcome
and the peak RSS of the process beside the memory it was given.

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/huge_commit.py \\
        [--files 2000000] [--memory 1024,3072] [--before path/to/older/lakemirror]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import boto3

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import common  # noqa: E402
from scale import measured  # noqa: E402

DATABASE = "bench_huge_commit"
PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
METADATA = {"metaData": {"id": "huge", "format": {"provider": "parquet", "options": {}}, "partitionColumns": [],
                         "configuration": {}, "createdTime": 1, "schemaString": json.dumps(
                             {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True,
                                                            "metadata": {}}]})}}


def add_line(n: int) -> str:
    stats = json.dumps({"numRecords": 10})
    return json.dumps({"add": {"path": f"p-{n:08}.parquet", "partitionValues": {}, "size": 1000,
                               "modificationTime": 1, "dataChange": True, "stats": stats}}, separators=(",", ":"))


def write_commit(root: Path, version: int, lines):
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    with open(log / f"{version:020}.json", "w") as out:
        for line in lines:
            out.write(line + "\n")


def huge(files: int):
    return (add_line(n) for n in range(files))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2_000_000, help="adds in the one huge commit")
    parser.add_argument("--memory", default="1024,3072", help="comma-separated MEMORY_SIZE values, MB")
    parser.add_argument("--before", help="an older lakemirror binary, run on the same logs")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    memories = [int(m) for m in args.memory.split(",")]
    binaries = [("this build", args.binary)] + ([("before", args.before)] if args.before else [])

    moto, _ = common.local_moto()
    rows = []
    try:
        boto3.client("glue").create_database(DatabaseInput={"Name": DATABASE})
        with tempfile.TemporaryDirectory(prefix="huge-commit-") as work:
            started = time.perf_counter()
            first = Path(work) / "first"
            write_commit(first, 0, [json.dumps(PROTOCOL), json.dumps(METADATA), *huge(args.files)])
            size_mb = (first / "_delta_log" / f"{0:020}.json").stat().st_size / 2**20
            print(f"commit of {args.files:,} adds: {size_mb:.0f} MB, generated in "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
            n = 0
            for name, binary in binaries:
                for memory in memories:
                    n += 1
                    # A new table: its first sync.
                    env = {**os.environ, "MEMORY_SIZE": str(memory)}
                    sync = ["glue-sync", "--glue-database", DATABASE, "--glue-table"]
                    rows.append((name, memory, "first sync (new mirror)", run(
                        binary, [*sync, f"first_{n}", "--table-uri", str(first),
                                 "--metadata-uri", str(first / f"_m{n}")], env)))
                    # The next commit of a mirrored table.
                    table = Path(work) / f"next_{n}"
                    write_commit(table, 0, [json.dumps(PROTOCOL), json.dumps(METADATA), add_line(0)])
                    base = run(binary, [*sync, f"next_{n}", "--table-uri", str(table),
                                        "--metadata-uri", str(table / "_m")], env)
                    assert "failed" not in base, base
                    os.link(first / "_delta_log" / f"{0:020}.json", table / "_delta_log" / f"{1:020}.json")
                    rows.append((name, memory, "next commit of a mirror", run(
                        binary, [*sync, f"next_{n}", "--table-uri", str(table),
                                 "--metadata-uri", str(table / "_m")], env)))
                    print(f"  {rows[-2]}\n  {rows[-1]}"[:600], file=sys.stderr)
    finally:
        moto.terminate()
    print(report(rows, args, size_mb))


def run(binary, args, env):
    os.environ.update(env)
    return measured(binary, args, 0)


def report(rows, args, size_mb) -> str:
    lines = [f"one commit of {args.files:,} adds ({size_mb:.0f} MB), no checkpoint; {common.machine()}; "
             f"{common.today_and_commit()}", "",
             "| build | MEMORY_SIZE | sync | outcome | seconds | peak RSS MB | RSS / memory |",
             "|---|---:|---|---|---:|---:|---:|"]
    for name, memory, case, r in rows:
        if "failed" in r:
            text = r["failed"]
            outcome = "refused: " + text[text.find("more than"):][:110] if "more than" in text else text[:110]
        else:
            outcome = f"ok, {r['report'].get('added_files')} files"
        rss = r.get("peak_rss_mb") or 0
        lines.append(f"| {name} | {memory} | {case} | {outcome} | {r['seconds']:.1f} | {rss:.0f} | "
                     f"{rss / memory:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
