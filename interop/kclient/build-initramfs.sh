#!/usr/bin/env bash
# build-initramfs.sh - build build/initramfs-base.cpio.gz (busybox-static,
# kmount, dircache, kclock, kernel modules for virtio-net + cifs + nfsv3 + crypto, /init, test.sh;
# for NFS locks (KC_NFS_LOCKS=1): Debian's rpcbind, rpcinfo, rpc.statd, sm-notify and nft with
# their shared libraries, /etc files they read, and nf_tables NAT modules loaded on demand)
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
gcc -static -O2 -s -Wall -o "$B/kclock" "$HERE/kclock.c"
R="$B/root"; rm -rf "$R"; mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,mnt,kc,lib/modules/$K}
cp "$BB" "$R/bin/busybox"
cp "$B/kmount" "$R/bin/kmount"
cp "$B/dircache" "$R/bin/dircache"
cp "$B/kclock" "$R/bin/kclock"
cp "$HERE/init.sh" "$R/init"; chmod 755 "$R/init"
cp "$HERE/guest-test.sh" "$R/kc/test.sh"
cp "$HERE/guest-locks.sh" "$R/kc/locks.sh"
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
# nf_tables NAT and conntrack for NLM/NSM callbacks (KC_NLM_CALLBACK): loaded by test.sh only when asked
: > "$R/etc/kc-insmod-nat"
for m in nft_chain_nat nft_nat nft_ct; do
  modprobe -S "$K" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}' || true
done | awk '!seen[$0]++' | grep -vxFf "$B/modlist.txt" > "$B/modlist-nat.txt" || true
while read -r f; do
  rel="${f#/lib/modules/$K/}"
  mkdir -p "$R/lib/modules/$K/$(dirname "$rel")"
  cp "$f" "$R/lib/modules/$K/$rel"
  echo "/lib/modules/$K/$rel" >> "$R/etc/kc-insmod-nat"
done < "$B/modlist-nat.txt"
depmod -b "$R" "$K"
# NFS locking userspace (Debian's own binaries + the libraries ldd names): the guest kernel's
# lockd registers with rpcbind, and asks rpc.statd (found through rpcbind) to monitor servers
NLMBINS="/usr/sbin/rpcbind /usr/sbin/rpcinfo /usr/sbin/rpc.statd /usr/sbin/sm-notify /usr/sbin/nft"
for b in $NLMBINS; do
  [[ -x $b ]] && continue
  echo "warning: $b missing (apt-get install rpcbind nfs-common nftables): no NFS locks (KC_NFS_LOCKS) in the guest" >&2
  NLMBINS=""; break
done
for b in $NLMBINS; do mkdir -p "$R$(dirname "$b")"; cp -L "$b" "$R$b"; done
[[ -n $NLMBINS ]] && ldd $NLMBINS | awk '$2=="=>" && $3 ~ /^\//{print $3} $1 ~ /^\// && NF==2{print $1}' | sort -u | while read -r l; do
  mkdir -p "$R$(dirname "$l")"; cp -L "$l" "$R$l"
done
for f in netconfig services protocols rpc; do [[ -f /etc/$f ]] && cp "/etc/$f" "$R/etc/$f"; done
cat > "$R/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
_rpc:x:102:65534::/run/rpcbind:/usr/sbin/nologin
statd:x:103:65534::/var/lib/nfs:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PW
printf 'root:x:0:\nnogroup:x:65534:\n' > "$R/etc/group"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\nrpc: files\n' > "$R/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n10.0.2.15 kclient\n10.0.2.100 kcserver\n' > "$R/etc/hosts"
mkdir -p "$R/var/lib/nfs/sm" "$R/var/lib/nfs/sm.bak" "$R/run/rpcbind"
: > "$R/var/lib/nfs/state"
chown -R 103:65534 "$R/var/lib/nfs"; chown 102:0 "$R/run/rpcbind"
ln -s ../run "$R/var/run"
ln -s /usr/sbin/sm-notify "$R/sbin/sm-notify"   # rpc.statd runs /sbin/sm-notify at start
echo "$K" > "$R/etc/kc-kver"
( cd "$R" && find . -print0 | cpio --null -o -H newc --quiet ) | gzip -1 > "$B/initramfs-base.cpio.gz"
ln -sf "/boot/vmlinuz-$K" "$B/vmlinuz"
echo "$K" > "$B/kver"
echo "built $B/initramfs-base.cpio.gz ($(du -h "$B/initramfs-base.cpio.gz" | cut -f1), $(wc -l < "$B/modlist.txt") modules) kernel=/boot/vmlinuz-$K"
