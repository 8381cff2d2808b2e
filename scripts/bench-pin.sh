# Part of bench.sh (sourced): what a pin of PIN_OBJECTS small objects (default 10,000, in 1,000
# folders) costs the daemon in resident memory once its first pass is done, against what a
# `find` of the same tree through a second mount of the same bucket costs (its listings and
# attributes cached). Both on their own server, mounted fresh; KiB per 1,000 objects.
PIN_OBJECTS=${PIN_OBJECTS:-10000}
start_emulator "$WORK/pin-server"
PIDS+=("$EMU_PID")
pin_addr=$EMU_ADDR
EMU_PID=
python3 - "$pin_addr" "$PIN_OBJECTS" <<'PY'
import http.client, sys, concurrent.futures
host, port = sys.argv[1].split(":")
def put(r):
    c = http.client.HTTPConnection(host, int(port))
    for i in r:
        c.request("POST", f"/upload/storage/v1/b/bench/o?uploadType=media&name=pinned%2Fd{i % 1000:04d}%2Ff{i:05d}.txt", f"file {i}".encode())
        c.getresponse().read()
n = int(sys.argv[2])
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    list(ex.map(put, [range(k, n, 8) for k in range(8)]))
PY
pin_rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
pin_growth=()
for kind in find pin; do
  mnt="$WORK/pin-mnt-$kind"
  mkdir -p "$mnt"
  "$BIN" mount gs://bench "$mnt" -f -o "staging_dir=$WORK/pin-staging-$kind,pin_interval=3600" --emulator "$pin_addr" --api gcs 2>>"$WORK/pin-mount.log" &
  pin_pid=$!
  PIDS+=("$pin_pid")
  MOUNTS+=("$mnt")
  for _ in $(seq 1 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
  mountpoint -q "$mnt" || { echo "bench: the pin mount did not come up" >&2; cat "$WORK/pin-mount.log" >&2; exit 1; }
  ls "$mnt" >/dev/null
  r0=$(pin_rss "$pin_pid")
  if [ "$kind" = pin ]; then
    "$BIN" pin "$mnt/pinned" >/dev/null
    kept=$(getfattr --only-values -n user.bucketfs.stats "$mnt" 2>/dev/null | awk -F'\t' '$1 == "pinned" {print $2}')
    case "$kept" in *"$PIN_OBJECTS files"*) ;; *) echo "bench: the pin kept $kept" >&2; exit 1 ;; esac
  else
    [ "$(find "$mnt/pinned" -type f | wc -l)" = "$PIN_OBJECTS" ] || { echo "bench: find saw another count" >&2; exit 1; }
  fi
  pin_growth+=("$(( ($(pin_rss "$pin_pid") - r0) * 1000 / PIN_OBJECTS ))")
  fusermount3 -u "$mnt"
  wait "$pin_pid" 2>/dev/null || true
done
row "RSS per 1,000 objects: find vs pin (KiB)" "${pin_growth[0]}" "${pin_growth[1]}" "$(ratio "${pin_growth[0]}" "${pin_growth[1]}")x"
