"""One share over SMB (Python smbprotocol) and NFSv3 (tests/nfs_rpc.py) at once: data written by
one protocol is read by the other, NFS changes break SMB leases first and reach SMB change
notifications, SMB share modes refuse NFS operations, and NFS file handles follow what SMB does
to a file (rename, delete)."""

from __future__ import annotations

import os
import secrets
import shutil
import struct
import uuid

import pytest
from smbprotocol.change_notify import CompletionFilter, FileAction, FileSystemWatcher
from smbprotocol.connection import Dialects
from smbprotocol.file_info import FileDispositionInformation, FileRenameInformation
from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask as A, ShareAccess

import harness
import nfs_harness
import nfs_rpc as n
from harness import Smb
from nfs_rpc import Sattr3
from test_oplocks import LEASE, BreakCatcher, ack, create, lease_v2

pytestmark = [
    pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                       reason="NFS is braid's own"),
    pytest.mark.skipif(os.geteuid() != 0, reason="NFS credentials (setfsuid) need root"),
]

R, H, W = 0x1, 0x2, 0x4
SHARE = "both"


@pytest.fixture(scope="module")
def srv():
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    root = harness.tmp_dir("braid-nfs-smb-")
    try:
        s = nfs_harness.start(root, users, [{"name": SHARE, "lines": ["nfs = true", "nfs_root_squash = false"]}])
    except Exception as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start braid with NFS: {e}", pytrace=False)
    try:
        yield s
    finally:
        problem = nfs_harness.stop(s, "braid-nfs-smb")
        if problem:
            pytest.fail(f"braid crashed: {problem}", pytrace=False)


@pytest.fixture
def nfs(srv):
    with nfs_harness.client(srv) as c:
        yield c


@pytest.fixture
def smb(srv):
    with Smb(srv, share=SHARE, dialect=Dialects.SMB_3_1_1) as s:
        yield s


@pytest.fixture
def where(srv, nfs, smb, request):
    """A fresh directory made over SMB: (its name, its NFS handle, its path on disk)."""
    name = f"x-{request.node.name[:30]}-{secrets.token_hex(3)}"
    smb.open(name, directory=True, disposition=CreateDisposition.FILE_CREATE).close()
    root = nfs.root(f"/{SHARE}")
    r = nfs.lookup(root, name)
    assert r.ok, r
    return name, r.fh, srv.shares[SHARE] / name


def must(r):
    assert r.ok, r
    return r


def test_smb_write_then_nfs_read(nfs, smb, where):
    name, dirfh, path = where
    data = os.urandom(300_001)
    f = smb.open(rf"{name}\from-smb.bin", disposition=CreateDisposition.FILE_CREATE)
    f.write(data, 0)
    f.close()
    lk = must(nfs.lookup(dirfh, "from-smb.bin"))
    assert lk.attr.size == len(data)
    assert b"from-smb.bin" in [e.name for e in nfs.list_all(dirfh)]
    st = os.stat(path)
    assert must(nfs.getattr(dirfh)).attr.mtime == (st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9), \
        "NFS sees a stale directory mtime after an SMB create"
    assert nfs.read_all(lk.fh) == data
    # Overwritten and shrunk over SMB: NFS sees the new size and bytes at once.
    f = smb.open(rf"{name}\from-smb.bin", disposition=CreateDisposition.FILE_OVERWRITE)
    f.write(b"short", 0)
    f.close()
    assert must(nfs.getattr(lk.fh)).attr.size == 5
    assert nfs.read_all(lk.fh) == b"short"


def test_nfs_write_then_smb_read(nfs, smb, where):
    name, dirfh, path = where
    data = os.urandom(200_003)
    fh = must(nfs.create(dirfh, "from-nfs.bin", n.GUARDED, Sattr3(mode=0o644))).fh
    nfs.write_all(fh, data, stable=n.UNSTABLE)
    must(nfs.commit(fh))
    f = smb.open(rf"{name}\from-nfs.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    assert f.end_of_file == len(data)
    assert f.read(0, len(data)) == data
    f.close()
    # Grown over NFS after SMB has looked (and the metadata cache holds the old size).
    must(nfs.write(fh, len(data), b"tail"))
    f = smb.open(rf"{name}\from-nfs.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    assert f.end_of_file == len(data) + 4, "SMB sees a stale size after an NFS WRITE"
    assert f.read(len(data), 4) == b"tail"
    f.close()
    # Truncated over NFS: SMB sees the new size.
    must(nfs.setattr(fh, Sattr3(size=10)))
    f = smb.open(rf"{name}\from-nfs.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    assert f.end_of_file == 10 and f.read(0, 10) == data[:10]
    f.close()
    assert sorted(e for e in smb_list(smb, name)) == ["from-nfs.bin"]


def smb_list(smb, dirname):
    from smbprotocol.file_info import FileInformationClass
    d = smb.open(dirname, access=A.GENERIC_READ, directory=True, disposition=CreateDisposition.FILE_OPEN)
    try:
        entries = d.query_directory("*", FileInformationClass.FILE_NAMES_INFORMATION)
        return [e["file_name"].get_value().decode("utf-16-le") for e in entries
                if e["file_name"].get_value().decode("utf-16-le") not in (".", "..")]
    finally:
        d.close()


def test_nfs_write_breaks_an_smb_lease_first(srv, nfs, smb, where):
    name, dirfh, path = where
    catcher = BreakCatcher(smb.conn)
    key = uuid.uuid4().bytes
    fa, ctx = create(smb, rf"{name}\leased.bin", oplock=LEASE, contexts=[lease_v2(key, R | W | H)])
    assert ctx[0]["lease_state"].get_value() == R | W | H
    fa.write(b"cached by smb", 0)
    fh = must(nfs.lookup(dirfh, "leased.bin")).fh
    xid = nfs.rpc.send_call(n.PROG_NFS, 3, n.WRITE,
                            n.Packer().opaque(fh).u64(0).u32(3).u32(n.FILE_SYNC).opaque(b"NFS").bytes())
    body = catcher.wait(10)
    assert body is not None, "no lease break before the NFS WRITE"
    _, _, flags = struct.unpack_from("<HHI", body)
    assert body[8:24] == key
    cur, new = struct.unpack_from("<II", body, 24)
    assert cur == R | W | H and new & (R | W) == 0, (cur, new)
    if flags & 1:
        # The WRITE waits for the acknowledgment (the SMB client may still flush its cache).
        assert not nfs.rpc.readable_within(0.5), "the NFS WRITE did not wait for the lease break"
        fa.write(b"flushed", 20)
        status, _ = ack(smb, struct.pack("<HHI", 36, 0, 0) + key + struct.pack("<IQ", new, 0))
        assert status == 0
    status = nfs.rpc.wait_reply(xid).u32()
    if status == n.NFS3ERR_JUKEBOX:  # "try again later": a client retries
        status = nfs.write(fh, 0, b"NFS", n.FILE_SYNC).status
    assert status == n.NFS3_OK, n.status_name(status)
    fa.close()
    data = (path / "leased.bin").read_bytes()
    assert data.startswith(b"NFShed by smb"), data
    if flags & 1:
        assert data[20:27] == b"flushed"


def test_nfs_remove_breaks_an_smb_handle_lease(srv, nfs, smb, where):
    name, dirfh, path = where
    (path / "handle.bin").write_bytes(b"h")
    catcher = BreakCatcher(smb.conn)
    key = uuid.uuid4().bytes
    fa, ctx = create(smb, rf"{name}\handle.bin", oplock=LEASE, contexts=[lease_v2(key, R | H)],
                     disposition=CreateDisposition.FILE_OPEN)
    assert ctx[0]["lease_state"].get_value() == R | H
    xid = nfs.rpc.send_call(n.PROG_NFS, 3, n.REMOVE, n.Packer().opaque(dirfh).string("handle.bin").bytes())
    body = catcher.wait(10)
    assert body is not None, "no lease break for an NFS REMOVE"
    _, _, flags = struct.unpack_from("<HHI", body)
    cur, new = struct.unpack_from("<II", body, 24)
    assert cur == R | H and new & H == 0, (cur, new)
    if flags & 1:
        ack(smb, struct.pack("<HHI", 36, 0, 0) + key + struct.pack("<IQ", new, 0))
    fa.close()
    status = nfs.rpc.wait_reply(xid).u32()
    assert status in (n.NFS3_OK, n.NFS3ERR_JUKEBOX, n.NFS3ERR_ACCES), status
    if status == n.NFS3_OK:
        assert not (path / "handle.bin").exists()


def test_smb_deny_all_open_refuses_nfs_remove_rename_and_write(nfs, smb, where):
    name, dirfh, path = where
    (path / "locked.bin").write_bytes(b"locked")
    fh = must(nfs.lookup(dirfh, "locked.bin")).fh
    f = smb.open(rf"{name}\locked.bin", share_access=0, disposition=CreateDisposition.FILE_OPEN)
    try:
        assert nfs.remove(dirfh, "locked.bin").status == n.NFS3ERR_ACCES
        assert nfs.rename(dirfh, "locked.bin", dirfh, "moved.bin").status == n.NFS3ERR_ACCES
        assert nfs.write(fh, 0, b"X").status == n.NFS3ERR_JUKEBOX
        assert nfs.setattr(fh, Sattr3(size=0)).status == n.NFS3ERR_JUKEBOX
        assert (path / "locked.bin").read_bytes() == b"locked"
    finally:
        f.close()
    # Closed: NFS may now.
    must(nfs.write(fh, 0, b"L"))
    must(nfs.rename(dirfh, "locked.bin", dirfh, "moved.bin"))
    must(nfs.remove(dirfh, "moved.bin"))
    assert not (path / "moved.bin").exists()
    # Shared for reading only: NFS reads, but may not write.
    (path / "ro.bin").write_bytes(b"r")
    fh = must(nfs.lookup(dirfh, "ro.bin")).fh
    f = smb.open(rf"{name}\ro.bin", access=A.GENERIC_READ, share_access=ShareAccess.FILE_SHARE_READ,
                 disposition=CreateDisposition.FILE_OPEN)
    try:
        assert must(nfs.read(fh, 0, 1)).data == b"r"
        assert nfs.write(fh, 0, b"w").status == n.NFS3ERR_JUKEBOX
    finally:
        f.close()


def test_nfs_changes_reach_smb_change_notify(nfs, smb, where):
    name, dirfh, path = where
    d = smb.open(name, access=A.GENERIC_READ, directory=True, disposition=CreateDisposition.FILE_OPEN)
    try:
        w = FileSystemWatcher(d)
        w.start(CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME | CompletionFilter.FILE_NOTIFY_CHANGE_DIR_NAME)
        must(nfs.create(dirfh, "made-by-nfs.txt"))
        assert w.response_event.wait(10), "no change notification for an NFS CREATE"
        got = [(c["action"].get_value(), c["file_name"].get_value()) for c in w.wait()]
        assert (FileAction.FILE_ACTION_ADDED, "made-by-nfs.txt") in got, got
        w = FileSystemWatcher(d)
        w.start(CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME)
        must(nfs.rename(dirfh, "made-by-nfs.txt", dirfh, "renamed.txt"))
        assert w.response_event.wait(10), "no change notification for an NFS RENAME"
        got = [(c["action"].get_value(), c["file_name"].get_value()) for c in w.wait()]
        assert (FileAction.FILE_ACTION_RENAMED_OLD_NAME, "made-by-nfs.txt") in got, got
        assert (FileAction.FILE_ACTION_RENAMED_NEW_NAME, "renamed.txt") in got, got
        w = FileSystemWatcher(d)
        w.start(CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME)
        must(nfs.remove(dirfh, "renamed.txt"))
        assert w.response_event.wait(10), "no change notification for an NFS REMOVE"
        got = [(c["action"].get_value(), c["file_name"].get_value()) for c in w.wait()]
        assert (FileAction.FILE_ACTION_REMOVED, "renamed.txt") in got, got
    finally:
        d.close()


def test_nfs_handles_follow_smb_rename_and_delete(nfs, smb, where):
    name, dirfh, path = where
    fh = must(nfs.create(dirfh, "walker.txt")).fh
    must(nfs.write(fh, 0, b"walk"))
    f = smb.open(rf"{name}\walker.txt", access=A.GENERIC_READ | A.DELETE, disposition=CreateDisposition.FILE_OPEN)
    info = FileRenameInformation()
    info["replace_if_exists"] = False
    info["file_name"] = rf"{name}\walked.txt"
    smb.set_info(f, info)
    f.close()
    # The old name is gone for NFS at once (the metadata cache is shared), the handle lives on.
    assert nfs.lookup(dirfh, "walker.txt").status == n.NFS3ERR_NOENT
    assert must(nfs.lookup(dirfh, "walked.txt")).fh == fh
    assert must(nfs.read(fh, 0, 10)).data == b"walk"
    f = smb.open(rf"{name}\walked.txt", access=A.DELETE, disposition=CreateDisposition.FILE_OPEN)
    disp = FileDispositionInformation()
    disp["delete_pending"] = True
    smb.set_info(f, disp)
    f.close()
    assert nfs.getattr(fh).status == n.NFS3ERR_STALE
    assert nfs.lookup(dirfh, "walked.txt").status == n.NFS3ERR_NOENT
