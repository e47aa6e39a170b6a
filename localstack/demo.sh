#!/usr/bin/env bash
# The demo: a local moto S3/Glue, a partitioned Delta table written by delta-rs with a few
# commits, mirrored by `lakemirror glue-sync`, and read back by pyiceberg and DuckDB through
# Glue beside the Delta history and the Iceberg snapshot history. Needs no Docker and no AWS.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(tests/rig/venv.sh)"
echo "building lakemirror (release)..." >&2
cargo build --release --bin lakemirror
export LAKEMIRROR_BIN="${CARGO_TARGET_DIR:-$(pwd)/target}/release/lakemirror"
exec "$venv/bin/python" localstack/demo.py "$@"
