"""The event-driven deployment, locally and without Docker.

    S3 (moto)  --ObjectCreated *.json-->  SQS queue (redrive to a DLQ after N receives)
               --poller, like Lambda's SQS event source-->  glue-sync under `cargo lambda watch`
               --> Iceberg table in Glue (moto)

The poller does what Lambda's SQS event source mapping does: it collects up to
`--batch-size` messages within `--batching-window-seconds`, invokes the function with an SQS
event, deletes the messages the function did not list in `batchItemFailures`, and leaves the
others to reappear after the queue's visibility timeout. SQS itself moves a message to the
dead-letter queue once it was received `--max-receive-count` times. Several pollers invoke
in parallel (`--max-concurrency`), so ordering and single concurrency are never assumed.

Run `localstack/event-loop.sh --help` for the command line; tests import `EventLoop`.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import boto3.session

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from rig import local_aws  # noqa: E402

FUNCTION = "glue-sync"


@dataclass
class LoopSettings:
    bucket: str = "lakemirror-demo"
    glue_database: str = "lakemirror_demo"
    queue_name: str = "lakemirror-sync"
    batch_size: int = 10
    batching_window_seconds: float = 1.0
    max_concurrency: int = 2
    max_receive_count: int = 3
    # Lambda requires the queue's visibility timeout to be at least the function timeout;
    # a shorter one hands in-flight messages to a second poller.
    visibility_timeout_seconds: int = 60
    table_prefixes: str = ""
    invoke_port: int = 0
    release: bool = False
    endpoint: str | None = None
    # Which function the queue feeds (glue-sync, or lakebase-sync / unity-register as their
    # own queues feed them in the stack), and its environment beyond the AWS one.
    function: str = FUNCTION
    function_env: dict = field(default_factory=dict)
    log_dir: Path = field(default_factory=lambda: Path(os.environ.get("TMPDIR", "/tmp")) / "lakemirror-event-loop")


@dataclass
class PollerStats:
    invocations: int = 0
    delivered: int = 0
    deleted: int = 0
    failed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, delivered: int, deleted: int, failed: int) -> None:
        with self.lock:
            self.invocations += 1
            self.delivered += delivered
            self.deleted += deleted
            self.failed += failed


class EventLoop:
    """Starts moto (unless given an endpoint), the queues and notifications, the function
    under `cargo lambda watch`, and the pollers. Use as a context manager."""

    def __init__(self, settings: LoopSettings):
        self.settings = settings
        self.stats = PollerStats()
        self._procs: list[subprocess.Popen] = []
        self._logs: list = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.endpoint = settings.endpoint
        self.queue_url = ""
        self.queue_arn = ""
        self.dead_letter_queue_url = ""

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> "EventLoop":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.settings.log_dir.mkdir(parents=True, exist_ok=True)
        if self.endpoint is None:
            self.endpoint = self._start_moto()
        self._aws_env()
        self._create_resources()
        self._start_function()
        self._warm_up()
        for n in range(self.settings.max_concurrency):
            t = threading.Thread(target=self._poll, name=f"poller-{n}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        for proc in reversed(self._procs):
            # The whole process group: cargo lambda's children outlive a dead leader.
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=20)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._procs.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()

    # -- pieces ------------------------------------------------------------------------
    def _spawn(self, args: list[str], log_name: str, env: dict | None = None) -> subprocess.Popen:
        log = open(self.settings.log_dir / log_name, "wb")
        self._logs.append(log)
        proc = subprocess.Popen(args, stdout=log, stderr=log, env=env, start_new_session=True)
        self._procs.append(proc)
        return proc

    def _start_moto(self) -> str:
        log = open(self.settings.log_dir / "moto.log", "wb")
        self._logs.append(log)
        proc, line = local_aws.start_moto(stderr=log, start_new_session=True)
        self._procs.append(proc)
        if not line.startswith("ready "):
            raise RuntimeError(f"moto did not start; see {self.settings.log_dir / 'moto.log'}")
        return line.split()[1]

    def aws_env(self) -> dict[str, str]:
        """Environment for anything talking to this loop's AWS endpoint."""
        return local_aws.aws_env(self.endpoint or "")

    def _aws_env(self) -> None:
        os.environ.update(self.aws_env())
        for name in local_aws.LEAKY_VARIABLES:
            os.environ.pop(name, None)

    def _create_resources(self) -> None:
        s = self.settings
        s3, sqs, glue = boto3.client("s3"), boto3.client("sqs"), boto3.client("glue")
        if s.bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
            s3.create_bucket(Bucket=s.bucket)
        try:
            glue.create_database(DatabaseInput={"Name": s.glue_database})
        except glue.exceptions.AlreadyExistsException:
            pass
        self.dead_letter_queue_url = sqs.create_queue(QueueName=f"{s.queue_name}-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=self.dead_letter_queue_url,
                                           AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.queue_url = sqs.create_queue(QueueName=s.queue_name, Attributes={
            "VisibilityTimeout": str(s.visibility_timeout_seconds),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                         "maxReceiveCount": str(s.max_receive_count)}),
        })["QueueUrl"]
        self.queue_arn = sqs.get_queue_attributes(QueueUrl=self.queue_url,
                                                  AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        # S3 filters know only prefix and suffix, and `_delta_log/` sits mid-key: every .json
        # goes to the queue and the function ignores what is not a Delta commit.
        s3.put_bucket_notification_configuration(Bucket=s.bucket, NotificationConfiguration={
            "QueueConfigurations": [{
                "QueueArn": self.queue_arn,
                "Events": ["s3:ObjectCreated:*"],
                "Filter": {"Key": {"FilterRules": [{"Name": "suffix", "Value": ".json"}]}},
            }]})

    def _start_function(self) -> None:
        s = self.settings
        beside_python = Path(sys.executable).parent / "cargo-lambda"
        cargo_lambda = shutil.which("cargo-lambda") or (str(beside_python) if beside_python.exists() else None)
        if cargo_lambda is None:
            raise RuntimeError("cargo-lambda is not installed: pip install cargo-lambda (tests/requirements.txt has it)")
        port = s.invoke_port or _free_port()
        self.invoke_url = f"http://127.0.0.1:{port}/2015-03-31/functions/{s.function}/invocations"
        env = dict(os.environ)
        env.update(self.aws_env())
        env.update({
            "GLUE_DATABASE": s.glue_database,
            "TABLE_PREFIXES": s.table_prefixes,
            "DEAD_LETTER_QUEUE_URL": self.dead_letter_queue_url,
            "AWS_LAMBDA_LOG_FORMAT": "JSON",
            "RUST_LOG": env.get("RUST_LOG", "info"),
            **s.function_env,
        })
        self.function_log = s.log_dir / f"{s.function}.log"
        # Build first, in the open: `cargo lambda watch` compiles inside the first invocation,
        # and a cold build (about 20 minutes here) outlasts any invocation timeout. The watch
        # then finds the function built. `--bin` without `--package`: the workspace's features
        # unify as in `cargo build --workspace --bins` (tests/run.sh's first build), so nothing
        # is built again; a build of the one package would build the AWS SDK and more a second
        # time (and a build with the tests' features would too, were they not the binaries'
        # features: tests/acceptance/test_layout.py holds that).
        print(f"event-loop: building {s.function} ({'release' if s.release else 'debug'}; cargo's progress "
              f"below, about 20 minutes the first time)", file=sys.stderr, flush=True)
        build = subprocess.run(["cargo", "build", "--bin", s.function,
                                *(["--release"] if s.release else [])], env=env)
        if build.returncode != 0:
            raise RuntimeError(f"cargo build of {s.function} failed (exit {build.returncode}); see above")
        print(f"event-loop: {s.function} built; starting it under cargo lambda watch", file=sys.stderr, flush=True)
        self._spawn([cargo_lambda, "lambda", "watch", "--ignore-changes", "--quiet",
                     "--invoke-address", "127.0.0.1", "--invoke-port", str(port),
                     "--concurrency", str(s.max_concurrency), "--timeout", "600",
                     "--bin", s.function, *(["--release"] if s.release else [])],
                    f"{s.function}.log", env=env)
        _wait_for_port(port, self._procs[-1], self.function_log)

    def _warm_up(self) -> None:
        """One empty invocation, so the first compile and cold start happen before any
        message is received (and cannot outlast its visibility timeout)."""
        if self._invoke({"Records": []}) is None:
            raise RuntimeError(f"{self.settings.function} did not answer its warm-up invocation; see {self.function_log}")

    # -- the SQS event source ------------------------------------------------------------
    def _poll(self) -> None:
        # boto3's default session is not thread-safe: one session per poller.
        sqs = boto3.session.Session().client("sqs")
        while not self._stop.is_set():
            try:
                self._poll_once(sqs)
            except Exception as e:  # a poller must survive a hiccup, as Lambda's does
                print(f"event-loop: poller error {e!r}; continuing", file=sys.stderr)

    def _poll_once(self, sqs) -> None:
        s = self.settings
        batch = self._collect(sqs)
        if not batch:
            return
        event = {"Records": [self._record(m) for m in batch]}
        failed_ids = self._invoke(event)
        every = {m["MessageId"] for m in batch}
        if failed_ids is None or not failed_ids <= every:
            # Lambda fails the whole batch when the invocation fails or the response names
            # a message that is not in it.
            failed_ids = every
        done = [m for m in batch if m["MessageId"] not in failed_ids]
        for i in range(0, len(done), 10):
            result = sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(done[i:i + 10])])
            for failure in result.get("Failed", []):
                print(f"event-loop: delete failed {failure}; the message will be redelivered", file=sys.stderr)
        self.stats.add(len(batch), len(done), len(batch) - len(done))
        if failed_ids:
            print(f"event-loop: {len(failed_ids)} message(s) failed; SQS redelivers them after "
                  f"{s.visibility_timeout_seconds}s (dead-letter queue after {s.max_receive_count} receives)",
                  file=sys.stderr)

    def _collect(self, sqs) -> list[dict]:
        s = self.settings
        batch: list[dict] = []
        deadline = None
        while len(batch) < s.batch_size and not self._stop.is_set():
            wait = 1 if deadline is None else max(0, min(1, int(deadline - time.monotonic() + 0.999)))
            got = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=min(10, s.batch_size - len(batch)),
                                      WaitTimeSeconds=wait, AttributeNames=["All"]).get("Messages", [])
            batch.extend(got)
            if batch and deadline is None:
                deadline = time.monotonic() + s.batching_window_seconds
            if deadline is None:
                continue
            if time.monotonic() >= deadline or not got:
                break
        return batch

    def _record(self, m: dict) -> dict:
        return {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m.get("Attributes", {}), "messageAttributes": {}, "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs", "eventSourceARN": self.queue_arn, "awsRegion": "us-east-1"}

    def _invoke(self, event: dict) -> set[str] | None:
        """The message IDs the function asks to have redelivered (its batchItemFailures),
        or None when the invocation itself failed."""
        request = urllib.request.Request(self.invoke_url, data=json.dumps(event).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                payload = json.loads(response.read() or b"null")
        except (urllib.error.URLError, OSError, ValueError) as e:
            print(f"event-loop: invocation failed ({e}); the whole batch will be redelivered", file=sys.stderr)
            return None
        if not isinstance(payload, dict) or "errorType" in payload or "errorMessage" in payload:
            print(f"event-loop: function error {payload!r}; the whole batch will be redelivered", file=sys.stderr)
            return None
        return {f.get("itemIdentifier") for f in payload.get("batchItemFailures", [])}

    def queue_depths(self) -> tuple[int, int]:
        """(messages in the queue incl. in flight, messages in the dead-letter queue)."""
        sqs = boto3.session.Session().client("sqs")

        def depth(url):
            a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
            return int(a["ApproximateNumberOfMessages"]) + int(a["ApproximateNumberOfMessagesNotVisible"])

        return depth(self.queue_url), depth(self.dead_letter_queue_url)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    """Blocks until `cargo lambda watch` accepts connections (it binds before compiling)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"cargo lambda watch exited; see {log}:\n{log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            select.select([], [], [], 0.1)
    raise RuntimeError(f"cargo lambda watch did not listen on port {port} within {timeout_s}s; see {log}")


def wait_until(condition, timeout_s: float, what: str, interval_s: float = 0.2):
    """Polls `condition` until it returns a truthy value (returned) or raises TimeoutError."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        select.select([], [], [], interval_s)


def glue_delta_version(database: str, table: str) -> int | None:
    """The Delta version the Glue table's current Iceberg snapshot mirrors, or None."""
    glue = boto3.client("glue")
    try:
        params = glue.get_table(DatabaseName=database, Name=table)["Table"].get("Parameters", {})
    except glue.exceptions.EntityNotFoundException:
        return None
    location = params.get("metadata_location", "")
    bucket, key = location.removeprefix("s3://").split("/", 1)
    metadata = json.loads(boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())
    current = metadata.get("current-snapshot-id")
    for snap in metadata.get("snapshots", []):
        if snap["snapshot-id"] == current:
            return int(snap["summary"]["delta.version"])
    return None


def _at_least(version: int | None, wanted: int) -> bool:
    return version is not None and version >= wanted


def demo(loop: EventLoop, commits: int) -> None:
    """Writes Delta commits with delta-rs and shows the Iceberg table following by itself."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from rig import judge

    s = loop.settings
    uri = f"s3://{s.bucket}/warehouse/events"
    options = judge.delta_storage_options()
    for v in range(commits):
        write_deltalake(uri, pa.table({"id": pa.array([v * 10 + i for i in range(10)], pa.int64()),
                                       "commit": pa.array([v] * 10, pa.int64())}),
                        mode="append", storage_options=options)
        print(f"delta-rs committed version {v}")
    wait_until(lambda: _at_least(glue_delta_version(s.glue_database, "events"), commits - 1),
               300, f"{s.glue_database}.events to reach Delta version {commits - 1}")
    rows = judge.iceberg_rows_pyiceberg(s.glue_database, "events")
    expected = judge.delta_rows(uri, options)
    print(f"Iceberg table {s.glue_database}.events follows by itself: Delta version {commits - 1}, "
          f"{len(rows)} rows read back by pyiceberg, {len(expected)} by delta-rs")
    judge.assert_same_rows(expected, rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="localstack/event-loop.sh",
        description="Run lakemirror's event-driven deployment locally without Docker: moto S3/SQS/Glue, "
                    "S3 -> SQS notifications for _delta_log commits, the glue-sync function under "
                    "`cargo lambda watch`, and a poller that feeds it like Lambda's SQS event source.")
    d = LoopSettings()
    p.add_argument("--endpoint", help="use this AWS endpoint (a running moto) instead of starting one")
    p.add_argument("--bucket", default=d.bucket, help="data bucket (created if missing) [%(default)s]")
    p.add_argument("--glue-database", default=d.glue_database, help="GLUE_DATABASE of the function [%(default)s]")
    p.add_argument("--table-prefixes", default=d.table_prefixes, help="TABLE_PREFIXES of the function [all tables]")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="BatchSize [%(default)s]")
    p.add_argument("--batching-window-seconds", type=float, default=d.batching_window_seconds,
                   help="BatchingWindowSeconds [%(default)s]")
    p.add_argument("--max-concurrency", type=int, default=d.max_concurrency, help="MaxConcurrency [%(default)s]")
    p.add_argument("--max-receive-count", type=int, default=d.max_receive_count, help="MaxReceiveCount [%(default)s]")
    p.add_argument("--visibility-timeout-seconds", type=int, default=d.visibility_timeout_seconds,
                   help="redelivery delay after a failure [%(default)s]")
    p.add_argument("--demo", type=int, metavar="COMMITS", default=0,
                   help="write COMMITS Delta commits with delta-rs, wait for the mirror, read it back, exit")
    a = p.parse_args(argv)
    settings = LoopSettings(bucket=a.bucket, glue_database=a.glue_database, table_prefixes=a.table_prefixes,
                            batch_size=a.batch_size, batching_window_seconds=a.batching_window_seconds,
                            max_concurrency=a.max_concurrency, max_receive_count=a.max_receive_count,
                            visibility_timeout_seconds=a.visibility_timeout_seconds, endpoint=a.endpoint)
    with EventLoop(settings) as loop:
        print(f"event loop running: endpoint {loop.endpoint}, bucket s3://{settings.bucket}, "
              f"Glue database {settings.glue_database}\n  queue {loop.queue_url}\n  dead letters "
              f"{loop.dead_letter_queue_url}\n  function log {loop.function_log}", flush=True)
        if a.demo:
            demo(loop, a.demo)
            return 0
        print("write Delta tables under s3://%s/ (AWS_ENDPOINT_URL=%s); Ctrl-C stops" % (settings.bucket, loop.endpoint),
              flush=True)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
