# shellcheck shell=bash disable=SC2153  # sourced; BRAID_BIN etc. come from the caller
# peers.sh - sourced by the bench scripts: starts Braid and the Samba peer side by side, both
# with user alice/$PW and share `data`, and stops both (and removes $WORK and the shares) on exit.
# Server state lives in $WORK (tmpfs); the shares too, unless SHARE_ROOT says otherwise.
#
# needs: REPO WORK BRAID_BIN BRAID_PORT SAMBA_PORT PW
# optional: SHARE_ROOT   directory the two servers' shares go under instead of $WORK, e.g. a
#                        disk file system (bench/diskfs.sh sets it); each run uses its own
#                        subdirectory, $SHARE_ROOT/$(basename $WORK), removed on exit
#           MAX_IO       Braid's max_io_size
#           DROP_CACHES  1: drop_caches_if_asked drops the page cache (scripts call it before
#                        each timed run)
#           LISTEN_ADDR  IPv4 address both servers listen on (default 127.0.0.1)
#           NETNS        network namespace both servers run in (`ip netns exec`; default none)
#           BRAID_EXTRA  more lines for Braid's [server] section (e.g. 'splice_writes = false')
#           ADMIN_PORT   port of Braid's `braid status` endpoint on 127.0.0.1 (default: Braid's
#                        own default, BRAID_PORT + 10000)
# sets:  BRAID_PID, BRAID_SHARE (Braid's share directory), SAMBA_DATA (Samba's `data` share)
# provides: in_ns CMD...  runs CMD in $NETNS (or here when NETNS is empty)

# Where the shares live; set here (not in start_peers) so a script can lay files down first.
SHARE_DIR="$WORK"
[[ -n "${SHARE_ROOT:-}" ]] && SHARE_DIR="$SHARE_ROOT/$(basename "$WORK")"
BRAID_SHARE="$SHARE_DIR/braid-share"
SAMBA_SHARES="$SHARE_DIR/samba-shares"
[[ -z "${SHARE_ROOT:-}" ]] && SAMBA_SHARES="$WORK/samba/shares"   # samba-peer.sh's own default
SAMBA_DATA="$SAMBA_SHARES/data"

in_ns() {
  if [[ -n "${NETNS:-}" ]]; then ip netns exec "$NETNS" "$@"; else "$@"; fi
}

# true when something accepts TCP connections on ADDR:PORT (seen from $NETNS)
peer_port_open() {
  in_ns timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

start_peers() {
  local addr="${LISTEN_ADDR:-127.0.0.1}"
  # A share directory of the same name left by a killed run would hold its files.
  [[ "$SHARE_DIR" == "$WORK" ]] || rm -rf "$SHARE_DIR"
  mkdir -p "$WORK" "$BRAID_SHARE"
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
path = "$BRAID_SHARE"
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
  in_ns env PORT="$SAMBA_PORT" BIND_ADDR="$addr" DIR="$WORK/samba" SHARE_ROOT="$SAMBA_SHARES" USERS="alice:$PW" "$REPO/scripts/samba-peer.sh" up >/dev/null
  for _ in $(seq 100); do peer_port_open "$addr" "$BRAID_PORT" && break; sleep 0.1; done
  kill -0 "$BRAID_PID" 2>/dev/null || { echo "braid did not start:" >&2; cat "$WORK/braid.log" >&2; exit 1; }
}

# DROP_CACHES=1: write dirty pages back and drop the page cache, dentries and inodes before a
# timed run, so its reads come from the disk (bench/diskfs.sh; tmpfs pages cannot be dropped).
drop_caches_if_asked() {
  [[ "${DROP_CACHES:-0}" == 1 ]] || return 0
  sync
  echo 3 >/proc/sys/vm/drop_caches
}

stop_peers() {
  kill "$BRAID_PID" 2>/dev/null || true
  PORT=$SAMBA_PORT DIR="$WORK/samba" "$REPO/scripts/samba-peer.sh" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
  [[ "$SHARE_DIR" == "$WORK" ]] || rm -rf "$SHARE_DIR"
}
