#!/usr/bin/env bash
# Side-by-side measurements on one emulator in one run, printed as ratios (higher is better for
# bucketfs; 1.00 means as fast as the reference). Release build. Stops everything it started.
#   scripts/bench.sh [--size-mib N]   (default 1024)
#   scripts/bench.sh --write-only      (the write rows alone; BENCH_WRITE_NEAR_ONLY=1: loopback only)
#   scripts/bench.sh --rename-only [--size-mib N]  (renames: move vs copy+delete, flat vs HNS;
#                                       RENAME_FILES objects in the folder rows, 1000)
#   scripts/bench.sh --pin-only        (resident memory of a pin of PIN_OBJECTS, 10,000, against a find)
#   scripts/bench.sh --scale [N]       (buckets of many objects, not in the default run: N objects
#                                       in folders of 1,000 plus 100,000 in one folder; N 100,000)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=1024
DISTANCE_ONLY=
WRITE_ONLY=
RENAME_ONLY=
PIN_ONLY=
[ "${1:-}" = "--rename-only" ] && { RENAME_ONLY=1; shift; }
[ "${1:-}" = "--pin-only" ] && { PIN_ONLY=1; shift; }
[ "${1:-}" = "--size-mib" ] && SIZE_MIB=$2
[ "${1:-}" = "--distance-only" ] && DISTANCE_ONLY=1
[ "${1:-}" = "--write-only" ] && WRITE_ONLY=1
SCALE=
if [ "${1:-}" = "--scale" ]; then SCALE=1; SCALE_N=${2:-100000}; fi
scripts/install-deps.sh
export PATH=/opt/swift/usr/bin:$PATH
swift build -c release --product bucketfs >/dev/null
BIN=$(swift build -c release --show-bin-path)/bucketfs
. scripts/lib.sh

WORK=$(mktemp -d /tmp/bucketfs-bench.XXXXXX)
cleanup() {
  for m in "${MOUNTS[@]:-}"; do [ -n "$m" ] && mountpoint -q "$m" 2>/dev/null && fusermount3 -u "$m" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  stop_emulator
  rm -rf "$WORK"
}
MOUNTS=()
PIDS=()
trap cleanup EXIT

start_emulator "$WORK/server"
# By pid in the list the cleanup ends: the rename and pin rows start servers of their own, and
# EMU_PID then names theirs (this one was left running after every run).
PIDS+=("$EMU_PID")
export FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR
BASE="http://$EMU_ADDR/v0/b/bench/o"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
row() { printf '%-44s %10s %10s %8s\n' "$@"; }

if [ -n "$DISTANCE_ONLY" ]; then
  # Only the bucket far away: the small files it reads, then its rows.
  python3 - "$EMU_ADDR" <<'PY'
import http.client, sys
host, port = sys.argv[1].split(":")
c = http.client.HTTPConnection(host, int(port))
for i in range(200):
    n = f"small/s{i:04d}.txt"
    c.request("POST", "/v0/b/bench/o?name=" + n.replace("/", "%2F"), (n * 400)[:4096].encode(), {"Content-Type": "text/plain"})
    c.getresponse().read()
PY
  . scripts/bench-distance.sh
  exit 0
fi

if [ -n "$SCALE" ]; then
  . scripts/bench-scale.sh
  exit 0
fi

if [ -n "$WRITE_ONLY" ]; then
  echo "bucketfs bench: write rows, emulator $EMU_ADDR, $(nproc) cores"
  . scripts/bench-write.sh
  exit 0
fi

echo "bucketfs bench: $SIZE_MIB MiB object, emulator $EMU_ADDR, $(nproc) cores"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$WORK/big.bin"
sync

if [ -n "$PIN_ONLY" ]; then
  row "measurement" "reference" "bucketfs" "ratio"
  . scripts/bench-pin.sh
  exit 0
fi

if [ -n "$RENAME_ONLY" ]; then
  row "measurement" "reference" "bucketfs" "ratio"
  . scripts/bench-rename.sh
  exit 0
fi

# Upload: bucketfs cp (resumable, 32 MiB chunks) vs one curl POST of the whole file.
t0=$(now); curl -sf -o /dev/null -X POST -H 'Expect:' -H 'Content-Type: application/octet-stream' -T "$WORK/big.bin" "$BASE?name=curl-up.bin"; t1=$(now)
curl_up=$(secs "$t0" "$t1")
t0=$(now); "$BIN" cp --no-progress "$WORK/big.bin" gs://bench/big.bin; t1=$(now)
bfs_up=$(secs "$t0" "$t1")

# Download: the same object, each to a file on the same disk; best of three.
best_curl=999999; best_bfs=999999
# Each run starts with no dirty pages left by the one before (rm + sync outside the timing).
for _ in 1 2 3; do
  rm -f "$WORK/c.bin"; sync
  t0=$(now); curl -sf -o "$WORK/c.bin" "$BASE/big.bin?alt=media"; t1=$(now)
  best_curl=$(python3 -c "print(min($best_curl, $t1 - $t0))")
  rm -f "$WORK/c.bin" "$WORK/b.bin"; sync
  t0=$(now); "$BIN" cp --no-progress gs://bench/big.bin "$WORK/b.bin"; t1=$(now)
  best_bfs=$(python3 -c "print(min($best_bfs, $t1 - $t0))")
  cmp -s "$WORK/big.bin" "$WORK/b.bin" || { echo "bench: downloaded bytes differ" >&2; exit 1; }
done
rm -f "$WORK/c.bin" "$WORK/b.bin"

echo
row "measurement" "reference" "bucketfs" "ratio"
row "download $SIZE_MIB MiB: cp vs curl (s)" "$(printf %.3f "$best_curl")" "$(printf %.3f "$best_bfs")" "$(ratio "$best_curl" "$best_bfs")x"
row "upload $SIZE_MIB MiB: cp vs curl (s)" "$curl_up" "$bfs_up" "$(ratio "$curl_up" "$bfs_up")x"

if [ -f scripts/bench-mount.sh ]; then
  . scripts/bench-mount.sh
  . scripts/bench-staged.sh
  fusermount3 -u "$MNT" 2>/dev/null || true
  . scripts/bench-distance.sh
  . scripts/bench-rclone.sh
  . scripts/bench-write.sh
  . scripts/bench-rename.sh
  . scripts/bench-pin.sh
fi
