#!/usr/bin/env bash
# Builds the .deb, checks it with lintian (no errors), unpacks it into a scratch root with
# dpkg -x, and uses it from there with a PATH that has no Swift toolchain: --version, the
# emulator, cp, ls and a mount read back by SHA-256. Stops (by pid) and unmounts what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
DEB=$(scripts/package-deb.sh)
echo "package: $DEB"
lintian_out=$(lintian --tag-display-limit 0 "$DEB" 2>&1 | grep -v 'root privileges' || true)
[ -n "$lintian_out" ] && echo "$lintian_out"
if echo "$lintian_out" | grep -q '^E:'; then echo "package: lintian reports errors" >&2; exit 1; fi
echo "  ok: lintian reports no errors"

WORK=$(mktemp -d /tmp/bucketfs-package.XXXXXX)
SERVE_PID=
MNT="$WORK/mnt"
cleanup() {
  mountpoint -q "$MNT" 2>/dev/null && fusermount3 -u "$MNT" 2>/dev/null || true
  [ -n "${MOUNT_PID:-}" ] && kill "$MOUNT_PID" 2>/dev/null || true
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
dpkg -x "$DEB" "$WORK/root"
BIN="$WORK/root/usr/bin/bucketfs"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset LD_LIBRARY_PATH
if ldd "$BIN" | grep -qi swift; then echo "package: the binary still links Swift libraries" >&2; ldd "$BIN" >&2; exit 1; fi
echo "  ok: ldd shows only system libraries"
"$BIN" --version | grep -q '^libfuse 3\.' || { echo "package: --version" >&2; exit 1; }
echo "  ok: $("$BIN" --version | head -n1) runs from the package without the toolchain"
[ -f "$WORK/root/lib/systemd/system/bucketfs@.service" ] && [ -f "$WORK/root/usr/share/man/man1/bucketfs.1.gz" ] \
  && [ -L "$WORK/root/usr/sbin/mount.fuse.bucketfs" ] || { echo "package: files missing" >&2; exit 1; }
echo "  ok: the unit template, the man page and the mount helper are in the package"

log=$(mktemp)
"$BIN" serve --root "$WORK/server" --port 0 2>"$log" >/dev/null &
SERVE_PID=$!
for _ in $(seq 1 100); do ADDR=$(grep -o '127\.0\.0\.1:[0-9]*' "$log" | head -n1 || true); [ -n "$ADDR" ] && break; sleep 0.1; done
rm -f "$log"
[ -n "$ADDR" ] || { echo "package: serve did not start" >&2; exit 1; }
export FIREBASE_STORAGE_EMULATOR_HOST=$ADDR
head -c 2000000 /dev/urandom >"$WORK/data.bin"
"$BIN" cp --no-progress "$WORK/data.bin" gs://pkg/dir/data.bin
[ "$("$BIN" ls gs://pkg/dir)" = "dir/data.bin" ] || { echo "package: ls" >&2; exit 1; }
echo "  ok: serve, cp and ls from the package"
mkdir -p "$MNT"
HOME=$WORK "$BIN" mount gs://pkg "$MNT" -f -o "staging_dir=$WORK/staging" 2>"$WORK/mount.log" &
MOUNT_PID=$!
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$WORK/mount.log" >&2; echo "package: mount" >&2; exit 1; }
[ "$(sha256sum <"$MNT/dir/data.bin")" = "$(sha256sum <"$WORK/data.bin")" ] || { echo "package: read through the mount" >&2; exit 1; }
fusermount3 -u "$MNT"
wait "$MOUNT_PID" 2>/dev/null || true
MOUNT_PID=
echo "  ok: a mount from the package reads back by SHA-256"
echo "package: all checks passed"
