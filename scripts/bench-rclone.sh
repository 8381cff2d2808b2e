# Part of bench.sh (sourced, after bench-mount.sh has filled the bucket): bucketfs mount over the
# GCS API against `rclone mount` (default options, and --vfs-cache-mode full) on the same emulator.
command -v rclone >/dev/null || { echo "(rclone is not installed: no rclone comparison)"; return 0; }
RMNT="$WORK/rmnt"
mkdir -p "$RMNT"
export RCLONE_CONFIG=/dev/null
REMOTE=":gcs,anonymous=true,endpoint='http://$EMU_ADDR/storage/v1/':bench"

# start_mount NAME: mounts configuration NAME at $RMNT and sets RM_PID.
start_mount() {
  rm -rf "$WORK/rstaging" "$WORK/rclone-cache"
  case $1 in
    bucketfs) "$BIN" mount gs://bench "$RMNT" -f --api gcs --emulator "$EMU_ADDR" -o "staging_dir=$WORK/rstaging" 2>>"$WORK/rmount.log" & ;;
    rclone) rclone mount "$REMOTE" "$RMNT" --read-only 2>>"$WORK/rmount.log" & ;;
    rclone-full) rclone mount "$REMOTE" "$RMNT" --read-only --vfs-cache-mode full --cache-dir "$WORK/rclone-cache" 2>>"$WORK/rmount.log" & ;;
  esac
  RM_PID=$!
  PIDS+=("$RM_PID")
  MOUNTS+=("$RMNT")
  for _ in $(seq 1 100); do mountpoint -q "$RMNT" && break; sleep 0.1; done
  mountpoint -q "$RMNT" || { echo "bench: $1 did not mount" >&2; cat "$WORK/rmount.log" >&2; return 1; }
}
stop_mount() {
  # Read-ahead requests of a reader that just exited may hold the mount for a moment.
  for _ in $(seq 1 50); do fusermount3 -u "$RMNT" 2>/dev/null && break; sleep 0.1; done
  mountpoint -q "$RMNT" && fusermount3 -u -z "$RMNT"
  wait "$RM_PID" 2>/dev/null || true
}

# measure NAME: prints "seq ls cat rand ttfb" for one configuration, each on a fresh mount.
measure() {
  local seq ls catt rand ttfb t0 t1
  start_mount "$1"
  ttfb=$(python3 -c "
import os, time
t = time.perf_counter(); fd = os.open('$RMNT/big.bin', os.O_RDONLY); os.read(fd, 1); print(f'{time.perf_counter() - t:.4f}')")
  seq=999999
  for _ in 1 2; do
    stop_mount; start_mount "$1"
    t0=$(now); cat "$RMNT/big.bin" >/dev/null; t1=$(now); seq=$(python3 -c "print(f'{min($seq, $t1 - $t0):.3f}')")
  done
  stop_mount; start_mount "$1"
  t0=$(now); ls -l "$RMNT/ls" >/dev/null; t1=$(now); ls=$(secs "$t0" "$t1")
  t0=$(now); cat "$RMNT"/small/s*.txt >/dev/null; t1=$(now); catt=$(secs "$t0" "$t1")
  stop_mount; start_mount "$1"
  rand=$(python3 - "$RMNT/big.bin" "$SIZE_MIB" <<'PY'
import os, random, sys, time
path = sys.argv[1]; size = int(sys.argv[2]) << 20
rng = random.Random(7); offsets = [rng.randrange(0, size - 4096) for _ in range(2000)]
fd = os.open(path, os.O_RDONLY); t = time.perf_counter()
for o in offsets: os.pread(fd, 4096, o)
print(f"{2000 / (time.perf_counter() - t):.0f}")
PY
)
  stop_mount
  echo "$seq $ls $catt $rand $ttfb"
}

read -r b_seq b_ls b_cat b_rand b_ttfb < <(measure bucketfs)
read -r r_seq r_ls r_cat r_rand r_ttfb < <(measure rclone)
read -r f_seq f_ls f_cat f_rand f_ttfb < <(measure rclone-full)

echo
printf '%-34s %10s %10s %12s %9s %9s\n' "bucketfs (GCS API) vs rclone mount" "bucketfs" "rclone" "rclone full" "vs rclone" "vs full"
rrow() { printf '%-34s %10s %10s %12s %9s %9s\n' "$@"; }
rrow "sequential read $SIZE_MIB MiB (s)" "$b_seq" "$r_seq" "$f_seq" "$(ratio "$r_seq" "$b_seq")x" "$(ratio "$f_seq" "$b_seq")x"
rrow "ls -l 10,000 objects (s)" "$b_ls" "$r_ls" "$f_ls" "$(ratio "$r_ls" "$b_ls")x" "$(ratio "$f_ls" "$b_ls")x"
rrow "cat 1,000 4 KiB files (s)" "$b_cat" "$r_cat" "$f_cat" "$(ratio "$r_cat" "$b_cat")x" "$(ratio "$f_cat" "$b_cat")x"
rrow "random 4 KiB reads per second" "$b_rand" "$r_rand" "$f_rand" "$(ratio "$b_rand" "$r_rand")x" "$(ratio "$b_rand" "$f_rand")x"
rrow "time to first byte (s)" "$b_ttfb" "$r_ttfb" "$f_ttfb" "$(ratio "$r_ttfb" "$b_ttfb")x" "$(ratio "$f_ttfb" "$b_ttfb")x"
echo "(ratios above 1.00x mean bucketfs is ahead)"
