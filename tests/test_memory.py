"""A share served from memory (`backend = "memory"`): smbclient round trips against a braid
whose only share has no directory on disk, and its capacity showing as a full disk.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import pytest

import harness
from harness import sha256_file

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                                reason="starts braid with a memory share")

CAPACITY = 8 << 20



@pytest.fixture(scope="module")
def memory_server():
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    root = harness.tmp_dir("braid-memory-")
    try:
        srv = harness.start_braid(root, users, share_specs=[{"name": "mem", "backend": "memory",
                                                             "capacity": f"{CAPACITY >> 20}M"}])
    except Exception as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start braid with a memory share: {e}", pytrace=False)
    yield srv
    problem = harness.stop_braid(srv)
    if problem:
        saved = harness.log_dir() / f"braid-memory-{os.getpid()}.log"
        shutil.copyfile(srv.log, saved)
    shutil.rmtree(root, ignore_errors=True)
    if problem:
        pytest.fail(f"braid (memory share) crashed: {problem} (log saved to {saved})", pytrace=False)


@pytest.fixture
def local_tmp():
    d = harness.tmp_dir("braid-memory-local-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_memory_share_has_no_directory(memory_server):
    assert "mem" not in memory_server.shares
    assert not (memory_server.root / "shares").exists()


def test_memory_share_put_get_ls_rm(memory_server, client_conf, local_tmp):
    src = local_tmp / "src.bin"
    src.write_bytes(os.urandom(3 << 20))
    back = local_tmp / "back.bin"
    smb = lambda cmd: harness.smbclient(memory_server, client_conf, "mem", cmd)
    r = smb(f'mkdir d; put "{src}" d\\File.bin; get d\\FILE.BIN "{back}"; ls d\\*')
    assert r.ok, r.out
    assert sha256_file(back) == sha256_file(src)
    assert "File.bin" in r.out and str(3 << 20) in r.out, r.out
    # Renamed, then removed with its directory.
    r = smb("rename d\\File.bin d\\moved.bin; ls d\\*")
    assert r.ok and "moved.bin" in r.out and "File.bin" not in r.out, r.out
    r = smb("rm d\\moved.bin; rmdir d; ls")
    assert r.ok, r.out
    assert " d " not in r.out and "moved.bin" not in r.out, r.out
    r = smb(f'get d\\moved.bin "{back}"')
    assert "NT_STATUS_OBJECT_PATH_NOT_FOUND" in r.out or "NT_STATUS_OBJECT_NAME_NOT_FOUND" in r.out, r.out


def test_memory_share_capacity_is_a_full_disk(memory_server, client_conf, local_tmp):
    big = local_tmp / "big.bin"
    big.write_bytes(os.urandom(CAPACITY + (1 << 20)))
    smb = lambda cmd: harness.smbclient(memory_server, client_conf, "mem", cmd)
    r = smb(f'put "{big}" big.bin')
    assert "NT_STATUS_DISK_FULL" in r.out, r.out
    # The space comes back once the partial file is gone.
    r = smb("rm big.bin")
    assert r.ok, r.out
    small = local_tmp / "small.bin"
    small.write_bytes(os.urandom(1 << 20))
    r = smb(f'put "{small}" small.bin; rm small.bin')
    assert r.ok, r.out


def test_memory_share_sparse_mark_and_zeroing(memory_server):
    """A memory file takes the sparse mark and zeros ranges, but keeps every byte stored:
    its allocated ranges are the whole range asked about, up to the end of file."""
    import struct
    from smbprotocol.file_info import FileBasicInformation
    from smbprotocol.open import CreateDisposition
    from harness import Smb
    from test_copychunk import ioctl
    with Smb(memory_server, share="mem") as s:
        f = s.open("sparse.bin", disposition=CreateDisposition.FILE_CREATE)
        f.write(b"m" * 8192, 0)
        assert ioctl(s, f, 0x000900C4, b"", 0)[1] == 0                        # SET_SPARSE
        assert s.query_info(f, FileBasicInformation)["file_attributes"].get_value() & 0x200
        assert ioctl(s, f, 0x000980C8, struct.pack("<qq", 0, 4096), 0)[1] == 0  # SET_ZERO_DATA
        assert f.read(0, 8192) == bytes(4096) + b"m" * 4096
        out, status = ioctl(s, f, 0x000940CF, struct.pack("<qq", 0, 1 << 20), 64)
        assert status == 0 and struct.unpack("<qq", out) == (0, 8192)
        f.close()
