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

# kill -9 in the middle of a folder rename, names counted after: `bucketfs mv` of the folder
# (killed once a tenth of its moves reached the server, then run again), and a rename through a
# flat bucket's mount (the daemon killed once the moves began, remounted on its staging folder,
# synced). Each object must be under exactly one name, all under the new one at the end.
count_under() { "$BIN" ls -r "gs://bench/$2" --emulator "$1" --api gcs 2>/dev/null | grep -vc '/$' || true; }
addr=${rename_servers[1]}
r0=$(rename_requests "$addr")
"$BIN" mv gs://bench/again gs://bench/killed --emulator "$addr" --api gcs >/dev/null 2>&1 &
mv_pid=$!
until [ "$(rename_requests "$addr")" -gt $((r0 + RENAME_FILES / 10)) ] || ! kill -0 "$mv_pid" 2>/dev/null; do :; done
kill -9 "$mv_pid" 2>/dev/null || true
wait "$mv_pid" 2>/dev/null || true
mv_old=$(count_under "$addr" again); mv_new=$(count_under "$addr" killed)
"$BIN" mv gs://bench/again gs://bench/killed --emulator "$addr" --api gcs >/dev/null 2>&1 || true
mv_done=$(count_under "$addr" killed)
[ $((mv_old + mv_new)) = "$RENAME_FILES" ] && [ "$mv_done" = "$RENAME_FILES" ] && [ "$(count_under "$addr" again)" = 0 ] \
  || { echo "bench: bucketfs mv killed: $mv_old + $mv_new names, $mv_done after the second run" >&2; exit 1; }

mnt="$WORK/rename-mnt-kill"
mkdir -p "$mnt"
mount_kill() {
  "$BIN" mount gs://bench "$mnt" -f -o writable,staging_dir="$WORK/rename-staging-kill" --emulator "$addr" --api gcs 2>>"$WORK/rename-mount.log" &
  rename_mount_pid=$!
  PIDS+=("$rename_mount_pid")
  MOUNTS+=("$mnt")
  for _ in $(seq 1 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
  mountpoint -q "$mnt" || { echo "bench: the kill mount did not come up" >&2; cat "$WORK/rename-mount.log" >&2; exit 1; }
}
mount_kill
ls -l "$mnt/killed" >/dev/null
r0=$(rename_requests "$addr")
mv "$mnt/killed" "$mnt/survived"
until [ "$(rename_requests "$addr")" -gt $((r0 + RENAME_FILES / 10)) ]; do :; done
kill -9 "$rename_mount_pid"
wait "$rename_mount_pid" 2>/dev/null || true
fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
k_old=$(count_under "$addr" killed); k_new=$(count_under "$addr" survived)
mount_kill
"$BIN" sync "$mnt" --timeout 600 >/dev/null
k_done=$(count_under "$addr" survived); k_left=$(count_under "$addr" killed)
fusermount3 -u "$mnt"
wait "$rename_mount_pid" 2>/dev/null || true
[ $((k_old + k_new)) = "$RENAME_FILES" ] && [ "$k_done" = "$RENAME_FILES" ] && [ "$k_left" = 0 ] \
  || { echo "bench: mount killed mid folder rename: $k_old + $k_new names, then $k_left + $k_done after the remount" >&2; exit 1; }

row "rename of a $SIZE_MIB MiB file: copy+delete vs move (s)" "${rename_times[0]}" "${rename_times[2]}" "$(ratio "${rename_times[0]}" "${rename_times[2]}")x"
row "  requests to the server" "${rename_counts[0]}" "${rename_counts[2]}" ""
row "folder of $RENAME_FILES renamed: copy+delete vs move (s)" "${rename_times[1]}" "${rename_times[3]}" "$(ratio "${rename_times[1]}" "${rename_times[3]}")x"
row "  requests to the server" "${rename_counts[1]}" "${rename_counts[3]}" ""
row "folder of $RENAME_FILES: mv (flat) vs folders.rename (HNS) (s)" "$cli_mv" "$hns_rename" "$(ratio "$cli_mv" "$hns_rename")x"
row "folder of $RENAME_FILES through the mount: flat vs HNS (s)" "${rename_times[3]}" "$hns_mount_rename" "$(ratio "${rename_times[3]}" "$hns_mount_rename")x"
row "  requests to the server" "${rename_counts[3]}" "$hns_mount_requests" ""
row "mv of $RENAME_FILES killed: old+new names at the kill" "$mv_old" "$mv_new" ""
row "  under the new name after mv again" "$RENAME_FILES" "$mv_done" ""
row "mount killed mid rename: old+new names" "$k_old" "$k_new" ""
row "  under the new name after remount + sync" "$RENAME_FILES" "$k_done" ""
