# peers.sh - sourced by the bench scripts: starts Braid and the Samba peer side by side on
# tmpfs, both with user alice/$PW and share `data`, and stops both (and removes $WORK) on exit.
#
# needs: REPO WORK BRAID_BIN BRAID_PORT SAMBA_PORT PW; optional MAX_IO (Braid's max_io_size).
# sets:  BRAID_PID
start_peers() {
  mkdir -p "$WORK/braid-share"
  local io_line=""
  [[ -n "${MAX_IO:-}" ]] && io_line="max_io_size = \"$MAX_IO\""
  cat > "$WORK/braid.toml" <<CONF
[server]
listen = ["127.0.0.1:$BRAID_PORT"]
log = "warn"
$io_line
[[share]]
name = "data"
path = "$WORK/braid-share"
CONF
  echo "$PW" | "$BRAID_BIN" user add alice --config "$WORK/braid.toml" --password-stdin >/dev/null
  # A stale server on the port would answer instead of this one (and serve other data).
  if (exec 3<>/dev/tcp/127.0.0.1/"$BRAID_PORT") 2>/dev/null; then echo "port $BRAID_PORT is already in use" >&2; exit 1; fi
  "$BRAID_BIN" serve --config "$WORK/braid.toml" >"$WORK/braid.log" 2>&1 &
  BRAID_PID=$!
  trap stop_peers EXIT
  PORT=$SAMBA_PORT DIR="$WORK/samba" USERS="alice:$PW" "$REPO/scripts/samba-peer.sh" up >/dev/null
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$BRAID_PORT") 2>/dev/null && break; sleep 0.1; done
  kill -0 "$BRAID_PID" 2>/dev/null || { echo "braid did not start:" >&2; cat "$WORK/braid.log" >&2; exit 1; }
}

stop_peers() {
  kill "$BRAID_PID" 2>/dev/null || true
  PORT=$SAMBA_PORT DIR="$WORK/samba" "$REPO/scripts/samba-peer.sh" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
