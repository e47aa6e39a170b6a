#!/usr/bin/env bash
# Prints the path of a `rustberg` binary (an Iceberg REST catalog server on iceberg-rust,
# crates.io, Apache-2.0 OR MIT) for the REST catalog tests, installing it on first use. Only
# its CLI and file:// storage are built (the default features add TLS and three object stores
# the tests do not use); the binary is cached outside the clone:
# $LAKEMIRROR_CACHE/rustberg-<version>/bin.
set -euo pipefail
version="${LAKEMIRROR_RUSTBERG_VERSION:-0.3.0}"
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
root="$cache/rustberg-$version"
if [ ! -x "$root/bin/rustberg" ]; then
  echo "installing rustberg $version into $root (once)" >&2
  start=$(date +%s)
  # Its own target dir: the build shares nothing with lakemirror's and is thrown away. Its
  # release profile (fat LTO, one codegen unit) makes a faster server than tests need at
  # several times the build time: opt-level 0, no LTO and 16 units instead (it builds beside
  # lakemirror's debug build, which waits for every core-second it takes; opt-level 1 took
  # 1264 s there).
  CARGO_TARGET_DIR="$cache/rustberg-build" CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_OPT_LEVEL=0 \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo install rustberg \
    --version "$version" --no-default-features --features cli --locked --root "$root" >&2
  rm -rf "$cache/rustberg-build"
  echo "installed rustberg $version in $(( $(date +%s) - start )) s" >&2
fi
echo "$root/bin/rustberg"
