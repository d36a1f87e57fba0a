"""A change's lease breaks reach the clients before the answer to the request that made it.

The Linux client answers `readdir` from the listing it cached under a directory lease as soon
as its `unlink` returns: it is right only if the break arrived first. These tests watch the
wire with Python smbprotocol. Client A holds an RH lease on a directory; client B deletes a
file in it (CREATE with delete on close, then CLOSE: the removal happens at the CLOSE).

- One connection, two sessions: the frames the connection receives are logged in wire order;
  the break must come before B's CLOSE answer.
- Two connections: the kernel's receive time of A's break must come before that of B's
  CLOSE answer (SO_TIMESTAMPNS; on loopback a write is received before the write returns,
  so these times follow the order of the server's writes).
- The ParentLeaseKey rule: a delete through an open naming A's lease as its parent breaks
  nothing; the same delete without it breaks A's lease.
"""

from __future__ import annotations

import os
import secrets
import socket
import struct
import threading
import uuid
from types import SimpleNamespace

import pytest
import smbprotocol.connection
import smbprotocol.transport
from smbprotocol.connection import Connection, Dialects
from smbprotocol.open import CreateDisposition, CreateOptions, FileAttributes
from smbprotocol.open import FilePipePrinterAccessMask as A
from smbprotocol.open import ImpersonationLevel, Open, ShareAccess
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import harness
from test_dir_lease import CAP_DIRECTORY_LEASING, lease_v2, open_dir
from test_oplocks import LEASE, NONE, BreakCatcher, H, R, W, ack

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                                reason="Samba grants no directory lease")

SMB2_CLOSE = 0x06
SMB2_OPLOCK_BREAK = 0x12
BREAK_ID = 0xFFFFFFFFFFFFFFFF
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
ROUNDS = 12
SHARE = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE


@pytest.fixture(scope="module")
def server():
    with harness.running_braid("braid-test-breakorder-", share_specs=[{"name": "data"}]) as srv:
        yield srv


def messages(frame: bytes):
    """(command, message id, status) of each message of a received plain frame."""
    out, pos = [], 0
    while frame[pos:pos + 4] == b"\xfeSMB" and len(frame) >= pos + 64:
        status, command = struct.unpack_from("<IH", frame, pos + 8)
        (nxt,) = struct.unpack_from("<I", frame, pos + 20)
        (mid,) = struct.unpack_from("<Q", frame, pos + 24)
        out.append((command, mid, status))
        if nxt == 0:
            break
        pos += nxt
    return out


class StampedSocket:
    """A TCP socket whose reads keep the kernel's receive time of the data (SO_TIMESTAMPNS):
    on loopback the server's writes are received in the order they are made, so these
    times order the frames of two connections."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.stamps: list[int] = []

    def recv(self, n: int) -> bytes:
        data, ancillary, _, _ = self.sock.recvmsg(n, socket.CMSG_SPACE(16))
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack_from("qq", value)
                self.stamps.append(sec * 1_000_000_000 + nsec)
        return data

    def __getattr__(self, name):
        return getattr(self.sock, name)


class LoggedTcp(smbprotocol.transport.Tcp):
    """smbprotocol's transport, passing each received frame and the time its first bytes
    arrived to `on_frame` first (on the connection's reader thread, so in wire order)."""

    def __init__(self, server, port, timeout, on_frame):
        super().__init__(server, port, timeout)
        self.on_frame = on_frame

    def connect(self):
        super().connect()
        self._sock = StampedSocket(self._sock)

    def recv(self, timeout):
        self._sock.stamps.clear()
        frame = super().recv(timeout)
        if frame:
            self.on_frame(frame, self._sock.stamps[0] if self._sock.stamps else None)
        return frame


def connection(srv, on_frame=None) -> Connection:
    """An SMB 3.1.1 connection offering directory leasing; with `on_frame`, every frame it
    receives is passed to it first."""
    conn = Connection(uuid.uuid4(), srv.host, srv.port, require_signing=True)
    conn.client_capabilities |= CAP_DIRECTORY_LEASING
    plain = smbprotocol.connection.Tcp
    if on_frame:
        # connect() makes its transport from this name and starts reading at once.
        smbprotocol.connection.Tcp = lambda server, port, timeout: LoggedTcp(server, port, timeout, on_frame)
    try:
        conn.connect(dialect=Dialects.SMB_3_1_1, timeout=10)
    finally:
        smbprotocol.connection.Tcp = plain
    return conn


def login(conn, user, password):
    # Unencrypted, so the logged frames can be read.
    session = Session(conn, user, password, require_encryption=False, auth_protocol="ntlm")
    session.connect()
    tree = TreeConnect(session, rf"\\{conn.server_name}\data")
    tree.connect()
    return SimpleNamespace(conn=conn, session=session, tree=tree)


def make_file(who, path, contexts=None):
    f = Open(who.tree, path)
    f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE, FileAttributes.FILE_ATTRIBUTE_NORMAL,
             SHARE, CreateDisposition.FILE_CREATE, CreateOptions.FILE_NON_DIRECTORY_FILE,
             oplock_level=LEASE if contexts else NONE, create_contexts=contexts)
    f.close()


def open_for_delete(who, path, contexts=None):
    """Opens `path` with delete on close (the removal happens when it closes)."""
    f = Open(who.tree, path)
    f.create(ImpersonationLevel.Impersonation, A.DELETE | A.FILE_READ_ATTRIBUTES, FileAttributes.FILE_ATTRIBUTE_NORMAL,
             SHARE, CreateDisposition.FILE_OPEN,
             CreateOptions.FILE_NON_DIRECTORY_FILE | CreateOptions.FILE_DELETE_ON_CLOSE,
             oplock_level=LEASE if contexts else NONE, create_contexts=contexts)
    return f


def send_close(who, f):
    """Sends the CLOSE of `f`; returns its message id and a function that waits for its answer."""
    close, answer = f.close(send=False)
    request = who.conn.send(close, who.session.session_id, who.tree.tree_connect_id)
    return request.message["message_id"].get_value(), lambda: answer(request)


def ack_none(who, key):
    status, _ = ack(who, struct.pack("<HHI", 36, 0, 0) + key + struct.pack("<IQ", 0, 0))
    assert status == 0


def break_key(body) -> bytes:
    assert body is not None, "no lease break"
    return body[8:24]


def delete_rounds(a, b, catcher, name, log, lock):
    """Each round, B makes a file in directory `name`, A takes an RH lease on the directory,
    and B deletes the file (the removal is at the CLOSE). Yields the round, B's CLOSE
    message id and what `log` holds once A has its break (emptied before the CLOSE)."""
    open_dir(b, name, uuid.uuid4().bytes)[0].close()
    for i in range(ROUNDS):
        victim = rf"{name}\victim{i}"
        make_file(b, victim)
        key = uuid.uuid4().bytes
        d, state = open_dir(a, name, key)
        assert state == R | H
        f = open_for_delete(b, victim)
        with lock:
            log.clear()
        close_id, answer = send_close(b, f)
        answer()
        assert break_key(catcher.wait()) == key
        with lock:
            seen = list(log)
        yield i, close_id, seen
        ack_none(a, key)
        d.close()


def test_on_a_shared_connection_the_break_comes_before_the_answer(server):
    frames, lock = [], threading.Lock()

    def on_frame(frame, _):
        with lock:
            frames.extend(messages(frame))

    conn = connection(server, on_frame)
    try:
        a = login(conn, server.user, server.password)
        b = login(conn, server.user2, server.password2)
        catcher = BreakCatcher(conn)
        for i, close_id, seen in delete_rounds(a, b, catcher, "order-" + secrets.token_hex(4), frames, lock):
            at_break = next(n for n, m in enumerate(seen) if m[0] == SMB2_OPLOCK_BREAK and m[1] == BREAK_ID)
            at_answer = next((n for n, m in enumerate(seen) if m[0] == SMB2_CLOSE and m[1] == close_id), None)
            assert at_answer is not None, (close_id, seen)
            assert at_break < at_answer, f"round {i}: the CLOSE was answered before the lease break ({seen})"
    finally:
        conn.disconnect(True)


def test_across_connections_the_break_is_written_before_the_answer(server):
    # Each connection's frames with the kernel's time of their arrival.
    arrived, lock = [], threading.Lock()

    def on_frame(frame, stamp):
        with lock:
            arrived.extend((m, stamp) for m in messages(frame))

    holder, changer = connection(server, on_frame), connection(server, on_frame)
    try:
        a = login(holder, server.user, server.password)
        b = login(changer, server.user2, server.password2)
        catcher = BreakCatcher(holder)
        for i, close_id, seen in delete_rounds(a, b, catcher, "order2-" + secrets.token_hex(4), arrived, lock):
            at_break = next(t for m, t in seen if m[0] == SMB2_OPLOCK_BREAK and m[1] == BREAK_ID)
            at_answer = next(t for m, t in seen if m[0] == SMB2_CLOSE and m[1] == close_id)
            assert at_break is not None and at_answer is not None, seen
            assert at_break < at_answer, f"round {i}: A's break arrived {at_break - at_answer} ns after B's answer"
    finally:
        changer.disconnect(True)
        holder.disconnect(True)


def test_a_delete_under_the_directory_lease_breaks_nothing_and_one_without_it_does(server):
    conn = connection(server)
    try:
        a = login(conn, server.user, server.password)
        name = "parent-" + secrets.token_hex(4)
        catcher = BreakCatcher(conn)
        key = uuid.uuid4().bytes
        d, state = open_dir(a, name, key)
        assert state == R | H
        # Made and deleted through opens that name the directory's lease as their parent.
        make_file(a, rf"{name}\mine", [lease_v2(uuid.uuid4().bytes, R | W | H, parent=key)])
        f = open_for_delete(a, rf"{name}\mine", [lease_v2(uuid.uuid4().bytes, R | H, parent=key)])
        f.close()
        assert catcher.wait(timeout=1.5) is None, "a change under the holder's own lease broke it"
        # The same delete without the parent key breaks the lease.
        make_file(a, rf"{name}\theirs", [lease_v2(uuid.uuid4().bytes, R | W | H, parent=key)])
        assert catcher.wait(timeout=1.0) is None
        f = open_for_delete(a, rf"{name}\theirs")
        f.close()
        assert break_key(catcher.wait()) == key
        ack_none(a, key)
        d.close()
    finally:
        conn.disconnect(True)
