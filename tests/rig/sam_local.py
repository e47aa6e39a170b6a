"""`sam local invoke` on this machine: the functions in Lambda's container, against local moto,
PostgreSQL and uc-server, with every byte on loopback.

    with SamLocal(moto_url, relay_ports=[pg_port, uc_port]) as sam:
        result = sam.invoke("GlueSyncFunction", event, {"GLUE_DATABASE": "sales", ...})

What it sets up (and stops again, if it started it):
- a private Docker engine without a network (tests/rig/docker.sh),
- the local provided.al2023 stand-in whose AWS endpoint is 127.0.0.1:4566 (tests/rig/sam_image.sh),
- the loopback relays into each Lambda container (tests/rig/sam_netns.py): 4566 and moto's own
  port to moto, and each of `relay_ports` to the same port on this machine.

The x86_64 build, laid out as `sam build` lays it out, is an input ($LAKEMIRROR_SAM_BUILD): the
test command makes it from its debug build (tests/rig/sam_debug_build.sh), localstack/sam-local.sh
with `sam build` itself (tests/rig/sam_build.sh, the default $LAKEMIRROR_CACHE/sam-build-x86_64
when the variable is unset). `sam` runs with a clean
environment: SAM hands a function only the variables its template declares, taken from the
caller's environment too, so a stray RUST_LOG or TABLE_PREFIXES of the test process would leak
in. Its HOME is a fresh folder whose SAM settings say telemetry off and the PyPI version check
done, so nothing leaves the machine."""

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rig import local_aws

RIG = Path(__file__).resolve().parent
REPO = RIG.parent.parent
CACHE = Path(os.environ.get("LAKEMIRROR_CACHE", Path.home() / ".cache" / "lakemirror"))
IN_CONTAINER_AWS_PORT = 4566  # sam_image.sh --loopback: AWS_ENDPOINT_URL=http://127.0.0.1:4566
ARCHITECTURE = "x86_64"
START_TIMEOUT_S = 30


@dataclass
class Invocation:
    returncode: int
    stdout: str
    stderr: str
    json: Any  # the function's answer (sam prints it as the last stdout line), None if not JSON
    seconds: float


def sam_build_dir() -> Path:
    return Path(os.environ.get("LAKEMIRROR_SAM_BUILD", CACHE / f"sam-build-{ARCHITECTURE}"))


def rig(*command: str, env: dict[str, str] | None = None) -> str:
    """Runs a rig script; its stderr goes on, its last stdout line comes back."""
    out = subprocess.run(list(command), cwd=REPO, capture_output=True, text=True, env=env)
    sys.stderr.write(out.stderr)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {out.returncode}: {out.stderr.strip()[-2000:]}")
    return out.stdout


def sam_venv() -> Path:
    return Path(rig(str(RIG / "venv.sh"), "tests/sam-requirements.txt").strip().splitlines()[-1])


def missing_build() -> str | None:
    """Why `sam local invoke` cannot run here yet, or None."""
    build = sam_build_dir()
    template = build / "template.yaml"
    if not template.is_file():
        return (f"no x86_64 build of the functions at {build}: run tests/rig/sam_debug_build.sh (after "
                f"`cargo build --workspace --bins`) or tests/rig/sam_build.sh and point LAKEMIRROR_SAM_BUILD at it")
    for function in ("GlueSyncFunction", "LakebaseSyncFunction", "UnityRegisterFunction"):
        bootstrap = build / function / "bootstrap"
        if not bootstrap.is_file():
            return f"{bootstrap} is missing: run tests/rig/sam_debug_build.sh or tests/rig/sam_build.sh again"
    return None


class SamLocal:
    def __init__(self, moto_url: str, relay_ports: list[int] = (), log_dir: Path | None = None):
        self.moto_port = urlparse(moto_url).port
        self.relay_ports = list(relay_ports)
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="sam-local-"))
        self.home = Path(tempfile.mkdtemp(prefix="sam-home-"))
        self.docker_started = False
        self.relay = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        why = missing_build()
        if why:
            raise RuntimeError(why)
        self.build = sam_build_dir()
        self.venv = sam_venv()
        said = dict(line.removeprefix("export ").split("=", 1) for line in rig(str(RIG / "docker.sh"), "start").splitlines())
        self.docker_host = said["DOCKER_HOST"]
        self.docker_started = said["LAKEMIRROR_DOCKER_STARTED"] == "1"
        image = rig(str(RIG / "sam_image.sh"), "--loopback", env={**os.environ, "DOCKER_HOST": self.docker_host})
        self.image = image.strip().splitlines()[-1]
        relays = [f"{IN_CONTAINER_AWS_PORT}={self.moto_port}", str(self.moto_port), *map(str, self.relay_ports)]
        self.relay_log = open(self.log_dir / "sam_netns.log", "wb")
        self.relay = subprocess.Popen(
            [sys.executable, str(RIG / "sam_netns.py"), *[a for r in relays for a in ("--relay", r)]],
            stdout=subprocess.PIPE, stderr=self.relay_log, text=True,
            env={**os.environ, "DOCKER_HOST": self.docker_host})
        ready, _, _ = select.select([self.relay.stdout], [], [], START_TIMEOUT_S)
        line = self.relay.stdout.readline().strip() if ready else ""
        if line != "ready":
            raise RuntimeError(f"sam_netns.py did not start ({line!r}): {(self.log_dir / 'sam_netns.log').read_text()}")
        sam_settings = self.home / ".aws-sam"
        sam_settings.mkdir(parents=True, exist_ok=True)
        (sam_settings / "metadata.json").write_text(json.dumps(
            {"telemetryEnabled": False, "lastVersionCheck": time.time() + 10 * 365 * 86400}))

    def environment(self) -> dict[str, str]:
        return {
            "PATH": f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "DOCKER_HOST": self.docker_host,
            "SAM_CLI_TELEMETRY": "0",
            # The credentials SAM hands the function; its calls go to the in-container moto port.
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def command(self, function: str, event_file: Path, env_file: Path) -> list[str]:
        return ["sam", "local", "invoke", function,
                "--template", str(self.build / "template.yaml"),
                "--parameter-overrides", f"Architecture={ARCHITECTURE}",
                "--region", "us-east-1",
                "--invoke-image", self.image, "--skip-pull-image",
                "--container-host", "127.0.0.1", "--container-host-interface", "127.0.0.1",
                "--env-vars", str(env_file), "--event", str(event_file)]

    def invoke(self, function: str, event: dict | Path, env: dict[str, str], timeout: int = 600) -> Invocation:
        """Runs `sam local invoke <function>` on the event with the function's variables `env`
        (names the template does not declare are ignored by SAM, as on AWS)."""
        work = Path(tempfile.mkdtemp(prefix=f"{function}-", dir=self.log_dir))
        if isinstance(event, Path):
            event_file = event
        else:
            event_file = work / "event.json"
            event_file.write_text(json.dumps(event))
        env_file = work / "env.json"
        env_file.write_text(json.dumps({function: env}))
        started = time.monotonic()
        try:
            proc = subprocess.run(self.command(function, event_file, env_file), cwd=REPO, capture_output=True,
                                  text=True, env=self.environment(), timeout=timeout)
        except subprocess.TimeoutExpired:
            self.remove_lambda_containers()  # sam was killed: its container would stay
            raise
        if proc.returncode != 0 and self.relay.poll() is not None:
            proc.stderr += f"\n--- sam_netns.py exited:\n{(self.log_dir / 'sam_netns.log').read_text()[-3000:]}"
        lines = proc.stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            answer = None
        return Invocation(proc.returncode, proc.stdout, proc.stderr, answer, time.monotonic() - started)

    @contextmanager
    def lambda_endpoint(self, env_by_function: dict[str, dict[str, str]]):
        """`sam local start-lambda` on a loopback port: yields its URL, for an AWS SDK's
        Lambda client (`invoke(FunctionName="GlueSyncFunction", ...)`)."""
        work = Path(tempfile.mkdtemp(prefix="start-lambda-", dir=self.log_dir))
        env_file = work / "env.json"
        env_file.write_text(json.dumps(env_by_function))
        with socket.socket() as probe:  # a free port; SAM binds it a moment later
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        log = open(work / "sam.log", "wb")
        proc = subprocess.Popen(
            ["sam", "local", "start-lambda", "--template", str(self.build / "template.yaml"),
             "--parameter-overrides", f"Architecture={ARCHITECTURE}", "--region", "us-east-1",
             "--invoke-image", self.image, "--skip-pull-image",
             "--container-host", "127.0.0.1", "--container-host-interface", "127.0.0.1",
             "--host", "127.0.0.1", "--port", str(port), "--env-vars", str(env_file)],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=self.environment())
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:  # poll the port until SAM's server answers, or SAM gave up
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"sam local start-lambda did not start: {(work / 'sam.log').read_text()[-3000:]}")
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            local_aws.stop_process(proc)
            log.close()

    def remove_lambda_containers(self):
        env = {**os.environ, "DOCKER_HOST": self.docker_host}
        ids = subprocess.run(["docker", "ps", "-aq", "--filter", "label=sam.cli.container.type=lambda"],
                             capture_output=True, text=True, env=env).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, env=env)

    def close(self):
        shutil.rmtree(self.home, ignore_errors=True)
        if self.relay is not None:
            local_aws.stop_process(self.relay)
            self.relay.stdout.close()
            self.relay_log.close()
            self.relay = None
        if self.docker_started:
            subprocess.run([str(RIG / "docker.sh"), "stop"], check=False)
            self.docker_started = False
