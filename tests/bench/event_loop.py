"""Event-driven figures (a benchmark, not a test): what a user of the deployed function sees.

1. Event-to-visible latency through the local event loop (moto S3 notification -> SQS ->
   poller -> glue-sync under `cargo lambda watch` -> Glue): one Delta commit at a time with
   delta-rs, timed from the commit returning to the Glue table showing that version.
   Baseline, measured in the same run: the same one-commit sync run directly with
   `lakemirror glue-sync` (process start to report), so the ratio is the event path's cost.
2. Function init: process start -> the function asks the Lambda runtime API for its first
   event (a minimal runtime API answers here), for the release build of glue-sync.
   Baseline: start-to-exit of `lakemirror --version` (a process doing nothing).
3. The arm64 deployment package: the `bootstrap` that `sam build` puts in
   `~/.cache/lakemirror/sam-build/GlueSyncFunction` (CI's build dir), zipped as `sam deploy` does.

    $(tests/rig/venv.sh)/bin/python tests/bench/event_loop.py [COMMITS]   (default 20)

Needs release builds: `cargo build --release --bins`, and `sam build` (`.ci/run` does it).
"""

import http.server
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "localstack"))
sys.path.insert(0, str(REPO / "tests"))
from event_loop import EventLoop, LoopSettings, _at_least, glue_delta_version, wait_until  # noqa: E402
from rig import judge  # noqa: E402

TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
RELEASE = TARGET / "release"


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def latency(commits: int) -> dict:
    settings = LoopSettings(bucket=f"bench-{uuid.uuid4().hex[:8]}", glue_database="bench",
                            batching_window_seconds=0, max_concurrency=1, release=True,
                            log_dir=Path("/tmp/lakemirror-bench-loop"))
    with EventLoop(settings) as loop:
        options = judge.delta_storage_options()
        uri = f"s3://{settings.bucket}/warehouse/events"
        seen = []
        for v in range(commits + 1):
            write_deltalake(uri, pa.table({"id": pa.array(range(v * 100, v * 100 + 100), pa.int64())}),
                            mode="append", storage_options=options)
            committed = time.perf_counter()
            wait_until(lambda: _at_least(glue_delta_version("bench", "events"), v), 120,
                       f"Delta version {v} in Glue", interval_s=0.01)
            if v > 0:  # version 0 includes the function's first compile check and cold start
                seen.append((time.perf_counter() - committed) * 1000)
        # Baseline: one more commit, synced directly by the CLI (no events involved).
        direct_uri = f"s3://{settings.bucket}/warehouse/direct"
        runs = []
        for v in range(min(commits, 10) + 1):
            write_deltalake(direct_uri, pa.table({"id": pa.array([v], pa.int64())}), mode="append",
                            storage_options=options)
            started = time.perf_counter()
            subprocess.run([str(RELEASE / "lakemirror"), "glue-sync", "--table-uri", direct_uri,
                            "--glue-database", "bench"], check=True, capture_output=True)
            if v > 0:
                runs.append((time.perf_counter() - started) * 1000)
    return {"latency_ms": seen, "direct_ms": runs}


class RuntimeApi(http.server.BaseHTTPRequestHandler):
    """Just enough of the Lambda runtime API to see when the function is ready."""
    first_next = None

    def do_GET(self):
        if self.path.endswith("/runtime/invocation/next") and RuntimeApi.first_next is None:
            RuntimeApi.first_next = time.perf_counter()
        self.send_response(503)
        self.end_headers()

    def log_message(self, *args):
        pass


def init_time(runs: int = 15) -> dict:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RuntimeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{server.server_port}",
           "AWS_LAMBDA_FUNCTION_NAME": "glue-sync", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
           "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_LAMBDA_LOG_FORMAT": "JSON",
           "GLUE_DATABASE": "bench", "DEAD_LETTER_QUEUE_URL": "http://127.0.0.1:1/q",
           "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    inits, idle = [], []
    for _ in range(runs):
        RuntimeApi.first_next = None
        started = time.perf_counter()
        proc = subprocess.Popen([str(RELEASE / "glue-sync")], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        wait_until(lambda: RuntimeApi.first_next, 30, "the function to ask for its first event", interval_s=0.001)
        inits.append((RuntimeApi.first_next - started) * 1000)
        proc.kill()
        proc.wait()
        started = time.perf_counter()
        subprocess.run([str(RELEASE / "lakemirror"), "--version"], check=True, capture_output=True)
        idle.append((time.perf_counter() - started) * 1000)
    server.shutdown()
    return {"init_ms": inits, "idle_ms": idle}


def arm64_package() -> tuple[Path, int, int]:
    """(bootstrap, its size, the size of its deflate zip as uploaded by sam deploy)."""
    import zipfile

    cache = Path(os.environ.get("LAKEMIRROR_CACHE", Path.home() / ".cache" / "lakemirror"))
    bootstrap = cache / "sam-build" / "GlueSyncFunction" / "bootstrap"
    if not bootstrap.exists():
        sys.exit(f"{bootstrap} missing: run `sam build --build-dir {cache / 'sam-build'}` (see .ci/run)")
    zipped = Path("/tmp/lakemirror-bench-bootstrap.zip")
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.write(bootstrap, "bootstrap")
    return bootstrap, bootstrap.stat().st_size, zipped.stat().st_size


def main():
    commits = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    for binary in ("lakemirror", "glue-sync"):
        if not (RELEASE / binary).exists():
            sys.exit(f"{RELEASE / binary} missing: run `cargo build --release --bins` first")
    bootstrap, bootstrap_bytes, zip_bytes = arm64_package()
    lat = latency(commits)
    init = init_time()
    p50, p95 = percentile(lat["latency_ms"], 50), percentile(lat["latency_ms"], 95)
    direct = statistics.median(lat["direct_ms"])
    init_p50, idle_p50 = statistics.median(init["init_ms"]), statistics.median(init["idle_ms"])
    print("| measure | value | baseline (same run) | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| event-to-visible p50, {commits} commits | {p50:.0f} ms | direct `glue-sync` {direct:.0f} ms | {p50 / direct:.2f}x |")
    print(f"| event-to-visible p95 | {p95:.0f} ms | direct `glue-sync` {direct:.0f} ms | {p95 / direct:.2f}x |")
    print(f"| function init (start -> ready), p50 of {len(init['init_ms'])} | {init_p50:.1f} ms "
          f"| `lakemirror --version` {idle_p50:.1f} ms | {init_p50 / idle_p50:.2f}x |")
    print(f"| arm64 package: zip (bootstrap) | {zip_bytes / 1024 / 1024:.1f} MiB ({bootstrap_bytes / 1024 / 1024:.1f} MiB) | | |")
    print(json.dumps({"latency_ms": lat, "init": init, "zip_bytes": zip_bytes, "bootstrap": str(bootstrap)}),
          file=sys.stderr)


if __name__ == "__main__":
    main()
