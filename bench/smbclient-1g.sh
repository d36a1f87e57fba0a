#!/usr/bin/env bash
# smbclient-1g.sh - 1 GiB put/get through Samba's smbclient, Braid vs a Samba peer, interleaved
# in one run so machine drift hits both alike. Prints MiB/s per run and the Braid/Samba ratio.
#
# usage: bench/smbclient-1g.sh [ROUNDS]        (default 3; median and best per server are reported)
# env:   PROTECTION=off|sign|encrypt  (smbclient --client-protection, default off)
#        BRAID_BIN (default target/release/braid), BRAID_PORT (4491), SAMBA_PORT (4492)
#        MAX_IO (Braid's max_io_size; default: Braid's own default, 2 MiB; Samba 4.17 offers 8M)
#        PUT_MODE=new|overwrite  new (default): the put creates the file (the old copy is removed
#                 on the server before the clock starts) and the get writes a new local file;
#                 overwrite: each transfer first truncates the previous 1 GiB copy, which frees
#                 1 GiB of tmpfs pages inside the timed run, for both servers alike
#        GET_DEST=null|file  null (default): the get writes to /dev/null, so the figure is the
#                 server and the wire, not smbclient's local tmpfs writes (each server's copy is
#                 checked once, untimed, with a get into a file and cmp); file: into a new local file
#        WARM=1 (default) | 0  before each timed transfer, write and delete 1.5 GiB on /dev/shm.
#                 This VM's virtio-balloon reports freed pages to the host (the reporting
#                 pass can start at once: /sys/module/page_reporting/parameters/min_free_ms is
#                 0 here); touching such a page again costs a host fault (dd into fresh tmpfs:
#                 365 MB/s, into warm pages: 6.6-9.3 GB/s), so without it a transfer's speed
#                 depends on how long ago memory was freed. Warm-up hands both servers pages
#                 just freed by the guest, but a reporting pass may still overlap a transfer:
#                 each round line says how many MiB were reported meanwhile, and a second
#                 RESULT line per operation gives the medians over the rounds with none.
#        SHARE_ROOT  directory for both servers' shares instead of /dev/shm (bench/diskfs.sh:
#                 a disk file system); the client's source file and server state stay on /dev/shm
#        DROP_CACHES=1  drop the page cache before each timed transfer (with SHARE_ROOT on a disk:
#                 gets read the disk, puts start with no dirty pages); needs root
# Rounds alternate which server goes first. Shares, file and state live on /dev/shm unless
# SHARE_ROOT is set. Needs root for the Samba peer.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
PROTECTION="${PROTECTION:-off}"
PUT_MODE="${PUT_MODE:-new}"
GET_DEST="${GET_DEST:-null}"
WARM="${WARM:-1}"
BRAID_BIN="${BRAID_BIN:-$REPO/target/release/braid}"
BRAID_PORT="${BRAID_PORT:-4491}"
SAMBA_PORT="${SAMBA_PORT:-4492}"
WORK=/dev/shm/braid-bench-smbclient
PW=bench-pw-1
rm -rf "$WORK"; mkdir -p "$WORK/local"
head -c $((1 << 30)) /dev/urandom > "$WORK/local/src.bin"

# shellcheck source=bench/peers.sh
source "$REPO/bench/peers.sh"
start_peers
echo "smbclient-1g.sh: shares in $BRAID_SHARE (Braid) and $SAMBA_DATA (Samba)$( [[ ${DROP_CACHES:-0} == 1 ]] && echo ', page cache dropped before each transfer')"

# KiB of free memory reported to the host so far (virtio-balloon free page reporting), or 0
reported() { cat /sys/module/page_reporting/parameters/reported_kib 2>/dev/null || echo 0; }

# one transfer; prints MiB/s computed from wall time
xfer() {  # server port dir(put|get)
  local port=$1 op=$2 t0 t1 cmd
  if [[ $op == put ]]; then
    cmd="put $WORK/local/src.bin f.bin"
    if [[ $PUT_MODE == new ]]; then
      if [[ $port == "$BRAID_PORT" ]]; then rm -f "$BRAID_SHARE/f.bin"; else rm -f "$SAMBA_DATA/f.bin"; fi
    fi
  elif [[ $GET_DEST == null ]]; then
    cmd="get f.bin /dev/null"
  else
    cmd="get f.bin $WORK/local/back.bin"
    # Same reason as a new-file put: a get over the previous local copy would first
    # truncate 1 GiB on the client inside the timed run.
    [[ $PUT_MODE == new ]] && rm -f "$WORK/local/back.bin"
  fi
  if [[ $WARM == 1 ]]; then head -c 1536M /dev/zero >"$WORK/warm.bin"; rm -f "$WORK/warm.bin"; fi
  drop_caches_if_asked
  local r0; r0=$(reported)
  t0=$(date +%s.%N)
  smbclient //127.0.0.1/data -p "$port" -U "alice%$PW" --client-protection="$PROTECTION" -c "$cmd" >/dev/null 2>&1
  t1=$(date +%s.%N)
  # Pages this guest handed back to the host during the transfer (see WARM above): a
  # transfer that overlaps a reporting pass is slowed by host faults, whichever server ran.
  echo "$(( ($(reported) - r0) / 1024 ))" >"$WORK/reported-mib"
  if [[ $op == get && $GET_DEST != null ]]; then cmp "$WORK/local/src.bin" "$WORK/local/back.bin" >&2 || { echo "MISMATCH on port $port" >&2; ls -la "$WORK/local" >&2; exit 1; }; fi
  echo "scale=1; 1024 / ($t1 - $t0)" | bc
}

# Untimed: one put to each server, and each server's copy read back and compared.
for port in "$BRAID_PORT" "$SAMBA_PORT"; do
  xfer "$port" put >/dev/null
  GET_DEST=file xfer "$port" get >/dev/null
done
rm -f "$WORK/local/back.bin"
declare -A all=() clean=()
for r in $(seq "$ROUNDS"); do
  if (( r % 2 )); then order="braid samba"; else order="samba braid"; fi
  for srv in $order; do
    port=$BRAID_PORT; [[ $srv == samba ]] && port=$SAMBA_PORT
    for op in put get; do
      v=$(xfer "$port" "$op")
      echo "round $r $srv $op: $v MiB/s (reported to host meanwhile: $(cat "$WORK/reported-mib") MiB)"
      all[$srv-$op]+="$v "
      [[ $(cat "$WORK/reported-mib") == 0 ]] && clean[$srv-$op]+="$v "
    done
  done
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
best() { tr ' ' '\n' | sed '/^$/d' | sort -n | tail -n 1; }
for op in put get; do
  bm=$(median <<<"${all[braid-$op]}"); sm=$(median <<<"${all[samba-$op]}")
  bb=$(best <<<"${all[braid-$op]}"); sb=$(best <<<"${all[samba-$op]}")
  echo "RESULT $op protection=$PROTECTION put_mode=$PUT_MODE get_dest=$GET_DEST warm=$WARM" \
    "median braid=$bm samba=$sm MiB/s ratio=$(echo "scale=2; $bm / $sm" | bc)x;" \
    "best braid=$bb samba=$sb ratio=$(echo "scale=2; $bb / $sb" | bc)x"
  # The same medians over the rounds during which no memory was reported to the host.
  if [[ -n "${clean[braid-$op]:-}" && -n "${clean[samba-$op]:-}" ]]; then
    bm=$(median <<<"${clean[braid-$op]}"); sm=$(median <<<"${clean[samba-$op]}")
    echo "RESULT $op (rounds without page reporting: braid $(wc -w <<<"${clean[braid-$op]}"), samba $(wc -w <<<"${clean[samba-$op]}"))" \
      "median braid=$bm samba=$sm MiB/s ratio=$(echo "scale=2; $bm / $sm" | bc)x"
  fi
done
