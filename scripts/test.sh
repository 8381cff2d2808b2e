#!/usr/bin/env bash
# Installs what the tests need, builds, and runs the whole suite: units, the client against the
# emulator, real FUSE mounts, the CLI as a process, and the interop checks.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
export PATH=/opt/swift/usr/bin:$PATH
swift build --build-tests || exit 1
# Swift Testing prints a line per test start; keep the results.
swift test --skip-build 2>&1 | grep --line-buffered -vE '^(◇|↳)'
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo "test.sh: the test suite failed (status $status)" >&2
  exit "$status"
fi
if [ -x scripts/interop.sh ]; then
  scripts/interop.sh || { echo "test.sh: interop checks failed" >&2; exit 1; }
fi
echo "test.sh: all tests passed"
