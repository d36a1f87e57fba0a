#!/usr/bin/env bash
# nlm-ganesha.sh - the locks suite against nfs-ganesha with NLM, to check the guest's side of
# NFS locking without Braid's NLM. Everything runs in a private network and mount namespace
# (its own 127.0.0.1 and port 111, a private /run and /var/lib/nfs), so the machine's port 111
# and any system rpcbind/statd are left alone:
#   rpcbind + rpc.statd (ganesha's NLM asks a statd, found through rpcbind, to monitor clients),
#   ganesha (NFSv3 + NLM over TCP; it registers NFS, MOUNT and NLM with that rpcbind),
#   run.sh nfs (KC_SUITE=locks, mount options vers=3,nconnect=8 and no ports),
#   lock-peer.py when KC_LOCK_HOLD=1 (host-side fcntl locks on the exported file).
# Usage: [KC_LOCK_HOLD=1] [KC_NLM_CALLBACK=127.0.0.5] [KC_TIMEOUT=...] ./nlm-ganesha.sh
# Against ganesha one step fails by ganesha's design: peer_getlk_locked (its NLM TEST answers
# from its own lock state and does not see lock-peer.py's fcntl lock on the file, while its
# LOCK does: peer_setlk_denied).
# Env: NLM_PORT=4045 NFS_PORT=20490 MNT_PORT=20491 DIR=/dev/shm/kclock-ganesha; other KC_* go
# to run.sh. Needs root (namespaces), nfs-ganesha nfs-ganesha-vfs rpcbind nfs-common.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ "${KC_NLM_NS:-}" != 1 ]]; then
  exec unshare --net --mount --propagation private env KC_NLM_NS=1 "$0" "$@"
fi
NLM_PORT=${NLM_PORT:-4045}; NFS_PORT=${NFS_PORT:-20490}; MNT_PORT=${MNT_PORT:-20491}
DIR=${DIR:-/dev/shm/kclock-ganesha}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
ip link set lo up
# a non-loopback IPv4 and IPv6 address: ganesha resolves Bind_addr with AI_ADDRCONFIG
ip link add kclock0 type veth peer name kclock1
ip link set kclock0 up; ip link set kclock1 up
ip addr add 192.0.2.1/24 dev kclock0; ip -6 addr add fd00:4b43::1/64 dev kclock0 nodad
mount -t tmpfs -o size=16m,mode=755 kclock-run /run
mount -t tmpfs -o size=16m,mode=755 kclock-nfs /var/lib/nfs
mkdir -p /run/rpcbind /var/lib/nfs/sm /var/lib/nfs/sm.bak
chown _rpc /run/rpcbind; chown -R statd /var/lib/nfs
# rpcbind binds TCP port 111 on every address (its -h is for UDP only), which would take
# 127.0.0.N:111 from QEMU's callback forward (KC_NLM_CALLBACK): bind it to 127.0.0.1 and ::1
# only, as Braid's portmapper is, with a bind() shim
mkdir -p "$DIR.shim"
cat > "$DIR.shim/lo111.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);
	if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
	struct sockaddr_storage ss;
	if (sa && len <= sizeof ss) {
		memcpy(&ss, sa, len);
		struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
		if (sa->sa_family == AF_INET && a4->sin_port == htons(111) && a4->sin_addr.s_addr == htonl(INADDR_ANY)) {
			a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			return real(fd, (struct sockaddr *)&ss, len);
		}
		if (sa->sa_family == AF_INET6 && a6->sin6_port == htons(111) && IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr)) {
			a6->sin6_addr = in6addr_loopback;
			return real(fd, (struct sockaddr *)&ss, len);
		}
	}
	return real(fd, sa, len);
}
C
gcc -shared -fPIC -O2 -o "$DIR.shim/lo111.so" "$DIR.shim/lo111.c" -ldl
LD_PRELOAD="$DIR.shim/lo111.so" rpcbind -f > "$DIR.rpcbind.log" 2>&1 & PIDS+=($!)
sleep 0.5
ss -lntu | grep ':111 ' | sed 's/^/rpcbind listens: /'
rpc.statd -F -d > "$DIR.statd.log" 2>&1 & PIDS+=($!)
for _ in $(seq 50); do rpcinfo -p 127.0.0.1 2>/dev/null | grep -q status && break; sleep 0.2; done

rm -rf "$DIR"; mkdir -p "$DIR"/{data,recov}; chmod 0777 "$DIR/data"
cat > "$DIR/ganesha.conf" <<CFG
NFS_CORE_PARAM {
    Bind_addr = 127.0.0.1;
    NFS_Port = $NFS_PORT;
    MNT_Port = $MNT_PORT;
    NLM_Port = $NLM_PORT;
    Protocols = 3;
    Enable_UDP = false;
    Enable_NLM = true;
    Enable_RQUOTA = false;
    Enable_NFSACL = false;
    Mount_Path_Pseudo = true;
}
NFSv4 { Graceless = true; RecoveryRoot = "$DIR/recov"; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
    Export_Id = 1; Path = "$DIR/data"; Pseudo = /export; Access_Type = RW;
    Squash = No_Root_Squash; SecType = sys; Protocols = 3; Transports = TCP;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; Components { NLM = ${GANESHA_NLM_LOG:-EVENT}; } }
CFG
ganesha.nfsd -F -f "$DIR/ganesha.conf" -L "$DIR/ganesha.log" -p "$DIR/ganesha.pid" -N NIV_EVENT \
  < /dev/null > "$DIR/ganesha.stdout" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do rpcinfo -p 127.0.0.1 2>/dev/null | grep -q nlockmgr && break; sleep 0.2; done
echo "--- rpcinfo -p 127.0.0.1 (namespace) ---"; rpcinfo -p 127.0.0.1

TS=$(date +%Y%m%d-%H%M%S)
export KC_RUNDIR=${KC_RUNDIR:-$HERE/runs/$TS-nlm-ganesha-$$}
mkdir -p "$KC_RUNDIR"
if [[ -n "${KC_NLM_CALLBACK:-}" ]]; then
  # the host's side of callbacks (cb-probe.py: portmapper GETPORT, NULL and SM_NOTIFY to the
  # guest through the forwards, over TCP and UDP), while the guest is mounted and monitors the
  # server: at KCLIENT-WAIT for=peer_done (lock-peer.py waits for probe.done) or at the end of
  # the suite's first phase
  export PEER_WAIT_FILE="$KC_RUNDIR/probe.done"
  W='step=lk_flock_un2 '; [[ "${KC_LOCK_HOLD:-0}" == 1 ]] && W='KCLIENT-WAIT for=peer_done'
  ( for _ in $(seq 900); do grep -q "$W" "$KC_RUNDIR/results.raw" 2>/dev/null && break; sleep 0.5; done
    python3 "$HERE/cb-probe.py" "$KC_NLM_CALLBACK" --notify 101; touch "$KC_RUNDIR/probe.done"
  ) > "$KC_RUNDIR/probe.txt" 2>&1 & PROBE=$!
fi
if [[ "${KC_LOCK_HOLD:-0}" == 1 ]]; then
  python3 "$HERE/lock-peer.py" "$KC_RUNDIR" "$DIR/data/${KC_LOCK_FILE:-kclock-hold.bin}" \
    > "$KC_RUNDIR/peer.txt" 2>&1 & PEER=$!
fi
KC_SUITE=${KC_SUITE:-locks} KC_NFS_LOCKS=1 KC_NLM_PORT=$NLM_PORT KC_NFS_OPTS="${KC_NFS_OPTS:-vers=3,nconnect=8}" \
  KC_TIMEOUT=${KC_TIMEOUT:-400} "$HERE/run.sh" nfs "$NFS_PORT,$MNT_PORT" /export
RC=$?
if [[ -n "${PEER:-}" ]]; then
  wait "$PEER"; PRC=$?
  echo "--- lock-peer.py (host-side fcntl on the exported file) ---"; cat "$KC_RUNDIR/peer.txt"
  (( PRC == 0 )) || RC=1
fi
if [[ -n "${PROBE:-}" ]]; then
  wait "$PROBE"; echo "--- host -> guest through the callback forwards ---"; cat "$KC_RUNDIR/probe.txt"
fi
cp "$DIR/ganesha.log" "$KC_RUNDIR/ganesha.log" 2>/dev/null
cp "$DIR.statd.log" "$KC_RUNDIR/host-statd.log" 2>/dev/null
echo "logs: $KC_RUNDIR"
exit $RC
