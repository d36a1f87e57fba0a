#!/usr/bin/env bash
# nlm-compare.sh - NLM v4 lock + unlock pairs (`braid bench --nlm-lock`) against Braid and
# against nfs-ganesha (bench/ganesha.sh with NLM_PORT), with 1 client and with 8, each cell on
# both servers back to back (the order alternates by round). Prints one line per run and a
# table of medians over the rounds:
#   workload  braid_pairs_s  ganesha_pairs_s  braid/ganesha  braid_p99_us  ganesha_p99_us
#
# Everything runs in a private network and mount namespace (unshare; gone on exit): ganesha
# hands its NSM work (SM_MON/SM_UNMON of each client host) to rpc.statd, which it finds
# through rpcbind on port 111, so the namespace gets its own rpcbind and rpc.statd, with a
# tmpfs on /run for rpcbind's socket and statd's pid file (the host's are not touched), and a
# veth pair whose address satisfies ganesha's AI_ADDRCONFIG lookups (on loopback alone it
# cannot resolve 127.0.0.1). ganesha registers with that rpcbind, and the bench finds its NLM
# port by GETPORT; Braid serves NLM and NSM itself (nlm_port, nsm_port, nfs_grace = "1s" so the
# run does not wait out a grace period) and the bench is given its NLM port. Both export tmpfs
# directories; statd's directory is on tmpfs too.
#
# Before the cells the script checks that Braid grants a lock (retrying while it answers
# NLM4_DENIED_GRACE_PERIOD); a Braid without NLM fails there with the bench's error.
#
# usage: bench/nlm-compare.sh [ROUNDS]          (default 1)
# env:   DUR (10) measured seconds per run, WARM (1) warm-up seconds
#        CLIENTS ("1 8") client counts, one cell each
#        ONLY=ganesha  measure ganesha alone (no Braid: its column shows "-")
#        BRAID_BIN (default: built with `cargo build --release -p braid`)
#        KEEP_JSON=FILE  also append every run's JSON report to FILE
# Needs root, unshare and nsenter (util-linux), iproute2, jq, rpcbind, rpc.statd (nfs-common)
# and nfs-ganesha.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-1}"
DUR="${DUR:-10}" WARM="${WARM:-1}" CLIENTS="${CLIENTS:-1 8}" ONLY="${ONLY:-}"
# The namespace is private, so fixed ports cannot collide with anything outside it.
BRAID_NFS_PORT=2049 BRAID_SMB_PORT=4455 BRAID_NLM_PORT=4045 BRAID_NSM_PORT=4046
G_NFS=20490 G_MNT=20491 G_NLM=20492
die() { echo "nlm-compare.sh: $*" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number"
[[ -z "$ONLY" || "$ONLY" == ganesha ]] || die "ONLY must be empty or ganesha"
(( EUID == 0 )) || die "needs root (namespaces, rpcbind, statd)"
for c in jq unshare nsenter ip rpcbind rpc.statd rpcinfo ganesha.nfsd; do
  command -v "$c" >/dev/null || die "$c is needed"
done
if [[ -z "${BRAID_BIN:-}" ]]; then
  (cd "$REPO" && cargo build --release -q -p braid)
  BRAID_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/braid"
fi
WORK="$(mktemp -d /dev/shm/braid-nlm-compare.XXXXXX)"

HOLDER= BRAID_PID= RPCBIND_PID= STATD_PID=
# in_ns CMD...: runs CMD in the namespace (network and mounts). Daemons are started with
# nsenter itself, not this function, so that $! is the daemon (nsenter execs it) and not a
# subshell that would outlive being killed.
in_ns() { nsenter -t "$HOLDER" -n -m -- "$@"; }
cleanup() {
  if [[ -n "$HOLDER" ]]; then
    in_ns env DIR="$WORK/ganesha" "$REPO/bench/ganesha.sh" down >/dev/null 2>&1 || true
  fi
  # Only the processes started here, by pid.
  for p in $BRAID_PID $STATD_PID $RPCBIND_PID $HOLDER; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The namespace: a process that only holds it, entered by everything else.
unshare --net --mount --propagation private sleep infinity </dev/null &
HOLDER=$!
for _ in $(seq 50); do [[ "$(readlink "/proc/$HOLDER/ns/net")" != "$(readlink /proc/self/ns/net)" ]] && break; sleep 0.1; done
in_ns ip link set lo up
in_ns ip link add bnlm0 type veth peer name bnlm1
in_ns ip addr add 10.234.0.1/24 dev bnlm0
in_ns ip link set bnlm0 up
in_ns ip link set bnlm1 up
in_ns mount -t tmpfs -o mode=0755 braid-nlm-run /run
in_ns mkdir -p /run/rpcbind
in_ns chown _rpc /run/rpcbind 2>/dev/null || true

# rpcbind and rpc.statd (foreground, so the pids are theirs; -L: no SM_NOTIFY at start).
nsenter -t "$HOLDER" -n -m -- rpcbind -f </dev/null >"$WORK/rpcbind.log" 2>&1 &
RPCBIND_PID=$!
for _ in $(seq 50); do in_ns rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
in_ns rpcinfo -p 127.0.0.1 >/dev/null 2>&1 || { cat "$WORK/rpcbind.log" >&2; die "rpcbind did not start"; }
mkdir -p "$WORK/statd/sm" "$WORK/statd/sm.bak"
nsenter -t "$HOLDER" -n -m -- rpc.statd -F -L -P "$WORK/statd" </dev/null >"$WORK/statd.log" 2>&1 &
STATD_PID=$!
for _ in $(seq 50); do in_ns rpcinfo -T tcp 127.0.0.1 100024 1 >/dev/null 2>&1 && break; sleep 0.1; done
in_ns rpcinfo -T tcp 127.0.0.1 100024 1 >/dev/null 2>&1 || { cat "$WORK/statd.log" >&2; die "rpc.statd did not register with rpcbind"; }

in_ns env DIR="$WORK/ganesha" NFS_PORT=$G_NFS MNT_PORT=$G_MNT NLM_PORT=$G_NLM RPCBIND=1 EXPORT=/data \
  "$REPO/bench/ganesha.sh" up >/dev/null
in_ns rpcinfo -T tcp 127.0.0.1 100021 4 >/dev/null 2>&1 || die "ganesha's NLM v4 is not registered with rpcbind"

declare -A URL=([braid]="nfs://127.0.0.1:$BRAID_NFS_PORT/data"
                [ganesha]="nfs://127.0.0.1:$G_NFS/data?mountport=$G_MNT")
declare -A NLM_ARGS=([braid]="--nlm-port $BRAID_NLM_PORT" [ganesha]="")

bench() { # bench SERVER CLIENTS DUR WARM: one run, its JSON on stdout
  # shellcheck disable=SC2086  # NLM_ARGS is a list of flags
  in_ns timeout $(( $3 + $4 + 60 )) "$BRAID_BIN" bench --nlm-lock --clients "$2" ${NLM_ARGS[$1]} -d "$3" -W "$4" --json "${URL[$1]}"
}

SERVERS="braid ganesha"
if [[ "$ONLY" == ganesha ]]; then
  SERVERS=ganesha
else
  mkdir -p "$WORK/braid-share" "$WORK/state"
  chmod 0777 "$WORK/braid-share"
  cat >"$WORK/braid.toml" <<CFG
[server]
listen = ["127.0.0.1:$BRAID_SMB_PORT"]
admin = "off"
nfs_listen = ["127.0.0.1:$BRAID_NFS_PORT"]
# rpcbind holds port 111 in the namespace; the bench is given the NLM port.
nfs_portmapper = "off"
nlm_port = $BRAID_NLM_PORT
nsm_port = $BRAID_NSM_PORT
nfs_grace = "1s"
state_dir = "$WORK/state"

[[share]]
name = "data"
path = "$WORK/braid-share"
nfs = true
nfs_root_squash = false
CFG
  nsenter -t "$HOLDER" -n -m -- "$BRAID_BIN" serve --config "$WORK/braid.toml" </dev/null >"$WORK/braid.log" 2>&1 &
  BRAID_PID=$!
  for _ in $(seq 100); do
    in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$BRAID_NFS_PORT" 2>/dev/null && break
    kill -0 "$BRAID_PID" 2>/dev/null || break
    sleep 0.1
  done
  if ! in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$BRAID_NFS_PORT" 2>/dev/null; then
    tail -n 5 "$WORK/braid.log" >&2
    grep -qE 'unknown field `(nlm_port|nsm_port|nfs_grace)`' "$WORK/braid.log" &&
      die "this Braid has no NLM service (its config does not know nlm_port, nsm_port or nfs_grace); ONLY=ganesha measures the peer alone"
    die "braid did not start"
  fi
  # Does Braid grant a lock? Retry while it is in its grace period, then fail with the error.
  probe_ok=
  for _ in $(seq 10); do
    if err="$(bench braid 1 1 0 2>&1 >/dev/null)"; then probe_ok=1; break; fi
    [[ "$err" == *NLM4_DENIED_GRACE_PERIOD* ]] || break
    sleep 1
  done
  [[ -n "$probe_ok" ]] || die "Braid does not grant NLM locks at 127.0.0.1:$BRAID_NLM_PORT: ${err##*error: }"
fi

echo "workload: braid bench --nlm-lock --clients N -d $DUR -W $WARM   ($ROUNDS round(s); Braid vs nfs-ganesha 4.3 with rpc.statd; loopback in a private namespace; tmpfs)"
run() { # run SERVER CLIENTS: one run; appends its JSON to $WORK/SERVER-cCLIENTS.jsonl
  local srv=$1 n=$2 json
  json="$(bench "$srv" "$n" "$DUR" "$WARM")" || die "$srv, $n client(s): the run failed (above)"
  echo "$json" >>"$WORK/$srv-c$n.jsonl"
  [[ -n "${KEEP_JSON:-}" ]] && echo "$json" >>"$KEEP_JSON"
  jq -r --arg s "$srv" --arg n "$n" '"\($s)\tclients \($n)\tpairs/s \(.iops)\tp50 \(.latency_us.p50) µs\tp99 \(.latency_us.p99) µs\tclient CPU \(.cpu_seconds) s\terrors \(.errors)"' <<<"$json"
}
for r in $(seq "$ROUNDS"); do
  for n in $CLIENTS; do
    order="$SERVERS"
    (( r % 2 )) || order="$(echo "$SERVERS" | tr ' ' '\n' | tac | tr '\n' ' ')"
    for srv in $order; do run "$srv" "$n"; done
  done
done

med() { # med FILE JQ: the median of JQ over the runs in FILE, or "-" when there is none
  [[ -s "$1" ]] || { echo -; return; }
  jq -s "map($2) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end" "$1"
}
echo
printf 'workload\tbraid_pairs_s\tganesha_pairs_s\tbraid/ganesha\tbraid_p99_us\tganesha_p99_us\n'
for n in $CLIENTS; do
  b=$(med "$WORK/braid-c$n.jsonl" .iops); g=$(med "$WORK/ganesha-c$n.jsonl" .iops)
  bp=$(med "$WORK/braid-c$n.jsonl" .latency_us.p99); gp=$(med "$WORK/ganesha-c$n.jsonl" .latency_us.p99)
  ratio=-
  [[ "$b" != - && "$g" != - ]] && ratio="$(jq -rn --argjson b "$b" --argjson g "$g" 'if $g > 0 then "\($b / $g * 100 | round / 100)x" else "-" end')"
  printf 'nlm-lock-c%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$b" "$g" "$ratio" "$bp" "$gp"
done
