#!/usr/bin/env bash
# Builds bucketfs_VERSION_amd64.deb: the release binary with the Swift runtime and Foundation
# linked in (--static-swift-stdlib), so it runs without the toolchain; the man page; fuse3's
# mount helper under the name mount(8) looks for (fstab type fuse.bucketfs); the systemd unit
# template. Depends: are the Debian packages of the shared libraries ldd shows.
#   scripts/package-deb.sh [OUT_DIR]   (default: .build/deb)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
OUT=${1:-.build/deb}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
swift build -c release --product bucketfs --static-swift-stdlib >/dev/null
BIN=$(swift build -c release --show-bin-path)/bucketfs
VERSION=$(sed -n 's/.*static let bucketfs = "\(.*\)".*/\1/p' Sources/BucketFSCommand/Version.swift)
[ -n "$VERSION" ] || { echo "package-deb: no version in Version.swift" >&2; exit 1; }

STAGE=$(mktemp -d /tmp/bucketfs-deb.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
ROOT=$STAGE/bucketfs_${VERSION}_amd64
install -d -m 0755 "$ROOT/DEBIAN" "$ROOT/usr/bin" "$ROOT/usr/sbin" "$ROOT/usr/share/man/man1" \
  "$ROOT/usr/share/doc/bucketfs" "$ROOT/lib/systemd/system"
install -m 0755 "$BIN" "$ROOT/usr/bin/bucketfs"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$ROOT/usr/bin/bucketfs"
gzip -9n <man/bucketfs.1 >"$ROOT/usr/share/man/man1/bucketfs.1.gz"
chmod 0644 "$ROOT/usr/share/man/man1/bucketfs.1.gz"
# mount(8) runs /usr/sbin/mount.fuse.bucketfs for type fuse.bucketfs: fuse3's helper, which
# then runs `bucketfs SOURCE MOUNTPOINT -o OPTIONS`.
ln -s /sbin/mount.fuse3 "$ROOT/usr/sbin/mount.fuse.bucketfs"
install -d -m 0755 "$ROOT/usr/share/man/man8"
ln -s mount.fuse3.8.gz "$ROOT/usr/share/man/man8/mount.fuse.bucketfs.8.gz"
install -m 0644 packaging/systemd/bucketfs@.service "$ROOT/lib/systemd/system/bucketfs@.service"
install -m 0644 packaging/debian/copyright "$ROOT/usr/share/doc/bucketfs/copyright"
printf 'bucketfs (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- bucketfs authors <bucketfs@example.org>  %s\n' \
  "$VERSION" "$VERSION" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" \
  | gzip -9n >"$ROOT/usr/share/doc/bucketfs/changelog.gz"
chmod 0644 "$ROOT/usr/share/doc/bucketfs/changelog.gz"

# Depends: the package of every shared library the binary names itself (its NEEDED entries;
# what those libraries need, their packages depend on).
depends=()
for soname in $(objdump -p "$ROOT/usr/bin/bucketfs" | awk '/NEEDED/{print $2}' | grep -v '^ld-linux'); do
  lib=$(ldd "$ROOT/usr/bin/bucketfs" | awk -v n="$soname" '$1 == n {print $3}')
  [ -n "$lib" ] || { echo "package-deb: $soname is not found" >&2; exit 1; }
  pkg=$(dpkg -S "$lib" 2>/dev/null | head -n1 | cut -d: -f1) || true
  [ -z "$pkg" ] && pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -n1 | cut -d: -f1) || true
  [ -n "$pkg" ] || { echo "package-deb: no package owns $lib" >&2; exit 1; }
  depends+=("$pkg")
done
DEPENDS=$(printf '%s\n' "${depends[@]}" | sort -u | paste -sd, - | sed 's/,/, /g')
SIZE=$(du -sk --exclude=DEBIAN "$ROOT" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@SIZE@/$SIZE/" -e "s/@DEPENDS@/$DEPENDS/" packaging/debian/control.in >"$ROOT/DEBIAN/control"
(cd "$ROOT" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$ROOT/DEBIAN/md5sums"
chmod 0644 "$ROOT/DEBIAN/control" "$ROOT/DEBIAN/md5sums"
dpkg-deb --root-owner-group -Zxz --build "$ROOT" "$OUT/bucketfs_${VERSION}_amd64.deb" >/dev/null
echo "$OUT/bucketfs_${VERSION}_amd64.deb"
