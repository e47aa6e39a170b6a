#!/usr/bin/env bash
# The functions as Lambda runs them, on this machine: `sam build` (x86_64), then
# `sam local invoke` of glue-sync, lakebase-sync and unity-register on the README's event
# files, in Lambda's container on a private Docker engine, against a local moto (S3, Glue,
# Secrets Manager), PostgreSQL and Unity Catalog server; then the Iceberg table as pyiceberg
# reads it, the PostgreSQL rows and the Unity Catalog entry. No registry, no AWS account:
# the engine comes from Debian's docker.io (installed when missing, as root), the base image
# is assembled from this machine's files, and every connection stays on loopback.
# The first run builds the functions (about 15 minutes) and uc-server (about 9).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
venv="$(tests/rig/venv.sh)"
tests/rig/docker.sh install
tests/rig/uc-server.sh >/dev/null
LAKEMIRROR_SAM_BUILD="$(tests/rig/sam_build.sh)"
export LAKEMIRROR_SAM_BUILD
exec "$venv/bin/python" localstack/sam_local_demo.py "$@"
