#!/usr/bin/env bash
# ganesha.sh - a private nfs-ganesha, the NFSv3 peer for Braid's NFS tests and comparisons.
#   bench/ganesha.sh up     start it (idempotent); prints
#                           "ganesha up: nfs=BIND_ADDR:NFS_PORT mount=BIND_ADDR:MNT_PORT export=EXPORT dir=DIR/data pid=N"
#   bench/ganesha.sh down   stop it (only the pid recorded in DIR, never by name)
# Environment: DIR (default /dev/shm/braid-ganesha: config, log, pid and the exported data/),
#   NFS_PORT (20490), MNT_PORT (20491), EXPORT (/export: the path clients mount),
#   BIND_ADDR (127.0.0.1: the address it listens on; to serve inside a network namespace run
#   this script under `ip netns exec NS` with BIND_ADDR an address of that namespace),
#   NLM_PORT (unset: no NLM; a port: NLM v4 served there over TCP, which needs an rpc.statd
#   that ganesha finds through an rpcbind on this host, see bench/nlm-compare.sh),
#   RPCBIND (0; 1: an rpcbind runs where ganesha runs, so register with it, without the shim).
# What it is: FSAL_VFS over DIR/data, NFSv3 only, TCP only, bound to BIND_ADDR, no NLM (but
# with NLM_PORT), RQUOTA, NFSACL or UDP, no root squash. ganesha registers its programs with
# rpcbind and treats a failed registration as fatal, with no setting to turn it off; the fixed
# ports make rpcbind useless here, so a tiny LD_PRELOAD shim (built into DIR with gcc) answers
# the registration calls with success instead of running an rpcbind on the machine (unless
# RPCBIND=1).
set -euo pipefail
DIR="${DIR:-/dev/shm/braid-ganesha}"
NFS_PORT="${NFS_PORT:-20490}"
MNT_PORT="${MNT_PORT:-20491}"
EXPORT="${EXPORT:-/export}"
BIND_ADDR="${BIND_ADDR:-127.0.0.1}"
NLM_PORT="${NLM_PORT:-}"
RPCBIND="${RPCBIND:-0}"
CONF="$DIR/ganesha.conf"; PIDF="$DIR/ganesha.pid"; LOG="$DIR/ganesha.log"

running() {
  [[ -s "$PIDF" ]] && kill -0 "$(cat "$PIDF")" 2>/dev/null &&
    grep -qF "$CONF" "/proc/$(cat "$PIDF")/cmdline" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/$BIND_ADDR/$1") 2>/dev/null; }

build_shim() {
  # svc_reg/svc_unreg/rpcb_set/rpcb_unset (libntirpc) replaced by no-ops that succeed.
  cat >"$DIR/norpcb.c" <<'C'
#include <stdbool.h>
bool svc_reg(void *xprt, unsigned long prog, unsigned long vers, void (*dispatch)(void *),
             const void *nconf) { (void)xprt; (void)prog; (void)vers; (void)dispatch; (void)nconf; return true; }
void svc_unreg(unsigned long prog, unsigned long vers) { (void)prog; (void)vers; }
bool rpcb_set(unsigned long prog, unsigned long vers, const void *nconf, const void *addr)
{ (void)prog; (void)vers; (void)nconf; (void)addr; return true; }
bool rpcb_unset(unsigned long prog, unsigned long vers, const void *nconf)
{ (void)prog; (void)vers; (void)nconf; return true; }
C
  gcc -shared -fPIC -O2 -o "$DIR/norpcb.so" "$DIR/norpcb.c"
}

write_conf() {
  local nlm="Enable_NLM = false;"
  [[ -n "$NLM_PORT" ]] && nlm="Enable_NLM = true; NLM_Port = $NLM_PORT;"
  cat >"$CONF" <<CFG
NFS_CORE_PARAM {
    Bind_addr = $BIND_ADDR;
    NFS_Port = $NFS_PORT;
    MNT_Port = $MNT_PORT;
    Protocols = 3;
    Enable_UDP = false;
    $nlm
    Enable_RQUOTA = false;
    Enable_NFSACL = false;
    # MOUNT answers the pseudo path (clients mount $EXPORT, not the directory's path)
    Mount_Path_Pseudo = true;
}
NFSv4 { Graceless = true; RecoveryRoot = "$DIR/recov"; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
    Export_Id = 1;
    Path = "$DIR/data";
    Pseudo = "$EXPORT";
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    Protocols = 3;
    Transports = TCP;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
CFG
}

up() {
  command -v ganesha.nfsd >/dev/null || { echo "ganesha.sh: apt-get install nfs-ganesha nfs-ganesha-vfs" >&2; exit 1; }
  [[ "$RPCBIND" == 1 ]] || command -v gcc >/dev/null || { echo "ganesha.sh: gcc is needed for the rpcbind shim" >&2; exit 1; }
  mkdir -p "$DIR"/{data,recov}
  chmod 0777 "$DIR/data"
  if running; then
    echo "ganesha up: nfs=$BIND_ADDR:$NFS_PORT mount=$BIND_ADDR:$MNT_PORT export=$EXPORT dir=$DIR/data pid=$(cat "$PIDF") (already running)"
    return 0
  fi
  for p in "$NFS_PORT" "$MNT_PORT" $NLM_PORT; do
    if port_open "$p"; then echo "ganesha.sh: port $p is already in use" >&2; exit 1; fi
  done
  local preload=
  if [[ "$RPCBIND" != 1 ]]; then build_shim; preload="$DIR/norpcb.so"; fi
  write_conf
  rm -f "$PIDF"
  # -F: foreground, so $! is the daemon itself and "down" can stop exactly it.
  LD_PRELOAD="$preload" setsid ganesha.nfsd -F -f "$CONF" -L "$LOG" -p "$DIR/ganesha.own.pid" \
    -N NIV_EVENT </dev/null >>"$DIR/ganesha.stdout" 2>&1 &
  local pid=$!
  echo "$pid" >"$PIDF"
  for _ in $(seq 1 150); do
    if port_open "$NFS_PORT" && port_open "$MNT_PORT" && { [[ -z "$NLM_PORT" ]] || port_open "$NLM_PORT"; }; then
      echo "ganesha up: nfs=$BIND_ADDR:$NFS_PORT mount=$BIND_ADDR:$MNT_PORT${NLM_PORT:+ nlm=$BIND_ADDR:$NLM_PORT} export=$EXPORT dir=$DIR/data pid=$pid"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "ganesha.sh: ganesha did not start; log $LOG:" >&2
  tail -n 30 "$LOG" "$DIR/ganesha.stdout" >&2 2>/dev/null || true
  down >/dev/null
  exit 1
}

down() {
  if running; then
    local pid; pid="$(cat "$PIDF")"
    kill "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    echo "ganesha stopped (pid $pid)"
  else
    echo "ganesha not running"
  fi
  rm -f "$PIDF"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down   (env: DIR NFS_PORT MNT_PORT EXPORT BIND_ADDR NLM_PORT RPCBIND)" >&2; exit 2 ;;
esac
