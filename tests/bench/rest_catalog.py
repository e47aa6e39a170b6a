"""What a sync costs in an Iceberg REST catalog, beside the same sync into Glue (a benchmark,
not a test).

A streaming table of one-file commits (tests/bench/history.py's StreamingTable) is mirrored
into a local rustberg REST catalog and, as the baseline of the same run, into moto's Glue.
For each history length it measures a one-commit sync (median of 3, each its own process as
the function runs: seconds and requests, catalog requests included), and a catch-up of
`--catch-up` versions in one sync, which REST commits one version at a time (each version
stays in the server's snapshot log; docs/rest-catalog.md).

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/rest_catalog.py \\
        [--versions 100,2000] [--catch-up 200] [--markdown docs/rest-catalog-bench.md]
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import boto3

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "bench"))
from rig import rest_catalog  # noqa: E402

import common  # noqa: E402
import history  # noqa: E402
from history import StreamingTable, table  # noqa: E402

DATABASE = "bench_rest"


def sync(binary: str, root: Path, env: dict, *extra: str) -> dict:
    """history.py's sync in its own process; the catalog table is named after the table's folder."""
    return history.sync(binary, root, root.name, *extra, database=DATABASE, env=env)


def one_commit(binary, folder: Path, versions: int, cadence_ms: int, env: dict) -> dict:
    now = int(time.time() * 1000)
    stream = StreamingTable(folder, versions, cadence_ms, now - 3 * cadence_ms)
    sync(binary, stream.root, env, "--to-version", "0")
    setup = sync(binary, stream.root, env)
    runs = []
    for _ in range(3):
        stream.commit([])
        runs.append(sync(binary, stream.root, env))
    return {"setup_s": setup["seconds"], "seconds": statistics.median(r["seconds"] for r in runs),
            "requests": sorted(r["requests"] for r in runs)[1]}


def catch_up(binary, folder: Path, versions: int, cadence_ms: int, env: dict) -> dict:
    stream = StreamingTable(folder, versions + 1, cadence_ms, int(time.time() * 1000))
    sync(binary, stream.root, env, "--to-version", "0")
    return sync(binary, stream.root, env)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", default="100,2000", help="history lengths, comma-separated")
    parser.add_argument("--catch-up", type=int, default=200, help="versions applied in one sync")
    parser.add_argument("--cadence-s", type=float, default=10, help="seconds between commits")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    lengths = [int(v) for v in args.versions.split(",")]
    cadence_ms = int(args.cadence_s * 1000)

    moto, _ = common.local_moto()
    results = {}
    with tempfile.TemporaryDirectory(prefix="rest-bench-") as work:
        server = rest_catalog.start(Path(work) / "rustberg")
        try:
            boto3.client("glue").create_database(DatabaseInput={"Name": DATABASE})
            server.create_namespace(DATABASE)
            targets = {"Glue (moto)": (Path(work) / "glue", {}),
                       "REST (rustberg)": (server.warehouse / DATABASE, server.env())}
            for label, (base, env) in targets.items():
                base.mkdir(parents=True, exist_ok=True)
                for n in lengths:
                    r = one_commit(args.binary, base / f"h{n}", n, cadence_ms, env)
                    results[(label, n)] = r
                    print(f"  {label}, {n:,} versions: set up in {r['setup_s']:.1f} s; one commit "
                          f"{r['seconds']:.3f} s, {r['requests']} requests", file=sys.stderr)
                results[(label, "catch")] = r = catch_up(args.binary, base / "catch", args.catch_up, cadence_ms, env)
                print(f"  {label}, catch-up of {args.catch_up:,}: {r['seconds']:.2f} s, {r['requests']} requests",
                      file=sys.stderr)
        finally:
            server.stop()
            moto.terminate()

    glue, rest = "Glue (moto)", "REST (rustberg)"
    rows = []
    for n in lengths:
        g, r = results[(glue, n)], results[(rest, n)]
        rows.append((f"one-commit sync, {n:,} versions", f"{g['seconds']:.3f} s, {g['requests']} requests",
                     f"{r['seconds']:.3f} s, {r['requests']} requests", f"{r['seconds'] / g['seconds']:.2f}×"))
    g, r = results[(glue, "catch")], results[(rest, "catch")]
    rows.append((f"catch-up of {args.catch_up:,} versions", f"{g['seconds']:.2f} s, {g['requests']} requests",
                 f"{r['seconds']:.2f} s, {r['requests']} requests", f"{r['seconds'] / g['seconds']:.2f}×"))
    text = table(rows, ("sync", glue, rest, "REST / Glue time")) + (
        f"\n\n{common.machine()}; {common.today_and_commit()}; commits {args.cadence_s:g} s apart; the table on the "
        f"local file system; moto Glue and rustberg 0.3.0 on loopback; requests count the catalog's and the "
        f"storage's.\n")
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
