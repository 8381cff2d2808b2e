#!/usr/bin/env bash
# Installs, idempotently, every system package the build, tests and demo need.
# Does nothing when they are all present.
set -euo pipefail
packages=(fuse3 libfuse3-dev libcurl4-openssl-dev libssl-dev zlib1g-dev rsync git sqlite3 xfsprogs openssl pkg-config curl attr python3 python3-pip rclone stunnel4 systemd lintian binutils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
