#!/usr/bin/env bash
# meta.sh - metadata benchmarks, one run: Braid with its metadata cache on and off, and the
# Samba peer, side by side on several backends (the file system under the shares).
#
# Backends (BACKENDS, default "tmpfs ext4 bindfs"):
#   tmpfs   the shares on /dev/shm
#   ext4    an ext4 file system in a loop image on the machine's disk ($IMG_DIR/meta-ext4.img,
#           mounted for the run, always unmounted and detached afterwards)
#   bindfs  bindfs (FUSE) over a tmpfs directory: a file system that reports no changes
# Workloads (WORKLOADS, default "mix stat list torture untar"):
#   mix      braid bench --meta create,open,close,delete,stat (each worker in its own dir)
#   stat     braid bench --meta stat: CREATE+QUERY_INFO+CLOSE (one compound) of existing files,
#            STAT_FILES (256) per worker
#   list     braid bench --meta list: listings (open, QUERY_DIRECTORY to the end, close) of one
#            directory of LIST_FILES (10000) entries, filled by the first round and kept;
#            entries/s = listings/s x LIST_FILES
#   torture  smbtorture smb2.bench.path-contention-shared: THREADS connections opening and
#            closing one path; opens/s, mean open latency (smbtorture gives no median)
#   untar    smbclient -Tx of a tarball of TAR_FILES (2000) files of TAR_SRC (/usr/include),
#            built deterministically at the start (sorted names, fixed owner and mtime); files/s,
#            mean time per file; the extracted file count is checked on the server's disk
# Each workload runs ROUNDS times per server, the servers interleaved within a round; a cell is
# the median of its rounds. Braid's data and Braid's own client (`braid bench`) are the same for
# every server; smbtorture and smbclient are independent clients.
#
# The cache switch: the "on" server's config gets CACHE_ON ("metadata_cache = true"), the "off"
# server's CACHE_OFF ("metadata_cache = false"), in the [[share]] section (CACHE_SECTION=share)
# or in [server] (CACHE_SECTION=server). A binary whose `braid check` refuses the line runs
# without it: the "on" column is then skipped (reported as such), and "off" is the binary as it
# is. BRAID_BIN_OFF (default BRAID_BIN) runs the "off" column, e.g. a build without the cache.
#
# usage: bench/meta.sh
# env:   BACKENDS WORKLOADS as above; DUR (10) seconds per timed run; ROUNDS (2); THREADS (4)
#        BRAID_BIN (target/release/braid), BRAID_BIN_OFF, BENCH_BIN (BRAID_BIN: `braid bench`)
#        CACHE_ON CACHE_OFF CACHE_SECTION as above
#        LIST_FILES STAT_FILES TAR_SRC TAR_FILES as above
#        PORT_BASE (14455): Braid on PORT_BASE and PORT_BASE+1, Samba on PORT_BASE+20
#        IMG_DIR (/var/tmp/braid-diskfs) IMG_SIZE (2G): the ext4 image (the machine's disk)
# Time: each of backends x workloads x ROUNDS x servers runs takes DUR plus a few seconds of
# setup (untar: the extraction itself). Measured at the defaults on 2 shared cores: about 15
# minutes for 3 backends with two servers (no cache key), so about 22 with the "on" column;
# DUR=5 takes about 9 and 14.
# Needs root (the Samba peer, mount, losetup), jq, smbtorture, smbclient, bindfs, mkfs.ext4.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BACKENDS="${BACKENDS:-tmpfs ext4 bindfs}"
WORKLOADS="${WORKLOADS:-mix stat list torture untar}"
DUR="${DUR:-10}"
ROUNDS="${ROUNDS:-2}"
THREADS="${THREADS:-4}"
BRAID_BIN="${BRAID_BIN:-$REPO/target/release/braid}"
BRAID_BIN_OFF="${BRAID_BIN_OFF:-$BRAID_BIN}"
BENCH_BIN="${BENCH_BIN:-$BRAID_BIN}"
CACHE_ON="${CACHE_ON:-metadata_cache = true}"
CACHE_OFF="${CACHE_OFF:-metadata_cache = false}"
CACHE_SECTION="${CACHE_SECTION:-share}"
LIST_FILES="${LIST_FILES:-10000}"
STAT_FILES="${STAT_FILES:-256}"
TAR_SRC="${TAR_SRC:-/usr/include}"
TAR_FILES="${TAR_FILES:-2000}"
PORT_BASE="${PORT_BASE:-14455}"
IMG_DIR="${IMG_DIR:-/var/tmp/braid-diskfs}"
IMG_SIZE="${IMG_SIZE:-2G}"
PW="meta-$RANDOM$RANDOM"
die() { echo "meta.sh: $*" >&2; exit 2; }

[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$DUR" =~ ^[1-9][0-9]*$ && "$THREADS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS, DUR and THREADS must be positive numbers"
[[ "$CACHE_SECTION" == share || "$CACHE_SECTION" == server ]] || die "CACHE_SECTION must be share or server"
(( EUID == 0 )) || die "needs root (the Samba peer, mount)"
for t in jq smbtorture smbclient; do command -v "$t" >/dev/null || die "$t is not installed (scripts/install-deps.sh)"; done
for b in "$BRAID_BIN" "$BRAID_BIN_OFF" "$BENCH_BIN"; do [[ -x "$b" ]] || die "$b: not an executable (cargo build --release)"; done
for b in $BACKENDS; do
  case "$b" in
    tmpfs) ;;
    ext4) command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 is not installed" ;;
    bindfs) command -v bindfs >/dev/null || die "bindfs is not installed (scripts/install-deps.sh)" ;;
    *) die "unknown backend $b (tmpfs, ext4, bindfs)" ;;
  esac
done
for w in $WORKLOADS; do [[ " mix stat list torture untar " == *" $w "* ]] || die "unknown workload $w"; done

WORK="$(mktemp -d /dev/shm/braid-meta.XXXXXX)"
chmod 0755 "$WORK"
RESULTS="$WORK/results.txt"   # backend workload server round ops_per_s latency_us
: >"$RESULTS"
PIDS=()
MOUNTS=()
LOOP=""
SAMBA_UP=""

cleanup() {
  local p m
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  [[ -n "$SAMBA_UP" ]] && { PORT=$((PORT_BASE + 20)) DIR="$WORK/samba" "$REPO/scripts/samba-peer.sh" down >/dev/null 2>&1 || true; }
  SAMBA_UP=""
  for m in "${MOUNTS[@]}"; do
    for _ in 1 2 3 4 5; do umount "$m" 2>/dev/null && break; sleep 1; done
    mountpoint -q "$m" && umount -l "$m"
  done
  MOUNTS=()
  [[ -n "$LOOP" ]] && { losetup -d "$LOOP" 2>/dev/null || true; rm -f "$IMG_DIR/meta-ext4.img"; }
  LOOP=""
  return 0
}
trap 'cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
for p in "$PORT_BASE" $((PORT_BASE + 1)) $((PORT_BASE + 20)) $((PORT_BASE + 10000)) $((PORT_BASE + 10001)); do
  port_open "$p" && die "port $p is in use (set PORT_BASE)"
done

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# A Braid config for share directory $1 on port $2 with the extra line $3 (may be empty).
braid_conf() {
  local server_line="" share_line=""
  [[ "$CACHE_SECTION" == server ]] && server_line="$3" || share_line="$3"
  printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nlog = "warn"\n%s\n[[share]]\nname = "data"\npath = "%s"\n%s\n' \
    "$2" $(($2 + 10000)) "$server_line" "$1" "$share_line"
}

# Whether binary $1 accepts the line $2 (`braid check` on a throwaway config).
accepts() {
  braid_conf /tmp 1 "$2" >"$WORK/probe.toml"
  "$1" check --config "$WORK/probe.toml" >/dev/null 2>"$WORK/probe.err"
}

# The servers of the run: name, binary, config line, port (Samba has none of the first three).
SERVERS=()
if accepts "$BRAID_BIN" "$CACHE_ON"; then
  SERVERS+=(on)
else
  echo "meta.sh: $BRAID_BIN refuses '$CACHE_ON' ($(head -c 200 "$WORK/probe.err")); the cache-on column is skipped"
fi
OFF_LINE="$CACHE_OFF"
if ! accepts "$BRAID_BIN_OFF" "$CACHE_OFF"; then
  echo "meta.sh: $BRAID_BIN_OFF refuses '$CACHE_OFF'; the cache-off column runs it without the line"
  OFF_LINE=""
fi
SERVERS+=(off samba)

# The untar tarball: the first TAR_FILES regular files of TAR_SRC in byte order, with their
# directories (each before its contents), fixed owner and mtime.
TAR="$WORK/src.tar"
if [[ " $WORKLOADS " == *" untar "* ]]; then
  [[ -d "$TAR_SRC" ]] || die "TAR_SRC $TAR_SRC is not a directory"
  (
    cd "$(dirname "$TAR_SRC")"
    base="$(basename "$TAR_SRC")"
    find "$base" -type f | LC_ALL=C sort >"$WORK/tar.all"
    # SMB names are case-insensitive: a file or directory whose name differs from an earlier
    # one only in case (xt_CONNMARK.h, xt_connmark.h) would replace it, so it is left out.
    awk -F/ -v max="$TAR_FILES" '
      n < max {
        p = $1; ok = 1
        for (i = 2; i <= NF; i++) {
          if ((tolower(p) in seen) && seen[tolower(p)] != p) ok = 0
          p = p "/" $i
        }
        if (ok && !(tolower($0) in seen)) {
          p = $1; seen[tolower(p)] = p
          for (i = 2; i <= NF; i++) {p = p "/" $i; seen[tolower(p)] = p}
          print; n++
        }
      }' "$WORK/tar.all" >"$WORK/tar.files"
    awk -F/ '{p = $1; print p; for (i = 2; i < NF; i++) {p = p "/" $i; print p}}' "$WORK/tar.files" | LC_ALL=C sort -u >"$WORK/tar.dirs"
    LC_ALL=C sort -u "$WORK/tar.files" "$WORK/tar.dirs" >"$WORK/tar.list"
    tar --no-recursion --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$TAR" -T "$WORK/tar.list"
  )
  TAR_COUNT=$(wc -l <"$WORK/tar.files")
  echo "meta.sh: untar source: $TAR_COUNT files, $(wc -l <"$WORK/tar.dirs" | tr -d ' ') directories, $(du -h "$TAR" | cut -f1) from $TAR_SRC"
fi
printf '[global]\nclient min protocol = SMB2_10\nclient max protocol = SMB3\n' >"$WORK/client.conf"

# Mounts backend $1 and sets ROOT, the directory the shares go under (not in a subshell:
# the mounts must be recorded for cleanup).
backend_up() {
  local root="$WORK/$1"
  case "$1" in
    tmpfs)
      mkdir -p "$root"
      ;;
    ext4)
      mkdir -p "$IMG_DIR" "$IMG_DIR/meta-mnt"
      [[ "$(stat -f -c %T "$IMG_DIR")" != tmpfs ]] || die "IMG_DIR must be on a disk, not tmpfs"
      local img="$IMG_DIR/meta-ext4.img"
      exec 8>"$IMG_DIR/meta.lock"
      flock -n 8 || die "another meta.sh run holds $IMG_DIR/meta.lock"
      mountpoint -q "$IMG_DIR/meta-mnt" && die "$IMG_DIR/meta-mnt is already mounted (umount it first)"
      rm -f "$img"
      fallocate -l "$IMG_SIZE" "$img" 2>/dev/null || truncate -s "$IMG_SIZE" "$img"
      mkfs.ext4 -F -q "$img"
      LOOP="$(losetup --find --show --direct-io=on "$img" 2>/dev/null || losetup --find --show "$img")"
      mount "$LOOP" "$IMG_DIR/meta-mnt"
      MOUNTS+=("$IMG_DIR/meta-mnt")
      root="$IMG_DIR/meta-mnt/shares"
      mkdir -p "$root"
      chmod 0755 "$IMG_DIR/meta-mnt"
      ;;
    bindfs)
      mkdir -p "$WORK/bindfs-src" "$root"
      bindfs "$WORK/bindfs-src" "$root"
      MOUNTS+=("$root")
      ;;
  esac
  chmod 0755 "$root"
  ROOT="$root"
}

# Starts the servers of SERVERS with their shares under $1.
servers_up() {
  local root="$1" s bin line port
  for s in "${SERVERS[@]}"; do
    case "$s" in
      on) bin="$BRAID_BIN" line="$CACHE_ON" port=$PORT_BASE ;;
      off) bin="$BRAID_BIN_OFF" line="$OFF_LINE" port=$((PORT_BASE + 1)) ;;
      samba)
        PORT=$((PORT_BASE + 20)) DIR="$WORK/samba" SHARE_ROOT="$root/samba" USERS="alice:$PW" \
          "$REPO/scripts/samba-peer.sh" up >/dev/null
        SAMBA_UP=1
        continue
        ;;
    esac
    mkdir -p "$root/braid-$s" "$WORK/conf-$s"
    braid_conf "$root/braid-$s" "$port" "$line" >"$WORK/conf-$s/braid.toml"
    echo "$PW" | "$bin" user add alice --config "$WORK/conf-$s/braid.toml" --password-stdin >/dev/null
    "$bin" serve --config "$WORK/conf-$s/braid.toml" >"$WORK/conf-$s/braid.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do port_open "$port" && break; sleep 0.1; done
    port_open "$port" || { cat "$WORK/conf-$s/braid.log" >&2; die "braid ($s) did not start"; }
  done
}

port_of() { case "$1" in on) echo "$PORT_BASE" ;; off) echo $((PORT_BASE + 1)) ;; samba) echo $((PORT_BASE + 20)) ;; esac; }
share_dir() { case "$2" in samba) echo "$1/samba/data" ;; *) echo "$1/braid-$2" ;; esac; }

# One timed run of workload $2 against server $3 (share directory $4); prints "ops/s latency_us".
run_one() {
  local w="$2" s="$3" dir="$4" port out
  port="$(port_of "$s")"
  local url="smb://alice@127.0.0.1:$port/data"
  case "$w" in
    mix | stat | list)
      local mix files
      case "$w" in
        mix) mix="create,open,close,delete,stat" files=32 ;;
        stat) mix="stat" files="$STAT_FILES" ;;
        list) mix="list" files="$LIST_FILES" ;;
      esac
      out="$(BRAID_BENCH_PASSWORD="$PW" "$BENCH_BIN" bench --meta "$mix" -f "$files" -t "$THREADS" -d "$DUR" --dir "meta-$w" --json "$url" 2>"$WORK/bench.err")" \
        || { cat "$WORK/bench.err" >&2; return 1; }
      [[ "$(jq '.errors' <<<"$out")" == 0 ]] || { echo "meta.sh: $w on $s: $(jq '.errors' <<<"$out") errors" >&2; cat "$WORK/bench.err" >&2; return 1; }
      jq -r '"\(.iops) \(.latency_us.p50)"' <<<"$out"
      ;;
    torture)
      out="$(timeout $((DUR + 60)) smbtorture "//127.0.0.1/data" -p "$port" -U "alice%$PW" -s "$WORK/client.conf" \
        --option=torture:timelimit="$DUR" --option=torture:nprocs="$THREADS" --option=torture:progress=no \
        smb2.bench.path-contention-shared 2>&1)" || { echo "$out" | tail -n 5 >&2; return 1; }
      # "10.00 second: open[num/s=14009,avslat=0.000179,...] close[...]"
      sed -n 's/.*open\[num\/s=\([0-9]*\),avslat=\([0-9.]*\),.*/\1 \2/p' <<<"$out" | tail -n 1 | awk '{printf "%s %.1f\n", $1, $2 * 1e6}' | grep . \
        || { echo "$out" | tail -n 5 >&2; return 1; }
      ;;
    untar)
      local t0 t1 n sub="untar-$RANDOM"
      smbclient //127.0.0.1/data -p "$port" -U "alice%$PW" -s "$WORK/client.conf" -c "mkdir $sub" >/dev/null 2>&1
      t0=$(date +%s.%N)
      smbclient //127.0.0.1/data -p "$port" -U "alice%$PW" -s "$WORK/client.conf" -D "$sub" -Tx "$TAR" >"$WORK/untar.log" 2>&1 \
        || { tail -n 5 "$WORK/untar.log" >&2; return 1; }
      t1=$(date +%s.%N)
      n=$(find "$dir/$sub" -type f | wc -l)
      [[ "$n" == "$TAR_COUNT" ]] || { echo "meta.sh: untar on $s left $n files, not $TAR_COUNT" >&2; tail -n 5 "$WORK/untar.log" >&2; return 1; }
      rm -rf "${dir:?}/$sub"
      awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN {printf "%.1f %.1f\n", n / (b - a), (b - a) * 1e6 / n}'
      ;;
  esac
}

# The table of workload $2 on backend $1.
table() {
  local b="$1" w="$2" unit lat s ops l r rounds
  case "$w" in
    mix) unit="ops/s (create,open,close,delete,stat; $THREADS workers)" lat="median latency" ;;
    stat) unit="stats/s (CREATE+QUERY_INFO+CLOSE compound; $THREADS workers, $STAT_FILES files each)" lat="median latency" ;;
    list) unit="listings/s of $LIST_FILES entries ($THREADS workers; entries/s = listings/s x $LIST_FILES)" lat="median latency" ;;
    torture) unit="opens/s (smbtorture smb2.bench.path-contention-shared, nprocs $THREADS)" lat="mean open latency" ;;
    untar) unit="files/s (smbclient -Tx of $TAR_COUNT files)" lat="mean time per file" ;;
  esac
  echo
  echo "### $w on $b: $unit, median of $ROUNDS round(s)"
  echo
  echo "| server | ops/s | $lat | rounds (ops/s) |"
  echo "|---|---:|---:|---|"
  declare -A med_ops=()
  for s in on off samba; do
    case "$s" in on) l="Braid, cache on" ;; off) l="Braid, cache off" ;; samba) l="Samba" ;; esac
    [[ "$s" == off && -z "$OFF_LINE" ]] && l="Braid (no cache key)"
    rounds="$(awk -v b="$b" -v w="$w" -v s="$s" '$1 == b && $2 == w && $3 == s {printf "%s ", $5}' "$RESULTS")"
    if [[ -z "$rounds" ]]; then
      [[ " ${SERVERS[*]} " == *" $s "* ]] && r="failed" || r="skipped"
      echo "| $l | $r | | |"
      continue
    fi
    ops="$(awk -v b="$b" -v w="$w" -v s="$s" '$1 == b && $2 == w && $3 == s {print $5}' "$RESULTS" | median)"
    r="$(awk -v b="$b" -v w="$w" -v s="$s" '$1 == b && $2 == w && $3 == s {print $6}' "$RESULTS" | median)"
    med_ops[$s]="$ops"
    printf '| %s | %.0f | %s | %s|\n' "$l" "$ops" "$(awk -v u="$r" 'BEGIN {if (u < 10000) printf "%.0f µs", u; else printf "%.1f ms", u / 1000}')" "$rounds"
  done
  ratio() { [[ -n "${med_ops[$1]:-}" && -n "${med_ops[$2]:-}" ]] && awk -v a="${med_ops[$1]}" -v b="${med_ops[$2]}" 'BEGIN {printf "%.2fx", a / b}' || echo "-"; }
  echo
  echo "on/off $(ratio on off); Braid/Samba: on $(ratio on samba), off $(ratio off samba)"
}

START=$(date +%s)
runs=$(( $(wc -w <<<"$BACKENDS") * $(wc -w <<<"$WORKLOADS") * ROUNDS * ${#SERVERS[@]} ))
echo "meta.sh: servers: ${SERVERS[*]}; backends: $BACKENDS; workloads: $WORKLOADS; DUR=$DUR ROUNDS=$ROUNDS THREADS=$THREADS" \
  "($runs runs, roughly $(( runs * (DUR + 5) / 60 )) minutes)"
echo "meta.sh: braid $("$BRAID_BIN" --version 2>/dev/null || echo ?) ($BRAID_BIN); off: $BRAID_BIN_OFF; $(smbd --version 2>/dev/null || echo samba ?)"
failed=0
for b in $BACKENDS; do
  backend_up "$b"
  root="$ROOT"
  echo "=== $b: shares under $root ($(findmnt -no FSTYPE -T "$root" 2>/dev/null | tail -n 1))"
  servers_up "$root"
  for w in $WORKLOADS; do
    for r in $(seq "$ROUNDS"); do
      for s in "${SERVERS[@]}"; do
        if res="$(run_one "$b" "$w" "$s" "$(share_dir "$root" "$s")")"; then
          echo "$b $w $s $r $res" >>"$RESULTS"
          echo "  $b $w $s round $r: $res"
        else
          echo "  $b $w $s round $r: FAILED" >&2
          failed=1
        fi
      done
    done
  done
  for s in on off; do
    [[ " ${SERVERS[*]} " == *" $s "* ]] || continue
    c="$("$BRAID_BIN" status --admin "127.0.0.1:$(($(port_of "$s") + 10000))" --json 2>/dev/null | jq -c '.caches // []' 2>/dev/null || echo '?')"
    echo "  $b braid-$s metadata caches: $c"
  done
  cleanup
done

echo
echo "## Metadata benchmarks ($(date -u +%Y-%m-%d), $(nproc) CPUs, ${SECONDS}s)"
for w in $WORKLOADS; do
  for b in $BACKENDS; do table "$b" "$w"; done
done
echo
echo "meta.sh: done in $(($(date +%s) - START)) s"
exit "$failed"
