"""Durable handles v2 with Python smbprotocol: an open with a lease survives the loss of its
TCP connection (no LOGOFF, no CLOSE) and a new connection and session of the same user
reclaims it (DH2C) with what was written; another user, another CreateGuid or a reconnect
after the granted timeout are refused. A client that reconnects naming its old session
(PreviousSessionId) ends that session: its durable open waits to be reclaimed, the rest
close. A CreateGuid still in use is refused to a CREATE that is not a replay. An open
naming the application instance of another client's durable open of the same file closes
that open first, without a break (SMB2_CREATE_APP_INSTANCE_ID). A resilient open
(FSCTL_LMR_REQUEST_RESILIENCY) survives the loss of its connection for its timeout, share
mode and locks kept, and its owner reclaims it with DHnC; a LOGOFF closes it."""

import struct
import time
import uuid

import pytest
import smbprotocol.session
from smbprotocol.connection import Connection, Dialects
from smbprotocol.create_contexts import (
    SMB2CreateAppInstanceId,
    SMB2CreateAppInstanceVersion,
    SMB2CreateContextRequest,
    SMB2CreateDurableHandleReconnect,
    SMB2CreateDurableHandleReconnectV2,
    SMB2CreateDurableHandleRequestV2,
    SMB2CreateDurableHandleResponseV2,
)
from smbprotocol.exceptions import SMBConnectionClosed, SMBResponseException
from smbprotocol.ioctl import CtlCode, IOCTLFlags, SMB2IOCTLRequest, SMB2IOCTLResponse, SMB2SrvNetworkResiliencyRequest
from smbprotocol.open import CreateDisposition, CreateOptions, FileAttributes
from smbprotocol.open import FilePipePrinterAccessMask as A
from smbprotocol.open import ImpersonationLevel, LockFlags, Open, ShareAccess, SMB2LockElement
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

LEASE = 0xFF
BATCH = 0x09
R, H, W = 0x1, 0x2, 0x4
STATUS_OBJECT_NAME_NOT_FOUND = 0xC0000034
STATUS_ACCESS_DENIED = 0xC0000022
STATUS_DUPLICATE_OBJECTID = 0xC000022A
STATUS_USER_SESSION_DELETED = 0xC0000203
STATUS_FILE_CLOSED = 0xC0000128
STATUS_SHARING_VIOLATION = 0xC0000043
STATUS_FILE_LOCK_CONFLICT = 0xC0000054
STATUS_FILE_FORCED_CLOSED = 0xC00000B6


class Client:
    """One connection, session and tree connect with a chosen ClientGuid."""

    def __init__(self, srv, guid, user=None, password=None, previous=0):
        self.conn = Connection(guid, srv.host, srv.port, require_signing=True)
        self.conn.connect(dialect=Dialects.SMB_3_1_1, timeout=10)
        self.session = Session(self.conn, user or srv.user, password or srv.password, auth_protocol="ntlm")
        setup = smbprotocol.session.SMB2SessionSetupRequest

        def with_previous():
            # smbprotocol has no PreviousSessionId parameter: set the request field.
            r = setup()
            r["previous_session_id"] = previous
            return r

        smbprotocol.session.SMB2SessionSetupRequest = with_previous
        try:
            self.session.connect()
        finally:
            smbprotocol.session.SMB2SessionSetupRequest = setup
        self.tree = TreeConnect(self.session, srv.unc("data"))
        self.tree.connect()

    def cut(self):
        """Drops the TCP connection without LOGOFF or CLOSE, as a network failure would."""
        self.conn.disconnect(close=False)

    def close(self):
        try:
            self.conn.disconnect(close=True)
        except Exception:
            pass


def context(structure):
    c = SMB2CreateContextRequest()
    c["buffer_name"] = structure.NAME
    c["buffer_data"] = structure
    return c


def lease(key: bytes, state: int) -> SMB2CreateContextRequest:
    c = SMB2CreateContextRequest()
    c["buffer_name"] = b"RqLs"
    c["buffer_data"] = key + struct.pack("<IIQ", state, 0, 0) + b"\0" * 16 + struct.pack("<HH", 0, 0)
    return c


def durable_open(client, name, key, create_guid, timeout_ms):
    dh = SMB2CreateDurableHandleRequestV2()
    dh["timeout"] = timeout_ms
    dh["create_guid"] = create_guid
    f = Open(client.tree, name)
    resp = f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE,
                    FileAttributes.FILE_ATTRIBUTE_NORMAL, ShareAccess.FILE_SHARE_READ,
                    CreateDisposition.FILE_OVERWRITE_IF, CreateOptions.FILE_NON_DIRECTORY_FILE,
                    oplock_level=LEASE, create_contexts=[lease(key, R | W | H), context(dh)])
    return f, resp


def reconnect(client, name, key, file_id, create_guid):
    dh = SMB2CreateDurableHandleReconnectV2()
    dh["file_id"] = file_id
    dh["create_guid"] = create_guid
    f = Open(client.tree, name)
    f.create(ImpersonationLevel.Impersonation, 0, 0, 0, CreateDisposition.FILE_OPEN, 0,
             oplock_level=LEASE, create_contexts=[lease(key, R | W | H), context(dh)])
    return f


def granted_timeout(resp):
    for c in resp or []:
        if isinstance(c, SMB2CreateDurableHandleResponseV2):
            return c["timeout"].get_value()
    return None


def test_cut_connection_is_reclaimed_with_its_data(braid_server, scratch):
    name, path = scratch
    guid, key, create_guid = uuid.uuid4(), uuid.uuid4().bytes, uuid.uuid4()
    a = Client(braid_server, guid)
    f, resp = durable_open(a, rf"{name}\doc.bin", key, create_guid, 0)
    assert granted_timeout(resp) == 60_000, "timeout 0 gets the server's default"
    f.write(b"written before the network blinked", 0)
    file_id = f.file_id
    a.cut()
    b = Client(braid_server, guid)
    try:
        # Another CreateGuid names no open.
        with pytest.raises(SMBResponseException) as e:
            reconnect(b, rf"{name}\doc.bin", key, file_id, uuid.uuid4())
        assert e.value.status == STATUS_OBJECT_NAME_NOT_FOUND
        g = reconnect(b, rf"{name}\doc.bin", key, file_id, create_guid)
        assert g.file_id == file_id
        assert g.read(0, 64) == b"written before the network blinked"
        g.write(b"!", 34)
        g.close()
    finally:
        b.close()
    assert (path / "doc.bin").read_bytes() == b"written before the network blinked!"


def test_another_user_cannot_reclaim(braid_server, scratch):
    name, _ = scratch
    guid, key, create_guid = uuid.uuid4(), uuid.uuid4().bytes, uuid.uuid4()
    a = Client(braid_server, guid)
    f, _ = durable_open(a, rf"{name}\mine.bin", key, create_guid, 0)
    file_id = f.file_id
    a.cut()
    bob = Client(braid_server, guid, braid_server.user2, braid_server.password2)
    try:
        with pytest.raises(SMBResponseException) as e:
            reconnect(bob, rf"{name}\mine.bin", key, file_id, create_guid)
        assert e.value.status == STATUS_ACCESS_DENIED
    finally:
        bob.close()
    # Refusing bob left the open for its owner.
    b = Client(braid_server, guid)
    try:
        reconnect(b, rf"{name}\mine.bin", key, file_id, create_guid).close()
    finally:
        b.close()


def test_reconnect_after_the_timeout_fails(braid_server, scratch):
    name, _ = scratch
    guid, key, create_guid = uuid.uuid4(), uuid.uuid4().bytes, uuid.uuid4()
    a = Client(braid_server, guid)
    f, resp = durable_open(a, rf"{name}\brief.bin", key, create_guid, 1000)
    assert granted_timeout(resp) == 1000
    file_id = f.file_id
    a.cut()
    time.sleep(2.5)
    b = Client(braid_server, guid)
    try:
        with pytest.raises(SMBResponseException) as e:
            reconnect(b, rf"{name}\brief.bin", key, file_id, create_guid)
        assert e.value.status == STATUS_OBJECT_NAME_NOT_FOUND
        # The open was closed: its share mode is gone.
        g, _ = durable_open(b, rf"{name}\brief.bin", key, uuid.uuid4(), 0)
        g.close()
    finally:
        b.close()


def test_a_competing_open_ends_the_disconnected_open(braid_server, scratch):
    name, _ = scratch
    guid, key, create_guid = uuid.uuid4(), uuid.uuid4().bytes, uuid.uuid4()
    a = Client(braid_server, guid)
    f, _ = durable_open(a, rf"{name}\shared.bin", key, create_guid, 0)
    file_id = f.file_id
    a.cut()
    # A writer meets the disconnected open's share mode (read only): the handle lease it
    # would break cannot be acknowledged, so the disconnected open is closed at once.
    bob = Client(braid_server, uuid.uuid4(), braid_server.user2, braid_server.password2)
    try:
        g, _ = durable_open(bob, rf"{name}\shared.bin", uuid.uuid4().bytes, uuid.uuid4(), 0)
        g.close()
    finally:
        bob.close()
    b = Client(braid_server, guid)
    try:
        with pytest.raises(SMBResponseException) as e:
            reconnect(b, rf"{name}\shared.bin", key, file_id, create_guid)
        assert e.value.status == STATUS_OBJECT_NAME_NOT_FOUND
    finally:
        b.close()


def test_previous_session_id_hands_the_durable_open_over(braid_server, scratch):
    name, path = scratch
    guid, key, create_guid = uuid.uuid4(), uuid.uuid4().bytes, uuid.uuid4()
    a = Client(braid_server, guid)
    f, _ = durable_open(a, rf"{name}\kept.bin", key, create_guid, 0)
    f.write(b"before the reconnect", 0)
    file_id = f.file_id
    # A plain open (no durability) holding the file exclusively.
    plain = Open(a.tree, rf"{name}\plain.bin")
    plain.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE,
                 FileAttributes.FILE_ATTRIBUTE_NORMAL, 0, CreateDisposition.FILE_OVERWRITE_IF,
                 CreateOptions.FILE_NON_DIRECTORY_FILE)
    # The client reconnects while the server still sees the old connection alive.
    b = Client(braid_server, guid, previous=a.session.session_id)
    try:
        g = reconnect(b, rf"{name}\kept.bin", key, file_id, create_guid)
        assert g.read(0, 64) == b"before the reconnect"
        g.close()
        # The old session's other open was closed: its exclusive share mode is gone.
        p = Open(b.tree, rf"{name}\plain.bin")
        p.create(ImpersonationLevel.Impersonation, A.GENERIC_READ, FileAttributes.FILE_ATTRIBUTE_NORMAL, 0,
                 CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
        p.close()
        # And the old session is gone (smbprotocol gives up on the connection when the
        # answer, USER_SESSION_DELETED, cannot be signed by the deleted session).
        with pytest.raises((SMBResponseException, SMBConnectionClosed)) as e:
            f.read(0, 4)
        assert getattr(e.value, "status", STATUS_USER_SESSION_DELETED) == STATUS_USER_SESSION_DELETED
    finally:
        b.close()
        a.close()


def test_a_create_guid_in_use_is_not_reused(braid_server, scratch):
    name, _ = scratch
    a = Client(braid_server, uuid.uuid4())
    try:
        create_guid = uuid.uuid4()
        f, _ = durable_open(a, rf"{name}\first.bin", uuid.uuid4().bytes, create_guid, 0)
        with pytest.raises(SMBResponseException) as e:
            durable_open(a, rf"{name}\second.bin", uuid.uuid4().bytes, create_guid, 0)
        assert e.value.status == STATUS_DUPLICATE_OBJECTID
        f.close()
    finally:
        a.close()


def app_open(client, name, app_id, share, state, version=None):
    """A durable v2 open under a lease of `state`, in application instance `app_id`."""
    dh = SMB2CreateDurableHandleRequestV2()
    dh["create_guid"] = uuid.uuid4()
    ai = SMB2CreateAppInstanceId()
    ai["app_instance_id"] = app_id.bytes_le
    ctxs = [lease(uuid.uuid4().bytes, state), context(dh), context(ai)]
    if version is not None:
        v = SMB2CreateAppInstanceVersion()
        v["app_instance_version_high"], v["app_instance_version_low"] = version
        ctxs.append(context(v))
    f = Open(client.tree, name)
    f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE,
             FileAttributes.FILE_ATTRIBUTE_NORMAL, share, CreateDisposition.FILE_OPEN_IF,
             CreateOptions.FILE_NON_DIRECTORY_FILE, oplock_level=LEASE, create_contexts=ctxs)
    return f


def test_the_same_app_instance_closes_the_other_clients_open(braid_server, scratch):
    name, path = scratch
    app = uuid.uuid4()
    a, b = Client(braid_server, uuid.uuid4()), Client(braid_server, uuid.uuid4())
    try:
        # The first instance holds the file exclusively (share read only, a write lease):
        # another open would meet a sharing violation after a lease break.
        f = app_open(a, rf"{name}\failover.bin", app, ShareAccess.FILE_SHARE_READ, R | W | H)
        f.write(b"first instance", 0)
        start = time.monotonic()
        g = app_open(b, rf"{name}\failover.bin", app, ShareAccess.FILE_SHARE_READ, R | W | H)
        assert time.monotonic() - start < 5, "no lease break was waited for"
        assert g.read(0, 64) == b"first instance"
        with pytest.raises(SMBResponseException) as e:
            f.read(0, 4)
        assert e.value.status == STATUS_FILE_CLOSED
        # Its CLOSE too (received by hand: smbprotocol's close() swallows FILE_CLOSED).
        req, _ = f.close(send=False)
        sent = a.conn.send(req, sid=a.session.session_id, tid=a.tree.tree_connect_id)
        with pytest.raises(SMBResponseException) as e:
            a.conn.receive(sent)
        assert e.value.status == STATUS_FILE_CLOSED
        g.close()
    finally:
        a.close()
        b.close()


def test_other_app_instances_and_older_versions_leave_the_open(braid_server, scratch):
    name, _ = scratch
    a, b = Client(braid_server, uuid.uuid4()), Client(braid_server, uuid.uuid4())
    share = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE
    try:
        f = app_open(a, rf"{name}\two.bin", uuid.uuid4(), share, R | H, version=(2, 0))
        f.write(b"both stay", 0)
        # Another application instance: both opens stay.
        g = app_open(b, rf"{name}\two.bin", uuid.uuid4(), share, R | H)
        assert f.read(0, 64) == b"both stay" and g.read(0, 64) == b"both stay"
        g.close()
        # The same instance with a version not above the open's is refused; the open stays.
        app = uuid.uuid4()
        f2 = app_open(a, rf"{name}\versioned.bin", app, share, R | H, version=(2, 0))
        for older in [(1, 9), (2, 0)]:
            with pytest.raises(SMBResponseException) as e:
                app_open(b, rf"{name}\versioned.bin", app, share, R | H, version=older)
            assert e.value.status == STATUS_FILE_FORCED_CLOSED
        f2.write(b"kept", 0)
        # A newer version closes it.
        g2 = app_open(b, rf"{name}\versioned.bin", app, share, R | H, version=(2, 1))
        with pytest.raises(SMBResponseException) as e:
            f2.read(0, 4)
        assert e.value.status == STATUS_FILE_CLOSED
        assert f.read(0, 64) == b"both stay"
        g2.close()
        f.close()
    finally:
        a.close()
        b.close()


def plain_open(client, name, share, oplock=0):
    """An open without lease or durability (and without oplock unless asked): read-write,
    sharing only `share`."""
    f = Open(client.tree, name)
    f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE,
             FileAttributes.FILE_ATTRIBUTE_NORMAL, share, CreateDisposition.FILE_OPEN_IF,
             CreateOptions.FILE_NON_DIRECTORY_FILE, oplock_level=oplock)
    return f


def request_resiliency(client, f, timeout_ms):
    """FSCTL_LMR_REQUEST_RESILIENCY on open `f` (smbprotocol has the structures, no call)."""
    body = SMB2SrvNetworkResiliencyRequest()
    body["timeout"] = timeout_ms
    req = SMB2IOCTLRequest()
    req["ctl_code"] = CtlCode.FSCTL_LMR_REQUEST_RESILIENCY
    req["file_id"] = f.file_id
    req["max_input_response"] = 0
    req["max_output_response"] = 0
    req["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
    req["buffer"] = body
    sent = client.conn.send(req, sid=client.session.session_id, tid=client.tree.tree_connect_id)
    SMB2IOCTLResponse().unpack(client.conn.receive(sent)["data"].get_value())


def reconnect_v1(client, name, file_id):
    dh = SMB2CreateDurableHandleReconnect()
    dh["data"] = file_id
    f = Open(client.tree, name)
    f.create(ImpersonationLevel.Impersonation, 0, 0, 0, CreateDisposition.FILE_OPEN, 0, create_contexts=[context(dh)])
    return f


def conflicting_open(srv, name):
    """Another user's writer, against a share mode of read only: the status it meets."""
    bob = Client(srv, uuid.uuid4(), srv.user2, srv.password2)
    try:
        plain_open(bob, name, ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE).close()
        return 0
    except SMBResponseException as e:
        return e.status
    finally:
        bob.close()


def lock_range(f, offset, length, flags):
    el = SMB2LockElement()
    el["offset"], el["length"], el["flags"] = offset, length, flags
    f.lock([el])


def read_by_another_user(srv, name):
    """Another user's reader (sharing read and write) reads bytes 0-9: the status it meets."""
    bob = Client(srv, uuid.uuid4(), srv.user2, srv.password2)
    try:
        f = Open(bob.tree, name)
        f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ, FileAttributes.FILE_ATTRIBUTE_NORMAL,
                 ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE, CreateDisposition.FILE_OPEN,
                 CreateOptions.FILE_NON_DIRECTORY_FILE)
        f.read(0, 10)
        return 0
    except SMBResponseException as e:
        return e.status
    finally:
        bob.close()


def test_a_resilient_open_survives_a_cut_connection(braid_server, scratch):
    name, path = scratch
    guid = uuid.uuid4()
    a = Client(braid_server, guid)
    f = plain_open(a, rf"{name}\resilient.bin", ShareAccess.FILE_SHARE_READ)
    f.write(b"kept through the blink", 0)
    request_resiliency(a, f, 30_000)
    lock_range(f, 0, 10, LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY)
    file_id = f.file_id
    a.cut()
    time.sleep(0.3)
    # The disconnected open keeps its share mode and its byte-range lock.
    assert conflicting_open(braid_server, rf"{name}\resilient.bin") == STATUS_SHARING_VIOLATION
    assert read_by_another_user(braid_server, rf"{name}\resilient.bin") == STATUS_FILE_LOCK_CONFLICT
    # Another user may not have it back; its owner may (DHnC names it by FileId).
    bob = Client(braid_server, guid, braid_server.user2, braid_server.password2)
    try:
        with pytest.raises(SMBResponseException) as e:
            reconnect_v1(bob, rf"{name}\resilient.bin", file_id)
        assert e.value.status == STATUS_ACCESS_DENIED
    finally:
        bob.close()
    b = Client(braid_server, guid)
    try:
        g = reconnect_v1(b, rf"{name}\resilient.bin", file_id)
        assert g.file_id == file_id
        assert g.read(0, 64) == b"kept through the blink"
        lock_range(g, 0, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK)
        assert read_by_another_user(braid_server, rf"{name}\resilient.bin") == 0
        g.close()
    finally:
        b.close()
    assert conflicting_open(braid_server, rf"{name}\resilient.bin") == 0


def test_a_resilient_open_ends_with_its_timeout_or_a_logoff(braid_server, scratch):
    name, path = scratch
    a = Client(braid_server, uuid.uuid4())
    f = plain_open(a, rf"{name}\brief.bin", ShareAccess.FILE_SHARE_READ)
    request_resiliency(a, f, 1000)
    a.cut()
    time.sleep(0.3)
    assert conflicting_open(braid_server, rf"{name}\brief.bin") == STATUS_SHARING_VIOLATION
    time.sleep(2)
    assert conflicting_open(braid_server, rf"{name}\brief.bin") == 0
    # A break it cannot answer closes it at once: the writer waits for no acknowledgment.
    b = Client(braid_server, uuid.uuid4())
    h = plain_open(b, rf"{name}\batch.bin", ShareAccess.FILE_SHARE_READ, oplock=BATCH)
    request_resiliency(b, h, 30_000)
    b.cut()
    time.sleep(0.3)
    start = time.monotonic()
    assert conflicting_open(braid_server, rf"{name}\batch.bin") == 0
    assert time.monotonic() - start < 5
    # A LOGOFF closes a resilient open at once.
    c = Client(braid_server, uuid.uuid4())
    g = plain_open(c, rf"{name}\logoff.bin", ShareAccess.FILE_SHARE_READ)
    request_resiliency(c, g, 30_000)
    c.session.disconnect(close=False)
    c.close()
    assert conflicting_open(braid_server, rf"{name}\logoff.bin") == 0
