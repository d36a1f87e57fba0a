#!/usr/bin/env bash
# nfs-matrix.sh - the NFSv3 matrix of the Azure NetApp Files Linux benchmarks (4 KiB and 8 KiB
# random, 64 KiB and 256 KiB sequential; reads, writes and read/write mixes; nconnect 1 and 8;
# randrepeat off) with `braid bench`, against Braid and nfs-ganesha (bench/ganesha.sh) on the
# same file system in the same run, and Braid's SMB on the same cells (as many channels as NFS
# connections). Both servers stay up for the whole run; within a round every cell runs on
# each server back to back, the order alternating by round. Prints one TSV line per cell with
# medians over the rounds:
#   cell  braid_nfs_iops  ganesha_iops  braid/ganesha  braid_smb_iops  nfs/smb  errors
# With BEFORE_BIN set, a second Braid (that build, its own share and ports) is a fourth server
# in every cell, and two columns follow: before_nfs_iops  after/before (BRAID_BIN is "after").
#
# usage: bench/nfs-matrix.sh [ROUNDS]     (default 2)
# env:   SHARE_ROOT  directory on the file system under test (default /dev/shm; an ext4 loop
#                    mount for the disk table: see bench/diskfs.sh)
#        CELLS       "full" (default) or "nc8" (only the nconnect 8 cells)
#        DUR (5) WARM (1) THREADS (4) DEPTH (8) FILE_SIZE (128m)
#        BRAID_BIN   (default target/release/braid, built if missing)
#        SMB=0       leave out the SMB column
#        BEFORE_BIN  a second Braid build to measure beside BRAID_BIN (before/after a change)
# Needs root (the servers switch to the caller's ids), jq, nfs-ganesha and gcc.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-2}"
SHARE_ROOT="${SHARE_ROOT:-/dev/shm}"
CELLS="${CELLS:-full}"
DUR="${DUR:-5}" WARM="${WARM:-1}" THREADS="${THREADS:-4}" DEPTH="${DEPTH:-8}" FILE_SIZE="${FILE_SIZE:-128m}"
SMB="${SMB:-1}"
command -v jq >/dev/null || { echo "nfs-matrix.sh: jq is needed" >&2; exit 2; }
BIN="${BRAID_BIN:-$REPO/target/release/braid}"
[[ -x "$BIN" ]] || (cd "$REPO" && cargo build --release -q -p braid)
BEFORE_BIN="${BEFORE_BIN:-}"
[[ -z "$BEFORE_BIN" || -x "$BEFORE_BIN" ]] || { echo "nfs-matrix.sh: BEFORE_BIN $BEFORE_BIN is not executable" >&2; exit 2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

WORK="$(mktemp -d "$SHARE_ROOT/braid-nfs-matrix.XXXX")"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  DIR="$WORK/ganesha" "$REPO/bench/ganesha.sh" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

G_NFS=$(free_port) G_MNT=$(free_port)
PASS="Bench-$RANDOM-$RANDOM"
HASH=$(python3 "$REPO/tests/harness.py" nthash "$PASS")
# start_braid NAME BIN: a Braid serving $WORK/NAME; sets NAME's ports in NFS_PORT_/SMB_PORT_NAME
# and its pid in PIDS
start_braid() {
  local name=$1 bin=$2 nfs smb
  nfs=$(free_port) smb=$(free_port)
  printf -v "NFS_PORT_$name" %s "$nfs"; printf -v "SMB_PORT_$name" %s "$smb"
  mkdir -p "$WORK/$name" "$WORK/$name-state"
  chmod 0777 "$WORK/$name"
  cat >"$WORK/$name.toml" <<CFG
[server]
listen = ["127.0.0.1:$smb"]
admin = "off"
nfs_listen = ["127.0.0.1:$nfs"]
nfs_portmapper = "off"
state_dir = "$WORK/$name-state"

[[user]]
name = "bench"
nt_hash = "$HASH"

[[share]]
name = "data"
path = "$WORK/$name"
read_only = false
nfs = true
nfs_root_squash = false
CFG
  "$bin" serve --config "$WORK/$name.toml" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do port_open "$nfs" && break; sleep 0.1; done
  port_open "$nfs" || { echo "braid ($name) did not start:" >&2; tail "$WORK/$name.log" >&2; exit 1; }
}
start_braid braid "$BIN"
NFS_PORT=$NFS_PORT_braid SMB_PORT=$SMB_PORT_braid
[[ -n "$BEFORE_BIN" ]] && start_braid before "$BEFORE_BIN"
DIR="$WORK/ganesha" NFS_PORT="$G_NFS" MNT_PORT="$G_MNT" EXPORT=/data "$REPO/bench/ganesha.sh" up >/dev/null

# name|flags; the connection count is appended per cell (-n1 / -n8).
BASE=(rand4k-read "-b 4k -r -w 0" rand4k-write "-b 4k -r -w 100"
      rand8k-read "-b 8k -r -w 0" rand8k-write "-b 8k -r -w 100"
      seq64k-read "-b 64k -s -w 0" seq64k-write "-b 64k -s -w 100"
      seq256k-read "-b 256k -s -w 0" seq256k-write "-b 256k -s -w 100")
MIXES=(rand8k-mix25 "-b 8k -r -w 25" rand8k-mix50 "-b 8k -r -w 50" rand8k-mix75 "-b 8k -r -w 75")
cells=()
for nc in 1 8; do
  [[ "$CELLS" == nc8 && $nc == 1 ]] && continue
  for ((i = 0; i < ${#BASE[@]}; i += 2)); do cells+=("${BASE[i]}-n$nc|${BASE[i+1]}|$nc"); done
done
for ((i = 0; i < ${#MIXES[@]}; i += 2)); do cells+=("${MIXES[i]}-n8|${MIXES[i+1]}|8"); done

run() { # server flags nconnect -> appends JSON to $WORK/<cell>.<server>.jsonl
  local srv=$1 cell=$2 flags=$3 nc=$4 url
  case $srv in
    braid) url="nfs://127.0.0.1:$NFS_PORT/data"; extra="--nconnect $nc" ;;
    before) url="nfs://127.0.0.1:$NFS_PORT_before/data"; extra="--nconnect $nc" ;;
    ganesha) url="nfs://127.0.0.1:$G_NFS/data?mountport=$G_MNT"; extra="--nconnect $nc" ;;
    smb) url="smb://bench:$PASS@127.0.0.1:$SMB_PORT/data"; extra="--channels $nc" ;;
  esac
  # shellcheck disable=SC2086  # flags are lists
  "$BIN" bench $flags $extra -t "$THREADS" -o "$DEPTH" -c "$FILE_SIZE" -d "$DUR" -W "$WARM" --json "$url" \
    >>"$WORK/$cell.$srv.jsonl" 2>>"$WORK/bench.err" || echo '{"iops":0,"errors":1}' >>"$WORK/$cell.$srv.jsonl"
}

servers=(braid)
[[ -n "$BEFORE_BIN" ]] && servers+=(before)
servers+=(ganesha)
[[ "$SMB" == 1 ]] && servers+=(smb)
for r in $(seq "$ROUNDS"); do
  for c in "${cells[@]}"; do
    IFS='|' read -r cell flags nc <<<"$c"
    order=("${servers[@]}")
    (( r % 2 == 0 )) && order=("${servers[@]:1}" "${servers[0]}")
    for srv in "${order[@]}"; do run "$srv" "$cell" "$flags" "$nc"; done
  done
done

med() { [[ -s "$1" ]] && jq -s "map(.iops) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end" "$1" || echo 0; }
printf 'cell\tbraid_nfs_iops\tganesha_iops\tbraid/ganesha\tbraid_smb_iops\tnfs/smb\terrors%s\n' \
  "$([[ -n "$BEFORE_BIN" ]] && printf '\tbefore_nfs_iops\tafter/before')"
for c in "${cells[@]}"; do
  IFS='|' read -r cell _ _ <<<"$c"
  b=$(med "$WORK/$cell.braid.jsonl") g=$(med "$WORK/$cell.ganesha.jsonl") s=$(med "$WORK/$cell.smb.jsonl")
  p=$(med "$WORK/$cell.before.jsonl")
  e=$(cat "$WORK/$cell".*.jsonl | jq -s 'map(.errors) | add')
  awk -v c="$cell" -v b="$b" -v g="$g" -v s="$s" -v e="$e" -v p="$p" -v bp="${BEFORE_BIN:+1}" 'BEGIN {
    printf "%s\t%.0f\t%.0f\t%s\t%.0f\t%s\t%s", c, b, g, (g > 0 ? sprintf("%.2f", b / g) : "n/a"), s, (s > 0 ? sprintf("%.2f", b / s) : "n/a"), e
    if (bp) printf "\t%.0f\t%s", p, (p > 0 ? sprintf("%.2f", b / p) : "n/a")
    printf "\n" }'
done
