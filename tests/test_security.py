"""Security: path escapes, symlinks and malformed PDUs on the raw socket.

Specific status codes differ between servers; the tests insist on: an error (never the content
of a file outside the share), no hang beyond a few seconds, and the server still serving after.
"""

import os
import secrets
import socket
import struct
import time

import pytest
from smbprotocol.exceptions import SMBException
from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask as A

from harness import Smb, St

RECV_WAIT = 5.0   # seconds a malformed request may take to be answered or the connection closed


# --------------------------------------------------------------------------------------------
# path escapes and symlinks
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def outside(braid_server):
    """A file outside every share (a sibling directory of the share), with recognisable content."""
    d = braid_server.shares["data"].parent / "outside"
    d.mkdir(exist_ok=True)
    d.chmod(0o755)
    f = d / "secret.txt"
    f.write_bytes(b"TOP-SECRET-" + secrets.token_hex(8).encode())
    f.chmod(0o644)
    return f


@pytest.fixture
def smb(braid_server):
    with Smb(braid_server) as s:
        yield s


def assert_refused(smb, name, secret: bytes, disposition=CreateDisposition.FILE_OPEN, directory=False):
    try:
        f = smb.open(name, access=A.GENERIC_READ, disposition=disposition, directory=directory)
    except SMBException:
        return
    try:
        data = b"" if directory else f.read(0, 4096)
    except SMBException:
        data = b""
    finally:
        try:
            f.close()
        except SMBException:
            pass
    assert secret not in data, f"{name!r} returned the content of a file outside the share!"
    pytest.fail(f"open of {name!r} succeeded; expected an error status")


ESCAPES = [
    r"..\outside\secret.txt",
    r"..\..\outside\secret.txt",
    r"..\..\..\..\..\..\..\..\etc\passwd",
    r"sub\..\..\outside\secret.txt",
    r".\..\outside\secret.txt",
    r"..",
    r"sub\..\..",
    r"\..\outside\secret.txt",
    r"\\..\outside\secret.txt",
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    r"..\outside\secret.txt:$DATA",
    r"..\outside\secret.txt::$DATA",
    "..\\outside\\secret.txt\x00.txt",
    "sub\\..\x00\\..\\outside\\secret.txt",
    r"..\outside\secret.txt*",
    r"..\outside\*",
    r"..\outside\secret.tx?",
]


@pytest.mark.parametrize("name", ESCAPES, ids=lambda n: repr(n)[1:-1][:40])
def test_path_escape_refused(braid_server, smb, outside, name):
    (braid_server.shares["data"] / "sub").mkdir(exist_ok=True)
    assert_refused(smb, name, outside.read_bytes())
    with open("/etc/passwd", "rb") as f:
        assert_refused(smb, name, f.read()[:32])


@pytest.mark.parametrize("name", [r"..\braid-escape-created.txt", r"sub\..\..\braid-escape-created.txt",
                                  "../braid-escape-created.txt"])
def test_create_outside_refused(braid_server, smb, name):
    (braid_server.shares["data"] / "sub").mkdir(exist_ok=True)
    parent = braid_server.shares["data"].parent
    assert_refused(smb, name, b"", disposition=CreateDisposition.FILE_OPEN_IF)
    assert not (parent / "braid-escape-created.txt").exists()
    assert not (parent.parent / "braid-escape-created.txt").exists()


@pytest.mark.parametrize("name", ["bad*name.txt", "bad?name.txt", "bad\x00name.txt", "bad<name.txt",
                                  "bad>name.txt", 'bad"name.txt', "bad|name.txt"])
def test_invalid_characters_refused(braid_server, smb, name):
    try:
        f = smb.open(name, disposition=CreateDisposition.FILE_OPEN_IF)
    except SMBException:
        pass
    else:
        f.close()
        pytest.fail(f"creating {name!r} succeeded")
    leftovers = [p for p in os.listdir(braid_server.shares["data"]) if p.startswith("bad")]
    assert leftovers == []


def test_stream_names(braid_server, smb, scratch):
    """Named streams are optional (FILE_NAMED_STREAMS).  Either refused, or a real stream: the
    main file's content is untouched and no file with ':' in its name appears on disk."""
    name, path = scratch
    f = smb.open(rf"{name}\base.txt", disposition=CreateDisposition.FILE_CREATE)
    f.write(b"main data", 0)
    f.close()
    for stream in (rf"{name}\base.txt:alt", rf"{name}\base.txt:alt:$DATA", rf"{name}\newfile:alt"):
        try:
            s = smb.open(stream, disposition=CreateDisposition.FILE_OPEN_IF)
        except SMBException:
            continue
        s.write(b"stream data", 0)
        s.close()
    assert (path / "base.txt").read_bytes() == b"main data"
    assert [p for p in os.listdir(path) if ":" in p] == []


@pytest.fixture
def links(braid_server, outside, scratch):
    name, path = scratch
    (path / "inside.txt").write_bytes(b"inside content")
    (path / "inside.txt").chmod(0o666)
    (path / "realdir").mkdir(mode=0o777)
    (path / "realdir" / "f.txt").write_bytes(b"in realdir")
    os.symlink("/etc", path / "to_etc")
    os.symlink(str(outside), path / "to_secret_abs")
    os.symlink(os.path.relpath(outside, path), path / "to_secret_rel")
    os.symlink(os.path.relpath(outside.parent, path), path / "to_outside_dir")
    os.symlink("inside.txt", path / "to_inside")
    os.symlink("realdir", path / "to_realdir")
    os.symlink(str(path / "inside.txt"), path / "to_inside_abs")
    return name, path


@pytest.mark.parametrize("target", [r"to_etc\passwd", r"to_etc\hostname", "to_secret_abs", "to_secret_rel",
                                    r"to_outside_dir\secret.txt"])
def test_symlink_escape_refused(smb, outside, links, target):
    name, _ = links
    assert_refused(smb, rf"{name}\{target}", outside.read_bytes())
    with open("/etc/passwd", "rb") as f:
        assert_refused(smb, rf"{name}\{target}", f.read()[:64])


def test_symlink_escape_dir_not_listable(braid_server, smb, outside, links):
    name, _ = links
    for d in ("to_etc", "to_outside_dir"):
        try:
            h = smb.open(rf"{name}\{d}", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN,
                         directory=True)
        except SMBException:
            continue
        try:
            from smbprotocol.file_info import FileInformationClass
            entries = h.query_directory("*", FileInformationClass.FILE_NAMES_INFORMATION)
            names = {e["file_name"].get_value().decode("utf-16-le") for e in entries}
        except SMBException:
            names = set()
        finally:
            h.close()
        assert not names & {"passwd", "secret.txt"}, f"{d} lists a directory outside the share"
        pytest.fail(f"opening the escaping directory symlink {d} succeeded")


def test_symlink_inside_share_works(smb, links):
    name, _ = links
    f = smb.open(rf"{name}\to_inside", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    assert f.read(0, 100) == b"inside content"
    f.close()
    f = smb.open(rf"{name}\to_realdir\f.txt", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    assert f.read(0, 100) == b"in realdir"
    f.close()


# --------------------------------------------------------------------------------------------
# malformed PDUs on a raw socket
# --------------------------------------------------------------------------------------------

SMB2_NEGOTIATE, SMB2_SESSION_SETUP, SMB2_TREE_CONNECT, SMB2_ECHO = 0, 1, 3, 13


def hdr(command, message_id, *, session_id=0, tree_id=0, credit_charge=0, credits=1, flags=0,
        structure_size=64) -> bytes:
    return struct.pack("<4sHHIHHIIQIIQ16s", b"\xfeSMB", structure_size, credit_charge, 0, command,
                       credits, flags, 0, message_id, 0xFEFF, tree_id, session_id, bytes(16))


def negotiate_body(dialects=(0x0202, 0x0210), count=None, structure_size=36) -> bytes:
    count = len(dialects) if count is None else count
    return struct.pack("<HHHHI16sQ", structure_size, count, 1, 0, 0, os.urandom(16), 0) + \
        b"".join(struct.pack("<H", d) for d in dialects)


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


class Raw:
    def __init__(self, srv):
        self.sock = socket.create_connection((srv.host, srv.port), timeout=RECV_WAIT)

    def send(self, data: bytes):
        self.sock.sendall(data)

    def _recv_exact(self, n, deadline):
        buf = b""
        while len(buf) < n:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def recv(self, wait=RECV_WAIT):
        """('pdu', bytes) | ('closed', None) | ('timeout', None)."""
        deadline = time.monotonic() + wait
        try:
            head = self._recv_exact(4, deadline)
            if head is None:
                return "closed", None
            n = struct.unpack(">I", head)[0] & 0xFFFFFF
            body = self._recv_exact(n, deadline)
            return ("closed", None) if body is None else ("pdu", body)
        except socket.timeout:
            return "timeout", None
        except (ConnectionResetError, BrokenPipeError):
            return "closed", None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


@pytest.fixture
def raw(braid_server, smbc):
    conns = []

    def new():
        r = Raw(braid_server)
        conns.append(r)
        return r
    yield new
    for r in conns:
        r.close()
    # whatever happened, the server must still be alive and serving
    assert braid_server.health() is None, braid_server.health()
    res = smbc("data", "ls", timeout=30)
    assert res.ok, f"server no longer serving after the malformed input:\n{res.out}"


def status(pdu: bytes) -> int:
    return struct.unpack_from("<I", pdu, 8)[0]


def command(pdu: bytes) -> int:
    return struct.unpack_from("<H", pdu, 12)[0]


def expect_error_or_close(r: Raw, allow_wait=False):
    kind, pdu = r.recv()
    if kind == "timeout":
        assert allow_wait, "server neither answered nor closed the connection within %ss" % RECV_WAIT
        return kind, None
    if kind == "pdu":
        assert pdu[:4] == b"\xfeSMB", f"unexpected response {pdu[:16]!r}"
        assert status(pdu) & 0xC0000000 == 0xC0000000, f"expected an error status, got {status(pdu):#x}"
    return kind, pdu


def negotiate(r: Raw, dialects=(0x0202, 0x0210)) -> bytes:
    r.send(frame(hdr(SMB2_NEGOTIATE, 0) + negotiate_body(dialects)))
    kind, pdu = r.recv()
    assert kind == "pdu", kind
    assert status(pdu) == 0 and command(pdu) == SMB2_NEGOTIATE
    return pdu


def test_garbage_bytes(raw):
    r = raw()
    r.send(frame(b"\x00\x01garbage" + os.urandom(120)))
    expect_error_or_close(r)


def test_not_netbios_framed(raw):
    r = raw()
    r.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    expect_error_or_close(r, allow_wait=True)


def test_huge_length_prefix(raw):
    r = raw()
    r.send(b"\x00\xff\xff\xff" + hdr(SMB2_NEGOTIATE, 0) + negotiate_body())
    expect_error_or_close(r, allow_wait=True)   # the server may wait for the rest: not a hang
    r2 = raw()
    negotiate(r2)                                # other connections are unaffected


def test_truncated_header(raw):
    r = raw()
    r.send(frame(hdr(SMB2_NEGOTIATE, 0)[:20]))
    expect_error_or_close(r)


def test_header_only_no_body(raw):
    r = raw()
    r.send(frame(hdr(SMB2_NEGOTIATE, 0)))
    expect_error_or_close(r)


@pytest.mark.parametrize("count", [0, 0xFFFF])
def test_negotiate_bad_dialect_count(raw, count):
    r = raw()
    r.send(frame(hdr(SMB2_NEGOTIATE, 0) + negotiate_body(count=count)))
    expect_error_or_close(r)


def test_negotiate_no_common_dialect(raw):
    r = raw()
    r.send(frame(hdr(SMB2_NEGOTIATE, 0) + negotiate_body(dialects=(0x0100, 0x0999))))
    expect_error_or_close(r)


@pytest.mark.parametrize("where", ["header", "body"])
def test_bad_structure_size(raw, where):
    r = raw()
    if where == "header":
        r.send(frame(hdr(SMB2_NEGOTIATE, 0, structure_size=60) + negotiate_body()))
    else:
        r.send(frame(hdr(SMB2_NEGOTIATE, 0) + negotiate_body(structure_size=35)))
    expect_error_or_close(r)


def test_smb1_negotiate_upgrades_to_smb2(raw):
    r = raw()
    dialects = b"".join(b"\x02" + d + b"\x00" for d in (b"NT LM 0.12", b"SMB 2.002", b"SMB 2.???"))
    smb1 = struct.pack("<4sBIBHH8sHHHHH", b"\xffSMB", 0x72, 0, 0x18, 0xC853, 0, bytes(8), 0, 0xFFFF,
                       os.getpid() & 0xFFFF, 0, 0)
    smb1 += struct.pack("<BH", 0, len(dialects)) + dialects
    r.send(frame(smb1))
    kind, pdu = r.recv()
    assert kind == "pdu", f"no answer to an SMB1 NEGOTIATE offering SMB 2.x ({kind})"
    assert pdu[:4] == b"\xfeSMB", f"expected an SMB2 response, got {pdu[:8]!r}"
    assert command(pdu) == SMB2_NEGOTIATE and status(pdu) == 0
    dialect = struct.unpack_from("<H", pdu, 64 + 4)[0]
    assert dialect in (0x02FF, 0x0202), hex(dialect)
    if dialect == 0x02FF:
        # the client continues with an SMB2 NEGOTIATE, MessageId 1
        r.send(frame(hdr(SMB2_NEGOTIATE, 1) + negotiate_body((0x0202, 0x0210))))
        kind, pdu = r.recv()
        assert kind == "pdu" and status(pdu) == 0 and command(pdu) == SMB2_NEGOTIATE
        assert struct.unpack_from("<H", pdu, 64 + 4)[0] in (0x0202, 0x0210)


def test_unknown_session_id(raw, braid_server):
    r = raw()
    negotiate(r)
    path = rf"\\{braid_server.host}\data".encode("utf-16-le")
    body = struct.pack("<HHHH", 9, 0, 64 + 8, len(path)) + path
    r.send(frame(hdr(SMB2_TREE_CONNECT, 1, session_id=0x1234_5678_9ABC) + body))
    kind, pdu = r.recv()
    assert kind == "pdu", kind
    assert status(pdu) == St.USER_SESSION_DELETED, hex(status(pdu))


SMB2_IOCTL = 11
FSCTL_SMBTORTURE_FORCE_UNACKED_TIMEOUT = 0x83848003


def test_smbtorture_fsctl_needs_a_session_by_default(raw):
    # Samba's test control may come without a session only where the configuration turns
    # the test controls on (interop/braid-torture.sh does); a default server refuses it.
    r = raw()
    negotiate(r)
    body = struct.pack("<HHI16sIIIIIIII", 57, 0, FSCTL_SMBTORTURE_FORCE_UNACKED_TIMEOUT, b"\xff" * 16,
                       0, 0, 0, 0, 0, 0, 1, 0)
    r.send(frame(hdr(SMB2_IOCTL, 1) + body))
    kind, pdu = r.recv()
    assert kind == "pdu", kind
    assert status(pdu) == St.USER_SESSION_DELETED, hex(status(pdu))


def test_credit_charge_beyond_granted(raw):
    r = raw()
    pdu = negotiate(r)
    granted = struct.unpack_from("<H", pdu, 14)[0]
    r.send(frame(hdr(SMB2_ECHO, 1, credit_charge=min(0xFFFF, granted + 500)) + struct.pack("<HH", 4, 0)))
    expect_error_or_close(r)


def test_message_id_replay(raw):
    r = raw()
    negotiate(r)
    r.send(frame(hdr(SMB2_ECHO, 0) + struct.pack("<HH", 4, 0)))   # MessageId 0 already used
    expect_error_or_close(r)


def test_many_connections_closed_abruptly(raw):
    for _ in range(50):
        r = raw()
        r.send(frame(hdr(SMB2_NEGOTIATE, 0) + negotiate_body())[:30])
        r.close()
