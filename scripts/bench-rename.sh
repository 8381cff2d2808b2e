# Sourced by bench.sh: renames, side by side on two servers in one run (and a bucket with a
# hierarchical namespace, `hns`, on the second). The reference is a server
# without objects.move (`serve --no-move`: the mount copies, then deletes), bucketfs the same
# server with it (one move per file). Our emulator copies by a hard link, so the copy's time here
# is far below GCS's (which copies every byte); the request counts are what carries over.
# RENAME_FILES: the objects of the folder rows (default 1000).
RENAME_FILES=${RENAME_FILES:-1000}
rename_requests() { curl -sf "http://$1/emulator/v1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

# One server with move, one without; each gets the big file and a folder of small ones.
rename_servers=()
for kind in nomove move; do
  if [ "$kind" = nomove ]; then start_emulator "$WORK/rename-$kind" --no-move --hierarchical-namespace hns; else start_emulator "$WORK/rename-$kind" --hierarchical-namespace hns; fi
  PIDS+=("$EMU_PID")
  rename_servers+=("$EMU_ADDR")
  "$BIN" cp --no-progress "$WORK/big.bin" gs://bench/rn/big.bin --emulator "$EMU_ADDR" --api gcs
  python3 - "$EMU_ADDR" "$RENAME_FILES" <<'PY'
import http.client, sys, concurrent.futures
host, port = sys.argv[1].split(":")
def put(r):
    c = http.client.HTTPConnection(host, int(port))
    for i in r:
        for bucket in ("bench", "hns"):
            c.request("POST", f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name=dir%2Ff{i:05d}.txt", f"file {i}".encode())
            c.getresponse().read()
n = int(sys.argv[2])
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    list(ex.map(put, [range(k, n, 8) for k in range(8)]))
PY
done
EMU_PID=

rename_times=()
rename_counts=()
for addr in "${rename_servers[@]}"; do
  mnt="$WORK/rename-mnt-${addr##*:}"
  mkdir -p "$mnt"
  "$BIN" mount gs://bench "$mnt" -f -o writable,staging_dir="$WORK/rename-staging-${addr##*:}" --emulator "$addr" --api gcs 2>>"$WORK/rename-mount.log" &
  rename_mount_pid=$!
  PIDS+=("$rename_mount_pid")
  MOUNTS+=("$mnt")
  for _ in $(seq 1 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
  mountpoint -q "$mnt" || { echo "bench: the rename mount did not come up" >&2; cat "$WORK/rename-mount.log" >&2; exit 1; }
  ls -l "$mnt/rn" "$mnt/dir" >/dev/null
  r0=$(rename_requests "$addr")
  t0=$(now); mv "$mnt/rn/big.bin" "$mnt/rn/renamed.bin"; "$BIN" sync "$mnt" >/dev/null; t1=$(now)
  r1=$(rename_requests "$addr")
  t2=$(now); mv "$mnt/dir" "$mnt/moved"; "$BIN" sync "$mnt" --timeout 600 >/dev/null; t3=$(now)
  r2=$(rename_requests "$addr")
  rename_times+=("$(secs "$t0" "$t1")" "$(secs "$t2" "$t3")")
  # Less the one stats request each count makes.
  rename_counts+=("$((r1 - r0 - 1))" "$((r2 - r1 - 1))")
  # Objects, not the folder placeholders the rename makes.
  left=$("$BIN" ls -r gs://bench/dir --emulator "$addr" --api gcs 2>/dev/null | grep -vc '/$' || true)
  moved=$("$BIN" ls -r gs://bench/moved --emulator "$addr" --api gcs 2>/dev/null | grep -vc '/$' || true)
  [ "$left" = 0 ] && [ "$moved" = "$RENAME_FILES" ] || { echo "bench: folder rename left $left behind, $moved moved" >&2; exit 1; }
  fusermount3 -u "$mnt"
  wait "$rename_mount_pid" 2>/dev/null || true
done

# The same folder renamed through a mount of the HNS bucket: one folders.rename within the FUSE
# rename, against the flat bucket's mount above (one move per object), on the same server.
addr=${rename_servers[1]}
mnt="$WORK/rename-mnt-hns"
mkdir -p "$mnt"
"$BIN" mount gs://hns "$mnt" -f -o writable,staging_dir="$WORK/rename-staging-hns" --emulator "$addr" --api gcs 2>>"$WORK/rename-mount.log" &
rename_mount_pid=$!
PIDS+=("$rename_mount_pid")
MOUNTS+=("$mnt")
for _ in $(seq 1 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
mountpoint -q "$mnt" || { echo "bench: the HNS rename mount did not come up" >&2; cat "$WORK/rename-mount.log" >&2; exit 1; }
ls -l "$mnt/dir" >/dev/null
r0=$(rename_requests "$addr")
t0=$(now); mv "$mnt/dir" "$mnt/mounted"; "$BIN" sync "$mnt" --timeout 600 >/dev/null; t1=$(now)
r1=$(rename_requests "$addr")
hns_mount_rename=$(secs "$t0" "$t1")
hns_mount_requests=$((r1 - r0 - 1))
moved=$("$BIN" ls -r gs://hns/mounted --emulator "$addr" --api gcs 2>/dev/null | grep -vc '/$' || true)
[ "$moved" = "$RENAME_FILES" ] || { echo "bench: HNS folder rename through the mount moved $moved" >&2; exit 1; }
fusermount3 -u "$mnt"
wait "$rename_mount_pid" 2>/dev/null || true

# The same folder on an HNS bucket: one folders.rename, polled until done, against bucketfs mv
# of the folder on the flat bucket (one move per object, 16 at once).
t0=$(now)
op=$(curl -sf -X POST "http://$addr/storage/v1/b/hns/folders/mounted%2F/renameTo/folders/moved%2F" | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"].rsplit("/",1)[1])')
until curl -sf "http://$addr/storage/v1/b/hns/operations/$op" | grep -q '"done":true'; do :; done
t1=$(now)
hns_rename=$(secs "$t0" "$t1")
t0=$(now); "$BIN" mv gs://bench/moved gs://bench/again --emulator "$addr" --api gcs; t1=$(now)
cli_mv=$(secs "$t0" "$t1")

row "rename of a $SIZE_MIB MiB file: copy+delete vs move (s)" "${rename_times[0]}" "${rename_times[2]}" "$(ratio "${rename_times[0]}" "${rename_times[2]}")x"
row "  requests to the server" "${rename_counts[0]}" "${rename_counts[2]}" ""
row "folder of $RENAME_FILES renamed: copy+delete vs move (s)" "${rename_times[1]}" "${rename_times[3]}" "$(ratio "${rename_times[1]}" "${rename_times[3]}")x"
row "  requests to the server" "${rename_counts[1]}" "${rename_counts[3]}" ""
row "folder of $RENAME_FILES: mv (flat) vs folders.rename (HNS) (s)" "$cli_mv" "$hns_rename" "$(ratio "$cli_mv" "$hns_rename")x"
row "folder of $RENAME_FILES through the mount: flat vs HNS (s)" "${rename_times[3]}" "$hns_mount_rename" "$(ratio "${rename_times[3]}" "$hns_mount_rename")x"
row "  requests to the server" "${rename_counts[3]}" "$hns_mount_requests" ""
