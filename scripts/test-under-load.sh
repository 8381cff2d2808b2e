#!/usr/bin/env bash
# Runs the whole suite (scripts/test.sh) N times on a fresh clone of this checkout's HEAD, with
# both cores kept busy by CPU hogs beside it (--idle: without them), and says how each run went.
#
#   scripts/test-under-load.sh N [--idle] [--fresh] [--keep]
#
# --fresh clones anew for every run (each run builds from nothing); otherwise the first run
# builds and the others reuse its build. Logs go to a temporary folder, named at the end; a run
# that fails keeps its log there. Exits 0 only when every run passed.
set -uo pipefail
runs=${1:?usage: scripts/test-under-load.sh N [--idle] [--fresh] [--keep]}
shift
load=yes fresh=no keep=no
for arg in "$@"; do
  case "$arg" in
    --idle) load=no ;;
    --fresh) fresh=yes ;;
    --keep) keep=yes ;;
    *) echo "test-under-load: unknown option $arg" >&2; exit 2 ;;
  esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/bucketfs-load-XXXXXX)
hogs=()
stop_hogs() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null; done
  hogs=()
}
trap 'stop_hogs' EXIT
trap 'stop_hogs; exit 130' INT TERM
clone() {
  rm -rf "$work/clone"
  git clone -q "$repo" "$work/clone"
}
clone
cores=$(nproc)
passed=0
for ((i = 1; i <= runs; i++)); do
  [ "$fresh" = yes ] && [ "$i" -gt 1 ] && clone
  if [ "$load" = yes ]; then
    # One busy shell per core, ended by pid when the run ends.
    for ((c = 0; c < cores; c++)); do
      bash -c 'while :; do :; done' &
      hogs+=($!)
    done
  fi
  start=$(date +%s)
  (cd "$work/clone" && scripts/test.sh) >"$work/run-$i.log" 2>&1
  status=$?
  seconds=$(($(date +%s) - start))
  stop_hogs
  slowest=$(grep -aoE 'Test [A-Za-z0-9_]+\(.*\) passed after [0-9.]+ seconds' "$work/run-$i.log" |
    sed -E 's/^Test ([^ ]+).* after ([0-9.]+) seconds/\2 \1/' | sort -rn | head -1)
  if [ "$status" -eq 0 ]; then
    passed=$((passed + 1))
    echo "run $i/$runs: passed in ${seconds} s (load: $load; slowest test: ${slowest:-?} s)"
    [ "$keep" = yes ] || rm -f "$work/run-$i.log"
  else
    echo "run $i/$runs: FAILED (status $status) after ${seconds} s; log: $work/run-$i.log"
    grep -aE '✘|recorded an issue|error:|test.sh:' "$work/run-$i.log" | head -20 | sed 's/^/    /'
  fi
done
rm -rf "$work/clone"
echo "test-under-load: $passed of $runs runs passed (load: $load); logs in $work"
[ "$passed" -eq "$runs" ]
