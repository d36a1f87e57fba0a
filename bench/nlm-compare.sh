#!/usr/bin/env bash
# nlm-compare.sh - NLM v4 lock + unlock pairs (`braid bench --nlm-lock`) against Braid and
# against nfs-ganesha (bench/ganesha.sh in its NLM mode), with 1 client and with 8, each cell
# on both servers back to back (the order alternates by round). Prints one line per run and a
# table of medians over the rounds:
#   workload  braid_pairs_s  ganesha_pairs_s  braid/ganesha  braid_p99_us  ganesha_p99_us
#
# ganesha: bench/ganesha.sh with NLM_PORT runs ganesha, rpcbind and rpc.statd (which ganesha
# needs to grant any lock: it SM_MONs each client host) in a network namespace of its own,
# reached through a veth pair: the server is NET.1, this side has the client address NET.2.
# NET is the first 10.233.K (K from 10 up) with no namespace or veth yet, so a run beside
# the NLM tests or another run does not collide. Inside its namespace ganesha has fixed ports
# (NFS 2049, MOUNT 20048, NLM 4045, statd 4046); the bench is given the NLM port.
# Braid: started here, on 127.0.0.1 in this namespace, with free ports, its own NLM and NSM
# (nlm_port, nsm_port), no portmapper, nfs_grace = "1s" and a fresh state_dir (so no grace
# period runs at start). Loopback and not a client-side address of the veth: an address of
# this namespace is local whichever device carries it, so NET.2 would be loopback too; and
# loopback against the veth is fair: both hand each segment to the same per-CPU backlog,
# and with BRAID_NETNS=1 Braid runs in ganesha's namespace on NET.1 instead (the same veth
# path as ganesha) to check that the path does not move the figures.
# Both export tmpfs directories (under /dev/shm); statd's directory is there too.
#
# Before the cells the script checks that each server grants a lock (for Braid, retrying
# while it answers NLM4_DENIED_GRACE_PERIOD); a Braid without NLM fails there.
# Bounded: each run is killed after DUR + WARM + 60 s; ganesha.sh up waits at most ~15 s.
# Cleanup on any exit: Braid (by its pid), `ganesha.sh down` (its daemons by their recorded
# pids, the namespace and the veth pair), the work directory.
#
# usage: bench/nlm-compare.sh [ROUNDS]          (default 1)
# env:   DUR (10) measured seconds per run, WARM (1) warm-up seconds
#        CLIENTS ("1 8") client counts, one cell each
#        ONLY=ganesha  measure ganesha alone (no Braid: its column shows "-")
#        BRAID_NETNS=1 run Braid inside ganesha's namespace, on NET.1 (see above)
#        BRAID_BIN (default: built with `cargo build --release -p braid`)
#        KEEP_JSON=FILE  also append every run's JSON report to FILE
# Needs root, iproute2, util-linux (unshare, nsenter), jq, python3, rpcbind and nfs-common
# (rpc.statd, sm-notify), nfs-ganesha.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-1}"
DUR="${DUR:-10}" WARM="${WARM:-1}" CLIENTS="${CLIENTS:-1 8}" ONLY="${ONLY:-}" BRAID_NETNS="${BRAID_NETNS:-}"
# ganesha's ports, inside its own namespace
G_NFS=2049 G_MNT=20048 G_NLM=4045 G_STATD=4046
die() { echo "nlm-compare.sh: $*" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number"
[[ -z "$ONLY" || "$ONLY" == ganesha ]] || die "ONLY must be empty or ganesha"
(( EUID == 0 )) || die "needs root (ganesha.sh's network namespace)"
for c in jq nsenter ip python3 ganesha.nfsd; do command -v "$c" >/dev/null || die "$c is needed"; done
if [[ -z "${BRAID_BIN:-}" ]]; then
  (cd "$REPO" && cargo build --release -q -p braid)
  BRAID_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/braid"
fi

# A 10.233.K network no namespace or veth uses yet (the names ganesha.sh derives from NET).
NET=
for k in $(seq 10 249); do
  if [[ ! -e "/run/netns/braid-gnlm-$k" && ! -e "/sys/class/net/bgnl${k}c" ]]; then NET="10.233.$k"; break; fi
done
[[ -n "$NET" ]] || die "no free 10.233.K network for ganesha's namespace"
SERVER="$NET.1"

WORK="$(mktemp -d /dev/shm/braid-nlm-compare.XXXXXX)"
G_ENV=(DIR="$WORK/ganesha" NFS_PORT=$G_NFS MNT_PORT=$G_MNT NLM_PORT=$G_NLM STATD_PORT=$G_STATD
       NET="$NET" CLIENTS=1 EXPORT=/data GRACE=0)
BRAID_PID= G_STARTED=
cleanup() {
  # Only what this script started, by pid; Braid first (with BRAID_NETNS it lives in the
  # namespace that `down` removes).
  if [[ -n "$BRAID_PID" ]]; then kill "$BRAID_PID" 2>/dev/null || true; wait "$BRAID_PID" 2>/dev/null || true; fi
  [[ -n "$G_STARTED" ]] && env "${G_ENV[@]}" bash "$REPO/bench/ganesha.sh" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

G_STARTED=1
env "${G_ENV[@]}" timeout 60 bash "$REPO/bench/ganesha.sh" up >"$WORK/ganesha-up.log" 2>&1 ||
  { cat "$WORK/ganesha-up.log" >&2; die "bench/ganesha.sh up (NLM mode) failed"; }
NETNS="$(cat "$WORK/ganesha/netns")"

declare -A URL=([ganesha]="nfs://$SERVER:$G_NFS/data?mountport=$G_MNT")
declare -A NLM_ARGS=([ganesha]="--nlm-port $G_NLM")

bench() { # bench SERVER CLIENTS DUR WARM: one run, its JSON on stdout
  # shellcheck disable=SC2086  # NLM_ARGS is a list of flags
  timeout $(( $3 + $4 + 60 )) "$BRAID_BIN" bench --nlm-lock --clients "$2" ${NLM_ARGS[$1]} -d "$3" -W "$4" --json "${URL[$1]}"
}

# probe SERVER: does it grant a lock? Retries while it is in a grace period.
probe() {
  local err=
  for _ in $(seq 10); do
    if err="$(bench "$1" 1 1 0 2>&1 >/dev/null)"; then return 0; fi
    [[ "$err" == *NLM4_DENIED_GRACE_PERIOD* ]] || break
    sleep 1
  done
  die "$1 does not grant NLM locks (${URL[$1]}): ${err##*error: }"
}
probe ganesha

SERVERS="braid ganesha"
if [[ "$ONLY" == ganesha ]]; then
  SERVERS=ganesha
else
  # Ports free for TCP and UDP on 127.0.0.1 (NLM and NSM answer on both). In ganesha's
  # namespace the same ports are free too: its daemons use fixed low ports and 111.
  read -r B_NFS B_SMB B_NLM B_NSM < <(python3 - <<'PY'
import socket
ports, held = [], []
while len(ports) < 4:
    t = socket.socket(); t.bind(("127.0.0.1", 0)); p = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", p)); ports.append(p)
    except OSError:
        pass
    held += [t, u]
print(*ports)
PY
)
  B_ADDR=127.0.0.1 B_RUN=()
  if [[ -n "$BRAID_NETNS" ]]; then B_ADDR="$SERVER" B_RUN=(nsenter "--net=/run/netns/$NETNS" --); fi
  mkdir -p "$WORK/braid-share" "$WORK/state"
  chmod 0777 "$WORK/braid-share"
  cat >"$WORK/braid.toml" <<CFG
[server]
listen = ["$B_ADDR:$B_SMB"]
admin = "off"
nfs_listen = ["$B_ADDR:$B_NFS"]
# the bench is given the NLM port
nfs_portmapper = "off"
nlm_port = $B_NLM
nsm_port = $B_NSM
nfs_grace = "1s"
state_dir = "$WORK/state"

[[share]]
name = "data"
path = "$WORK/braid-share"
nfs = true
nfs_root_squash = false
CFG
  # nsenter execs Braid, so $! is Braid itself
  "${B_RUN[@]}" "$BRAID_BIN" serve --config "$WORK/braid.toml" </dev/null >"$WORK/braid.log" 2>&1 &
  BRAID_PID=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/$B_ADDR/$B_NFS") 2>/dev/null && break
    kill -0 "$BRAID_PID" 2>/dev/null || break
    sleep 0.1
  done
  if ! (exec 3<>"/dev/tcp/$B_ADDR/$B_NFS") 2>/dev/null; then
    tail -n 5 "$WORK/braid.log" >&2
    grep -qE 'unknown field `(nlm_port|nsm_port|nfs_grace)`' "$WORK/braid.log" &&
      die "this Braid has no NLM service (its config does not know nlm_port, nsm_port or nfs_grace); ONLY=ganesha measures the peer alone"
    die "braid did not start"
  fi
  URL[braid]="nfs://$B_ADDR:$B_NFS/data"
  NLM_ARGS[braid]="--nlm-port $B_NLM"
  probe braid
fi

where="Braid on loopback"
[[ -n "$BRAID_NETNS" ]] && where="Braid at $SERVER in ganesha's namespace"
where+="; ganesha at $SERVER through a veth"
echo "workload: braid bench --nlm-lock --clients N -d $DUR -W $WARM   ($ROUNDS round(s); Braid vs nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null | cut -d- -f1) with rpc.statd; $where; tmpfs)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
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
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

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
