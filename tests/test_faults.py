"""Storage that fails: a full file system, a process out of file descriptors, a file system
that answers EIO, and one that stops answering.

- A share on a 4 MiB tmpfs: writes past its end get STATUS_DISK_FULL (SMB) and
  NFS3ERR_NOSPC (NFS); bytes written before stay as they were, other files too, and the
  server keeps serving; once space is freed, writes work again.
- Braid with a low RLIMIT_NOFILE (set on the running process with prlimit): opens past the
  limit get STATUS_INSUFFICIENT_RESOURCES, not a dropped connection; once files are closed,
  opens and new connections work again.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import CreateDisposition

import harness
import nfs_harness
import nfs_rpc

pytestmark = [
    pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                       reason="starts its own braid on a small file system"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (root only)"),
]

DISK_FULL = 0xC000007F
INSUFFICIENT_RESOURCES = 0xC000009A
CHUNK = 64 * 1024


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


@pytest.fixture(scope="module")
def small():
    """braid serving share `data` (SMB and NFS) on a 4 MiB tmpfs."""
    root = harness.tmp_dir("braid-test-faults-")
    # Where the harness puts share `data`: mounted first, so the share lies on it.
    mnt = root / "shares" / "data"
    mnt.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0777", "tmpfs", str(mnt)], check=True)
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    srv = None
    try:
        srv = nfs_harness.start(root, users, [{"name": "data", "lines": ["nfs = true", "nfs_all_squash = true"]}])
        assert srv.shares["data"] == mnt
        yield srv, mnt
    finally:
        problem = harness.stop_braid(srv) if srv else None
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        shutil.rmtree(root, ignore_errors=True)
        assert not problem, problem


def fill(write, limit_chunks: int):
    """Calls write(offset, data) with 64 KiB chunks until it fails; returns (bytes written,
    the failure)."""
    off = 0
    for i in range(limit_chunks):
        err = write(off, pattern(CHUNK, i))
        if err is not None:
            return off, err
        off += CHUNK
    return off, None


def expected(n: int) -> bytes:
    return b"".join(pattern(CHUNK, i) for i in range(n // CHUNK))


def test_a_full_file_system_answers_disk_full_and_loses_nothing(small):
    srv, mnt = small
    keep = pattern(300_000, 99)
    with harness.Smb(srv) as smb:
        f = smb.open("keep.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
        f.write(keep, 0)
        f.close()
        big = smb.open("big.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)

        def write(off, data):
            try:
                big.write(data, off)
            except SMBResponseException as e:
                return e.status
            return None

        written, status = fill(write, 128)
        assert status == DISK_FULL, f"status {status:#x} after {written} bytes"
        assert 0 < written < 4 << 20
        # What was acknowledged is there, and so is the other file.
        got = b"".join(big.read(o, min(1 << 20, written - o)) for o in range(0, written, 1 << 20))
        assert got == expected(written)
        f = smb.open("keep.bin", disposition=CreateDisposition.FILE_OPEN)
        assert f.read(0, len(keep)) == keep
        f.close()
        big.close()
        smb.open("big.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF).close()
        # Space freed: writes work again.
        f = smb.open("again.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
        f.write(pattern(CHUNK, 5), 0)
        f.close()
    assert (mnt / "keep.bin").read_bytes() == keep


def test_nfs_answers_nospc_and_loses_nothing(small):
    srv, mnt = small
    c = nfs_harness.client(srv)
    root = c.root("/data")
    r = c.create(root, "nfsbig.bin")
    assert r.ok, r
    fh = r.fh

    def write(off, data):
        w = c.write(fh, off, data, stable=nfs_rpc.FILE_SYNC)
        return None if w.ok else w.status

    written, status = fill(write, 128)
    assert status == nfs_rpc.NFS3ERR_NOSPC, f"status {status} after {written} bytes"
    assert c.read_all(fh)[:written] == expected(written)
    assert c.remove(root, "nfsbig.bin").ok
    assert c.write(c.create(root, "nfsagain.bin").fh, 0, b"x" * CHUNK).ok


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_out_of_descriptors_answers_insufficient_resources_and_recovers():
    root = harness.tmp_dir("braid-test-fds-")
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    srv = harness.start_braid(root, users, share_specs=[{"name": "data", "lines": ["metadata_cache = false"]}])
    try:
        with harness.Smb(srv) as smb:
            pid = srv.proc.pid
            limit = fd_count(pid) + 48
            subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True)
            opens, status = [], None
            for i in range(200):
                try:
                    opens.append(smb.open(f"f{i}.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF))
                except SMBResponseException as e:
                    status = e.status
                    break
            assert status == INSUFFICIENT_RESOURCES, f"status {status} after {len(opens)} opens"
            assert 10 < len(opens) < 200
            for f in opens[:20]:
                f.close()
            # Room again: opens and a second connection work.
            smb.open("after.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF).close()
            with harness.Smb(srv) as other:
                other.open("other.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF).close()
            for f in opens[20:]:
                f.close()
        assert srv.health() is None
    finally:
        problem = harness.stop_braid(srv)
        shutil.rmtree(root, ignore_errors=True)
        assert not problem, problem


IO_TIMEOUT = 0xC00000B5


def test_a_hung_backend_stalls_only_its_own_share():
    """A share on faultfs whose every call blocks: requests on it answer IO_TIMEOUT after
    storage_timeout, more of them than the share's threads do not starve the others, another
    share keeps serving, and braid still stops on SIGTERM."""
    root = harness.tmp_dir("braid-test-hung-")
    try:
        with faultfs(root, "hung") as (_, set_mode):
            hung_share(root, set_mode)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def hung_share(root, set_mode):
    """Shares `hung` (on faultfs, made to hang) and `good`, as the test above describes."""
    import signal
    import threading
    import time

    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    extra = ['storage_timeout = "2s"', "storage_threads_per_share = 4"]
    specs = [{"name": "hung", "lines": ["nfs = true", "nfs_all_squash = true"]}, {"name": "good"}]
    srv = nfs_harness.start(root, users, specs, server_extra=extra)
    try:
        clients = [harness.Smb(srv, share="hung") for _ in range(3)]
        nfs = nfs_harness.client(srv)
        nfs_root = nfs.root("/hung")
        set_mode("hang")
        results, t0 = [], time.monotonic()

        def one(c, i):
            try:
                c.open(f"new{i}.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
                results.append("opened")
            except SMBResponseException as e:
                results.append(e.status)

        threads = [threading.Thread(target=one, args=(clients[i % 3], i)) for i in range(9)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        # Nine calls on a share allowed four at once: the other share is served meanwhile.
        t1 = time.monotonic()
        with harness.Smb(srv, share="good") as good:
            f = good.open("fine.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
            f.write(b"fine", 0)
            f.close()
        assert time.monotonic() - t1 < 1.0
        for t in threads:
            t.join(30)
        assert results == [IO_TIMEOUT] * 9, results
        assert time.monotonic() - t0 < 10
        # NFS on the same share: "try again later" in time.
        t2 = time.monotonic()
        assert nfs.create(nfs_root, "nfs-new.bin").status == nfs_rpc.NFS3ERR_JUKEBOX
        assert time.monotonic() - t2 < 5
        # A stop does not wait for the stuck calls: braid finishes its stop at once. (The
        # kernel cannot end a thread whose FUSE call the daemon took and never answers, so
        # the process is reaped when the file system answers.)
        srv.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "INFO braid::serve: stopped" not in srv.log.read_text(errors="replace"):
            time.sleep(0.1)
        assert "INFO braid::serve: stopped" in srv.log.read_text(errors="replace")
        assert not harness.port_open(srv.port)
        set_mode("ok")
        srv.proc.wait(15)
        for c in clients:
            c.close()
    finally:
        set_mode("ok")
        if srv.proc.poll() is None:
            harness.stop_braid(srv)


@contextlib.contextmanager
def faultfs(root, share: str = "faulty"):
    """tests/faultfs.py (FUSE, Debian's python3-fuse) mounted where the harness puts `share`,
    over root/backing; yields (backing, set_mode)."""
    backing, mnt, ctl = root / "backing", root / "shares" / share, root / "faultfs.mode"
    backing.mkdir()
    mnt.mkdir(parents=True)
    ctl.write_text("ok\n")
    subprocess.run(["/usr/bin/python3", str(harness.REPO / "tests" / "faultfs.py"), str(backing), str(mnt), str(ctl),
                    "-o", "direct_io"],
                   check=True, timeout=30)
    try:
        yield backing, lambda mode: ctl.write_text(mode + "\n")
    finally:
        ctl.write_text("ok\n")
        subprocess.run(["fusermount", "-u", "-z", str(mnt)], check=False)


def test_io_errors_reach_the_client_and_leave_nothing_behind():
    """A share on faultfs: while reads and writes fail with EIO, SMB and NFS clients get an
    error (the connection stays), and opens that fail leave nothing open; once the file
    system works again, the bytes written before are intact, and the file can be opened
    exclusively and locked (no handle or lock was left behind)."""
    root = harness.tmp_dir("braid-test-eio-")
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    srv = None
    try:
        with faultfs(root) as (backing, set_mode):
            srv = nfs_harness.start(root, users, [{"name": "faulty", "lines": ["nfs = true", "nfs_root_squash = false"]}])
            data = pattern(CHUNK, 3)
            with harness.Smb(srv, share="faulty") as smb:
                f = smb.open("a.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
                f.write(data, 0)
                f.flush()
                lock_range(f, 0, 100, 0x2 | 0x10)  # exclusive, fail immediately
                nfs = nfs_harness.client(srv)
                fh = nfs.lookup(nfs.root("/faulty"), "a.bin").fh
                set_mode("eio")
                for call in (lambda: f.read(0, 4096), lambda: f.write(b"new", 0)):
                    with pytest.raises(SMBResponseException) as e:
                        call()
                    assert e.value.status >= 0xC0000000, f"{e.value.status:#x}"
                # Past the SMB lock's bytes (NFS I/O inside them fails with ACCES first).
                assert nfs.read(fh, 4096, 4096).status == nfs_rpc.NFS3ERR_IO
                assert nfs.write(fh, 4096, b"new").status == nfs_rpc.NFS3ERR_IO
                assert nfs.read(fh, 0, 4096).status == nfs_rpc.NFS3ERR_ACCES, "inside the SMB exclusive lock"
                set_mode("eio-open")
                with pytest.raises(SMBResponseException):
                    smb.open("b.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
                assert not nfs.create(nfs.root("/faulty"), "c.bin").ok
                # Closed while the file system still fails: the handle and its lock go.
                f.close()
                set_mode("ok")
                nfs.close()
            assert (backing / "a.bin").read_bytes() == data
            with harness.Smb(srv, share="faulty") as smb:
                g = smb.open("a.bin", share_access=0)
                lock_range(g, 0, 100, 0x2 | 0x10)
                assert g.read(0, CHUNK) == data
                g.close()
    finally:
        problem = harness.stop_braid(srv) if srv else None
        shutil.rmtree(root, ignore_errors=True)
        assert not problem, problem


def lock_range(f, offset, length, flags):
    from smbprotocol.open import SMB2LockElement

    el = SMB2LockElement()
    el["offset"], el["length"], el["flags"] = offset, length, flags
    f.lock([el])
