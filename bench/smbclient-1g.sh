#!/usr/bin/env bash
# smbclient-1g.sh - 1 GiB put/get through Samba's smbclient, Braid vs a Samba peer, interleaved
# in one run so machine drift hits both alike. Prints MiB/s per run and the Braid/Samba ratio.
#
# usage: bench/smbclient-1g.sh [ROUNDS]        (default 3; best-of per server is reported)
# env:   PROTECTION=off|sign|encrypt  (smbclient --client-protection, default off)
#        BRAID_BIN (default target/release/braid), BRAID_PORT (4491), SAMBA_PORT (4492)
#        MAX_IO (Braid's max_io_size; default: Braid's own default, 2 MiB; Samba 4.17 offers 8M)
#        PUT_MODE=new|overwrite  new (default): the put creates the file (the old copy is removed
#                 on the server before the clock starts) and the get writes a new local file;
#                 overwrite: each transfer first truncates the previous 1 GiB copy, which frees
#                 1 GiB of tmpfs pages inside the timed run, for both servers alike
# Shares, file and state live on /dev/shm. Needs root for the Samba peer.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
PROTECTION="${PROTECTION:-off}"
PUT_MODE="${PUT_MODE:-new}"
BRAID_BIN="${BRAID_BIN:-$REPO/target/release/braid}"
BRAID_PORT="${BRAID_PORT:-4491}"
SAMBA_PORT="${SAMBA_PORT:-4492}"
WORK=/dev/shm/braid-bench-smbclient
PW=bench-pw-1
rm -rf "$WORK"; mkdir -p "$WORK/braid-share" "$WORK/local"
head -c $((1 << 30)) /dev/urandom > "$WORK/local/src.bin"

# shellcheck source=bench/peers.sh
source "$REPO/bench/peers.sh"
start_peers

# one transfer; prints MiB/s computed from wall time
xfer() {  # server port dir(put|get)
  local port=$1 op=$2 t0 t1 cmd
  if [[ $op == put ]]; then
    cmd="put $WORK/local/src.bin f.bin"
    if [[ $PUT_MODE == new ]]; then
      if [[ $port == "$BRAID_PORT" ]]; then rm -f "$WORK/braid-share/f.bin"; else rm -f "$WORK/samba/shares/data/f.bin"; fi
    fi
  else
    cmd="get f.bin $WORK/local/back.bin"
    # Same reason as a new-file put: a get over the previous local copy would first
    # truncate 1 GiB on the client inside the timed run.
    [[ $PUT_MODE == new ]] && rm -f "$WORK/local/back.bin"
  fi
  t0=$(date +%s.%N)
  smbclient //127.0.0.1/data -p "$port" -U "alice%$PW" --client-protection="$PROTECTION" -c "$cmd" >/dev/null 2>&1
  t1=$(date +%s.%N)
  if [[ $op == get ]]; then cmp "$WORK/local/src.bin" "$WORK/local/back.bin" >&2 || { echo "MISMATCH on port $port" >&2; ls -la "$WORK/local" >&2; exit 1; }; fi
  echo "scale=1; 1024 / ($t1 - $t0)" | bc
}

declare -A best=([braid-put]=0 [braid-get]=0 [samba-put]=0 [samba-get]=0)
# untimed warm-up: first writes into a fresh tmpfs are slower (page allocation)
xfer "$BRAID_PORT" put >/dev/null; xfer "$SAMBA_PORT" put >/dev/null
for r in $(seq "$ROUNDS"); do
  for srv in braid samba; do
    port=$BRAID_PORT; [[ $srv == samba ]] && port=$SAMBA_PORT
    for op in put get; do
      v=$(xfer "$port" "$op")
      echo "round $r $srv $op: $v MiB/s"
      if (( $(echo "$v > ${best[$srv-$op]}" | bc) )); then best[$srv-$op]=$v; fi
    done
  done
done
for op in put get; do
  ratio=$(echo "scale=2; ${best[braid-$op]} / ${best[samba-$op]}" | bc)
  echo "RESULT $op protection=$PROTECTION put_mode=$PUT_MODE braid=${best[braid-$op]} samba=${best[samba-$op]} MiB/s ratio=${ratio}x"
done
