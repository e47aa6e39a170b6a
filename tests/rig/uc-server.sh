#!/usr/bin/env bash
# Prints the path of a `uc-server` binary (olai-uc-server, a Rust implementation of the Unity
# Catalog REST API) for the Unity Catalog tests, installing it on first use. The official
# server needs Docker or Maven; this one builds from crates.io in minutes,
# so the binary is cached outside the clone: $LAKEMIRROR_CACHE/uc-server-<version>/bin.
set -euo pipefail
version="${LAKEMIRROR_UC_SERVER_VERSION:-0.0.11}"
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
root="$cache/uc-server-$version"
if [ ! -x "$root/bin/uc-server" ]; then
  echo "installing olai-uc-server $version into $root (once)" >&2
  start=$(date +%s)
  # Its own target dir: the build shares nothing with lakemirror's and is thrown away. A test
  # server answering a few hundred requests needs no optimisation: opt-level 0 without LTO (it
  # builds beside lakemirror's debug build, and every core-second it takes is one the build
  # waits for; opt-level 1 took 1222 s there).
  CARGO_TARGET_DIR="$cache/uc-server-build" CARGO_PROFILE_RELEASE_OPT_LEVEL=0 \
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo install olai-uc-server \
    --version "$version" --features bin --locked --root "$root" >&2
  rm -rf "$cache/uc-server-build"
  echo "installed olai-uc-server $version in $(( $(date +%s) - start )) s" >&2
fi
echo "$root/bin/uc-server"
