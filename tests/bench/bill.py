"""The bill per million commits (issue 54): what mirroring a million Delta commits costs at
AWS list prices, from requests counted by the S3 + Glue stand-in itself and durations measured
in the same run, for lakemirror and for the seed's drop-and-re-add (a benchmark, not a test).

For each N (active files) it writes an unpartitioned Delta table of N real Parquet files on a
local moto S3 + Glue (as `cost_curve.py` does), bootstraps its mirror, then, with moto's
request recorder on (every request the server answered, not our own count):

- lakemirror: three one-commit syncs of one added file, each one run of the deployed glue-sync
  handler in its own process (`lakemirror invoke glue-sync` on the commit's S3 notification);
  the median's wall time and the recorded requests of one;
- the seed's approach on the same table: list the folder, drop and re-create the Iceberg table,
  pyiceberg `add_files` of every file (what the seed did on every commit).

Each request is priced by its S3 tier (GET and HEAD; PUT, POST, COPY and LIST) or as a Glue
Data Catalog request; Lambda is priced per GB-second at the measured duration and
`--memory-size`, plus its per-request charge; each commit is 3 SQS requests (the event's
SendMessage, the poller's ReceiveMessage and DeleteMessage, an upper bound: both batch); S3's
notifications to EventBridge are AWS service events, which EventBridge does not charge for.
Tables larger than the largest N are priced by scaling the seed's S3 requests and time
linearly in files (they are a sum over the files; its Glue requests are not scaled) and
lakemirror's not at all (its cost is the commit's, docs/performance.md); the output says which
figures are scaled. The seconds are local: against a stand-in answering in well under a
millisecond, on this machine's CPU, priced at arm64's rate; S3 and Glue round trips in a
region add their latency.

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/bill.py \\
        [--sizes 16,10000] [--memory-size 1024]
"""

import argparse
import json
import os
import sys
import tempfile
import urllib.request
from collections import Counter
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from cost_curve import DATABASE, Table, seed_approach, sync  # noqa: E402
from rig import judge  # noqa: E402

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
    runs = []
    for _ in range(3):
        table.append()
        runs.append(recording.of(lambda: sync(binary, table)))
    report, tiers = sorted(runs, key=lambda r: r[0]["wall_ms"])[1]
    seed_ms, seed_tiers = recording.of(lambda: seed_approach(catalog, table))
    print(f"  measured {n} files", file=sys.stderr)
    return {"n": n, "ours": (tiers, report["wall_ms"] / 1000), "seed": (seed_tiers, seed_ms / 1000)}


def scaled(tiers: Counter, factor: float) -> Counter:
    return Counter({k: round(v * factor) for k, v in tiers.items()})


def report(rows: list[dict], memory_mb: int, binary: str) -> str:
    lines = [f"Bill per million commits, USD at us-east-1 list prices ({common.machine()}; local moto S3 + Glue, "
             f"requests as moto recorded them; {common.today_and_commit()}; `{Path(binary).name}` "
             f"{'debug' if '/debug/' in str(binary) else 'release'} build; Lambda at {memory_mb} MB, arm64)", "",
             "| table | approach | measured at | S3 GET / PUT+LIST / Glue requests per commit | seconds per commit "
             "| Lambda | S3 | Glue | SQS | EventBridge | total |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, files in TABLES:
        below = [r for r in rows if r["n"] <= files] or rows[:1]
        row = max(below, key=lambda r: r["n"])
        for approach in ("ours", "seed"):
            tiers, seconds = row[approach]
            where = f"{row['n']:,} files"
            if approach == "seed" and files != row["n"]:
                # Its S3 requests and time are a sum over the files; its Glue requests are not.
                factor = files / row["n"]
                tiers = scaled(tiers, factor)
                tiers["glue"] = row[approach][0]["glue"]
                seconds = seconds * factor
                where += f", S3 and time scaled ×{factor:,.1f} in files"
            bill = per_million(tiers, seconds, memory_mb)
            name = "lakemirror" if approach == "ours" else "seed: drop, re-create, add_files"
            cells = " | ".join(f"{bill[k]:,.2f}" for k in ("Lambda", "S3", "Glue", "SQS", "EventBridge"))
            if tiers["other"]:
                where += f"; {tiers['other']} other requests, not priced"
            lines.append(f"| {label} | {name} | {where} | {tiers['s3_get']} / {tiers['s3_put']} / {tiers['glue']} "
                         f"| {seconds:.2f} | {cells} | {sum(bill.values()):,.2f} |")
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
        try:
            recording = Recording(endpoint, recorded)
            s3 = boto3.client("s3")
            boto3.client("glue").create_database(DatabaseInput={"Name": DATABASE})
            catalog = judge.glue_catalog()
            rows = [measure(args.binary, s3, catalog, recording, n) for n in sizes]
        finally:
            moto.terminate()
    print(report(rows, args.memory_size, args.binary))
    print("seconds per commit: the whole process of one sync (start-up included) against the local stand-in; "
          "the middle of 3 runs", file=sys.stderr)


if __name__ == "__main__":
    main()
