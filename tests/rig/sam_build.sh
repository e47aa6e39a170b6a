#!/usr/bin/env bash
# `sam build` of the three functions for x86_64 into $LAKEMIRROR_CACHE/sam-build-x86_64, the
# build `sam local invoke` runs here (the stack's default, arm64, would need an emulator this
# machine does not have). Prints the build folder. cargo-lambda compiles with zig into
# $CARGO_TARGET_DIR/x86_64-unknown-linux-gnu: about 15 minutes the first time, then only what
# changed. Never run it beside another `sam build` on the same CARGO_TARGET_DIR: both write
# target/lambda/<function>/bootstrap.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
build="${LAKEMIRROR_SAM_BUILD:-$cache/sam-build-x86_64}"
sam_venv="$(tests/rig/venv.sh tests/sam-requirements.txt)"
export PATH="$sam_venv/bin:$PATH" SAM_CLI_TELEMETRY=0
if ! rustup target list --installed | grep -qx x86_64-unknown-linux-gnu; then
  rustup target add x86_64-unknown-linux-gnu >&2
fi
started=$SECONDS
sam build --template template.yaml --build-dir "$build" --parameter-overrides Architecture=x86_64 >&2
echo "sam build (x86_64) took $((SECONDS - started)) s" >&2
echo "$build"
