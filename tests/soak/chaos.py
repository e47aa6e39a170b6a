"""Soak: event chaos for longer than CI can afford. In each of --schedules schedules a 50-commit
Delta table is committed again, one commit at a time, into a fresh copy with a fresh Glue
database; the commits' events reach the glue-sync handler delayed (so reordered), duplicated,
some lost, in random SQS batches; then one final sync. Every schedule is judged by pyiceberg
through Glue against delta-rs. About 4 s per schedule with the debug build.

    $(tests/rig/venv.sh)/bin/python tests/soak/chaos.py [--schedules 1000] [--seed 1] [--binary PATH]
        [--fault-rate 0.1]

With --fault-rate the handler reaches S3 and Glue through the fault-injecting proxy
(tests/rig/fault_proxy.py: 500, 503, throttling, resets, delays); a message the handler reports
failed is redelivered, as SQS does, up to 5 times.

Prints progress and the counts (schedules run, deliveries, duplicates, drops, redeliveries,
invocations, snapshots, commits synced, faults injected, mismatches); exits 1 on any mismatch,
with its reasons. Uses a local moto server of its own; nothing else is touched."""

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "bench"))

import boto3  # noqa: E402

from acceptance import chaos  # noqa: E402
from common import add_binary_argument, check_binary  # noqa: E402
from rig import judge, local_aws  # noqa: E402
from rig.fault_proxy import FaultProxy  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=1000, help="schedules to run [default: 1000]")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the schedules [default: 1]")
    parser.add_argument("--fault-rate", type=float, default=0.0,
                        help="share of the handler's S3/Glue requests that fail [default: 0, none]")
    add_binary_argument(parser)
    args = parser.parse_args()
    check_binary(args.binary)
    with tempfile.TemporaryDirectory(prefix="lakemirror-soak-") as tmp:
        tmp = Path(tmp)
        with open(tmp / "moto.log", "wb") as log:
            moto, line = local_aws.start_moto(stderr=log)
        try:
            if not line.startswith("ready "):
                sys.exit(f"moto did not start: {line!r}")
            os.environ.update(local_aws.aws_env(line.split()[1]))
            for name in local_aws.LEAKY_VARIABLES:
                os.environ.pop(name, None)
            bucket = f"soak-{uuid.uuid4().hex[:12]}"
            boto3.client("s3").create_bucket(Bucket=bucket)
            options = judge.delta_storage_options()
            expected, files = chaos.source_table(bucket, "chaos/source", options)
            counts, rng, started = chaos.Counts(), random.Random(args.seed), time.monotonic()
            with FaultProxy(line.split()[1], rate=args.fault_rate, seed=args.seed) as proxy:
                proxy_url = proxy.url if args.fault_rate > 0 else None
                for n in range(1, args.schedules + 1):
                    chaos.run_schedule(args.binary, tmp, bucket, "chaos/source", expected, files, rng, counts,
                                       proxy_url=proxy_url)
                    if n % 50 == 0 or n == args.schedules:
                        faults = f", faults injected: {sum(proxy.injected.values())} {dict(proxy.injected)}" \
                            if proxy_url else ""
                        print(f"[{time.monotonic() - started:7.0f} s] {counts.line()}{faults}", flush=True)
        finally:
            moto.terminate()
            moto.wait()
    for failure in counts.failures:
        print("MISMATCH", failure)
    sys.exit(1 if counts.mismatches else 0)


if __name__ == "__main__":
    main()
