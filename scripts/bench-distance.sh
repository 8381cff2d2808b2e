# Part of bench.sh (sourced, after bench-mount.sh filled small/): the bucket far away. A loopback
# proxy (delay-proxy.py) delays each direction by 10 ms and 50 ms and holds each new connection
# for a round trip; `cat` of small files through the mount against a raw client that fetches the
# same files one after another on one keep-alive connection, on both APIs, and the connections
# the mount opened. Can also run alone: scripts/bench.sh --distance-only.
DIST_MNT="$WORK/dmnt"
mkdir -p "$DIST_MNT"

# start_proxy MS: a delaying proxy in front of the emulator; sets PROXY_PID, PROXY_ADDR.
start_proxy() {
  local log="$WORK/proxy-$1.log"
  python3 scripts/delay-proxy.py --target "$EMU_ADDR" --delay-ms "$1" --seconds 900 >"$log" 2>&1 &
  PROXY_PID=$!
  PIDS+=("$PROXY_PID")
  for _ in $(seq 1 100); do grep -q '^port ' "$log" 2>/dev/null && break; sleep 0.05; done
  PROXY_ADDR="127.0.0.1:$(awk '/^port / {print $2}' "$log")"
}
stop_proxy() {
  kill "$PROXY_PID" 2>/dev/null || true
  wait "$PROXY_PID" 2>/dev/null || true
}
proxy_connections() { awk '/^connections / {print $2}' "$WORK/proxy-$1.log"; }

# raw_client API COUNT: seconds for one keep-alive connection to GET COUNT small files in turn.
raw_client() {
  python3 - "$PROXY_ADDR" "$1" "$2" <<'PY'
import http.client, sys, time, urllib.parse
addr, api, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
host, port = addr.rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port))
t = time.perf_counter()
for i in range(count):
    name = urllib.parse.quote(f"small/s{i:04d}.txt", safe="")
    path = f"/v0/b/bench/o/{name}?alt=media" if api == "firebase" else f"/download/storage/v1/b/bench/o/{name}?alt=media"
    conn.request("GET", path)
    r = conn.getresponse()
    r.read()
    assert r.status == 200, r.status
print(f"{time.perf_counter() - t:.3f}")
PY
}

# far_mount API: a fresh bucketfs mount over the proxy at $DIST_MNT (staging emptied); sets FAR_PID.
far_mount() {
  rm -rf "$WORK/dstaging"
  "$BIN" mount gs://bench "$DIST_MNT" -f --api "$1" --emulator "$PROXY_ADDR" -o "staging_dir=$WORK/dstaging" 2>>"$WORK/dmount.log" &
  far_started $!
}
# far_started PID: records a mount just started at $DIST_MNT and waits until it is up.
far_started() {
  FAR_PID=$1
  PIDS+=("$FAR_PID")
  MOUNTS+=("$DIST_MNT")
  for _ in $(seq 1 200); do mountpoint -q "$DIST_MNT" && break; sleep 0.05; done
}
# far_unmount: unmounts $DIST_MNT (a reader that just exited may hold it a moment) and waits.
far_unmount() {
  for _ in $(seq 1 50); do fusermount3 -u "$DIST_MNT" 2>/dev/null && break; sleep 0.1; done
  mountpoint -q "$DIST_MNT" && fusermount3 -u -z "$DIST_MNT"
  wait "$FAR_PID" 2>/dev/null || true
}

# mount_cat API COUNT: seconds for `cat` of COUNT small files through a fresh mount over the proxy
# (the folder is listed first, as a shell's glob does).
mount_cat() {
  far_mount "$1"
  local files=() t0 t1
  for i in $(seq 0 $(($2 - 1))); do files+=("$DIST_MNT/small/s$(printf %04d "$i").txt"); done
  t0=$(now)
  ls "$DIST_MNT/small" >/dev/null
  cat "${files[@]}" >/dev/null
  t1=$(now)
  far_unmount
  secs "$t0" "$t1"
}

echo
printf '%-46s %10s %10s %8s %6s\n' "far away: cat of small files (raw = 1 conn)" "raw (s)" "mount (s)" "ratio" "conns"
for setting in "10 200" "50 60"; do
  set -- $setting
  ms=$1; count=$2
  for api in firebase gcs; do
    start_proxy "$ms"
    raw=$(raw_client "$api" "$count")
    stop_proxy
    start_proxy "$ms"
    mnt=$(mount_cat "$api" "$count")
    stop_proxy
    conns=$(proxy_connections "$ms")
    printf '%-46s %10s %10s %8s %6s\n' "$count x 4 KiB, ${ms} ms each way, $api" "$raw" "$mnt" "$(ratio "$raw" "$mnt")x" "$conns"
  done
done

# ls -l of a Firebase folder (names only in its pages: an attributes request per object) and
# cp -r out of the mount, against the object commands, 10 ms each way. `small/` holds the
# files; bench.sh's full run has 1,000 of them, --distance-only 200.
start_proxy 10
n_small=$(python3 - "$EMU_ADDR" <<'PY'
import http.client, json, sys
host, port = sys.argv[1].split(":")
c = http.client.HTTPConnection(host, int(port)); token = None; n = 0
while True:
    q = "prefix=small%2F&delimiter=%2F" + (f"&pageToken={token}" if token else "")
    c.request("GET", "/v0/b/bench/o?" + q); page = json.loads(c.getresponse().read())
    n += len(page.get("items", [])); token = page.get("nextPageToken")
    if not token: break
print(n)
PY
)
rm -rf "$WORK/cp-mount" "$WORK/cp-cmd" "$WORK/cp-one"
far_mount firebase
t0=$(now); ls -l "$DIST_MNT/small" >/dev/null; t1=$(now); lsl_mount=$(secs "$t0" "$t1")
far_unmount
far_mount firebase
t0=$(now); cp -r "$DIST_MNT/small" "$WORK/cp-mount"; t1=$(now); cp_mount=$(secs "$t0" "$t1")
far_unmount
t0=$(now); "$BIN" ls -l gs://bench/small --emulator "$PROXY_ADDR" >/dev/null; t1=$(now); lsl_cmd=$(secs "$t0" "$t1")
t0=$(now); "$BIN" cp -r --no-progress gs://bench/small "$WORK/cp-cmd" --emulator "$PROXY_ADDR"; t1=$(now); cp_cmd=$(secs "$t0" "$t1")
# One file at a time, for the object commands' own ratio: 50 files, scaled.
t0=$(now)
for i in $(seq 0 49); do "$BIN" cp --no-progress "gs://bench/small/s$(printf %04d "$i").txt" "$WORK/cp-one/" --emulator "$PROXY_ADDR" >/dev/null 2>&1 || mkdir -p "$WORK/cp-one"; done
t1=$(now)
one_each=$(python3 -c "print(f'{($t1 - $t0) / 50 * $n_small:.3f}')")
# Writes: the same files copied into a writable mount, until `bucketfs sync` says the bucket has
# them all, against `bucketfs cp -r` uploading them (16 at a time).
rm -rf "$WORK/dstaging-w"
"$BIN" mount gs://bench "$DIST_MNT" -f --api firebase --emulator "$PROXY_ADDR" -o "staging_dir=$WORK/dstaging-w,writable" 2>>"$WORK/dmount.log" &
far_started $!
t0=$(now); cp -r "$WORK/cp-cmd" "$DIST_MNT/up-mount"; t1=$(now); "$BIN" sync "$DIST_MNT" --timeout 600 >/dev/null; t2=$(now)
far_unmount
w_close=$(secs "$t0" "$t1"); w_sync=$(secs "$t0" "$t2")
t0=$(now); "$BIN" cp -r --no-progress "$WORK/cp-cmd" gs://bench/up-cmd --emulator "$PROXY_ADDR"; t1=$(now); w_cmd=$(secs "$t0" "$t1")
stop_proxy
cmp_ok=$(diff -rq "$WORK/cp-mount" "$WORK/cp-cmd" >/dev/null && echo same || echo DIFFER)
printf '%-46s %10s %10s %8s\n' "$n_small files, 10 ms each way (firebase)" "reference" "bucketfs" "ratio"
printf '%-46s %10s %10s %8s\n' "  ls -l: mount vs bucketfs ls -l (s)" "$lsl_cmd" "$lsl_mount" "$(ratio "$lsl_cmd" "$lsl_mount")x"
printf '%-46s %10s %10s %8s\n' "  cp -r: mount vs bucketfs cp -r (s, $cmp_ok)" "$cp_cmd" "$cp_mount" "$(ratio "$cp_cmd" "$cp_mount")x"
printf '%-46s %10s %10s %8s\n' "  bucketfs cp -r vs one cp per file (s)" "$one_each" "$cp_cmd" "$(ratio "$one_each" "$cp_cmd")x"
printf '%-46s %10s %10s %8s\n' "  write: cp -r in + sync vs bucketfs cp -r up (s)" "$w_cmd" "$w_sync" "$(ratio "$w_cmd" "$w_sync")x"
printf '%-46s %10s %10s\n' "  write: cp -r into the mount returns after (s)" "" "$w_close"
if [ -f scripts/bench-distance-peers.sh ]; then . scripts/bench-distance-peers.sh; fi
