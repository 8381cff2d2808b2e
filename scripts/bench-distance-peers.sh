# Part of bench.sh (sourced after bench-distance.sh): the far bucket against rclone mount, and
# the time to first byte of a cold file in a listed folder against one raw GET. 10 ms each way,
# GCS API (what rclone speaks), 500 files of 256 KiB (cp -r) in `photos/`.
python3 - "$EMU_ADDR" <<'PY'
import http.client, os, sys
host, port = sys.argv[1].split(":")
c = http.client.HTTPConnection(host, int(port))
body = os.urandom(256 * 1024)
for i in range(500):
    n = f"photos/p{i:04d}.jpg"
    c.request("POST", "/v0/b/bench/o?name=" + n.replace("/", "%2F"), body, {"Content-Type": "image/jpeg"})
    c.getresponse().read()
PY
start_proxy 10
rm -rf "$WORK/ph-bfs" "$WORK/ph-cmd" "$WORK/ph-rclone"
# bucketfs mount (GCS API): cp -r, then time to first byte of a file not read yet.
far_mount gcs
t0=$(now); cp -r "$DIST_MNT/photos" "$WORK/ph-bfs"; t1=$(now); ph_bfs=$(secs "$t0" "$t1")
ls "$DIST_MNT/small" >/dev/null
ttfb_bfs=$(python3 -c "
import os, time
t = time.perf_counter(); fd = os.open('$DIST_MNT/small/s0150.txt', os.O_RDONLY); os.read(fd, 1); print(f'{time.perf_counter() - t:.4f}')")
far_unmount
ttfb_raw=$(python3 - "$PROXY_ADDR" <<'PY'
import http.client, sys, time
host, port = sys.argv[1].rsplit(":", 1)
c = http.client.HTTPConnection(host, int(port))
c.request("GET", "/download/storage/v1/b/bench/o/small%2Fs0001.txt?alt=media"); c.getresponse().read()
t = time.perf_counter()
c.request("GET", "/download/storage/v1/b/bench/o/small%2Fs0151.txt?alt=media"); r = c.getresponse(); r.read(1)
print(f"{time.perf_counter() - t:.4f}")
PY
)
t0=$(now); "$BIN" cp -r --no-progress gs://bench/photos "$WORK/ph-cmd" --api gcs --emulator "$PROXY_ADDR"; t1=$(now); ph_cmd=$(secs "$t0" "$t1")
ph_rclone=-
if command -v rclone >/dev/null; then
  export RCLONE_CONFIG=/dev/null
  rclone mount ":gcs,anonymous=true,endpoint='http://$PROXY_ADDR/storage/v1/':bench" "$DIST_MNT" --read-only 2>>"$WORK/dmount.log" &
  far_started $!
  t0=$(now); cp -r "$DIST_MNT/photos" "$WORK/ph-rclone"; t1=$(now); ph_rclone=$(secs "$t0" "$t1")
  far_unmount
fi
stop_proxy
same=$(diff -rq "$WORK/ph-bfs" "$WORK/ph-cmd" >/dev/null && echo same || echo DIFFER)
printf '%-46s %10s %10s %8s\n' "500 x 256 KiB, 10 ms each way (gcs)" "reference" "bucketfs" "ratio"
printf '%-46s %10s %10s %8s\n' "  cp -r: mount vs bucketfs cp -r (s, $same)" "$ph_cmd" "$ph_bfs" "$(ratio "$ph_cmd" "$ph_bfs")x"
if [ "$ph_rclone" != - ]; then
  printf '%-46s %10s %10s %8s\n' "  cp -r: mount vs rclone mount (s)" "$ph_rclone" "$ph_bfs" "$(ratio "$ph_rclone" "$ph_bfs")x"
fi
printf '%-46s %10s %10s %8s\n' "  first byte of a cold listed file vs a GET (s)" "$ttfb_raw" "$ttfb_bfs" "$(ratio "$ttfb_raw" "$ttfb_bfs")x"
