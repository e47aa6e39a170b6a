"""`lakemirror fan-out plan|part|finish`: a bootstrap split into parts that run as parallel
processes (in AWS: the FanOutBootstrap state machine's Distributed Map, one Lambda per part)
gives the same Iceberg table as the single-process bootstrap: the same data files with the
same record counts, sizes and partitions, the same delete files, the same totals, and rows
equal to Delta's in pyiceberg, DuckDB and Java Iceberg. A part that dies before it is
complete is named by `finish`, which commits nothing until the part has run again. The
mirror it leaves is an ordinary one: the next commit syncs onto it incrementally."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from acceptance.mirror_check import assert_mirrors
from rig import judge
from rig.synthetic_log import VERSION, commit_one_file, generate

FILES = 2500  # 3 buckets of 1,000 rounded up to 4: every part owns at least one
PARTS = 3


def live_files(database, table):
    """(path, records, size, partition) of every data file, and (data file, deleted rows) of
    every delete file (written by each mirror under its own name), of the current snapshot,
    from its manifests."""
    tasks = judge.glue_catalog().load_table((database, table)).scan().plan_files()
    data, deletes = set(), set()
    for task in tasks:
        f = task.file
        data.add((f.file_path, f.record_count, f.file_size_in_bytes, tuple(f.partition)))
        for d in task.delete_files:
            deletes.add((f.file_path, d.record_count))
    return sorted(data), sorted(deletes)


def totals(database, table):
    summary = judge.iceberg_snapshots(database, table)[-1]["summary"]
    return {k: summary[k] for k in ("total-data-files", "total-records", "total-delete-files",
                                    "total-position-deletes", "delta.version")}


def plan(lakemirror, tmp_path, table_uri, database, metadata, parts=PARTS):
    run = lakemirror("fan-out", "plan", "--table-uri", table_uri, "--glue-database", database,
                     "--glue-table", "fanned", "--metadata-uri", metadata, "--parts", parts)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(run.json))
    return run.json, path


def run_parts(lakemirror_bin, plan_path, parts, crash=()):
    """Every part as its own process, all at once; `crash` names parts that die before their
    manifest list is written. Answers each part's exit status."""
    procs = {}
    for part in parts:
        env = dict(os.environ)
        if part in crash:
            env["LAKEMIRROR_CRASH_AT"] = "fan-out-before-part-list"
        procs[part] = subprocess.Popen(
            [str(lakemirror_bin), "fan-out", "part", "--plan", str(plan_path), "--part", str(part)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    codes = {}
    for part, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        codes[part] = proc.returncode
        if part not in crash:
            assert proc.returncode == 0, f"part {part}: {err[-3000:]}"
            assert json.loads(out.strip().splitlines()[-1])["part"] == part
    return codes


@pytest.mark.parametrize("layout", ["classic", "multi-part", "v2"])
def test_fanned_out_bootstrap_equals_the_single_process_one_even_after_a_part_fails(
        layout, tmp_path, glue_database, lakemirror, lakemirror_bin):
    root = tmp_path / "t"
    generate(root, FILES, layout, parts=3)
    single = lakemirror("glue-sync", "--table-uri", root, "--glue-database", glue_database,
                        "--glue-table", "single", "--metadata-uri", tmp_path / "single")
    assert single.json["action"] == "created"

    planned, plan_path = plan(lakemirror, tmp_path, str(root), glue_database, tmp_path / "fanned")
    assert (planned["delta_version"], planned["files"], planned["buckets"], planned["parts"]) == (VERSION, FILES, 4, 3)
    assert planned["part_numbers"] == [0, 1, 2]

    codes = run_parts(lakemirror_bin, plan_path, range(PARTS), crash={1})
    assert codes[1] != 0, "the crash point stopped part 1"
    early = lakemirror("fan-out", "finish", "--plan", plan_path, check=False)
    assert early.returncode != 0
    assert "part 1 of 3 has not finished" in early.stderr, early.stderr
    assert "fanned" not in [t[1] for t in judge.glue_catalog().list_tables(glue_database)], \
        "nothing is committed while a part is missing"

    run_parts(lakemirror_bin, plan_path, [1])
    finished = lakemirror("fan-out", "finish", "--plan", plan_path)
    assert finished.json["action"] == "created"
    assert finished.json["added_files"] == FILES

    assert live_files(glue_database, "fanned") == live_files(glue_database, "single")
    assert totals(glue_database, "fanned") == totals(glue_database, "single")
    iceberg = judge.glue_catalog().load_table((glue_database, "fanned"))
    assert iceberg.properties["lakemirror.manifest-buckets"] == "4"
    verify = lakemirror("verify", "--table-uri", root, "--glue-database", glue_database, "--glue-table", "fanned",
                        "--metadata-uri", tmp_path / "fanned", check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    again = lakemirror("fan-out", "finish", "--plan", plan_path)
    assert again.json["action"] == "unchanged", "finishing twice commits once"

    # The fanned-out mirror is an ordinary mirror: the next commit syncs onto it.
    commit_one_file(root, FILES)
    synced = lakemirror("glue-sync", "--table-uri", root, "--glue-database", glue_database,
                        "--glue-table", "fanned", "--metadata-uri", tmp_path / "fanned")
    assert (synced.json["action"], synced.json["snapshots_committed"], synced.json["added_files"]) == ("synced", 1, 1)
    assert totals(glue_database, "fanned")["total-data-files"] == str(FILES + 1)


def test_a_bootstrap_in_groups_equals_the_single_process_one_and_leaves_no_spill(
        tmp_path, glue_database, lakemirror):
    """BOOTSTRAP_GROUP_FILES: a new mirror of a table whose checkpoint holds more actions is
    bootstrapped group by group from spill files; a remove after the checkpoint still cancels
    its add, and the spill folder is gone afterwards."""
    root = tmp_path / "t"
    generate(root, FILES, "multi-part", parts=2)
    first = pq.read_table(next((root / "_delta_log").glob("*.checkpoint.0000000001.*.parquet")), columns=["add"])
    gone = [a for a in first.column("add").to_pylist() if a][5]["path"]
    tail = [{"commitInfo": {"timestamp": 1764500000000, "operation": "DELETE"}},
            {"remove": {"path": gone, "deletionTimestamp": 1764500000000, "dataChange": True}}]
    (root / "_delta_log" / f"{VERSION + 1:020}.json").write_text("\n".join(json.dumps(a) for a in tail) + "\n")
    single = lakemirror("glue-sync", "--table-uri", root, "--glue-database", glue_database,
                        "--glue-table", "single", "--metadata-uri", tmp_path / "single")
    spill = tmp_path / "spill"
    spill.mkdir()
    grouped = lakemirror("glue-sync", "--table-uri", root, "--glue-database", glue_database,
                         "--glue-table", "grouped", "--metadata-uri", tmp_path / "grouped",
                         "--bootstrap-group-files", "1000", env={"TMPDIR": str(spill)})
    planned = re.search(r"read the log for a bootstrap in groups .*groups=(\d+) at_once=(\d+)", grouped.stderr)
    groups, at_once = int(planned[1]), int(planned[2])
    # 1,000 files held at once, shared by the groups written at once (one per core).
    assert groups == min(4, -(-FILES // (1000 // at_once))), planned[0]
    assert grouped.stderr.count("wrote a group of the bootstrap") == groups
    assert (grouped.json["action"], grouped.json["added_files"]) == ("created", FILES - 1)
    # The single-process bootstrap would write the versions since the checkpoint, but 11
    # removed a file a year ago (VACUUM may have deleted it): 10 would expire at once, so
    # it is not written apart.
    assert [s["delta_version"] for s in single.json["snapshots"]] == [VERSION + 1]
    assert single.json["added_files"] == FILES - 1
    assert live_files(glue_database, "grouped") == live_files(glue_database, "single")
    assert gone not in {p.rsplit("/", 1)[1] for p, *_ in live_files(glue_database, "grouped")[0]}
    assert totals(glue_database, "grouped") == totals(glue_database, "single")
    assert list(spill.iterdir()) == [], "the spill files are deleted"
    verify = lakemirror("verify", "--table-uri", root, "--glue-database", glue_database, "--glue-table", "grouped",
                        "--metadata-uri", tmp_path / "grouped", check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    added = {"add": {"path": "part-new.c000.snappy.parquet", "partitionValues": {}, "size": 1000,
                     "modificationTime": 1764500000000, "dataChange": True, "stats": json.dumps({"numRecords": 10})}}
    (root / "_delta_log" / f"{VERSION + 2:020}.json").write_text(json.dumps(added) + "\n")
    synced = lakemirror("glue-sync", "--table-uri", root, "--glue-database", glue_database,
                        "--glue-table", "grouped", "--metadata-uri", tmp_path / "grouped",
                        "--bootstrap-group-files", "1000")
    assert (synced.json["action"], synced.json["snapshots_committed"]) == ("synced", 1), \
        "an existing mirror syncs commit by commit, whatever its size"


def add_files(table: Path, version: int, count: int):
    """Commits `count` one-row Parquet files to the Spark-written partitioned table with
    deletion vectors (columns part, col1, col2; partitioned by part)."""
    now = 1764500000000
    adds = []
    for i in range(count):
        part = i % 5
        rel = f"part={part}/extra-{i:05}.parquet"
        (table / rel).parent.mkdir(exist_ok=True)
        pq.write_table(pa.table({"col1": pa.array([10_000 + i], pa.int32()), "col2": [f"x{i}"]}), table / rel)
        stats = {"numRecords": 1, "minValues": {"col1": 10_000 + i, "col2": f"x{i}"},
                 "maxValues": {"col1": 10_000 + i, "col2": f"x{i}"}, "nullCount": {"col1": 0, "col2": 0}}
        adds.append({"add": {"path": rel, "partitionValues": {"part": str(part)}, "size": (table / rel).stat().st_size,
                             "modificationTime": now, "dataChange": True, "stats": json.dumps(stats)}})
    lines = [{"commitInfo": {"timestamp": now, "operation": "WRITE"}}] + adds
    (table / "_delta_log" / f"{version:020}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")


def test_fanned_out_bootstrap_of_a_partitioned_table_with_deletion_vectors_reads_equal_in_every_reader(
        tmp_path, delta_tables_dir, glue_database, lakemirror, lakemirror_bin, java_iceberg):
    table = tmp_path / "dv"
    shutil.copytree(delta_tables_dir / "dv-partitioned-with-checkpoint", table)
    add_files(table, 16, 2100)
    uri = f"file://{table}"
    single = lakemirror("glue-sync", "--table-uri", uri, "--glue-database", glue_database,
                        "--glue-table", "single", "--metadata-uri", tmp_path / "single")

    planned, plan_path = plan(lakemirror, tmp_path, uri, glue_database, tmp_path / "fanned")
    # 2,115 live files; the plan counts the adds it reads, and the 5 commits after the
    # checkpoint re-add 5 files with their new deletion vectors: an upper bound, as documented.
    assert (planned["files"], planned["buckets"], planned["parts"]) == (2120, 4, 3)
    run_parts(lakemirror_bin, plan_path, range(PARTS))
    finished = lakemirror("fan-out", "finish", "--plan", plan_path)

    fanned_files, fanned_deletes = live_files(glue_database, "fanned")
    assert (fanned_files, fanned_deletes) == live_files(glue_database, "single")
    assert len(fanned_deletes) == 2, "the two files with deletion vectors keep their deletes"
    assert totals(glue_database, "fanned") == totals(glue_database, "single")
    assert single.json["delta_version"] == finished.json["delta_version"] == 16
    assert_mirrors(uri, glue_database, "fanned", finished, expected_rows=None, java=java_iceberg)


def test_fan_out_refuses_what_it_cannot_do(tmp_path, glue_database, lakemirror):
    root = tmp_path / "t"
    generate(root, 10, "classic", parts=1)
    planned, plan_path = plan(lakemirror, tmp_path, str(root), glue_database, tmp_path / "fanned", parts=8)
    assert (planned["buckets"], planned["parts"]) == (1, 1), "never more parts than buckets"
    outside = lakemirror("fan-out", "part", "--plan", plan_path, "--part", "1", check=False)
    assert outside.returncode != 0 and "parts 0 to 0" in outside.stderr
    (tmp_path / "garbage.json").write_text("{}")
    garbage = lakemirror("fan-out", "finish", "--plan", tmp_path / "garbage.json", check=False)
    assert garbage.returncode != 0 and "not a plan `lakemirror fan-out plan` printed" in garbage.stderr
    none = lakemirror("fan-out", "plan", "--table-uri", tmp_path / "nothing", "--glue-database", glue_database,
                      "--parts", "2", check=False)
    assert none.returncode != 0


def test_the_state_machine_steps_run_through_the_glue_sync_function_on_s3(
        tmp_path, bucket, glue_database, upload_dir, lakemirror):
    """The inputs the FanOutBootstrap state machine sends (template.yaml), handed to the
    function's handler (`lakemirror invoke glue-sync`), on a table in (moto) S3."""
    generate(tmp_path / "t", FILES, "multi-part", parts=2)
    upload_dir(tmp_path / "t", bucket, "lake/big")
    uri = f"s3://{bucket}/lake/big"

    def invoke(event, check=True, prefixes=f"s3://{bucket}/lake"):
        path = tmp_path / "event.json"
        path.write_text(json.dumps(event))
        return lakemirror("invoke", "glue-sync", "--event", path, "--glue-database", glue_database,
                          "--table-prefixes", prefixes, check=check)

    plan = invoke({"lakemirror": "fan-out-plan", "table_uri": uri, "parts": 4}).json
    assert (plan["table"], plan["buckets"], plan["parts"], plan["part_numbers"]) == ("big", 4, 4, [0, 1, 2, 3])
    for part in plan["part_numbers"]:  # the Distributed Map's items, one invocation each
        assert invoke({"lakemirror": "fan-out-part", "plan": plan, "part": part}).json["part"] == part
    finished = invoke({"lakemirror": "fan-out-finish", "plan": plan}).json
    assert (finished["action"], finished["added_files"], finished["delta_version"]) == ("created", FILES, VERSION)
    assert totals(glue_database, "big")["total-data-files"] == str(FILES)

    elsewhere = invoke({"lakemirror": "fan-out-part", "plan": plan, "part": 0}, check=False,
                       prefixes=f"s3://{bucket}/other")
    assert elsewhere.returncode != 0 and "is not under TABLE_PREFIXES" in elsewhere.stderr
    foreign = invoke({"lakemirror": "fan-out-finish", "plan": {**plan, "database": "somebody_else"}}, check=False)
    assert foreign.returncode != 0 and "may not write" in foreign.stderr
    # A crafted plan naming another table's metadata folder (issue 29) would write there and
    # continue that table's Glue entry: refused before anything is written.
    victim = f"s3://{bucket}/lake/victim/_lakemirror/iceberg"
    for step in ({"lakemirror": "fan-out-part", "plan": {**plan, "metadata_uri": victim}, "part": 0},
                 {"lakemirror": "fan-out-finish", "plan": {**plan, "metadata_uri": victim}}):
        crafted = invoke(step, check=False)
        assert crafted.returncode != 0 and "names metadata folder" in crafted.stderr, crafted.stderr
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix="lake/victim/")
    assert listed.get("KeyCount", 0) == 0, "nothing was written in the other folder"
    # A crafted plan naming another table's Glue name (issue 29): the function resolves the
    # name again from the table's definition and its own naming, and refuses the plan.
    squat = invoke({"lakemirror": "fan-out-finish", "plan": {**plan, "table": "victim"}}, check=False)
    assert squat.returncode != 0 and "is mirrored to" in squat.stderr and "plan again" in squat.stderr, squat.stderr
    assert "victim" not in [t[1] for t in judge.glue_catalog().list_tables(glue_database)]
