"""How the first sync (bootstrap) of a very large Delta table scales (a benchmark, not a test).

Large Databricks and Spark tables hold millions of files; their log is a checkpoint of one add
per file plus the commits after it. For each N (active files) and each checkpoint layout this
generates such a log with pyarrow, in the Delta checkpoint schema with `stats` (JSON) and
`stats_parsed` (struct), without writing any data file:

- classic: one Parquet checkpoint file;
- multi-part: `--parts` files (`<v>.checkpoint.<part>.<parts>.parquet`);
- v2: a checkpoint naming `--parts` sidecar files in `_delta_log/_sidecars/` (v2Checkpoint
  table feature);

then, on a local moto Glue with the table on the local file system, runs `lakemirror
glue-sync` (its own process, under GNU time) for the bootstrap, commits one more file and runs
it again for the one-commit sync. It prints, per table: bootstrap wall time, peak RSS,
requests, and the one-commit sync's time and requests, beside the targets of issue 19, and
the peak RSS per file (the figure that decides which tables fit in a Lambda of 10 GB).

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/scale.py \\
        [--sizes 1000000] [--layouts classic,multi-part,v2] [--parts 10] [--memory-limit-gb 0] \\
        [--memory-size 256] [--before path/to/older/lakemirror]

--before runs another build on the same logs, each bootstrap right after the other's: this
machine's speed drifts by 2x within an hour, so only figures of one run compare.

With --memory-limit-gb, a sync that needs more address space fails (recorded as such)
instead of pushing the machine into swap (10,000,000 files need about 20 GB today).
With --memory-size, every lakemirror run is told the memory it has (MEMORY_SIZE, as a
function is): its memory budget (issue 51) decides how a bootstrap is grouped.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import common  # noqa: E402  (tests/bench, the script's own folder)
from rig.synthetic_log import VERSION, commit_one_file, generate  # noqa: E402

DATABASE = "bench_scale"
TARGETS = {  # issue 19, on this machine; for 1,000,000 files issue 51's (256 MB) and 54's (10 s)
    1_000_000: {"seconds": 10, "rss_mb": 256},
    10_000_000: {"seconds": 600, "rss_mb": 2048},
}
MEMORY_SIZE = None  # --memory-size: MEMORY_SIZE of every run, in MB


def sync(binary: str, root: Path, table: str, limit_gb: float, metadata: Path) -> dict:
    """`lakemirror glue-sync` under GNU time with an address-space limit: its report, wall
    seconds and peak RSS, or the failure."""
    return measured(binary, ["glue-sync", "--table-uri", str(root), "--glue-database", DATABASE,
                             "--glue-table", table, "--metadata-uri", str(metadata)], limit_gb)


def measured(binary: str, args: list[str], limit_gb: float) -> dict:
    """One lakemirror command under GNU time: its JSON report, wall seconds and peak RSS, or
    the failure."""
    def limit():
        if limit_gb > 0:
            cap = int(limit_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.NamedTemporaryFile() as rss:
        started = time.perf_counter()
        env = {**os.environ, **({"MEMORY_SIZE": str(MEMORY_SIZE)} if MEMORY_SIZE else {})}
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, binary, *args],
                              capture_output=True, text=True, env=env,
                              preexec_fn=limit if limit_gb > 0 else None)
        seconds = time.perf_counter() - started
        text = Path(rss.name).read_text().split()
        peak_mb = int(text[-1]) / 1024 if text and text[-1].isdigit() else None
    if done.returncode != 0:
        return {"failed": (done.stderr.strip().splitlines() or ["killed"])[-1][-300:], "seconds": seconds,
                "peak_rss_mb": peak_mb}
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seconds": seconds, "peak_rss_mb": peak_mb, "requests": report.get("io", {}).get("requests"),
            "report": report}


def fan_out(binary: str, root: Path, table: str, parts: int, limit_gb: float, work: Path) -> dict:
    """`lakemirror fan-out` plan, each part in turn (as one worker each would run them), and
    finish: each step's seconds and peak RSS."""
    steps = {"plan": measured(binary, ["fan-out", "plan", "--table-uri", str(root), "--glue-database", DATABASE,
                                       "--glue-table", table, "--metadata-uri", str(root / f"_{table}"),
                                       "--parts", str(parts)], limit_gb)}
    if "failed" in steps["plan"]:
        return steps
    plan = work / f"{table}.plan.json"
    plan.write_text(json.dumps(steps["plan"]["report"]))
    steps["parts"] = [measured(binary, ["fan-out", "part", "--plan", str(plan), "--part", str(p)], limit_gb)
                      for p in steps["plan"]["report"]["part_numbers"]]
    steps["finish"] = measured(binary, ["fan-out", "finish", "--plan", str(plan)], limit_gb)
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000", help="comma-separated N (active files), e.g. 1000000,10000000")
    parser.add_argument("--layouts", default="classic,multi-part,v2", help="checkpoint layouts to generate")
    parser.add_argument("--parts", type=int, default=10, help="parts of a multi-part checkpoint / v2 sidecars")
    parser.add_argument("--memory-limit-gb", type=float, default=0,
                        help="address space a sync may use, 0 for no limit (a limit slows syncs by about 25%%)")
    parser.add_argument("--memory-size", type=int, metavar="MB",
                        help="MEMORY_SIZE of every lakemirror run (a function's memory) [default: unset]")
    parser.add_argument("--fan-out", type=int, default=0, metavar="PARTS",
                        help="also bootstrap each table with `lakemirror fan-out` in PARTS parts (this build only)")
    parser.add_argument("--work", type=Path, help="where the logs are generated [default: a temporary folder]")
    parser.add_argument("--before", help="another lakemirror binary, run beside --binary on the same logs, "
                                         "each bootstrap right after the other's (this machine's speed drifts)")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    global MEMORY_SIZE
    MEMORY_SIZE = args.memory_size
    common.check_binary(args.binary)
    sizes = [int(s) for s in args.sizes.split(",")]
    layouts = args.layouts.split(",")
    if unknown := set(layouts) - {"classic", "multi-part", "v2"}:
        sys.exit(f"--layouts: unknown {sorted(unknown)}; use classic, multi-part, v2")

    moto, _ = common.local_moto()
    rows, fanned = [], []
    try:
        boto3.client("glue").create_database(DatabaseInput={"Name": DATABASE})
        with tempfile.TemporaryDirectory(prefix="scale-bench-", dir=args.work) as work:
            for n in sizes:
                for layout in layouts:
                    root = Path(work) / f"{layout}-{n}"
                    made = generate(root, n, layout, args.parts)
                    print(f"  {layout} {n:,}: log of {made['log_mb']:.0f} MB generated in {made['seconds']:.0f} s",
                          file=sys.stderr)
                    binaries = [("this build", args.binary)] + ([("before", args.before)] if args.before else [])
                    boots = {}
                    for name, binary in binaries:
                        table = f"{layout.replace('-', '_')}_{n}_{len(boots)}"
                        metadata = root / f"_lakemirror_{len(boots)}"
                        boots[name] = (binary, table, metadata,
                                       sync(binary, root, table, args.memory_limit_gb, metadata))
                        print(f"    {name} bootstrap: {boots[name][3]}"[:300], file=sys.stderr)
                        if "report" in boots[name][3]:
                            added = boots[name][3]["report"]["added_files"]
                            assert added == n, f"{name}: the bootstrap mirrored {added} files, not {n}"
                    if args.fan_out:
                        table = f"{layout.replace('-', '_')}_{n}_fanned"
                        steps = fan_out(args.binary, root, table, args.fan_out, args.memory_limit_gb, Path(work))
                        fanned.append((n, layout, boots["this build"][3], steps))
                        print(f"    fan-out: {summary(steps)}", file=sys.stderr)
                    commit_one_file(root, n)
                    for name, (binary, table, metadata, boot) in boots.items():
                        one = None if "failed" in boot else sync(binary, root, table, args.memory_limit_gb, metadata)
                        rows.append((n, layout, made, name, boot, one))
    finally:
        moto.terminate()
    print(report(rows, args))
    if fanned:
        print()
        print(fan_out_report(fanned))


def summary(steps: dict) -> dict:
    """Seconds and peak RSS of a fan-out: plan, the slowest and the largest part, their sum,
    finish, and the wall time with one worker per part (plan + slowest part + finish)."""
    if any("failed" in s for s in [steps["plan"], *steps.get("parts", []), steps.get("finish", {})]):
        failed = [s["failed"] for s in [steps["plan"], *steps.get("parts", []), steps.get("finish", {})]
                  if "failed" in s]
        return {"failed": failed[0]}
    parts = steps["parts"]
    return {
        "parts": len(parts),
        "plan_s": steps["plan"]["seconds"], "plan_mb": steps["plan"]["peak_rss_mb"],
        "slowest_part_s": max(p["seconds"] for p in parts), "parts_sum_s": sum(p["seconds"] for p in parts),
        "largest_part_mb": max(p["peak_rss_mb"] or 0 for p in parts),
        "finish_s": steps["finish"]["seconds"], "finish_mb": steps["finish"]["peak_rss_mb"],
        "wall_s": steps["plan"]["seconds"] + max(p["seconds"] for p in parts) + steps["finish"]["seconds"],
        "files": steps["finish"]["report"]["added_files"],
    }


def fan_out_report(fanned) -> str:
    lines = ["bootstrap in parts (`lakemirror fan-out`; parts run one after another here, each as its own "
             "process: wall = plan + slowest part + finish, as with one worker per part)", "",
             "| files | layout | parts | single s | single MB | plan s | plan MB | slowest part s | largest part MB "
             "| parts sum s | finish s | finish MB | wall s | wall vs single |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, layout, single, steps in fanned:
        s = summary(steps)
        if "failed" in s:
            lines.append(f"| {n:,} | {layout} | - | failed: {s['failed'][:80]} |")
            continue
        assert s["files"] == n, f"the fan-out mirrored {s['files']} files, not {n}"
        lines.append(
            f"| {n:,} | {layout} | {s['parts']} | {single['seconds']:.1f} | {single['peak_rss_mb']:.0f} | "
            f"{s['plan_s']:.1f} | {s['plan_mb']:.0f} | {s['slowest_part_s']:.1f} | {s['largest_part_mb']:.0f} | "
            f"{s['parts_sum_s']:.1f} | {s['finish_s']:.1f} | {s['finish_mb']:.0f} | {s['wall_s']:.1f} | "
            f"{s['wall_s'] / single['seconds']:.2f}x |")
    return "\n".join(lines)


def report(rows, args) -> str:
    memory = f"MEMORY_SIZE={args.memory_size}" if args.memory_size else "no MEMORY_SIZE"
    lines = [f"bootstrap at scale ({common.machine()}; local file system + moto Glue; {common.today_and_commit()}; "
             f"binary {args.binary}; {args.parts} parts / sidecars; {memory})", "",
             "| files | layout | build | log MB | bootstrap s | peak RSS MB | RSS KB per file | requests | "
             "one-commit sync s | its requests | target |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for n, layout, made, name, boot, one in rows:
        target = TARGETS.get(n)
        rss = boot.get("peak_rss_mb")
        if "failed" in boot:
            verdict = f"failed: {boot['failed'][:80]}"
        elif target:
            fast = boot["seconds"] <= target["seconds"]
            small = rss is not None and rss <= target["rss_mb"]
            verdict = (f"<= {target['rss_mb']} MB: {'met' if small else 'NOT met'}; "
                       f"<= {target['seconds']} s: {'met' if fast else 'NOT met'}")
        else:
            verdict = "-"
        rss_text = "-" if rss is None else f"{rss:.0f}"
        per_file = "-" if rss is None else f"{rss * 1024 / n:.2f}"
        synced = one is not None and "failed" not in one
        one_seconds = f"{one['seconds']:.2f}" if synced else "-"
        one_requests = one["requests"] if synced else "-"
        lines.append(
            f"| {n:,} | {layout} | {name} | {made['log_mb']:.0f} | {boot['seconds']:.1f} | {rss_text} | {per_file} | "
            f"{boot.get('requests', '-')} | {one_seconds} | {one_requests} | {verdict} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
