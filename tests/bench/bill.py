"""The bill per million commits (issue 54): what mirroring a million Delta commits costs at
AWS list prices, from requests counted by the S3 + Glue stand-in itself and durations measured
in the same run, for a plain and a catalog-managed table, for lakemirror and for the seed's
drop-and-re-add (a benchmark, not a test).

For each N (active files) it writes an unpartitioned Delta table of N real Parquet files on a
local moto S3 + Glue (as `cost_curve.py` does), bootstraps its mirror, then, with moto's
request recorder on (every request the server answered, not our own count):

- lakemirror: three one-commit syncs of one added file, each one run of the deployed glue-sync
  handler in its own process (`lakemirror invoke glue-sync` on the commit's S3 notification);
  the median's wall time and the recorded requests of one;
- the seed's approach on the same table: list the folder, drop and re-create the Iceberg table,
  pyiceberg `add_files` of every file (what the seed did on every commit).

And a catalog-managed table of N real Parquet files, made as tests/rig/catalog_managed.py's
writer makes one on a local uc-server (tests/rig/unity.py): version 0 created through the
catalog, the N files in version 1 (ratified and published), the mirror bootstrapped by
`lakemirror glue-sync --uc-url`, then three one-commit syncs of one added file whose commit is
staged and ratified by the catalog, not published, each one run of the handler on the S3
notification of the staged commit with `UC_URL` set; S3 and Glue requests recorded by moto as
above, Unity Catalog's requests counted at a proxy in front of uc-server (Unity Catalog's own
cost, not AWS's: shown, not priced). The seed's approach is not applicable to such a table:
it adds every Parquet file in the folder, the data of staged commits the catalog never
ratified too, so it is a wrong table, not a price.

Each request is priced by its S3 tier (GET and HEAD; PUT, POST, COPY and LIST) or as a Glue
Data Catalog request; Lambda is priced per GB-second at the measured duration and
`--memory-size`, plus its per-request charge; each commit is 3 SQS requests (the event's
SendMessage, the poller's ReceiveMessage and DeleteMessage, an upper bound: both batch); S3's
notifications to EventBridge are AWS service events, which EventBridge does not charge for.
Tables larger than the largest N are priced by scaling the seed's S3 requests and time
linearly in files (they are a sum over the files; its Glue requests are not scaled) and
lakemirror's not at all, plain or catalog-managed (its cost is the commit's,
docs/performance.md); the output says which figures are scaled. The seconds are local:
against a stand-in answering in well under a millisecond, on this machine's CPU, priced at
arm64's rate; S3 and Glue round trips in a region add their latency.

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/bill.py \\
        [--sizes 16,10000] [--memory-size 1024]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from catalog_managed import CatalogCounter  # noqa: E402  (tests/bench's: the catalog's requests by kind)
from cost_curve import DATABASE, ROWS_PER_FILE, SCHEMA, Table, parquet_bytes, seed_approach, sync  # noqa: E402
from rig import catalog_managed as cm  # noqa: E402
from rig import judge, unity  # noqa: E402
from rig.fault_proxy import FaultProxy  # noqa: E402

# List prices, us-east-1, USD (AWS's published price pages; they have not changed in years, but
# check them before quoting a bill).
PRICE = {
    "lambda_gb_second": 0.0000133334,  # arm64
    "lambda_request": 0.20 / 1e6,
    "s3_get": 0.0004 / 1000,  # GET, HEAD and every other read
    "s3_put": 0.005 / 1000,  # PUT, POST, COPY, LIST
    "glue_request": 1.00 / 1e6,  # Data Catalog requests past the free million a month
    "sqs_request": 0.40 / 1e6,  # standard queue, past the free million a month
}
SQS_REQUESTS_PER_COMMIT = 3
# The tables the bill is stated for: files of 64 MB make 1 GB of 16 files; 10 TB is 81,920
# files of 128 MB.
TABLES = [("1 GB", 16), ("10 TB", 81_920)]
SEED_ON_MANAGED = ("not applicable: it adds every Parquet file in the folder, those of staged commits the catalog "
                   "never ratified too: a wrong table, not a price")


class Recording:
    """moto's request recorder: on for one step, then every request it answered, by tier."""

    def __init__(self, endpoint: str, path: Path):
        self.endpoint, self.path = endpoint, path
        self.post("stop-recording")

    def post(self, what: str):
        request = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{what}", method="POST", data=b"")
        urllib.request.urlopen(request, timeout=30).read()

    def of(self, step):
        """Runs `step` with the recorder on; its result and the requests by tier."""
        self.path.write_text("")
        self.post("start-recording")
        try:
            result = step()
        finally:
            self.post("stop-recording")
        tiers = Counter(tier(json.loads(line)) for line in self.path.read_text().splitlines() if line.strip())
        return result, tiers


def tier(entry: dict) -> str:
    """The price tier of one recorded request."""
    headers = {k.lower(): v for k, v in entry.get("headers", {}).items()}
    target = headers.get("x-amz-target", "")
    if target.startswith("AWSGlue."):
        return "glue"
    if target or (entry["method"] == "POST" and "Action=" in (entry.get("body") or "")):
        return "other"  # STS, SQS and the like: counted and printed, not priced as S3
    method, url = entry["method"], entry["url"]
    path, _, query = url.partition("?")
    path = path.split("://", 1)[-1].partition("/")[2]  # without scheme and host: "bucket/key"
    if method == "DELETE":
        return "s3_free"
    listing = "list-type" in query or "prefix=" in query or "delimiter=" in query or "/" not in path.strip("/")
    if method == "GET" and listing:
        return "s3_put"  # LIST (v1 or v2, or a bare bucket GET) is priced as a PUT
    if method in ("GET", "HEAD"):
        return "s3_get"
    return "s3_put"


def per_million(tiers: Counter, seconds: float, memory_mb: int) -> dict:
    """USD per million commits, by item."""
    million = 1e6
    return {
        "Lambda": million * (seconds * memory_mb / 1024 * PRICE["lambda_gb_second"] + PRICE["lambda_request"]),
        "S3": million * (tiers["s3_get"] * PRICE["s3_get"] + tiers["s3_put"] * PRICE["s3_put"]),
        "Glue": million * tiers["glue"] * PRICE["glue_request"],
        "SQS": million * SQS_REQUESTS_PER_COMMIT * PRICE["sqs_request"],
        "EventBridge": 0.0,
    }


def measure(binary: str, s3, catalog, recording: Recording, n: int) -> dict:
    table = Table(s3, n, False)
    table.create()
    sync(binary, table)  # the bootstrap, not priced: once per table
    # Not priced either: the first commit after it skips the check of the version mirrored last
    # (read from a checkpoint, it has no recorded commit hash), which every later one makes.
    table.append()
    sync(binary, table)
    runs = []
    for _ in range(3):
        table.append()
        runs.append(recording.of(lambda: sync(binary, table)))
    report, tiers = sorted(runs, key=lambda r: r[0]["wall_ms"])[1]
    seed_ms, seed_tiers = recording.of(lambda: seed_approach(catalog, table))
    print(f"  measured {n} files", file=sys.stderr)
    return {"n": n, "ours": (tiers, report["wall_ms"] / 1000), "seed": (seed_tiers, seed_ms / 1000)}


class Managed:
    """A catalog-managed Delta table of N real Parquet files on uc-server, written as
    tests/rig/catalog_managed.py's writer writes one: version 0 created through the catalog,
    the N files in version 1 (ratified and published), then commits staged and ratified."""

    def __init__(self, s3, server: unity.UnityServer, n: int):
        self.s3, self.bucket, self.next_file = s3, f"bench-cm{n}", 0
        s3.create_bucket(Bucket=self.bucket)  # a bucket per table, as cost_curve.Table's
        fields = [cm.field_of(name, type_) for name, type_ in SCHEMA]
        self.table = cm.create(unity.schema_over_bucket(server, self.bucket), f"t{n}", fields)
        self.version = 1
        self.table.commit(1, *self.new_files(n))
        self.table.publish(1)

    def new_files(self, count: int) -> list[dict]:
        """Uploads `count` new data files (same bytes, distinct keys); their adds."""
        body = parquet_bytes(0)
        names = [f"part-{i:07}.parquet" for i in range(self.next_file, self.next_file + count)]
        self.next_file += count
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda name: self.s3.put_object(
                Bucket=self.bucket, Key=cm.s3_key(self.table.uri(name)), Body=body), names))
        stats = json.dumps({"numRecords": ROWS_PER_FILE, "minValues": {"id": 0, "name": "n0"},
                            "maxValues": {"id": ROWS_PER_FILE - 1, "name": f"n{ROWS_PER_FILE - 1}"},
                            "nullCount": {"id": 0, "name": 0}})
        now = int(time.time() * 1000)
        return [{"add": {"path": name, "partitionValues": {}, "size": len(body), "modificationTime": now,
                         "dataChange": True, "stats": stats}} for name in names]

    def append(self) -> str:
        """A commit of one new file, staged and ratified by the catalog, not published: its key."""
        self.version += 1
        return cm.s3_key(self.table.commit(self.version, *self.new_files(1)).location)


def run(command: list[str], env: dict) -> tuple[dict, float]:
    """Runs lakemirror; its last line as JSON and its wall time in ms."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall_ms = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), wall_ms


def invoke_managed(binary: str, table: Managed, key: str, uc_url: str) -> dict:
    """One run of the deployed glue-sync handler on the S3 notification of the staged commit at
    `key`, with the catalog at `uc_url`, as cost_curve.sync runs it on a published one."""
    event = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                          "s3": {"bucket": {"name": table.bucket}, "object": {"key": key}}}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as event_file:
        json.dump(event, event_file)
        event_file.flush()
        response, wall_ms = run([binary, "invoke", "glue-sync", "--event", event_file.name,
                                 "--glue-database", DATABASE], {**os.environ, "UC_URL": uc_url})
    synced = response.get("synced", [])
    if [(r.get("action"), r.get("delta_version")) for r in synced] != [("synced", table.version)]:
        sys.exit(f"lakemirror did not mirror version {table.version} of {table.table.location}: {response}")
    return {**synced[0], "wall_ms": wall_ms}


def measure_managed(binary: str, s3, server: unity.UnityServer, proxy: FaultProxy, recording: Recording,
                    n: int) -> tuple:
    table = Managed(s3, server, n)
    run([binary, "glue-sync", "--table-uri", table.table.location, "--glue-database", DATABASE,
         "--uc-url", proxy.url], dict(os.environ))  # the bootstrap, not priced: once per table
    invoke_managed(binary, table, table.append(), proxy.url)  # as for the plain table: steady state
    counter, runs = CatalogCounter(proxy), []
    for _ in range(3):
        key = table.append()
        mark = counter.mark()
        report, tiers = recording.of(lambda: invoke_managed(binary, table, key, proxy.url))
        runs.append((report, tiers, counter.since(mark)))
    report, tiers, kinds = sorted(runs, key=lambda r: r[0]["wall_ms"])[1]
    print(f"  measured {n} files, catalog-managed", file=sys.stderr)
    return tiers, report["wall_ms"] / 1000, kinds


def scaled(tiers: Counter, factor: float) -> Counter:
    return Counter({k: round(v * factor) for k, v in tiers.items()})


def report(rows: list[dict], memory_mb: int, binary: str) -> str:
    lines = [f"Bill per million commits, USD at us-east-1 list prices ({common.machine()}; local moto S3 + Glue, "
             f"requests as moto recorded them; uc-server behind a counting proxy; {common.today_and_commit()}; "
             f"`{Path(binary).name}` {'debug' if '/debug/' in str(binary) else 'release'} build; Lambda at "
             f"{memory_mb} MB, arm64)", "",
             "| table | approach | measured at | S3 GET / PUT+LIST / Glue requests per commit | Unity Catalog "
             "requests per commit | seconds per commit | Lambda | S3 | Glue | SQS | EventBridge | total |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, files in TABLES:
        below = [r for r in rows if r["n"] <= files] or rows[:1]
        row = max(below, key=lambda r: r["n"])
        for approach in ("ours", "seed", "managed", "seed on managed"):
            name = {"ours": "lakemirror", "seed": "seed: drop, re-create, add_files",
                    "managed": "lakemirror, catalog-managed",
                    "seed on managed": "seed: drop, re-create, add_files, catalog-managed"}[approach]
            if approach == "seed on managed":
                lines.append(f"| {label} | {name} | {SEED_ON_MANAGED} |" + " - |" * 9)
                continue
            tiers, seconds = row[approach][:2]
            catalog = sum(row[approach][2].values()) if approach == "managed" else 0
            where = f"{row['n']:,} files"
            if approach == "seed" and files != row["n"]:
                # Its S3 requests and time are a sum over the files; its Glue requests are not.
                factor = files / row["n"]
                tiers = scaled(tiers, factor)
                tiers["glue"] = row[approach][0]["glue"]
                seconds = seconds * factor
                where += f", S3 and time scaled ×{factor:,.1f} in files"
            bill = per_million(tiers, seconds, memory_mb)
            cells = " | ".join(f"{bill[k]:,.2f}" for k in ("Lambda", "S3", "Glue", "SQS", "EventBridge"))
            if tiers["other"]:
                where += f"; {tiers['other']} other requests, not priced"
            lines.append(f"| {label} | {name} | {where} | {tiers['s3_get']} / {tiers['s3_put']} / {tiers['glue']} "
                         f"| {catalog} | {seconds:.2f} | {cells} | {sum(bill.values()):,.2f} |")
    kinds = ", ".join(f"{r['n']:,} files: " + ", ".join(f"{k} {c}" for k, c in sorted(r["managed"][2].items()))
                      for r in rows)
    lines += ["", f"Unity Catalog requests of the catalog-managed syncs, by kind ({kinds}): Unity Catalog's own "
              "cost, not AWS's, so not in the total; its round trips (through the local proxy) are in the seconds."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="16,10000", help="comma-separated N (active files), each at least 11")
    parser.add_argument("--memory-size", type=int, default=1024, help="the function's MEMORY_SIZE, MB")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    sizes = [int(s) for s in args.sizes.split(",")]
    if min(sizes) < 11:
        sys.exit("--sizes: each N must be at least 11 (ten commits of one file precede the checkpoint)")
    with tempfile.TemporaryDirectory() as scratch:
        recorded = Path(scratch) / "recording.jsonl"
        env = {**os.environ, "MOTO_ENABLE_RECORDING": "True", "MOTO_RECORDER_FILEPATH": str(recorded)}
        moto, endpoint = common.local_moto(env=env)
        os.environ["MEMORY_SIZE"] = str(args.memory_size)
        server = None
        try:
            recording = Recording(endpoint, recorded)
            s3 = boto3.client("s3")
            boto3.client("glue").create_database(DatabaseInput={"Name": DATABASE})
            catalog = judge.glue_catalog()
            server = unity.start(Path(scratch) / "uc")
            with FaultProxy(server.url, rate=0.0) as proxy:
                rows = []
                for n in sizes:
                    rows.append(measure(args.binary, s3, catalog, recording, n))
                    rows[-1]["managed"] = measure_managed(args.binary, s3, server, proxy, recording, n)
        finally:
            if server is not None:
                server.stop()
            moto.terminate()
    print(report(rows, args.memory_size, args.binary))
    print("seconds per commit: the whole process of one sync (start-up included) against the local stand-in; "
          "the middle of 3 runs", file=sys.stderr)


if __name__ == "__main__":
    main()
