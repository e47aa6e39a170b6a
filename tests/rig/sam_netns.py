"""Loopback relays between this machine and the Lambda containers `sam local` starts.

The rig's Docker engine (tests/rig/docker.sh) has no bridge: a container's network namespace
holds only `lo`, so SAM cannot reach the runtime interface emulator it published on
127.0.0.1:<port>, and the function cannot reach moto, PostgreSQL or uc-server. This process
watches the engine for SAM's Lambda containers and, for each, joins its network namespace
(setns, one thread at a time) to relay

- host 127.0.0.1:<the port SAM published> -> container 127.0.0.1:8080 (the emulator), and
- container 127.0.0.1:<inner> -> host 127.0.0.1:<outer> for every `--relay inner=outer`
  (`--relay 5432` is `5432=5432`: the URLs moto hands out stay valid inside).

Every byte goes from one loopback to another; the container still has no route anywhere else.

    python tests/rig/sam_netns.py --relay 4566=<moto port> --relay <moto port> --relay <pg port>

prints `ready` once it listens for containers, one line per container to stderr, and runs
until it is terminated. DOCKER_HOST (unix://…) names the engine. Needs root (setns)."""

import argparse
import ctypes
import http.client
import json
import os
import socket
import sys
import threading
import time
import urllib.parse

CLONE_NEWNET = 0x40000000
EMULATOR_PORT = 8080
# SAM polls its port for 20 s (SAM_CLI_CONTAINER_CONNECTION_TIMEOUT); the emulator listens
# within a second of the container starting.
EMULATOR_WAIT_S = 20.0
LAMBDA_LABEL = "sam.cli.container.type=lambda"

libc = ctypes.CDLL("libc.so.6", use_errno=True)


class DockerSocket(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def docker_socket_path() -> str:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        sys.exit(f"sam_netns: DOCKER_HOST must be a unix socket of this machine, not {host!r}")
    return host[len("unix://"):]


def docker_get(path: str) -> dict:
    con = DockerSocket(docker_socket_path())
    try:
        con.request("GET", path)
        response = con.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"docker GET {path}: {response.status} {body[:300]!r}")
        return json.loads(body)
    finally:
        con.close()


def socket_in(pid: int) -> socket.socket:
    """A TCP socket in the network namespace of process `pid`. A thread enters the namespace,
    makes the socket and ends; the socket keeps its namespace for bind, listen and connect."""
    made: list = []

    def enter():
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)  # gone once the container exited
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into the network namespace of pid {pid}: {os.strerror(err)}")
                made.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            finally:
                os.close(fd)
        except BaseException as e:  # handed to the caller, not lost with this thread
            made.append(e)

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    if isinstance(made[0], Exception):
        raise made[0]
    return made[0]


def pump(source: socket.socket, sink: socket.socket):
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def splice(a: socket.socket, b: socket.socket):
    back = threading.Thread(target=pump, args=(b, a), daemon=True)
    back.start()
    pump(a, b)
    back.join()
    a.close()
    b.close()


def listen(sock: socket.socket, port: int) -> socket.socket:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


def serve(listener: socket.socket, connect_far_side):
    """Accepts until the listener is shut down; each connection is spliced to a new far side."""
    while True:
        try:
            near, _ = listener.accept()
        except OSError:
            return

        def handle(near=near):
            try:
                far = connect_far_side()
            except Exception as e:  # closing `near` tells the caller at once, instead of a hang
                print(f"sam_netns: {e}", file=sys.stderr, flush=True)
                near.close()
                return
            splice(near, far)

        threading.Thread(target=handle, daemon=True).start()


class Container:
    def __init__(self, container_id: str, relays: list[tuple[int, int]]):
        info = docker_get(f"/containers/{container_id}/json")
        self.name = info["Name"].lstrip("/")
        self.pid = info["State"]["Pid"]
        binding = (info["HostConfig"].get("PortBindings") or {}).get(f"{EMULATOR_PORT}/tcp") or []
        self.listeners: list[socket.socket] = []
        try:
            # Inside first: the function only calls out while it handles an event, and events
            # arrive through the host listener opened after these.
            for inner, outer in relays:
                self.start(listen(socket_in(self.pid), inner), lambda outer=outer: host_connection(outer))
            if binding:
                host_port = int(binding[0]["HostPort"])
                self.start(listen(socket.socket(socket.AF_INET, socket.SOCK_STREAM), host_port), self.emulator)
        except BaseException:
            self.close()
            raise
        print(f"sam_netns: {self.name}: host 127.0.0.1:{binding[0]['HostPort'] if binding else '-'} -> container "
              f":{EMULATOR_PORT}; container {', '.join(f':{i} -> host :{o}' for i, o in relays)}",
              file=sys.stderr, flush=True)

    def start(self, listener, connect_far_side):
        self.listeners.append(listener)
        threading.Thread(target=serve, args=(listener, connect_far_side), daemon=True).start()

    def emulator(self) -> socket.socket:
        deadline = time.monotonic() + EMULATOR_WAIT_S
        while True:
            sock = socket_in(self.pid)
            try:
                sock.settimeout(5)
                sock.connect(("127.0.0.1", EMULATOR_PORT))
                sock.settimeout(None)
                return sock
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise OSError(f"{self.name}: nothing listens on :{EMULATOR_PORT} in the container")
                time.sleep(0.05)  # the emulator is still starting: poll its port

    def close(self):
        for listener in self.listeners:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        print(f"sam_netns: {self.name}: stopped", file=sys.stderr, flush=True)


def host_connection(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.settimeout(None)  # the 30 s were for connecting; a slow query may be silent longer
    return sock


# Taken inside every Lambda container: the emulator's invoke port and its runtime API.
RESERVED_PORTS = (EMULATOR_PORT, 9001)


def relay_spec(text: str) -> tuple[int, int]:
    inner, _, outer = text.partition("=")
    spec = int(inner), int(outer or inner)
    if spec[0] in RESERVED_PORTS:
        raise argparse.ArgumentTypeError(f"port {spec[0]} is the emulator's own inside the container")
    return spec


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--relay", action="append", type=relay_spec, default=[], metavar="INNER[=OUTER]",
                        help="container 127.0.0.1:INNER -> host 127.0.0.1:OUTER (default OUTER = INNER)")
    args = parser.parse_args()

    filters = json.dumps({"type": ["container"], "event": ["start", "die"], "label": [LAMBDA_LABEL]})
    events = DockerSocket(docker_socket_path())
    events.request("GET", "/events?filters=" + urllib.parse.quote(filters))
    stream = events.getresponse()
    if stream.status != 200:
        sys.exit(f"sam_netns: docker events: {stream.status} {stream.read()[:300]!r}")
    containers: dict[str, Container] = {}

    def started(container_id):
        if container_id not in containers:
            try:
                containers[container_id] = Container(container_id, args.relay)
            except Exception as e:  # one container's failure (it exited early, say) is not the next one's
                print(f"sam_netns: cannot relay for container {container_id[:12]}: {e!r}", file=sys.stderr, flush=True)

    # Containers started before this process (sam local start-lambda keeps warm ones).
    running = docker_get("/containers/json?filters=" + urllib.parse.quote(json.dumps({"label": [LAMBDA_LABEL]})))
    for container in running:
        started(container["Id"])
    print("ready", flush=True)
    while line := stream.readline():
        event = json.loads(line)
        container_id = event.get("id") or event.get("Actor", {}).get("ID")
        if event.get("status") == "start" or event.get("Action") == "start":
            started(container_id)
        elif container_id in containers:
            containers.pop(container_id).close()


if __name__ == "__main__":
    main()
