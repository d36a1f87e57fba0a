"""What a macOS client does, with Python smbprotocol against the real server: the AAPL create
context negotiated on the share root (server, volume and model answers; a malformed context
refused), Finder info written to and read back from `AFP_AfpInfo`, a resource fork of 1 MiB
written in 64 KiB pieces to `AFP_Resource` and read back, the readdir attributes a listing
then carries (resource fork size, compressed Finder info, access, mode), a file id resolved
to its path, and a client without the context seeing ordinary listings. Then what the
context turns on for the connection: a copy-chunk request without chunks copies a whole file
with its named streams (copyfile), and security descriptors carry the file's POSIX mode, owner
and group as S-1-5-88 ACEs, a mode ACE sent back changing the mode (NFS ACEs), and a directory
with an open file beneath it may be renamed."""

import os
import struct

from smbprotocol.create_contexts import SMB2CreateContextRequest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import CreateDisposition, CreateOptions, FileAttributes, ImpersonationLevel, Open, ShareAccess
from smbprotocol.open import FilePipePrinterAccessMask as A, SMB2QueryInfoRequest, SMB2QueryInfoResponse, SMB2SetInfoRequest

from harness import Smb
from test_copychunk import ioctl
from test_streams import query, streams

INVALID_PARAMETER, OBJECT_NAME_NOT_FOUND = 0xC000000D, 0xC0000034
SERVER_QUERY, RESOLVE_ID = 1, 2
SERVER_CAPS, VOLUME_CAPS, MODEL_INFO = 1, 2, 4
READ_DIR_ATTR, OSX_COPYFILE, UNIX_BASED, NFS_ACE = 1, 2, 4, 8
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
        assert server_caps == UNIX_BASED | READ_DIR_ATTR | OSX_COPYFILE | NFS_ACE
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


RESUME_KEY, COPYCHUNK_WRITE = 0x00140078, 0x001480F2
OBJECT_NAME_COLLISION = 0xC0000035
PRIVATE_COLON = "\uf022"   # how macOS spells ':' inside a stream name


def copy_whole_file(s, src, dst):
    """A copy-chunk request without chunks from `src` to `dst`: (ChunksWritten,
    ChunkBytesWritten, TotalBytesWritten), status."""
    key = ioctl(s, src, RESUME_KEY, b"", 32)[0][:24]
    out, status = ioctl(s, dst, COPYCHUNK_WRITE, key + struct.pack("<II", 0, 0), 12)
    return (struct.unpack("<III", out) if len(out) == 12 else None), status


def test_copyfile_copies_a_whole_file_with_its_streams(braid_server, scratch):
    name, path = scratch
    data, old = os.urandom(100_000), b"x" * 150_000
    (path / "src.bin").write_bytes(data)
    (path / "dst.bin").write_bytes(old)
    forks = {"AFP_Resource": os.urandom(3000), f"foo{PRIVATE_COLON}bar": b"abcdefghij"}
    with Smb(braid_server) as s:
        for sname, content in [*forks.items(), ("only-on-target", b"kept")]:
            at = "dst.bin" if sname == "only-on-target" else "src.bin"
            st = s.open(rf"{name}\{at}:{sname}", disposition=CreateDisposition.FILE_OPEN_IF)
            st.write(content, 0)
            st.close()
        src = s.open(rf"{name}\src.bin", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
        dst = s.open(rf"{name}\dst.bin", access=A.GENERIC_READ | A.GENERIC_WRITE, disposition=CreateDisposition.FILE_OPEN)
        # Before the AAPL context, no chunks copy nothing (as Windows answers).
        assert copy_whole_file(s, src, dst) == ((0, 0, 0), 0)
        assert (path / "dst.bin").read_bytes() == old
        root, _ = open_root(s, [server_query(caps=OSX_COPYFILE)])
        root.close()
        assert copy_whole_file(s, src, dst) == ((0, 0, len(data)), 0)
        # The source's bytes at the start; the target is not truncated (as Samba copies).
        assert (path / "dst.bin").read_bytes() == data + old[len(data):]
        for sname, content in [*forks.items(), ("only-on-target", b"kept")]:
            st = s.open(rf"{name}\dst.bin:{sname}", disposition=CreateDisposition.FILE_OPEN)
            assert st.read(0, 65536) == content, sname
            st.close()
        listed = {n for n, _, _ in streams(s, dst)}
        assert {f":{n}:$DATA" for n in forks} <= listed, listed
        # The target now has the source's streams: a second copy collides before moving anything.
        (path / "src.bin").write_bytes(b"new")
        counts, status = copy_whole_file(s, src, dst)
        assert status == OBJECT_NAME_COLLISION and counts in (None, (0, 0, 0))
        assert (path / "dst.bin").read_bytes()[:3] != b"new"
        src.close()
        dst.close()


OWNER_GROUP_DACL = 0x7
DACL_ONLY = 0x4


def sid_bytes(text: str) -> bytes:
    parts = [int(p) for p in text.split("-")[2:]]
    return struct.pack("<BB", 1, len(parts) - 1) + parts[0].to_bytes(6, "big") + b"".join(struct.pack("<I", p) for p in parts[1:])


def sid_text(raw: bytes) -> str:
    n = raw[1]
    return "S-1-" + "-".join([str(int.from_bytes(raw[2:8], "big"))] + [str(v) for v in struct.unpack_from(f"<{n}I", raw, 8)])


def dacl_aces(sd: bytes):
    """The DACL of a self-relative descriptor as [(type, mask, sid text)]."""
    off = struct.unpack_from("<I", sd, 16)[0]
    if not off:
        return []
    count, out, at = struct.unpack_from("<H", sd, off + 4)[0], [], off + 8
    for _ in range(count):
        kind, _, size, mask = struct.unpack_from("<BBHI", sd, at)
        out.append((kind, mask, sid_text(sd[at + 8:at + size])))
        at += size
    return out


def descriptor(aces) -> bytes:
    """A self-relative descriptor with only a DACL of [(type, mask, sid text)]."""
    body = b"".join(struct.pack("<BBHI", k, 0, 8 + len(sid_bytes(t)), m) + sid_bytes(t) for k, m, t in aces)
    acl = struct.pack("<BBHHH", 2, 0, 8 + len(body), len(aces), 0) + body
    return struct.pack("<BBHIIII", 1, 0, 0x8004, 0, 0, 0, 20) + acl


def query_sd(s, f, sections=OWNER_GROUP_DACL) -> bytes:
    req = SMB2QueryInfoRequest()
    req["info_type"] = 3
    req["additional_information"] = sections
    req["file_id"] = f.file_id
    req["output_buffer_length"] = 65536
    q = SMB2QueryInfoResponse()
    q.unpack(s.conn.receive(s.conn.send(req, s.session.session_id, s.tree.tree_connect_id))["data"].get_value())
    return q["buffer"].get_value()


def set_sd(s, f, sd: bytes, sections=DACL_ONLY):
    req = SMB2SetInfoRequest()
    req["info_type"] = 3
    req["additional_information"] = sections
    req["buffer"] = sd
    req["file_id"] = f.file_id
    s.conn.receive(s.conn.send(req, s.session.session_id, s.tree.tree_connect_id))


def nfs_aces(sd: bytes):
    return [(k, m, t) for k, m, t in dacl_aces(sd) if t.startswith("S-1-5-88-")]


def test_nfs_aces_report_and_change_the_posix_mode(braid_server, scratch):
    name, path = scratch
    (path / "mode.txt").write_bytes(b"x")
    os.chmod(path / "mode.txt", 0o640)
    st = os.stat(path / "mode.txt")
    everyone = (0, 0x1F01FF, "S-1-1-0")
    with Smb(braid_server) as plain:
        f = plain.open(rf"{name}\mode.txt", access=A.READ_CONTROL | A.WRITE_DAC, disposition=CreateDisposition.FILE_OPEN)
        assert nfs_aces(query_sd(plain, f)) == [], "not without the AAPL context"
        f.close()
    with Smb(braid_server) as s:
        root, reply = open_root(s, [server_query(caps=READ_DIR_ATTR | UNIX_BASED | NFS_ACE)])
        root.close()
        assert struct.unpack_from("<Q", reply, 16)[0] & NFS_ACE
        f = s.open(rf"{name}\mode.txt", access=A.READ_CONTROL | A.WRITE_DAC, disposition=CreateDisposition.FILE_OPEN)
        sd = query_sd(s, f)
        assert nfs_aces(sd) == [(1, 0, f"S-1-5-88-3-{st.st_mode}"), (1, 0, f"S-1-5-88-1-{st.st_uid}"),
                                (1, 0, f"S-1-5-88-2-{st.st_gid}")]
        assert nfs_aces(query_sd(s, f, sections=0x1)) == [], "only with the DACL"
        # A mode ACE sent back chmods the file; no S-1-5-88 ACE is stored, however many come.
        set_sd(s, f, descriptor([everyone, (1, 0, "S-1-5-88-3-33261"), (1, 0, "S-1-5-88-1-27"), (1, 0, "S-1-5-88-1-27"),
                                 (1, 0, "S-1-5-88-2-300")]))
        assert os.stat(path / "mode.txt").st_mode & 0o7777 == 0o755
        sd = query_sd(s, f)
        assert dacl_aces(sd)[0] == everyone
        assert nfs_aces(sd) == [(1, 0, f"S-1-5-88-3-{0o100755}"), (1, 0, f"S-1-5-88-1-{st.st_uid}"),
                                (1, 0, f"S-1-5-88-2-{st.st_gid}")]
        # A DACL of NFS ACEs only changes the mode and leaves the stored DACL as it was.
        set_sd(s, f, descriptor([(1, 0, "S-1-5-88-3-384")]))
        assert os.stat(path / "mode.txt").st_mode & 0o7777 == 0o600
        assert dacl_aces(query_sd(s, f))[0] == everyone
        f.close()


def test_a_macos_client_renames_a_directory_with_an_open_file_beneath(braid_server, scratch):
    from smbprotocol.file_info import FileRenameInformation

    name, path = scratch
    with Smb(braid_server) as s:
        s.open(rf"{name}\folder", disposition=CreateDisposition.FILE_CREATE, directory=True).close()
        f = s.open(rf"{name}\folder\doc.txt", disposition=CreateDisposition.FILE_CREATE,
                   options=CreateOptions.FILE_DELETE_ON_CLOSE)

        def rename_folder(to):
            d = s.open(rf"{name}\folder", access=A.DELETE | A.FILE_READ_ATTRIBUTES, disposition=CreateDisposition.FILE_OPEN,
                       directory=True)
            info = FileRenameInformation()
            info["file_name"] = to
            try:
                s.set_info(d, info)
            finally:
                d.close()

        try:
            rename_folder(rf"{name}\moved")
            raise AssertionError("a Windows client may not move a directory with an open file")
        except SMBResponseException as e:
            assert e.status == 0xC0000022
        root, _ = open_root(s, [server_query()])
        root.close()
        rename_folder(rf"{name}\moved")
        # The open file moved with it and is still usable; its delete on close finds it.
        assert f.write(b"after the move", 0) == 14
        assert (path / "moved" / "doc.txt").read_bytes() == b"after the move"
        f.close()
        assert not (path / "moved" / "doc.txt").exists()
