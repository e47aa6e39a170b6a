"""A throwaway PostgreSQL cluster on a loopback port, from Debian's `postgresql` package.

The server refuses to run as root, so when the tests run as root the cluster belongs to the
`postgres` user (runuser). Password authentication (SCRAM) over TCP, so tests can check that
the password never reaches lakemirror's output.
"""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass

USER, PASSWORD = "lakemirror", "pw-Secret-7f3a"


@dataclass
class Postgres:
    port: int
    data_dir: str
    run_as: list[str]

    @property
    def url(self) -> str:
        return f"postgres://{USER}:{PASSWORD}@127.0.0.1:{self.port}/postgres?sslmode=disable"

    def stop(self):
        subprocess.run([*self.run_as, _bin("pg_ctl"), "-D", self.data_dir, "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    if not found or not found[-1]:
        raise RuntimeError(f"PostgreSQL's {name} not found: apt-get install postgresql")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start() -> Postgres:
    run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data_dir = tempfile.mkdtemp(prefix="lakemirror-pg-")
    if run_as:
        shutil.chown(data_dir, "postgres", "postgres")
    pwfile = os.path.join(data_dir, "..", f"{os.path.basename(data_dir)}.pw")
    with open(pwfile, "w") as f:
        f.write(PASSWORD)
    if run_as:
        shutil.chown(pwfile, "postgres", "postgres")
    try:
        subprocess.run([*run_as, _bin("initdb"), "-D", data_dir, "-U", USER, "--pwfile", pwfile,
                        "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True)
    finally:
        os.remove(pwfile)
    port = _free_port()
    options = f"-p {port} -k {data_dir} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run([*run_as, _bin("pg_ctl"), "-D", data_dir, "-o", options, "-l", os.path.join(data_dir, "log"),
                    "-w", "start"], check=True, capture_output=True)
    return Postgres(port=port, data_dir=data_dir, run_as=run_as)
