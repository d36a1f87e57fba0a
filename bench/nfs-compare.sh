#!/usr/bin/env bash
# nfs-compare.sh - one `braid bench` workload over NFSv3 against Braid and against nfs-ganesha
# (bench/ganesha.sh), both exporting a tmpfs directory, interleaved round by round (the order
# alternates) so machine drift hits both alike. Prints one line per run and a ratio line
# (Braid / ganesha, medians over the rounds).
#
# usage: bench/nfs-compare.sh [ROUNDS]             (default 3)
# env:   BENCH_ARGS   workload flags of `braid bench`
#                     (default "-b 4k -t 4 -o 8 -w 30 -r -c 256m -d 10 -W 2 --nconnect 2")
#        BRAID_BIN    (default: built with `cargo build --release -p braid`, target/release/braid)
#        BRAID_NFS_PORT (20590), GANESHA_NFS_PORT (20591), GANESHA_MNT_PORT (20592)
#        KEEP_JSON=FILE   also append every run's JSON report to FILE
# Needs root (both servers switch to the caller's uid), jq, nfs-ganesha and gcc.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
BENCH_ARGS="${BENCH_ARGS:--b 4k -t 4 -o 8 -w 30 -r -c 256m -d 10 -W 2 --nconnect 2}"
BRAID_NFS_PORT="${BRAID_NFS_PORT:-20590}"
GANESHA_NFS_PORT="${GANESHA_NFS_PORT:-20591}"
GANESHA_MNT_PORT="${GANESHA_MNT_PORT:-20592}"
WORK=/dev/shm/braid-nfs-compare.$$
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "nfs-compare.sh: ROUNDS must be a positive number" >&2; exit 2; }
command -v jq >/dev/null || { echo "nfs-compare.sh: jq is needed" >&2; exit 2; }

if [[ -z "${BRAID_BIN:-}" ]]; then
  (cd "$REPO" && cargo build --release -q -p braid)
  BRAID_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/braid"
fi

mkdir -p "$WORK/braid-share" "$WORK/state"
chmod 0777 "$WORK/braid-share"
BRAID_PID=
cleanup() {
  [[ -n "$BRAID_PID" ]] && kill "$BRAID_PID" 2>/dev/null && wait "$BRAID_PID" 2>/dev/null
  DIR="$WORK/ganesha" "$REPO/bench/ganesha.sh" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Braid: NFS only in practice (its SMB port is one more free port nobody uses).
smb_port=$((BRAID_NFS_PORT + 3))
cat >"$WORK/braid.toml" <<CFG
[server]
listen = ["127.0.0.1:$smb_port"]
admin = "off"
nfs_listen = ["127.0.0.1:$BRAID_NFS_PORT"]
nfs_portmapper = "off"
state_dir = "$WORK/state"

[[share]]
name = "data"
path = "$WORK/braid-share"
nfs = true
nfs_root_squash = false
CFG
"$BRAID_BIN" serve --config "$WORK/braid.toml" >"$WORK/braid.log" 2>&1 &
BRAID_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$BRAID_NFS_PORT") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$BRAID_NFS_PORT") 2>/dev/null || { echo "braid did not start:" >&2; tail "$WORK/braid.log" >&2; exit 1; }
DIR="$WORK/ganesha" NFS_PORT="$GANESHA_NFS_PORT" MNT_PORT="$GANESHA_MNT_PORT" EXPORT=/data "$REPO/bench/ganesha.sh" up >/dev/null

declare -A URL=([braid]="nfs://127.0.0.1:$BRAID_NFS_PORT/data"
                [ganesha]="nfs://127.0.0.1:$GANESHA_NFS_PORT/data?mountport=$GANESHA_MNT_PORT")
echo "workload: braid bench $BENCH_ARGS   ($ROUNDS round(s), Braid vs nfs-ganesha over NFSv3, exports on tmpfs)"

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
  if (( r % 2 )); then order="braid ganesha"; else order="ganesha braid"; fi
  for srv in $order; do run "$srv"; done
done

med() { jq -s "map($2) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end" "$WORK/$1.jsonl"; }
bi=$(med braid .iops); gi=$(med ganesha .iops)
bm=$(med braid .mib_per_s); gm=$(med ganesha .mib_per_s)
bp=$(med braid .latency_us.p99); gp=$(med ganesha .latency_us.p99)
errs=$(jq -s 'map(.errors) | add' "$WORK/braid.jsonl" "$WORK/ganesha.jsonl")
jq -rn --argjson bi "$bi" --argjson gi "$gi" --argjson bm "$bm" --argjson gm "$gm" --argjson bp "$bp" --argjson gp "$gp" --argjson e "$errs" \
  '"ratio braid/ganesha: IOPS \(if $gi > 0 then ($bi / $gi * 100 | round / 100) else "n/a" end)x (\($bi) vs \($gi)), MiB/s \(if $gm > 0 then ($bm / $gm * 100 | round / 100) else "n/a" end)x (\($bm) vs \($gm)), p99 \($bp) vs \($gp) µs, errors \($e)"'
