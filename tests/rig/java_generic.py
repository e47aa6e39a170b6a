"""Java Iceberg 1.10.2's generic reader, with the name mapping applied, as the judge of
format version 3 mirrors (variant, defaults, geo types) that Spark 3.5 cannot read.

../shared/tools/java-iceberg/read_generic.py reads through IcebergGenerics, which never
applies `schema.name-mapping.default` (apache/iceberg#6122): Parquet files without field IDs
(Delta's, without column mapping) get positional top-level IDs, and nested columns fail
("Not a struct type: map<string, variant>", a NullPointerException in
BaseParquetReaders.struct). tests/rig/GenericNameMappedReader.java does what GenericReader
does, file by file, with `withNameMapping`: compiled here with javac against the runtime jar
of the Java Iceberg kit's venv (tests/run.sh installs a JDK where javac is missing) and run
as a service, one JVM per test session (the `java_generic` fixture).

Rows come back as dicts in read_generic.py's JSON forms (variant as its JSON text, dates
as days, timestamps as microseconds, decimals as strings, binary as hex, maps as [key,
value] pairs), with `_row_id` and `_last_updated_sequence_number`; the metadata as Java
parsed it (field types, defaults, CRS and edge algorithm) beside them.
"""

import json
import os
import select
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from rig.java_iceberg import JavaReadError, as_file_uri, venv

SOURCE = Path(__file__).with_name("GenericNameMappedReader.java")
MAIN_CLASS = "GenericNameMappedReader"
START_TIMEOUT_S = 60
READ_TIMEOUT_S = 120


def _tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} is missing: apt-get install openjdk-17-jdk-headless (tests/run.sh does)")
    return found


def _jars(kit_venv: Path) -> tuple[list[str], list[str]]:
    """(what javac needs, what the JVM runs with). commons-lang3 3.17 goes first: Iceberg's
    variant reader needs it and Spark's jars bring 3.12 (see the kit's setup.sh)."""
    site = next(kit_venv.glob("lib/python3*/site-packages"), None)
    runtime = sorted(kit_venv.glob("lib/python3*/site-packages/snowpark_connect_deps_iceberg/jars/"
                                   "iceberg-spark-runtime-3.5_2.12-*.jar"))
    jackson, lang3 = kit_venv / "iceberg-jackson-relocated.jar", kit_venv / "commons-lang3-3.17.0.jar"
    hadoop = sorted(kit_venv.glob("lib/python3*/site-packages/pyspark/jars/hadoop-client-api-*.jar"))
    if site is None or not runtime or not hadoop or not jackson.is_file() or not lang3.is_file():
        raise RuntimeError(f"the Java Iceberg venv at {kit_venv} is incomplete: run ../shared/tools/java-iceberg/setup.sh")
    compile_with = [str(runtime[0]), str(jackson), str(hadoop[0])]
    return compile_with, [str(lang3), str(runtime[0]), str(jackson), str(site / "pyspark" / "jars" / "*")]


class JavaGenericReader:
    """A running GenericNameMappedReader. `read()` returns (rows, meta)."""

    def __init__(self, log_path: Path):
        self.scratch = Path(tempfile.mkdtemp(prefix="java-generic-"))
        compile_with, run_with = _jars(venv())
        classes = self.scratch / "classes"
        built = subprocess.run([_tool("javac"), "-nowarn", "-cp", os.pathsep.join(compile_with),
                                "-d", str(classes), str(SOURCE)], capture_output=True, text=True)
        if built.returncode != 0:
            raise RuntimeError(f"javac {SOURCE.name} failed:\n{built.stderr[-3000:]}")
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [_tool("java"), "-Xmx1g", "-cp", os.pathsep.join([str(classes), *run_with]), MAIN_CLASS],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        ready = self._answer(START_TIMEOUT_S)
        if "ready" not in ready:
            raise RuntimeError(f"the Java generic reader did not start: {ready}; log: {log_path}")
        self.version = ready["ready"]

    def _answer(self, timeout: float) -> dict:
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                raise RuntimeError(f"the Java generic reader gave no answer within {timeout} s")
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the Java generic reader exited ({self.proc.poll()}); see {self.log.name}")
            if line.startswith("{"):
                return json.loads(line)

    def read(self, metadata_location: str, columns=None, snapshot_id=None) -> tuple[list[dict], dict]:
        """Every row of the snapshot (current unless given) as a dict of the projected columns
        (`columns`: names, dotted for nested fields; all when None) plus `_row_id` and
        `_last_updated_sequence_number`, and the metadata Java parsed; or JavaReadError."""
        out = self.scratch / f"read-{uuid.uuid4().hex}"
        request = {"location": as_file_uri(metadata_location), "out": str(out), "columns": columns,
                   "snapshot_id": snapshot_id}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self._answer(READ_TIMEOUT_S)
        if not answer["ok"]:
            raise JavaReadError(f"Java Iceberg's generic reader cannot read {metadata_location}: {answer['error']}")
        rows = [json.loads(line) for line in Path(f"{out}.jsonl").read_text(encoding="utf-8").splitlines()]
        return rows, json.loads(Path(f"{out}.meta.json").read_text(encoding="utf-8"))

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
