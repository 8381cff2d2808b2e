# Part of bench.sh (sourced): writing into a writable mount, against the local disk and against
# `rclone mount --vfs-cache-mode writes`, on the same emulator over the GCS API, loopback and
# (unless BENCH_WRITE_NEAR_ONLY is set) 10 ms away through delay-proxy.py. For each workload and
# tool: when the tool returned, and when the server itself (asked directly, not through the
# mount) held every object with its size. Also runs alone: scripts/bench.sh --write-only.
# Expects BIN, WORK, EMU_ADDR and the helpers of bench.sh (now, secs, ratio).
WMNT="$WORK/wmnt"
WLOCAL="$WORK/wlocal"
mkdir -p "$WMNT" "$WLOCAL"
export RCLONE_CONFIG=/dev/null
has_rclone=1
command -v rclone >/dev/null || has_rclone=

# The workloads' inputs, made once outside the timings.
PYLIB=/usr/lib/python3.11
[ -d "$PYLIB" ] || PYLIB=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
tar -cf "$WORK/pylib.tar" -C "$(dirname "$PYLIB")" "$(basename "$PYLIB")"
# What each workload leaves, as "name size" lines, from the inputs (never read through a mount).
mkdir -p "$WORK/pylib-x" && tar -xf "$WORK/pylib.tar" -C "$WORK/pylib-x"
(cd "$WORK/pylib-x" && find . -type f -printf '%P %s\n') >"$WORK/manifest-tar"
rm -rf "$WORK/pylib-x"
TAR_FILES=$(wc -l <"$WORK/manifest-tar")
for i in $(seq 0 999); do printf 'small/f%04d 1\n' "$i"; done >"$WORK/manifest-small"
echo "big512.bin $((512 << 20))" >"$WORK/manifest-cp"
head -c $((512 << 20)) /dev/urandom >"$WORK/w512.bin"
head -c $((256 << 20)) /dev/urandom >"$WORK/w256.bin"
sync

# wstart TOOL PREFIX ADDR: mounts TOOL writable at $WMNT on the bucket folder PREFIX, through the
# server at ADDR; sets W_PID.
wstart() {
  rm -rf "$WORK/wstaging" "$WORK/wcache"
  case $1 in
    bucketfs) "$BIN" mount "gs://bench/$2" "$WMNT" -f --api gcs --emulator "$3" -o "writable,staging_dir=$WORK/wstaging" 2>>"$WORK/wmount.log" & ;;
    rclone) rclone mount ":gcs,anonymous=true,endpoint='http://$3/storage/v1/':bench/$2" "$WMNT" --vfs-cache-mode writes \
      --cache-dir "$WORK/wcache" 2>>"$WORK/wmount.log" & ;;
  esac
  W_PID=$!
  PIDS+=("$W_PID")
  MOUNTS+=("$WMNT")
  for _ in $(seq 1 100); do mountpoint -q "$WMNT" && break; sleep 0.1; done
  mountpoint -q "$WMNT" || { echo "bench: $1 did not mount" >&2; cat "$WORK/wmount.log" >&2; return 1; }
}
wstop() {
  for _ in $(seq 1 100); do fusermount3 -u "$WMNT" 2>/dev/null && break; sleep 0.1; done
  mountpoint -q "$WMNT" && fusermount3 -u -z "$WMNT"
  wait "$W_PID" 2>/dev/null || true
}

# landed PREFIX MANIFEST T0: seconds from T0 until the server lists every object of MANIFEST
# (lines "name size", names relative to PREFIX) with its size; asked of the emulator directly.
landed() {
  python3 - "${LAND_ADDR:-$EMU_ADDR}" "$1" "$2" "$3" <<'PY'
import json, sys, time, urllib.parse, urllib.request
addr, prefix, manifest, t0 = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
want = {}
for line in open(manifest):
    name, size = line.rstrip("\n").rsplit(" ", 1)
    want[prefix + "/" + name] = int(size)
deadline = time.time() + 300
while time.time() < deadline:
    have, token = {}, None
    while True:
        q = {"prefix": prefix + "/", "maxResults": "1000", "fields": "items(name,size),nextPageToken"}
        if token: q["pageToken"] = token
        with urllib.request.urlopen(f"http://{addr}/storage/v1/b/bench/o?" + urllib.parse.urlencode(q)) as r:
            page = json.load(r)
        for item in page.get("items", []):
            have[item["name"]] = int(item["size"])
        token = page.get("nextPageToken")
        if not token: break
    if all(have.get(n) == s for n, s in want.items()):
        print(f"{time.time() - t0:.2f}")
        sys.exit(0)
    time.sleep(0.05)
print("never")
PY
}

# Each workload: TARGET is the folder written to; prints "returned".
w_tar() { local t0 t1; t0=$(now); tar -xf "$WORK/pylib.tar" -C "$1"; t1=$(now); secs "$t0" "$t1"; }
w_small() {
  python3 - "$1" <<'PY'
import os, sys, time
d = os.path.join(sys.argv[1], "small")
os.makedirs(d, exist_ok=True)
t = time.perf_counter()
for i in range(1000):
    with open(os.path.join(d, f"f{i:04d}"), "w") as f:
        f.write("x")
print(f"{time.perf_counter() - t:.3f}")
PY
}
w_cp() { local t0 t1; t0=$(now); cp "$WORK/w512.bin" "$1/big512.bin"; t1=$(now); secs "$t0" "$t1"; }
w_edit() {
  local t0 t1
  t0=$(now); dd if=/dev/urandom of="$1/edit256.bin" bs=4096 count=1 seek=$((128 << 8)) conv=notrunc status=none; t1=$(now)
  secs "$t0" "$t1"
}

# wrun WORKLOAD TOOL ADDR PREFIX: one workload on a fresh mount of a fresh folder of the bucket
# (PREFIX, never used before: a run's objects must not be taken for another's), printing
# "returned landed".
WRUN=0
wrun() {
  local work=$1 tool=$2 addr=$3 prefix=$4 target t0 ret
  # Each run starts on a quiet disk: the last one's 512 MiB still being written back slowed the
  # next row's local untar 2x.
  sync
  if [ "$work" = edit ]; then
    if [ -n "${LAND_ADDR:-}" ]; then
      env -u FIREBASE_STORAGE_EMULATOR_HOST STORAGE_EMULATOR_HOST="http://$LAND_ADDR" \
        "$BIN" cp --no-progress "$WORK/w256.bin" "gs://bench/$prefix/edit256.bin" >/dev/null
    else
      "$BIN" cp --no-progress "$WORK/w256.bin" "gs://bench/$prefix/edit256.bin" >/dev/null
    fi
  fi
  if [ "$tool" = local ]; then
    target="$WLOCAL/$prefix"
    mkdir -p "$target"
    [ "$work" = edit ] && cp "$WORK/w256.bin" "$target/edit256.bin" && sync
    ret=$(w_$work "$target")
    echo "$ret -"
    rm -rf "$target"
    return
  fi
  wstart "$tool" "$prefix" "$addr"
  # The edit needs the object's size known to the mount before the timing (a lookup).
  [ "$work" = edit ] && stat "$WMNT/edit256.bin" >/dev/null
  t0=$(now)
  ret=$(w_$work "$WMNT")
  if [ "$work" = edit ]; then
    # The edited object is whole when it holds the new bytes: compare its hash, not its size.
    python3 - "${LAND_ADDR:-$EMU_ADDR}" "$prefix" "$t0" "$WORK/w256.bin" <<'PY' >"$WORK/landed-$prefix" &
import base64, hashlib, json, sys, time, urllib.parse, urllib.request
addr, prefix, t0, original = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
old = base64.b64encode(hashlib.md5(open(original, "rb").read()).digest()).decode()
url = f"http://{addr}/storage/v1/b/bench/o/" + urllib.parse.quote(prefix + "/edit256.bin", safe="")
deadline = time.time() + 300
while time.time() < deadline:
    with urllib.request.urlopen(url) as r:
        if json.load(r).get("md5Hash") != old:
            print(f"{time.time() - t0:.2f}"); sys.exit(0)
    time.sleep(0.05)
print("never")
PY
    wait $!
  else
    landed "$prefix" "$WORK/manifest-$work" "$t0" >"$WORK/landed-$prefix"
  fi
  wstop
  echo "$ret $(cat "$WORK/landed-$prefix")"
}

wrow() { printf '%-40s %9s %17s %17s %9s %9s\n' "$@"; }
# write_rows ADDR LABEL: every workload on every tool through the server at ADDR.
write_rows() {
  local addr=$1 label=$2 l b r
  echo
  wrow "writing ($label)" "local" "bucketfs ret/land" "rclone ret/land" "vs local" "vs rclone"
  for w in tar small cp edit; do
    case $w in
      tar) what="tar -x of $TAR_FILES files (s)" ;;
      small) what="1,000 files of 1 byte (s)" ;;
      cp) what="cp of a 512 MiB file (s)" ;;
      edit) what="4 KiB into a 256 MiB file (s)" ;;
    esac
    # The counter moves here: wrun runs in a subshell.
    WRUN=$((WRUN + 3))
    read -r l _ < <(wrun "$w" local "$addr" "w$WRUN-local")
    read -r b bl < <(wrun "$w" bucketfs "$addr" "w$WRUN-bucketfs")
    if [ -n "$has_rclone" ]; then read -r r rl < <(wrun "$w" rclone "$addr" "w$WRUN-rclone"); else r=-; rl=-; fi
    wrow "$what" "$l" "$b / $bl" "$r / $rl" "$(ratio "$l" "$b")x" "$([ "$r" = - ] && echo - || echo "$(ratio "$r" "$b")x")"
  done
  echo "(ret: the tool returned; land: the server held every object; ratios are returned times, above 1.00x bucketfs is ahead)"
}

write_rows "$EMU_ADDR" "loopback"
# The same rows against fake-gcs-server (another server's costs: the issue's table was measured
# on it), when scripts/interop.sh has installed it; LAND_ADDR is where `landed` asks.
FAKE_GCS=$(find .build/interop-py -name 'fake-gcs-server-linux-amd64' -type f 2>/dev/null | head -n1)
if [ -n "$FAKE_GCS" ]; then
  FG_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$FAKE_GCS" -scheme http -host 127.0.0.1 -port "$FG_PORT" -backend memory -external-url "http://127.0.0.1:$FG_PORT" \
    -log-level warn >"$WORK/fakegcs.log" 2>&1 &
  FG_PID=$!
  PIDS+=("$FG_PID")
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$FG_PORT/storage/v1/b" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -sf -X POST "http://127.0.0.1:$FG_PORT/storage/v1/b?project=bench" -d '{"name":"bench"}' >/dev/null
  LAND_ADDR=127.0.0.1:$FG_PORT
  write_rows "$LAND_ADDR" "fake-gcs-server, loopback"
  LAND_ADDR=
  kill "$FG_PID" 2>/dev/null || true
else
  echo "(fake-gcs-server rows left out: scripts/interop.sh installs it)"
fi
if [ -z "${BENCH_WRITE_NEAR_ONLY:-}" ]; then
  python3 scripts/delay-proxy.py --target "$EMU_ADDR" --delay-ms 10 --seconds 1800 >"$WORK/wproxy.log" 2>&1 &
  WPROXY_PID=$!
  PIDS+=("$WPROXY_PID")
  for _ in $(seq 1 100); do grep -q '^port ' "$WORK/wproxy.log" 2>/dev/null && break; sleep 0.05; done
  write_rows "127.0.0.1:$(awk '/^port / {print $2}' "$WORK/wproxy.log")" "10 ms away"
  kill "$WPROXY_PID" 2>/dev/null || true
fi
