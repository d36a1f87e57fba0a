"""Directory leases (SMB 3.x) with Python smbprotocol, from two independent clients: a
directory open gets R and H (never W); a change in the directory by another client breaks
the lease to none; a change made under the directory's lease (a ParentLeaseKey naming it)
does not; a share with `directory_leases = false` grants directory opens no lease.
"""

import os
import secrets
import struct
import uuid

import pytest
from smbprotocol.connection import Dialects
from smbprotocol.create_contexts import SMB2CreateContextRequest
from smbprotocol.open import CreateDisposition, CreateOptions, FileAttributes
from smbprotocol.open import FilePipePrinterAccessMask as A
from smbprotocol.open import ImpersonationLevel, Open, ShareAccess

import harness
from harness import Smb
from test_oplocks import LEASE, NONE, BreakCatcher, H, R, W, ack

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                                reason="a braid server with a share that has directory leases switched off")

PARENT_LEASE_KEY_SET = 0x4
CAP_DIRECTORY_LEASING = 0x20
SHARE = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE


@pytest.fixture(scope="module")
def server():
    with harness.running_braid("braid-test-dirlease-", share_specs=[{"name": "data"}, {"name": "nodl", "directory_leases": False}]) as srv:
        yield srv


def smb3(server, share="data", capabilities=CAP_DIRECTORY_LEASING):
    """An SMB 3.1.1 client offering DIRECTORY_LEASING (as Windows clients do)."""
    return Smb(server, share=share, dialect=Dialects.SMB_3_1_1, capabilities=capabilities)


def lease_v2(key: bytes, state: int, parent: bytes | None = None) -> SMB2CreateContextRequest:
    c = SMB2CreateContextRequest()
    c["buffer_name"] = b"RqLs"
    flags = PARENT_LEASE_KEY_SET if parent else 0
    c["buffer_data"] = key + struct.pack("<IIQ", state, flags, 0) + (parent or b"\0" * 16) + struct.pack("<HH", 0, 0)
    return c


def open_dir(smb, name, key):
    """Opens (creating if need be) directory `name` asking for an RWH v2 lease under `key`:
    the open and the lease state granted (None: no lease)."""
    d = Open(smb.tree, name)
    ctx = d.create(ImpersonationLevel.Impersonation, A.GENERIC_READ, FileAttributes.FILE_ATTRIBUTE_DIRECTORY, SHARE,
                   CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_DIRECTORY_FILE,
                   oplock_level=LEASE, create_contexts=[lease_v2(key, R | W | H)])
    if d.oplock_level != LEASE:
        return d, None
    (resp,) = ctx
    assert resp["lease_key"].get_value() == key
    return d, resp["lease_state"].get_value()


def create_file(smb, name, contexts=None):
    f = Open(smb.tree, name)
    f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE, FileAttributes.FILE_ATTRIBUTE_NORMAL,
             SHARE, CreateDisposition.FILE_CREATE, CreateOptions.FILE_NON_DIRECTORY_FILE,
             oplock_level=LEASE if contexts else NONE, create_contexts=contexts)
    return f


def dirname():
    return "dl_" + secrets.token_hex(4)


def test_another_clients_create_breaks_the_directory_lease_to_none(server):
    name, key = dirname(), uuid.uuid4().bytes
    with smb3(server) as a, smb3(server) as b:
        catcher = BreakCatcher(a.conn)
        d, state = open_dir(a, name, key)
        assert state == R | H, "a directory gets R and H, never W"
        f = create_file(b, rf"{name}\new.txt")
        body = catcher.wait()
        assert body is not None, "no lease break notification"
        size, epoch, flags = struct.unpack_from("<HHI", body)
        assert size == 44 and flags & 1, "H was held: the break is acknowledged"
        assert body[8:24] == key
        assert struct.unpack_from("<II", body, 24) == (R | H, 0)
        status, _ = ack(a, struct.pack("<HHI", 36, 0, 0) + key + struct.pack("<IQ", 0, 0))
        assert status == 0
        f.close()
        d.close()


def test_a_change_under_the_directory_lease_does_not_break_it(server):
    name, key = dirname(), uuid.uuid4().bytes
    with smb3(server) as a, smb3(server) as b:
        catcher = BreakCatcher(a.conn)
        d, state = open_dir(a, name, key)
        assert state == R | H
        # A's own create names the directory's lease as its parent: no break.
        mine = create_file(a, rf"{name}\mine.txt", [lease_v2(uuid.uuid4().bytes, R | W | H, parent=key)])
        assert catcher.wait(timeout=1.5) is None, "the holder's own change broke its directory lease"
        mine.close()
        # The same from B without the parent key does break it.
        theirs = create_file(b, rf"{name}\theirs.txt")
        body = catcher.wait()
        assert body is not None and body[8:24] == key
        theirs.close()
        d.close()


def test_no_directory_lease_where_the_share_switches_them_off(server):
    with smb3(server, share="nodl") as a:
        d, state = open_dir(a, dirname(), uuid.uuid4().bytes)
        assert state is None and d.oplock_level == NONE
        d.close()
    # Files on that share still get leases.
    with smb3(server, share="nodl") as a:
        f = create_file(a, "f_" + secrets.token_hex(4), [lease_v2(uuid.uuid4().bytes, R | W | H)])
        assert f.oplock_level == LEASE
        f.close()


def test_smb2_clients_get_no_directory_lease(server):
    with Smb(server, dialect=Dialects.SMB_2_1_0, capabilities=CAP_DIRECTORY_LEASING) as a:
        assert not a.conn.server_capabilities.get_value() & CAP_DIRECTORY_LEASING
        d, state = open_dir(a, dirname(), uuid.uuid4().bytes)
        assert state is None
        d.close()


def test_clients_that_do_not_offer_directory_leasing_get_no_directory_lease(server):
    with smb3(server, capabilities=0) as a:
        assert not a.conn.server_capabilities.get_value() & CAP_DIRECTORY_LEASING
        d, state = open_dir(a, dirname(), uuid.uuid4().bytes)
        assert state is None
        d.close()
    with smb3(server) as a:
        assert a.conn.server_capabilities.get_value() & CAP_DIRECTORY_LEASING


def test_a_renamed_directory_keeps_its_lease_reachable(server):
    """B renames the directory A holds an RH lease on: A's H is broken first (B waits for the
    acknowledgment); afterwards a create by B under the new name breaks A's remaining R."""
    import threading

    from smbprotocol.file_info import FileRenameInformation

    name, key = dirname(), uuid.uuid4().bytes
    with smb3(server) as a, smb3(server) as b:
        catcher = BreakCatcher(a.conn)
        d, state = open_dir(a, name, key)
        assert state == R | H
        mover = b.open(name, access=A.DELETE | A.FILE_READ_ATTRIBUTES, disposition=CreateDisposition.FILE_OPEN,
                       directory=True)
        info = FileRenameInformation()
        info["file_name"] = name + "_moved"
        done = []
        t = threading.Thread(target=lambda: done.append(b.set_info(mover, info)))
        t.start()
        body = catcher.wait()
        assert body is not None and body[8:24] == key
        assert struct.unpack_from("<II", body, 24) == (R | H, R), "the rename takes H"
        assert not done, "the rename waits for the acknowledgment"
        status, _ = ack(a, struct.pack("<HHI", 36, 0, 0) + key + struct.pack("<IQ", R, 0))
        assert status == 0
        t.join(10)
        assert done, "the rename completed after the acknowledgment"
        mover.close()
        f = create_file(b, rf"{name}_moved\new.txt")
        body = catcher.wait()
        assert body is not None and body[8:24] == key
        assert struct.unpack_from("<II", body, 24) == (R, 0)
        assert struct.unpack_from("<I", body, 4)[0] & 1 == 0, "R alone needs no acknowledgment"
        f.close()
        d.close()


def test_a_change_made_outside_braid_breaks_the_directory_lease(server):
    """A local process creating a file in a leased directory behind the server's back (the
    share is on a local file system: inotify reports it) breaks the lease as a client would."""
    name, key = dirname(), uuid.uuid4().bytes
    with smb3(server) as a:
        catcher = BreakCatcher(a.conn)
        d, state = open_dir(a, name, key)
        assert state == R | H
        (server.shares["data"] / name / "outside.txt").write_bytes(b"made outside")
        body = catcher.wait()
        assert body is not None, "no lease break after an outside change"
        assert body[8:24] == key
        assert struct.unpack_from("<II", body, 24) == (R | H, 0)
        status, _ = ack(a, struct.pack("<HHI", 36, 0, 0) + key + struct.pack("<IQ", 0, 0))
        assert status == 0
        d.close()
