"""Sparse files over SMB (FSCTL_SET_SPARSE, FSCTL_SET_ZERO_DATA,
FSCTL_QUERY_ALLOCATED_RANGES) with Python smbprotocol against the real server: the
attribute in FileBasicInformation and in listings, allocated ranges as the file system
has them, and a punched hole that frees blocks on disk."""

import struct

from smbprotocol.file_info import FileBasicInformation, FileInformationClass, FileStandardInformation
from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask as A, LockFlags, SMB2LockElement

from harness import Smb
from test_copychunk import ioctl

SET_SPARSE = 0x000900C4
SET_ZERO_DATA = 0x000980C8
QUERY_ALLOCATED_RANGES = 0x000940CF
SPARSE = 0x200
OK, OVERFLOW, TOO_SMALL = 0, 0x80000005, 0xC0000023
INVALID_PARAMETER, ACCESS_DENIED, LOCK_CONFLICT = 0xC000000D, 0xC0000022, 0xC0000054
MIB = 1 << 20
CHUNK = 64 * 1024


def qar(s, f, offset, length, max_out=1024):
    """(list of (offset, length), status) of FSCTL_QUERY_ALLOCATED_RANGES."""
    out, status = ioctl(s, f, QUERY_ALLOCATED_RANGES, struct.pack("<qq", offset, length), max_out)
    assert len(out) % 16 == 0
    return [struct.unpack_from("<qq", out, i) for i in range(0, len(out), 16)], status


def zero(s, f, offset, beyond):
    return ioctl(s, f, SET_ZERO_DATA, struct.pack("<qq", offset, beyond), 0)[1]


def attributes(s, f):
    return s.query_info(f, FileBasicInformation)["file_attributes"].get_value()


def blocks(path):
    return path.stat().st_blocks * 512


def test_punched_hole_leaves_allocated_ranges_and_frees_blocks(braid_server, scratch):
    name, path = scratch
    with Smb(braid_server) as s:
        f = s.open(rf"{name}\sparse.bin", disposition=CreateDisposition.FILE_CREATE)
        assert attributes(s, f) & SPARSE == 0
        assert ioctl(s, f, SET_SPARSE, b"", 0)[1] == OK          # no buffer: set
        assert attributes(s, f) & SPARSE
        f.write(b"a" * CHUNK, 0)
        f.write(b"b" * CHUNK, 64 * MIB)
        assert qar(s, f, 0, 128 * MIB) == ([(0, CHUNK), (64 * MIB, CHUNK)], OK)
        # Room for one range: the first, and BUFFER_OVERFLOW (MS-FSA, Windows and smbtorture's
        # sparse_qar_truncated; Samba 4.17 answers BUFFER_TOO_SMALL); room for none: too small.
        if braid_server.target == "braid":
            assert qar(s, f, 0, 128 * MIB, max_out=31) == ([(0, CHUNK)], OVERFLOW)
        assert qar(s, f, 0, 128 * MIB, max_out=0)[1] == TOO_SMALL
        assert qar(s, f, 512, -1)[1] == INVALID_PARAMETER
        before = blocks(path / "sparse.bin")
        assert before < 4 * CHUNK, "the gap between the writes is a hole"

        assert zero(s, f, 0, CHUNK) == OK
        assert qar(s, f, 0, 128 * MIB) == ([(64 * MIB, CHUNK)], OK)
        assert blocks(path / "sparse.bin") < before
        # The allocation size clients see is the file system's, holes left out.
        std = s.query_info(f, FileStandardInformation)
        assert std["allocation_size"].get_value() == blocks(path / "sparse.bin")
        assert std["end_of_file"].get_value() == 64 * MIB + CHUNK
        assert f.read(0, 4096) == bytes(4096)
        assert f.read(64 * MIB, 4) == b"bbbb"
        assert zero(s, f, 8, 4) == INVALID_PARAMETER               # offset past the end
        f.close()

        # The attribute shows in listings too; a directory refuses it.
        d = s.open(name, directory=True, access=A.GENERIC_READ | A.FILE_WRITE_ATTRIBUTES)
        entries = d.query_directory("sparse.bin", FileInformationClass.FILE_DIRECTORY_INFORMATION)
        assert entries[0]["file_attributes"].get_value() & SPARSE
        assert ioctl(s, d, SET_SPARSE, b"\x01", 0)[1] == INVALID_PARAMETER
        d.close()
    assert (path / "sparse.bin").stat().st_size == 64 * MIB + CHUNK


def test_zeroing_a_plain_file_keeps_it_allocated(braid_server, scratch):
    name, path = scratch
    with Smb(braid_server) as s:
        f = s.open(rf"{name}\plain.bin", disposition=CreateDisposition.FILE_CREATE)
        f.write(b"x" * 8 * CHUNK, 0)
        before = blocks(path / "plain.bin")
        assert zero(s, f, CHUNK, 2 * CHUNK) == OK
        assert f.read(CHUNK, CHUNK) == bytes(CHUNK) and f.read(0, 4) == b"xxxx"
        # Not sparse: the whole range up to the end of file counts as allocated, as on NTFS.
        assert qar(s, f, 1, 100 * CHUNK) == ([(1, 8 * CHUNK - 1)], OK)
        if braid_server.target == "braid":   # Samba punches a hole unless "strict allocate"
            assert blocks(path / "plain.bin") == before
        f.close()
        # Clearing the mark of a sparse file with a hole reports it whole again.
        f = s.open(rf"{name}\plain2.bin", disposition=CreateDisposition.FILE_CREATE)
        f.write(b"x" * 8 * CHUNK, 0)
        assert ioctl(s, f, SET_SPARSE, b"\x01", 0)[1] == OK
        assert zero(s, f, 0, CHUNK) == OK
        assert qar(s, f, 0, 8 * CHUNK) == ([(CHUNK, 7 * CHUNK)], OK)
        assert ioctl(s, f, SET_SPARSE, b"\x00", 0)[1] == OK
        assert attributes(s, f) & SPARSE == 0
        assert qar(s, f, 0, 8 * CHUNK) == ([(0, 8 * CHUNK)], OK)
        f.close()


def test_access_checks_and_lock_conflicts(braid_server, scratch):
    name, path = scratch
    (path / "f.bin").write_bytes(b"z" * CHUNK)
    (path / "f.bin").chmod(0o666)
    with Smb(braid_server) as s:
        r = s.open(rf"{name}\f.bin", access=A.FILE_READ_DATA | A.FILE_READ_ATTRIBUTES,
                   disposition=CreateDisposition.FILE_OPEN)
        assert zero(s, r, 0, 10) == ACCESS_DENIED
        assert ioctl(s, r, SET_SPARSE, b"", 0)[1] == ACCESS_DENIED
        assert qar(s, r, 0, CHUNK) == ([(0, CHUNK)], OK)
        attr_only = s.open(rf"{name}\f.bin", access=A.FILE_READ_ATTRIBUTES | A.FILE_WRITE_ATTRIBUTES,
                           disposition=CreateDisposition.FILE_OPEN)
        assert qar(s, attr_only, 0, CHUNK)[1] == ACCESS_DENIED
        assert ioctl(s, attr_only, SET_SPARSE, b"", 0)[1] == OK   # write attributes is enough
        w = s.open(rf"{name}\f.bin", disposition=CreateDisposition.FILE_OPEN)
        w2 = s.open(rf"{name}\f.bin", disposition=CreateDisposition.FILE_OPEN)
        w2.lock([_lock(0, 4096)])
        assert zero(s, w, 0, 100) == LOCK_CONFLICT
        assert zero(s, w, 8192, CHUNK) == OK
        assert w.read(8192, 4) == bytes(4) and w.read(4096, 4) == b"zzzz"
        for h in (r, attr_only, w, w2):
            h.close()


def _lock(offset, length):
    e = SMB2LockElement()
    e["offset"] = offset
    e["length"] = length
    e["flags"] = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
    return e

