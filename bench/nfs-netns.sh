#!/usr/bin/env bash
# nfs-netns.sh - the NFSv3 counterpart of bench/netns.sh: Braid and nfs-ganesha (bench/ganesha.sh)
# run in one network namespace, `braid bench` in another, joined by a veth pair whose egress on
# both ends caps every TCP flow at $RATE (an HTB class per client port, as in netns.sh), so one
# NFS connection is limited the way it is on a cloud VM's NIC and only nconnect (more TCP
# connections) gets more bandwidth. Reads are capped on the server's egress, writes on the
# client's. Both servers export a tmpfs directory; every cell runs against both servers back
# to back, the order alternating by round. Cells: 1 MiB sequential reads and writes with
# --nconnect 1 and 8. Prints one TSV line per cell (medians over the rounds):
#   cell  braid_mib_s  ganesha_mib_s  braid/ganesha  braid_n8/n1  ganesha_n8/n1  errors
# (the n8/n1 columns: this cell's MiB/s over the same workload's with nconnect 1; "-" on the
# nconnect 1 rows). Namespaces, veth, qdiscs, both servers and the tmpfs files are removed on
# exit (trap); every bench run is bounded by `timeout`.
#
# usage: bench/nfs-netns.sh [ROUNDS]            (default: $ROUNDS or 2)
# env:   RATE (1gbit) per-flow cap, DELAY (300us, only when the kernel has netem), MTU (1500)
#        FLOW_TEST=0 skips the TCP flow check of the cap (python3, 1 vs 4 flows, ~12 s)
#        DUR (8) WARM (1) THREADS (8) DEPTH (4) FILE_SIZE (256m) BLOCK (1m)
#        BRAID_BIN (target/release/braid, built if missing)
# Needs root, iproute2 (ip, tc), python3, jq, nfs-ganesha and gcc (bench/ganesha.sh).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-${ROUNDS:-2}}"
RATE="${RATE:-1gbit}"
DELAY="${DELAY:-300us}"
MTU="${MTU:-1500}"
FLOW_TEST="${FLOW_TEST:-1}"
DUR="${DUR:-8}" WARM="${WARM:-1}" THREADS="${THREADS:-8}" DEPTH="${DEPTH:-4}"
FILE_SIZE="${FILE_SIZE:-256m}" BLOCK="${BLOCK:-1m}"
TAG=$$
NS_S="braidnfS$TAG"
NS_C="braidnfC$TAG"
VETH_S="bnfs$TAG"
VETH_C="bnfc$TAG"
NET="10.232.$((TAG % 250)).0"
ADDR_S="${NET%.0}.1"
ADDR_C="${NET%.0}.2"
PORT_LO=40960   # client ephemeral ports: PORT_LO .. PORT_LO+255 (low byte 0..255)
# The servers have the namespace to themselves, so fixed ports cannot collide.
BRAID_NFS_PORT=2049 BRAID_SMB_PORT=4645 G_NFS=20490 G_MNT=20491
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "nfs-netns.sh: ROUNDS must be a positive number" >&2; exit 2; }
(( EUID == 0 )) || { echo "nfs-netns.sh: needs root" >&2; exit 2; }
command -v jq >/dev/null || { echo "nfs-netns.sh: jq is needed" >&2; exit 2; }
BIN="${BRAID_BIN:-$REPO/target/release/braid}"
[[ -x "$BIN" ]] || (cd "$REPO" && cargo build --release -q -p braid)
TMP="$(mktemp -d /dev/shm/braid-nfs-netns.XXXXXX)"

BRAID_PID=
teardown() {
  if [[ -n "$BRAID_PID" ]]; then
    kill "$BRAID_PID" 2>/dev/null || true
    wait "$BRAID_PID" 2>/dev/null || true
  fi
  DIR="$TMP/ganesha" "$REPO/bench/ganesha.sh" down >/dev/null 2>&1 || true
  ip netns del "$NS_S" 2>/dev/null || true
  ip netns del "$NS_C" 2>/dev/null || true
  rm -rf "$TMP"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# --- namespaces and per-flow shaping: copied from bench/netns.sh (keep the two in step) ---
have_netem() {
  local ok=1
  ip netns add "braidnfP$TAG"
  ip netns exec "braidnfP$TAG" tc qdisc add dev lo root netem delay 1us 2>/dev/null && ok=0
  ip netns del "braidnfP$TAG"
  return "$ok"
}

# shape NS DEV FIELD: per-flow HTB classes on DEV's egress, flows told apart by the client's
# port (FIELD: dport on the server side, sport on the client side).
shape() {
  local ns=$1 dev=$2 field=$3 mask i root="root"
  if [[ $field == dport ]]; then mask=0x000000ff; else mask=0x00ff0000; fi
  {
    if [[ -n "$NETEM" ]]; then
      echo "qdisc add dev $dev root handle 10: netem delay $DELAY limit 100000"
      root="parent 10:1"
    fi
    echo "qdisc add dev $dev $root handle 1: htb default 2"
    echo "class add dev $dev parent 1: classid 1:1 htb rate 100gbit quantum 200000"
    echo "class add dev $dev parent 1:1 classid 1:2 htb rate 50gbit quantum 200000"
    for i in $(seq 0 255); do
      printf 'class add dev %s parent 1:1 classid 1:%x htb rate %s ceil %s burst 64k cburst 64k quantum 65536\n' \
        "$dev" $((0x100 + i)) "$RATE" "$RATE"
    done
    echo "filter add dev $dev parent 1: prio 1 handle 2: protocol ip u32 divisor 256"
    echo "filter add dev $dev parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask $mask at 20 link 2:"
    for i in $(seq 0 255); do
      printf 'filter add dev %s parent 1: prio 1 protocol ip u32 ht 2:%x: match ip %s %d 0xffff flowid 1:%x\n' \
        "$dev" "$i" "$field" $((PORT_LO + i)) $((0x100 + i))
    done
  } >"$TMP/tc-$dev.batch"
  ip netns exec "$ns" tc -batch "$TMP/tc-$dev.batch"
}

setup() {
  ip netns add "$NS_S"
  ip netns add "$NS_C"
  ip link add "$VETH_S" netns "$NS_S" mtu "$MTU" type veth peer name "$VETH_C" netns "$NS_C" mtu "$MTU"
  ip -n "$NS_S" addr add "$ADDR_S/24" dev "$VETH_S"
  ip -n "$NS_C" addr add "$ADDR_C/24" dev "$VETH_C"
  local ns
  for ns in "$NS_S" "$NS_C"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_S" link set "$VETH_S" up
  ip -n "$NS_C" link set "$VETH_C" up
  ip netns exec "$NS_C" sysctl -qw net.ipv4.ip_local_port_range="$PORT_LO $((PORT_LO + 255))"
  ip netns exec "$NS_C" sysctl -qw net.ipv4.tcp_tw_reuse=1
  shape "$NS_S" "$VETH_S" dport
  shape "$NS_C" "$VETH_C" sport
}

# TCP flow test (python3): N flows for 3 s, direction read (server -> client) or write.
write_flow_py() {
  cat >"$TMP/flow.py" <<'PY'
import socket, sys, threading, time
def serve(port):
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port)); ls.listen(64)
    buf = bytes(1 << 20)
    def one(c):
        try:
            if c.recv(1) == b"r":
                while True: c.sendall(buf)
            else:
                while c.recv(1 << 20): pass
        except OSError: pass
        finally: c.close()
    while True:
        c, _ = ls.accept(); threading.Thread(target=one, args=(c,), daemon=True).start()
def client(host, port, n, d, secs):
    tot = [0] * n; buf = bytes(1 << 20); end = time.time() + secs
    def one(i):
        s = socket.create_connection((host, port)); s.sendall(d[:1].encode())
        while time.time() < end:
            if d == "read":
                k = s.recv(1 << 20)
                if not k: break
                tot[i] += len(k)
            else:
                s.sendall(buf); tot[i] += len(buf)
        s.close()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    [t.start() for t in ts]; [t.join() for t in ts]
    g = [x * 8 / secs / 1e9 for x in tot]
    print(f"FLOWTEST {d} flows={n} total={sum(g):.2f} Gbit/s per-flow=" + ",".join(f"{x:.2f}" for x in g))
if sys.argv[1] == "serve": serve(int(sys.argv[2]))
else: client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], float(sys.argv[6]))
PY
}

flow_check() {
  local flow_pid dir n
  write_flow_py
  ip netns exec "$NS_S" python3 "$TMP/flow.py" serve 4629 &
  flow_pid=$!
  sleep 0.5
  for dir in read write; do
    for n in 1 4; do
      timeout -k 2 20 ip netns exec "$NS_C" python3 "$TMP/flow.py" client "$ADDR_S" 4629 "$n" "$dir" 3 || true
    done
  done
  kill "$flow_pid" 2>/dev/null || true
  wait "$flow_pid" 2>/dev/null || true
}

# --- the two NFS servers, in the server namespace ---
port_open_ns() { ip netns exec "$NS_S" bash -c "(exec 3<>/dev/tcp/$ADDR_S/$1) 2>/dev/null"; }

start_braid() {
  mkdir -p "$TMP/braid" "$TMP/state"
  chmod 0777 "$TMP/braid"
  cat >"$TMP/braid.toml" <<CFG
[server]
listen = ["$ADDR_S:$BRAID_SMB_PORT"]
admin = "off"
nfs_listen = ["$ADDR_S:$BRAID_NFS_PORT"]
nfs_portmapper = "off"
state_dir = "$TMP/state"

[[share]]
name = "data"
path = "$TMP/braid"
read_only = false
nfs = true
nfs_root_squash = false
CFG
  # `ip netns exec` execs braid, so $! is braid itself.
  ip netns exec "$NS_S" "$BIN" serve --config "$TMP/braid.toml" >"$TMP/braid.log" 2>&1 &
  BRAID_PID=$!
  for _ in $(seq 100); do port_open_ns "$BRAID_NFS_PORT" && return 0; sleep 0.1; done
  echo "nfs-netns.sh: braid did not start:" >&2
  tail "$TMP/braid.log" >&2
  exit 1
}

start_ganesha() {
  # the whole of ganesha.sh runs in the namespace, so the daemon it starts stays there.
  ip netns exec "$NS_S" env DIR="$TMP/ganesha" NFS_PORT="$G_NFS" MNT_PORT="$G_MNT" EXPORT=/data \
    BIND_ADDR="$ADDR_S" "$REPO/bench/ganesha.sh" up
}

# --- the cells ---
# name|braid bench flags|nconnect
CELLS=("seq1m-read-n1|-w 0|1" "seq1m-write-n1|-w 100|1" "seq1m-read-n8|-w 0|8" "seq1m-write-n8|-w 100|8")

run() { # server cell flags nconnect -> appends one JSON object to $TMP/<cell>.<server>.jsonl
  local srv=$1 cell=$2 flags=$3 nc=$4 url
  case $srv in
    braid) url="nfs://$ADDR_S:$BRAID_NFS_PORT/data" ;;
    ganesha) url="nfs://$ADDR_S:$G_NFS/data?mountport=$G_MNT" ;;
  esac
  # shellcheck disable=SC2086  # flags is a list
  timeout -k 5 $((DUR + WARM + 120)) ip netns exec "$NS_C" "$BIN" bench -b "$BLOCK" -s $flags --nconnect "$nc" \
    -t "$THREADS" -o "$DEPTH" -c "$FILE_SIZE" -d "$DUR" -W "$WARM" --json "$url" \
    >>"$TMP/$cell.$srv.jsonl" 2>>"$TMP/bench.err" || echo '{"mib_per_s":0,"errors":1}' >>"$TMP/$cell.$srv.jsonl"
  echo "  round $r $cell $srv: $(tail -n 1 "$TMP/$cell.$srv.jsonl" | jq -r '"\(.mib_per_s) MiB/s, errors \(.errors)"')"
}

med() { # file -> median MiB/s over the rounds (0 when missing)
  if [[ -s "$1" ]]; then
    jq -s 'map(.mib_per_s) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end' "$1"
  else echo 0; fi
}

NETEM=""
if have_netem; then NETEM=1; fi
setup
echo "nfs-netns.sh: servers in $NS_S ($ADDR_S), client in $NS_C ($ADDR_C), veth $VETH_S/$VETH_C"
echo "  per-flow cap $RATE on both egresses (HTB class per client port, u32 hash)"
if [[ -n "$NETEM" ]]; then
  echo "  delay $DELAY per direction (netem)"
else
  echo "  no delay added: this kernel has no netem (CONFIG_NET_SCH_NETEM not set)"
fi
[[ "$FLOW_TEST" == 1 ]] && flow_check
start_braid
start_ganesha >/dev/null
echo "  braid nfs://$ADDR_S:$BRAID_NFS_PORT/data  ganesha nfs://$ADDR_S:$G_NFS/data?mountport=$G_MNT  (tmpfs $TMP)"
echo "workload: braid bench -b $BLOCK -s -t $THREADS -o $DEPTH -c $FILE_SIZE -d $DUR -W $WARM, $ROUNDS round(s)"

servers=(braid ganesha)
for r in $(seq "$ROUNDS"); do
  for c in "${CELLS[@]}"; do
    IFS='|' read -r cell flags nc <<<"$c"
    order=("${servers[@]}")
    (( r % 2 == 0 )) && order=(ganesha braid)
    for srv in "${order[@]}"; do run "$srv" "$cell" "$flags" "$nc"; done
  done
done

if [[ -s "$TMP/bench.err" ]] && grep -qiv 'progress' "$TMP/bench.err"; then
  echo "bench stderr (last lines):"; grep -iv 'progress' "$TMP/bench.err" | tail -n 5 || true
fi
printf 'cell\tbraid_mib_s\tganesha_mib_s\tbraid/ganesha\tbraid_n8/n1\tganesha_n8/n1\terrors\n'
for c in "${CELLS[@]}"; do
  IFS='|' read -r cell _ nc <<<"$c"
  b=$(med "$TMP/$cell.braid.jsonl") g=$(med "$TMP/$cell.ganesha.jsonl")
  b1=$(med "$TMP/${cell%-n*}-n1.braid.jsonl") g1=$(med "$TMP/${cell%-n*}-n1.ganesha.jsonl")
  e=$(cat "$TMP/$cell".*.jsonl | jq -s 'map(.errors) | add')
  awk -v c="$cell" -v nc="$nc" -v b="$b" -v g="$g" -v b1="$b1" -v g1="$g1" -v e="$e" '
    function ratio(x, y) { return y > 0 ? sprintf("%.2f", x / y) : "n/a" }
    BEGIN { printf "%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\n", c, b, g, ratio(b, g),
            (nc == 1 ? "-" : ratio(b, b1)), (nc == 1 ? "-" : ratio(g, g1)), e }'
done
echo "qdisc counters after the run (server egress, busiest classes):"
ip netns exec "$NS_S" tc -s class show dev "$VETH_S" |
  awk '/^class htb 1:1[0-9a-f][0-9a-f] /{c=$3} /Sent/{if (c != "") print c, $2, "bytes"; c=""}' | sort -k2 -n -r | head -n 5
