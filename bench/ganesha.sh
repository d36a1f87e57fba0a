#!/usr/bin/env bash
# ganesha.sh - a private nfs-ganesha, the NFSv3 (and NLM v4) peer for Braid's NFS tests and comparisons.
#   bench/ganesha.sh up       start it (idempotent); prints
#                             "ganesha up: nfs=BIND_ADDR:NFS_PORT mount=BIND_ADDR:MNT_PORT export=EXPORT dir=DIR/data pid=N"
#                             (with NLM also "nlm=SERVER_ADDR:NLM_PORT statd=SERVER_ADDR:STATD_PORT clients=A,B,..")
#   bench/ganesha.sh restart  stop the daemons and start them again: a server reboot (with NLM
#                             the daemons are killed (SIGKILL: a crash) and the new boot has a new
#                             NSM state, and statd's sm-notify tells the clients it monitored)
#   bench/ganesha.sh down     stop it (only the pids recorded in DIR, never by name); with NLM
#                             also remove the network namespace and its veth pair
# Environment: DIR (default /dev/shm/braid-ganesha: config, log, pid and the exported data/),
#   NFS_PORT (20490), MNT_PORT (20491), EXPORT (/export: the path clients mount),
#   BIND_ADDR (127.0.0.1: the address it listens on; to serve inside a network namespace run
#   this script under `ip netns exec NS` with BIND_ADDR an address of that namespace).
# What it is: FSAL_VFS over DIR/data, NFSv3 only, TCP only, bound to BIND_ADDR, no NLM, RQUOTA,
# NFSACL or UDP, no root squash. ganesha registers its programs with rpcbind and treats a
# failed registration as fatal, with no setting to turn it off; the fixed ports make rpcbind
# useless here, so a tiny LD_PRELOAD shim (built into DIR with gcc) answers the registration
# calls with success instead of running an rpcbind on the machine.
#
# With NLM_PORT=N set, ganesha serves NLM v4 too (Enable_NLM, NLM_Port = N, UDP on). Its NLM
# needs what a real server has: it asks rpc.statd (found through rpcbind on localhost) to
# SM_MON each client before it grants a lock, statd calls ganesha back (through rpcbind, UDP)
# when a client's SM_NOTIFY arrives, and statd's sm-notify tells the monitored clients when the
# server reboots. So in this mode the script makes a network namespace NETNS (default
# braid-gnlm-<third octet of NET>) joined to this one by a veth pair: the namespace has
# SERVER_ADDR = NET.1 (NET default 10.233.0) and its own loopback, where Debian's rpcbind, rpc.statd
# (STATD_PORT, default NLM_PORT+1, state in DIR/statd) and ganesha (all addresses, no shim) run
# in a private mount namespace with their own /run (so rpcbind's /run/rpcbind.sock and statd's
# files never meet the machine's). This side of the veth gets the client addresses NET.2 ..
# NET.(1+CLIENTS) (CLIENTS default 4), from which tests call the server and on which they run
# the clients' own portmapper (port 111) and NLM/NSM callback services. GRACE=S (default 0:
# Graceless) starts ganesha in a grace period of S seconds (Grace_Period = S, Lease_Lifetime = 2,
# so the reaper looks each second), which is NLM's grace period too; NLM_DEBUG=1 logs NLM at
# FULL_DEBUG. Needs root, iproute2, util-linux (unshare), rpcbind and nfs-common (rpc.statd,
# sm-notify).
set -euo pipefail
DIR="${DIR:-/dev/shm/braid-ganesha}"
NFS_PORT="${NFS_PORT:-20490}"
MNT_PORT="${MNT_PORT:-20491}"
EXPORT="${EXPORT:-/export}"
BIND_ADDR="${BIND_ADDR:-127.0.0.1}"
CONF="$DIR/ganesha.conf"; PIDF="$DIR/ganesha.pid"; LOG="$DIR/ganesha.log"
NLM_PORT="${NLM_PORT:-}"
GRACE="${GRACE:-0}"
if [[ -n "$NLM_PORT" ]]; then
  STATD_PORT="${STATD_PORT:-$((NLM_PORT + 1))}"
  NET="${NET:-10.233.0}"
  CLIENTS="${CLIENTS:-4}"
  NETNS="${NETNS:-braid-gnlm-${NET##*.}}"
  SERVER_ADDR="$NET.1"
  SERVER_NAME="braid-ganesha-nlm"  # its name in the namespace's own /etc/hosts (mon_name of its SM_NOTIFY)
  VETH_S="bgnl${NET##*.}s"; VETH_C="bgnl${NET##*.}c"
  BIND_ADDR="$SERVER_ADDR"  # where this side reaches it; inside the namespace it listens on all addresses
fi

running() {
  [[ -s "$PIDF" ]] && kill -0 "$(cat "$PIDF")" 2>/dev/null &&
    grep -qF "$CONF" "/proc/$(cat "$PIDF")/cmdline" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/$BIND_ADDR/$1") 2>/dev/null; }

# pid recorded in file $1 is alive and runs program $2 (guards against a reused pid)
alive() {
  [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null &&
    tr '\0' ' ' <"/proc/$(cat "$1")/cmdline" 2>/dev/null | grep -qF "$2"
}

stop_pid() {  # stop_pid PIDFILE PROGRAM [SIGNAL]
  if alive "$1" "$2"; then
    local pid; pid="$(cat "$1")"
    kill -"${3:-TERM}" "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do running_pid "$pid" || break; sleep 0.05; done
    running_pid "$pid" && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$1"
}

# alive and not a zombie (a daemon whose parent is gone waits for init to reap it)
running_pid() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

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
  local bind="$BIND_ADDR" udp=false nlm="Enable_NLM = false;" grace="Graceless = true;"
  if [[ -n "$NLM_PORT" ]]; then
    # statd calls NLM back on 127.0.0.1 (UDP, port from rpcbind): all addresses, UDP on
    bind=0.0.0.0; udp=true; nlm="Enable_NLM = true; NLM_Port = $NLM_PORT;"
    if (( GRACE > 0 )); then grace="Graceless = false; Grace_Period = $GRACE; Lease_Lifetime = 2;"; fi
  fi
  cat >"$CONF" <<CFG
NFS_CORE_PARAM {
    Bind_addr = $bind;
    NFS_Port = $NFS_PORT;
    MNT_Port = $MNT_PORT;
    Protocols = 3;
    Enable_UDP = $udp;
    $nlm
    Enable_RQUOTA = false;
    Enable_NFSACL = false;
    # MOUNT answers the pseudo path (clients mount $EXPORT, not the directory's path)
    Mount_Path_Pseudo = true;
}
NFSv4 { $grace RecoveryRoot = "$DIR/recov"; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
    Export_Id = 1;
    Path = "$DIR/data";
    Pseudo = "$EXPORT";
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    Protocols = 3;
    Transports = $( [[ -n "$NLM_PORT" ]] && echo "TCP, UDP" || echo TCP );
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; $( [[ -n "${NLM_DEBUG:-}" ]] && echo "COMPONENTS { NLM = FULL_DEBUG; STATE = DEBUG; }" ) }
CFG
}

up() {
  command -v ganesha.nfsd >/dev/null || { echo "ganesha.sh: apt-get install nfs-ganesha nfs-ganesha-vfs" >&2; exit 1; }
  if [[ -n "$NLM_PORT" ]]; then nlm_up; return; fi
  command -v gcc >/dev/null || { echo "ganesha.sh: gcc is needed for the rpcbind shim" >&2; exit 1; }
  mkdir -p "$DIR"/{data,recov}
  chmod 0777 "$DIR/data"
  if running; then
    echo "ganesha up: nfs=$BIND_ADDR:$NFS_PORT mount=$BIND_ADDR:$MNT_PORT export=$EXPORT dir=$DIR/data pid=$(cat "$PIDF") (already running)"
    return 0
  fi
  for p in "$NFS_PORT" "$MNT_PORT"; do
    if port_open "$p"; then echo "ganesha.sh: port $p is already in use" >&2; exit 1; fi
  done
  build_shim
  write_conf
  rm -f "$PIDF"
  # -F: foreground, so $! is the daemon itself and "down" can stop exactly it.
  LD_PRELOAD="$DIR/norpcb.so" setsid ganesha.nfsd -F -f "$CONF" -L "$LOG" -p "$DIR/ganesha.own.pid" \
    -N NIV_EVENT </dev/null >>"$DIR/ganesha.stdout" 2>&1 &
  local pid=$!
  echo "$pid" >"$PIDF"
  wait_up "$pid" "nfs=$BIND_ADDR:$NFS_PORT mount=$BIND_ADDR:$MNT_PORT export=$EXPORT dir=$DIR/data pid=$pid"
}

wait_up() {  # wait_up PID MESSAGE: until NFS and MOUNT (and NLM, statd) answer on BIND_ADDR
  local ports=("$NFS_PORT" "$MNT_PORT")
  [[ -n "$NLM_PORT" ]] && ports+=("$NLM_PORT" "$STATD_PORT")
  for _ in $(seq 1 150); do
    local all=1
    for p in "${ports[@]}"; do port_open "$p" || { all=0; break; }; done
    if (( all )); then echo "ganesha up: $2"; return 0; fi
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  echo "ganesha.sh: ganesha did not start; log $LOG:" >&2
  tail -n 30 "$LOG" "$DIR/ganesha.stdout" "$DIR/statd.log" "$DIR/rpcbind.log" >&2 2>/dev/null || true
  down >/dev/null
  exit 1
}

# ---- NLM mode -------------------------------------------------------------------------------

client_addrs() { local i out=(); for i in $(seq 2 $((CLIENTS + 1))); do out+=("$NET.$i"); done; (IFS=,; echo "${out[*]}"); }

nlm_net_up() {
  [[ -e "/run/netns/$NETNS" ]] && return 0
  ip netns add "$NETNS"
  ip link add "$VETH_S" type veth peer name "$VETH_C" || { ip netns del "$NETNS"; return 1; }
  ip link set "$VETH_S" netns "$NETNS"
  ip -n "$NETNS" link set lo up
  ip -n "$NETNS" addr add "$SERVER_ADDR/24" dev "$VETH_S"
  ip -n "$NETNS" link set "$VETH_S" up
  local i
  for i in $(seq 2 $((CLIENTS + 1))); do ip addr add "$NET.$i/24" dev "$VETH_C"; done
  ip link set "$VETH_C" up
  # addresses are usable at once (no duplicate address detection on IPv4)
}

nlm_up() {
  for t in rpcbind rpc.statd sm-notify unshare ip; do
    command -v "$t" >/dev/null || [[ -x "/usr/sbin/$t" ]] ||
      { echo "ganesha.sh: $t is needed for NLM (apt-get install rpcbind nfs-common util-linux iproute2)" >&2; exit 1; }
  done
  (( EUID == 0 )) || { echo "ganesha.sh: NLM mode needs root (network namespace)" >&2; exit 1; }
  mkdir -p "$DIR"/{data,recov} "$DIR/statd"/{sm,sm.bak}
  chmod 0777 "$DIR/data"
  if running; then
    echo "ganesha up: nfs=$BIND_ADDR:$NFS_PORT mount=$BIND_ADDR:$MNT_PORT export=$EXPORT dir=$DIR/data pid=$(cat "$PIDF") nlm=$SERVER_ADDR:$NLM_PORT statd=$SERVER_ADDR:$STATD_PORT clients=$(client_addrs) (already running)"
    return 0
  fi
  nlm_net_up
  echo "$NETNS" >"$DIR/netns"
  write_conf
  rm -f "$PIDF"
  # One "boot": a private mount namespace (own /run) inside the network namespace; the daemons
  # started there keep it alive after the boot script returns.
  PATH="$PATH:/usr/sbin:/sbin" ip netns exec "$NETNS" unshare --mount --propagation private \
    bash "${BASH_SOURCE[0]}" _boot
  wait_up "$(cat "$PIDF")" "nfs=$BIND_ADDR:$NFS_PORT mount=$BIND_ADDR:$MNT_PORT export=$EXPORT dir=$DIR/data pid=$(cat "$PIDF") nlm=$SERVER_ADDR:$NLM_PORT statd=$SERVER_ADDR:$STATD_PORT clients=$(client_addrs)"
}

# Runs inside the namespaces: rpcbind, sm-notify (the reboot notifications), rpc.statd, ganesha.
nlm_boot() {
  mount -t tmpfs -o mode=0755 braid-ganesha-run /run
  mkdir -p /run/rpcbind
  # sm-notify wants a name for the server (-v), and this network has no DNS
  { cat /etc/hosts; echo "$SERVER_ADDR $SERVER_NAME"; } >"$DIR/hosts"
  mount --bind "$DIR/hosts" /etc/hosts
  # sm-notify and statd tell the kernel's lockd the NSM state: keep that away from the machine's
  if [[ -e /proc/sys/fs/nfs/nsm_local_state ]]; then
    echo 0 >"$DIR/nsm_local_state"; mount --bind "$DIR/nsm_local_state" /proc/sys/fs/nfs/nsm_local_state
  fi
  setsid rpcbind -f </dev/null >>"$DIR/rpcbind.log" 2>&1 &
  echo $! >"$DIR/rpcbind.pid"
  for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/111) 2>/dev/null && break; sleep 0.05; done
  # the reboot notifications to the hosts statd monitored before (DIR/statd/sm): at most a minute
  # (it bumps the NSM state first, when it has hosts to notify: statd must read the new one)
  local before; before="$(od -An -tx1 "$DIR/statd/state" 2>/dev/null || true)"
  setsid sm-notify -d -f -m 1 -v "$SERVER_NAME" -P "$DIR/statd" </dev/null >>"$DIR/sm-notify.log" 2>&1 &
  local smn=$!
  echo "$smn" >"$DIR/sm-notify.pid"
  for _ in $(seq 1 100); do
    [[ "$(od -An -tx1 "$DIR/statd/state" 2>/dev/null || true)" != "$before" ]] && break
    running_pid "$smn" || break
    sleep 0.02
  done
  setsid rpc.statd -F -d -L -p "$STATD_PORT" -P "$DIR/statd" </dev/null >>"$DIR/statd.log" 2>&1 &
  echo $! >"$DIR/statd.pid"
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$STATD_PORT") 2>/dev/null && break; sleep 0.05; done
  setsid ganesha.nfsd -F -f "$CONF" -L "$LOG" -p "$DIR/ganesha.own.pid" -N NIV_EVENT \
    </dev/null >>"$DIR/ganesha.stdout" 2>&1 &
  echo $! >"$PIDF"
}

nlm_stop_daemons() {  # [SIGNAL]
  stop_pid "$PIDF" ganesha.nfsd "${1:-TERM}"
  stop_pid "$DIR/statd.pid" rpc.statd "${1:-TERM}"
  stop_pid "$DIR/sm-notify.pid" sm-notify "${1:-TERM}"
  stop_pid "$DIR/rpcbind.pid" rpcbind "${1:-TERM}"
}

down() {
  if [[ -n "$NLM_PORT" || -s "$DIR/netns" ]]; then
    local was="ganesha not running"
    running && was="ganesha stopped (pid $(cat "$PIDF"))"
    nlm_stop_daemons
    if [[ -s "$DIR/netns" ]]; then NETNS="$(cat "$DIR/netns")"; fi
    if [[ -n "${VETH_C:-}" ]]; then ip link del "$VETH_C" 2>/dev/null || true; fi
    # the namespace goes, and with it the other end of the veth pair
    if [[ -n "${NETNS:-}" ]]; then ip netns del "$NETNS" 2>/dev/null || true; fi
    rm -f "$DIR/netns"
    echo "$was"
    return 0
  fi
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

restart() {
  if [[ -n "$NLM_PORT" ]]; then
    # a crash and reboot: SIGKILL, so that nothing is cleaned up (no SM_UNMON to statd)
    nlm_stop_daemons KILL
    nlm_up
  else
    down >/dev/null
    up
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  restart) restart ;;
  _boot) nlm_boot ;;
  *) echo "usage: $0 up|restart|down   (env: DIR NFS_PORT MNT_PORT EXPORT BIND_ADDR; NLM: NLM_PORT STATD_PORT NET CLIENTS NETNS GRACE)" >&2; exit 2 ;;
esac
