#!/usr/bin/env bash
# samba-peer.sh - a private Samba smbd on 127.0.0.1, used as the reference peer
# (interop tests with BRAID_TEST_TARGET=samba, smbtorture baselines, benchmarks).
#
# usage: scripts/samba-peer.sh up|down|status
#
# All state lives under $DIR: smb.conf, private tdbsam passdb, lock/state/cache/pid dirs,
# logs and (by default) the shares.  Nothing from /etc/samba or /var/lib/samba is used.
# Listens on $BIND_ADDR:$PORT only (default 127.0.0.1), NetBIOS disabled.  Needs root (creates Unix accounts
# for the SMB users, like any standalone Samba).
#
# env (all optional):
#   PORT=4475                          TCP port on 127.0.0.1
#   BIND_ADDR=127.0.0.1                IPv4 address smbd listens on (and its `interfaces`); e.g. a
#                                      veth address when run with `ip netns exec` (bench/netns.sh)
#   DIR=/dev/shm/braid-samba-peer      state root (tmpfs recommended)
#   SHARE_ROOT=$DIR/shares             each share NAME is $SHARE_ROOT/NAME
#   USERS="alice:alice-pw bob:bob-pw"  space separated NAME:PASSWORD (passwords are (re)set on every `up`)
#   VFS_OBJECTS=""                     vfs objects of data, ro, alice_only
#   TMP_VFS_OBJECTS="acl_xattr streams_xattr"   vfs objects of tmp (NT ACLs + streams, like Samba's selftest)
#   LOGLEVEL=1
#   EXTRA_GLOBAL=""                    raw lines appended to [global]
# Shares: data (rw), ro (read only), alice_only (valid users = alice), tmp (rw, for smbtorture).
# `up` prints "samba-peer up 127.0.0.1:PORT pid=N dir=DIR"; running it again while up only
# updates passwords/config.  `down` stops smbd and every helper started with this smb.conf
# (samba-dcerpcd, rpcd_*); WIPE=1 also deletes $DIR.
set -euo pipefail

cmd="${1:-}"
PORT="${PORT:-4475}"
BIND_ADDR="${BIND_ADDR:-127.0.0.1}"
DIR="${DIR:-/dev/shm/braid-samba-peer}"
SHARE_ROOT="${SHARE_ROOT:-$DIR/shares}"
USERS="${USERS:-alice:alice-pw bob:bob-pw}"
VFS_OBJECTS="${VFS_OBJECTS:-}"
TMP_VFS_OBJECTS="${TMP_VFS_OBJECTS-acl_xattr streams_xattr}"
LOGLEVEL="${LOGLEVEL:-1}"
EXTRA_GLOBAL="${EXTRA_GLOBAL:-}"
CONF="$DIR/smb.conf"
PIDFILE="$DIR/smbd.pid"

die() { echo "samba-peer: $*" >&2; exit 1; }

# PIDs of processes we started: their command line names our private smb.conf.
peer_pids() {
  local d args
  for d in /proc/[0-9]*; do
    [[ "${d#/proc/}" == "$$" ]] && continue
    args="$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)" || continue
    [[ "$args" == *"$CONF"* ]] && echo "${d#/proc/}"
  done
  return 0
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/$BIND_ADDR/$PORT" 2>/dev/null; }

running() {
  [[ -s "$PIDFILE" ]] || return 1
  local pid; pid="$(cat "$PIDFILE")"
  kill -0 "$pid" 2>/dev/null && grep -qF -- "$CONF" "/proc/$pid/cmdline" 2>/dev/null
}

write_conf() {
  local first_user="${USERS%%:*}"
  mkdir -p "$DIR"/{private,lock,state,cache,run,ncalrpc,binddns,log} \
           "$SHARE_ROOT"/{data,ro,alice_only,tmp}
  chmod 0700 "$DIR/private"
  chmod 0777 "$SHARE_ROOT"/{data,ro,alice_only,tmp}
  cat >"$CONF.new" <<CONF
# written by scripts/samba-peer.sh; rewritten on every "up"
[global]
  server role = standalone server
  workgroup = WORKGROUP
  netbios name = BRAIDPEER
  disable netbios = yes
  smb ports = $PORT
  interfaces = $BIND_ADDR
  bind interfaces only = yes
  private dir = $DIR/private
  passdb backend = tdbsam:$DIR/private/passdb.tdb
  smb passwd file = $DIR/private/smbpasswd
  lock directory = $DIR/lock
  state directory = $DIR/state
  cache directory = $DIR/cache
  pid directory = $DIR/run
  ncalrpc dir = $DIR/ncalrpc
  binddns dir = $DIR/binddns
  usershare path = $DIR/state/usershares
  log file = $DIR/log/log.%m
  max log size = 0
  log level = $LOGLEVEL
  security = user
  map to guest = never
  server min protocol = SMB2_02
  server max protocol = SMB3_11
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  kernel oplocks = no
  kernel share modes = no
  kernel change notify = no
  posix locking = no
$EXTRA_GLOBAL

[data]
  path = $SHARE_ROOT/data
  read only = no
  vfs objects = $VFS_OBJECTS
  create mask = 0666
  directory mask = 0777
[ro]
  path = $SHARE_ROOT/ro
  read only = yes
  vfs objects = $VFS_OBJECTS
[alice_only]
  path = $SHARE_ROOT/alice_only
  read only = no
  valid users = $first_user
  vfs objects = $VFS_OBJECTS
[tmp]
  path = $SHARE_ROOT/tmp
  read only = no
  vfs objects = $TMP_VFS_OBJECTS
  ea support = yes
  store dos attributes = yes
  create mask = 0666
  directory mask = 0777
CONF
  mv -f "$CONF.new" "$CONF"
}

set_users() {
  local entry name pw
  for entry in $USERS; do
    name="${entry%%:*}"; pw="${entry#*:}"
    [[ -n "$name" && "$name" != "$entry" ]] || die "bad USERS entry '$entry' (want NAME:PASSWORD)"
    getent passwd "$name" >/dev/null || useradd -M -N -s /usr/sbin/nologin "$name" \
      || die "useradd $name failed (root needed)"
    # -a adds the user or, when it exists, just sets the password
    printf '%s\n%s\n' "$pw" "$pw" | smbpasswd -c "$CONF" -D 0 -s -a "$name" >"$DIR/log/smbpasswd.out" 2>&1 \
      || { cat "$DIR/log/smbpasswd.out" >&2; die "smbpasswd -a $name failed"; }
  done
}

up() {
  command -v smbd >/dev/null || die "smbd not installed (scripts/install-deps.sh)"
  [[ "$PORT" =~ ^[0-9]+$ ]] || die "bad PORT"
  write_conf
  set_users
  if running; then
    smbcontrol -s "$CONF" "$(cat "$PIDFILE")" reload-config >/dev/null 2>&1 || true
    echo "samba-peer up (already running) $BIND_ADDR:$PORT pid=$(cat "$PIDFILE") dir=$DIR"
    return 0
  fi
  port_open && die "$BIND_ADDR:$PORT is already in use"
  # --foreground: $! is smbd itself (it makes its own process group).
  smbd --foreground -s "$CONF" </dev/null >>"$DIR/log/smbd.out" 2>&1 &
  local pid=$!
  echo "$pid" >"$PIDFILE"
  local i
  for i in $(seq 1 100); do   # <= 10 s
    if port_open; then
      echo "samba-peer up $BIND_ADDR:$PORT pid=$pid dir=$DIR"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$DIR/log/smbd.out" "$DIR/log/log.smbd" >&2 2>/dev/null || true
  down >/dev/null
  die "smbd did not start listening on $BIND_ADDR:$PORT"
}

down() {
  local pids="" p i
  [[ -s "$PIDFILE" ]] && pids="$(cat "$PIDFILE")"
  pids="$(echo $pids $(peer_pids) | tr ' ' '\n' | sort -u)"
  for p in $pids; do
    # only signal a pidfile pid if it is still our smbd (pid reuse)
    grep -qF -- "$CONF" "/proc/$p/cmdline" 2>/dev/null && kill -TERM "$p" 2>/dev/null || true
  done
  for i in $(seq 1 50); do   # <= 5 s
    [[ -z "$(peer_pids)" ]] && break
    sleep 0.1
  done
  for p in $(peer_pids); do kill -KILL "$p" 2>/dev/null || true; done
  rm -f "$PIDFILE"
  echo "samba-peer down ($DIR)"
  if [[ "${WIPE:-0}" == 1 ]]; then rm -rf -- "$DIR"; fi
  return 0
}

case "$cmd" in
  up) up ;;
  down) down ;;
  status) if running; then echo "running pid=$(cat "$PIDFILE") port=$PORT"; else echo "not running"; exit 1; fi ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
