"""What a macOS client does, with Python smbprotocol against the real server: the AAPL create
context negotiated on the share root (server, volume and model answers; a malformed context
refused), Finder info written to and read back from `AFP_AfpInfo`, a resource fork of 1 MiB
written in 64 KiB pieces to `AFP_Resource` and read back, the readdir attributes a listing
then carries (resource fork size, compressed Finder info, access, mode), a file id resolved
to its path, and a client without the context seeing ordinary listings."""

import os
import struct

from smbprotocol.create_contexts import SMB2CreateContextRequest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import CreateDisposition, CreateOptions, FileAttributes, ImpersonationLevel, Open, ShareAccess
from smbprotocol.open import FilePipePrinterAccessMask as A

from harness import Smb
from test_streams import query

INVALID_PARAMETER, OBJECT_NAME_NOT_FOUND = 0xC000000D, 0xC0000034
SERVER_QUERY, RESOLVE_ID = 1, 2
SERVER_CAPS, VOLUME_CAPS, MODEL_INFO = 1, 2, 4
READ_DIR_ATTR, OSX_COPYFILE, UNIX_BASED = 1, 2, 4
SUPPORT_RESOLVE_ID, CASE_SENSITIVE, FULL_SYNC = 1, 2, 4
FILE_INTERNAL_INFORMATION, FILE_ID_BOTH_DIRECTORY_INFORMATION = 6, 37
SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE


def aapl(data: bytes) -> SMB2CreateContextRequest:
    c = SMB2CreateContextRequest()
    c["buffer_name"] = b"AAPL"
    c["buffer_data"] = data
    return c


def server_query(bitmap=SERVER_CAPS | VOLUME_CAPS | MODEL_INFO, caps=READ_DIR_ATTR | OSX_COPYFILE | UNIX_BASED):
    return aapl(struct.pack("<IIQQ", SERVER_QUERY, 0, bitmap, caps))


def open_root(s, contexts):
    """Opens the share root as macOS does first, with `contexts`; returns (open, AAPL reply)."""
    f = Open(s.tree, "")
    resp = f.create(ImpersonationLevel.Impersonation, A.FILE_READ_ATTRIBUTES | A.FILE_READ_DATA,
                    FileAttributes.FILE_ATTRIBUTE_DIRECTORY, SHARE_ALL, CreateDisposition.FILE_OPEN,
                    CreateOptions.FILE_DIRECTORY_FILE, create_contexts=contexts)
    replies = [c for c in resp or [] if isinstance(c, bytes)]
    return f, (replies[0] if replies else None)


def afp_info(ftype: bytes, creator: bytes, flags: int, ext_flags: int) -> bytes:
    """A 60-byte AfpInfo: signature, version, reserved, backup date, FinderInfo (32 bytes:
    type, creator, flags, location, folder; then the extended Finder info with its flags at
    byte 24), ProDOS info and padding."""
    finder = ftype + creator + struct.pack(">H", flags) + b"\0" * 14 + struct.pack(">H", ext_flags) + b"\0" * 6
    assert len(finder) == 32
    info = b"AFP\0" + struct.pack(">I", 0x00010000) + b"\0" * 4 + struct.pack(">I", 0x80000000) + finder + b"\0" * 12
    assert len(info) == 60
    return info


def listing(s, dir_open):
    """FileIdBothDirectoryInformation of `dir_open`: {name: (ea_size, short_name_length,
    short_name bytes, reserved2)} parsed from the raw answer."""
    from smbprotocol.query_info import FileInformationClass as C  # noqa: F401 (the class exists)
    entries = dir_open.query_directory("*", FILE_ID_BOTH_DIRECTORY_INFORMATION)
    out = {}
    for e in entries:
        name = e["file_name"].get_value().decode("utf-16-le")
        raw = e.pack()
        ea_size, = struct.unpack_from("<I", raw, 64)
        out[name] = (ea_size, raw[68], raw[70:94], struct.unpack_from("<H", raw, 94)[0])
    return out


def test_aapl_server_query(braid_server):
    with Smb(braid_server) as s:
        f, reply = open_root(s, [server_query()])
        f.close()
        assert reply is not None, "an AAPL answer"
        cmd, _, bitmap, server_caps, volume_caps, _, model_len = struct.unpack_from("<IIQQQII", reply)
        assert cmd == SERVER_QUERY
        assert bitmap == SERVER_CAPS | VOLUME_CAPS | MODEL_INFO
        assert server_caps & UNIX_BASED and server_caps & READ_DIR_ATTR
        assert volume_caps & SUPPORT_RESOLVE_ID and volume_caps & FULL_SYNC
        assert not volume_caps & CASE_SENSITIVE, "names are case-insensitive"
        assert reply[40:40 + model_len].decode("utf-16-le") == "Braid"
        # Only the parts asked for.
        f, reply = open_root(s, [server_query(bitmap=SERVER_CAPS)])
        f.close()
        assert len(reply) == 24


def test_a_malformed_aapl_context_is_refused(braid_server):
    with Smb(braid_server) as s:
        for bad in (struct.pack("<IIQ", SERVER_QUERY, 0, 7), struct.pack("<IIQQ", 9, 0, 7, 7)):
            try:
                open_root(s, [aapl(bad)])
                raise AssertionError("accepted")
            except SMBResponseException as e:
                assert e.status == INVALID_PARAMETER


def test_finder_info_resource_fork_and_readdir_attributes(braid_server, scratch):
    name, path = scratch
    with Smb(braid_server) as s:
        root, reply = open_root(s, [server_query()])
        root.close()
        assert reply is not None
        f = s.open(rf"{name}\photo.jpg", disposition=CreateDisposition.FILE_CREATE)
        f.write(b"jpeg bytes", 0)
        info = afp_info(b"JPEG", b"8BIM", 0x0100, 0x0040)
        meta = s.open(rf"{name}\photo.jpg:AFP_AfpInfo", disposition=CreateDisposition.FILE_OPEN_IF)
        assert meta.write(info, 0) == 60
        meta.close()
        meta = s.open(rf"{name}\photo.jpg:AFP_AfpInfo", disposition=CreateDisposition.FILE_OPEN)
        assert meta.read(0, 4096) == info
        meta.close()
        fork = os.urandom(1 << 20)
        rsrc = s.open(rf"{name}\photo.jpg:AFP_Resource", disposition=CreateDisposition.FILE_OPEN_IF)
        for at in range(0, len(fork), 65536):
            assert rsrc.write(fork[at:at + 65536], at) == 65536
        rsrc.close()
        rsrc = s.open(rf"{name}\photo.jpg:AFP_Resource", disposition=CreateDisposition.FILE_OPEN)
        got = b"".join(rsrc.read(at, 65536) for at in range(0, len(fork), 65536))
        rsrc.close()
        assert got == fork, "the resource fork reads back byte for byte"
        assert f.read(0, 100) == b"jpeg bytes", "the data fork is untouched"
        f.close()
        d = s.open(name, access=A.FILE_READ_DATA | A.FILE_READ_ATTRIBUTES, disposition=CreateDisposition.FILE_OPEN,
                   directory=True)
        entries = listing(s, d)
        d.close()
        ea, short_len, short, reserved2 = entries["photo.jpg"]
        assert short_len == 24
        assert struct.unpack_from("<Q", short)[0] == 1 << 20, "resource fork size"
        assert short[8:16] == b"JPEG8BIM", "type and creator"
        assert short[16:18] == struct.pack(">H", 0x0100), "Finder flags"
        assert short[18:20] == struct.pack(">H", 0x0040), "extended Finder flags"
        assert ea & A.FILE_READ_DATA, "the caller's access in EaSize"
        assert reserved2 == os.stat(path / "photo.jpg").st_mode & 0xFFFF


def test_a_file_id_resolves_to_its_path(braid_server, scratch):
    name, _ = scratch
    with Smb(braid_server) as s:
        root, _ = open_root(s, [server_query()])
        root.close()
        s.open(rf"{name}\sub", disposition=CreateDisposition.FILE_CREATE, directory=True).close()
        f = s.open(rf"{name}\sub\alias-target.txt", disposition=CreateDisposition.FILE_CREATE)
        file_id, = struct.unpack("<Q", query(s, f, FILE_INTERNAL_INFORMATION)[:8])
        f.close()
        root, reply = open_root(s, [aapl(struct.pack("<IIQ", RESOLVE_ID, 0, file_id))])
        root.close()
        cmd, _, status, plen = struct.unpack_from("<IIII", reply)
        assert (cmd, status) == (RESOLVE_ID, 0)
        assert reply[16:16 + plen].decode("utf-16-le") == rf"{name}\sub\alias-target.txt"
        root, reply = open_root(s, [aapl(struct.pack("<IIQ", RESOLVE_ID, 0, 0xFFFF_FFFF_FFF0))])
        root.close()
        assert struct.unpack_from("<I", reply, 8)[0] == OBJECT_NAME_NOT_FOUND


def test_a_client_without_the_context_gets_ordinary_listings(braid_server, scratch):
    name, _ = scratch
    with Smb(braid_server) as s:
        f = s.open(rf"{name}\plain.txt", disposition=CreateDisposition.FILE_CREATE)
        meta = s.open(rf"{name}\plain.txt:AFP_AfpInfo", disposition=CreateDisposition.FILE_OPEN_IF)
        meta.write(afp_info(b"TEXT", b"ttxt", 0, 0), 0)
        meta.close()
        f.close()
        d = s.open(name, access=A.FILE_READ_DATA | A.FILE_READ_ATTRIBUTES, disposition=CreateDisposition.FILE_OPEN,
                   directory=True)
        ea, short_len, short, reserved2 = listing(s, d)["plain.txt"]
        d.close()
        assert (ea, reserved2) == (0, 0)
        assert short_len <= 24 and b"TEXT" not in short


def test_afp_afpinfo_behaves_as_on_a_mac(braid_server, scratch):
    from test_streams import streams, status_of
    from smbprotocol.file_info import FileEndOfFileInformation
    name, _ = scratch
    with Smb(braid_server) as s:
        f = s.open(rf"{name}\doc.txt", disposition=CreateDisposition.FILE_CREATE)
        meta = s.open(rf"{name}\doc.txt:AFP_AfpInfo", disposition=CreateDisposition.FILE_OPEN_IF)
        # Never written: it reads as an empty AfpInfo and is not listed.
        assert meta.read(0, 60)[:8] == b"AFP\0\0\x01\0\0"
        assert [n for n, _, _ in streams(s, f)] == ["::$DATA"]
        # Only AfpInfo data is taken; a short write at an offset is refused.
        assert status_of(lambda: meta.write(b"foo", 0)) == INVALID_PARAMETER
        assert status_of(lambda: meta.write(b"AFP\0", 8)) == INVALID_PARAMETER
        info = afp_info(b"TEXT", b"ttxt", 0, 0)
        assert meta.write(info, 0) == 60
        # Any offset up to 60 reads from the start; past it, nothing.
        assert meta.read(16, 8) == info[:8]
        assert status_of(lambda: meta.read(61, 8)) == 0xC0000011  # END_OF_FILE
        eof = FileEndOfFileInformation()
        eof["end_of_file"] = 61
        assert status_of(lambda: s.set_info(meta, eof)) == 0xC0000099  # ALLOTTED_SPACE_EXCEEDED
        assert [n for n, _, _ in streams(s, f)] == ["::$DATA", ":AFP_AfpInfo:$DATA"]
        # FinderInfo of zeros deletes the stream, as macOS does.
        assert meta.write(afp_info(b"\0" * 4, b"\0" * 4, 0, 0), 0) == 60
        meta.close()
        assert [n for n, _, _ in streams(s, f)] == ["::$DATA"]
        f.close()
