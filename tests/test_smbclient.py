"""Interop with Samba's smbclient command line tool."""

import os
import re
import secrets
import tempfile
from pathlib import Path

import pytest

from harness import sha256_file


@pytest.fixture
def local_tmp():
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="braid-test-local-", dir=base) as d:
        yield Path(d)


def test_list_shares(smbc):
    r = smbc(None)
    assert r.rc == 0, r.out
    for name in ("data", "ro"):
        assert re.search(rf"^\s+{name}\s+Disk", r.out, re.M), r.out


def test_ls(smbc, scratch):
    name, path = scratch
    (path / "hello.txt").write_bytes(b"hello world\n")
    (path / "subdir").mkdir()
    r = smbc("data", f'cd "{name}"; ls')
    assert r.ok, r.out
    assert re.search(r"^\s+hello\.txt\s+\S*\s+12\s", r.out, re.M), r.out
    assert re.search(r"^\s+subdir\s+D", r.out, re.M), r.out


def test_mkdir_rmdir(smbc, scratch):
    name, path = scratch
    r = smbc("data", f'cd "{name}"; mkdir newdir')
    assert r.ok, r.out
    assert (path / "newdir").is_dir()
    r = smbc("data", f'cd "{name}"; rmdir newdir')
    assert r.ok, r.out
    assert not (path / "newdir").exists()


def test_rename_and_del(smbc, scratch):
    name, path = scratch
    (path / "a.txt").write_bytes(b"content-a")
    (path / "a.txt").chmod(0o666)
    r = smbc("data", f'cd "{name}"; rename a.txt b.txt')
    assert r.ok, r.out
    assert not (path / "a.txt").exists()
    assert (path / "b.txt").read_bytes() == b"content-a"
    r = smbc("data", f'cd "{name}"; del b.txt')
    assert r.ok, r.out
    assert not (path / "b.txt").exists()


def test_put_get_64mib(smbc, scratch, local_tmp):
    name, path = scratch
    src = local_tmp / "src.bin"
    with open(src, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
    want = sha256_file(src)
    back = local_tmp / "back.bin"
    r = smbc("data", f'cd "{name}"; put "{src}" big.bin; get big.bin "{back}"', timeout=120)
    assert r.ok, r.out
    assert sha256_file(path / "big.bin") == want, "file on the server's disk differs"
    assert sha256_file(back) == want, "file read back differs"


def test_wrong_password_then_still_serving(smbc, braid_server):
    r = smbc("data", "ls", password="wrong-" + secrets.token_hex(4))
    assert r.rc != 0
    assert "NT_STATUS_LOGON_FAILURE" in r.out, r.out
    r = smbc("data", "ls", user="nosuchuser", password="x")
    assert r.rc != 0
    assert "NT_STATUS_LOGON_FAILURE" in r.out, r.out
    r = smbc("data", "ls")
    assert r.ok, r.out


def test_read_only_share_refuses_put(smbc, braid_server, local_tmp):
    ro = braid_server.shares["ro"]
    (ro / "readme.txt").write_bytes(b"read only content\n")
    src = local_tmp / "x.txt"
    src.write_bytes(b"should not arrive")
    r = smbc("ro", f'put "{src}" x.txt')
    assert re.search(r"NT_STATUS_(ACCESS_DENIED|MEDIA_WRITE_PROTECTED)", r.out), r.out
    assert not (ro / "x.txt").exists()
    for cmd in ("mkdir d", "del readme.txt", "rename readme.txt other.txt"):
        r = smbc("ro", cmd)
        assert re.search(r"NT_STATUS_(ACCESS_DENIED|MEDIA_WRITE_PROTECTED)", r.out), (cmd, r.out)
    assert (ro / "readme.txt").read_bytes() == b"read only content\n"
    assert not (ro / "d").exists()
    back = local_tmp / "back.txt"
    r = smbc("ro", f'get readme.txt "{back}"')
    assert r.ok, r.out
    assert back.read_bytes() == b"read only content\n"


def test_share_user_list(smbc, braid_server):
    r = smbc("alice_only", "ls", user=braid_server.user2, password=braid_server.password2)
    assert r.rc != 0
    assert re.search(r"NT_STATUS_(ACCESS_DENIED|BAD_NETWORK_NAME)", r.out), r.out
    r = smbc("alice_only", "ls")
    assert r.ok, r.out
    r = smbc("data", "ls", user=braid_server.user2, password=braid_server.password2)
    assert r.ok, r.out


def test_unknown_share(smbc):
    r = smbc("no_such_share", "ls")
    assert r.rc != 0
    assert "NT_STATUS_BAD_NETWORK_NAME" in r.out, r.out


@pytest.mark.parametrize("proto", ["SMB2_02", "SMB2_10", "SMB3_00", "SMB3_11"])
def test_dialect(smbc, scratch, local_tmp, proto):
    name, path = scratch
    src = local_tmp / "p.bin"
    data = os.urandom(300_000)
    src.write_bytes(data)
    back = local_tmp / "back.bin"
    r = smbc("data", f'cd "{name}"; put "{src}" p.bin; ls; get p.bin "{back}"',
             extra=["-m", proto, f"--option=client min protocol={proto}"])
    assert r.ok, r.out
    assert (path / "p.bin").read_bytes() == data
    assert back.read_bytes() == data


@pytest.mark.parametrize("protection", ["sign", "encrypt"])
def test_signing_and_encryption(smbc, scratch, local_tmp, protection):
    name, path = scratch
    src = local_tmp / "s.bin"
    data = os.urandom(1 << 20)
    src.write_bytes(data)
    back = local_tmp / "back.bin"
    r = smbc("data", f'cd "{name}"; put "{src}" s.bin; get s.bin "{back}"',
             extra=[f"--client-protection={protection}"])
    assert r.ok, r.out
    assert back.read_bytes() == data
