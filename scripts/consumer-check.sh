#!/usr/bin/env bash
# Builds Examples/StorageConsumer — a package of its own that depends on this one by path and
# imports the StorageCore library product — and runs it against `bucketfs serve`: it uploads,
# reads back and prints the download URL, which curl must be served the same bytes through.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
BIN=${BIN:-$(swift build --show-bin-path)/bucketfs}
. scripts/lib.sh
WORK=$(mktemp -d /tmp/bucketfs-consumer.XXXXXX)
trap 'stop_emulator; rm -rf "$WORK"' EXIT
swift build --package-path Examples/StorageConsumer 2>&1 | tail -n 1
CONSUMER=$(swift build --package-path Examples/StorageConsumer --show-bin-path)/StorageConsumer
start_emulator "$WORK/server"
url=$(FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR "$CONSUMER") || { echo "consumer-check: FAILED: the consumer" >&2; exit 1; }
[ "$(curl -sf "$url" | wc -c)" = 100000 ] || { echo "consumer-check: FAILED: the download URL $url" >&2; exit 1; }
echo "consumer-check: a package depending on StorageCore by path uploaded and read back 100000 bytes"
