#!/usr/bin/env bash
# Installs what the tests need, builds, and runs the whole suite: units, the client against the
# emulator, real FUSE mounts, the CLI as a process, and the interop checks.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
export PATH=/opt/swift/usr/bin:$PATH
swift build --build-tests || exit 1
# Swift Testing prints a line per test start; keep the results. Tests share the task pool, which
# has a thread per core: a test that blocks a thread (a socket read, a child process, a mount)
# takes half the pool from the async tests beside it on two cores, and two of them take all of
# it. So the async in-process tests run in parallel on their own; the in-process tests that
# block (the emulator's raw-socket tests, the spawner's) run in parallel with each other; and
# the ones that drive real mounts and child processes run one at a time.
run_tests() {
  swift test --skip-build "$@" 2>&1 | grep -a --line-buffered -vE '^(◇|↳)'
  local status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ]; then
    echo "test.sh: tests failed (status $status): $*" >&2
    exit "$status"
  fi
}
run_tests --filter 'StorageCoreTests|BucketFSTests|ExamplesTests'
run_tests --filter 'ChildProcessTests|StorageEmulatorTests'
run_tests --no-parallel --filter 'MountTests|CommandTests'
if [ -x scripts/interop.sh ]; then
  scripts/interop.sh || { echo "test.sh: interop checks failed" >&2; exit 1; }
fi
scripts/consumer-check.sh || { echo "test.sh: the library consumer failed" >&2; exit 1; }
if [ -x scripts/package-check.sh ]; then
  scripts/package-check.sh || { echo "test.sh: package checks failed" >&2; exit 1; }
fi
echo "test.sh: all tests passed"
