"""Requests per one-commit sync at scale, into each kind of catalog, beside the build before
(issue 54's floor; a benchmark, not a test).

For each table shape,

- `--sizes`: N active files, a synthetic log as scale.py generates it (a classic checkpoint of
  N adds at version 10, no data file: a sync reads only the log);
- `--versions`: V kept versions, a streaming history of one-file commits 10 s apart, all inside
  Delta's retention (history.py's StreamingTable, no checkpoint);

and each target,

- plain: the table on moto S3, one folder below its bucket, mirrored into moto's Glue;
- catalog-managed: the same log in uc-server (tests/rig/uc-server.sh) on moto S3, at the
  location the catalog chose, mirrored into moto's Glue with `--uc-url`: version 0 created
  through the catalog, every later version staged, ratified and published by the rig's writer
  (tests/rig/catalog_managed.py), the synthetic checkpoint naming the catalog's table id;
- REST: the table on the local file system under the warehouse of a local rustberg (it serves
  file:// only), mirrored into it;

it mirrors the table with this build and with `--before` (each into its own Glue database or
REST namespace, its metadata in its own folder; a history as history.py sets it up: version 0,
then the rest in one catch-up), appends one commit of one file (catalog-managed: staged and
ratified, not published) and syncs it (not counted: the first sync after a bootstrap skips one
check every later one makes), appends one more, and runs one `lakemirror glue-sync
--to-version <v>` per build for it, each its own process. Naming the new version is what the function's S3 event does: without it the
CLI also asks for version v + 1 (one GET more). The catalog table is named by the table's
folder, as the function names it. Its requests are counted where they arrive:

- S3 and Glue: by moto's request recorder (every request moto answered, as bill.py counts);
- Unity Catalog and REST: by a proxy in front of the server (catalog_managed.py's counter);
- REST's storage, the local file system: by the report alone (`io.requests`, which counts the
  REST requests too; those are checked against the proxy's).

It prints the requests per one-commit sync, this build (the build before), then for each target
this build's requests by name (the report's `io.calls`; Unity Catalog's by route, as the proxy
saw them, since the report does not count them), one column per shape. A figure that could not
be measured says why. The raw figures go to stderr as JSON, each sync's S3 and Glue requests
with their URLs.

`--bootstrap-group-files N` sets BOOTSTRAP_GROUP_FILES for the bootstraps only (the counted
syncs run with lakemirror's defaults); above the largest size, every mirror is bootstrapped in
one pass. (In cfeb0f2 and before, a catalog-managed mirror bootstrapped in groups, past 250,000
files by default, is not known as catalog-managed by its next sync, which then never asks the
catalog: that figure says "not measured".)

    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/floor.py \\
        [--sizes 1000,100000,1000000] [--versions 5000] [--before path/to/older/lakemirror] \\
        [--bootstrap-group-files N] [--work DIR] [--markdown PATH]

12 to 20 minutes on 2 cores at the default shapes with --before, 4 to 6 of them making the
5,000 versions catalog-managed (ratified one by one); the 1,000,000-file logs are 50 MB each.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (tests/bench, the script's own folder; puts tests/ on the path)
from bill import Recording, tier  # noqa: E402
from catalog_managed import CatalogCounter  # noqa: E402  (tests/bench's: the catalog's requests by kind)
from history import StreamingTable, table  # noqa: E402
from rig import catalog_managed as cm  # noqa: E402
from rig import rest_catalog, unity  # noqa: E402
from rig.fault_proxy import FaultProxy  # noqa: E402
from rig.synthetic_log import VERSION, commit_one_file, generate  # noqa: E402

BUCKET = "bench-floor"
DATABASE = "bench_floor"  # each build's Glue database and REST namespace: bench_floor_now, …_before
FIELDS = [cm.field_of("id", "long"), cm.field_of("name", "string")]  # the synthetic logs' schema
CADENCE_MS = 10_000
PUBLISH_EVERY = 5  # a catalog-managed history is published this often (uc-server refuses an 11th unforgotten commit)
TARGETS = ("plain", "catalog-managed", "REST")


@dataclass
class Shape:
    key: str  # in table names: f1000, v5000
    label: str
    files: int = 0  # active files of a synthetic checkpoint, or
    versions: int = 0  # versions of a streaming history


@dataclass
class Target:
    uri: str
    args: list = field(default_factory=list)  # the catalog's settings
    env: dict = field(default_factory=dict)
    proxy: FaultProxy | None = None  # in front of the catalog's server


def local_table(shape: Shape, root: Path):
    """Writes the shape's Delta table at `root`; returns the function that appends one commit
    of one file and returns that commit's file."""
    if shape.files:
        generate(root, shape.files, "classic", 1)

        versions = iter(range(VERSION + 1, VERSION + 100))

        def append() -> Path:
            version = next(versions)
            commit_one_file(root, shape.files + version, version)
            return root / "_delta_log" / f"{version:020}.json"
    else:
        stream = StreamingTable(root, shape.versions, CADENCE_MS, int(time.time() * 1000) - CADENCE_MS)

        def append() -> Path:
            stream.commit([])
            return root / "_delta_log" / f"{stream.versions - 1:020}.json"
    return append


def commit_of(path: Path) -> tuple[list[dict], int]:
    """A commit file's actions (without its commitInfo) and its timestamp."""
    actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    return [a for a in actions if "commitInfo" not in a], info["timestamp"]


def upload(folder: Path, uri: str):
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        cm.put(f"{uri}/{path.relative_to(folder).as_posix()}", path.read_bytes())


def managed_table(shape: Shape, schema: unity.UnitySchema, local: Path, scratch: Path) -> cm.ManagedTable:
    """The shape's table, catalog-managed: created through the catalog, each later version
    staged, ratified and published by the rig's writer. A history's commits are the local
    table's (same adds, same timestamps); a synthetic checkpoint is generated again with the
    catalog's table id and the catalog-managed protocol, after versions 1-10 (empty commits)."""
    if shape.files:
        managed = cm.create(schema, shape.key, FIELDS)
        for v in range(1, VERSION + 1):
            managed.commit(v)
        managed.publish(VERSION)
        generate(scratch, shape.files, "classic", 1, protocol=cm.LOG_PROTOCOL["protocol"],
                 configuration={"delta.enableInCommitTimestamps": "true", cm.TABLE_ID_KEY: managed.table_id})
        upload(scratch, managed.location)
        shutil.rmtree(scratch)
        return managed
    log = local / "_delta_log"
    managed = cm.create(schema, shape.key, FIELDS, timestamp=commit_of(log / f"{0:020}.json")[1])
    for v in range(1, shape.versions):
        actions, timestamp = commit_of(log / f"{v:020}.json")
        managed.commit(v, *actions, timestamp=timestamp)
        if v % PUBLISH_EVERY == 0 or v == shape.versions - 1:
            managed.publish(v)
    return managed


def sync(binary: str, build: str, target: Target, *extra: str) -> dict:
    """`lakemirror glue-sync` of the target's table in its own process: its report. The catalog
    table is named by the table's folder, as the function names it (given `--glue-table`, the
    build before skips the read of its remembered target), in the build's own database, its
    metadata in its own folder."""
    done = subprocess.run([binary, "glue-sync", "--table-uri", target.uri, "--glue-database",
                           f"{DATABASE}_{build}", "--metadata-uri", f"{target.uri}/_lakemirror/iceberg-{build}",
                           *target.args, *extra], capture_output=True, text=True, env={**os.environ, **target.env})
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["killed"])[-1].replace(target.uri, "<table>")
        raise RuntimeError(f"glue-sync failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def aws_call(entry: dict) -> str:
    """A request moto recorded: `Glue <operation>`, or `S3 <method>` (LIST for a listing)."""
    target = {k.lower(): v for k, v in entry.get("headers", {}).items()}.get("x-amz-target", "")
    if target.startswith("AWSGlue."):
        return f"Glue {target.removeprefix('AWSGlue.')}"
    priced = tier(entry)
    if priced == "other":
        return f"other {target or entry['method']}"
    return "S3 LIST" if entry["method"] == "GET" and priced == "s3_put" else f"S3 {entry['method']}"


def counted(binary: str, build: str, target_name: str, target: Target, version: int,
            recording: Recording) -> dict:
    """The one-commit sync to `version`, its requests counted where they arrive: S3 + Glue as
    moto recorded them plus the catalog's as the proxy saw them; for REST (its storage the local
    file system) the report's own count."""
    counter = CatalogCounter(target.proxy) if target.proxy else None
    mark = counter.mark() if counter else 0
    report, _ = recording.of(lambda: sync(binary, build, target, "--to-version", str(version)))
    entries = [json.loads(line) for line in recording.path.read_text().splitlines() if line.strip()]
    aws = Counter(aws_call(e) for e in entries)
    catalog = counter.since(mark) if counter else Counter()
    io = report.get("io", {})
    total = io["requests"] if target_name == "REST" else sum(aws.values()) + sum(catalog.values())
    urls = [f"{e['method']} {e['url'].split('://', 1)[-1].partition('/')[2]}" for e in entries]
    return {"requests": total, "moto": dict(aws), "catalog_proxy": dict(catalog), "report_requests": io["requests"],
            "calls": io.get("calls"), "moto_urls": urls, "action": report.get("action"),
            "delta_version": report.get("delta_version")}


def bootstrap(binary: str, build: str, target: Target, shape: Shape, group_files: int | None):
    """The build's first mirror of the target's table; a history as history.py sets it up
    (version 0, then the rest in one catch-up). Raises unless it mirrored the whole table."""
    env = {**target.env, **({"BOOTSTRAP_GROUP_FILES": str(group_files)} if group_files else {})}
    first = Target(target.uri, target.args, env, target.proxy)
    if shape.versions:
        sync(binary, build, first, "--to-version", "0")
    report = sync(binary, build, first)
    newest = VERSION if shape.files else shape.versions - 1
    if report.get("delta_version") != newest or (shape.files and report.get("added_files") != shape.files):
        raise RuntimeError(f"mirrored version {report.get('delta_version')} with {report.get('added_files')} "
                           f"files, not version {newest} of the whole table")


def measure(shape: Shape, builds: list, servers: dict, recording: Recording, work: Path,
            group_files: int | None) -> dict:
    """Every target x build of one shape: the counted one-commit sync, or why it was not measured."""
    out, started = {}, time.perf_counter()
    local = servers["rest"].warehouse / shape.key
    append = local_table(shape, local)
    plain_uri = f"s3://{BUCKET}/{shape.key}"
    upload(local, plain_uri)
    rest_env = {**servers["rest"].env(), "REST_CATALOG_URI": servers["rest_proxy"].url}
    targets = {"plain": Target(plain_uri), "REST": Target(str(local), env=rest_env, proxy=servers["rest_proxy"])}
    managed = None
    try:
        managed = managed_table(shape, servers["schema"], local, work / f"managed-{shape.key}")
        targets["catalog-managed"] = Target(managed.location, args=["--uc-url", servers["uc_proxy"].url],
                                            proxy=servers["uc_proxy"])
    except Exception as e:  # noqa: BLE001 - the reason is printed, the other targets go on
        traceback.print_exc()
        for label, _ in builds:
            out[("catalog-managed", label)] = {"not measured": f"the table could not be made catalog-managed: {e}"}
    print(f"  {shape.label}: tables written in {time.perf_counter() - started:.0f} s", file=sys.stderr)

    for t, target in targets.items():
        for label, binary in builds:
            try:
                began = time.perf_counter()
                bootstrap(binary, label, target, shape, group_files)
                print(f"    {t}, {label}: mirrored in {time.perf_counter() - began:.1f} s", file=sys.stderr)
            except Exception as e:  # noqa: BLE001
                out[(t, label)] = {"not measured": f"the bootstrap failed: {e}"}
                print(f"    {t}, {label}: {cell(out[(t, label)])}", file=sys.stderr)

    def next_commit() -> int:
        """One more commit of one file, in every target's table: its version."""
        commit = append()
        cm.put(f"{plain_uri}/_delta_log/{commit.name}", commit.read_bytes())
        if managed:
            actions, timestamp = commit_of(commit)
            managed.commit(int(commit.name[:20]), *actions, timestamp=timestamp)
        return int(commit.name[:20])

    # Not counted: the first commit after a bootstrap skips the check of the version mirrored
    # last (read from a checkpoint, it has no recorded commit hash), which every later one makes.
    warm_up = next_commit()
    for t, target in targets.items():
        for label, binary in builds:
            if (t, label) not in out:
                try:
                    sync(binary, label, target, "--to-version", str(warm_up))
                except Exception as e:  # noqa: BLE001
                    out[(t, label)] = {"not measured": f"the sync after the bootstrap failed: {e}"}
    version = next_commit()
    for t, target in targets.items():
        for label, binary in builds:
            if (t, label) in out:
                continue
            try:
                r = counted(binary, label, t, target, version, recording)
            except Exception as e:  # noqa: BLE001
                r = {"not measured": f"the one-commit sync failed: {e}"}
            if "not measured" not in r and (r["action"], r["delta_version"]) != ("synced", version):
                r = {"not measured": f"the sync did not mirror version {version}: {r}"}
            out[(t, label)] = r
            print(f"    {t}, {label}: {cell(r)}{'' if 'not measured' in r else ' requests'}", file=sys.stderr)
    shutil.rmtree(local)
    return out


def cell(r: dict | None) -> str:
    if r is None:
        return "–"
    return f"not measured: {' '.join(r['not measured'].split())[:200]}" if "not measured" in r else str(r["requests"])


def pair(now: dict, before: dict | None) -> str:
    """`now (before)`; a reason the two share, once."""
    if before is None or (now.get("not measured") and now.get("not measured") == before.get("not measured")):
        return cell(now)
    return f"{cell(now)} ({cell(before)})"


def by_name(r: dict, target: str) -> Counter:
    """The report's names; Unity Catalog's requests by route, as the proxy saw them, where the
    report does not name them."""
    calls = Counter(r["calls"] or {})
    if target == "catalog-managed" and not any(k.startswith(("UC ", "Unity")) for k in calls):
        calls += Counter({f"Unity Catalog {k}": n for k, n in r["catalog_proxy"].items()})
    return calls


def named(results: dict, shapes: list[Shape], target: str) -> str:
    """This build's requests of one target's one-commit sync by name, one column per shape:
    the report's names; the Unity Catalog's requests by route, as the proxy saw them."""
    measured = [(s, results[s.key].get((target, "now"))) for s in shapes]
    measured = [(s, r) for s, r in measured if r and "not measured" not in r]
    if not measured:
        return f"{target}: nothing measured"
    columns = [(s, by_name(r, target)) for s, r in measured]
    rows = [(name, *(calls.get(name, 0) for _, calls in columns))
            for name in sorted(set().union(*(calls for _, calls in columns)))]
    rows.append(("**total**", *(r["requests"] for _, r in measured)))
    return table(rows, (f"{target}: request (this build)", *(s.label for s, _ in measured)))


def checks(results: dict, shapes: list[Shape]) -> list[str]:
    """Where the report's own count and the servers' disagree (the report alone counts REST's
    storage): S3 + Glue against moto's recorder (the report does not count Unity Catalog's
    requests), REST's named requests against the proxy."""
    out = []
    for s in shapes:
        for (t, label), r in results[s.key].items():
            if "not measured" in r:
                continue
            if t != "REST" and sum(r["moto"].values()) != r["report_requests"]:
                out.append(f"{s.label}, {t}, {label}: moto recorded {sum(r['moto'].values())} S3 + Glue requests, "
                           f"the report counts {r['report_requests']}")
            rest = sum(n for k, n in (r["calls"] or {}).items() if k.startswith("REST "))
            if t == "REST" and r["calls"] is not None and rest != sum(r["catalog_proxy"].values()):
                out.append(f"{s.label}, REST, {label}: the report names {rest} REST requests, "
                           f"the proxy saw {sum(r['catalog_proxy'].values())}")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,100000,1000000", help="active files, comma-separated")
    parser.add_argument("--versions", default="5000", help="kept versions of a streaming history, comma-separated")
    parser.add_argument("--before", help="the build before, run on the same tables into its own catalog tables")
    parser.add_argument("--work", type=Path, help="where tables and servers live [default: a temporary folder]")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--bootstrap-group-files", type=int, metavar="N",
                        help="BOOTSTRAP_GROUP_FILES of the bootstraps (not of the counted syncs) [default: unset, "
                             "lakemirror's 250,000]")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    if args.before:
        common.check_binary(args.before)
    shapes = ([Shape(f"f{n}", f"{n:,} files", files=n) for n in map(int, filter(None, args.sizes.split(",")))] +
              [Shape(f"v{v}", f"{v:,} versions", versions=v) for v in map(int, filter(None, args.versions.split(",")))])
    builds = [("now", args.binary)] + ([("before", args.before)] if args.before else [])
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)

    results = {}
    with tempfile.TemporaryDirectory(prefix="floor-bench-", dir=args.work) as scratch:
        work = Path(scratch)
        recorded = work / "recording.jsonl"
        moto, endpoint = common.local_moto(env={**os.environ, "MOTO_ENABLE_RECORDING": "True",
                                                "MOTO_RECORDER_FILEPATH": str(recorded)})
        uc = rest = None
        try:
            recording = Recording(endpoint, recorded)
            boto3.client("s3").create_bucket(Bucket=BUCKET)
            uc = unity.start(work / "uc")
            rest = rest_catalog.start(work / "rustberg")
            for label, _ in builds:
                boto3.client("glue").create_database(DatabaseInput={"Name": f"{DATABASE}_{label}"})
                rest.create_namespace(f"{DATABASE}_{label}")
            with FaultProxy(uc.url, rate=0.0) as uc_proxy, FaultProxy(rest.url, rate=0.0) as rest_proxy:
                servers = {"schema": unity.schema_over_bucket(uc, BUCKET), "uc_proxy": uc_proxy, "rest": rest,
                           "rest_proxy": rest_proxy}
                for shape in shapes:
                    results[shape.key] = measure(shape, builds, servers, recording, work, args.bootstrap_group_files)
        finally:
            for server in (uc, rest):
                if server:
                    server.stop()
            moto.terminate()

    print(json.dumps({s.key: {f"{t} {label}": r for (t, label), r in results[s.key].items()} for s in shapes}),
          file=sys.stderr)
    rows = [(s.label, *(pair(results[s.key][(t, "now")], results[s.key].get((t, "before"))) for t in TARGETS))
            for s in shapes]
    before = f"; in brackets the build before, `{args.before}`" if args.before else ""
    text = "\n\n".join([
        f"Requests per one-commit sync: `{args.binary}`{before}",
        table(rows, ("table", "plain (S3 + Glue)", "catalog-managed (S3 + Glue + Unity Catalog)",
                     "REST (rustberg; the table on the local file system)")),
        f"{common.machine()}; {common.today_and_commit()}; moto S3 + Glue, uc-server 0.0.11 and rustberg 0.3.0 on "
        "loopback. Each sync is `lakemirror glue-sync --to-version <the new version>` in its own process (the "
        "version named, as the function's S3 event names it; a fresh process, as a cold function is), after one "
        "commit synced since the bootstrap (the first skips the check of the version mirrored last). S3 and Glue requests as moto recorded them, the catalogs' as a proxy in front of "
        "each saw them, REST's storage (the local file system) as the report counts it. The nested-table check "
        "lists each folder above a table (`S3 LIST Delta log listing`): 1 for the plain table, one folder below "
        "its bucket; more for the catalog-managed table (where the catalog put it) and the REST table (the local "
        "folder's depth)." + (f" Bootstraps with BOOTSTRAP_GROUP_FILES={args.bootstrap_group_files}."
                              if args.bootstrap_group_files else ""),
        *(named(results, shapes, t) for t in TARGETS),
        *(["Disagreements between the report and the servers:\n\n" + "\n".join(f"- {c}" for c in found)]
          if (found := checks(results, shapes)) else []),
    ]) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
