# Shared helpers of demo.sh and bench.sh: start `bucketfs serve` on a free loopback port and stop
# it (by pid) on exit. Source this file; it expects $BIN to be the bucketfs binary.

# start_emulator ROOT [extra serve args...]: sets EMU_PID and EMU_ADDR.
start_emulator() {
  local root=$1
  shift
  local log
  log=$(mktemp)
  local port_args=(--port 0)
  [ "${1:-}" = "--port" ] && { port_args=(--port "$2"); shift 2; }
  "$BIN" serve --root "$root" "${port_args[@]}" "$@" >/dev/null 2>"$log" &
  EMU_PID=$!
  for _ in $(seq 1 100); do
    EMU_ADDR=$(grep -o '127\.0\.0\.1:[0-9]*' "$log" | head -n1 || true)
    [ -n "$EMU_ADDR" ] && break
    sleep 0.1
  done
  rm -f "$log"
  if [ -z "$EMU_ADDR" ]; then
    kill "$EMU_PID" 2>/dev/null || true
    EMU_PID=
    echo "could not start the emulator" >&2
    return 1
  fi
}

stop_emulator() {
  if [ -n "${EMU_PID:-}" ] && kill -0 "$EMU_PID" 2>/dev/null; then
    kill "$EMU_PID" 2>/dev/null || true
    wait "$EMU_PID" 2>/dev/null || true
  fi
  EMU_PID=
}

# make_sample_bucket DIR: small images, text and a nested folder to upload.
make_sample_bucket() {
  local dir=$1
  mkdir -p "$dir/images" "$dir/docs/guides/deep"
  python3 - "$dir/images" <<'PY'
import struct, sys, zlib
def png(path, w, h, color):
    raw = b"".join(b"\x00" + bytes(color) * w for _ in range(h))
    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    data += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    open(path, "wb").write(data)
png(sys.argv[1] + "/red.png", 64, 64, (220, 40, 40))
png(sys.argv[1] + "/blue.png", 128, 32, (40, 80, 220))
PY
  printf 'Hello from bucketfs!\nThis bucket is served by `bucketfs serve` on loopback.\n' >"$dir/README.txt"
  printf 'name,size\nred.png,small\nblue.png,small\n' >"$dir/docs/inventory.csv"
  printf '# Getting started\n\nMount a bucket with `bucketfs mount gs://BUCKET /mnt/bucket`.\n' >"$dir/docs/guides/start.md"
  printf '{"level": 3, "note": "a nested folder"}\n' >"$dir/docs/guides/deep/data.json"
  head -c 3000000 /dev/urandom >"$dir/docs/random.bin"
}
