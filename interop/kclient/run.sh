#!/usr/bin/env bash
# kclient/run.sh - run the REAL Linux kernel SMB3 (cifs) / NFSv3 client inside a
# QEMU (TCG) guest against a server listening on the host's 127.0.0.1.
#
# Usage:
#   run.sh smb [127.0.0.1:]PORT SHARE USER PASS [extra cifs options]
#   run.sh nfs [127.0.0.1:]PORT[,MOUNTPORT] EXPORT [extra nfs options]
#     e.g. run.sh smb 4455 share tester 'Passw0rd!' multichannel,max_channels=4
#          run.sh nfs 20490,20491 /export nconnect=8
#
# Env knobs:
#   KC_TIMEOUT=300      whole-QEMU wall clock limit (s)
#   KC_SIZE_MB=64       big file size;  KC_NFILES=200 small files;  KC_PAR=4 parallel readers
#   KC_MC_RELAY=0       smb: 1 = start an in-guest relay 127.0.0.1:{445,PORT} -> server, so
#                       secondary channels to a server iface advertised as 127.0.0.1 work
#   KC_EXPECT_CHANNELS  smb: adds step "channels" (ok if channels >= N)
#   KC_EXPECT_CONNS     nfs: adds step "nconnect" (ok if mountstats xprts >= N)
#   KC_MEM=1024 KC_SMP=2 KC_KVER=<kernel version>  KC_RUNDIR=<dir for logs>
#   KC_VERBOSE=1        stream the guest console to stderr while running
#   KC_QUIET=1          print only KCLIENT-* lines (default also prints DEBUGDATA|/STATS|/MOUNTSTATS|)
#   KC_NFS_OPTS=...     nfs: mount options replacing the default port/mountport/nolock set
#                       (addr= is added), e.g. "vers=3,proto=tcp,mountproto=tcp,nconnect=8"
#                       for a mount that asks the server's portmapper (forward 111 too)
#   KC_FWD_EXTRA="111 4045"  more host ports the guest may reach at 10.0.2.100
#   KC_SUITE=dircache   smb/nfs: instead of the full run, mount and run dircache.c (a listing
#                       kept open must show each unlink, rename out and create; KC_NFILES names)
#   KC_NETCHECK=1       extra step net_isolation: guest must NOT reach 10.0.2.2, other ports,
#                       DNS 10.0.2.3, 1.1.1.1 (tcp/icmp) etc.
# NFS locks (NLM v4 + NSM; see README):
#   KC_NFS_LOCKS=1      nfs: start rpcbind + rpc.statd in the guest and mount without nolock
#                       (the guest's lockd then asks the server's portmapper for NLM: ports 111
#                       and KC_NLM_PORT are forwarded too). KC_SUITE=locks implies it.
#   KC_NLM_PORT=4045    the server's NLM port the guest may reach (forwarded like the others)
#   KC_LOCKD_PORT=30001 KC_STATD_PORT=30003   the guest's fixed lockd (tcp+udp) and statd (+1:
#                       its outgoing port) ports
#   KC_SUITE=locks      nfs: fcntl/flock checks (kclock.c) instead of the full run
#   KC_LOCK_HOLD=1      locks: then hold a lock and follow the host's commands (cross-protocol
#                       phase; commands are lines written to RUNDIR/cmd.in: see guest-locks.sh)
#   KC_LOCK_FILE=kclock-hold.bin  the file (in the share's root) of that phase
#   KC_NLM_CALLBACK=127.0.0.N  callbacks: socat connects to the server from 127.0.0.N (so the
#                       server sees the guest as 127.0.0.N), QEMU forwards 127.0.0.N:{111,
#                       KC_LOCKD_PORT,KC_STATD_PORT} tcp+udp to the guest, and the guest makes
#                       forwarded packets come from the server's address (nft snat)
#   KC_CB_SNAT=1        0: no snat (callbacks then arrive from 10.0.2.2; lockd refuses GRANTED)
#   KC_RESTRICT=on      off: slirp without restrict (UDP replies from the guest then reach the
#                       host; with restrict=on libslirp drops every guest UDP datagram); the
#                       guest then filters its own output instead (nft: TCP to 10.0.2.100 on the
#                       forwarded ports, replies to 10.0.2.2, nothing else). Needs KC_NLM_CALLBACK.
# Output: KCLIENT-RESULT lines, then "N passed, N failed" (exit 0 iff 0 failed).
#
# Network: QEMU user-mode net with restrict=on, ipv6=off, and ONLY guestfwd rules
#   10.0.2.100:PORT -> host 127.0.0.1:PORT (per guest connection: socat to 127.0.0.1).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
B="$HERE/build"

usage() { awk 'NR>1 && !/^#/{exit} NR>1{sub(/^# ?/,""); print}' "$0"; exit 2; }
[[ $# -ge 1 ]] || usage
MODE=$1; shift
PORTSPEC=""; MPORT=""; SHARE=""; USER_=""; PASS_=""; EXPORT_=""; EXTRA=""
case "$MODE" in
  smb) [[ $# -ge 4 ]] || usage; PORTSPEC=$1; SHARE=$2; USER_=$3; PASS_=$4; EXTRA=${5:-} ;;
  nfs) [[ $# -ge 2 ]] || usage; PORTSPEC=$1; EXPORT_=$2; EXTRA=${3:-} ;;
  *) usage ;;
esac
PORTSPEC=${PORTSPEC#127.0.0.1:}
PORT=${PORTSPEC%%,*}
if [[ "$MODE" == nfs ]]; then
  if [[ "$PORTSPEC" == *,* ]]; then MPORT=${PORTSPEC#*,}; else MPORT=${KC_MOUNTPORT:-$PORT}; fi
fi
for p in $PORT $MPORT; do [[ "$p" =~ ^[0-9]+$ ]] && (( p > 0 && p < 65536 )) || { echo "bad port '$p'" >&2; exit 2; }; done

command -v qemu-system-x86_64 >/dev/null || { echo "apt-get install -y qemu-system-x86" >&2; exit 1; }
command -v socat >/dev/null || { echo "apt-get install -y socat" >&2; exit 1; }
if [[ ! -x "$B/kc-reaper" || "$HERE/kc-reaper.c" -nt "$B/kc-reaper" ]]; then
  mkdir -p "$B"; gcc -O2 -o "$B/kc-reaper" "$HERE/kc-reaper.c" || exit 1
fi

# (re)build the base initramfs when missing or stale
need_build=0
[[ -f "$B/initramfs-base.cpio.gz" && -e "$B/vmlinuz" ]] || need_build=1
for f in init.sh guest-test.sh guest-locks.sh kmount.c dircache.c kclock.c build-initramfs.sh; do
  [[ "$HERE/$f" -nt "$B/initramfs-base.cpio.gz" ]] && need_build=1
done
[[ -n "${KC_KVER:-}" && "$(cat "$B/kver" 2>/dev/null)" != "$KC_KVER" ]] && need_build=1
if (( need_build )); then
  "$HERE/build-initramfs.sh" ${KC_KVER:+"$KC_KVER"} >&2 || { echo "initramfs build failed" >&2; exit 1; }
fi

NFS_LOCKS=${KC_NFS_LOCKS:-0}
[[ "$MODE" == nfs && "${KC_SUITE:-}" == locks ]] && NFS_LOCKS=1
LOCKD_PORT=${KC_LOCKD_PORT:-30001}
STATD_PORT=${KC_STATD_PORT:-30003}
CB=${KC_NLM_CALLBACK:-}
[[ "${KC_RESTRICT:-on}" == on || -n "$CB" ]] || { echo "KC_RESTRICT=off needs KC_NLM_CALLBACK (the guest's own filter)" >&2; exit 2; }
[[ "${KC_RESTRICT:-on}" == on || "${KC_RESTRICT}" == off ]] || { echo "KC_RESTRICT is on or off" >&2; exit 2; }
if [[ -n "$CB" ]]; then
  [[ "$CB" =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ && "$CB" != 127.0.0.1 ]] ||
    { echo "KC_NLM_CALLBACK must be a loopback address other than 127.0.0.1 (e.g. 127.0.0.5)" >&2; exit 2; }
fi

# the host ports the guest reaches at 10.0.2.100 (each once)
FWDPORTS=""
for p in $PORT $MPORT ${KC_FWD_EXTRA:-} $( (( NFS_LOCKS )) && echo "111 ${KC_NLM_PORT:-4045}"); do
  [[ " $FWDPORTS " == *" $p "* ]] || FWDPORTS="$FWDPORTS${FWDPORTS:+ }$p"
done

TS=$(date +%Y%m%d-%H%M%S)
RUN=${KC_RUNDIR:-$HERE/runs/$TS-$MODE-$$}
mkdir -p "$RUN"
TAG="kclient-$TS-$$"

q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
P="$RUN/pstage"; mkdir -p "$P/kc"
{
  echo "KC_MODE=$(q "$MODE")"
  echo "KC_PORT=$(q "$PORT")"
  echo "KC_MPORT=$(q "$MPORT")"
  echo "KC_SHARE=$(q "$SHARE")"
  echo "KC_USER=$(q "$USER_")"
  echo "KC_PASS=$(q "$PASS_")"
  echo "KC_EXPORT=$(q "$EXPORT_")"
  echo "KC_EXTRA=$(q "$EXTRA")"
  echo "KC_SIZE_MB=$(q "${KC_SIZE_MB:-64}")"
  echo "KC_NFILES=$(q "${KC_NFILES:-200}")"
  echo "KC_PAR=$(q "${KC_PAR:-4}")"
  echo "KC_TAG=$(q "$TAG")"
  echo "KC_MC_RELAY=$(q "${KC_MC_RELAY:-0}")"
  echo "KC_EXPECT_CHANNELS=$(q "${KC_EXPECT_CHANNELS:-}")"
  echo "KC_EXPECT_CONNS=$(q "${KC_EXPECT_CONNS:-}")"
  echo "KC_NETCHECK=$(q "${KC_NETCHECK:-0}")"
  echo "KC_NFS_OPTS=$(q "${KC_NFS_OPTS:-}")"
  echo "KC_SUITE=$(q "${KC_SUITE:-full}")"
  echo "KC_NFS_LOCKS=$(q "$NFS_LOCKS")"
  echo "KC_LOCKD_PORT=$(q "$LOCKD_PORT")"
  echo "KC_STATD_PORT=$(q "$STATD_PORT")"
  echo "KC_NLM_CALLBACK=$(q "${KC_NLM_CALLBACK:-}")"
  echo "KC_CB_SNAT=$(q "${KC_CB_SNAT:-1}")"
  echo "KC_RESTRICT=$(q "${KC_RESTRICT:-on}")"
  echo "KC_FWD_PORTS=$(q "$FWDPORTS")"
  echo "KC_LOCK_HOLD=$(q "${KC_LOCK_HOLD:-0}")"
  echo "KC_LOCK_FILE=$(q "${KC_LOCK_FILE:-kclock-hold.bin}")"
} > "$P/kc/params.sh"
chmod 600 "$P/kc/params.sh"
# initrd = base archive (zero-padded to 4 bytes) + per-run params archive
cp "$B/initramfs-base.cpio.gz" "$RUN/initrd"
pad=$(( (4 - $(stat -c %s "$RUN/initrd") % 4) % 4 ))
(( pad )) && head -c "$pad" /dev/zero >> "$RUN/initrd"
( cd "$P" && printf 'kc/params.sh\n' | cpio -o -H newc --quiet ) | gzip -1 >> "$RUN/initrd"
rm -rf "$P"

# guest 10.0.2.100:P -> host 127.0.0.1:P, once per port (from 127.0.0.N with KC_NLM_CALLBACK;
# ",," is a comma inside a QEMU option value)
FWD=""
for p in $FWDPORTS; do
  FWD="$FWD${FWD:+,}guestfwd=tcp:10.0.2.100:$p-cmd:socat -lf $RUN/socat.log - TCP:127.0.0.1:$p${CB:+,,bind=$CB}"
done
# callbacks: host 127.0.0.N:P -> guest P (loopback only) for the guest's rpcbind, lockd, statd
if [[ -n "$CB" ]]; then
  for p in 111 "$LOCKD_PORT" "$STATD_PORT"; do
    FWD="$FWD,hostfwd=tcp:$CB:$p-10.0.2.15:$p,hostfwd=udp:$CB:$p-10.0.2.15:$p"
  done
fi
NETDEV="user,id=n0,restrict=${KC_RESTRICT:-on},ipv6=off,net=10.0.2.0/24,host=10.0.2.2,$FWD"
# host -> guest command lines (KC_LOCK_HOLD): QEMU reads RUNDIR/cmd.in into the guest's ttyS2
CMDSER=()
if [[ "${KC_LOCK_HOLD:-0}" == 1 ]]; then
  rm -f "$RUN/cmd.in" "$RUN/cmd.out"; mkfifo "$RUN/cmd.in" "$RUN/cmd.out"
  CMDSER=(-serial "pipe:$RUN/cmd")
fi

: > "$RUN/console.log"; : > "$RUN/results.raw"
T0=$(date +%s.%N)
CON="file:$RUN/console.log"
[[ "${KC_VERBOSE:-0}" == 1 ]] && CON="stdio"
"$B/kc-reaper" timeout -k 10 "${KC_TIMEOUT:-300}" qemu-system-x86_64 \
  -nodefaults -no-user-config -machine q35 -accel tcg -cpu max \
  -smp "${KC_SMP:-2}" -m "${KC_MEM:-1024}" -display none -no-reboot \
  -kernel "$B/vmlinuz" -initrd "$RUN/initrd" \
  -append "console=ttyS0 quiet loglevel=4 panic=-1 rdinit=/init" \
  -serial "$CON" -serial "file:$RUN/results.raw" "${CMDSER[@]}" \
  -netdev "$NETDEV" -device virtio-net-pci,netdev=n0,romfile= \
  </dev/null > "$RUN/qemu.out" 2>&1 &
QPID=$!
echo "$QPID" > "$RUN/qemu.pid"
if [[ "${KC_VERBOSE:-0}" == 1 ]]; then tail -F "$RUN/qemu.out" >&2 & TPID=$!; fi
wait "$QPID"; QRC=$?
[[ -n "${TPID:-}" ]] && { kill "$TPID" 2>/dev/null; wait "$TPID" 2>/dev/null; }
[[ "${KC_VERBOSE:-0}" == 1 ]] && cp "$RUN/qemu.out" "$RUN/console.log"
T1=$(date +%s.%N)
rm -f "$RUN/initrd" "$RUN/cmd.in" "$RUN/cmd.out"
tr -d '\r' < "$RUN/results.raw" > "$RUN/results.txt"
WALL=$(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.1f", b-a}')

if [[ "${KC_QUIET:-0}" == 1 ]]; then
  grep -E '^KCLIENT-(BOOT|INFO|RESULT|SUMMARY|END|WAIT)' "$RUN/results.txt"
else
  grep -vE '^(PROCNETTCP|KCLIENT-DMESG)' "$RUN/results.txt"
fi
PASSED=$(grep -c '^KCLIENT-RESULT .* ok=1' "$RUN/results.txt")
FAILED=$(grep -c '^KCLIENT-RESULT .* ok=0' "$RUN/results.txt")
if ! grep -q '^KCLIENT-SUMMARY' "$RUN/results.txt"; then
  reason="qemu_rc=$QRC"; (( QRC == 124 || QRC == 137 )) && reason="timeout(${KC_TIMEOUT:-300}s)"
  echo "KCLIENT-RESULT step=guest_complete ok=0 $reason"
  FAILED=$((FAILED+1))
  echo "--- last console lines ($RUN/console.log) ---"; tail -n 25 "$RUN/console.log"
fi
echo "KCLIENT-RUN wall_s=$WALL qemu_rc=$QRC logs=$RUN"
echo "$PASSED passed, $FAILED failed"
(( FAILED == 0 ))
