#!/usr/bin/env bash
# install-deps.sh - make sure everything the test suite needs is installed (idempotent, quiet
# unless it installs something).  Debian/Ubuntu: apt for the Samba tools, pip for Python packages.
#   smbclient (smbclient), smbd/pdbedit/smbpasswd (samba; the reference peer),
#   smbtorture (samba-testsuite), nfs-ls/nfs-cp/nfs-cat (libnfs-utils), ganesha.nfsd with FSAL_VFS
#   (nfs-ganesha, nfs-ganesha-vfs; the NFS peer), chromium (headless, for the admin page),
#   mkfs.xfs/filefrag (xfsprogs, e2fsprogs; block cloning on an xfs image), QEMU, a Debian
#   kernel, busybox-static, socat, cpio, kmod (the kernel cifs client in a guest), python3 + pip, Python: smbprotocol, pytest; Rust: cargo (checked
#   only), the nightly toolchain (rustup) and cargo-fuzz (cargo install) for the fuzz stage.
# Works non-interactively (CI, no stdin) as root, or via passwordless sudo.
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
export PATH="$PATH:/usr/sbin:/sbin:$HOME/.cargo/bin"

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=(sudo -n); fi
fi

missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need smbclient smbclient
need bindfs bindfs     # tests/test_metadata_cache.py (a FUSE share)
/usr/bin/python3 -c "import fuse" >/dev/null 2>&1 || missing+=(python3-fuse)  # tests/faultfs.py (a FUSE file system that fails on demand)
need smbd samba
need pdbedit samba
need smbtorture samba-testsuite
need python3 python3
need jq jq            # bench/compare.sh
need bc bc            # bench/smbclient-1g.sh
need bindfs bindfs    # bench/meta.sh (a FUSE file system under the shares)
need iptables iptables  # smbtorture multichannel channel blocking
need nfs-ls libnfs-utils       # tests/test_nfs.py (libnfs's nfs-ls, nfs-cp, nfs-cat)
need rpcbind rpcbind            # tests/test_portmap.py (Debian's rpcbind to register with)
need rpcinfo rpcbind            # tests/test_portmap.py (rpcinfo -p)
need showmount nfs-common       # tests/test_portmap.py (showmount -e)
need ganesha.nfsd nfs-ganesha  # bench/ganesha.sh (the NFS peer)
[[ -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so || -n $(find /usr/lib* -name 'libfsalvfs.so*' -print -quit 2>/dev/null) ]] \
  || missing+=(nfs-ganesha-vfs)  # ganesha's FSAL_VFS
need gcc gcc                   # bench/ganesha.sh builds its rpcbind shim
need ip iproute2               # bench/ganesha.sh with NLM: its network namespace and veth pair
need unshare util-linux        # bench/ganesha.sh with NLM: a private mount namespace
need chromium chromium         # tests/test_admin_page.py (the live page in a headless browser)
need mkfs.xfs xfsprogs         # tests/test_clone.py (an xfs loop image with reflink)
need filefrag e2fsprogs        # tests/test_clone.py (shared extents)
# tests/test_kclient.py: the Linux kernel's cifs client in a QEMU guest (interop/kclient/):
# QEMU, Debian's kernel and modules for the guest, a static busybox, socat for the port
# forwarding, cpio/kmod/file to build its initramfs.
need qemu-system-x86_64 qemu-system-x86
need socat socat
need cpio cpio
need depmod kmod
need file file
# and for its NFS locks (KC_NFS_LOCKS): the guest runs Debian's rpcbind and rpc.statd, and nft
need rpc.statd nfs-common
need sm-notify nfs-common
need nft nftables
[[ -x /bin/busybox ]] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || missing+=(busybox-static)
compgen -G '/boot/vmlinuz-*' >/dev/null || missing+=(linux-image-amd64)
if ! python3 -c 'import smbprotocol, pytest' 2>/dev/null && ! python3 -m pip --version >/dev/null 2>&1; then
  missing+=(python3-pip)
fi

if ((${#missing[@]})); then
  readarray -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  if ! command -v apt-get >/dev/null; then
    echo "install-deps: please install: ${missing[*]} (no apt-get on this system)" >&2; exit 1
  fi
  if [[ $(id -u) -ne 0 && ${#SUDO[@]} -eq 0 ]]; then
    echo "install-deps: need root (or passwordless sudo) to apt-get install: ${missing[*]}" >&2; exit 1
  fi
  echo "install-deps: apt-get install ${missing[*]}"
  # package lists may be missing on a fresh machine: update only if a plain install fails
  if ! "${SUDO[@]}" apt-get install -y -q "${missing[@]}" </dev/null >/tmp/install-deps-apt.log 2>&1; then
    "${SUDO[@]}" apt-get update -q </dev/null >>/tmp/install-deps-apt.log 2>&1
    "${SUDO[@]}" apt-get install -y -q "${missing[@]}" </dev/null >>/tmp/install-deps-apt.log 2>&1 \
      || { tail -n 30 /tmp/install-deps-apt.log >&2; echo "install-deps: apt-get failed" >&2; exit 1; }
  fi
fi

pymissing=()
python3 -c 'import smbprotocol' 2>/dev/null || pymissing+=(smbprotocol)
python3 -c 'import pytest' 2>/dev/null || pymissing+=(pytest)
if ((${#pymissing[@]})); then
  echo "install-deps: pip install ${pymissing[*]}"
  python3 -m pip install -q "${pymissing[@]}" </dev/null 2>/tmp/install-deps-pip.log ||
    python3 -m pip install -q --break-system-packages "${pymissing[@]}" </dev/null 2>>/tmp/install-deps-pip.log ||
    { cat /tmp/install-deps-pip.log >&2; echo "install-deps: pip install failed" >&2; exit 1; }
fi

if ! command -v cargo >/dev/null; then
  echo "install-deps: Rust toolchain (cargo) not found. Install it from https://rustup.rs" \
       "(curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y), then re-run." >&2
  exit 1
fi

# The fuzz targets (fuzz/) build with cargo-fuzz, which needs nightly for its sanitizer flags.
if ! cargo +nightly --version >/dev/null 2>&1; then
  command -v rustup >/dev/null || { echo "install-deps: no nightly toolchain and no rustup to install it" >&2; exit 1; }
  echo "install-deps: rustup toolchain install nightly"
  rustup toolchain install nightly --profile minimal </dev/null >/tmp/install-deps-nightly.log 2>&1 ||
    { tail -n 20 /tmp/install-deps-nightly.log >&2; echo "install-deps: rustup failed" >&2; exit 1; }
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "install-deps: cargo install cargo-fuzz --locked"
  cargo install cargo-fuzz --locked </dev/null >/tmp/install-deps-cargo-fuzz.log 2>&1 ||
    { tail -n 20 /tmp/install-deps-cargo-fuzz.log >&2; echo "install-deps: cargo install cargo-fuzz failed" >&2; exit 1; }
fi
exit 0
