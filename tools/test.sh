#!/usr/bin/env bash
# The whole suite on a fresh machine: install what is missing, build, test.
# Usage: tools/test.sh [meson test arguments, e.g. --suite unit]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

tools/deps.sh test

build=${CLAIRFS_BUILD:-build}
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" >/dev/null
fi
meson compile -C "$build"
meson test -C "$build" --print-errorlogs --num-processes 2 "$@"

# Sanitizers, valgrind and fuzzing; CLAIRFS_SKIP_SANITIZERS=1 skips.
if [ "${CLAIRFS_SKIP_SANITIZERS:-0}" != 1 ]; then
    tests/sanitizers/run.sh
fi
