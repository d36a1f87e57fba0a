#!/usr/bin/env bash
# multichannel.sh - issue 5: SMB 3 multichannel, channels 1 vs 4 (and 8, 16 for sequential
# reads), Braid vs the Samba peer, with `braid bench` as the client. Workload shapes follow
# the reference documents (Azure Files: diskspd, 10 files, 8 threads, QD 8; ANF: 1/4/8/16
# connections): multi-threaded/multi-file, multi-threaded/single file, single-threaded.
# Each cell runs Braid and Samba back to back (order alternating by round) so machine drift
# hits both alike; figures are medians over the rounds (with 2 rounds: the mean), and every
# ratio compares runs of the same invocation.
#
# usage: bench/multichannel.sh [ROUNDS]          (default 2)
# env:   BRAID_BIN   server binary (default target/release/braid, built if missing)
#        BENCH_BIN   client binary for `braid bench` (default $BRAID_BIN)
#        BRAID_PORT (4611), SAMBA_PORT (4612), ADMIN_PORT (4613: Braid's `braid status`)
#        DUR (5) / WARM (1)   measured / warm-up seconds of every cell
#        FILE_SIZE (64m)      size of each of the 10 data files (tmpfs)
#        MATRIX=loopback|netns|crypto   the cell list (netns: what bench/netns.sh runs;
#                             crypto: issue 3's plain/signed/encrypted 1 MiB cells)
#        ONLY=REGEX           run only cells whose "group/workload" matches REGEX
#        CHANNELS="4"         run only these channel counts of each cell
#        OUT=FILE             also append every run's figures to FILE (JSON lines)
#        SUMMARY_ONLY=FILE    print only the table and RESULT lines of such a FILE (no runs)
#        LISTEN_ADDR (127.0.0.1), NETNS (servers' namespace), CLIENT_NS (client's namespace)
#                             set by bench/netns.sh
#        SHARE_ROOT=DIR       both servers' shares (the data files) under DIR instead of
#                             /dev/shm, e.g. a disk file system (bench/diskfs.sh)
#        DROP_CACHES=1        drop the page cache before every run (with SHARE_ROOT on a disk
#                             and WARM=0 the first pass over the files reads the disk); root
# "per server CPU-s": the figure divided by the server's CPU time for the run (Braid's process,
# Samba's smbd and its children), Braid over Samba: work per CPU, which is what a 2-core
# machine shared by client and server caps.
# Output: one line per run, a CHECK section (channels really used: Braid's `braid status`
# bytes per channel, Samba's established TCP connections), a table and RESULT lines.
# Shares and state live under /dev/shm unless SHARE_ROOT is set. Needs root (Samba peer), jq
# and ss.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-2}"
BRAID_PORT="${BRAID_PORT:-4611}"
SAMBA_PORT="${SAMBA_PORT:-4612}"
ADMIN_PORT="${ADMIN_PORT:-4613}"
DUR="${DUR:-5}"
WARM="${WARM:-1}"
FILE_SIZE="${FILE_SIZE:-64m}"
MATRIX="${MATRIX:-loopback}"
ONLY="${ONLY:-.}"
LISTEN_ADDR="${LISTEN_ADDR:-127.0.0.1}"
CLIENT_NS="${CLIENT_NS:-}"
WORK=/dev/shm/braidmc-bench.$$
PW=bench-pw-1
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "multichannel.sh: ROUNDS must be a positive number" >&2; exit 2; }
command -v jq >/dev/null || { echo "multichannel.sh: jq is needed" >&2; exit 2; }
command -v ss >/dev/null || { echo "multichannel.sh: ss (iproute2) is needed" >&2; exit 2; }
command -v bc >/dev/null || { echo "multichannel.sh: bc is needed" >&2; exit 2; }

if [[ -z "${BRAID_BIN:-}" ]]; then
  BRAID_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/braid"
  [[ -x "$BRAID_BIN" ]] || (cd "$REPO" && cargo build --release -q -p braid)
fi
BENCH_BIN="${BENCH_BIN:-$BRAID_BIN}"

# Cells: GROUP WORKLOAD "FLAGS" "CHANNEL COUNTS". 4K cells are compared in IOPS, the others
# in MiB/s.
MTMF="-t 8 -o 8 -f 10"   # multi-threaded, multiple files (Azure: diskspd -t8 -o8, 10 files)
MTSF="-t 8 -o 8 -f 1"    # multi-threaded, single file
ST="-t 1 -o 1 -f 1"      # single-threaded, one I/O in flight
CELLS=()
case "$MATRIX" in
  loopback)
    for g in mtmf mtsf; do
      # 8 and 16 channels (as ANF measured) for the multi-file sequential reads only
      if [[ $g == mtmf ]]; then f=$MTMF; reads="1 4 8 16"; else f=$MTSF; reads="1 4"; fi
      CELLS+=("$g 4k-randread|$f -b 4k -r -w 0|1 4"
              "$g 4k-randwrite|$f -b 4k -r -w 100|1 4"
              "$g 64k-seqread|$f -b 64k -s -w 0|$reads"
              "$g 64k-seqwrite|$f -b 64k -s -w 100|1 4"
              "$g 1m-seqread|$f -b 1m -s -w 0|$reads"
              "$g 1m-seqwrite|$f -b 1m -s -w 100|1 4")
    done
    # single thread, one I/O in flight: where the reference documents expect ~10% loss
    CELLS+=("st 4k-randread|$ST -b 4k -r -w 0|1 4"
            "st 4k-randwrite|$ST -b 4k -r -w 100|1 4"
            "st 64k-seqread|$ST -b 64k -s -w 0|1 4"
            "st 1m-seqread|$ST -b 1m -s -w 0|1 4")
    ;;
  netns)
    CELLS=("mtmf 1m-seqread|$MTMF -b 1m -s -w 0|1 4 8"
           "mtmf 1m-seqwrite|$MTMF -b 1m -s -w 100|1 4"
           "mtmf 64k-seqread|$MTMF -b 64k -s -w 0|1 4 8"
           "mtmf 64k-seqwrite|$MTMF -b 64k -s -w 100|1 4"
           "mtmf 4k-randread|$MTMF -b 4k -r -w 0|1 4"
           "st 4k-randread|$ST -b 4k -r -w 0|1 4")
    ;;
  crypto)
    # issue 3's workload (1 MiB sequential, 4 threads x QD 4, one file, one connection) in
    # each mode; run it with FILE_SIZE=1g. Through bench/netns.sh this is the reference's
    # own setting: one connection on a link that is slower than the CPUs.
    for m in "plain:" "signed:--sign" "aes128gcm:--encrypt --cipher aes-128-gcm" "aes256gcm:--encrypt --cipher aes-256-gcm"; do
      CELLS+=("issue3 1m-seqread-${m%%:*}|-t 4 -o 4 -f 1 -b 1m -s -w 0 ${m#*:}|1"
              "issue3 1m-seqwrite-${m%%:*}|-t 4 -o 4 -f 1 -b 1m -s -w 100 ${m#*:}|1")
    done
    ;;
  *) echo "multichannel.sh: MATRIX must be loopback, netns or crypto" >&2; exit 2 ;;
esac

# Medians per server/cell/channels; the figure is IOPS for 4K cells, MiB/s otherwise.
summary() {
jq -rs '
  def med: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def r2: if . == null then "n/a" else (. * 100 | round / 100) end;
  def rx: if . == null then "n/a" else "\(. * 100 | round / 100)x" end;
  def ratio($a; $b): if $a == null or $b == null or $b == 0 then null else $a / $b end;
  def fig: if (.wl | startswith("4k")) then .iops else .mib_per_s end;
  (group_by([.grp, .wl, .ch, .srv]) | map({grp: .[0].grp, wl: .[0].wl, ch: .[0].ch, srv: .[0].srv, v: (map(fig) | med), scpu: (map(.srv_cpu // null) | if any(. == null) then null else med end), n: length})) as $m
  | def get($g; $w; $c; $s): ($m | map(select(.grp == $g and .wl == $w and .ch == $c and .srv == $s)) | .[0].v);
    def eff($g; $w; $c; $s): ($m | map(select(.grp == $g and .wl == $w and .ch == $c and .srv == $s)) | .[0] | if .scpu == null or .scpu == 0 then null else .v / .scpu end);
  ($m | map([.grp, .wl, .ch]) | unique | sort_by(.[0] != "mtmf", .[0] != "mtsf", .[1], .[2])) as $cells
  | ["| group | workload | ch | unit | Braid | Samba | Braid/Samba | Braid ch/1ch | Samba ch/1ch | Braid/Samba per server CPU-s |", "|---|---|---|---|---|---|---|---|---|---|"]
    + ($cells | map(. as [$g, $w, $c]
        | (if ($w | startswith("4k")) then "IOPS" else "MiB/s" end) as $u
        | get($g; $w; $c; "braid") as $b | get($g; $w; $c; "samba") as $s
        | "| \($g) | \($w) | \($c) | \($u) | \($b | if . == null then "n/a" else round end) | \($s | if . == null then "n/a" else round end) | \(ratio($b; $s) | rx) | \(ratio($b; get($g; $w; 1; "braid")) | rx) | \(ratio($s; get($g; $w; 1; "samba")) | rx) | \(ratio(eff($g; $w; $c; "braid"); eff($g; $w; $c; "samba")) | rx) |"))
    + ($cells | map(. as [$g, $w, $c]
        | get($g; $w; $c; "braid") as $b | get($g; $w; $c; "samba") as $s
        | "RESULT \($g) \($w) ch=\($c) braid=\($b | r2) samba=\($s | r2) \(if ($w | startswith("4k")) then "IOPS" else "MiB/s" end) braid/samba=\(ratio($b; $s) | rx) braid_vs_1ch=\(ratio($b; get($g; $w; 1; "braid")) | rx) samba_vs_1ch=\(ratio($s; get($g; $w; 1; "samba")) | rx) cpu_efficiency_braid/samba=\(ratio(eff($g; $w; $c; "braid"); eff($g; $w; $c; "samba")) | rx)"))
  | .[]' "$1"
}
if [[ -n "${SUMMARY_ONLY:-}" ]]; then summary "$SUMMARY_ONLY"; exit 0; fi

# shellcheck source=bench/peers.sh
source "$REPO/bench/peers.sh"
start_peers
: >"$WORK/runs.jsonl"

in_client_ns() {
  if [[ -n "$CLIENT_NS" ]]; then ip netns exec "$CLIENT_NS" "$@"; else "$@"; fi
}
declare -A PORT=([braid]="$BRAID_PORT" [samba]="$SAMBA_PORT")
url() { echo "smb://alice@$LISTEN_ADDR:${PORT[$1]}/data"; }
export BRAID_BENCH_PASSWORD="$PW"

echo "multichannel.sh: matrix $MATRIX, $ROUNDS round(s), -d $DUR -W $WARM, files of $FILE_SIZE"
echo "  server $BRAID_BIN  client $BENCH_BIN"
echo "  Braid $LISTEN_ADDR:$BRAID_PORT  Samba $LISTEN_ADDR:$SAMBA_PORT${NETNS:+  (servers in netns $NETNS, client in ${CLIENT_NS:-the root namespace})}"
echo "  $(uname -r), $(nproc) CPUs, $(smbd --version), load: $(uptime | sed 's/.*load average: //')"
echo "  shares: $BRAID_SHARE (Braid), $SAMBA_DATA (Samba), $(stat -f -c %T "$BRAID_SHARE")${DROP_CACHES:+, DROP_CACHES=$DROP_CACHES}"

# CPU seconds (user + system) a server has used so far: Braid's process; Samba's main smbd
# plus its reaped children (each client connection is served by a forked smbd).
TICKS=$(getconf CLK_TCK)
server_cpu() {
  local pid f
  if [[ $1 == braid ]]; then pid=$BRAID_PID; else pid=$(cat "$WORK/samba/smbd.pid" 2>/dev/null || echo 0); fi
  read -ra f <"/proc/$pid/stat" 2>/dev/null || { echo 0; return; }
  # fields 14-17 (utime stime cutime cstime); the comm field has no spaces here
  echo "scale=2; (${f[13]} + ${f[14]} + ${f[15]} + ${f[16]}) / $TICKS" | bc
}

# One run: SERVER GROUP WORKLOAD CHANNELS ROUND FLAGS...
run() {
  local srv=$1 grp=$2 wl=$3 ch=$4 r=$5 json c0 c1
  shift 5
  drop_caches_if_asked
  c0=$(server_cpu "$srv")
  if ! json="$(in_client_ns "$BENCH_BIN" bench "$@" -c "$FILE_SIZE" -d "$DUR" -W "$WARM" --channels "$ch" --json "$(url "$srv")")"; then
    echo "run failed: $srv $grp/$wl ch=$ch" >&2
    return 0
  fi
  sleep 0.2   # let Samba reap the connection's smbd so its CPU time is counted
  c1=$(server_cpu "$srv")
  # srv_cpu covers warm-up and set-up too (the whole run), so it is compared per byte moved
  jq -c --arg s "$srv" --arg g "$grp" --arg w "$wl" --argjson c "$ch" --argjson r "$r" --argjson sc "$(echo "$c1 - $c0" | bc)" \
    '{srv: $s, grp: $g, wl: $w, ch: $c, round: $r, iops, mib_per_s, cpu_seconds, srv_cpu: $sc, errors, p50: .latency_us.p50, p99: .latency_us.p99}' \
    <<<"$json" | tee -a "$WORK/runs.jsonl" >/dev/null
  [[ -n "${OUT:-}" ]] && tail -n 1 "$WORK/runs.jsonl" >>"$OUT"
  jq -r '"  \(.srv)\t\(.grp)/\(.wl)\tch=\(.ch)\tIOPS \(.iops)\tMiB/s \(.mib_per_s)\tp50 \(.p50) µs\tclient CPU \(.cpu_seconds) s\tserver CPU \(.srv_cpu) s (whole run)\terrors \(.errors)"' <<<"$(tail -n 1 "$WORK/runs.jsonl")"
}

# Are the channels real? One 4-channel 1 MiB read per server (the first run also lays down
# the data files), sampled every half second while it runs: each server's established TCP
# connections and, for Braid, `braid status` (bytes per channel; the last sample is shown).
check_channels() {
  local srv pid conns max
  echo "CHECK channels (4-channel 1M sequential read, 8 threads x QD 8, 10 files):"
  for srv in braid samba; do
    # shellcheck disable=SC2086  # MTMF is a list of flags
    in_client_ns "$BENCH_BIN" bench $MTMF -b 1m -s -w 0 -c "$FILE_SIZE" -d 3 -W 0 --channels 4 --json "$(url "$srv")" >"$WORK/check-$srv.json" &
    pid=$!
    max=0
    echo '{}' >"$WORK/status.json"
    while kill -0 "$pid" 2>/dev/null; do
      conns=$(in_ns ss -Htn state established "( sport = :${PORT[$srv]} )" | wc -l)
      (( conns > max )) && max=$conns
      if [[ $srv == braid ]] && in_ns "$BRAID_BIN" status --admin "127.0.0.1:$ADMIN_PORT" --json >"$WORK/status.new" 2>/dev/null \
         && jq -e '.sessions | length > 0' "$WORK/status.new" >/dev/null 2>&1; then
        mv "$WORK/status.new" "$WORK/status.json"
      fi
      sleep 0.5
    done
    wait "$pid" || true
    echo "CHECK $srv: bench reports channels=$(jq '.channels' "$WORK/check-$srv.json") MiB/s=$(jq '.mib_per_s' "$WORK/check-$srv.json") errors=$(jq '.errors' "$WORK/check-$srv.json"); at most $max established TCP connection(s) to the server"
    if [[ $srv == braid ]]; then
      echo "CHECK braid status: $(jq -c '[.sessions[]? | {channels: (.channels | length), bytes_out_per_channel: [.channels[] | .bytes_out], bytes_in_per_channel: [.channels[] | .bytes_in]}]' "$WORK/status.json")"
    fi
  done
}
# (the crypto cells use one channel and a 1 GiB file: ten of those would not fit the check)
[[ $MATRIX == crypto ]] || check_channels

for r in $(seq "$ROUNDS"); do
  if (( r % 2 )); then order="braid samba"; else order="samba braid"; fi
  for cell in "${CELLS[@]}"; do
    IFS='|' read -r gw flags chs <<<"$cell"
    read -r grp wl <<<"$gw"
    [[ "$grp/$wl" =~ $ONLY ]] || continue
    for ch in $chs; do
      [[ -z "${CHANNELS:-}" || " $CHANNELS " == *" $ch "* ]] || continue
      for srv in $order; do
        # shellcheck disable=SC2086  # flags is a list
        run "$srv" "$grp" "$wl" "$ch" "$r" $flags
      done
    done
  done
  echo "  (round $r done, load: $(uptime | sed 's/.*load average: //'))"
done

summary "$WORK/runs.jsonl"
errs=$(jq -s 'map(.errors) | add // 0' "$WORK/runs.jsonl")
echo "errors over all runs: $errs; load at the end: $(uptime | sed 's/.*load average: //')"
