"""Server-side copy (FSCTL_SRV_REQUEST_RESUME_KEY, FSCTL_SRV_COPYCHUNK_WRITE) with Python
smbprotocol's high-level `smbclient.copyfile`, which copies inside the server when source
and target are on one server; the bytes are checked on disk."""

import hashlib
import os
import struct

import pytest
import smbclient as hl
from smbprotocol.exceptions import SMBOSError, SMBResponseException
from smbprotocol.ioctl import CtlCode, IOCTLFlags, SMB2IOCTLRequest
from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask as A

from harness import Smb
from test_status import metrics_text, op_counts, parse_samples


@pytest.fixture
def hlkw(braid_server):
    cache = {}
    kw = dict(username=braid_server.user, password=braid_server.password, port=braid_server.port,
              connection_cache=cache, auth_protocol="ntlm")
    yield kw
    hl.reset_connection_cache(connection_cache=cache)


def sha256(path, chunk=8 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


def unc(srv, *parts):
    return "\\\\127.0.0.1\\" + "\\".join(parts)


def test_copyfile_of_1gib_is_done_inside_the_server(braid_server, scratch, hlkw):
    name, path = scratch
    src = path / "big.src"
    with open(src, "wb") as f:   # 1 GiB of varied bytes, written on the share's disk
        block = os.urandom(1 << 20)
        for i in range(1024):
            f.write(struct.pack("<Q", i) + block[8:])
    before = parse_samples(metrics_text(braid_server)) if braid_server.target == "braid" else None
    hl.copyfile(unc(braid_server, "data", name, "big.src"), unc(braid_server, "data", name, "big.dst"), **hlkw)
    assert (path / "big.dst").stat().st_size == 1 << 30
    assert sha256(path / "big.dst") == sha256(src)
    if before is not None:
        after = parse_samples(metrics_text(braid_server))
        # 64 copies of 16 MiB (one IOCTL each), and no data moved by READ or WRITE.
        ioctls = sum(op_counts(after, "IOCTL")) - sum(op_counts(before, "IOCTL"))
        reads = sum(op_counts(after, "READ")) - sum(op_counts(before, "READ"))
        writes = sum(op_counts(after, "WRITE")) - sum(op_counts(before, "WRITE"))
        assert ioctls >= 64 and reads == 0 and writes == 0, (ioctls, reads, writes)


def test_copyfile_keeps_bytes_and_refuses_a_read_only_share(braid_server, scratch, hlkw):
    name, path = scratch
    data = os.urandom(3 * (1 << 20) + 12345)   # not a multiple of any chunk size
    (path / "odd.src").write_bytes(data)
    hl.copyfile(unc(braid_server, "data", name, "odd.src"), unc(braid_server, "data", name, "odd.dst"), **hlkw)
    assert (path / "odd.dst").read_bytes() == data
    # A copy onto the read-only share cannot even create its target.
    with pytest.raises(SMBOSError):
        hl.copyfile(unc(braid_server, "data", name, "odd.src"), unc(braid_server, "ro", "odd.dst"), **hlkw)


def ioctl(s, f, ctl, data, max_out):
    """One FSCTL on open `f`: (output bytes, status), the output kept on an error status
    too (a copy-chunk answer carries its counts with every status)."""
    req = SMB2IOCTLRequest()
    req["ctl_code"] = ctl
    req["file_id"] = f.file_id
    req["max_output_response"] = max_out
    req["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
    req["buffer"] = data
    request = s.conn.send(req, sid=s.session.session_id, tid=s.tree.tree_connect_id)
    try:
        header = s.conn.receive(request)
    except SMBResponseException as e:
        header = e.header
    body = header["data"].get_value()
    status = header["status"].get_value()
    if len(body) < 48 or struct.unpack_from("<H", body)[0] != 49:
        return b"", status
    off, count = struct.unpack_from("<II", body, 32)
    return body[off - 64:off - 64 + count], status


def test_copychunk_limits_and_a_forged_key(braid_server, scratch):
    """Chunks beyond the server's limits get INVALID_PARAMETER with the limits in the
    answer; a resume key that names no open of this session gets OBJECT_NAME_NOT_FOUND."""
    name, path = scratch
    (path / "s.bin").write_bytes(os.urandom(8192))
    with Smb(braid_server) as s:
        src = s.open(rf"{name}\s.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
        dst = s.open(rf"{name}\d.bin", disposition=CreateDisposition.FILE_CREATE)
        key = ioctl(s, src, CtlCode.FSCTL_SRV_REQUEST_RESUME_KEY, b"", 32)[0][:24]

        def copy(k, chunks):
            body = k + struct.pack("<II", len(chunks), 0)
            body += b"".join(struct.pack("<QQII", so, to, n, 0) for so, to, n in chunks)
            return ioctl(s, dst, 0x001480F2, body, 12)   # FSCTL_SRV_COPYCHUNK_WRITE

        out, status = copy(key, [(0, 0, 4096), (4096, 4096, 4096)])
        assert status == 0 and struct.unpack("<III", out) == (2, 0, 8192)
        out, status = copy(key, [(0, 0, (1 << 20) + 1)])
        assert status == 0xC000000D and struct.unpack("<III", out) == (256, 1 << 20, 16 << 20)
        forged = bytes(24)
        _, status = copy(forged, [(0, 0, 4096)])
        assert status == 0xC0000034
        _, status = copy(key, [(4096, 0, 8192)])   # beyond the source's end
        assert status == 0xC000001F
        src.close()
        dst.close()
    assert (path / "d.bin").read_bytes() == (path / "s.bin").read_bytes()
