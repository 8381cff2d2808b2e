# Part of bench.sh (sourced): buckets of many objects. `bucketfs serve` is seeded with FLAT
# zero-byte objects in one folder (flat/) and FOLDERS folders of 1,000 (tree/), then, side by
# side in one run: Python listing every page on one connection ("raw"), bucketfs mounted over
# the GCS API, and `rclone mount` on the same server, each mount fresh: the first and second
# `ls -l flat/`, `find tree/ -type f`, `du -s tree/` after it, and each daemon's peak RSS. Then
# the server itself: RSS holding the objects, and how long a restart on the store takes.
#   scripts/bench.sh --scale [N]   (N objects under tree/ in folders of 1,000; default 100,000)
SCALE_TREE=${SCALE_N:-100000}
SCALE_FOLDERS=$(( (SCALE_TREE + 999) / 1000 ))
SCALE_FLAT=100000
[ "$SCALE_TREE" -lt "$SCALE_FLAT" ] && SCALE_FLAT=$SCALE_TREE
SMNT="$WORK/smnt"
mkdir -p "$SMNT"
export RCLONE_CONFIG=/dev/null

echo "bucketfs bench --scale: $SCALE_FLAT objects in flat/, $SCALE_FOLDERS folders of 1,000 in tree/, emulator $EMU_ADDR, $(nproc) cores"

# Seeding: zero-byte uploads on 4 connections (not timed).
t0=$(now)
python3 - "$EMU_ADDR" "$SCALE_FLAT" "$SCALE_FOLDERS" <<'PY'
import http.client, sys, threading
host, port = sys.argv[1].split(":")
flat, folders = int(sys.argv[2]), int(sys.argv[3])
names = [f"flat/f{i:07d}" for i in range(flat)] + [f"tree/d{d:04d}/f{i:04d}" for d in range(folders) for i in range(1000)]
failed = []
def work(part):
    c = http.client.HTTPConnection(host, int(port))
    for n in part:
        c.request("POST", "/upload/storage/v1/b/bench/o?uploadType=media&name=" + n.replace("/", "%2F"), b"",
                  {"Content-Type": "application/octet-stream"})
        r = c.getresponse(); r.read()
        if r.status != 200: failed.append((n, r.status))
threads = [threading.Thread(target=work, args=(names[k::4],)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
if failed: sys.exit(f"bench: seeding failed: {failed[:3]}")
PY
echo "(seeded $((SCALE_FLAT + SCALE_FOLDERS * 1000)) objects in $(secs "$t0" "$(now)") s)"

# raw_list PREFIX [RECURSE]: seconds Python takes to list every page under PREFIX (1,000 a page,
# one connection); with RECURSE, each folder the first listing shows too.
raw_list() {
  python3 - "$EMU_ADDR" "$1" "${2:-}" <<'PY'
import http.client, json, sys, time, urllib.parse
host, port = sys.argv[1].split(":")
c = http.client.HTTPConnection(host, int(port))
def listing(prefix):
    token, prefixes, count = None, [], 0
    while True:
        q = {"prefix": prefix, "delimiter": "/", "maxResults": "1000"}
        if token: q["pageToken"] = token
        c.request("GET", "/storage/v1/b/bench/o?" + urllib.parse.urlencode(q))
        page = json.loads(c.getresponse().read())
        prefixes += page.get("prefixes", []); count += len(page.get("items", []))
        token = page.get("nextPageToken")
        if not token: return prefixes, count
t = time.perf_counter()
prefixes, count = listing(sys.argv[2])
if sys.argv[3]:
    for p in prefixes: count += listing(p)[1]
print(f"{time.perf_counter() - t:.3f}")
PY
}

# scale_mount TOOL [OPTIONS]: a fresh mount of the bucket at $SMNT; sets SM_PID.
scale_mount() {
  rm -rf "$WORK/sstaging"
  case $1 in
    bucketfs) "$BIN" mount gs://bench "$SMNT" -f --api gcs --emulator "$EMU_ADDR" -o "staging_dir=$WORK/sstaging${2:+,$2}" 2>>"$WORK/smount.log" & ;;
    rclone) rclone mount ":gcs,anonymous=true,endpoint='http://$EMU_ADDR/storage/v1/':bench" "$SMNT" --read-only 2>>"$WORK/smount.log" & ;;
  esac
  SM_PID=$!
  PIDS+=("$SM_PID")
  MOUNTS+=("$SMNT")
  for _ in $(seq 1 100); do mountpoint -q "$SMNT" && break; sleep 0.1; done
  mountpoint -q "$SMNT" || { echo "bench: $1 did not mount" >&2; cat "$WORK/smount.log" >&2; return 1; }
}
scale_unmount() {
  for _ in $(seq 1 50); do fusermount3 -u "$SMNT" 2>/dev/null && break; sleep 0.1; done
  mountpoint -q "$SMNT" && fusermount3 -u -z "$SMNT"
  wait "$SM_PID" 2>/dev/null || true
}
peak_mib() { awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

# timed COMMAND...: seconds COMMAND took; fails the bench when it fails.
timed() {
  local t0 t1
  t0=$(now); "$@" >/dev/null || { echo "bench: $* failed" >&2; return 1; }; t1=$(now)
  secs "$t0" "$t1"
}

# scale_measure TOOL [OPTIONS]: "ls1 ls2 find du rss count" on fresh mounts (ls, then find + du).
scale_measure() {
  local ls1 ls2 fnd du rss count
  scale_mount "$@"
  ls1=$(timed ls -l "$SMNT/flat")
  ls2=$(timed ls -l "$SMNT/flat")
  count=$(ls "$SMNT/flat" | wc -l)
  [ "$count" -eq "$SCALE_FLAT" ] || { echo "bench: $1 listed $count of $SCALE_FLAT in flat/" >&2; return 1; }
  scale_unmount
  scale_mount "$@"
  fnd=$(timed find "$SMNT/tree" -type f)
  du=$(timed du -s "$SMNT/tree")
  count=$(find "$SMNT/tree" -type f | wc -l)
  [ "$count" -eq $((SCALE_FOLDERS * 1000)) ] || { echo "bench: $1 found $count files in tree/" >&2; return 1; }
  # The peak after both walks on one daemon (the flat folder listed too).
  ls -l "$SMNT/flat" >/dev/null
  rss=$(peak_mib "$SM_PID")
  scale_unmount
  echo "$ls1 $ls2 $fnd $du $rss"
}

raw_flat=$(raw_list flat/)
raw_tree=$(raw_list tree/ recurse)
read -r b_ls1 b_ls2 b_find b_du b_rss < <(scale_measure bucketfs)
small_budget=
if "$BIN" mount --help 2>&1 | grep -q metadata_cache_size; then
  read -r s_ls1 s_ls2 s_find s_du s_rss < <(scale_measure bucketfs metadata_cache_size=64M)
  small_budget=1
fi
have_rclone=
if command -v rclone >/dev/null; then
  read -r r_ls1 r_ls2 r_find r_du r_rss < <(scale_measure rclone)
  have_rclone=1
fi

# The server: RSS holding everything, then a restart on the same store until it answers a list.
serve_rss=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$EMU_PID/status")
stop_emulator
t0=$(now)
start_emulator "$WORK/server"
curl -sf -o /dev/null "http://$EMU_ADDR/storage/v1/b/bench/o?maxResults=1&prefix=tree/"
serve_start=$(secs "$t0" "$(now)")
serve_rss_started=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$EMU_PID/status")

echo
row "measurement (s; ratio: reference / bucketfs)" "reference" "bucketfs" "ratio"
row "ls -l flat/ first vs raw listing" "$raw_flat" "$b_ls1" "$(ratio "$raw_flat" "$b_ls1")x"
row "ls -l flat/ again vs first" "$b_ls1" "$b_ls2" "$(ratio "$b_ls1" "$b_ls2")x"
row "find tree/ vs raw listing" "$raw_tree" "$b_find" "$(ratio "$raw_tree" "$b_find")x"
row "du -s tree/ after find (s)" "-" "$b_du" "-"
row "daemon peak RSS after find + ls -l (MiB)" "-" "$b_rss" "-"
if [ -n "$small_budget" ]; then
  row "metadata_cache_size=64M: ls -l first vs raw" "$raw_flat" "$s_ls1" "$(ratio "$raw_flat" "$s_ls1")x"
  row "metadata_cache_size=64M: find vs raw" "$raw_tree" "$s_find" "$(ratio "$raw_tree" "$s_find")x"
  row "metadata_cache_size=64M: peak RSS (MiB)" "-" "$s_rss" "-"
fi
if [ -n "$have_rclone" ]; then
  row "rclone vs bucketfs: ls -l first" "$r_ls1" "$b_ls1" "$(ratio "$r_ls1" "$b_ls1")x"
  row "rclone vs bucketfs: ls -l again" "$r_ls2" "$b_ls2" "$(ratio "$r_ls2" "$b_ls2")x"
  row "rclone vs bucketfs: find tree/" "$r_find" "$b_find" "$(ratio "$r_find" "$b_find")x"
  row "rclone vs bucketfs: du -s tree/" "$r_du" "$b_du" "$(ratio "$r_du" "$b_du")x"
  row "rclone vs bucketfs: peak RSS (MiB)" "$r_rss" "$b_rss" "$(ratio "$r_rss" "$b_rss")x"
fi
row "bucketfs serve: RSS holding all (MiB)" "-" "$serve_rss" "-"
row "bucketfs serve: restart to first list (s)" "-" "$serve_start" "-"
row "bucketfs serve: RSS after restart (MiB)" "-" "$serve_rss_started" "-"
