#!/usr/bin/env bash
# server-copy.sh - server-side copy of a 1 GiB file, Braid vs the Samba peer, and against a
# client-side copy through Braid, in one run: `braid bench copy` (its own SMB client) copies
# data/src.bin to data/dst.bin inside each server (FSCTL_SRV_COPYCHUNK_WRITE, 16 MiB per
# request), and through the client (READ + WRITE, same depth) on Braid. Rounds alternate the
# order; every copy is compared with the source (cmp, untimed) before it counts.
#
# usage: bench/server-copy.sh [ROUNDS]     (default 3; medians are reported)
# env:   SIZE_MIB (1024)  DEPTH (4) requests in flight
#        SHARE_ROOT  both servers' shares on another file system (bench/diskfs.sh sets it:
#                    `FS=xfs bench/diskfs.sh -- bench/server-copy.sh 3`)
#        BRAID_BIN (target/release/braid), BRAID_PORT (4491), SAMBA_PORT (4492)
#        WARM=1 (default) | 0  before each copy, write and delete 1.5 GiB on /dev/shm: this VM's
#                 balloon hands freed pages to the host, and touching them again costs a
#                 host fault each (see bench/smbclient-1g.sh), which a new copy on tmpfs would
#                 pay or not depending on how long ago memory was freed
# Prints one line per copy and a markdown table: Braid server-side, Samba server-side, their
# ratio (target >= 1.5x), Braid client-side and server/client ratio (target >= 3x).
# Needs root for the Samba peer.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
SIZE_MIB="${SIZE_MIB:-1024}"
DEPTH="${DEPTH:-4}"
WARM="${WARM:-1}"
BRAID_BIN="${BRAID_BIN:-$REPO/target/release/braid}"
BRAID_PORT="${BRAID_PORT:-4491}"
SAMBA_PORT="${SAMBA_PORT:-4492}"
WORK=/dev/shm/braid-bench-server-copy
PW=bench-pw-1
rm -rf "$WORK"; mkdir -p "$WORK"
RESULTS="$WORK/results.txt"

# shellcheck source=bench/peers.sh
source "$REPO/bench/peers.sh"
start_peers
fs="$(stat -f -c %T "$BRAID_SHARE")"
echo "server-copy.sh: ${SIZE_MIB} MiB, depth $DEPTH, shares on $fs ($BRAID_SHARE, $SAMBA_DATA)"
head -c $((SIZE_MIB << 20)) /dev/urandom > "$BRAID_SHARE/src.bin"
cp "$BRAID_SHARE/src.bin" "$SAMBA_DATA/src.bin"
chmod 0666 "$BRAID_SHARE/src.bin" "$SAMBA_DATA/src.bin"
sync

# One copy: server(braid|samba) mode(server|client); prints MiB/s after checking the bytes.
one() {
  local port=$BRAID_PORT dir=$BRAID_SHARE flag=() out
  [[ $1 == samba ]] && { port=$SAMBA_PORT; dir=$SAMBA_DATA; }
  [[ $2 == client ]] && flag=(--client-side)
  rm -f "$dir/dst.bin"; sync
  if [[ $WARM == 1 ]]; then head -c 1536M /dev/zero >"$WORK/warm.bin"; rm -f "$WORK/warm.bin"; fi
  out="$(BRAID_BENCH_PASSWORD="$PW" "$BRAID_BIN" bench copy "${flag[@]}" --depth "$DEPTH" \
    --from src.bin --to dst.bin "smb://alice@127.0.0.1:$port/data")"
  cmp -s "$dir/src.bin" "$dir/dst.bin" || { echo "server-copy.sh: $1 $2: the copy differs from the source" >&2; exit 1; }
  sed -n 's/.*mib_per_s=\([0-9.]*\).*/\1/p' <<<"$out"
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for r in $(seq "$ROUNDS"); do
  order="braid:server samba:server braid:client"
  (( r % 2 == 0 )) && order="braid:client samba:server braid:server"
  for run in $order; do
    v="$(one "${run%%:*}" "${run##*:}")"
    echo "$run $v" >>"$RESULTS"
    echo "  round $r ${run/:/ } ${v} MiB/s"
  done
done
pick() { awk -v k="$1" '$1 == k {print $2}' "$RESULTS" | median; }
b="$(pick braid:server)" s="$(pick samba:server)" c="$(pick braid:client)"
echo
echo "| file system | Braid server-side MiB/s | Samba server-side MiB/s | Braid/Samba | Braid client-side MiB/s | server/client |"
echo "|---|---:|---:|---:|---:|---:|"
awk -v fs="$fs" -v b="$b" -v s="$s" -v c="$c" 'BEGIN {printf "| %s | %.0f | %.0f | %.2fx | %.0f | %.2fx |\n", fs, b, s, b / s, c, b / c}'
