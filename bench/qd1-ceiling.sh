#!/usr/bin/env bash
# qd1-ceiling.sh - how far above Samba any server can be at one request in flight on this
# machine. Each round runs the loopback round-trip floor (crates/bench/examples/tcp_floor.rs:
# frames of the SMB READ/WRITE sizes, a blocking server thread, no server work) twice, with a
# blocking client thread and with a client task on a two-worker tokio runtime (how `braid
# bench`, the client of both servers here, waits), and then the single-threaded cells of
# bench/multichannel.sh against Braid and Samba. The ceiling of a cell is floor rate /
# Samba's rate: a server that did nothing but answer would reach it. The tokio client's floor
# is the one that applies to `braid bench` figures; the blocking one is the machine's. A third
# floor answers from a task on a tokio runtime of its own (tokio client too): the least any
# epoll-driven server, Braid's design, can cost.
#
# usage: bench/qd1-ceiling.sh [ROUNDS]     (default 3)
# env:   BRAID_BIN as bench/multichannel.sh; FLOOR_SECS (3) per shape and round
# Needs what bench/multichannel.sh needs (root, jq, ss, bc).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
FLOOR_SECS="${FLOOR_SECS:-3}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "qd1-ceiling.sh: ROUNDS must be a positive number" >&2; exit 2; }
WORK="$(mktemp -d /dev/shm/braid-qd1.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
(cd "$REPO" && cargo build --release -q -p braid-bench --example tcp_floor)
FLOOR_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/examples/tcp_floor"

for r in $(seq "$ROUNDS"); do
  "$FLOOR_BIN" "$FLOOR_SECS" all blocking | tee -a "$WORK/floor.txt"
  "$FLOOR_BIN" "$FLOOR_SECS" all tokio | tee -a "$WORK/floor.txt"
  "$FLOOR_BIN" "$FLOOR_SECS" all tokio tokio | tee -a "$WORK/floor.txt"
  ONLY='^st/' OUT="$WORK/runs.jsonl" "$REPO/bench/multichannel.sh" 1 | grep -E '^  (braid|samba)'
done

# Medians: floor per shape and client (round trips/s), servers per cell and channel count (IOPS).
floor_med() {  # SHAPE CLIENT [SERVER]
  sed -n "s/^FLOOR shape=$1 client=$2${3:+ server=$3} rtt.* per_s=\([0-9]*\) .*/\1/p" "$WORK/floor.txt" | sort -n |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
srv_med() {  # SERVER WORKLOAD CHANNELS
  jq -s --arg s "$1" --arg w "$2" --argjson c "$3" \
    '[.[] | select(.srv == $s and .wl == $w and .ch == $c) | .iops] | sort
     | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end' "$WORK/runs.jsonl"
}
echo "| cell | ch | floor, blocking client | floor, tokio client | floor, tokio client and server | Braid | Samba | Braid/Samba | ceiling: floor/Samba (blocking, tokio, tokio both) | Braid/floor (tokio, tokio both) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for pair in "4k-randread 4k-read" "4k-randwrite 4k-write" "64k-seqread 64k-read" "1m-seqread 1m-read"; do
  read -r wl shape <<<"$pair"
  f=$(floor_med "$shape" blocking); t=$(floor_med "$shape" tokio); a=$(floor_med "$shape" tokio tokio)
  for ch in 1 4; do
    b=$(srv_med braid "$wl" "$ch"); s=$(srv_med samba "$wl" "$ch")
    printf '| st %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.2fx | %.2fx, %.2fx, %.2fx | %.2f, %.2f |\n' "$wl" "$ch" "$f" "$t" "$a" "$b" "$s" \
      "$(echo "$b / $s" | bc -l)" "$(echo "$f / $s" | bc -l)" "$(echo "$t / $s" | bc -l)" "$(echo "$a / $s" | bc -l)" \
      "$(echo "$b / $t" | bc -l)" "$(echo "$b / $a" | bc -l)"
  done
done
