#!/usr/bin/env bash
# A private Docker engine for `sam local invoke`, with no network of its own.
#   tests/rig/docker.sh install installs Debian's docker.io when dockerd is missing (as root)
#   eval "$(tests/rig/docker.sh start)"
#       starts the daemon unless it answers already, and prints `export DOCKER_HOST=unix://…`
#       and `LAKEMIRROR_DOCKER_STARTED=1` (or 0 when it was running already)
#   tests/rig/docker.sh stop    stops the daemon that `start` started
# The daemon runs with --bridge=none --iptables=false --ip-forward=false: a container gets a
# network namespace with only `lo`, so nothing in it can reach any address, and the host's
# firewall and forwarding stay as they were. tests/rig/sam_netns.py relays the few loopback
# ports a function needs. Images live in $LAKEMIRROR_CACHE/docker (vfs: no overlay needed).
set -euo pipefail
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
state="${LAKEMIRROR_DOCKER_STATE:-/run/lakemirror-docker}"
socket="unix://$state/docker.sock"

answers() { DOCKER_HOST="$socket" docker version >/dev/null 2>&1; }

install_docker() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "error: dockerd is missing: apt-get install docker.io (as root)" >&2
    exit 1
  fi
  echo "installing the Docker engine (Debian package docker.io) for sam local invoke" >&2
  local started=$SECONDS
  # policy-rc.d keeps the package from starting a system daemon; ours starts below.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io >&2; }
  echo "installed docker.io in $((SECONDS - started)) s" >&2
}

said() {
  printf 'export DOCKER_HOST=%q\nLAKEMIRROR_DOCKER_STARTED=%s\n' "$socket" "$1"
}

start() {
  if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
    echo "error: the Docker engine is missing: run tests/rig/docker.sh install (as root; Debian's docker.io)" >&2
    exit 1
  fi
  if answers; then
    said 0
    return
  fi
  mkdir -p "$state" "$cache/docker"
  local started=$SECONDS
  dockerd --data-root "$cache/docker" --exec-root "$state/exec" --pidfile "$state/dockerd.pid" \
    -H "$socket" --storage-driver=vfs --bridge=none --iptables=false --ip6tables=false \
    --ip-forward=false --ip-masq=false --userland-proxy=false --log-level=warn \
    >"$state/dockerd.log" 2>&1 </dev/null &
  echo $! >"$state/started-by-rig"
  # Poll the socket, not the clock: the daemon answers once it is ready (about a second).
  for _ in $(seq 600); do
    answers && break
    kill -0 "$(cat "$state/started-by-rig")" 2>/dev/null || break
    sleep 0.1
  done
  if ! answers; then
    echo "error: dockerd did not start within a minute; its log:" >&2
    tail -n 30 "$state/dockerd.log" >&2
    stop
    exit 1
  fi
  echo "started dockerd in $((SECONDS - started)) s ($state/dockerd.log)" >&2
  said 1
}

stop() {
  [ -f "$state/started-by-rig" ] || return 0
  local pid
  pid="$(cat "$state/started-by-rig")"
  # Only our daemon: after a reboot or a crash the pid may be another process's.
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
    kill "$pid"
    for _ in $(seq 300); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "dockerd ($pid) did not stop within 30 s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$state/started-by-rig"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  install) command -v dockerd >/dev/null || install_docker ;;
  *) echo "usage: $0 start|stop|install" >&2; exit 2 ;;
esac
