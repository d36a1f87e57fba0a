#!/usr/bin/env bash
# braid-torture.sh - the smbtorture regression stage: start braid on a tmpfs share, run
# interop/torture.sh on the release suites, stop braid, run interop/torture-check.sh.
#
# usage: interop/braid-torture.sh            (from anywhere; uses target/release/braid or $BRAID_BIN)
# env:   SUITES="smb2.connect ..."  override the suite list
#        CA_SHARES=1                 the suites' shares are continuously available
#        RESULTS=target/test-logs/torture-results.txt
#        TEST_TIMEOUT=30 TOTAL_TIMEOUT=900 JOBS=2   passed on to torture.sh
#        SLOW_TESTS="..."  subtests allowed SLOW_TIMEOUT (120 s here): the break-timeout ones, notify.mask
#        PLAIN_TESTS="..." subtests run without TORTURE_OPTS (the multichannel break retries)
#        TORTURE_OPTS="--option=..."  extra smbtorture options, passed on to torture.sh; as root
#                     with /usr/sbin/iptables present it defaults to the iptables options
#                     smb2.multichannel needs (torture:use_iptables, torture:iptables_command)
# Ends with "N passed, N failed" (from torture-check.sh; +1 failed if braid crashed or did not start).
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BRAID_BIN:-$REPO/target/release/braid}"
SUITES="${SUITES:-smb2.replay smb2.connect smb2.read smb2.create smb2.dir smb2.getinfo smb2.setinfo smb2.lock smb2.rename smb2.compound smb2.credits smb2.session smb2.multichannel smb2.oplock smb2.lease smb2.notify smb2.durable-open smb2.durable-v2-open smb2.ioctl smb2.delete-on-close-perms smb2.streams}"
# (smb2.replay, the longest suite, first: suites run two at a time from this list.)
# smb2.multichannel blocks channels with iptables (the oplocks.* and leases.* tests need it):
# as root with iptables present, that is switched on unless TORTURE_OPTS says otherwise.
if [[ -z "${TORTURE_OPTS:-}" && $(id -u) == 0 && -x /usr/sbin/iptables ]]; then
  TORTURE_OPTS="--option=torture:use_iptables=yes --option=torture:iptables_command=/usr/sbin/iptables"
fi
LOGS="$REPO/target/test-logs"; mkdir -p "$LOGS"
bash "$REPO/interop/iptables-clean.sh"   # a killed earlier run may have left DROP rules
RESULTS="${RESULTS:-$LOGS/torture-results.txt}"
TUSER=torture TPASS="Torture-Pw-1"

if [[ ! -x "$BIN" ]]; then echo "braid binary not found: $BIN"; echo "0 passed, 1 failed"; exit 1; fi
base=/dev/shm; [[ -w /dev/shm ]] || base=/tmp
D="$(mktemp -d "$base/braid-torture.XXXXXX")"
mkdir -p "$D/tmp"; chmod 0755 "$D"; chmod 0777 "$D/tmp"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
HASH="$(python3 "$REPO/tests/harness.py" nthash "$TPASS")"
cat >"$D/braid.toml" <<CONF
[server]
listen = ["127.0.0.1:$PORT"]
# Samba's smbtorture test controls: the PLAIN_TESTS below simulate a dead channel with
# FSCTL_SMBTORTURE_FORCE_UNACKED_TIMEOUT instead of iptables.
smbtorture_hooks = true
state_dir = "$D/state"

[[user]]
name = "$TUSER"
nt_hash = "$HASH"

[[share]]
name = "tmp"
path = "$D/tmp"
read_only = false
users = []
guest_ok = false
CONF

# One more share per suite (torture.sh SHARE_PER_SUITE): suites run two at a time, and a
# change notification one suite waits for must not be answered by another suite's change.
for suite in $SUITES; do
  name="${suite//[.-]/_}"
  mkdir -p "$D/$name"; chmod 0777 "$D/$name"
  printf '\n[[share]]\nname = "%s"\npath = "%s"\nread_only = false\nusers = []\nguest_ok = false\n' "$name" "$D/$name" >>"$D/braid.toml"
  # CA_SHARES=1: the suites' shares are continuously available (persistent handles).
  [[ "${CA_SHARES:-0}" == 1 ]] && printf 'continuous_availability = true\n' >>"$D/braid.toml"
done
export SHARE_PER_SUITE=1

LOG="$LOGS/braid-torture.log"
# own session: whatever the server does to its process group cannot hit this script
RUST_BACKTRACE=1 setsid "$BIN" serve --config "$D/braid.toml" </dev/null >"$LOG" 2>&1 &
BPID=$!
cleanup() { kill -TERM "$BPID" 2>/dev/null; rm -rf -- "$D"; bash "$REPO/interop/iptables-clean.sh"; }
trap cleanup EXIT

up=0
for _ in $(seq 1 100); do    # <= 10 s
  if timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then up=1; break; fi
  kill -0 "$BPID" 2>/dev/null || break
  sleep 0.1
done
if [[ $up != 1 ]]; then
  echo "braid did not start listening on 127.0.0.1:$PORT; log $LOG:"; tail -n 20 "$LOG"
  echo "0 passed, 1 failed"; exit 1
fi

# Subtests that wait out the 35 s oplock/lease break timeout on purpose, and
# smb2.notify.mask, which sleeps 200 ms in each of its 384 steps (about 75 s).
SLOW_TESTS="${SLOW_TESTS:-smb2.oplock.batch22a smb2.lease.oplock smb2.lease.timeout smb2.multichannel.oplocks.test3_specification smb2.multichannel.leases.test4 smb2.notify.mask}"
export SLOW_TESTS
# notify.mask needs about 80 s on an idle machine; suites run two at a time.
export SLOW_TIMEOUT="${SLOW_TIMEOUT:-120}"
# The multichannel break-retry subtests simulate a dead channel the way Samba's own test
# runs do (FSCTL_SMBTORTURE_FORCE_UNACKED_TIMEOUT, `smbtorture_hooks` above): with iptables
# the result depends on whether the client's delayed ACK of the last response left before
# the DROP rule went in (if not, TCP holds the break in the server's queue).
PLAIN_TESTS="${PLAIN_TESTS:-$(printf 'smb2.multichannel.%s ' oplocks.test1 oplocks.test2 oplocks.test3_windows oplocks.test3_specification leases.test1 leases.test2 leases.test3 leases.test4) smb2.oplock.batch22b}"
export PLAIN_TESTS

# shellcheck disable=SC2086
TEST_TIMEOUT="${TEST_TIMEOUT:-30}" TOTAL_TIMEOUT="${TOTAL_TIMEOUT:-900}" JOBS="${JOBS:-2}" RESULTS="$RESULTS" TORTURE_OPTS="${TORTURE_OPTS:-}" \
  OUTDIR="$LOGS/torture-raw" bash "$REPO/interop/torture.sh" 127.0.0.1 "$PORT" tmp "$TUSER" "$TPASS" $SUITES |
  grep -v ' PASS$' | grep -v '^[0-9]* passed, [0-9]* failed$'

crash=0
if ! kill -0 "$BPID" 2>/dev/null; then
  wait "$BPID"; echo "braid died during the smbtorture run (status $?); log: $LOG"; crash=1
else
  kill -TERM "$BPID"
  for _ in $(seq 1 100); do kill -0 "$BPID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$BPID" 2>/dev/null
  wait "$BPID"; rc=$?
  case $rc in 0|143) ;; 137) echo "braid did not stop within 10 s of SIGTERM" ;;
    *) echo "braid exited with status $rc on SIGTERM; log: $LOG"; crash=1 ;; esac
fi
if grep -q panicked "$LOG"; then echo "braid panicked during the smbtorture run; log: $LOG"; crash=1; fi

out="$(bash "$REPO/interop/torture-check.sh" "$RESULTS")"; rc=$?
echo "$out" | sed '$d'
last="$(echo "$out" | tail -n1)"
p="$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')"
f="$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')"
[[ -z "$p" ]] && { p=0; f=1; }
f=$((f + crash))
echo "$p passed, $f failed"
[[ $f -eq 0 ]]
