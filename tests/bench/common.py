"""What the benchmarks share: the lakemirror binary they time, the local moto they run against,
and the caption facts."""

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from rig import local_aws  # noqa: E402


def local_moto(stderr=subprocess.DEVNULL, **popen) -> tuple[subprocess.Popen, str]:
    """Starts the rig's strict moto and points this process's AWS clients (and the lakemirror
    runs it starts) at it: the process and its endpoint. Exits when moto does not start."""
    moto, line = local_aws.start_moto(stderr=stderr, **popen)
    if not line.startswith("ready "):
        sys.exit(f"moto did not start: {line!r}")
    endpoint = line.split()[1]
    os.environ.update(local_aws.aws_env(endpoint))
    return moto, endpoint


def add_binary_argument(parser):
    parser.add_argument("--binary", default=os.environ.get("LAKEMIRROR_BIN", str(
        Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release" / "lakemirror")),
        help="the lakemirror binary to time [default: $LAKEMIRROR_BIN, else the release build]")


def check_binary(binary: str):
    if not Path(binary).is_file():
        sys.exit(f"no lakemirror binary at {binary}: cargo build --release --bin lakemirror (or --binary)")


def machine() -> str:
    """e.g. `x86_64, 2 cores, 24 GB`."""
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem_gb:.0f} GB"


def today_and_commit() -> str:
    """e.g. `2026-12-01; commit 3fb2f42`."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    return f"{datetime.date.today().isoformat()}; commit {commit}"
