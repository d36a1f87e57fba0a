"""Named (alternate data) streams over SMB with Python smbprotocol against the real server:
`file:stream[:$DATA]` opened, created (with its file), written, read back and listed by
FileStreamInformation; the main stream untouched; a Zone.Identifier round trip; deleting a
stream (delete on close) and the file with its streams; invalid stream names; streams past
one xattr value; stream rename; share modes kept per stream, DELETE of the
file refused while a stream does not share it; a file deleted while a stream is open goes
when the stream closes; smbclient putting, getting and listing a stream; CHANGE_NOTIFY's
stream actions."""

import os
import struct

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.file_info import FileDispositionInformation, FileRenameInformation
from smbprotocol.open import CreateDisposition, CreateOptions, FilePipePrinterAccessMask as A, ShareAccess
from smbprotocol.open import SMB2QueryInfoRequest, SMB2QueryInfoResponse

from harness import Smb

OBJECT_NAME_INVALID, OBJECT_NAME_NOT_FOUND = 0xC0000033, 0xC0000034
NOT_A_DIRECTORY, FILE_IS_A_DIRECTORY, NOT_SUPPORTED = 0xC0000103, 0xC00000BA, 0xC00000BB
SHARING_VIOLATION, DELETE_PENDING = 0xC0000043, 0xC0000056
OBJECT_NAME_COLLISION, ACCESS_DENIED, INVALID_PARAMETER = 0xC0000035, 0xC0000022, 0xC000000D
FILE_ALL_INFORMATION, FILE_STREAM_INFORMATION = 18, 22
ZONE = b"[ZoneTransfer]\r\nZoneId=3\r\nHostUrl=https://example.org/x.zip\r\n"


def query(s, f, cls):
    """The raw answer of a file information query of class `cls` on open `f`."""
    req = SMB2QueryInfoRequest()
    req["info_type"] = 1
    req["file_info_class"] = cls
    req["file_id"] = f.file_id
    req["output_buffer_length"] = 4096
    request = s.conn.send(req, s.session.session_id, s.tree.tree_connect_id)
    q = SMB2QueryInfoResponse()
    q.unpack(s.conn.receive(request)["data"].get_value())
    return q["buffer"].get_value()


def streams(s, f):
    """FileStreamInformation of open `f`: [(name, size, allocation)] in wire order."""
    buf, out, at = query(s, f, FILE_STREAM_INFORMATION), [], 0
    while buf:
        nxt, nlen, size, alloc = struct.unpack_from("<IIqq", buf, at)
        out.append((buf[at + 24:at + 24 + nlen].decode("utf-16-le"), size, alloc))
        assert at % 8 == 0
        if nxt == 0:
            break
        at += nxt
    return out


def status_of(fn):
    """The NTSTATUS an smbprotocol call fails with (0 if it succeeds)."""
    try:
        fn()
    except SMBResponseException as e:
        return e.status
    return 0


def test_stream_round_trip_listing_and_delete(braid_server, scratch):
    name, path = scratch
    with Smb(braid_server) as s:
        f = s.open(rf"{name}\f.txt", disposition=CreateDisposition.FILE_CREATE)
        f.write(b"main data", 0)
        st = s.open(rf"{name}\f.txt:Zone.Identifier", disposition=CreateDisposition.FILE_CREATE)
        assert st.write(ZONE, 0) == len(ZONE)
        st.close()
        # Read back through another spelling of the name (case-insensitive, with its type).
        st = s.open(rf"{name}\f.txt:zone.identifier:$DATA", disposition=CreateDisposition.FILE_OPEN)
        assert st.read(0, 4096) == ZONE
        assert streams(s, st) == streams(s, f)
        st.close()
        assert f.read(0, 100) == b"main data"
        assert streams(s, f) == [("::$DATA", 9, 4096), (":Zone.Identifier:$DATA", len(ZONE), 4096)]
        # The main stream named explicitly is the file.
        m = s.open(rf"{name}\f.txt::$DATA", disposition=CreateDisposition.FILE_OPEN)
        assert m.read(0, 100) == b"main data"
        m.close()
        # A stream's open never renames its file.
        st = s.open(rf"{name}\f.txt:Zone.Identifier", disposition=CreateDisposition.FILE_OPEN)
        info = FileRenameInformation()
        info["file_name"] = rf"{name}\g.txt"
        assert status_of(lambda: s.set_info(st, info)) == NOT_SUPPORTED
        st.close()
        assert sorted(p.name for p in path.iterdir()) == ["f.txt"]
        # Delete on close removes the stream alone.
        st = s.open(rf"{name}\f.txt:Zone.Identifier", disposition=CreateDisposition.FILE_OPEN,
                    options=CreateOptions.FILE_DELETE_ON_CLOSE)
        st.close()
        assert streams(s, f) == [("::$DATA", 9, 4096)]
        assert status_of(lambda: s.open(rf"{name}\f.txt:Zone.Identifier", disposition=CreateDisposition.FILE_OPEN)) \
            == OBJECT_NAME_NOT_FOUND
        f.close()
        assert (path / "f.txt").read_bytes() == b"main data"


def test_stream_creates_its_file_and_goes_with_it(braid_server, scratch):
    name, path = scratch
    with Smb(braid_server) as s:
        st = s.open(rf"{name}\new.txt:s1", disposition=CreateDisposition.FILE_CREATE)
        st.write(b"stream one", 0)
        st.close()
        assert (path / "new.txt").stat().st_size == 0
        if braid_server.target == "braid":
            assert os.getxattr(path / "new.txt", "user.braid.stream.s1") == b"stream one"
        # Overwriting the file drops its streams (MS-FSA 2.1.5.1.2.1).
        s.open(rf"{name}\new.txt:s2", disposition=CreateDisposition.FILE_CREATE).close()
        f = s.open(rf"{name}\new.txt", disposition=CreateDisposition.FILE_OVERWRITE)
        assert [n for n, _, _ in streams(s, f)] == ["::$DATA"]
        f.close()
        s.open(rf"{name}\new.txt:s3", disposition=CreateDisposition.FILE_CREATE).close()
        # Deleting the file deletes its streams: a new file of that name has none.
        f = s.open(rf"{name}\new.txt", disposition=CreateDisposition.FILE_OPEN, options=CreateOptions.FILE_DELETE_ON_CLOSE)
        f.close()
        assert not (path / "new.txt").exists()
        f = s.open(rf"{name}\new.txt", disposition=CreateDisposition.FILE_CREATE)
        assert [n for n, _, _ in streams(s, f)] == ["::$DATA"]
        f.close()


def test_invalid_stream_names_and_directories(braid_server, scratch):
    name, _ = scratch
    with Smb(braid_server) as s:
        s.open(rf"{name}\f.txt", disposition=CreateDisposition.FILE_CREATE).close()
        for bad in ("f.txt:", "f.txt::", "f.txt:s:$FOO", "f.txt:a\\b", "f.txt:a:b:$DATA", "f.txt:a/b"):
            assert status_of(lambda: s.open(rf"{name}\{bad}")) == OBJECT_NAME_INVALID, bad
        assert status_of(lambda: s.open(rf"{name}\f.txt:missing", disposition=CreateDisposition.FILE_OPEN)) \
            == OBJECT_NAME_NOT_FOUND
        # A stream is never a directory; a directory has no main data stream.
        assert status_of(lambda: s.open(rf"{name}\f.txt:s", directory=True)) == NOT_A_DIRECTORY
        assert status_of(lambda: s.open(rf"{name}::$DATA", disposition=CreateDisposition.FILE_OPEN,
                                        options=0)) == FILE_IS_A_DIRECTORY
        # A directory has no ::$DATA but may have named streams.
        d = s.open(name, directory=True, access=A.GENERIC_READ)
        assert streams(s, d) == []
        s.open(rf"{name}:dirstream", disposition=CreateDisposition.FILE_CREATE, options=0).close()
        assert [n for n, _, _ in streams(s, d)] == [":dirstream:$DATA"]
        d.close()


def test_streams_beyond_one_xattr_value(braid_server, scratch):
    """A stream grows past 64 KiB (one xattr value) in place."""
    if braid_server.target != "braid":
        pytest.skip("Samba's streams_xattr holds 64 KiB")
    name, _ = scratch
    with Smb(braid_server) as s:
        st = s.open(rf"{name}\big.bin:data", disposition=CreateDisposition.FILE_CREATE)
        assert st.write(b"x" * 65536, 0) == 65536
        assert st.write(b"y" * 10, 65531) == 10
        assert st.read(65530, 16) == b"x" + b"y" * 10
        st.close()
        f = s.open(rf"{name}\big.bin", disposition=CreateDisposition.FILE_OPEN)
        assert streams(s, f)[1][:2] == (":data:$DATA", 65541)
        f.close()


def rename_to(s, f, to, replace=True):
    """FileRenameInformation of open `f` to `to`: the NTSTATUS (0 on success)."""
    info = FileRenameInformation()
    info["replace_if_exists"] = replace
    info["file_name"] = to
    return status_of(lambda: s.set_info(f, info))


def test_stream_rename(braid_server, scratch):
    """FileRenameInformation with `:new` on a stream open renames the stream within its file
    (MS-FSA 2.1.5.14.11.1): the content moves, the open follows, a stream of the new name is
    replaced only with ReplaceIfExists and only while nobody has it open; `::$DATA` makes it
    the file's main stream."""
    if braid_server.target != "braid":
        pytest.skip("Samba refuses stream renames (SHARING_VIOLATION, a known failure)")
    name, path = scratch
    with Smb(braid_server) as s:
        f = s.open(rf"{name}\f.txt", disposition=CreateDisposition.FILE_CREATE)
        f.write(b"main", 0)
        st = s.open(rf"{name}\f.txt:one", disposition=CreateDisposition.FILE_CREATE)
        st.write(b"first", 0)
        assert rename_to(s, st, ":Renamed:$DATA") == 0
        assert [n for n, _, _ in streams(s, f)] == ["::$DATA", ":Renamed:$DATA"]
        # The open follows its stream.
        st.write(b"!", 5)
        assert st.read(0, 100) == b"first!"
        info = query(s, st, FILE_ALL_INFORMATION)
        assert info[100:].decode("utf-16-le") == rf"\{name}\f.txt:Renamed"
        # Another stream's name: kept without ReplaceIfExists, replaced with it.
        s.open(rf"{name}\f.txt:two", disposition=CreateDisposition.FILE_CREATE).close()
        assert rename_to(s, st, ":two", replace=False) == OBJECT_NAME_COLLISION
        other = s.open(rf"{name}\f.txt:two", disposition=CreateDisposition.FILE_OPEN)
        assert rename_to(s, st, ":two") == ACCESS_DENIED
        other.close()
        assert rename_to(s, st, ":two") == 0
        assert streams(s, f)[1:] == [(":two:$DATA", 6, 4096)]
        # The main stream renamed to a named one is not offered; malformed names are refused.
        assert rename_to(s, f, ":x") == NOT_SUPPORTED
        for bad in (":", ":a:", ":a:$FOO", ":a\\b"):
            assert rename_to(s, st, bad) == INVALID_PARAMETER, bad
        # A stream of the file named by its path: as Windows answers (smbtorture).
        assert rename_to(s, st, rf"{name}\f.txt:three") == SHARING_VIOLATION
        # Deleting the renamed open deletes the stream by its new name.
        disp = FileDispositionInformation()
        disp["delete_pending"] = True
        s.set_info(st, disp)
        st.close()
        assert [n for n, _, _ in streams(s, f)] == ["::$DATA"]
        assert f.read(0, 10) == b"main"
        f.close()
        # A stream renamed to `::$DATA` becomes the main stream: refused over a non-empty one
        # without ReplaceIfExists and while the file is open, then its content moves there.
        st = s.open(rf"{name}\f.txt:fork", disposition=CreateDisposition.FILE_CREATE)
        st.write(b"fork data", 0)
        assert rename_to(s, st, "::$DATA", replace=False) == OBJECT_NAME_COLLISION
        f = s.open(rf"{name}\f.txt", disposition=CreateDisposition.FILE_OPEN)
        assert rename_to(s, st, "::$DATA") == SHARING_VIOLATION
        f.close()
        assert rename_to(s, st, "::$DATA") == 0
        assert st.read(0, 100) == b"fork data"
        st.close()
        assert (path / "f.txt").read_bytes() == b"fork data"
        f = s.open(rf"{name}\f.txt", disposition=CreateDisposition.FILE_OPEN)
        assert streams(s, f) == [("::$DATA", 9, 4096)]
        f.close()


def test_share_modes_are_kept_per_stream(braid_server, scratch):
    name, _ = scratch
    with Smb(braid_server) as s:
        excl = s.open(rf"{name}\f.txt:s", disposition=CreateDisposition.FILE_CREATE, share_access=0)
        # The file and another stream open freely; the same stream does not.
        rw = A.GENERIC_READ | A.GENERIC_WRITE
        s.open(rf"{name}\f.txt", access=rw, disposition=CreateDisposition.FILE_OPEN, share_access=0).close()
        s.open(rf"{name}\f.txt:other", access=rw, share_access=0).close()
        assert status_of(lambda: s.open(rf"{name}\f.txt:S", disposition=CreateDisposition.FILE_OPEN)) \
            == SHARING_VIOLATION
        # Deleting the file would delete the stream, which does not share DELETE.
        assert status_of(lambda: s.open(rf"{name}\f.txt", access=A.DELETE, disposition=CreateDisposition.FILE_OPEN)) \
            == SHARING_VIOLATION
        excl.close()
        s.open(rf"{name}\f.txt:S", disposition=CreateDisposition.FILE_OPEN, share_access=ShareAccess.FILE_SHARE_READ).close()


def test_file_deleted_while_a_stream_is_open(braid_server, scratch):
    name, path = scratch
    with Smb(braid_server) as s:
        st = s.open(rf"{name}\f.txt:s", disposition=CreateDisposition.FILE_CREATE)
        st.write(b"still here", 0)
        # The stream shares DELETE: the file's deletion is pending until the stream closes.
        s.open(rf"{name}\f.txt", disposition=CreateDisposition.FILE_OPEN, options=CreateOptions.FILE_DELETE_ON_CLOSE).close()
        assert st.read(0, 100) == b"still here"
        assert (path / "f.txt").exists()
        assert status_of(lambda: s.open(rf"{name}\f.txt")) == DELETE_PENDING
        assert status_of(lambda: s.open(rf"{name}\f.txt:s")) == DELETE_PENDING
        # The name FileAllInformation reports for a stream names the stream too.
        info = query(s, st, FILE_ALL_INFORMATION)
        assert info[100:].decode("utf-16-le") == rf"\{name}\f.txt:s"
        st.close()
        assert not (path / "f.txt").exists()


def test_smbclient_sees_and_writes_streams(braid_server, scratch, client_conf, tmp_path):
    """smbclient (Samba's client) puts a stream, reads it back and lists it with allinfo."""
    from harness import smbclient
    name, path = scratch
    src = tmp_path / "zone.txt"
    src.write_bytes(ZONE)
    (path / "dl.zip").write_bytes(b"PK")
    r = smbclient(braid_server, client_conf, "data",
                  f'cd {name}; put {src} dl.zip:Zone.Identifier; get dl.zip:Zone.Identifier {tmp_path / "back.txt"}; allinfo dl.zip')
    assert r.ok, r.out
    assert (tmp_path / "back.txt").read_bytes() == ZONE
    assert f"stream: [:Zone.Identifier:$DATA], {len(ZONE)} bytes" in r.out, r.out
    assert "stream: [::$DATA], 2 bytes" in r.out, r.out


def test_stream_changes_are_stream_actions(braid_server, scratch):
    """CHANGE_NOTIFY reports a stream's creation, data and deletion as stream actions; a
    stream's CREATE that makes the file reports the file's name too."""
    from smbprotocol.change_notify import CompletionFilter as CF, FileAction
    from test_notify import Watches
    name, path = scratch
    (path / "f.txt").write_bytes(b"main")
    filters = [CF.FILE_NOTIFY_CHANGE_STREAM_NAME, CF.FILE_NOTIFY_CHANGE_STREAM_WRITE, CF.FILE_NOTIFY_CHANGE_FILE_NAME]
    with Smb(braid_server) as watcher_side, Smb(braid_server) as other:
        ws = Watches(watcher_side, name, filters)
        st = other.open(rf"{name}\f.txt:s", disposition=CreateDisposition.FILE_CREATE)
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_STREAM_NAME) == [(FileAction.FILE_ACTION_ADDED_STREAM, "f.txt")]
        st.write(b"data", 0)
        st.close()
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_STREAM_WRITE) == [(FileAction.FILE_ACTION_MODIFIED_STREAM, "f.txt")]
        other.open(rf"{name}\f.txt:s", disposition=CreateDisposition.FILE_OPEN, options=CreateOptions.FILE_DELETE_ON_CLOSE).close()
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_STREAM_NAME) == [(FileAction.FILE_ACTION_REMOVED_STREAM, "f.txt")]
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_FILE_NAME, timeout=0.3) is None
        other.open(rf"{name}\g.txt:s", disposition=CreateDisposition.FILE_CREATE).close()
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_FILE_NAME) == [(FileAction.FILE_ACTION_ADDED, "g.txt")]
        ws.close()


# ---------------------------------------------------------------------------------------------
# Large streams (spill files under .braid-streams) on tmpfs and on ext4, over SMB and NFS.
# ---------------------------------------------------------------------------------------------

SPILL_DIR = ".braid-streams"
BOTH = "both"


def _run(*cmd) -> bool:
    import subprocess
    return subprocess.run(cmd, capture_output=True).returncode == 0


@pytest.fixture(scope="module", params=["tmpfs", "ext4"])
def spill_srv(request):
    """(server, share directory) with one share served over SMB and NFS on tmpfs or on a
    loop-mounted ext4 image (whose xattrs of one inode share one block)."""
    import secrets
    import shutil
    import harness
    import nfs_harness
    if os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid":
        pytest.skip("spill files are Braid's")
    if os.geteuid() != 0:
        pytest.skip("NFS credentials and loop mounts need root")
    base = harness.tmp_dir(f"braid-streams-{request.param}-")
    cleanup = []
    try:
        root = base
        if request.param == "ext4":
            if not shutil.which("mkfs.ext4"):
                pytest.skip("no mkfs.ext4")
            img, root = base / "fs.img", base / "mnt"
            root.mkdir()
            with open(img, "wb") as f:
                f.truncate(64 << 20)
            if not _run("mkfs.ext4", "-q", "-F", str(img)) or not _run("mount", "-o", "loop", str(img), str(root)):
                pytest.skip("cannot make or loop-mount an ext4 image here")
            cleanup.append(["umount", "-l", str(root)])
        users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
        srv = nfs_harness.start(root, users, [{"name": BOTH, "lines": ["nfs = true", "nfs_root_squash = false"]}])
        try:
            yield srv, srv.shares[BOTH]
        finally:
            problem = nfs_harness.stop(srv, f"braid-streams-{request.param}")
            if problem:
                pytest.fail(f"braid crashed: {problem}", pytrace=False)
    finally:
        for cmd in reversed(cleanup):
            _run(*cmd)
        shutil.rmtree(base, ignore_errors=True)


def _write_fork(s, path, data, chunk=65536):
    st = s.open(path, disposition=CreateDisposition.FILE_OPEN_IF)
    for at in range(0, len(data), chunk):
        assert st.write(data[at:at + chunk], at) == len(data[at:at + chunk])
    return st


def _read_all(st, size, chunk=65536):
    return b"".join(st.read(at, min(chunk, size - at)) for at in range(0, size, chunk))


def _spilled(share):
    """The spill directory's per-file directories and their files."""
    d = share / SPILL_DIR
    return sorted(str(p.relative_to(d)) for p in d.rglob("*")) if d.exists() else []


def test_resource_fork_of_one_mib_kept(spill_srv):
    """A 1 MiB AFP_Resource written in 64 KiB WRITEs reads back byte-exact, is listed with its
    size, and goes with its file (deleted over SMB), leaving nothing in the spill directory."""
    from smbprotocol.connection import Dialects
    srv, share = spill_srv
    data = os.urandom(1 << 20)
    with Smb(srv, share=BOTH, dialect=Dialects.SMB_3_1_1) as s:
        f = s.open("fork.bin", disposition=CreateDisposition.FILE_CREATE)
        f.write(b"data fork", 0)
        st = _write_fork(s, "fork.bin:AFP_Resource", data)
        assert _read_all(st, len(data)) == data
        st.close()
        st = s.open("FORK.BIN:afp_resource:$DATA", disposition=CreateDisposition.FILE_OPEN)
        assert _read_all(st, len(data)) == data
        assert st.read(len(data) - 3, 100) == data[-3:]
        st.close()
        assert [x[:2] for x in streams(s, f)] == [("::$DATA", 9), (":AFP_Resource:$DATA", 1 << 20)]
        assert f.read(0, 100) == b"data fork"
        assert len(_spilled(share)) == 2, _spilled(share)
        # Truncated through the stream's open (SET_INFO end of file), then deleted with its file.
        st = s.open("fork.bin:AFP_Resource", disposition=CreateDisposition.FILE_OPEN)
        s.set_info(st, _eof(1000))
        assert streams(s, f)[1][:2] == (":AFP_Resource:$DATA", 1000)
        st.close()
        f.close()
        s.open("fork.bin", disposition=CreateDisposition.FILE_OPEN, options=CreateOptions.FILE_DELETE_ON_CLOSE).close()
        assert not (share / "fork.bin").exists()
        assert _spilled(share) == []


def _eof(n):
    from smbprotocol.file_info import FileEndOfFileInformation
    info = FileEndOfFileInformation()
    info["end_of_file"] = n
    return info


def test_spilled_streams_go_with_overwrite_stream_delete_and_nfs_remove(spill_srv):
    from smbprotocol.connection import Dialects
    import nfs_harness
    srv, share = spill_srv
    big = os.urandom(300_000)
    with Smb(srv, share=BOTH, dialect=Dialects.SMB_3_1_1) as s, nfs_harness.client(srv) as nfs:
        # Overwriting the file drops its spilled streams.
        _write_fork(s, "o.bin:big", big).close()
        assert _spilled(share) != []
        s.open("o.bin", disposition=CreateDisposition.FILE_OVERWRITE).close()
        assert _spilled(share) == []
        # Overwriting the stream empties it: its spill file goes.
        _write_fork(s, "o.bin:big", big).close()
        st = s.open("o.bin:big", disposition=CreateDisposition.FILE_OVERWRITE)
        assert _spilled(share) == []
        assert st.end_of_file == 0
        st.close()
        # Deleting the stream alone removes its spill file.
        _write_fork(s, "o.bin:big", big).close()
        s.open("o.bin:big", disposition=CreateDisposition.FILE_OPEN, options=CreateOptions.FILE_DELETE_ON_CLOSE).close()
        assert _spilled(share) == []
        # Renamed, the spilled stream keeps its content.
        st = _write_fork(s, "o.bin:big", big)
        assert rename_to(s, st, ":moved") == 0
        st.close()
        st = s.open("o.bin:moved", disposition=CreateDisposition.FILE_OPEN)
        assert _read_all(st, len(big)) == big
        st.close()
        # Removed over NFS: its spill directory goes too.
        root = nfs.root(f"/{BOTH}")
        r = nfs.remove(root, "o.bin")
        assert r.ok, r
        assert _spilled(share) == []


def test_spill_directory_is_hidden(spill_srv):
    """The spill directory is neither listed nor opened nor created, over SMB or NFS."""
    from smbprotocol.connection import Dialects
    from smbprotocol.file_info import FileInformationClass
    import nfs_harness
    import nfs_rpc as n
    srv, share = spill_srv
    with Smb(srv, share=BOTH, dialect=Dialects.SMB_3_1_1) as s, nfs_harness.client(srv) as nfs:
        _write_fork(s, "h.bin:big", b"z" * 100_000).close()
        assert (share / SPILL_DIR).is_dir()
        d = s.open("", directory=True, access=A.GENERIC_READ)
        names = [e["file_name"].get_value().decode("utf-16-le")
                 for e in d.query_directory("*", FileInformationClass.FILE_NAMES_INFORMATION)]
        d.close()
        assert "h.bin" in names and SPILL_DIR not in names, names
        for spelled in (SPILL_DIR, SPILL_DIR.upper()):
            assert status_of(lambda: s.open(spelled, disposition=CreateDisposition.FILE_OPEN, options=0)) \
                == OBJECT_NAME_NOT_FOUND
        assert status_of(lambda: s.open(rf"{SPILL_DIR}\x", disposition=CreateDisposition.FILE_CREATE)) \
            == ACCESS_DENIED
        root = nfs.root(f"/{BOTH}")
        assert nfs.lookup(root, SPILL_DIR).status == n.NFS3ERR_NOENT
        assert SPILL_DIR.encode() not in [e.name for e in nfs.list_all(root)]
        assert nfs.mkdir(root, SPILL_DIR).status == n.NFS3ERR_ACCES
        s.open("h.bin", disposition=CreateDisposition.FILE_OPEN, options=CreateOptions.FILE_DELETE_ON_CLOSE).close()
        assert _spilled(share) == []
