# Part of demo.sh (sourced): mount the sample bucket, look around, and read offline.
echo
echo "== mounting gs://demo-bucket on $MNT"
mkdir -p "$MNT"
run "$BIN" mount gs://demo-bucket "$MNT" -o "staging_dir=$WORK/staging,metadata_ttl=2"
run ls -l "$MNT" "$MNT/images"
run cat "$MNT/README.txt"
run getfattr -d "$MNT/images/red.png"
run cp "$MNT/docs/random.bin" "$WORK/from-mount.bin"
cmp "$WORK/sample/docs/random.bin" "$WORK/from-mount.bin" && echo "(byte-identical to the uploaded file)"
for _ in $(seq 1 50); do
  [ "$(getfattr --only-values -n user.staged "$MNT/docs/random.bin" 2>/dev/null)" = complete ] && break
  sleep 0.1
done
run getfattr -n user.staged "$MNT/docs/random.bin"

echo
echo "== pinning docs/: every file under it is staged, verified and kept for offline use"
run "$BIN" pin "$MNT/docs"
run "$BIN" status "$MNT"
run getfattr -n user.staged "$MNT/docs/guides/start.md"
(cd "$WORK/sample" && find docs -type f | sort | xargs sha256sum) > "$WORK/docs.sha256"

echo
echo "== stopping the emulator: staged files stay readable"
EMU_PORT=${EMU_ADDR##*:}
stop_emulator
sleep 2.5  # let the mount's metadata TTL run out, so that it really has to do without the server
rm -f "$WORK/offline-copy.bin"
run cp "$MNT/docs/random.bin" "$WORK/offline-copy.bin"
cmp "$WORK/sample/docs/random.bin" "$WORK/offline-copy.bin" && echo "(offline copy is byte-identical)"
run ls "$MNT/docs"

echo
echo "== remounting offline: the pinned folder is whole"
run fusermount3 -u "$MNT"
run "$BIN" mount gs://demo-bucket "$MNT" -o "staging_dir=$WORK/staging,offline"
run find "$MNT/docs"
run ls -lR "$MNT/docs"
echo
echo "\$ (cd $MNT && sha256sum -c $WORK/docs.sha256)"
(cd "$MNT" && sha256sum -c "$WORK/docs.sha256")

if [ "$KEEP" -eq 1 ]; then
  start_emulator "$WORK/server" --port "$EMU_PORT" || start_emulator "$WORK/server"
  export FIREBASE_STORAGE_EMULATOR_HOST=$EMU_ADDR
  fusermount3 -u "$MNT"
  "$BIN" mount gs://demo-bucket "$MNT" -o "staging_dir=$WORK/staging,metadata_ttl=2"
  echo
  echo "The emulator is back on $EMU_ADDR; $MNT stays mounted. Look around:"
  echo "  ls -l $MNT; getfattr -d $MNT/images/blue.png; cat $MNT/docs/guides/start.md"
  echo "Stop: fusermount3 -u $MNT; kill $EMU_PID; rm -rf $WORK"
else
  run fusermount3 -u "$MNT"
fi
