# Part of bench.sh (sourced): the mount against curl and local disk on the same emulator.
# Expects BIN, WORK, EMU_ADDR, BASE, SIZE_MIB and the helpers of bench.sh.
MNT="$WORK/mnt"
mkdir -p "$MNT"
"$BIN" mount gs://bench "$MNT" -f -o "staging_dir=$WORK/staging" 2>"$WORK/mount.log" &
MOUNT_PID=$!
PIDS+=("$MOUNT_PID")
MOUNTS+=("$MNT")
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { echo "bench: the mount did not come up" >&2; cat "$WORK/mount.log" >&2; exit 1; }

# Sequential read of the big object: cold through the mount vs curl (best of two each; the
# mount is remounted between runs so that nothing is cached or staged).
unmount_bench() {
  # A reader that just exited may still hold the mount for a moment.
  for _ in $(seq 1 50); do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.1; done
  mountpoint -q "$MNT" && { fuser -vm "$MNT" >&2 || true; fusermount3 -u -z "$MNT"; }
  wait "$MOUNT_PID" 2>/dev/null || true
}
remount() {
  unmount_bench
  rm -rf "$WORK/staging"
  "$BIN" mount gs://bench "$MNT" -f -o "staging_dir=$WORK/staging" 2>>"$WORK/mount.log" &
  MOUNT_PID=$!
  PIDS+=("$MOUNT_PID")
  for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
}
# The mount stages what it reads, so curl writing the object to a file on the same disk is
# measured too: that is the same work without FUSE. The emulator counts the bytes it sent.
sent() { curl -sf "http://$EMU_ADDR/emulator/v1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bodyBytesSent"])'; }
best_curl=999999; best_mnt=999999; best_file=999999; mnt_sent=0
for _ in 1 2; do
  t0=$(now); curl -sf -o /dev/null "$BASE/big.bin?alt=media"; t1=$(now)
  best_curl=$(python3 -c "print(min($best_curl, $t1 - $t0))")
  rm -f "$WORK/curl-file.bin"; sync
  t0=$(now); curl -sf -o "$WORK/curl-file.bin" "$BASE/big.bin?alt=media"; t1=$(now)
  best_file=$(python3 -c "print(min($best_file, $t1 - $t0))")
  rm -f "$WORK/curl-file.bin"
  remount
  sync
  s0=$(sent)
  t0=$(now); cat "$MNT/big.bin" >/dev/null; t1=$(now)
  best_mnt=$(python3 -c "print(min($best_mnt, $t1 - $t0))")
  for _ in $(seq 1 100); do
    [ "$(getfattr --only-values -n user.staged "$MNT/big.bin" 2>/dev/null)" = complete ] && break; sleep 0.1
  done
  mnt_sent=$(( $(sent) - s0 ))
done
rss_kib=$(awk '/VmHWM/ {print $2}' "/proc/$MOUNT_PID/status")

# The ceiling of that row: cat of a file that a FUSE file system answers from memory (no network,
# no disk, no checksum; scripts/fuse-floor.c), beside curl again, then the same file system also
# writing each read's bytes to a copy on this disk, as staging does. A cold read crosses the same
# kernel path and does that work and more, so it cannot be faster than either.
FLOOR_BIN="$WORK/fuse-floor"
best_floor=999999; best_curl_floor=999999; best_floor_copy=999999
if command -v gcc >/dev/null && gcc -O2 -o "$FLOOR_BIN" scripts/fuse-floor.c $(pkg-config --cflags --libs fuse3) 2>"$WORK/floor-build.log"; then
  FLOOR="$WORK/floor"
  mkdir -p "$FLOOR"
  MOUNTS+=("$FLOOR")
  # floor_cat VAR [COPY_PATH]: the best of VAR and one cat of the floor's file.
  floor_cat() {
    "$FLOOR_BIN" $((SIZE_MIB << 20)) "$FLOOR" ${2:+"$2"} &
    FLOOR_PID=$!
    PIDS+=("$FLOOR_PID")
    for _ in $(seq 1 100); do mountpoint -q "$FLOOR" && break; sleep 0.1; done
    sync
    t0=$(now); cat "$FLOOR/big.bin" >/dev/null; t1=$(now)
    printf -v "$1" '%s' "$(python3 -c "print(min(${!1}, $t1 - $t0))")"
    for _ in $(seq 1 50); do fusermount3 -u "$FLOOR" 2>/dev/null && break; sleep 0.1; done
    wait "$FLOOR_PID" 2>/dev/null || true
    rm -f "$WORK/floor-copy.bin"
  }
  for _ in 1 2; do
    t0=$(now); curl -sf -o /dev/null "$BASE/big.bin?alt=media"; t1=$(now)
    best_curl_floor=$(python3 -c "print(min($best_curl_floor, $t1 - $t0))")
    floor_cat best_floor
    floor_cat best_floor_copy "$WORK/floor-copy.bin"
  done
else
  echo "bench: fuse-floor did not build (gcc and libfuse3-dev are needed); its rows are left out" >&2
fi

# Warm re-read (staged copy and page cache) vs a local copy on disk.
for _ in $(seq 1 100); do
  [ "$(getfattr --only-values -n user.staged "$MNT/big.bin" 2>/dev/null)" = complete ] && break; sleep 0.2
done
cp "$WORK/big.bin" "$WORK/local.bin"; cat "$WORK/local.bin" >/dev/null
t0=$(now); cat "$WORK/local.bin" >/dev/null; t1=$(now); local_warm=$(secs "$t0" "$t1")
cat "$MNT/big.bin" >/dev/null
t0=$(now); cat "$MNT/big.bin" >/dev/null; t1=$(now); mnt_warm=$(secs "$t0" "$t1")
rm -f "$WORK/local.bin"

# Time to the first byte of a file nobody opened yet.
ttfb_curl=$(curl -sf -o /dev/null -r 0-0 -w '%{time_starttransfer}' "$BASE/big.bin?alt=media")
remount
ttfb_mnt=$(python3 -c "
import os, time
t = time.perf_counter(); fd = os.open('$MNT/big.bin', os.O_RDONLY); os.read(fd, 1); print(f'{time.perf_counter() - t:.6f}')")

# Many objects: 10,000 for ls -l, 1,000 small files for cat.
python3 - "$EMU_ADDR" <<'PY'
import http.client, sys, concurrent.futures
host, port = sys.argv[1].split(":")
def put(names):
    c = http.client.HTTPConnection(host, int(port))
    for n in names:
        body = (n * 400)[:4096].encode()
        c.request("POST", "/v0/b/bench/o?name=" + n.replace("/", "%2F"), body, {"Content-Type": "text/plain"})
        c.getresponse().read()
names = [f"ls/f{i:05d}.txt" for i in range(10000)] + [f"small/s{i:04d}.txt" for i in range(1000)]
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    list(ex.map(put, [names[i::8] for i in range(8)]))
PY
# Timed inside Python, so that the interpreter's start is not counted against the raw pages.
ls_raw=$(python3 - "$EMU_ADDR" <<'PY'
import http.client, json, sys, time, urllib.parse
host, port = sys.argv[1].split(":")
t = time.perf_counter()
c = http.client.HTTPConnection(host, int(port)); token = None; n = 0
while True:
    q = {"prefix": "ls/", "delimiter": "/"}
    if token: q["pageToken"] = token
    c.request("GET", "/v0/b/bench/o?" + urllib.parse.urlencode(q)); page = json.loads(c.getresponse().read())
    n += len(page.get("items", [])); token = page.get("nextPageToken")
    if not token: break
assert n == 10000, n
print(f"{time.perf_counter() - t:.3f}")
PY
)
remount
t0=$(now); n=$(ls -l "$MNT/ls" | grep -c '^-'); t1=$(now); ls_mnt=$(secs "$t0" "$t1")
[ "$n" = 10000 ] || echo "bench: ls -l saw $n files" >&2
# Plain ls on a fresh mount: names only, no attributes (the v0 list carries none).
remount
t0=$(now); n=$(ls "$MNT/ls" | wc -l); t1=$(now); ls_names=$(secs "$t0" "$t1")
[ "$n" = 10000 ] || echo "bench: ls saw $n files" >&2

urls=(); for i in $(seq -f '%04g' 0 999); do urls+=("$BASE/small%2Fs$i.txt?alt=media" -o /dev/null); done
t0=$(now); curl -sf "${urls[@]}"; t1=$(now); cat_curl=$(secs "$t0" "$t1")
t0=$(now); cat "$MNT"/small/s*.txt >/dev/null; t1=$(now); cat_mnt=$(secs "$t0" "$t1")

# Random 4 KiB reads: ranged GETs over one keep-alive connection vs preads on the mount, through
# the block cache (staging off, and no copy left by the steps above).
unmount_bench
rm -rf "$WORK/staging"
"$BIN" mount gs://bench "$MNT" -f -o "staging_dir=$WORK/staging,stage_max_file=0" 2>>"$WORK/mount.log" &
MOUNT_PID=$!; PIDS+=("$MOUNT_PID")
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
read -r rand_curl rand_mnt < <(python3 - "$EMU_ADDR" "$MNT/big.bin" "$SIZE_MIB" <<'PY'
import http.client, os, random, sys, time
host, port = sys.argv[1].split(":"); path = sys.argv[2]; size = int(sys.argv[3]) << 20
rng = random.Random(7); offsets = [rng.randrange(0, size - 4096) for _ in range(2000)]
c = http.client.HTTPConnection(host, int(port))
t = time.perf_counter()
for o in offsets:
    c.request("GET", "/v0/b/bench/o/big.bin?alt=media", headers={"Range": f"bytes={o}-{o+4095}"}); c.getresponse().read()
curl_rate = 2000 / (time.perf_counter() - t)
fd = os.open(path, os.O_RDONLY)
t = time.perf_counter()
for o in offsets: os.pread(fd, 4096, o)
print(f"{curl_rate:.0f} {2000 / (time.perf_counter() - t):.0f}")
PY
)

# The same reads on a default mount: blocks fetched on demand into the staged copy while its
# filler fetches the rest in the background.
unmount_bench
rm -rf "$WORK/staging"
"$BIN" mount gs://bench "$MNT" -f -o "staging_dir=$WORK/staging" 2>>"$WORK/mount.log" &
MOUNT_PID=$!; PIDS+=("$MOUNT_PID")
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
rand_staged=$(python3 - "$MNT/big.bin" "$SIZE_MIB" <<'PY'
import os, random, sys, time
path = sys.argv[1]; size = int(sys.argv[2]) << 20
rng = random.Random(7); offsets = [rng.randrange(0, size - 4096) for _ in range(2000)]
fd = os.open(path, os.O_RDONLY)
t = time.perf_counter()
for o in offsets: os.pread(fd, 4096, o)
print(f"{2000 / (time.perf_counter() - t):.0f}")
PY
)

row "sequential read $SIZE_MIB MiB: mount vs curl (s)" "$(printf %.3f "$best_curl")" "$(printf %.3f "$best_mnt")" "$(ratio "$best_curl" "$best_mnt")x"
row "  the same vs curl to a file on that disk (s)" "$(printf %.3f "$best_file")" "$(printf %.3f "$best_mnt")" "$(ratio "$best_file" "$best_mnt")x"
if [ -x "$FLOOR_BIN" ]; then
  row "  a FUSE file answered from memory vs curl (s)" "$(printf %.3f "$best_curl_floor")" "$(printf %.3f "$best_floor")" "$(ratio "$best_curl_floor" "$best_floor")x"
  row "  the same file, also written to a copy (s)" "$(printf %.3f "$best_curl_floor")" "$(printf %.3f "$best_floor_copy")" "$(ratio "$best_curl_floor" "$best_floor_copy")x"
  row "  the cold read vs that floor with a copy (s)" "$(printf %.3f "$best_floor_copy")" "$(printf %.3f "$best_mnt")" "$(ratio "$best_floor_copy" "$best_mnt")x"
fi
row "  MiB the server sent for it (and staged)" "$SIZE_MIB" "$((mnt_sent >> 20))" ""
row "  daemon peak RSS (MiB, target < 300)" "" "$((rss_kib / 1024))" ""
row "warm re-read: mount vs local disk (s)" "$local_warm" "$mnt_warm" "$(ratio "$local_warm" "$mnt_warm")x"
row "ls 10,000 objects vs raw list pages (s)" "$ls_raw" "$ls_names" "$(ratio "$ls_raw" "$ls_names")x"
row "ls -l 10,000 objects vs raw list pages (s)" "$ls_raw" "$ls_mnt" "$(ratio "$ls_raw" "$ls_mnt")x"
row "cat 1,000 4 KiB files vs curl (s)" "$cat_curl" "$cat_mnt" "$(ratio "$cat_curl" "$cat_mnt")x"
row "random 4 KiB reads per second vs GETs" "$rand_curl" "$rand_mnt" "$(ratio "$rand_mnt" "$rand_curl")x"
row "  the same, staging on (the default)" "$rand_curl" "$rand_staged" "$(ratio "$rand_staged" "$rand_curl")x"
row "time to first byte vs curl (s)" "$ttfb_curl" "$ttfb_mnt" "$(ratio "$ttfb_curl" "$ttfb_mnt")x"
