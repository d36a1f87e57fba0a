#!/usr/bin/env bash
# durable-cost.sh - the cost of durable v2 and persistent opens on the metadata mix: `braid
# bench --meta` plain, with `--durable` (every open asks DH2Q with a batch oplock) and with
# `--persistent` (DH2Q with the persistent flag, on a continuously available share whose
# handle store is in the state directory on the same file system), against one Braid
# server, the variants taking turns within each round, on tmpfs and on an ext4 loop image.
# `ca-plain` is plain opens on the continuously available share (what ordinary opens pay
# there). Prints a markdown table: per backend, mix and variant, the median ops/s, its
# ratio to plain, and the p50 latency.
#
# usage: bench/durable-cost.sh
# env:   BACKENDS ("tmpfs ext4"); MIXES ("open,close create,open,close,delete,stat");
#        VARIANTS ("plain durable persistent ca-plain");
#        ROUNDS (3); DUR (5) seconds per timed run; THREADS (4); FILES (32) per worker
#        BRAID_BIN (target/release/braid), BENCH_BIN (BRAID_BIN)
#        PORT (14475); IMG_DIR (/var/tmp/braid-diskfs) IMG_SIZE (1G): the ext4 image
# Needs root for the ext4 backend (mkfs, losetup, mount), and jq.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BACKENDS="${BACKENDS:-tmpfs ext4}"
MIXES="${MIXES:-open,close create,open,close,delete,stat}"
VARIANTS="${VARIANTS:-plain durable persistent ca-plain}"
ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-5}"
THREADS="${THREADS:-4}"
FILES="${FILES:-32}"
BRAID_BIN="${BRAID_BIN:-$REPO/target/release/braid}"
BENCH_BIN="${BENCH_BIN:-$BRAID_BIN}"
PORT="${PORT:-14475}"
IMG_DIR="${IMG_DIR:-/var/tmp/braid-diskfs}"
IMG_SIZE="${IMG_SIZE:-1G}"
PW="durable-$RANDOM$RANDOM"
die() { echo "durable-cost.sh: $*" >&2; exit 2; }

[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$DUR" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS and DUR must be positive numbers"
command -v jq >/dev/null || die "jq is not installed"
for b in "$BRAID_BIN" "$BENCH_BIN"; do [[ -x "$b" ]] || die "$b: not an executable (cargo build --release)"; done
"$BENCH_BIN" bench --help | grep -q -- --persistent || die "$BENCH_BIN: its bench has no --persistent"
[[ " $BACKENDS " == *" ext4 "* ]] && { (( EUID == 0 )) || die "the ext4 backend needs root"; }

WORK="$(mktemp -d /dev/shm/durable-cost.XXXXXX)"
RESULTS="$WORK/results.txt" # backend mix variant round ops_per_s p50_us
: >"$RESULTS"
SERVER=""
LOOP=""
ROOT=""
MNT="$IMG_DIR/durable-mnt"
IMG="$IMG_DIR/durable-ext4.img"

cleanup() {
  [[ -n "$SERVER" ]] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
  SERVER=""
  if [[ -n "$LOOP" ]]; then
    for _ in 1 2 3 4 5; do umount "$MNT" 2>/dev/null && break; sleep 1; done
    mountpoint -q "$MNT" && umount -l "$MNT"
    losetup -d "$LOOP" 2>/dev/null || true
    rm -f "$IMG"
  fi
  LOOP=""
  return 0
}
trap 'cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
port_open "$PORT" && die "port $PORT is in use (set PORT)"

# Sets ROOT, the share root for backend $1, mounting the ext4 image when asked (not in a
# subshell: cleanup needs LOOP).
backend_up() {
  case "$1" in
    tmpfs) mkdir -p "$WORK/tmpfs" && ROOT="$WORK/tmpfs" ;;
    ext4)
      mkdir -p "$IMG_DIR" "$MNT"
      [[ "$(stat -f -c %T "$IMG_DIR")" != tmpfs ]] || die "IMG_DIR must be on a disk, not tmpfs"
      mountpoint -q "$MNT" && die "$MNT is already mounted (umount it first)"
      rm -f "$IMG"
      fallocate -l "$IMG_SIZE" "$IMG" 2>/dev/null || truncate -s "$IMG_SIZE" "$IMG"
      mkfs.ext4 -F -q "$IMG"
      LOOP="$(losetup --find --show --direct-io=on "$IMG" 2>/dev/null || losetup --find --show "$IMG")"
      mount "$LOOP" "$MNT"
      mkdir -p "$MNT/share" && chmod 0755 "$MNT" "$MNT/share"
      ROOT="$MNT/share"
      ;;
    *) die "unknown backend $1 (tmpfs, ext4)" ;;
  esac
}

server_up() {
  mkdir -p "$1/data" "$1/ca"
  printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nlog = "warn"\nstate_dir = "%s"\n[[share]]\nname = "data"\npath = "%s"\n[[share]]\nname = "ca"\npath = "%s"\ncontinuous_availability = true\n' \
    "$PORT" $((PORT + 10000)) "$1/state" "$1/data" "$1/ca" >"$WORK/braid.toml"
  echo "$PW" | "$BRAID_BIN" user add alice --config "$WORK/braid.toml" --password-stdin >/dev/null
  "$BRAID_BIN" serve --config "$WORK/braid.toml" >"$WORK/braid.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do port_open "$PORT" && break; sleep 0.1; done
  port_open "$PORT" || { cat "$WORK/braid.log" >&2; die "braid did not start"; }
}

# One timed run of mix $1, variant $2 (plain|durable|persistent|ca-plain); prints "ops/s p50_us".
run_one() {
  local flag=() out share=data
  case "$2" in
    durable) flag=(--durable) ;;
    persistent) flag=(--persistent) share=ca ;;
    ca-plain) share=ca ;;
  esac
  out="$(BRAID_BENCH_PASSWORD="$PW" "$BENCH_BIN" bench --meta "$1" -f "$FILES" -t "$THREADS" -d "$DUR" "${flag[@]}" \
    --dir "dc-$2" --json "smb://alice@127.0.0.1:$PORT/$share" 2>"$WORK/bench.err")" || { cat "$WORK/bench.err" >&2; return 1; }
  [[ "$(jq '.errors' <<<"$out")" == 0 ]] || { echo "durable-cost.sh: $1 $2: $(jq '.errors' <<<"$out") errors" >&2; cat "$WORK/bench.err" >&2; return 1; }
  jq -r '"\(.iops) \(.latency_us.p50)"' <<<"$out"
}

echo "durable-cost.sh: braid $("$BRAID_BIN" --version 2>/dev/null || echo ?); backends: $BACKENDS; mixes: $MIXES; ROUNDS=$ROUNDS DUR=$DUR THREADS=$THREADS" >&2
failed=0
for b in $BACKENDS; do
  backend_up "$b"
  server_up "$ROOT"
  for m in $MIXES; do
    for r in $(seq "$ROUNDS"); do
      # Rotate which variant goes first so drift over the run favours none.
      order="$(echo $VARIANTS | tr ' ' '\n' | awk -v r="$r" '{v[NR-1] = $0} END {for (i = 0; i < NR; i++) print v[(i + r) % NR]}')"
      for v in $order; do
        if res="$(run_one "$m" "$v")"; then
          echo "$b $m $v $r $res" >>"$RESULTS"
          echo "  $b $m $v round $r: $res" >&2
        else
          echo "  $b $m $v round $r: FAILED" >&2
          failed=1
        fi
      done
    done
  done
  cleanup
done

echo
echo "| backend | mix | variant | ops/s | vs plain | p50 us | rounds (ops/s) |"
echo "|---|---|---|---:|---:|---:|---|"
for b in $BACKENDS; do
  for m in $MIXES; do
    pick() { awk -v b="$b" -v m="$m" -v v="$1" -v c="$2" '$1 == b && $2 == m && $3 == v {print $c}' "$RESULTS"; }
    p=$(pick plain 5 | median)
    for v in $VARIANTS; do
      o=$(pick "$v" 5 | median) l=$(pick "$v" 6 | median)
      ratio=$(awk -v p="$p" -v d="$o" 'BEGIN {if (p > 0) printf "%.2fx", d / p; else print "n/a"}')
      printf '| %s | %s | %s | %.0f | %s | %s | %s |\n' "$b" "$m" "$v" "$o" "$ratio" "$l" "$(pick "$v" 5 | paste -sd, -)"
    done
  done
done
exit "$failed"
