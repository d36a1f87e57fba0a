"""Interop with the Python smbprotocol client (low-level API, high-level smbclient where simpler)."""

import contextlib
import os
import random
import subprocess
import time
from pathlib import Path

import pytest
import smbclient as hl
from smbprotocol.connection import Dialects
from smbprotocol.exceptions import SMBOSError, SMBResponseException
from smbprotocol.file_info import (FileAttributes, FileBasicInformation, FileDispositionInformation,
                                   FileEndOfFileInformation, FileRenameInformation,
                                   FileStandardInformation)
from smbprotocol.open import (CreateDisposition, CreateOptions, FilePipePrinterAccessMask as A,
                              LockFlags, SMB2LockElement, ShareAccess)

from harness import Smb, St

DIALECTS = [pytest.param(Dialects.SMB_2_1_0, id="2.1"),
            pytest.param(Dialects.SMB_3_0_2, id="3.0.2"),
            pytest.param(Dialects.SMB_3_1_1, id="3.1.1")]


@pytest.fixture
def smb(braid_server):
    with Smb(braid_server) as s:
        yield s


@pytest.fixture
def hlkw(braid_server):
    """kwargs for the high-level smbclient module, with a private connection cache."""
    cache = {}
    kw = dict(username=braid_server.user, password=braid_server.password, port=braid_server.port,
              connection_cache=cache, auth_protocol="ntlm")
    yield kw
    hl.reset_connection_cache(connection_cache=cache)


def status_of(excinfo) -> int:
    e = excinfo.value
    return e.status if isinstance(e, SMBResponseException) else e.ntstatus


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dialect_basic_io(braid_server, scratch, dialect):
    name, path = scratch
    with Smb(braid_server, dialect=dialect) as s:
        assert s.conn.dialect == dialect
        f = s.open(rf"{name}\basic.bin", disposition=CreateDisposition.FILE_CREATE)
        data = os.urandom(100_000)
        assert f.write(data, 0) == len(data)
        assert f.read(0, len(data)) == data
        assert f.read(1000, 10) == data[1000:1010]
        f.close()
        assert (path / "basic.bin").read_bytes() == data
        f = s.open(rf"{name}\basic.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
        assert f.read(0, len(data)) == data
        with pytest.raises(SMBResponseException) as ei:
            f.read(len(data), 10)
        assert ei.value.status == St.END_OF_FILE
        f.close()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_random_io(braid_server, scratch, dialect):
    name, path = scratch
    rng = random.Random(0xB4A1D + dialect)
    model = bytearray()
    with Smb(braid_server, dialect=dialect) as s:
        f = s.open(rf"{name}\random.bin", disposition=CreateDisposition.FILE_CREATE)
        for _ in range(200):
            size = rng.randint(1, 256 * 1024)
            if rng.random() < 0.5 or not model:
                off = rng.randint(0, 3 * 1024 * 1024)
                data = rng.randbytes(size)
                assert f.write(data, off) == size
                if off > len(model):
                    model.extend(bytes(off - len(model)))
                model[off:off + size] = data
            else:
                off = rng.randrange(len(model))
                got = f.read(off, size)
                assert got == bytes(model[off:off + size]), f"read({off}, {size}) mismatch"
        f.close()
    assert (path / "random.bin").read_bytes() == bytes(model)


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_large_reads_one_at_a_time(braid_server, scratch, signed):
    """READs of 64 KiB to 2 MiB with nothing else in flight: signed ones are copied on the
    server's async worker, unsigned ones from a tmpfs share are written to the socket from a
    mapping of the file (from 64 KiB while the connection's writer is free). The bytes, short reads at EOF and END_OF_FILE past it must be the
    same on every path."""
    smb = Smb(braid_server, require_signing=signed)
    name, path = scratch
    data = os.urandom(5 * 1024 * 1024 + 12345)
    (path / "big.bin").write_bytes(data)
    f = smb.open(rf"{name}\big.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    max_read = smb.conn.max_read_size
    rng = random.Random(0x10E)
    for size in (64 * 1024, 100 * 1024 + 3, 256 * 1024 + 1, 1024 * 1024, max_read):
        for _ in range(4):
            off = rng.randrange(len(data))
            assert f.read(off, size) == data[off:off + size], f"read({off}, {size})"
    # the last bytes: a short read, then nothing
    assert f.read(len(data) - 1000, max_read) == data[-1000:]
    with pytest.raises(SMBResponseException) as ei:
        f.read(len(data), max_read)
    assert ei.value.status == St.END_OF_FILE
    f.close()
    smb.close()


def _for_seconds(secs):
    """Yields until `secs` seconds have passed."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        yield


@contextlib.contextmanager
def _cutting(local, step):
    """Runs step(file) over and over in another thread (another process's view of the share)
    while the body runs."""
    import threading
    stop = threading.Event()

    def churn():
        with open(local, "r+b") as h:
            while not stop.is_set():
                step(h)

    t = threading.Thread(target=churn)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


@pytest.mark.parametrize("mode", ["plain", "signed", "encrypted"])
def test_large_reads_racing_a_truncate(braid_server, scratch, mode):
    """Large unsigned READs of a tmpfs file are sent from a mapping of it and encrypted ones
    sealed straight out of it (user space reads the mapping); signed ones are read into a
    buffer. A file cut short while a READ is on its way must not take the server or the
    connection down: each READ answers with the length it announced (the part that vanished
    as zeros) or END_OF_FILE, every signature checks and every encrypted response opens, and
    once the file is still, READs return exactly its bytes."""
    name, path = scratch
    _reads_racing_a_truncate(braid_server, name, path, mode)


def _reads_racing_a_truncate(srv, name, path, mode):
    size = 4 * 1024 * 1024
    data = os.urandom(size)
    local = path / "shrinking.bin"
    local.write_bytes(data)
    smb = Smb(srv, require_signing=mode != "plain", require_encryption=mode == "encrypted")
    f = smb.open(rf"{name}\shrinking.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)

    def cut_and_restore(h):
        h.truncate(random.randrange(size))
        h.seek(0)
        h.write(data)
        h.flush()

    reads = 0
    with _cutting(local, cut_and_restore):
        for _ in _for_seconds(3):
            # 1 MiB READs are always mapped, 64 KiB ones while the writer is free
            want = random.choice((64 * 1024, 1024 * 1024))
            off = random.randrange(0, size - want, 4096)
            try:
                got = f.read(off, want)
            except SMBResponseException as e:
                assert e.status == St.END_OF_FILE
                continue
            reads += 1
            assert 0 < len(got) <= want
            # every byte is the file's or a zero from the cut
            for i in range(0, len(got), 65536):
                chunk = got[i:i + 65536]
                assert chunk == data[off + i:off + i + len(chunk)] or chunk.count(0) > 0
    assert reads > 0
    local.write_bytes(data)
    assert f.read(size - 2 * 1024 * 1024, 2 * 1024 * 1024) == data[-2 * 1024 * 1024:]
    f.close()
    smb.close()


def _disk_dir():
    """A directory on a disk file system (/var/tmp, or the temp dir), or None if both are
    kept in memory."""
    import tempfile
    for base in ("/var/tmp", tempfile.gettempdir()):
        if os.path.isdir(base) and os.access(base, os.W_OK):
            fs = subprocess.run(["stat", "-f", "-c", "%T", base], capture_output=True, text=True).stdout.strip()
            if fs not in ("tmpfs", "ramfs", ""):
                return base
    return None


@pytest.fixture(scope="module")
def disk_server():
    """A Braid server whose data share lives on a disk file system (ext4, xfs, ...)."""
    import secrets
    import shutil
    import tempfile
    import harness
    if os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid":
        pytest.skip("Braid's own read paths")
    base = _disk_dir()
    if base is None:
        pytest.skip("no disk file system to put a share on")
    root = Path(tempfile.mkdtemp(prefix="braid-disk-test-", dir=base))
    root.chmod(0o755)
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    try:
        srv = harness.start_braid(root, users, share_specs=[{"name": "data"}])
    except Exception as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start braid on a disk share: {e}", pytrace=False)
    yield srv
    problem = harness.stop_braid(srv)
    shutil.rmtree(root, ignore_errors=True)
    assert not problem, f"braid (disk share) crashed: {problem}"


def _read_chars(pid):
    with open(f"/proc/{pid}/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.mark.parametrize("mode", ["plain", "encrypted"])
def test_large_reads_of_cached_disk_files_are_sent_from_a_mapping(disk_server, mode):
    """A large plain READ of a file on a disk file system whose pages are in the page cache
    is sent from a mapping of the file, as for tmpfs, and an encrypted one sealed out of it:
    the server's read system calls (its /proc rchar, which pread, sendfile and socket
    receives count and a copy from a mapping does not) grow by far less than the bytes it
    returns, and the bytes are the file's."""
    share = disk_server.shares["data"]
    data = os.urandom(8 * 1024 * 1024)
    (share / f"cached-{mode}.bin").write_bytes(data)
    smb = Smb(disk_server, require_signing=False, require_encryption=mode == "encrypted")
    f = smb.open(rf"cached-{mode}.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    f.read(0, 4096)  # the open and its first READ out of the way
    before = _read_chars(disk_server.proc.pid)
    got = 0
    for off in range(0, len(data), 1024 * 1024):
        block = f.read(off, 1024 * 1024)
        assert block == data[off:off + 1024 * 1024], f"read({off})"
        got += len(block)
    read_by_server = _read_chars(disk_server.proc.pid) - before
    assert got == len(data)
    assert read_by_server < got // 8, f"server read {read_by_server} bytes to send {got}"
    f.close()
    smb.close()


@pytest.mark.parametrize("mode", ["plain", "signed", "encrypted"])
def test_large_reads_of_a_disk_file_racing_a_truncate(disk_server, mode):
    """As test_large_reads_racing_a_truncate, with the file on a disk file system: cached
    ranges are sent (or sealed) from its mapping, and a cut under them answers as there."""
    import secrets
    name = "race_" + secrets.token_hex(3)
    path = disk_server.shares["data"] / name
    path.mkdir()
    try:
        _reads_racing_a_truncate(disk_server, name, path, mode)
    finally:
        import shutil
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("mode", ["plain", "signed", "encrypted"])
def test_large_overwrites_from_two_connections(braid_server, scratch, mode):
    """1 MiB WRITEs into an existing tmpfs file from two connections at once: large plain
    frames arriving together are spliced, and a spliced payload that overwrites a memory file
    is copied into it through a mapping by the kernel; signed and encrypted payloads are
    written from their buffers. Every byte must land, the last WRITE to each block wins, and
    the file's write time moves as with any write."""
    import threading
    name, path = scratch
    block = 1024 * 1024
    local = path / "overwritten.bin"
    local.write_bytes(bytes(8 * block))
    before = local.stat().st_mtime_ns
    time.sleep(0.05)
    final = {}
    errors = []

    def writer(first):
        try:
            smb = Smb(braid_server, require_signing=mode != "plain", require_encryption=mode == "encrypted")
            f = smb.open(rf"{name}\overwritten.bin", access=A.GENERIC_READ | A.GENERIC_WRITE,
                         disposition=CreateDisposition.FILE_OPEN)
            for rnd in range(6):
                for b in range(first, 8, 2):
                    data = bytes([(b * 16 + rnd) & 0xFF]) * block
                    assert f.write(data, b * block) == block
                    final[b] = data
            f.close()
            smb.close()
        except Exception as e:  # surfaced below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    got = local.read_bytes()
    assert len(got) == 8 * block
    for b in range(8):
        assert got[b * block:(b + 1) * block] == final[b], f"block {b}"
    assert local.stat().st_mtime_ns > before


@pytest.mark.parametrize("mode", ["plain", "signed"])
def test_overwrites_racing_a_truncate(braid_server, scratch, mode):
    """WRITEs of 64 KiB and 1 MiB inside a tmpfs file (plain large ones spliced and copied into
    a mapping of it by the kernel, signed ones written from their buffers). Another process
    cutting the file short meanwhile must not take the server down or fail a WRITE, and once
    the file is still, a WRITE and a READ of it round-trip exactly."""
    name, path = scratch
    size = 4 * 1024 * 1024
    local = path / "cut.bin"
    local.write_bytes(bytes(size))
    smb = Smb(braid_server, require_signing=mode == "signed")
    f = smb.open(rf"{name}\cut.bin", access=A.GENERIC_READ | A.GENERIC_WRITE, disposition=CreateDisposition.FILE_OPEN)

    def cut_and_regrow(h):
        h.truncate(random.randrange(size))
        h.truncate(size)

    writes = 0
    with _cutting(local, cut_and_regrow):
        for _ in _for_seconds(3):
            n = random.choice((64 * 1024, 1024 * 1024))
            off = random.randrange(0, size - n, 4096)
            assert f.write(os.urandom(n), off) == n
            writes += 1
    assert writes > 0
    data = os.urandom(2 * 1024 * 1024)
    assert f.write(data, 1024 * 1024) == len(data)
    assert f.read(1024 * 1024, len(data)) == data
    assert local.read_bytes()[1024 * 1024:3 * 1024 * 1024] == data
    f.close()
    smb.close()


def test_truncate_and_extend(smb, scratch):
    name, path = scratch
    f = smb.open(rf"{name}\trunc.bin")
    data = os.urandom(50_000)
    f.write(data, 0)

    def set_eof(n):
        info = FileEndOfFileInformation()
        info["end_of_file"] = n
        smb.set_info(f, info)

    set_eof(1000)
    assert smb.query_info(f, FileStandardInformation)["end_of_file"].get_value() == 1000
    assert f.read(0, 5000) == data[:1000]
    assert os.path.getsize(path / "trunc.bin") == 1000
    set_eof(200_000)
    assert smb.query_info(f, FileStandardInformation)["end_of_file"].get_value() == 200_000
    got = f.read(0, 200_000)
    assert got == data[:1000] + bytes(199_000)
    assert os.path.getsize(path / "trunc.bin") == 200_000
    set_eof(0)
    assert smb.query_info(f, FileStandardInformation)["end_of_file"].get_value() == 0
    f.close()
    assert os.path.getsize(path / "trunc.bin") == 0


def _lock(f, offset, length, flags):
    e = SMB2LockElement()
    e["offset"] = offset
    e["length"] = length
    e["flags"] = flags
    return f.lock([e])


EXCL = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
SHARED = LockFlags.SMB2_LOCKFLAG_SHARED_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
UNLOCK = LockFlags.SMB2_LOCKFLAG_UNLOCK


@pytest.fixture
def two_handles(braid_server, scratch):
    name, path = scratch
    (path / "lock.bin").write_bytes(bytes(range(256)) * 4)
    (path / "lock.bin").chmod(0o666)
    a = Smb(braid_server)
    b = Smb(braid_server)
    try:
        fa = a.open(rf"{name}\lock.bin", disposition=CreateDisposition.FILE_OPEN)
        fb = b.open(rf"{name}\lock.bin", disposition=CreateDisposition.FILE_OPEN)
        yield fa, fb
    finally:
        a.close()
        b.close()


def test_byte_range_locks_exclusive(two_handles):
    fa, fb = two_handles
    _lock(fa, 0, 100, EXCL)
    with pytest.raises(SMBResponseException) as ei:
        _lock(fb, 50, 100, EXCL)
    assert ei.value.status == St.LOCK_NOT_GRANTED
    with pytest.raises(SMBResponseException) as ei:
        _lock(fb, 99, 1, SHARED)
    assert ei.value.status == St.LOCK_NOT_GRANTED
    _lock(fb, 100, 50, EXCL)          # adjacent, not overlapping
    _lock(fa, 0, 100, UNLOCK)
    _lock(fb, 0, 100, EXCL)           # free now
    _lock(fb, 0, 100, UNLOCK)
    _lock(fb, 100, 50, UNLOCK)
    with pytest.raises(SMBResponseException) as ei:
        _lock(fb, 100, 50, UNLOCK)    # not locked any more
    assert ei.value.status == St.RANGE_NOT_LOCKED


def test_byte_range_locks_shared(two_handles):
    fa, fb = two_handles
    _lock(fa, 0, 100, SHARED)
    _lock(fb, 0, 100, SHARED)         # shared locks coexist
    with pytest.raises(SMBResponseException) as ei:
        _lock(fb, 10, 10, EXCL)
    assert ei.value.status == St.LOCK_NOT_GRANTED
    _lock(fa, 0, 100, UNLOCK)
    _lock(fb, 0, 100, UNLOCK)
    _lock(fa, 0, 100, EXCL)


def test_byte_range_lock_blocks_io(two_handles):
    """MS-SMB2 3.3.5.12/3.3.5.13: READ/WRITE into a range locked by another open fail
    with STATUS_FILE_LOCK_CONFLICT."""
    fa, fb = two_handles
    _lock(fa, 0, 100, EXCL)
    assert fa.read(0, 10) == bytes(range(10))
    with pytest.raises(SMBResponseException) as ei:
        fb.read(0, 10)
    assert ei.value.status == St.FILE_LOCK_CONFLICT
    with pytest.raises(SMBResponseException) as ei:
        fb.write(b"x", 5)
    assert ei.value.status == St.FILE_LOCK_CONFLICT
    assert fb.read(200, 10) == bytes(range(200, 210))


@pytest.mark.parametrize("locked_by", ["none", "own", "other"])
def test_zero_length_write(two_handles, scratch, locked_by):
    """A WRITE with no data succeeds with Count 0 and changes nothing, also inside a range
    locked by this or another open: a zero-length range conflicts with no lock (MS-FSA
    2.1.4.10), as on Windows."""
    fa, fb = two_handles
    if locked_by == "own":
        _lock(fa, 0, 100, EXCL)
    elif locked_by == "other":
        _lock(fb, 0, 100, EXCL)
    for offset in (0, 50, 1024, 5000):
        assert fa.write(b"", offset) == 0
    assert fb.write(b"", 10) == 0
    # Nothing changed, and the write at 5000 did not extend the file.
    assert (scratch[1] / "lock.bin").read_bytes() == bytes(range(256)) * 4


def test_list_10000_files(braid_server, scratch, hlkw):
    name, path = scratch
    want = {f"file_{i:05d}_{'x' * (i % 17)}.dat" for i in range(10_000)}
    for n in want:
        with open(path / n, "wb"):
            pass
    (path / "a_subdir").mkdir()
    want.add("a_subdir")
    t0 = time.monotonic()
    got = set(hl.listdir(braid_server.unc("data", name), **hlkw))
    elapsed = time.monotonic() - t0
    assert got == want, (len(got), len(want), sorted(want - got)[:5], sorted(got - want)[:5])
    assert elapsed < 120


def test_list_pattern(braid_server, scratch, hlkw):
    name, path = scratch
    for n in ("abc.txt", "abd.txt", "xyz.log"):
        (path / n).write_bytes(b"")
    assert sorted(hl.listdir(braid_server.unc("data", name), search_pattern="*.txt", **hlkw)) == \
        ["abc.txt", "abd.txt"]
    assert hl.listdir(braid_server.unc("data", name), search_pattern="xyz.log", **hlkw) == ["xyz.log"]


def test_query_info_basic_standard(smb, scratch):
    name, path = scratch
    f = smb.open(rf"{name}\q.bin")
    f.write(b"q" * 12345, 0)
    std = smb.query_info(f, FileStandardInformation)
    assert std["end_of_file"].get_value() == 12345
    assert std["allocation_size"].get_value() >= 12345
    assert std["number_of_links"].get_value() == 1
    assert not std["delete_pending"].get_value()
    assert not std["directory"].get_value()
    basic = smb.query_info(f, FileBasicInformation)
    attrs = basic["file_attributes"].get_value()
    assert not attrs & FileAttributes.FILE_ATTRIBUTE_DIRECTORY
    now = time.time()
    for fld in ("creation_time", "last_access_time", "last_write_time", "change_time"):
        v = basic[fld].get_value()
        t = v.timestamp() if hasattr(v, "timestamp") else (v - 116444736000000000) / 1e7
        assert abs(t - now) < 86400, (fld, t, now)
    f.close()

    d = smb.open(name, access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN, directory=True)
    std = smb.query_info(d, FileStandardInformation)
    assert std["directory"].get_value()
    basic = smb.query_info(d, FileBasicInformation)
    assert basic["file_attributes"].get_value() & FileAttributes.FILE_ATTRIBUTE_DIRECTORY
    d.close()


def test_rename_with_and_without_replace(smb, scratch):
    name, path = scratch

    def create(n, content):
        f = smb.open(rf"{name}\{n}", disposition=CreateDisposition.FILE_CREATE)
        f.write(content, 0)
        f.close()

    def rename(src, dst, replace, directory=False):
        f = smb.open(rf"{name}\{src}", access=A.DELETE | A.FILE_READ_ATTRIBUTES,
                     disposition=CreateDisposition.FILE_OPEN, directory=directory)
        try:
            info = FileRenameInformation()
            info["replace_if_exists"] = replace
            info["file_name"] = rf"{name}\{dst}"
            smb.set_info(f, info)
        finally:
            f.close()

    for n, content in (("src.txt", b"source"), ("dst.txt", b"dest"), ("src2.txt", b"source2")):
        create(n, content)
    with pytest.raises(SMBResponseException) as ei:
        rename("src.txt", "dst.txt", False)
    assert ei.value.status == St.OBJECT_NAME_COLLISION
    assert (path / "src.txt").read_bytes() == b"source"
    assert (path / "dst.txt").read_bytes() == b"dest"
    rename("src.txt", "dst.txt", True)
    assert not (path / "src.txt").exists()
    assert (path / "dst.txt").read_bytes() == b"source"
    rename("src2.txt", "new.txt", False)
    assert not (path / "src2.txt").exists()
    assert (path / "new.txt").read_bytes() == b"source2"
    smb.open(rf"{name}\sub", disposition=CreateDisposition.FILE_CREATE, directory=True).close()
    rename("new.txt", r"sub\moved.txt", False)
    assert (path / "sub" / "moved.txt").read_bytes() == b"source2"
    rename("sub", "sub_renamed", False, directory=True)
    assert (path / "sub_renamed" / "moved.txt").is_file()
    assert not (path / "sub").exists()


def test_delete_on_close(smb, scratch):
    name, path = scratch
    f = smb.open(rf"{name}\doc.bin", disposition=CreateDisposition.FILE_CREATE,
                 options=CreateOptions.FILE_NON_DIRECTORY_FILE | CreateOptions.FILE_DELETE_ON_CLOSE)
    f.write(b"temporary", 0)
    assert f.read(0, 9) == b"temporary"
    f.close()
    assert not (path / "doc.bin").exists()
    with pytest.raises(SMBResponseException) as ei:
        smb.open(rf"{name}\doc.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    assert ei.value.status == St.OBJECT_NAME_NOT_FOUND


def test_set_disposition_delete(smb, scratch):
    name, path = scratch
    (path / "disp.bin").write_bytes(b"x")
    (path / "disp.bin").chmod(0o666)
    f = smb.open(rf"{name}\disp.bin", disposition=CreateDisposition.FILE_OPEN)
    info = FileDispositionInformation()
    info["delete_pending"] = True
    smb.set_info(f, info)
    assert smb.query_info(f, FileStandardInformation)["delete_pending"].get_value()
    f.close()
    assert not (path / "disp.bin").exists()


def test_create_dispositions(smb, scratch):
    name, path = scratch
    f = smb.open(rf"{name}\c.bin", disposition=CreateDisposition.FILE_CREATE)
    f.write(b"12345", 0)
    f.close()
    with pytest.raises(SMBResponseException) as ei:
        smb.open(rf"{name}\c.bin", disposition=CreateDisposition.FILE_CREATE)
    assert ei.value.status == St.OBJECT_NAME_COLLISION
    with pytest.raises(SMBResponseException) as ei:
        smb.open(rf"{name}\missing.bin", disposition=CreateDisposition.FILE_OPEN)
    assert ei.value.status == St.OBJECT_NAME_NOT_FOUND
    with pytest.raises(SMBResponseException) as ei:
        smb.open(rf"{name}\nodir\x.bin", disposition=CreateDisposition.FILE_OPEN)
    assert ei.value.status == St.OBJECT_PATH_NOT_FOUND
    f = smb.open(rf"{name}\c.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
    assert smb.query_info(f, FileStandardInformation)["end_of_file"].get_value() == 0
    f.close()
    with pytest.raises(SMBResponseException) as ei:
        smb.open(rf"{name}\c.bin", disposition=CreateDisposition.FILE_OPEN, directory=True)
    assert ei.value.status == St.NOT_A_DIRECTORY
    d = smb.open(rf"{name}\dir1", disposition=CreateDisposition.FILE_CREATE, directory=True)
    d.close()
    assert (path / "dir1").is_dir()
    with pytest.raises(SMBResponseException) as ei:
        smb.open(rf"{name}\dir1", disposition=CreateDisposition.FILE_OPEN)
    assert ei.value.status == St.FILE_IS_A_DIRECTORY


def test_sharing_violation(braid_server, scratch):
    name, path = scratch
    with Smb(braid_server) as a, Smb(braid_server) as b:
        fa = a.open(rf"{name}\share.bin", share_access=ShareAccess.FILE_SHARE_READ)
        with pytest.raises(SMBResponseException) as ei:
            b.open(rf"{name}\share.bin", access=A.GENERIC_WRITE, disposition=CreateDisposition.FILE_OPEN)
        assert ei.value.status == St.SHARING_VIOLATION
        fa.close()
        b.open(rf"{name}\share.bin", access=A.GENERIC_WRITE, disposition=CreateDisposition.FILE_OPEN).close()


def test_read_only_share_create_denied(braid_server):
    with Smb(braid_server, share="ro") as s:
        with pytest.raises(SMBResponseException) as ei:
            s.open("new.bin", disposition=CreateDisposition.FILE_CREATE)
        assert ei.value.status in (St.ACCESS_DENIED, St.MEDIA_WRITE_PROTECTED)
    assert not (braid_server.shares["ro"] / "new.bin").exists()


def test_wrong_password_smbprotocol(braid_server):
    with pytest.raises(SMBResponseException) as ei:
        Smb(braid_server, password="definitely-wrong")
    assert ei.value.status == St.LOGON_FAILURE


def test_change_notify(braid_server, scratch):
    """CHANGE_NOTIFY through smbprotocol's own FileSystemWatcher: a watch on a directory
    sees a file created, renamed and deleted by another session; a subdirectory change
    reaches a tree watch only; closing the watched handle ends a waiting request."""
    from smbprotocol.change_notify import (ChangeNotifyFlags, CompletionFilter, FileAction,
                                           FileSystemWatcher)
    name, path = scratch
    (path / "sub").mkdir()
    with Smb(braid_server) as watcher_side, Smb(braid_server) as other:
        d = watcher_side.open(rf"{name}", access=A.GENERIC_READ, directory=True,
                              disposition=CreateDisposition.FILE_OPEN)

        def watch(flags=0, handle=None):
            w = FileSystemWatcher(handle or d)
            w.start(CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME | CompletionFilter.FILE_NOTIFY_CHANGE_DIR_NAME,
                    flags=flags)
            return w

        def changes(w):
            return [(c["action"].get_value(), c["file_name"].get_value()) for c in w.wait()]

        w = watch()
        f = other.open(rf"{name}\new.txt", disposition=CreateDisposition.FILE_CREATE)
        assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "new.txt")]
        # Changes made while no request waits are kept for the next one.
        info = FileRenameInformation()
        info["replace_if_exists"] = False
        info["file_name"] = rf"{name}\renamed.txt"
        other.set_info(f, info)
        w = watch()
        assert changes(w) == [(FileAction.FILE_ACTION_RENAMED_OLD_NAME, "new.txt"),
                              (FileAction.FILE_ACTION_RENAMED_NEW_NAME, "renamed.txt")]
        f.close()
        # A handle keeps the filter and WATCH_TREE of its first request: a tree watch needs
        # a handle of its own.
        tree = watcher_side.open(rf"{name}", access=A.GENERIC_READ, directory=True,
                                 disposition=CreateDisposition.FILE_OPEN)
        w = watch(ChangeNotifyFlags.SMB2_WATCH_TREE, tree)
        other.open(rf"{name}\sub\deep.txt", disposition=CreateDisposition.FILE_CREATE).close()
        assert changes(w) == [(FileAction.FILE_ACTION_ADDED, r"sub\deep.txt")]
        tree.close()
        g = other.open(rf"{name}\renamed.txt", disposition=CreateDisposition.FILE_OPEN)
        info = FileDispositionInformation()
        info["delete_pending"] = True
        other.set_info(g, info)
        g.close()
        w = watch()
        assert changes(w) == [(FileAction.FILE_ACTION_REMOVED, "renamed.txt")]
        # A waiting request ends with STATUS_NOTIFY_CLEANUP when its handle closes.
        w = watch()
        time.sleep(0.2)
        d.close()
        with pytest.raises(SMBResponseException) as ei:
            w.wait()
        assert ei.value.status == St.NOTIFY_CLEANUP

