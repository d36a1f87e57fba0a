#!/usr/bin/env bash
# fairness.sh - many active clients against Braid and against the Samba peer, in the same run:
# `braid bench --clients N`, N independent SMB clients (one TCP connection, NEGOTIATE,
# SESSION_SETUP and TREE_CONNECT each, every client from its own loopback source address so
# each server sees N hosts), each looping open / K x 4 KiB random read or write / close, one
# operation at a time. Prints, per server: ops/s, latency p50/p99/p99.9, Jain's fairness index
# over the clients' operation counts, min/median/max operations per client and slowest/median;
# then the Braid/Samba ratio and whether Braid meets the targets (Jain >= 0.9, slowest client
# >= 0.5x the median).
#
# usage: bench/fairness.sh [ROUNDS]                  (default 1; servers alternate in order)
# env:   CLIENTS      clients (default 1000; at most 65534)
#        DUR          measured seconds (default 60)     WARM  warm-up seconds (default 5)
#        BENCH_ARGS   workload flags (default "-b 4k -w 30 -f 16 -c 64m --ios-per-open 8")
#        BRAID_BIN    (default: built with `cargo build --release -p braid`)
#        BRAID_PORT (4497), SAMBA_PORT (4498)
#        KEEP_JSON=FILE   also append every run's JSON report to FILE
#        SHARE_ROOT=DIR   both servers' shares under DIR instead of /dev/shm
#                         (bench/diskfs.sh -- bench/fairness.sh: an ext4 loop image)
# Clients connect from 127.2.0.1 upwards (any 127.0.0.0/8 address works on Linux loopback
# without setup), so each server's per-address connection limits see one connection per
# address. Braid runs with its defaults (max_connections 1024 holds 1,000 clients); with
# CLIENTS over 1000, max_connections is raised to CLIENTS + 24. Samba forks one smbd per
# connection and has no connection limit by default. RLIMIT_NOFILE is raised to 65536 (or the
# hard limit, if lower) for the servers and the client (one socket per client). Needs root for the Samba peer.
# Time: per server about WARM + DUR seconds plus connecting (1,000 clients: a few seconds) and,
# on the first round, laying down the files (16 x 64 MiB).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-1}"
CLIENTS="${CLIENTS:-1000}"
DUR="${DUR:-60}"
WARM="${WARM:-5}"
BENCH_ARGS="${BENCH_ARGS:--b 4k -w 30 -f 16 -c 64m --ios-per-open 8}"
BRAID_PORT="${BRAID_PORT:-4497}"
SAMBA_PORT="${SAMBA_PORT:-4498}"
WORK=/dev/shm/braid-bench-fairness.$$
PW=fair-pw-1
die() { echo "fairness.sh: $*" >&2; exit 2; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number"
[[ "$CLIENTS" =~ ^[1-9][0-9]*$ ]] && (( CLIENTS <= 65534 )) || die "CLIENTS must be 1..65534"
[[ "$DUR" =~ ^[1-9][0-9]*$ && "$WARM" =~ ^[0-9]+$ ]] || die "DUR and WARM must be whole seconds"
command -v jq >/dev/null || die "jq is needed"
(( EUID == 0 )) || die "needs root (the Samba peer)"

# One socket per client in the client, one connection per client in each server: 65536, or
# the hard limit when that is lower (raising it needs CAP_SYS_RESOURCE), if that is enough.
nofile=65536
hard="$(ulimit -Hn)"
[[ "$hard" != unlimited ]] && (( hard < nofile )) && nofile=$hard
(( nofile >= CLIENTS + 256 )) || die "RLIMIT_NOFILE hard limit $hard is too low for $CLIENTS clients"
ulimit -n "$nofile"

if [[ -z "${BRAID_BIN:-}" ]]; then
  (cd "$REPO" && cargo build --release -q -p braid)
  BRAID_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/braid"
fi

# 127.2.0.1 .. 127.2.0.0 + CLIENTS
SOURCE_IPS="127.2.0.1-127.2.$(( CLIENTS >> 8 )).$(( CLIENTS & 255 ))"
if (( CLIENTS > 1000 )); then BRAID_EXTRA="max_connections = $(( CLIENTS + 24 ))"; fi

# shellcheck source=bench/peers.sh
source "$REPO/bench/peers.sh"
start_peers

declare -A URL=([braid]="smb://alice@127.0.0.1:$BRAID_PORT/data" [samba]="smb://alice@127.0.0.1:$SAMBA_PORT/data")
export BRAID_BENCH_PASSWORD="$PW"
ARGS="--clients $CLIENTS --source-ips $SOURCE_IPS $BENCH_ARGS -d $DUR -W $WARM"
echo "workload: braid bench $ARGS   ($ROUNDS round(s), Braid $BRAID_PORT vs Samba $SAMBA_PORT, shares on $(stat -f -c %T "$BRAID_SHARE"), $(nproc) cores)"

# One run; appends its JSON to $WORK/SERVER.jsonl and prints a summary line.
run() {
  local srv=$1 json
  # shellcheck disable=SC2086  # ARGS is a list of flags
  json="$("$BRAID_BIN" bench $ARGS --json "${URL[$srv]}")"
  echo "$json" >>"$WORK/$srv.jsonl"
  [[ -n "${KEEP_JSON:-}" ]] && echo "$json" >>"$KEEP_JSON"
  jq -r --arg s "$srv" '"\($s)\tops/s \(.iops)\tp50 \(.latency_us.p50) µs\tp99 \(.latency_us.p99) µs\tp99.9 \(.latency_us.p999) µs\tJain \(.fairness.jain)\tper client min/median/max \(.fairness.min_ops)/\(.fairness.median_ops)/\(.fairness.max_ops)\tslowest/median \(.fairness.slowest_to_median)\tclient CPU \(.cpu_seconds) s\terrors \(.errors)"' <<<"$json"
  jq -r '.by_op | to_entries[] | "\t\(.key)\tops/s \(.value.ops_per_s)\tp50 \(.value.latency_us.p50) µs\tp99 \(.value.latency_us.p99) µs\tp99.9 \(.value.latency_us.p999) µs"' <<<"$json"
}

for r in $(seq "$ROUNDS"); do
  if (( r % 2 )); then order="braid samba"; else order="samba braid"; fi
  for srv in $order; do run "$srv"; done
done

# Medians over the rounds; the ratio line; Braid's targets.
med() { jq -s "map($2) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end | . * 10000 | round / 10000" "$WORK/$1.jsonl"; }
bi=$(med braid .iops); si=$(med samba .iops)
bp=$(med braid .latency_us.p99); sp=$(med samba .latency_us.p99)
bj=$(med braid .fairness.jain); sj=$(med samba .fairness.jain)
bs=$(med braid .fairness.slowest_to_median); ss=$(med samba .fairness.slowest_to_median)
jq -rn --argjson bi "$bi" --argjson si "$si" --argjson bp "$bp" --argjson sp "$sp" --argjson bj "$bj" --argjson sj "$sj" --argjson bs "$bs" --argjson ss "$ss" \
  '"ratio braid/samba: ops/s \(if $si > 0 then ($bi / $si * 100 | round / 100) else "n/a" end)x (\($bi) vs \($si)), p99 \($bp) vs \($sp) µs, Jain \($bj) vs \($sj), slowest/median \($bs) vs \($ss)",
   "braid targets: Jain \($bj) >= 0.9: \(if $bj >= 0.9 then "met" else "MISSED" end); slowest/median \($bs) >= 0.5: \(if $bs >= 0.5 then "met" else "MISSED" end)"'
