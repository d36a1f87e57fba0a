#!/usr/bin/env bash
# qos-burst.sh - issue 22's burst chart: a share provisioned with a baseline, a burst rate and
# a credit bucket (default iops = 500, burst_iops = 2000, burst_seconds = 10), driven by
# `braid bench --timeline` far above the burst rate. The first run bursts until the bucket is
# empty, then holds the baseline; the share then idles, refilling its credits at the baseline
# rate; a second run bursts again for as long as the refill allows. Both runs' per-second
# IOPS and MiB/s are joined (idle seconds as zeros) into one CSV and drawn by
# `braid bench chart`, as in the Azure Files bursting charts.
#
# usage: bench/qos-burst.sh
# env:   IOPS (500), BURST_IOPS (2000), BURST_SECONDS (10)   the share's limits
#        RUN1 (40) / IDLE (20) / RUN2 (20)   seconds of the first run, the pause, the second run
#        BENCH_ARGS   workload flags (default "-b 4k -r -t 2 -o 8": 4 KiB reads, one IO each)
#        PROTO=smb|nfs  the client protocol (default smb; the limit is the share's either way)
#        OUT=DIR      where qos-burst.csv, qos-burst.png and the runs' CSVs go
#                     (default target/qos-burst; docs/img for the documentation)
#        BRAID_BIN    server binary (default target/release/braid, built if missing)
#        BENCH_BIN    client binary for `braid bench` (default $BRAID_BIN)
#        PORT (4641: SMB; PORT+1: NFS)
# Output: the files, then the observed burst length and rates of each run next to what the
# credit rule predicts: a full bucket of (BURST_IOPS - IOPS) x BURST_SECONDS credits drains at
# (rate - IOPS) per second; idle, it refills at IOPS per second.
# A build without per-share limits is told apart (`braid check` refuses the keys): the runs
# then go unthrottled, so the script can be tried end to end, and say so.
# Shares and state live under /dev/shm. Needs jq and awk.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IOPS="${IOPS:-500}"
BURST_IOPS="${BURST_IOPS:-2000}"
BURST_SECONDS="${BURST_SECONDS:-10}"
RUN1="${RUN1:-40}"
IDLE="${IDLE:-20}"
RUN2="${RUN2:-20}"
BENCH_ARGS="${BENCH_ARGS:--b 4k -r -t 2 -o 8}"
PROTO="${PROTO:-smb}"
PORT="${PORT:-4641}"
OUT="${OUT:-$REPO/target/qos-burst}"
WORK=/dev/shm/braid-qos-burst.$$
PW=bench-pw-1
die() { echo "qos-burst.sh: $*" >&2; exit 2; }
for v in IOPS BURST_IOPS BURST_SECONDS RUN1 IDLE RUN2 PORT; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a whole number"
done
(( BURST_IOPS > IOPS && RUN1 > 0 && RUN2 > 0 )) || die "need BURST_IOPS > IOPS and RUN1, RUN2 > 0"
[[ "$PROTO" == smb || "$PROTO" == nfs ]] || die "PROTO must be smb or nfs"
command -v jq >/dev/null || die "jq is needed"

if [[ -z "${BRAID_BIN:-}" ]]; then
  BRAID_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/braid"
  [[ -x "$BRAID_BIN" ]] || (cd "$REPO" && cargo build --release -q -p braid)
fi
BENCH_BIN="${BENCH_BIN:-$BRAID_BIN}"
"$BENCH_BIN" bench --help | grep -q -- --timeline || die "$BENCH_BIN has no 'braid bench --timeline'"

mkdir -p "$WORK/share" "$WORK/state" "$OUT"
chmod 0777 "$WORK/share"
SERVER_PID=
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

write_config() {   # $1: the share's limit keys
  cat >"$WORK/braid.toml" <<CFG
[server]
listen = ["127.0.0.1:$PORT"]
admin = "off"
nfs_listen = ["127.0.0.1:$((PORT + 1))"]
nfs_portmapper = "off"
state_dir = "$WORK/state"

[[share]]
name = "burst"
path = "$WORK/share"
nfs = true
nfs_root_squash = false
$1
CFG
}
LIMITS="iops = $IOPS
burst_iops = $BURST_IOPS
burst_seconds = $BURST_SECONDS"
write_config "$LIMITS"
ENFORCED=1
if ! "$BRAID_BIN" check --config "$WORK/braid.toml" >"$WORK/check.txt" 2>&1; then
  grep -q "unknown field" "$WORK/check.txt" || { cat "$WORK/check.txt" >&2; die "braid check refused the configuration"; }
  echo "NOTE: $BRAID_BIN has no per-share limits (its config refuses iops/burst_iops): the runs go unthrottled"
  ENFORCED=0
  write_config ""
fi
printf '%s\n' "$PW" | "$BRAID_BIN" user add alice --config "$WORK/braid.toml" --password-stdin >/dev/null
# The data file is laid down here, not by the first run, so preparing it spends no credits.
mkdir -p "$WORK/share/braid-bench"
head -c 64M /dev/urandom >"$WORK/share/braid-bench/file0.dat"
chmod -R a+rwX "$WORK/share"
"$BRAID_BIN" serve --config "$WORK/braid.toml" >"$WORK/braid.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || { tail "$WORK/braid.log" >&2; die "braid did not start"; }
if [[ $PROTO == smb ]]; then URL="smb://alice:$PW@127.0.0.1:$PORT/burst"; else URL="nfs://127.0.0.1:$((PORT + 1))/burst"; fi

CREDITS=$(( (BURST_IOPS - IOPS) * BURST_SECONDS ))
echo "share: iops $IOPS, burst_iops $BURST_IOPS, burst_seconds $BURST_SECONDS ($CREDITS credits);" \
  "workload: braid bench $BENCH_ARGS ($PROTO); ${RUN1}s, ${IDLE}s idle, ${RUN2}s"

run() {   # $1: name, $2: seconds
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
  "$BENCH_BIN" bench $BENCH_ARGS -c 64m -d "$2" --timeline "$OUT/qos-burst-$1.csv" --json "$URL" 2>/dev/null >"$WORK/$1.json"
  jq -r --arg n "$1" '"\($n): \(.elapsed_s) s, \(.ops) IOs, IOPS \(.iops), MiB/s \(.mib_per_s), errors \(.errors)"' "$WORK/$1.json"
}
t0=$(date +%s.%N)
run run1 "$RUN1"
t1=$(date +%s.%N)
sleep "$IDLE"
t2=$(date +%s.%N)
run run2 "$RUN2"

# One timeline: run 2 starts where the wall clock says it did (the gap is the idle time plus
# the second client's start), idle seconds as zeros.
offset=$(awk -v a="$t0" -v b="$t2" 'BEGIN { printf "%d", b - a + 0.5 }')
{
  head -n 1 "$OUT/qos-burst-run1.csv"
  tail -n +2 "$OUT/qos-burst-run1.csv"
  for ((s = RUN1; s < offset; s++)); do echo "$s,0,0,0,0,0,0"; done
  tail -n +2 "$OUT/qos-burst-run2.csv" | awk -F, -v OFS=, -v o="$offset" '{ $1 = $1 + o; print }'
} >"$OUT/qos-burst.csv"
title="Burst and refill: iops $IOPS, burst_iops $BURST_IOPS, burst_seconds $BURST_SECONDS"
[[ $ENFORCED == 1 ]] || title="$title (NOT ENFORCED by this build)"
"$BENCH_BIN" bench chart --out "$OUT/qos-burst.png" --title "$title" --iops-marks "$IOPS,$BURST_IOPS" \
  --subtitle "braid bench $BENCH_ARGS over $PROTO: ${RUN1}s, idle $(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.0f", b - a }')s, ${RUN2}s" \
  "$OUT/qos-burst.csv" 2>/dev/null
echo "wrote $OUT/qos-burst.csv and $OUT/qos-burst.png (runs: qos-burst-run1.csv, qos-burst-run2.csv)"

# Burst length: the leading seconds above the midpoint of baseline and burst rate (the first
# second of the second run may straddle its start, so it is judged like the others).
mid=$(( (IOPS + BURST_IOPS) / 2 ))
observe() {   # $1: csv, $2: predicted burst seconds
  awk -F, -v mid="$mid" -v pred="$2" -v base="$IOPS" '
    NR == 1 { next }
    { n++; v[n] = $2 }
    END {
      b = 0; while (b < n && v[b + 1] > mid) b++
      for (i = 1; i <= b; i++) bs += v[i]
      # after the burst, without the second it ended in
      for (i = (b ? b + 2 : 1); i <= n; i++) { rs += v[i]; rn++ }
      printf "burst %d s (predicted %.1f s) at %.0f IOPS; then %.0f IOPS (baseline %d)\n",
        b, pred, b ? bs / b : 0, rn ? rs / rn : 0, base
    }' "$1"
}
# Predicted from the measured rate of the burst seconds (the workload may not reach BURST_IOPS).
rate1=$(awk -F, -v mid="$mid" 'NR > 1 && $2 > mid { s += $2; n++ } END { print n ? s / n : 0 }' "$OUT/qos-burst-run1.csv")
rate1=$(awk -v r="$rate1" -v b="$BURST_IOPS" 'BEGIN { print (r > b ? b : r) }')
pred1=$(awk -v c="$CREDITS" -v r="$rate1" -v i="$IOPS" 'BEGIN { print (r > i ? c / (r - i) : 0) }')
idle=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
refill=$(awk -v c="$CREDITS" -v i="$IOPS" -v s="$idle" 'BEGIN { r = i * s; print (r < c ? r : c) }')
pred2=$(awk -v c="$refill" -v r="$rate1" -v i="$IOPS" 'BEGIN { print (r > i ? c / (r - i) : 0) }')
echo "run 1: $(observe "$OUT/qos-burst-run1.csv" "$pred1")"
echo "run 2 (after ${idle%.*} s idle, $(printf '%.0f' "$refill") credits back): $(observe "$OUT/qos-burst-run2.csv" "$pred2")"
[[ $ENFORCED == 1 ]] || echo "NOTE: limits not enforced by this build: the figures above are the unthrottled rates"
