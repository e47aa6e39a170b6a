"""The local AWS stand-in shared by the tests, the event loop and the benchmarks: the strict
moto launcher, and the environment that points every client (boto3, delta-rs, lakemirror)
at it and never at a developer's real account."""

import select
import subprocess
import sys
from pathlib import Path

MOTO_STRICT = Path(__file__).with_name("moto_strict.py")
MOTO_START_TIMEOUT_S = 60
# A developer's real profile or session token must never leak into requests.
LEAKY_VARIABLES = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


def aws_env(endpoint: str) -> dict[str, str]:
    """Environment for anything talking to the moto server at `endpoint`."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def stop_process(proc: subprocess.Popen, grace_s: float = 30):
    """Terminates a server the rig started, and kills it if it has not exited within grace_s."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_moto(stderr, **popen) -> tuple[subprocess.Popen, str]:
    """Starts moto_strict on a free loopback port; returns the process and its first stdout
    line (`ready <url>` when it started, else what it said, '' on timeout).

    --port 0: the OS picks a free port and the ready line reports it, so there is no window
    between choosing a port and binding it. stderr (one log line per request) should go to
    a file: an undrained pipe would block moto."""
    proc = subprocess.Popen([sys.executable, str(MOTO_STRICT), "--port", "0", "--host", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=stderr, text=True, **popen)
    # select() blocks until the line or the timeout; no polling sleeps.
    ready, _, _ = select.select([proc.stdout], [], [], MOTO_START_TIMEOUT_S)
    return proc, (proc.stdout.readline().strip() if ready else "")
