"""Java Iceberg 1.10.2 (Spark 3.5, local mode) as a reading service for the test rig.

Runs inside the venv that ../shared/tools/java-iceberg/setup.sh makes (pyspark plus the
Iceberg runtime jar), started once per test session by tests/rig/java_iceberg.py. One JSON
request per stdin line, one JSON answer per stdout line:

  {"op": "read", "location": "file:///…/00003-….metadata.json", "out": "/tmp/…/dir",
   "snapshot_id": id, "as_of_timestamp": ms, "columns": ["_row_id", "id"]}   (all optional)
      -> {"ok": true}, the rows in OUT as Parquet (timestamps in microseconds, UTC), or
         {"ok": false, "error": "<the innermost Java causes>"}
  {"op": "maintain", "location": …, "action": "expire_snapshots" | "remove_orphan_files"}
      Iceberg's own maintenance (SparkActions), everything older than now
      -> {"ok": true, "result": "<what it did>"} or {"ok": false, "error": …}

Spark starts once (about 10 s); a read then takes a fraction of a second. This is the
Iceberg implementation Athena, EMR, Glue ETL and Spark build on, so its refusals are the ones
users meet there.
"""

import glob
import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.functions import col

VENV = Path(sys.prefix)
RUNTIME = glob.glob(str(VENV / "lib/python3*/site-packages/snowpark_connect_deps_iceberg/jars/"
                        "iceberg-spark-runtime-3.5_2.12-*.jar"))
JACKSON = VENV / "iceberg-jackson-relocated.jar"


def session() -> SparkSession:
    if not RUNTIME or not JACKSON.is_file():
        raise SystemExit(f"the Java Iceberg venv at {VENV} is incomplete: run ../shared/tools/java-iceberg/setup.sh")
    spark = (SparkSession.builder.master("local[2]").appName("lakemirror-java-judge")
             .config("spark.jars", f"{RUNTIME[0]},{JACKSON}")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def causes(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip().startswith("Caused by")]
    return " | ".join(lines[-3:]) or str(error)[:2000]


def maintain(spark: SparkSession, location: str, action: str) -> str:
    """Runs one of Iceberg's maintenance actions on the table at a metadata file, the way a
    user's Spark job, EMR step or Glue job would, removing everything it considers old."""
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration()).load(location)
    actions = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    now = jvm.java.lang.System.currentTimeMillis()
    if action == "expire_snapshots":
        result = actions.expireSnapshots(table).expireOlderThan(now).retainLast(1).execute()
        return f"deleted data files: {result.deletedDataFilesCount()}, manifests: {result.deletedManifestsCount()}"
    if action == "remove_orphan_files":
        result = actions.deleteOrphanFiles(table).olderThan(now).execute()
        return "deleted: " + ", ".join(str(p) for p in result.orphanFileLocations())
    raise ValueError(f"unknown maintenance action {action!r}")


def serve(spark: SparkSession) -> None:
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "read":
                reader = spark.read.format("iceberg")
                if request.get("vectorized") is False:
                    reader = reader.option("vectorization-enabled", "false")
                if request.get("snapshot_id") is not None:
                    reader = reader.option("snapshot-id", str(request["snapshot_id"]))
                if request.get("as_of_timestamp") is not None:
                    reader = reader.option("as-of-timestamp", str(request["as_of_timestamp"]))
                frame = reader.load(request["location"])
                if request.get("columns"):
                    quoted = ["`" + c.replace("`", "``") + "`" for c in request["columns"]]
                    frame = frame.select(*[col(q) for q in quoted])
                frame.coalesce(1).write.mode("overwrite").parquet(request["out"])
                answer = {"ok": True}
            elif request["op"] == "maintain":
                answer = {"ok": True, "result": maintain(spark, request["location"], request["action"])}
            else:
                answer = {"ok": False, "error": f"unknown op {request['op']!r}"}
        except Exception as e:  # noqa: BLE001 - every failure is an answer, the service goes on
            answer = {"ok": False, "error": causes(e)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    spark = session()
    print(json.dumps({"ready": spark.version}), flush=True)
    serve(spark)
    spark.stop()
