#!/usr/bin/env bash
# The test command: sets up what the tests need on a fresh machine, then runs every test.
#   Rust unit tests (planning, log replay, type mapping) and the end-to-end tests in tests/,
#   which start their own moto S3/Glue, PostgreSQL, Unity Catalog server (uc-server),
#   Iceberg REST catalog (rustberg) and Docker engine (for `sam local invoke`), and judge
#   with pyiceberg, DuckDB, Java Iceberg and delta-rs.
# Environment: LAKEMIRROR_DELTA_TABLES (default ../shared/delta-tables), LAKEMIRROR_JAVA_ICEBERG
# (the Java Iceberg reader kit, default ../shared/tools/java-iceberg), CARGO_TARGET_DIR,
# LAKEMIRROR_CACHE (where the Python venvs are kept, default ~/.cache/lakemirror).
set -euo pipefail
cd "$(dirname "$0")/.."
# A line per phase as it starts, and a table of how long each took at the end (also when a
# phase fails), so a slow first run shows where its time goes.
phases=()
phase_started=$SECONDS
phase_name=""
phase() {
  if [ -n "$phase_name" ]; then phases+=("$phase_name|$((SECONDS - phase_started))"); fi
  phase_name="$1"
  phase_started=$SECONDS
  echo "--- tests/run.sh: $1" >&2
}
phase_table() {
  local status=${1:-$?}
  if [ -n "$phase_name" ]; then phases+=("$phase_name|$((SECONDS - phase_started))"); fi
  {
    echo "--- tests/run.sh phases (exit $status)"
    printf '%-44s %8s\n' phase seconds
    for row in "${phases[@]}"; do printf '%-44s %8s\n' "${row%%|*}" "${row##*|}"; done
    printf '%-44s %8s\n' total "$SECONDS"
  } >&2
}
trap phase_table EXIT
phase "system packages (PostgreSQL, PostGIS, Java)"
export LAKEMIRROR_DELTA_TABLES="${LAKEMIRROR_DELTA_TABLES:-$(pwd)/../shared/delta-tables}"
if [ ! -f "$LAKEMIRROR_DELTA_TABLES/expected.json" ]; then
  echo "error: the shared Delta test tables are missing at $LAKEMIRROR_DELTA_TABLES; set LAKEMIRROR_DELTA_TABLES" >&2
  exit 1
fi
# PostgreSQL for the reverse-sync tests: Debian's package (tests start their own cluster).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing PostgreSQL (Debian package postgresql) for the reverse-sync tests" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; }
  else
    echo "error: PostgreSQL server binaries are missing: apt-get install postgresql" >&2
    exit 1
  fi
fi
# PostGIS for the reverse sync of geometry/geography columns (tests/acceptance/lakebase/
# test_lakebase_features.py creates the extension in one of its databases): Debian's
# postgresql-<major>-postgis-3, for the major version installed above.
pg_major="$(ls -d /usr/lib/postgresql/*/ | sort -V | tail -n 1 | xargs basename)"
if [ ! -f "/usr/share/postgresql/$pg_major/extension/postgis.control" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing PostGIS (Debian package postgresql-$pg_major-postgis-3) for the reverse-sync tests" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "postgresql-$pg_major-postgis-3" >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "postgresql-$pg_major-postgis-3" >&2; }
  else
    echo "error: PostGIS is missing: apt-get install postgresql-$pg_major-postgis-3" >&2
    exit 1
  fi
fi
phase "Java 17"
# Java Iceberg 1.10.2 (the reader Athena, EMR and Spark build on) as the third judge: the kit
# in ../shared/tools/java-iceberg makes its own cached venv (pyspark + the Iceberg runtime);
# it needs Java 17.
export LAKEMIRROR_JAVA_ICEBERG="${LAKEMIRROR_JAVA_ICEBERG:-$(pwd)/../shared/tools/java-iceberg}"
if [ ! -x "$LAKEMIRROR_JAVA_ICEBERG/setup.sh" ]; then
  echo "error: the Java Iceberg reader kit is missing at $LAKEMIRROR_JAVA_ICEBERG; set LAKEMIRROR_JAVA_ICEBERG" >&2
  exit 1
fi
# javac too: the format version 3 judge (tests/rig/java_generic.py) compiles a small reader
# against the kit's Iceberg jar at test time, so the JDK, not only the runtime.
if ! command -v java >/dev/null || ! command -v javac >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Java 17 (Debian package openjdk-17-jdk-headless) for the Java Iceberg judges" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jdk-headless >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jdk-headless >&2; }
  else
    echo "error: java or javac is missing: apt-get install openjdk-17-jdk-headless" >&2
    exit 1
  fi
fi
# The Docker engine `sam local invoke` runs the functions in (Debian's docker.io; the tests
# start a private daemon without a network and stop it again).
phase "Docker engine"
tests/rig/docker.sh install
# What the build does not need runs beside it: the Python venvs (the test rig's, the SAM CLI's)
# and the Java kit's, and the two servers the tests run (a Unity Catalog server, uc-server,
# and an Iceberg REST catalog, rustberg; each built once from crates.io and cached outside
# the clone). A build's serial stretches (a large crate, the linker) leave a core idle; work
# beside it takes that core; it runs `nice`, so what the run waits on comes first. Each
# background step logs to $logs and is waited for before what needs it; one that fails stops
# the run with its log's end.
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
logs="$cache/logs"
mkdir -p "$logs"
background=()
# Each runs in its own process group (setsid), so that stopping it stops its cargo too.
stop_background() {
  local pid
  for pid in "${background[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap 'status=$?; stop_background; phase_table "$status"' EXIT
# A signal ends the run (and with it the background steps), not only the command in front.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
# Starts `command…` as the background step `name`: stdout to $logs/name.out, stderr to name.log.
declare -A step_pid
beside() {
  local name=$1
  shift
  setsid nice "$@" >"$logs/$name.out" 2>"$logs/$name.log" &
  step_pid[$name]=$!
  background+=("$!")
}
# Waits for the background step `name` (in this shell: `wait` knows only its own children);
# on failure shows the end of its log and stops the run.
wait_for() {
  local name=$1
  if ! wait "${step_pid[$name]}"; then
    echo "error: $name failed; the end of $logs/$name.log:" >&2
    tail -n 40 "$logs/$name.log" >&2
    exit 1
  fi
}
# What the finished step `name` printed last: the path it made.
made_by() { tail -n 1 "$logs/$1.out"; }
phase "venvs, Java kit, uc-server, rustberg (beside the build; logs in $logs)"
beside venv tests/rig/venv.sh
beside sam-venv tests/rig/venv.sh tests/sam-requirements.txt
beside java-kit "$LAKEMIRROR_JAVA_ICEBERG/setup.sh"
beside uc-server tests/rig/uc-server.sh
beside rustberg tests/rig/rustberg.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}"
# The binaries, then every test target. The dependencies build once for both (the workspace
# gives them one feature set, tests/acceptance/test_layout.py holds it); the workspace's own
# crates build twice, the second time with the test-only features of their dev-dependencies
# (`test-tables`, `test-events`). The binaries are built as a deployment builds them, so the
# event loop's `cargo build --bin …` later in the tests finds them built.
phase "cargo build (debug: binaries, then tests)"
cargo build --workspace --bins
cargo build --workspace --tests
# The three functions as `sam build` lays them out, from this debug build (tests/rig/
# sam_debug_build.sh): the `sam local invoke` tests run the binaries the other tests run.
phase "functions laid out for sam local invoke"
wait_for sam-venv
LAKEMIRROR_SAM_BUILD="$(tests/rig/sam_debug_build.sh)"
export LAKEMIRROR_SAM_BUILD
phase "venvs, Java kit, uc-server, rustberg (waiting for them)"
wait_for venv
wait_for java-kit
wait_for uc-server
wait_for rustberg
venv="$(made_by venv)"
LAKEMIRROR_JAVA_ICEBERG_VENV="$(made_by java-kit)"
LAKEMIRROR_RUSTBERG="$(made_by rustberg)"
export LAKEMIRROR_JAVA_ICEBERG_VENV LAKEMIRROR_RUSTBERG
# The catalog contract (tests/catalog_contract.rs) holds Glue to it on the strict moto, and the
# REST catalog on rustberg.
export LAKEMIRROR_PYTHON="$venv/bin/python"
# --include-ignored: the catalog contract's Glue (moto) and REST (rustberg) cases, ignored
# under a bare `cargo test` for want of their servers, run here and fail when one is missing.
phase "cargo test"
cargo test --workspace -- --include-ignored
export LAKEMIRROR_BIN="$CARGO_TARGET_DIR/debug/lakemirror"
# --durations: the slowest tests, named at the end of every run, are where a faster run starts.
phase "pytest"
"$venv/bin/python" -m pytest -p no:cacheprovider --durations=15 tests "$@"
