#!/usr/bin/env bash
# netns.sh - issue 5 through a network that behaves like a cloud NIC: the servers (Braid and
# the Samba peer) run in one network namespace, `braid bench` in another, joined by a veth
# pair whose egress on both ends caps every TCP flow at $RATE, so one TCP connection is
# limited the way it is in a VM and only more channels (connections) get more bandwidth.
# Reads are capped on the server's egress, writes on the client's.
#
# The kernel of the benchmark VM has neither `fq` (maxrate) nor `netem` (CONFIG_NET_SCH_FQ
# and CONFIG_NET_SCH_NETEM are not set; HTB, TBF and the u32 classifier are), so:
#  - per-flow cap: an HTB class per flow at $RATE. The client namespace's ephemeral ports are
#    restricted to 256 ports 40960..41215, and a u32 hash table keyed on the low byte of the
#    client port puts every connection in its own class (no two flows share a class).
#  - delay: when the kernel has netem (checked at start) DELAY is added on both ends as the
#    parent of the HTB tree; otherwise the script says so and runs without extra delay.
# Before the matrix a TCP flow test (python3, 1 vs 4 flows, both directions) checks the cap.
# Namespaces, veth and qdiscs are removed on exit (trap).
#
# usage: bench/netns.sh [ROUNDS]                (default 2)
# env:   RATE (1gbit) per-flow cap, DELAY (300us, only with netem), FLOW_TEST=0 skips the check
#        MTU (1500) of the veth pair; BRAID_EXTRA: more [server] lines for Braid (bench/peers.sh)
#        MATRIX (netns): bench/multichannel.sh's cell list; crypto = issue 3's modes
#        BRAID_BIN, BENCH_BIN, DUR, WARM, FILE_SIZE, ONLY, OUT: as bench/multichannel.sh
#        BRAID_PORT (4621), SAMBA_PORT (4622), ADMIN_PORT (4623)
# Needs root, iproute2 (ip, tc, ss), python3, jq.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-2}"
RATE="${RATE:-1gbit}"
DELAY="${DELAY:-300us}"
MTU="${MTU:-1500}"
FLOW_TEST="${FLOW_TEST:-1}"
TAG=$$
NS_S="braidmcS$TAG"
NS_C="braidmcC$TAG"
VETH_S="bmcs$TAG"
VETH_C="bmcc$TAG"
NET="10.231.$((TAG % 250)).0"
ADDR_S="${NET%.0}.1"
ADDR_C="${NET%.0}.2"
PORT_LO=40960   # client ephemeral ports: PORT_LO .. PORT_LO+255 (low byte 0..255)
TMP="$(mktemp -d /dev/shm/braidmc-netns.XXXXXX)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "netns.sh: ROUNDS must be a positive number" >&2; exit 2; }
(( EUID == 0 )) || { echo "netns.sh: needs root" >&2; exit 2; }

teardown() {
  ip netns del "$NS_S" 2>/dev/null || true
  ip netns del "$NS_C" 2>/dev/null || true
  rm -rf "$TMP"
}
trap teardown EXIT
trap 'exit 130' INT TERM

have_netem() {
  local ok=1
  ip netns add "braidmcP$TAG"
  ip netns exec "braidmcP$TAG" tc qdisc add dev lo root netem delay 1us 2>/dev/null && ok=0
  ip netns del "braidmcP$TAG"
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

# TCP flow test: N flows for 3 s, direction read (server -> client) or write.
flow_test() {
  local n=$1 dir=$2
  ip netns exec "$NS_C" python3 "$TMP/flow.py" client "$ADDR_S" 4629 "$n" "$dir" 3
}
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
def rtt(host, port):
    t = []
    for _ in range(50):
        a = time.perf_counter(); s = socket.create_connection((host, port)); t.append(time.perf_counter() - a); s.close()
    t.sort()
    print(f"FLOWTEST rtt (TCP connect) median={t[len(t) // 2] * 1e6:.0f} us min={t[0] * 1e6:.0f} us")
if sys.argv[1] == "serve": serve(int(sys.argv[2]))
elif sys.argv[1] == "rtt": rtt(sys.argv[2], int(sys.argv[3]))
else: client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], float(sys.argv[6]))
PY
}

NETEM=""
if have_netem; then NETEM=1; fi
setup
echo "netns.sh: servers in $NS_S ($ADDR_S), client in $NS_C ($ADDR_C), veth $VETH_S/$VETH_C"
echo "  per-flow cap $RATE on both egresses (HTB class per client port, u32 hash)"
if [[ -n "$NETEM" ]]; then
  echo "  delay $DELAY per direction (netem)"
else
  echo "  no delay added: this kernel has no netem (CONFIG_NET_SCH_NETEM not set)"
fi

if [[ "$FLOW_TEST" == 1 ]]; then
  write_flow_py
  ip netns exec "$NS_S" python3 "$TMP/flow.py" serve 4629 &
  flow_pid=$!
  sleep 0.5
  for dir in read write; do
    for n in 1 4; do flow_test "$n" "$dir"; done
  done
  ip netns exec "$NS_C" python3 "$TMP/flow.py" rtt "$ADDR_S" 4629
  kill "$flow_pid" 2>/dev/null || true
  wait "$flow_pid" 2>/dev/null || true
fi
export BRAID_PORT="${BRAID_PORT:-4621}" SAMBA_PORT="${SAMBA_PORT:-4622}" ADMIN_PORT="${ADMIN_PORT:-4623}"
MATRIX="${MATRIX:-netns}" NETNS="$NS_S" CLIENT_NS="$NS_C" LISTEN_ADDR="$ADDR_S" "$REPO/bench/multichannel.sh" "$ROUNDS"
echo "qdisc counters after the run (server egress, busiest classes):"
ip netns exec "$NS_S" tc -s class show dev "$VETH_S" | awk '/^class htb 1:1[0-9a-f][0-9a-f] /{c=$3} /Sent/{if (c != "") print c, $2, "bytes"; c=""}' | sort -k2 -n -r | head -n 5
