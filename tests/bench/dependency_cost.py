"""What the design card's packages would cost lakemirror (a benchmark, not a test): the figures
behind README's "Dependencies" table, measured in one run on this machine.

Three small programs in `tests/bench/dependency_cost/` (their own workspace, built into the
cache, never into the product), each doing one job the way lakemirror does it or the way the
package would:

- `s3-object-store`: S3 GETs as lakemirror does them (object_store, AWS SDK configuration);
  the baseline.
- `s3-sdk`: the same GETs with `aws-sdk-s3`.
- `kernel`: the Delta side of a one-commit sync on `delta_kernel` 0.30: the snapshot the last
  sync knew, updated to the version an event announced.

Measured:

1. Release build time, cold, in that order: the baseline from nothing, then what `s3-sdk` and
   `kernel` add on top (their marginal cost: crates already built are reused), and the size of
   each binary.
2. On a local moto S3 behind a counting proxy: wall time and requests of 200 GETs of a 1 KiB
   object, object_store vs aws-sdk-s3 (median of 3, alternating).
3. The Delta-side requests of one commit on a table with 20 commits and a checkpoint at 10:
   lakemirror's glue-sync handler on the commit's S3 notification (requests under
   `_delta_log`) vs delta_kernel's snapshot update (all its requests are under `_delta_log`).
4. Dependency resolution only (nothing built): the crates `deltalake` 1.1 and
   `delta_kernel_default_engine` 0.30 would add to lakemirror's tree, and how many of those are
   second versions of crates it has (arrow, parquet, object_store).

    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/dependency_cost.py

Step 3 needs a lakemirror binary (`--binary`, $LAKEMIRROR_BIN, else the release build; it
counts requests, so a debug build does as well).
About 25 minutes on 2 cores when cold (step 1 dominates); `--keep-target` reuses the previous
run's builds (times are then not cold and not printed).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import boto3
import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from rig import local_aws  # noqa: E402
from rig.fault_proxy import FaultProxy  # noqa: E402

import common  # noqa: E402

WORKSPACE = Path(__file__).resolve().parent / "dependency_cost"
CACHE = Path(os.environ.get("LAKEMIRROR_CACHE", Path.home() / ".cache" / "lakemirror"))
TARGET = CACHE / "depcost-target"
PROGRAMS = ["s3-object-store", "s3-sdk", "kernel"]


def build_times(keep: bool) -> dict[str, float | None]:
    if not keep and TARGET.exists():
        shutil.rmtree(TARGET)
    env = {**os.environ, "CARGO_TARGET_DIR": str(TARGET)}
    times = {}
    for program in PROGRAMS:
        started = time.perf_counter()
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", program], cwd=WORKSPACE, env=env, check=True)
        times[program] = None if keep else time.perf_counter() - started
        print(f"  built {program}", file=sys.stderr)
    return times


def binary(program: str) -> Path:
    return TARGET / "release" / program


def gets(proxy: FaultProxy, env: dict, program: str, bucket: str, key: str, count: int) -> tuple[float, int]:
    before = proxy.requests
    started = time.perf_counter()
    subprocess.run([str(binary(program)), bucket, key, str(count)], env=env, check=True, capture_output=True)
    return (time.perf_counter() - started) * 1000, proxy.requests - before


def delta_table(uri: str, storage_options: dict) -> None:
    from deltalake import DeltaTable, write_deltalake
    for n in range(20):
        write_deltalake(uri, pa.table({"id": pa.array([n], pa.int64())}), mode="append",
                        storage_options=storage_options)
        if n == 10:
            DeltaTable(uri, storage_options=storage_options).create_checkpoint()


def delta_log_requests(proxy: FaultProxy, run) -> tuple[int, list[str]]:
    start = len(proxy.seen)
    run()
    seen = [f"{m} {urllib.parse.unquote(p)}" for m, p in proxy.seen[start:] if "_delta_log" in urllib.parse.unquote(p)]
    return len(seen), seen


def one_commit_requests(proxy: FaultProxy, env: dict, lakemirror: str, bucket: str, root: str,
                        work: Path) -> dict:
    uri = f"s3://{bucket}/{root}"
    # lakemirror: mirrored up to 18, then the S3 notification of commit 19.
    subprocess.run([lakemirror, "glue-sync", "--table-uri", uri, "--glue-database", "depcost", "--to-version", "18"],
                   env=env, check=True, capture_output=True)
    event = work / "event.json"
    event.write_text(json.dumps({"Records": [{
        "eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "eventTime": "2026-12-01T00:00:00.000Z",
        "s3": {"bucket": {"name": bucket}, "object": {"key": f"{root}/_delta_log/{19:020}.json"}}}]}))
    ours, ours_seen = delta_log_requests(proxy, lambda: subprocess.run(
        [lakemirror, "invoke", "glue-sync", "--event", str(event), "--glue-database", "depcost"],
        env=env, check=True, capture_output=True))
    # delta_kernel: the snapshot at 18 (what the last sync knew), then updated to 19.
    kernel_uri = uri + "/"
    cold, _ = delta_log_requests(proxy, lambda: subprocess.run(
        [str(binary("kernel")), kernel_uri, "18", "19", "--known-only"], env=env, check=True, capture_output=True))
    both, kernel_seen = delta_log_requests(proxy, lambda: subprocess.run(
        [str(binary("kernel")), kernel_uri, "18", "19"], env=env, check=True, capture_output=True))
    return {"lakemirror": ours, "lakemirror_seen": ours_seen, "kernel_cold": cold, "kernel_update": both - cold,
            "kernel_seen": kernel_seen[-(both - cold):] if both > cold else []}


def added_crates(dependency: str) -> dict:
    """Resolution only: the packages `dependency` adds to lakemirror's tree, and how many of
    them are a second version of a package lakemirror already has."""
    def packages(lock: Path) -> set[tuple[str, str]]:
        out, name = set(), None
        for line in lock.read_text().splitlines():
            if line.startswith("name = "):
                name = line.split('"')[1]
            elif line.startswith("version = ") and name:
                out.add((name, line.split('"')[1]))
                name = None
        return out

    ours = packages(REPO / "Cargo.lock")
    with tempfile.TemporaryDirectory() as tmp:
        crate = Path(tmp)
        (crate / "src").mkdir()
        (crate / "src" / "lib.rs").write_text("")
        shutil.copy(REPO / "Cargo.lock", crate / "Cargo.lock")
        (crate / "Cargo.toml").write_text(
            '[package]\nname = "probe"\nversion = "0.0.0"\nedition = "2024"\n[workspace]\n[dependencies]\n'
            f'lakemirror-cli = {{ path = "{REPO / "shared" / "cli"}" }}\n{dependency}\n')
        subprocess.run(["cargo", "update", "--quiet", "--workspace"], cwd=crate, check=True)
        theirs = packages(crate / "Cargo.lock")
    added = theirs - ours - {("probe", "0.0.0")}
    names = {n for n, _ in ours}
    second = sorted(f"{n} {v}" for n, v in added if n in names)
    return {"added": len(added), "second_versions": len(second),
            "examples": [s for s in second if s.split()[0] in ("arrow-array", "parquet", "object_store")]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep-target", action="store_true", help="reuse the previous run's builds")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)

    print("1. release builds (cold)", file=sys.stderr)
    times = build_times(args.keep_target)
    sizes = {p: binary(p).stat().st_size for p in PROGRAMS}

    print("2-3. on moto", file=sys.stderr)
    moto, line = local_aws.start_moto(stderr=subprocess.DEVNULL)
    if not line.startswith("ready "):
        sys.exit(f"moto did not start: {line!r}")
    try:
        with FaultProxy(line.split()[1], rate=0) as proxy, tempfile.TemporaryDirectory() as work:
            env = {**os.environ, **local_aws.aws_env(proxy.url)}
            os.environ.update(env)
            s3 = boto3.client("s3")
            s3.create_bucket(Bucket="depcost")
            boto3.client("glue").create_database(DatabaseInput={"Name": "depcost"})
            s3.put_object(Bucket="depcost", Key="object", Body=b"x" * 1024)
            runs = {"s3-object-store": [], "s3-sdk": []}
            for _ in range(3):
                for program in runs:
                    runs[program].append(gets(proxy, env, program, "depcost", "object", 200))
            storage_options = {"AWS_ENDPOINT_URL": proxy.url, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
                               "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                               "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
            delta_table("s3://depcost/orders", storage_options)
            commit = one_commit_requests(proxy, env, args.binary, "depcost", "orders", Path(work))
    finally:
        moto.terminate()

    print("4. resolution", file=sys.stderr)
    resolved = {
        "deltalake 1.1": added_crates('deltalake = { version = "1.1", default-features = false, features = ["s3"] }'),
        "delta_kernel_default_engine 0.30": added_crates('delta_kernel_default_engine = "0.30.1"'),
    }

    base = PROGRAMS[0]
    print(f"\nDependency cost ({common.machine()}; {common.today_and_commit()})\n")
    print("| program | release build s | binary MiB | vs baseline |")
    print("|---|---:|---:|---:|")
    for p in PROGRAMS:
        built = "reused" if times[p] is None else f"{times[p]:.0f}" + (" (added)" if p != base else "")
        print(f"| {p} | {built} | {sizes[p] / 2**20:.1f} | {sizes[p] / sizes[base]:.2f}x |")
    print("\n| 200 GETs of 1 KiB (median of 3) | ms | requests |")
    print("|---|---:|---:|")
    for program, values in runs.items():
        ms = statistics.median(v[0] for v in values)
        print(f"| {program} | {ms:.0f} | {values[0][1]} |")
    ratio = statistics.median(v[0] for v in runs["s3-sdk"]) / statistics.median(v[0] for v in runs["s3-object-store"])
    print(f"\naws-sdk-s3 / object_store time: {ratio:.2f}x")
    print("\nOne commit (19) of a table with a checkpoint at 10, Delta log requests:")
    print(f"- lakemirror glue-sync handler: {commit['lakemirror']}  ({'; '.join(commit['lakemirror_seen'])})")
    print(f"- delta_kernel snapshot update 18 -> 19: {commit['kernel_update']}  ({'; '.join(commit['kernel_seen'])})")
    print(f"- delta_kernel cold snapshot at 18 (a Lambda without a warm snapshot): {commit['kernel_cold']}")
    print("\nAdded to lakemirror's dependency tree (resolution only):")
    for name, r in resolved.items():
        print(f"- {name}: {r['added']} packages, {r['second_versions']} of them second versions "
              f"of packages lakemirror has ({', '.join(r['examples'])})")


if __name__ == "__main__":
    main()
