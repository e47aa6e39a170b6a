#!/usr/bin/env bash
# Prints the path of the Python venv with the test rig's pinned packages, creating it first
# when needed. It lives outside the clone (keyed by the requirements' hash) so CI and later
# runs reuse it.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
venv="$cache/venv-$(sha256sum "$here/requirements.txt" | cut -c1-12)"
if [ ! -x "$venv/bin/pytest" ]; then
  echo "creating Python venv $venv (moto, pyiceberg, deltalake, duckdb)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
fi
echo "$venv"
