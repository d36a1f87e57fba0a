#!/usr/bin/env bash
# diskfs.sh - the Braid vs Samba comparisons with both servers' shares on a disk file system
# instead of tmpfs: an ext4 (or xfs) file system in a loop image on this machine's disk,
# mounted for the run and always unmounted (and its loop device detached) afterwards.
# The scripts it runs are the tmpfs ones; it only points their SHARE_ROOT at the disk file
# system. Server state, smbclient's source file and the client stay on /dev/shm.
#
# usage: bench/diskfs.sh [ROUNDS]               the comparisons in COMPARE, ROUNDS each (default 2)
#        bench/diskfs.sh -- COMMAND [ARGS...]   any bench script with its shares on the disk file
#                                               system, e.g. bench/diskfs.sh -- bench/compare.sh 2
# env:   COMPARE   space-separated list (default "smbclient loopback crypto"):
#                    smbclient  bench/smbclient-1g.sh ROUNDS      (issue 2's 1 GiB put/get)
#                    loopback   bench/multichannel.sh ROUNDS      (the `braid bench` matrix;
#                               ONLY, DUR, WARM, FILE_SIZE apply as there)
#                    crypto     MATRIX=crypto bench/multichannel.sh ROUNDS (FILE_SIZE 1g
#                               unless set)
#                    netns      bench/netns.sh ROUNDS             (the capped link)
#                    qd1        bench/qd1-ceiling.sh ROUNDS
#        FS=ext4|xfs        file system to make (default ext4; xfs needs mkfs.xfs)
#        IMG_DIR=DIR        image, mount point and lock (default /var/tmp/braid-diskfs: the
#                           machine's disk, never tmpfs)
#        IMG_SIZE=SIZE      image size (default 8G); an existing image of this size that
#                           already holds an FS file system is reused as it is
#        DROP_CACHES=1      drop the page cache before every timed run (see below)
#        BRAID_BIN, BENCH_BIN, ...  passed on to the scripts
#
# Page cache. Without DROP_CACHES the files are in the page cache after their first pass, as on
# a server with RAM to spare: the comparison is then of each server's path through a disk file
# system's page cache (the tmpfs-only paths, mapped READs and mapped overwrites, do not apply).
# The reference documents' "cache excluded" cells use files larger than 2x RAM; here that is
# 48 GiB per server, which this disk and a benchmark's time do not allow, so DROP_CACHES=1
# drops the page cache (sync; echo 3 > /proc/sys/vm/drop_caches) before every timed transfer
# or `braid bench` run instead. Use WARM=0 with it for bench/multichannel.sh, or its warm-up
# reads the files back in; a cell still reads from cache once it has passed over its files,
# so cold figures need FILE_SIZE x files larger than what a cell reads in DUR seconds.
# The loop device uses direct I/O where the host allows it, so the image's blocks are not
# cached a second time by the host file system underneath.
# One run at a time (a lock in IMG_DIR): the same image must never be mounted twice.
# Needs root (mkfs, losetup, mount, the Samba peer).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FS="${FS:-ext4}"
IMG_DIR="${IMG_DIR:-/var/tmp/braid-diskfs}"
IMG_SIZE="${IMG_SIZE:-8G}"
COMPARE="${COMPARE:-smbclient loopback crypto}"
IMG="$IMG_DIR/$FS.img"
MNT="$IMG_DIR/mnt"
die() { echo "diskfs.sh: $*" >&2; exit 2; }

ROUNDS=2
CMD=()
if [[ "${1:-}" == "--" ]]; then
  shift
  (( $# > 0 )) || die "nothing to run after --"
  CMD=("$@")
elif (( $# > 0 )); then
  ROUNDS=$1
fi
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number"
case "$FS" in
  ext4) MKFS=(mkfs.ext4 -F -q) ;;
  xfs) MKFS=(mkfs.xfs -f -q) ;;
  *) die "FS must be ext4 or xfs" ;;
esac
command -v "${MKFS[0]}" >/dev/null || die "${MKFS[0]} is not installed"
(( EUID == 0 )) || die "needs root"
mkdir -p "$IMG_DIR" "$MNT"
[[ "$(stat -f -c %T "$IMG_DIR")" != tmpfs ]] || die "IMG_DIR must be on a disk, not tmpfs"
exec 9>"$IMG_DIR/lock"
flock -n 9 || die "another diskfs.sh run holds $IMG_DIR/lock"
mountpoint -q "$MNT" && die "$MNT is already mounted (a run that was killed? umount it first)"

LOOP=""
cleanup() {
  cd /
  if mountpoint -q "$MNT"; then
    # bounded: a server that is still exiting can hold the mount for a moment
    for _ in 1 2 3 4 5 6 7 8 9 10; do umount "$MNT" 2>/dev/null && break; sleep 1; done
    mountpoint -q "$MNT" && { echo "diskfs.sh: $MNT busy, detaching it lazily" >&2; umount -l "$MNT"; }
  fi
  [[ -n "$LOOP" ]] && losetup -d "$LOOP" 2>/dev/null
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -f "$IMG" && "$(blkid -o value -s TYPE "$IMG" 2>/dev/null)" == "$FS" \
      && "$(stat -c %s "$IMG")" == "$(numfmt --from=iec "$IMG_SIZE")" ]]; then
  echo "diskfs.sh: reusing $IMG ($(du -h --apparent-size "$IMG" | cut -f1))"
else
  rm -f "$IMG"
  # allocated up front, so the runs do not also measure the host file system growing the image
  fallocate -l "$IMG_SIZE" "$IMG" 2>/dev/null || truncate -s "$IMG_SIZE" "$IMG"
  "${MKFS[@]}" "$IMG"
  echo "diskfs.sh: made $FS on $IMG ($IMG_SIZE)"
fi
LOOP="$(losetup --find --show --direct-io=on "$IMG" 2>/dev/null || losetup --find --show "$IMG")"
mount "$LOOP" "$MNT"
SHARE_ROOT="$MNT/shares"
mkdir -p "$SHARE_ROOT"
chmod 0755 "$MNT" "$SHARE_ROOT"
export SHARE_ROOT
echo "diskfs.sh: $FS on $LOOP (direct I/O: $(cat "/sys/block/${LOOP#/dev/}/loop/dio" 2>/dev/null || echo ?))" \
  "mounted at $MNT, $(df -h --output=avail "$MNT" | tail -n 1 | tr -d ' ') free;" \
  "DROP_CACHES=${DROP_CACHES:-0}; backing disk: $(df --output=source "$IMG_DIR" | tail -n 1)"

if (( ${#CMD[@]} > 0 )); then
  "${CMD[@]}"
  exit $?
fi

failed=()
for c in $COMPARE; do
  echo "=== diskfs.sh: $c ($FS, $ROUNDS round(s))"
  case "$c" in
    smbclient) "$REPO/bench/smbclient-1g.sh" "$ROUNDS" || failed+=("$c") ;;
    loopback) "$REPO/bench/multichannel.sh" "$ROUNDS" || failed+=("$c") ;;
    crypto) MATRIX=crypto FILE_SIZE="${FILE_SIZE:-1g}" "$REPO/bench/multichannel.sh" "$ROUNDS" || failed+=("$c") ;;
    netns) "$REPO/bench/netns.sh" "$ROUNDS" || failed+=("$c") ;;
    qd1) "$REPO/bench/qd1-ceiling.sh" "$ROUNDS" || failed+=("$c") ;;
    *) echo "diskfs.sh: unknown comparison '$c'" >&2; failed+=("$c") ;;
  esac
done
(( ${#failed[@]} == 0 )) || { echo "diskfs.sh: failed: ${failed[*]}" >&2; exit 1; }
