"""Block cloning (FSCTL_DUPLICATE_EXTENTS_TO_FILE) with Python smbprotocol's low-level API,
against a braid serving a share on an xfs file system with reflink (a loop image made
here), a share on tmpfs and a memory share. On xfs a 64 MiB range is cloned: the bytes
match, both files' extents are marked shared (filefrag) and the file system's free space
barely moves; tmpfs and memory shares refuse the control as a volume without block
refcounting does (STATUS_INVALID_DEVICE_REQUEST) and do not report
FILE_SUPPORTS_BLOCK_REFCOUNTING.

Needs root, mkfs.xfs (xfsprogs) and loop devices; skipped with the reason otherwise."""

from __future__ import annotations

import os
import secrets
import shutil
import struct
import subprocess

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.ioctl import IOCTLFlags, SMB2IOCTLRequest
from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask as A, SMB2QueryInfoRequest

import harness
from conftest import TARGET
from harness import Smb

FSCTL_DUPLICATE_EXTENTS_TO_FILE = 0x00098344
FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX = 0x000983E8
FILE_SUPPORTS_BLOCK_REFCOUNTING = 0x08000000
FILE_SUPPORTS_SPARSE_FILES = 0x40

SUCCESS = 0
INVALID_HANDLE = 0xC0000008
INVALID_PARAMETER = 0xC000000D
INVALID_DEVICE_REQUEST = 0xC0000010
ACCESS_DENIED = 0xC0000022
NOT_SUPPORTED = 0xC00000BB

MIB = 1 << 20


def _why_no_xfs() -> str | None:
    if TARGET != "braid":
        return "the clone tests start their own braid"
    if os.geteuid() != 0:
        return "mounting an xfs loop image needs root"
    if not shutil.which("mkfs.xfs"):
        return "mkfs.xfs is not installed (xfsprogs)"
    if not shutil.which("filefrag"):
        return "filefrag is not installed (e2fsprogs)"
    return None


@pytest.fixture(scope="module")
def clone_server():
    """braid with shares xfs (an xfs loop image with reflink), tmp (tmpfs) and mem."""
    why = _why_no_xfs()
    if why:
        pytest.skip(why)
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    root = harness.tmp_dir("braid-test-clone-")
    image, mnt = root / "xfs.img", root / "shares" / "xfs"
    mnt.mkdir(parents=True)
    mounted, srv = False, None
    try:
        # 512 MiB, sparse: xfsprogs refuses file systems much smaller than 300 MiB.
        with open(image, "wb") as f:
            f.truncate(512 * MIB)
        mk = subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], capture_output=True, text=True)
        if mk.returncode != 0:
            pytest.skip(f"mkfs.xfs failed: {mk.stderr.strip()}")
        mount = subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], capture_output=True, text=True)
        if mount.returncode != 0:
            pytest.skip(f"cannot mount a loop image here: {mount.stderr.strip()}")
        mounted = True
        specs = [{"name": "xfs"}, {"name": "tmp"}, {"name": "mem", "backend": "memory", "capacity": "8M"}]
        srv = harness.start_braid(root, users, share_specs=specs)
        yield srv
    finally:
        problem = harness.stop_braid(srv) if srv else None
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(root, ignore_errors=True)
        if problem:
            pytest.fail(f"braid crashed: {problem}", pytrace=False)


def fs_attributes(s: Smb, f) -> int:
    """FileFsAttributeInformation's FileSystemAttributes of the open's share."""
    req = SMB2QueryInfoRequest()
    req["info_type"] = 2            # SMB2_0_INFO_FILESYSTEM
    req["file_info_class"] = 5      # FileFsAttributeInformation
    req["file_id"] = f.file_id
    req["output_buffer_length"] = 1024
    resp = s.conn.receive(s.conn.send(req, s.session.session_id, s.tree.tree_connect_id))
    body = resp["data"].get_value()
    off, _ = struct.unpack_from("<HI", body, 2)
    return struct.unpack_from("<I", body, off - 64)[0]


def dup_extents(s: Smb, target, source_id: bytes, src_off: int, dst_off: int, count: int, *, ex=False) -> int:
    """One FSCTL_DUPLICATE_EXTENTS_TO_FILE(_EX) on `target`; returns the status."""
    data = source_id + struct.pack("<qqq", src_off, dst_off, count)
    if ex:
        data = struct.pack("<Q", 0x30) + data + struct.pack("<II", 0, 0)
    req = SMB2IOCTLRequest()
    req["ctl_code"].enum_strict = False   # smbprotocol's CtlCode lacks these controls
    req["ctl_code"] = FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX if ex else FSCTL_DUPLICATE_EXTENTS_TO_FILE
    req["file_id"] = target.file_id
    req["max_output_response"] = 0
    req["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
    req["buffer"] = data
    request = s.conn.send(req, sid=s.session.session_id, tid=s.tree.tree_connect_id)
    try:
        header = s.conn.receive(request)
    except SMBResponseException as e:
        header = e.header
    return header["status"].get_value()


def shared_extents(path) -> int:
    """How many extents `filefrag -v` marks shared."""
    out = subprocess.run(["filefrag", "-v", str(path)], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if "shared" in line)


def pattern(n: int) -> bytes:
    block = os.urandom(MIB)
    return b"".join(struct.pack("<Q", i) + block[8:] for i in range(n // MIB))


def test_a_64_mib_range_is_cloned_sharing_extents(clone_server):
    d = clone_server.shares["xfs"]
    data = pattern(64 * MIB)
    (d / "src.bin").write_bytes(data)
    os.sync()
    with open(d / "dst.bin", "wb") as f:   # 1 MiB of its own, then room for the clone
        f.write(b"\xee" * MIB)
        f.truncate(65 * MIB)
    free_before = os.statvfs(d).f_bfree * os.statvfs(d).f_frsize
    with Smb(clone_server, share="xfs") as s:
        src = s.open("src.bin", access=A.FILE_READ_DATA | A.FILE_READ_ATTRIBUTES, disposition=CreateDisposition.FILE_OPEN)
        dst = s.open("dst.bin", disposition=CreateDisposition.FILE_OPEN)
        attrs = fs_attributes(s, dst)
        assert attrs & FILE_SUPPORTS_BLOCK_REFCOUNTING, hex(attrs)
        assert attrs & FILE_SUPPORTS_SPARSE_FILES
        assert dup_extents(s, dst, src.file_id, 0, MIB, 64 * MIB) == SUCCESS
        src.close()
        dst.close()
    got = (d / "dst.bin").read_bytes()
    assert len(got) == 65 * MIB, "the target keeps its size"
    assert got[:MIB] == b"\xee" * MIB and got[MIB:] == data
    assert shared_extents(d / "src.bin") > 0 and shared_extents(d / "dst.bin") > 0
    free_after = os.statvfs(d).f_bfree * os.statvfs(d).f_frsize
    assert free_before - free_after < 8 * MIB, "64 MiB cloned, not copied"
    # A write to the clone unshares only what it writes: the source keeps its bytes.
    with Smb(clone_server, share="xfs") as s:
        dst = s.open("dst.bin", disposition=CreateDisposition.FILE_OPEN)
        dst.write(b"\x00" * 4096, MIB)
        dst.close()
    assert (d / "src.bin").read_bytes()[:4096] == data[:4096]
    assert (d / "dst.bin").read_bytes()[MIB:MIB + 4096] == b"\x00" * 4096


def test_the_spec_checks_on_a_share_that_clones(clone_server):
    d = clone_server.shares["xfs"]
    (d / "a.bin").write_bytes(pattern(MIB)[:32768])
    (d / "b.bin").write_bytes(b"\x11" * 32768)
    with Smb(clone_server, share="xfs") as s:
        a = s.open("a.bin", disposition=CreateDisposition.FILE_OPEN)
        b = s.open("b.bin", disposition=CreateDisposition.FILE_OPEN)
        # The _EX form clones the same way.
        assert dup_extents(s, b, a.file_id, 0, 0, 8192, ex=True) == SUCCESS
        assert dup_extents(s, b, a.file_id, 0, 0, 65536) == NOT_SUPPORTED, "past the source's end"
        assert dup_extents(s, a, a.file_id, 0, 8192, 16384) == NOT_SUPPORTED, "overlap within one file"
        assert dup_extents(s, b, a.file_id, 512, 0, 4096) == INVALID_PARAMETER, "unaligned offset"
        assert dup_extents(s, b, a.file_id, -4096, 0, 4096) == INVALID_PARAMETER, "negative offset"
        assert dup_extents(s, b, bytes(16), 0, 0, 4096) == INVALID_HANDLE, "no such source open"
        assert dup_extents(s, b, a.file_id, 0, 0, 0) == SUCCESS
        # A source open without read access, a target without write access.
        w = s.open("a.bin", access=A.FILE_WRITE_DATA, disposition=CreateDisposition.FILE_OPEN)
        assert dup_extents(s, b, w.file_id, 0, 0, 4096) == ACCESS_DENIED
        r = s.open("b.bin", access=A.FILE_READ_DATA, disposition=CreateDisposition.FILE_OPEN)
        assert dup_extents(s, r, a.file_id, 0, 0, 4096) == ACCESS_DENIED
        for f in (a, b, w, r):
            f.close()
    # Another session's open is not this session's to name.
    with Smb(clone_server, share="xfs") as s1, Smb(clone_server, share="xfs") as s2:
        a = s1.open("a.bin", disposition=CreateDisposition.FILE_OPEN)
        b = s2.open("b.bin", disposition=CreateDisposition.FILE_OPEN)
        assert dup_extents(s2, b, a.file_id, 0, 0, 4096) == INVALID_HANDLE
        a.close()
        b.close()
    assert (d / "b.bin").read_bytes()[:8192] == (d / "a.bin").read_bytes()[:8192]
    assert (d / "b.bin").read_bytes()[8192:] == b"\x11" * (32768 - 8192)


def test_unaligned_ends_are_copied_or_zeroed(clone_server):
    """Whole blocks are cloned; a target cut at an unaligned end gets the rest copied, and
    the part of the source's last cluster past its end reads as zeros in the target."""
    d = clone_server.shares["xfs"]
    src = pattern(MIB)[:12288]
    (d / "s.bin").write_bytes(src)
    (d / "short.bin").write_bytes(b"\x44" * 5000)
    (d / "odd.bin").write_bytes(src[:5000])
    (d / "long.bin").write_bytes(b"\x55" * 8192)
    with Smb(clone_server, share="xfs") as s:
        a = s.open("s.bin", disposition=CreateDisposition.FILE_OPEN)
        short = s.open("short.bin", disposition=CreateDisposition.FILE_OPEN)
        assert dup_extents(s, short, a.file_id, 4096, 0, 8192) == SUCCESS
        odd = s.open("odd.bin", disposition=CreateDisposition.FILE_OPEN)
        long = s.open("long.bin", disposition=CreateDisposition.FILE_OPEN)
        assert dup_extents(s, long, odd.file_id, 0, 0, 8192) == SUCCESS
        assert dup_extents(s, long, odd.file_id, 0, 0, 12288) == NOT_SUPPORTED, "past the allocation"
        for f in (a, short, odd, long):
            f.close()
    assert (d / "short.bin").read_bytes() == src[4096:4096 + 5000], "the target keeps its 5000 bytes"
    assert (d / "long.bin").read_bytes() == src[:5000] + bytes(8192 - 5000)


@pytest.mark.parametrize("share", ["tmp", "mem"])
def test_shares_that_cannot_clone_refuse_it(clone_server, share):
    with Smb(clone_server, share=share) as s:
        a = s.open("a.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
        a.write(b"\x22" * 8192, 0)
        b = s.open("b.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
        b.write(b"\x33" * 8192, 0)
        assert not fs_attributes(s, b) & FILE_SUPPORTS_BLOCK_REFCOUNTING
        assert dup_extents(s, b, a.file_id, 0, 0, 8192) == INVALID_DEVICE_REQUEST
        assert dup_extents(s, b, a.file_id, 0, 0, 8192, ex=True) == INVALID_DEVICE_REQUEST
        assert b.read(0, 8192) == b"\x33" * 8192
        a.close()
        b.close()
