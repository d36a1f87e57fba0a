#!/usr/bin/env bash
# qos-overhead.sh - issue 22's cost of enforcement: one `braid serve` with two shares side by
# side, `unlimited` (no limit keys) and `limited` (every limit key set far above what the
# machine can do: the limiter checks every bucket of every request but never makes one wait),
# and the same `braid bench` workloads against each, alternating A B, B A, ... round by round
# so machine drift hits both alike. Prints one line per run and a markdown table of the
# medians: unlimited vs limited IOPS and MiB/s and their ratio, against the target of 0.97.
#
# usage: bench/qos-overhead.sh [ROUNDS]          (default 3)
# env:   DISK=1       both shares on an ext4 loop image (runs itself under bench/diskfs.sh;
#                     root) instead of tmpfs
#        SHARE_ROOT=DIR  the shares under DIR (set by bench/diskfs.sh; default /dev/shm)
#        PROTO=smb|nfs|both   client protocol(s) (default smb)
#        DUR (10) / WARM (2)   measured / warm-up seconds of every run
#        FILE_SIZE (256m)      the data file of each share (4 files each)
#        ONLY=REGEX   run only the workloads whose name matches (4k-randread, 4k-randwrite,
#                     1m-seqread, 1m-seqwrite)
#        TARGET (0.97) the lowest limited/unlimited ratio that passes
#        OUT=FILE     also append every run's JSON report to FILE
#        BRAID_BIN    server binary (default target/release/braid, built if missing)
#        BENCH_BIN    client binary for `braid bench` (default $BRAID_BIN)
#        PORT (4651: SMB; PORT+1: NFS)
# A build without per-share limits is told apart (`braid check` refuses the keys): both shares
# then run unlimited, so the script can be tried end to end, and the table says so.
# Needs jq.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${DISK:-0}" == 1 && -z "${SHARE_ROOT:-}" ]]; then
  exec env DISK=0 "$REPO/bench/diskfs.sh" -- "$REPO/bench/qos-overhead.sh" "$@"
fi
ROUNDS="${1:-3}"
PROTO="${PROTO:-smb}"
DUR="${DUR:-10}"
WARM="${WARM:-2}"
FILE_SIZE="${FILE_SIZE:-256m}"
ONLY="${ONLY:-.}"
TARGET="${TARGET:-0.97}"
PORT="${PORT:-4651}"
PW=bench-pw-1
die() { echo "qos-overhead.sh: $*" >&2; exit 2; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number"
case "$PROTO" in smb) PROTOS="smb" ;; nfs) PROTOS="nfs" ;; both) PROTOS="smb nfs" ;; *) die "PROTO must be smb, nfs or both" ;; esac
command -v jq >/dev/null || die "jq is needed"

if [[ -z "${BRAID_BIN:-}" ]]; then
  BRAID_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/braid"
  [[ -x "$BRAID_BIN" ]] || (cd "$REPO" && cargo build --release -q -p braid)
fi
BENCH_BIN="${BENCH_BIN:-$BRAID_BIN}"

WORK=/dev/shm/braid-qos-overhead.$$
SHARES="$WORK/shares"
[[ -n "${SHARE_ROOT:-}" ]] && SHARES="$SHARE_ROOT/braid-qos-overhead.$$"
mkdir -p "$WORK/state" "$SHARES/unlimited" "$SHARES/limited"
chmod 0777 "$SHARES/unlimited" "$SHARES/limited"
SERVER_PID=
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK" "$SHARES"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Far above this machine: 10 million IOPS (bursting to 20 million), 100 GiB/s each way.
LIMITS='iops = 10000000
burst_iops = 20000000
burst_seconds = 3600
throughput = "100GiB"
ingress = "100GiB"
egress = "100GiB"
max_file_iops = 10000000
max_file_throughput = "100GiB"'
write_config() {   # $1: the limited share's keys
  cat >"$WORK/braid.toml" <<CFG
[server]
listen = ["127.0.0.1:$PORT"]
admin = "off"
nfs_listen = ["127.0.0.1:$((PORT + 1))"]
nfs_portmapper = "off"
state_dir = "$WORK/state"

[[share]]
name = "unlimited"
path = "$SHARES/unlimited"
nfs = true
nfs_root_squash = false

[[share]]
name = "limited"
path = "$SHARES/limited"
nfs = true
nfs_root_squash = false
$1
CFG
}
write_config "$LIMITS"
ENFORCED=1
if ! "$BRAID_BIN" check --config "$WORK/braid.toml" >"$WORK/check.txt" 2>&1; then
  grep -q "unknown field" "$WORK/check.txt" || { cat "$WORK/check.txt" >&2; die "braid check refused the configuration"; }
  echo "NOTE: $BRAID_BIN has no per-share limits (its config refuses the keys): both shares run unlimited"
  ENFORCED=0
  write_config ""
fi
printf '%s\n' "$PW" | "$BRAID_BIN" user add alice --config "$WORK/braid.toml" --password-stdin >/dev/null
"$BRAID_BIN" serve --config "$WORK/braid.toml" >"$WORK/braid.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || { tail "$WORK/braid.log" >&2; die "braid did not start"; }

url() {   # $1: proto, $2: share
  if [[ $1 == smb ]]; then echo "smb://alice:$PW@127.0.0.1:$PORT/$2"; else echo "nfs://127.0.0.1:$((PORT + 1))/$2"; fi
}
# Workloads: NAME|FLAGS. 4 files per share so the per-file limits are checked on several files.
WORKLOADS=("4k-randread|-b 4k -r -w 0 -t 4 -o 8"
           "4k-randwrite|-b 4k -r -w 100 -t 4 -o 8"
           "1m-seqread|-b 1m -s -w 0 -t 2 -o 4"
           "1m-seqwrite|-b 1m -s -w 100 -t 2 -o 4")
COMMON="-f 4 -c $FILE_SIZE -d $DUR -W $WARM"
where="tmpfs"
[[ -n "${SHARE_ROOT:-}" ]] && where="$(df --output=fstype "$SHARES" | tail -n 1) ($SHARE_ROOT)"
echo "shares on $where; $ROUNDS round(s) of ${DUR}s (+${WARM}s warm-up) per run; braid bench $COMMON"

run() {   # $1: proto, $2: workload name, $3: flags, $4: share
  local json
  # shellcheck disable=SC2086  # flags are lists
  json="$("$BENCH_BIN" bench $3 $COMMON --json "$(url "$1" "$4")" 2>"$WORK/bench.err")" || { cat "$WORK/bench.err" >&2; die "bench failed"; }
  echo "$json" >>"$WORK/$1-$2-$4.jsonl"
  [[ -n "${OUT:-}" ]] && jq -c --arg s "$4" '. + {share: $s}' <<<"$json" >>"$OUT"
  jq -r --arg p "$1" --arg w "$2" --arg s "$4" \
    '"\($p)\t\($w)\t\($s)\tIOPS \(.iops)\tMiB/s \(.mib_per_s)\tp99 \(.latency_us.p99) µs\terrors \(.errors)"' <<<"$json"
}

for proto in $PROTOS; do
  for r in $(seq "$ROUNDS"); do
    for w in "${WORKLOADS[@]}"; do
      name="${w%%|*}"
      [[ "$name" =~ $ONLY ]] || continue
      if (( r % 2 )); then order="unlimited limited"; else order="limited unlimited"; fi
      for share in $order; do run "$proto" "$name" "${w#*|}" "$share"; done
    done
  done
done

spread() { jq -s 'map(.iops) | sort | if .[length / 2 | floor] > 0 then (.[-1] - .[0]) / .[length / 2 | floor] else 0 end' "$1"; }
med() { jq -s "map($2) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end" "$1"; }
echo
if [[ $ENFORCED == 0 ]]; then echo "**Not enforced by this build: both shares ran unlimited.**"; echo; fi
echo "| protocol | workload | unlimited IOPS | limited IOPS | unlimited MiB/s | limited MiB/s | ratio | ≥ $TARGET | run-to-run spread |"
echo "|---|---|---:|---:|---:|---:|---:|:---:|---:|"
fails=0
for proto in $PROTOS; do
  for w in "${WORKLOADS[@]}"; do
    name="${w%%|*}"
    [[ -f "$WORK/$proto-$name-unlimited.jsonl" ]] || continue
    ui=$(med "$WORK/$proto-$name-unlimited.jsonl" .iops); li=$(med "$WORK/$proto-$name-limited.jsonl" .iops)
    um=$(med "$WORK/$proto-$name-unlimited.jsonl" .mib_per_s); lm=$(med "$WORK/$proto-$name-limited.jsonl" .mib_per_s)
    ratio=$(jq -rn --argjson u "$ui" --argjson l "$li" 'if $u > 0 then ($l / $u * 1000 | round / 1000) else 0 end')
    ok=$(jq -rn --argjson r "$ratio" --argjson t "$TARGET" 'if $r >= $t then "yes" else "no" end')
    [[ $ok == yes ]] || fails=$((fails + 1))
    # how far runs of one share differ ((max - min) / median, the larger of the two shares'):
    # a ratio off by less than this is within the machine's noise
    spread=$(jq -rn --argjson a "$(spread "$WORK/$proto-$name-unlimited.jsonl")" --argjson b "$(spread "$WORK/$proto-$name-limited.jsonl")" \
      '[$a, $b] | max * 100 | round')
    printf '| %s | %s | %.0f | %.0f | %.1f | %.1f | %.3f | %s | %s%% |\n' "$proto" "$name" "$ui" "$li" "$um" "$lm" "$ratio" "$ok" "$spread"
  done
done
echo
echo "RESULT: $fails workload(s) below $TARGET (medians of $ROUNDS round(s); ratio = limited / unlimited IOPS, the same as MiB/s at a fixed block size)"
