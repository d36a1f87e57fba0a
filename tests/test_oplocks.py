"""Oplocks and leases with Python smbprotocol: grants, break notifications and acknowledgments.

smbprotocol has no handler for server-initiated messages (MessageId 0xFFFFFFFFFFFFFFFF): its
receive thread looks every response up in `outstanding_requests`. `BreakCatcher` puts a
placeholder request there, so a break notification is delivered to it like a response, and
the test acknowledges it by hand.
"""

import struct
import uuid

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.connection import Dialects, Request
from smbprotocol.create_contexts import SMB2CreateContextRequest
from smbprotocol.header import Commands, SMB2HeaderRequest
from smbprotocol.open import CreateDisposition, CreateOptions, FileAttributes
from smbprotocol.open import FilePipePrinterAccessMask as A
from smbprotocol.open import ImpersonationLevel, Open, RequestedOplockLevel, ShareAccess
from smbprotocol.structure import BytesField, IntField, Structure

from harness import Smb

BREAK_ID = 0xFFFFFFFFFFFFFFFF
BATCH, LEVEL_II, NONE, LEASE = 0x09, 0x01, 0x00, 0xFF
R, H, W = 0x1, 0x2, 0x4
STATUS_INVALID_OPLOCK_PROTOCOL = 0xC00000E3


class RawBody(Structure):
    """An SMB2 body sent as raw bytes (the OPLOCK_BREAK acknowledgments)."""

    COMMAND = Commands.SMB2_OPLOCK_BREAK

    def __init__(self, data=b""):
        from collections import OrderedDict
        self.fields = OrderedDict([("data", BytesField(size=lambda s: len(s["data"].get_value())))])
        super().__init__()
        self["data"] = data


class BreakCatcher:
    """Receives the break notifications of one smbprotocol connection."""

    def __init__(self, conn):
        self.conn = conn
        self._arm()

    def _arm(self):
        hdr = SMB2HeaderRequest()
        hdr["message_id"] = BREAK_ID
        self.req = Request(hdr, None, self.conn)
        self.conn.outstanding_requests[BREAK_ID] = self.req

    def wait(self, timeout=10.0):
        """The body of the next break notification (None if none came in time)."""
        if not self.req.response_event.wait(timeout):
            return None
        resp = self.req.response
        self._arm()
        assert resp["command"].get_value() == Commands.SMB2_OPLOCK_BREAK
        assert resp["message_id"].get_value() == BREAK_ID
        return resp["data"].get_value()


def ack(smb, body: bytes):
    """Sends an OPLOCK_BREAK acknowledgment; returns (status, response body)."""
    from smbprotocol.exceptions import SMBResponseException
    req = smb.conn.send(RawBody(body), smb.session.session_id, smb.tree.tree_connect_id)
    try:
        resp = smb.conn.receive(req)
        return 0, resp["data"].get_value()
    except SMBResponseException as e:
        return e.status, b""


def lease_v2(key: bytes, state: int, epoch: int = 0) -> SMB2CreateContextRequest:
    c = SMB2CreateContextRequest()
    c["buffer_name"] = b"RqLs"
    c["buffer_data"] = key + struct.pack("<IIQ", state, 0, 0) + b"\0" * 16 + struct.pack("<HH", epoch, 0)
    return c


def create(smb, name, *, oplock=NONE, contexts=None, send=True, disposition=CreateDisposition.FILE_OPEN_IF):
    f = Open(smb.tree, name)
    r = f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE, FileAttributes.FILE_ATTRIBUTE_NORMAL,
                 ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
                 disposition, CreateOptions.FILE_NON_DIRECTORY_FILE,
                 oplock_level=oplock, create_contexts=contexts, send=send)
    return f, r


def send_create(smb, f, req_and_recv):
    """Sends a CREATE built with send=False; returns a function that waits for its answer."""
    req, recv = req_and_recv
    request = smb.conn.send(req, smb.session.session_id, smb.tree.tree_connect_id)
    return lambda: recv(request)


def start_reader_open(smb, name, *, oplock, contexts=None):
    """Sends a read-only FILE_OPEN that may have to wait for a break; returns the Open and a
    function that waits for the CREATE's answer."""
    f = Open(smb.tree, name)
    req = f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ, FileAttributes.FILE_ATTRIBUTE_NORMAL,
                   ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
                   CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE,
                   oplock_level=oplock, create_contexts=contexts, send=False)
    return f, send_create(smb, f, req)


def test_batch_for_a_sole_opener_then_break_to_level2(braid_server, scratch):
    name, _ = scratch
    with Smb(braid_server) as a, Smb(braid_server) as b:
        catcher = BreakCatcher(a.conn)
        fa, _ = create(a, rf"{name}\batch.bin", oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
        assert fa.oplock_level == BATCH
        # An acknowledgment without a break in progress is a protocol error.
        status, _ = ack(a, struct.pack("<HBBI", 24, LEVEL_II, 0, 0) + fa.file_id)
        assert status == STATUS_INVALID_OPLOCK_PROTOCOL
        # A second open from another client breaks the batch oplock and waits for the ack.
        fb, pending = start_reader_open(b, rf"{name}\batch.bin", oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
        body = catcher.wait()
        assert body is not None, "no oplock break notification"
        size, level = struct.unpack_from("<HB", body)
        assert (size, level) == (24, LEVEL_II)
        assert body[8:24] == fa.file_id
        status, resp = ack(a, struct.pack("<HBBI", 24, LEVEL_II, 0, 0) + fa.file_id)
        assert status == 0
        assert resp[2] == LEVEL_II
        pending()
        assert fb.oplock_level == LEVEL_II
        # A write breaks both level II oplocks to none, with nothing to acknowledge.
        catcher_b = BreakCatcher(b.conn)
        fa.write(b"x", 0)
        for c in (catcher, catcher_b):
            body = c.wait()
            assert body is not None and body[2] == NONE
        fb.close()
        fa.close()


def test_close_releases_a_waiting_open(braid_server, scratch):
    name, _ = scratch
    with Smb(braid_server) as a, Smb(braid_server) as b:
        catcher = BreakCatcher(a.conn)
        fa, _ = create(a, rf"{name}\close.bin", oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_EXCLUSIVE)
        assert fa.oplock_level == 0x08
        fb, pending = start_reader_open(b, rf"{name}\close.bin", oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
        assert catcher.wait() is not None
        fa.close()  # instead of acknowledging
        pending()
        assert fb.oplock_level == BATCH, "alone again: the waiting open gets what it asked for"
        fb.close()


@pytest.mark.parametrize("dialect", [Dialects.SMB_3_0_2, Dialects.SMB_3_1_1])
def test_lease_v2_rwh_broken_to_rh(braid_server, scratch, dialect):
    name, _ = scratch
    key1, key2 = uuid.uuid4().bytes, uuid.uuid4().bytes
    with Smb(braid_server, dialect=dialect) as a, Smb(braid_server, dialect=dialect) as b:
        catcher = BreakCatcher(a.conn)
        fa, ctx = create(a, rf"{name}\lease.bin", oplock=LEASE, contexts=[lease_v2(key1, R | W | H, epoch=5)])
        assert fa.oplock_level == LEASE
        (resp,) = ctx
        assert resp["lease_key"].get_value() == key1
        assert resp["lease_state"].get_value() == R | W | H
        epoch = resp["epoch"].get_value()
        assert (epoch if isinstance(epoch, int) else struct.unpack("<H", epoch)[0]) == 6
        # The same key on another file is refused.
        with pytest.raises(SMBResponseException) as ei:
            create(a, rf"{name}\other.bin", oplock=LEASE, contexts=[lease_v2(key1, R)])
        assert ei.value.status == 0xC000000D  # STATUS_INVALID_PARAMETER
        # Another client opens: W is broken (RWH -> RH), and its open waits for the ack.
        fb, pending = start_reader_open(b, rf"{name}\lease.bin", oplock=LEASE, contexts=[lease_v2(key2, R | W | H)])
        body = catcher.wait()
        assert body is not None, "no lease break notification"
        size, epoch, flags = struct.unpack_from("<HHI", body)
        assert size == 44 and flags & 1, "acknowledgment required"
        assert body[8:24] == key1
        cur, new = struct.unpack_from("<II", body, 24)
        assert (cur, new, epoch) == (R | W | H, R | H, 7)
        # Acknowledging more than offered is refused; the offered state is accepted.
        status, _ = ack(a, struct.pack("<HHI", 36, 0, 0) + key1 + struct.pack("<IQ", R | W | H, 0))
        assert status == 0xC00000D0  # STATUS_REQUEST_NOT_ACCEPTED
        status, resp = ack(a, struct.pack("<HHI", 36, 0, 0) + key1 + struct.pack("<IQ", R | H, 0))
        assert status == 0 and struct.unpack_from("<I", resp, 24)[0] == R | H
        ctx_b = pending()
        assert fb.oplock_level == LEASE
        assert ctx_b[0]["lease_state"].get_value() == R | H
        # Unknown lease keys are refused.
        status, _ = ack(a, struct.pack("<HHI", 36, 0, 0) + uuid.uuid4().bytes + struct.pack("<IQ", R, 0))
        assert status == 0xC0000034  # STATUS_OBJECT_NAME_NOT_FOUND
        fb.close()
        fa.close()


def test_malformed_break_ack(braid_server, scratch):
    with Smb(braid_server) as a:
        status, _ = ack(a, struct.pack("<HH", 30, 0) + b"\0" * 28)
        assert status == 0xC000000D  # STATUS_INVALID_PARAMETER
        status, _ = ack(a, struct.pack("<HBBI", 24, 0, 0, 0) + b"\x01" * 16)
        assert status == 0xC0000128  # STATUS_FILE_CLOSED
