# Part of bench.sh (sourced): a file whose staged copy is complete, read through a fresh mount
# (the mounted file's page cache empty, the copy on disk and in its own page cache) against the
# staged copy itself: by passthrough (the default) and with passthrough=no.
# Expects BIN, WORK, MNT, SIZE_MIB, MOUNT_PID and the helpers of bench.sh and bench-mount.sh.
STAGED="$WORK/staged"
mount_staged() {
  unmount_bench
  "$BIN" mount gs://bench "$MNT" -f -o "staging_dir=$STAGED${1:+,$1}" 2>>"$WORK/mount.log" &
  MOUNT_PID=$!; PIDS+=("$MOUNT_PID")
  for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
}
mount_staged
cat "$MNT/big.bin" >/dev/null
for _ in $(seq 1 300); do
  [ "$(getfattr --only-values -n user.staged "$MNT/big.bin" 2>/dev/null)" = complete ] && break; sleep 0.1
done
COPY=$(find "$STAGED" -name '*.data' -size "$((SIZE_MIB << 10))k" | head -1)
[ -n "$COPY" ] || { echo "bench: the big file was not staged" >&2; exit 1; }
cached_kib() { awk '/^Cached:/ {print $2}' /proc/meminfo; }
# best of three of each: the copy itself, then a fresh mount of each kind.
best_copy=999999; best_pt=999999; best_nopt=999999
for _ in 1 2 3; do
  t0=$(now); cat "$COPY" >/dev/null; t1=$(now); best_copy=$(python3 -c "print(min($best_copy, $t1 - $t0))")
  mount_staged
  c0=$(cached_kib); t0=$(now); cat "$MNT/big.bin" >/dev/null; t1=$(now); pt_cached=$(( $(cached_kib) - c0 ))
  best_pt=$(python3 -c "print(min($best_pt, $t1 - $t0))")
  mount_staged passthrough=no
  c0=$(cached_kib); t0=$(now); cat "$MNT/big.bin" >/dev/null; t1=$(now); nopt_cached=$(( $(cached_kib) - c0 ))
  best_nopt=$(python3 -c "print(min($best_nopt, $t1 - $t0))")
done
cmp -s "$MNT/big.bin" "$WORK/big.bin" || { echo "bench: staged bytes differ" >&2; exit 1; }
random_preads() {
  python3 - "$1" "$SIZE_MIB" <<'PY'
import os, random, sys, time
path = sys.argv[1]; size = int(sys.argv[2]) << 20
rng = random.Random(11); offsets = [rng.randrange(0, size - 4096) for _ in range(20000)]
fd = os.open(path, os.O_RDONLY)
t = time.perf_counter()
for o in offsets: os.pread(fd, 4096, o)
print(f"{20000 / (time.perf_counter() - t):.0f}")
PY
}
rand_copy=$(random_preads "$COPY")
mount_staged
rand_pt=$(random_preads "$MNT/big.bin")
opens=$(getfattr --absolute-names --only-values -n user.bucketfs.stats "$MNT" | awk -F'\t' '$1 == "opens by passthrough" {print $2}')
mount_staged passthrough=no
rand_nopt=$(random_preads "$MNT/big.bin")
unmount_bench
rm -rf "$STAGED"

row "staged $SIZE_MIB MiB, fresh mount vs cat of the copy (s)" "$(printf %.3f "$best_copy")" "$(printf %.3f "$best_pt")" "$(ratio "$best_copy" "$best_pt")x"
row "  the same with passthrough=no (s)" "$(printf %.3f "$best_copy")" "$(printf %.3f "$best_nopt")" "$(ratio "$best_copy" "$best_nopt")x"
row "  page cache it added, passthrough / no (MiB)" "$((nopt_cached >> 10))" "$((pt_cached >> 10))" ""
row "staged random 4 KiB preads/s vs on the copy" "$rand_copy" "$rand_pt" "$(ratio "$rand_pt" "$rand_copy")x"
row "  the same with passthrough=no" "$rand_copy" "$rand_nopt" "$(ratio "$rand_nopt" "$rand_copy")x"
row "  opens by passthrough (the random reads' mount)" "" "${opens:-?}" ""
