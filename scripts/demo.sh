#!/usr/bin/env bash
# Shows bucketfs at work on a local emulator with a small sample bucket. Starts everything it
# needs and stops (by pid) everything it started before it exits.
#   scripts/demo.sh          run the demo and clean up
#   scripts/demo.sh --keep   leave the emulator and the mount up, and print how to look around
set -euo pipefail
cd "$(dirname "$0")/.."
KEEP=0
[ "${1:-}" = "--keep" ] && KEEP=1
scripts/install-deps.sh
export PATH=/opt/swift/usr/bin:$PATH
echo "== building (release)"
swift build -c release --product bucketfs 2>&1 | tail -n 1
BIN=$(swift build -c release --show-bin-path)/bucketfs
. scripts/lib.sh

WORK=$(mktemp -d /tmp/bucketfs-demo.XXXXXX)
MNT="$WORK/mnt"
cleanup() {
  if [ "$KEEP" -eq 0 ]; then
    if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -u "$MNT" 2>/dev/null || true; fi
    stop_emulator
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

start_emulator "$WORK/server"
export FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR
run() { echo; echo "\$ $*"; "$@"; }

echo "== emulator on $EMU_ADDR (pid $EMU_PID), serving $WORK/server"
make_sample_bucket "$WORK/sample"
run "$BIN" cp -r "$WORK/sample" gs://demo-bucket
run "$BIN" ls gs://demo-bucket
run "$BIN" ls -l gs://demo-bucket/images
run "$BIN" ls -r gs://demo-bucket/docs
run "$BIN" stat gs://demo-bucket/images/red.png
run "$BIN" cat gs://demo-bucket/README.txt
run "$BIN" cat gs://demo-bucket/docs/inventory.csv --range 0-8
echo
run "$BIN" cp gs://demo-bucket/docs/random.bin "$WORK/random-copy.bin"
cmp "$WORK/sample/docs/random.bin" "$WORK/random-copy.bin" && echo "(the copy is byte-identical)"
run "$BIN" url gs://demo-bucket/images/blue.png
echo
echo "\$ $BIN stat gs://demo-bucket/nope.txt   # a missing object: one line, exit status 3"
"$BIN" stat gs://demo-bucket/nope.txt || echo "(exit status $?)"

if [ -f scripts/demo-mount.sh ] && [ -e /dev/fuse ]; then
  . scripts/demo-mount.sh
fi

if [ "$KEEP" -eq 1 ]; then
  echo "Object commands: export FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR; $BIN ls -l gs://demo-bucket/images"
fi
echo
echo "== demo finished"
