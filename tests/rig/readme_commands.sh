#!/usr/bin/env bash
# Runs the commands the README opens with as a newcomer runs them the first time: each from an
# empty target directory, once per change to what it runs. A command that passed leaves a stamp
# keyed by the hash of its scripts ($LAKEMIRROR_CACHE/readme-commands/<name>-<hash>); a change
# to one of them makes it run again.
#   tests/rig/readme_commands.sh <minutes>    runs the commands due that fit in <minutes>
#   tests/rig/readme_commands.sh --due        lists the commands due, runs nothing
# Each command has the minutes its cold run takes here, with room to spare (measured 2026-12-06
# on 2 cores: demo 734 s, event loop 657 s, sam-local 808 s); a command due that does not fit
# waits for a later run, which is said on stderr. A command that fails fails this script with
# the end of its log; one still running at half again its minutes (or when the minutes given
# run out) is stopped and tried again by a later run (a slow machine must not turn CI red),
# which is said too. The test command (tests/run.sh) is not among them: CI runs it every time.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
stamps="$cache/readme-commands"
logs="$cache/logs"
mkdir -p "$stamps" "$logs"
# name | minutes | command | the files it runs (their hash is the stamp's key)
commands=(
  "demo|15|localstack/demo.sh|localstack/demo.sh localstack/demo.py tests/rig/venv.sh tests/rig/judge.py"
  "event-loop|15|localstack/event-loop.sh --demo 5|localstack/event-loop.sh localstack/event_loop.py tests/rig/venv.sh tests/rig/local_aws.py tests/rig/judge.py"
  "sam-local|20|localstack/sam-local.sh|localstack/sam-local.sh localstack/sam_local_demo.py tests/rig/sam_build.sh tests/rig/sam_local.py tests/rig/local_aws.py tests/rig/postgres.py tests/rig/unity.py tests/rig/judge.py tests/rig/docker.sh tests/rig/sam_image.sh tests/rig/sam_netns.py tests/rig/uc-server.sh"
)
case "${1:-}" in
  --due) available="" ;;
  ''|-h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;;
  *[!0-9]*) echo "error: expected minutes (a number) or --due, got '$1'" >&2; exit 2 ;;
  *) available="$1" ;;
esac
started=$SECONDS
for entry in "${commands[@]}"; do
  IFS='|' read -r name minutes command files <<<"$entry"
  # shellcheck disable=SC2086 # the file list splits on spaces
  key="$(cat $files | sha256sum | cut -c1-12)"
  stamp="$stamps/$name-$key"
  [ -f "$stamp" ] && continue
  if [ -z "$available" ]; then
    echo "$name: due ($command)"
    continue
  fi
  left=$((available - (SECONDS - started) / 60))
  if [ "$minutes" -gt "$left" ]; then
    echo "WARNING: README command '$command' is due from a cold target directory (about $minutes minutes); $left left here, so a later run takes it" >&2
    continue
  fi
  target="$cache/readme-target"
  rm -rf "$target"
  echo "--- README command from a cold target directory: $command (log: $logs/readme-$name.log)" >&2
  begun=$SECONDS
  limit=$((minutes * 3 / 2 < left ? minutes * 3 / 2 : left))
  status=0
  # shellcheck disable=SC2086 # the command's arguments split on spaces
  CARGO_TARGET_DIR="$target" timeout --kill-after=30 "${limit}m" $command \
    >"$logs/readme-$name.log" 2>&1 || status=$?
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    echo "WARNING: '$command' ran past $limit minutes from a cold target directory and was stopped; a later run tries again ($logs/readme-$name.log)" >&2
    rm -rf "$target"
    continue
  fi
  if [ "$status" != 0 ]; then
    echo "error: '$command' failed (exit $status) from a cold target directory; the end of $logs/readme-$name.log:" >&2
    tail -n 40 "$logs/readme-$name.log" >&2
    rm -rf "$target"
    exit 1
  fi
  rm -rf "$target"
  echo "$command: passed from a cold target directory in $((SECONDS - begun)) s" | tee "$stamp" >&2
done
