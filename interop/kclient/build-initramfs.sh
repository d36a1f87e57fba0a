#!/usr/bin/env bash
# build-initramfs.sh - build build/initramfs-base.cpio.gz (busybox-static,
# kmount, dircache, kernel modules for virtio-net + cifs + nfsv3 + crypto, /init, test.sh)
# Usage: build-initramfs.sh [KVER]   (default: newest /boot/vmlinuz-*)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
B="$HERE/build"
K="${1:-${KVER:-$(ls -1 /boot/vmlinuz-* | sed 's|/boot/vmlinuz-||' | sort -V | tail -1)}}"
[[ -d /lib/modules/$K ]] || { echo "no /lib/modules/$K" >&2; exit 1; }
BB=/bin/busybox
file -L "$BB" | grep -q 'statically linked' || { echo "$BB is not static (apt-get install busybox-static)" >&2; exit 1; }
mkdir -p "$B"
gcc -static -Os -s -o "$B/kmount" "$HERE/kmount.c"
gcc -static -O2 -s -Wall -o "$B/dircache" "$HERE/dircache.c"
R="$B/root"; rm -rf "$R"; mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,mnt,kc,lib/modules/$K}
cp "$BB" "$R/bin/busybox"
cp "$B/kmount" "$R/bin/kmount"
cp "$B/dircache" "$R/bin/dircache"
cp "$HERE/init.sh" "$R/init"; chmod 755 "$R/init"
cp "$HERE/guest-test.sh" "$R/kc/test.sh"
# modules: roots + everything modprobe would pull in (deps and softdeps)
ROOTS="virtio_pci virtio_net failover net_failover
 cifs nfsv3 nfs sunrpc lockd grace nfs_acl netfs fscache dns_resolver cifs_md4 cifs_arc4
 gcm ccm cmac ctr gf128mul ghash-generic ghash-clmulni-intel aesni-intel cryptd crypto_simd
 sha512_generic sha512-ssse3 sha256-ssse3 md4 ecb des_generic libdes nls_utf8"
: > "$R/etc/kc-insmod"
for m in $ROOTS; do
  modprobe -S "$K" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}' || true
done | awk '!seen[$0]++' > "$B/modlist.txt"
while read -r f; do
  rel="${f#/lib/modules/$K/}"
  mkdir -p "$R/lib/modules/$K/$(dirname "$rel")"
  cp "$f" "$R/lib/modules/$K/$rel"
  echo "/lib/modules/$K/$rel" >> "$R/etc/kc-insmod"
done < "$B/modlist.txt"
for f in modules.order modules.builtin modules.builtin.modinfo; do
  [[ -f /lib/modules/$K/$f ]] && cp "/lib/modules/$K/$f" "$R/lib/modules/$K/"
done
depmod -b "$R" "$K"
echo "$K" > "$R/etc/kc-kver"
( cd "$R" && find . -print0 | cpio --null -o -H newc --quiet ) | gzip -1 > "$B/initramfs-base.cpio.gz"
ln -sf "/boot/vmlinuz-$K" "$B/vmlinuz"
echo "$K" > "$B/kver"
echo "built $B/initramfs-base.cpio.gz ($(du -h "$B/initramfs-base.cpio.gz" | cut -f1), $(wc -l < "$B/modlist.txt") modules) kernel=/boot/vmlinuz-$K"
