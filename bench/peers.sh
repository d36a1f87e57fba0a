# shellcheck shell=bash disable=SC2153  # sourced; BRAID_BIN etc. come from the caller
# peers.sh - sourced by the bench scripts: starts Braid and the Samba peer side by side on
# tmpfs, both with user alice/$PW and share `data`, and stops both (and removes $WORK) on exit.
#
# needs: REPO WORK BRAID_BIN BRAID_PORT SAMBA_PORT PW
# optional: MAX_IO       Braid's max_io_size
#           LISTEN_ADDR  IPv4 address both servers listen on (default 127.0.0.1)
#           NETNS        network namespace both servers run in (`ip netns exec`; default none)
#           BRAID_EXTRA  more lines for Braid's [server] section (e.g. 'splice_writes = false')
#           ADMIN_PORT   port of Braid's `braid status` endpoint on 127.0.0.1 (default: Braid's
#                        own default, BRAID_PORT + 10000)
# sets:  BRAID_PID
# provides: in_ns CMD...  runs CMD in $NETNS (or here when NETNS is empty)

in_ns() {
  if [[ -n "${NETNS:-}" ]]; then ip netns exec "$NETNS" "$@"; else "$@"; fi
}

# true when something accepts TCP connections on ADDR:PORT (seen from $NETNS)
peer_port_open() {
  in_ns timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

start_peers() {
  local addr="${LISTEN_ADDR:-127.0.0.1}"
  mkdir -p "$WORK/braid-share"
  local io_line="" admin_line=""
  [[ -n "${MAX_IO:-}" ]] && io_line="max_io_size = \"$MAX_IO\""
  [[ -n "${ADMIN_PORT:-}" ]] && admin_line="admin = \"127.0.0.1:$ADMIN_PORT\""
  cat > "$WORK/braid.toml" <<CONF
[server]
listen = ["$addr:$BRAID_PORT"]
log = "warn"
$io_line
$admin_line
${BRAID_EXTRA:-}
[[share]]
name = "data"
path = "$WORK/braid-share"
CONF
  echo "$PW" | "$BRAID_BIN" user add alice --config "$WORK/braid.toml" --password-stdin >/dev/null
  # A stale server on the port would answer instead of this one (and serve other data).
  if peer_port_open "$addr" "$BRAID_PORT"; then echo "port $BRAID_PORT is already in use" >&2; exit 1; fi
  # Not through the in_ns function: $! must be the server itself (`ip netns exec` execs it).
  local pre=()
  [[ -n "${NETNS:-}" ]] && pre=(ip netns exec "$NETNS")
  "${pre[@]}" "$BRAID_BIN" serve --config "$WORK/braid.toml" >"$WORK/braid.log" 2>&1 &
  BRAID_PID=$!
  trap stop_peers EXIT
  in_ns env PORT="$SAMBA_PORT" BIND_ADDR="$addr" DIR="$WORK/samba" USERS="alice:$PW" "$REPO/scripts/samba-peer.sh" up >/dev/null
  for _ in $(seq 100); do peer_port_open "$addr" "$BRAID_PORT" && break; sleep 0.1; done
  kill -0 "$BRAID_PID" 2>/dev/null || { echo "braid did not start:" >&2; cat "$WORK/braid.log" >&2; exit 1; }
}

stop_peers() {
  kill "$BRAID_PID" 2>/dev/null || true
  PORT=$SAMBA_PORT DIR="$WORK/samba" "$REPO/scripts/samba-peer.sh" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
