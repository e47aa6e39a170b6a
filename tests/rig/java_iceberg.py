"""Java Iceberg as the third judge of a mirror, beside pyiceberg and DuckDB.

Athena, EMR, Glue ETL, Spark and Trino read Iceberg through Apache Iceberg's Java library,
which is stricter than pyiceberg and DuckDB exactly where a Delta -> Iceberg mirror is
delicate (name mappings, field IDs of nested fields). The kit in ../shared/tools/java-iceberg
(LAKEMIRROR_JAVA_ICEBERG) makes a venv with Java Iceberg 1.10.2 on Spark 3.5 in local mode;
tests/rig/java_reader.py runs in it as a service, started once per test session.

The kit reads only file:// tables (it has no S3 FileIO), so the tests that Java judges mirror
a local copy of their Delta table (lakemirror takes file:// table URIs; Glue is still moto's).
"""

import json
import os
import select
import subprocess
import tempfile
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from rig import judge

REPO = Path(__file__).resolve().parent.parent.parent
START_TIMEOUT_S = 180
READ_TIMEOUT_S = 300


def kit_dir() -> Path:
    return Path(os.environ.get("LAKEMIRROR_JAVA_ICEBERG", REPO.parent / "shared" / "tools" / "java-iceberg"))


def venv() -> Path:
    """The kit's venv: LAKEMIRROR_JAVA_ICEBERG_VENV (tests/run.sh sets it), else setup.sh's."""
    if os.environ.get("LAKEMIRROR_JAVA_ICEBERG_VENV"):
        return Path(os.environ["LAKEMIRROR_JAVA_ICEBERG_VENV"])
    setup = kit_dir() / "setup.sh"
    if not setup.is_file():
        raise RuntimeError(f"the Java Iceberg kit is missing at {kit_dir()}; set LAKEMIRROR_JAVA_ICEBERG")
    out = subprocess.run([str(setup)], check=True, capture_output=True, text=True).stdout
    return Path(out.strip().splitlines()[-1])


class JavaIceberg:
    """A running Java Iceberg reader. `rows()` returns rows like the other judges do."""

    def __init__(self, log_path: Path):
        self.scratch = Path(tempfile.mkdtemp(prefix="java-iceberg-"))
        self.log = open(log_path, "wb")
        python = venv() / "bin" / "python"
        self.proc = subprocess.Popen(
            [str(python), str(Path(__file__).with_name("java_reader.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        ready = self._answer(START_TIMEOUT_S)
        if "ready" not in ready:
            raise RuntimeError(f"Java Iceberg did not start: {ready}; log: {log_path}")

    def _answer(self, timeout: float) -> dict:
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                raise RuntimeError(f"Java Iceberg gave no answer within {timeout} s")
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"Java Iceberg exited ({self.proc.poll()}); see {self.log.name}")
            # Only the service's own JSON lines count; anything else Spark printed is skipped.
            if line.startswith("{"):
                return json.loads(line)

    def _call(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer(READ_TIMEOUT_S)

    def read(self, metadata_location: str, snapshot_id=None, as_of_timestamp=None, columns=None, vectorized=True):
        """The rows as a pyarrow table (of the current snapshot, or the one given by ID or
        current at a time in ms; `columns` may name metadata columns such as `_row_id`), or
        raises JavaReadError with Java's causes. `vectorized=False`: Spark's row-based Parquet
        reader, for a Java bug in the vectorized one (say which where it is used)."""
        location = as_file_uri(metadata_location)
        out = self.scratch / f"read-{uuid.uuid4().hex}"
        answer = self._call({"op": "read", "location": location, "snapshot_id": snapshot_id,
                             "as_of_timestamp": as_of_timestamp, "columns": columns, "out": str(out),
                             "vectorized": vectorized})
        if not answer["ok"]:
            raise JavaReadError(f"Java Iceberg cannot read {location}: {answer['error']}")
        return pq.read_table(out)

    def rows(self, metadata_location: str, snapshot_id=None, columns=None, as_of_timestamp=None,
             vectorized=True) -> list[tuple]:
        return judge.arrow_rows(self.read(metadata_location, snapshot_id, as_of_timestamp, columns, vectorized),
                                columns)

    def without_vectorization(self) -> "NotVectorized":
        """This reader with Spark's row-based Parquet reader, as a judge for assert_mirrors."""
        return NotVectorized(self)

    def maintain(self, metadata_location: str, action: str) -> str:
        """Runs Iceberg's `expire_snapshots` or `remove_orphan_files` (SparkActions) on the
        table, removing all it considers old; what it did, or JavaReadError with Java's refusal."""
        answer = self._call({"op": "maintain", "location": as_file_uri(metadata_location), "action": action})
        if not answer["ok"]:
            raise JavaReadError(f"Java Iceberg {action}: {answer['error']}")
        return answer["result"]

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class JavaReadError(AssertionError):
    pass


def as_file_uri(location: str) -> str:
    if location.startswith("file:"):
        return location
    if "://" in location:
        raise ValueError(f"Java Iceberg in this rig reads only local (file://) tables, not {location}")
    return Path(location).resolve().as_uri()


class NotVectorized:
    """A JavaIceberg that reads with `vectorization-enabled=false`: where Java's vectorized
    reader has a bug the mirror does not cause (each use names the issue)."""

    def __init__(self, java: JavaIceberg):
        self.java = java

    def rows(self, metadata_location: str, snapshot_id=None, columns=None, as_of_timestamp=None) -> list[tuple]:
        return self.java.rows(metadata_location, snapshot_id, columns, as_of_timestamp, vectorized=False)
