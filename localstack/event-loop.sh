#!/usr/bin/env bash
# The event-driven deployment locally, without Docker: moto + S3->SQS notifications + the
# glue-sync function under `cargo lambda watch` + an SQS poller. `--help` for options;
# `--demo 5` writes five Delta commits and shows the Iceberg table following them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$("$here/../tests/rig/venv.sh")"
export PATH="$venv/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/lakemirror/target}"
exec "$venv/bin/python" "$here/event_loop.py" "$@"
