#!/usr/bin/env bash
# compare.sh - one `braid bench` workload against Braid and against the Samba peer, on tmpfs,
# interleaved round by round (the order alternates) so machine drift hits both alike.
# Prints one line per run and a ratio line (Braid / Samba, medians over the rounds).
#
# usage: bench/compare.sh [ROUNDS]                  (default 3)
# env:   BENCH_ARGS   workload flags of `braid bench`
#                     (default "-b 4k -t 4 -o 8 -w 30 -r -c 256m -d 10 -W 2")
#        BRAID_BIN    (default: built with `cargo build --release -p braid`, target/release/braid)
#        BRAID_PORT (4493), SAMBA_PORT (4494), MAX_IO (Braid's max_io_size; default: Braid's own, 2 MiB)
#        KEEP_JSON=FILE   also append every run's JSON report to FILE
#        SHARE_ROOT=DIR   both servers' shares under DIR instead of /dev/shm (bench/diskfs.sh)
# Shares and state live under /dev/shm unless SHARE_ROOT is set. Needs root for the Samba peer
# (scripts/samba-peer.sh).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
BENCH_ARGS="${BENCH_ARGS:--b 4k -t 4 -o 8 -w 30 -r -c 256m -d 10 -W 2}"
BRAID_PORT="${BRAID_PORT:-4493}"
SAMBA_PORT="${SAMBA_PORT:-4494}"
WORK=/dev/shm/braid-bench-compare.$$
PW=bench-pw-1
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: ROUNDS must be a positive number" >&2; exit 2; }
command -v jq >/dev/null || { echo "compare.sh: jq is needed" >&2; exit 2; }

if [[ -z "${BRAID_BIN:-}" ]]; then
  (cd "$REPO" && cargo build --release -q -p braid)
  BRAID_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/braid"
fi

# shellcheck source=bench/peers.sh
source "$REPO/bench/peers.sh"
start_peers

declare -A URL=([braid]="smb://alice@127.0.0.1:$BRAID_PORT/data" [samba]="smb://alice@127.0.0.1:$SAMBA_PORT/data")
export BRAID_BENCH_PASSWORD="$PW"
echo "workload: braid bench $BENCH_ARGS   ($ROUNDS round(s), Braid $BRAID_PORT vs Samba $SAMBA_PORT, shares on $(stat -f -c %T "$BRAID_SHARE"))"

# One run; appends its JSON to $WORK/SERVER.jsonl and prints a summary line.
run() {
  local srv=$1 json
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
  json="$("$BRAID_BIN" bench $BENCH_ARGS --json "${URL[$srv]}")"
  echo "$json" >>"$WORK/$srv.jsonl"
  [[ -n "${KEEP_JSON:-}" ]] && echo "$json" >>"$KEEP_JSON"
  jq -r --arg s "$srv" '"\($s)\tIOPS \(.iops)\tMiB/s \(.mib_per_s)\tp50 \(.latency_us.p50) µs\tp99 \(.latency_us.p99) µs\tCPU \(.cpu_seconds) s\terrors \(.errors)"' <<<"$json"
}

for r in $(seq "$ROUNDS"); do
  if (( r % 2 )); then order="braid samba"; else order="samba braid"; fi
  for srv in $order; do run "$srv"; done
done

# Medians over the rounds, then the ratio line.
med() { jq -s "map($2) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end" "$WORK/$1.jsonl"; }
bi=$(med braid .iops); si=$(med samba .iops)
bm=$(med braid .mib_per_s); sm=$(med samba .mib_per_s)
bp=$(med braid .latency_us.p99); sp=$(med samba .latency_us.p99)
errs=$(jq -s 'map(.errors) | add' "$WORK/braid.jsonl" "$WORK/samba.jsonl")
jq -rn --argjson bi "$bi" --argjson si "$si" --argjson bm "$bm" --argjson sm "$sm" --argjson bp "$bp" --argjson sp "$sp" --argjson e "$errs" \
  '"ratio braid/samba: IOPS \(if $si > 0 then ($bi / $si * 100 | round / 100) else "n/a" end)x (\($bi) vs \($si)), MiB/s \(if $sm > 0 then ($bm / $sm * 100 | round / 100) else "n/a" end)x (\($bm) vs \($sm)), p99 \($bp) vs \($sp) µs, errors \($e)"'
