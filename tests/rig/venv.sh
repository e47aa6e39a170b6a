#!/usr/bin/env bash
# Prints the path of a Python venv with pinned packages, creating it first when needed.
#   tests/rig/venv.sh                          the test rig (tests/requirements.txt)
#   tests/rig/venv.sh tests/sam-requirements.txt   the deployment tools (SAM CLI, cargo lambda)
#   tests/rig/venv.sh tests/bench-requirements.txt the benchmark suite (adds matplotlib)
# Venvs live outside the clone, keyed by the requirements' hash, so CI and later runs reuse them.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
requirements="${1:-$here/requirements.txt}"
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
name="$(basename "$requirements" .txt)"
# The key covers files pulled in with `-r` too, so a change there makes a new venv.
included="$(sed -n 's/^-r[[:space:]]*//p' "$requirements" | sed "s|^|$(dirname "$requirements")/|")"
key="$(cat "$requirements" $included | sha256sum | cut -c1-12)"
venv="$cache/venv-$([ "$name" = requirements ] || echo "$name-")$key"
if [ ! -f "$venv/.complete" ]; then
  echo "creating Python venv $venv from $requirements" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2
  touch "$venv/.complete"
fi
echo "$venv"
