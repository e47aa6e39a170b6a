#!/usr/bin/env bash
# Fuzzes the parsers of untrusted input for a fixed budget (not part of CI):
#   tests/fuzz/run.sh [SECONDS_PER_TARGET]        default 120
# Targets: commit (commit JSON -> replay -> Iceberg and UC schemas), checkpoint (Parquet and
# JSON checkpoints), deletion_vector, event (Lambda events). Seeds: the shared Delta tables'
# logs and deletion vectors, and the sample events. A crash leaves its input under
# tests/fuzz/artifacts/<target>/ (an allocation over 512 MB and a unit slower than 10 s count too);
# turn it into a regression test before fixing it.
# cargo fuzz needs nightly-only flags; RUSTC_BOOTSTRAP=1 lets the stable toolchain (the only
# one here) accept them. cargo-fuzz, the build and the corpus are cached outside the clone.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-120}"
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
tables="${LAKEMIRROR_DELTA_TABLES:-$(pwd)/../shared/delta-tables}"
if [ ! -x "$cache/cargo-fuzz/bin/cargo-fuzz" ]; then
  CARGO_TARGET_DIR="$cache/cargo-fuzz-build" cargo install cargo-fuzz --locked --root "$cache/cargo-fuzz" >&2
fi
export PATH="$cache/cargo-fuzz/bin:$PATH" RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$cache/fuzz-target"
corpus="$cache/fuzz-corpus"
seed() {  # seed <target> <find args...>
  mkdir -p "$corpus/$1"
  [ -d "$tables" ] && find "$tables" "${@:2}" -type f -size -1M -exec cp -n {} "$corpus/$1/" \; 2>/dev/null || true
}
seed commit -path '*_delta_log/*' -name '*.json'
seed checkpoint -path '*_delta_log/*' -name '*.parquet'
seed deletion_vector -name 'deletion_vector_*.bin'
mkdir -p "$corpus/event" && cp -n functions/*/events/*.json "$corpus/event/" 2>/dev/null || true
# Build first and in full view: the runs' output below is filtered to the summary lines.
cargo fuzz build --fuzz-dir tests/fuzz
for target in commit checkpoint deletion_vector event; do
  echo "--- fuzzing $target for ${seconds}s" >&2
  cargo fuzz run --fuzz-dir tests/fuzz "$target" "$corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=1048576 -print_final_stats=1 2>&1 \
    | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added|==[0-9]+==ERROR|SUMMARY|.*panicked)" || true
  if compgen -G "tests/fuzz/artifacts/$target/*" >/dev/null; then
    echo "fuzzing $target found a crash: tests/fuzz/artifacts/$target/" >&2
    exit 1
  fi
done
echo "no crash in any target" >&2
