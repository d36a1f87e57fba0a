"""CHANGE_NOTIFY beyond names, with Python smbprotocol: each completion filter sees the
changes of its kind made by another session (attributes, size, last write, security, EAs)
and no others; a share's `max_watches` limit refuses one watch too many."""

import os
import secrets
import shutil
import struct
import time

import pytest
from smbprotocol.change_notify import CompletionFilter as CF, FileAction, FileSystemWatcher
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.file_info import FileAttributes, FileBasicInformation, FileEndOfFileInformation, InfoType
from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask as A, SMB2SetInfoRequest

import harness
from harness import Smb, St

DACL_SECURITY_INFORMATION = 0x4


def everyone_full_control() -> bytes:
    """A self-relative security descriptor whose DACL allows Everyone everything."""
    everyone = bytes([1, 1, 0, 0, 0, 0, 0, 1]) + struct.pack("<I", 0)
    ace = struct.pack("<BBHI", 0, 0, 8 + len(everyone), 0x1F01FF) + everyone
    acl = struct.pack("<BBHHH", 2, 0, 8 + len(ace), 1, 0) + ace
    # Revision 1, control SE_SELF_RELATIVE | SE_DACL_PRESENT; no owner, group or SACL.
    return struct.pack("<BBHIIII", 1, 0, 0x8004, 0, 0, 0, 20) + acl


def set_security(smb: Smb, f, sd: bytes):
    req = SMB2SetInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_SECURITY
    req["additional_information"] = DACL_SECURITY_INFORMATION
    req["buffer"] = sd
    req["file_id"] = f.file_id
    smb.conn.receive(smb.conn.send(req, smb.session.session_id, smb.tree.tree_connect_id))


def set_attributes(smb: Smb, f, attrs: int):
    info = FileBasicInformation()
    info["file_attributes"] = attrs
    smb.set_info(f, info)


def changes(w: FileSystemWatcher):
    return [(c["action"].get_value(), c["file_name"].get_value()) for c in w.wait()]


class Watches:
    """One directory open per completion filter, each with a CHANGE_NOTIFY waiting (an
    open keeps the filter of its first request)."""

    def __init__(self, smb: Smb, directory: str, filters):
        self.smb, self.directory = smb, directory
        self.opens = {}
        self.watchers = {}
        for flt in filters:
            self.opens[flt] = smb.open(directory, access=A.GENERIC_READ, directory=True,
                                       disposition=CreateDisposition.FILE_OPEN)
            self.arm(flt)

    def arm(self, flt):
        w = FileSystemWatcher(self.opens[flt])
        w.start(flt)
        self.watchers[flt] = w

    def answered(self, flt, timeout=5.0):
        """The changes the request of `flt` was answered with (and a new request armed),
        or None if it is still waiting after `timeout` seconds."""
        w = self.watchers[flt]
        if not w.response_event.wait(timeout):
            return None
        got = changes(w)
        self.arm(flt)
        return got

    def close(self):
        for o in self.opens.values():
            o.close()


def test_each_filter_sees_its_kind_of_change(braid_server, scratch):
    name, path = scratch
    (path / "f.bin").write_bytes(b"x" * 10)
    filters = [CF.FILE_NOTIFY_CHANGE_ATTRIBUTES, CF.FILE_NOTIFY_CHANGE_SIZE, CF.FILE_NOTIFY_CHANGE_LAST_WRITE,
               CF.FILE_NOTIFY_CHANGE_SECURITY, CF.FILE_NOTIFY_CHANGE_FILE_NAME]
    modified = [(FileAction.FILE_ACTION_MODIFIED, "f.bin")]
    with Smb(braid_server) as watcher_side, Smb(braid_server) as other:
        ws = Watches(watcher_side, name, filters)
        time.sleep(0.2)
        f = other.open(rf"{name}\f.bin", access=A.GENERIC_ALL, disposition=CreateDisposition.FILE_OPEN)

        set_attributes(other, f, FileAttributes.FILE_ATTRIBUTE_HIDDEN)
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_ATTRIBUTES) == modified

        eof = FileEndOfFileInformation()
        eof["end_of_file"] = 4096
        other.set_info(f, eof)
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_SIZE) == modified

        set_security(other, f, everyone_full_control())
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_SECURITY) == modified

        # Writes are reported when the handle that wrote closes: size and last write.
        f.write(b"more data", 100)
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_LAST_WRITE, timeout=0.5) is None
        f.close()
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_LAST_WRITE) == modified
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_SIZE) == modified

        # None of these was a name change, and each filter saw only its own kinds.
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_FILE_NAME, timeout=0.3) is None
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_ATTRIBUTES, timeout=0.3) is None
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_SECURITY, timeout=0.3) is None
        other.open(rf"{name}\g.bin", disposition=CreateDisposition.FILE_CREATE).close()
        assert ws.answered(CF.FILE_NOTIFY_CHANGE_FILE_NAME) == [(FileAction.FILE_ACTION_ADDED, "g.bin")]
        ws.close()


def test_the_first_request_sets_the_filter(braid_server, scratch):
    """As on Windows and Samba: a later request on the same handle with another filter still
    gets what the first one asked for."""
    name, path = scratch
    (path / "a.txt").write_bytes(b"")
    with Smb(braid_server) as watcher_side, Smb(braid_server) as other:
        d = watcher_side.open(name, access=A.GENERIC_READ, directory=True, disposition=CreateDisposition.FILE_OPEN)
        first = FileSystemWatcher(d)
        first.start(CF.FILE_NOTIFY_CHANGE_ATTRIBUTES)
        time.sleep(0.2)
        first.cancel()
        first.wait()
        w = FileSystemWatcher(d)
        w.start(CF.FILE_NOTIFY_CHANGE_FILE_NAME)
        other.open(rf"{name}\b.txt", disposition=CreateDisposition.FILE_CREATE).close()
        f = other.open(rf"{name}\a.txt", disposition=CreateDisposition.FILE_OPEN)
        set_attributes(other, f, FileAttributes.FILE_ATTRIBUTE_READONLY)
        f.close()
        assert changes(w) == [(FileAction.FILE_ACTION_MODIFIED, "a.txt")]
        d.close()


@pytest.fixture
def limited_server():
    if os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid":
        pytest.skip("max_watches is Braid's own setting")
    root = harness.tmp_dir("braid-test-watches-")
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    srv = harness.start_braid(root, users, share_specs=[{"name": "data", "max_watches": 2}])
    yield srv
    problem = harness.stop_braid(srv)
    shutil.rmtree(root, ignore_errors=True)
    assert not problem, f"braid crashed: {problem}"


def test_a_share_holds_at_most_max_watches(limited_server):
    for d in ("a", "b", "c"):
        (limited_server.shares["data"] / d).mkdir()
    with Smb(limited_server) as smb:
        opens = [smb.open(d, access=A.GENERIC_READ, directory=True, disposition=CreateDisposition.FILE_OPEN)
                 for d in ("a", "b", "c")]
        watchers = []
        for o in opens[:2]:
            w = FileSystemWatcher(o)
            w.start(CF.FILE_NOTIFY_CHANGE_FILE_NAME)
            watchers.append(w)
        time.sleep(0.2)
        # A second request on a handle that watches already is no new watch.
        again = FileSystemWatcher(opens[0])
        again.start(CF.FILE_NOTIFY_CHANGE_FILE_NAME)
        time.sleep(0.2)
        assert not again.response_event.is_set(), "a second request on a watching handle waits"
        third = FileSystemWatcher(opens[2])
        third.start(CF.FILE_NOTIFY_CHANGE_FILE_NAME)
        with pytest.raises(SMBResponseException) as ei:
            third.wait()
        assert ei.value.status == St.INSUFFICIENT_RESOURCES
        # Closing a watching handle makes room.
        opens[1].close()
        with pytest.raises(SMBResponseException):
            watchers[1].wait()
        fourth = FileSystemWatcher(opens[2])
        fourth.start(CF.FILE_NOTIFY_CHANGE_FILE_NAME)
        time.sleep(0.2)
        assert not fourth.response_event.is_set(), "the watch was accepted and waits"
        smb.open(r"c\new.txt", disposition=CreateDisposition.FILE_CREATE).close()
        assert changes(fourth) == [(FileAction.FILE_ACTION_ADDED, "new.txt")]
        opens[0].close()
        opens[2].close()
    log = limited_server.log.read_text(errors="replace")
    refusal = [line for line in log.splitlines() if "max_watches" in line]
    assert refusal and "limit=2" in refusal[0] and "data" in refusal[0], log[-2000:]


def test_changes_made_outside_braid_are_reported(braid_server, scratch):
    """A local process creating, growing, renaming and deleting files in a watched directory
    behind the server's back (the share is on tmpfs: inotify reports it)."""
    name, path = scratch
    filters = [CF.FILE_NOTIFY_CHANGE_FILE_NAME, CF.FILE_NOTIFY_CHANGE_SIZE]
    with Smb(braid_server) as smb:
        ws = Watches(smb, name, filters)
        time.sleep(0.3)
        (path / "outside.txt").write_bytes(b"hello")
        got = ws.answered(CF.FILE_NOTIFY_CHANGE_FILE_NAME)
        assert got and got[0] == (FileAction.FILE_ACTION_ADDED, "outside.txt"), got
        with open(path / "outside.txt", "ab") as f:
            f.write(b"x" * 1000)
        got = ws.answered(CF.FILE_NOTIFY_CHANGE_SIZE)
        assert got and (FileAction.FILE_ACTION_MODIFIED, "outside.txt") in got, got
        os.rename(path / "outside.txt", path / "renamed.txt")
        got = ws.answered(CF.FILE_NOTIFY_CHANGE_FILE_NAME)
        assert got is not None
        # The old and new names may come in one answer or two.
        if len(got) < 2:
            got += ws.answered(CF.FILE_NOTIFY_CHANGE_FILE_NAME) or []
        assert got[:2] == [(FileAction.FILE_ACTION_RENAMED_OLD_NAME, "outside.txt"),
                           (FileAction.FILE_ACTION_RENAMED_NEW_NAME, "renamed.txt")], got
        os.unlink(path / "renamed.txt")
        got = ws.answered(CF.FILE_NOTIFY_CHANGE_FILE_NAME)
        assert got == [(FileAction.FILE_ACTION_REMOVED, "renamed.txt")], got
        ws.close()
