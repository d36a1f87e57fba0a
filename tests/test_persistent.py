"""Persistent handles on a continuously available share (Python smbprotocol against the real
binary): an open granted persistence (DH2Q with SMB2_DHANDLE_FLAG_PERSISTENT) survives a
SIGKILL of the server in the middle of a write loop. The restarted server (same config,
same state_dir) has rebuilt it from `<state_dir>/handles.redb`: before it is reclaimed its
byte-range lock and share mode still hold against other clients; its owner reclaims it
(DH2C) on a new connection with its lease, lock and every acknowledged write; another user
may not. A graceful stop (SIGTERM) keeps them the same way; a lease break in progress at
the crash comes back as the state it offered; a file deleted or replaced while the server
was down drops its open. Ordinary shares grant no persistence and create no store; a CA share whose state directory cannot be used stops the
server at startup, naming the key; an unreclaimed persistent open times out and is closed
after a restart too; a damaged store is moved aside and the server starts without it."""

import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
import uuid

import pytest
import smbprotocol.session
from smbprotocol.connection import Capabilities, Connection, Dialects
from smbprotocol.create_contexts import (
    DurableHandleFlags,
    SMB2CreateDurableHandleReconnectV2,
    SMB2CreateDurableHandleRequestV2,
    SMB2CreateDurableHandleResponseV2,
    SMB2CreateResponseLeaseV2,
)
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import CreateDisposition, CreateOptions, FileAttributes
from smbprotocol.open import FilePipePrinterAccessMask as A
from smbprotocol.open import ImpersonationLevel, LockFlags, Open, ShareAccess, SMB2LockElement
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

import harness

LEASE = 0xFF
R, H, W = 0x1, 0x2, 0x4
STATUS_OBJECT_NAME_NOT_FOUND = 0xC0000034
STATUS_ACCESS_DENIED = 0xC0000022
STATUS_SHARING_VIOLATION = 0xC0000043
STATUS_LOCK_NOT_GRANTED = 0xC0000055

# These tests start, kill and restart braid themselves.
pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                                reason="kills and restarts the braid binary")


class Braid:
    """A braid process on a fixed port and config file, which the test kills and restarts."""

    def __init__(self, root, ca=True):
        self.users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
        self.root = root
        self.state = root / "state"
        specs = [{"name": "data"}]
        if ca:
            specs.append({"name": "ca", "lines": ["continuous_availability = true"]})
        self.srv = harness.start_braid(root, self.users, share_specs=specs,
                                       server_extra=[f"state_dir = {harness._toml_str(self.state)}"])
        self.host, self.port = self.srv.host, self.srv.port

    def kill9(self):
        self.srv.proc.send_signal(signal.SIGKILL)
        self.srv.proc.wait(10)

    def restart(self):
        with open(self.srv.log, "ab") as lf:
            self.srv.proc = subprocess.Popen([str(harness.braid_bin()), "serve", "--config", str(self.root / "braid.toml")],
                                             stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                                             env=dict(os.environ, RUST_BACKTRACE="1"), start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not harness.port_open(self.port):
            assert self.srv.proc.poll() is None, self.srv.log.read_text(errors="replace")[-3000:]
            time.sleep(0.05)
        assert harness.port_open(self.port)

    def term(self):
        """A graceful stop (SIGTERM), as a service manager restarting braid would."""
        assert harness.stop_braid(self.srv) is None

    def stop(self):
        problem = harness.stop_braid(self.srv)
        if self.srv.log.exists():
            shutil.copyfile(self.srv.log, harness.log_dir() / f"persistent-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
        return problem


@pytest.fixture
def braid():
    root = harness.tmp_dir("braid-persistent-")
    b = Braid(root)
    try:
        yield b
    finally:
        problem = b.stop()
        shutil.rmtree(root, ignore_errors=True)
        assert problem is None, problem


class Client:
    """One connection, session and tree connect, with a chosen ClientGuid."""

    def __init__(self, b, guid, share="ca", user="alice"):
        self.conn = Connection(guid, b.host, b.port, require_signing=True)
        self.conn.connect(dialect=Dialects.SMB_3_1_1, timeout=10)
        self.session = Session(self.conn, user, b.users[user], auth_protocol="ntlm")
        self.session.connect()
        self.tree = TreeConnect(self.session, rf"\\{b.host}\{share}")
        self.tree.connect()

    def close(self):
        try:
            self.conn.disconnect(close=True)
        except Exception:
            pass


from test_durable import context, lease  # noqa: E402  (the create-context helpers)


def persistent_open(client, name, create_guid, key=None, timeout_ms=0, share=ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE):
    dh = SMB2CreateDurableHandleRequestV2()
    dh["timeout"] = timeout_ms
    dh["flags"] = DurableHandleFlags.SMB2_DHANDLE_FLAG_PERSISTENT
    dh["create_guid"] = create_guid
    ctxs = [context(dh)] + ([lease(key, R | W | H)] if key else [])
    f = Open(client.tree, name)
    resp = f.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE,
                    FileAttributes.FILE_ATTRIBUTE_NORMAL, share, CreateDisposition.FILE_OVERWRITE_IF,
                    CreateOptions.FILE_NON_DIRECTORY_FILE, oplock_level=LEASE if key else 0, create_contexts=ctxs)
    return f, resp


def reconnect(client, name, file_id, create_guid, key=None):
    dh = SMB2CreateDurableHandleReconnectV2()
    dh["file_id"] = file_id
    dh["create_guid"] = create_guid
    f = Open(client.tree, name)
    resp = f.create(ImpersonationLevel.Impersonation, 0, 0, 0, CreateDisposition.FILE_OPEN, 0,
                    oplock_level=LEASE if key else 0,
                    create_contexts=[context(dh)] + ([lease(key, R | W | H)] if key else []))
    return f, resp


def persistent_flag(resp):
    for c in resp or []:
        if isinstance(c, SMB2CreateDurableHandleResponseV2):
            return c["flags"].get_value() & DurableHandleFlags.SMB2_DHANDLE_FLAG_PERSISTENT != 0
    return None


def lease_state(resp):
    for c in resp or []:
        if isinstance(c, SMB2CreateResponseLeaseV2):
            return c["lease_key"].get_value(), c["lease_state"].get_value()
    return None


def lock(f, offset, length, flags):
    e = SMB2LockElement()
    e["offset"] = offset
    e["length"] = length
    e["flags"] = flags
    f.lock([e])


EXCL = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY


def status_of(fn):
    with pytest.raises(SMBResponseException) as e:
        fn()
    return e.value.status


def write_until_killed(f, acked, stop):
    """Writes 4 KiB chunks, every tenth written through and every fifth flushed, recording
    each acknowledged one, until the server dies."""
    i = 0
    try:
        while not stop.is_set() and i < 100_000:
            data = bytes([i % 251]) * 4096
            f.write(data, 4096 + i * 4096, write_through=(i % 10 == 0))
            if i % 5 == 0:
                f.flush()
            acked.append((4096 + i * 4096, data))
            i += 1
    except Exception:
        pass


def test_sigkill_mid_write_loop_and_reclaim_after_restart(braid):
    guid, key, cg_a, cg_b = uuid.uuid4(), uuid.uuid4().bytes, uuid.uuid4(), uuid.uuid4()
    a = Client(braid, guid)
    assert a.tree.is_ca_share, "tree connect answers SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY"
    assert a.conn.server_capabilities.has_flag(Capabilities.SMB2_GLOBAL_CAP_PERSISTENT_HANDLES)
    f, resp = persistent_open(a, "doc.bin", cg_a, key)
    assert persistent_flag(resp) is True
    assert lease_state(resp)[1] == R | W | H
    # A second persistent open without any oplock or lease: persistence needs none on a CA share.
    g, resp_g = persistent_open(a, "other.bin", cg_b)
    assert persistent_flag(resp_g) is True
    f.write(b"head" * 1024, 0)
    f.flush()
    lock(f, 0, 100, EXCL)
    lock(g, 10, 10, EXCL)
    g.write(b"kept", 0, write_through=True)
    acked, stop = [], threading.Event()
    writer = threading.Thread(target=write_until_killed, args=(f, acked, stop), daemon=True)
    writer.start()
    deadline = time.monotonic() + 20
    while len(acked) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(acked) >= 40, "the write loop made progress"
    braid.kill9()
    stop.set()
    writer.join(10)
    a.close()
    braid.restart()
    assert (braid.state / "handles.redb").exists()
    assert braid.state.stat().st_mode & 0o777 == 0o700, "created private: the records name users and paths"

    # Before the owner is back: another user cannot reclaim, the lock and share mode hold.
    bob = Client(braid, guid, user="bob")
    try:
        assert status_of(lambda: reconnect(bob, "doc.bin", f.file_id, cg_a, key)) == STATUS_ACCESS_DENIED
    finally:
        bob.close()
    other = Client(braid, uuid.uuid4(), user="bob")
    try:
        h = Open(other.tree, "other.bin")
        h.create(ImpersonationLevel.Impersonation, A.GENERIC_READ | A.GENERIC_WRITE, 0,
                 ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE, CreateDisposition.FILE_OPEN, 0)
        assert status_of(lambda: lock(h, 12, 2, EXCL)) == STATUS_LOCK_NOT_GRANTED
        h.close()
        d = Open(other.tree, "other.bin")
        assert status_of(lambda: d.create(ImpersonationLevel.Impersonation, A.DELETE, 0, ShareAccess.FILE_SHARE_DELETE | ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
                                          CreateDisposition.FILE_OPEN, 0)) == STATUS_SHARING_VIOLATION
    finally:
        other.close()

    b = Client(braid, guid)
    try:
        f2, resp2 = reconnect(b, "doc.bin", f.file_id, cg_a, key)
        assert f2.file_id == f.file_id
        assert lease_state(resp2) == (key, R | W | H), "the lease comes back as it was"
        assert f2.read(0, 4096) == b"head" * 1024
        for offset, data in acked:
            assert f2.read(offset, len(data)) == data, f"acknowledged write at {offset} lost"
        # The lock came back with the open: taking it again conflicts, releasing it works.
        assert status_of(lambda: lock(f2, 0, 100, EXCL)) == STATUS_LOCK_NOT_GRANTED
        lock(f2, 0, 100, LockFlags.SMB2_LOCKFLAG_UNLOCK)
        g2, _ = reconnect(b, "other.bin", g.file_id, cg_b)
        assert g2.read(0, 4) == b"kept"
        # New FileIds do not collide with restored ones.
        n, _ = persistent_open(b, "new.bin", uuid.uuid4())
        assert n.file_id not in (f.file_id, g.file_id)
        for x in (n, g2, f2):
            x.close()
    finally:
        b.close()
    # Closed: the records are gone, so another restart restores nothing.
    braid.kill9()
    braid.restart()
    c = Client(braid, guid)
    try:
        assert status_of(lambda: reconnect(c, "doc.bin", f.file_id, cg_a, key)) == STATUS_OBJECT_NAME_NOT_FOUND
    finally:
        c.close()


def test_unreclaimed_persistent_open_times_out_after_restart(braid):
    guid, cg = uuid.uuid4(), uuid.uuid4()
    a = Client(braid, guid)
    f, resp = persistent_open(a, "brief.bin", cg, timeout_ms=1500, share=0)
    assert persistent_flag(resp) is True
    braid.kill9()
    a.close()
    braid.restart()
    other = Client(braid, uuid.uuid4(), user="bob")
    try:
        o = Open(other.tree, "brief.bin")
        assert status_of(lambda: o.create(ImpersonationLevel.Impersonation, A.GENERIC_READ, 0, ShareAccess.FILE_SHARE_READ,
                                          CreateDisposition.FILE_OPEN, 0)) == STATUS_SHARING_VIOLATION
        time.sleep(2.5)
        # The timeout (counted from the restart) closed it: the share mode is gone.
        o.create(ImpersonationLevel.Impersonation, A.GENERIC_READ, 0, ShareAccess.FILE_SHARE_READ, CreateDisposition.FILE_OPEN, 0)
        o.close()
    finally:
        other.close()
    b = Client(braid, guid)
    try:
        assert status_of(lambda: reconnect(b, "brief.bin", f.file_id, cg)) == STATUS_OBJECT_NAME_NOT_FOUND
    finally:
        b.close()


def test_a_graceful_stop_keeps_persistent_handles(braid):
    guid, key, cg = uuid.uuid4(), uuid.uuid4().bytes, uuid.uuid4()
    a = Client(braid, guid)
    f, resp = persistent_open(a, "planned.bin", cg, key)
    assert persistent_flag(resp) is True
    f.write(b"before the planned restart", 0)
    lock(f, 0, 10, EXCL)
    braid.term()
    a.close()
    braid.restart()
    b = Client(braid, guid)
    try:
        f2, resp2 = reconnect(b, "planned.bin", f.file_id, cg, key)
        assert lease_state(resp2) == (key, R | W | H)
        assert f2.read(0, 26) == b"before the planned restart"
        assert status_of(lambda: lock(f2, 0, 10, EXCL)) == STATUS_LOCK_NOT_GRANTED
        f2.close()
    finally:
        b.close()


def test_a_lease_break_in_progress_is_recorded(braid):
    """The record takes the state a break offers when the break is sent: a crash before the
    acknowledgment hands back the lesser state, never the caching the client was told to
    give up."""
    guid, key, cg = uuid.uuid4(), uuid.uuid4().bytes, uuid.uuid4()
    a = Client(braid, guid)
    f, resp = persistent_open(a, "shared.bin", cg, key)
    assert lease_state(resp)[1] == R | W | H
    bob = Client(braid, uuid.uuid4(), user="bob")
    # Bob's open breaks W from alice's lease and waits for her acknowledgment, which never
    # comes: the server is killed first.
    g = Open(bob.tree, "shared.bin")

    def open_until_killed():
        try:
            g.create(ImpersonationLevel.Impersonation, A.GENERIC_READ, 0,
                     ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE, CreateDisposition.FILE_OPEN, 0)
        except Exception:
            pass

    opening = threading.Thread(target=open_until_killed, daemon=True)
    opening.start()
    time.sleep(1.0)
    braid.kill9()
    opening.join(10)
    a.close()
    bob.close()
    braid.restart()
    b = Client(braid, guid)
    try:
        f2, resp2 = reconnect(b, "shared.bin", f.file_id, cg, key)
        assert lease_state(resp2) == (key, R | H)
        f2.close()
    finally:
        b.close()


def test_a_file_gone_or_replaced_while_down_is_dropped(braid):
    guid, cg1, cg2, cg3 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    a = Client(braid, guid)
    gone, _ = persistent_open(a, "gone.bin", cg1)
    replaced, _ = persistent_open(a, "replaced.bin", cg2)
    kept, _ = persistent_open(a, "kept.bin", cg3)
    braid.kill9()
    a.close()
    root = braid.srv.shares["ca"]
    (root / "gone.bin").unlink()
    (root / "replaced.bin").unlink()
    (root / "replaced.bin").write_bytes(b"another file under the same name")
    braid.restart()
    b = Client(braid, guid)
    try:
        for f, name, cg in ((gone, "gone.bin", cg1), (replaced, "replaced.bin", cg2)):
            assert status_of(lambda: reconnect(b, name, f.file_id, cg)) == STATUS_OBJECT_NAME_NOT_FOUND
        reconnect(b, "kept.bin", kept.file_id, cg3)[0].close()
    finally:
        b.close()
    log = braid.srv.log.read_text(errors="replace")
    assert "persistent handle dropped at restart" in log and "the file was replaced" in log, log[-2000:]
    assert "restored=1" in log


def test_ordinary_shares_grant_no_persistence_and_keep_no_store():
    root = harness.tmp_dir("braid-persistent-off-")
    b = Braid(root, ca=False)
    try:
        a = Client(b, uuid.uuid4(), share="data")
        try:
            assert not a.tree.is_ca_share
            assert not a.conn.server_capabilities.has_flag(Capabilities.SMB2_GLOBAL_CAP_PERSISTENT_HANDLES)
            f, resp = persistent_open(a, "plain.bin", uuid.uuid4(), uuid.uuid4().bytes)
            assert persistent_flag(resp) is False, "durable, not persistent"
            f.close()
        finally:
            a.close()
        assert not (b.state / "handles.redb").exists()
    finally:
        problem = b.stop()
        shutil.rmtree(root, ignore_errors=True)
        assert problem is None, problem


def test_unusable_state_dir_stops_startup_naming_the_key():
    root = harness.tmp_dir("braid-persistent-bad-")
    try:
        (root / "afile").write_text("not a directory")
        shares = root / "ca"
        shares.mkdir()
        port = harness.free_port()
        cfg = root / "braid.toml"
        text = harness.braid_config(port, {"alice": "pw-alice-1", "bob": "pw-bob-1"},
                                    [{"name": "ca", "path": str(shares), "lines": ["continuous_availability = true"]}],
                                    [f"state_dir = {harness._toml_str(root / 'afile' / 'state')}"])
        cfg.write_text(text)
        r = subprocess.run([str(harness.braid_bin()), "serve", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
        assert r.returncode != 0
        out = r.stdout + r.stderr
        assert "server.state_dir" in out and "continuously available" in out, out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_damaged_handle_store_is_moved_aside_and_the_server_starts(braid):
    """handles.redb overwritten with garbage while braid is down: the restart logs it, moves
    the file aside as handles.redb.unreadable, and serves, persistent handles included; the
    handles the store held are gone (their reconnect fails), the rule docs/status.md gives."""
    guid, cg = uuid.uuid4(), uuid.uuid4()
    a = Client(braid, guid)
    f, resp = persistent_open(a, "kept.bin", cg)
    assert persistent_flag(resp) is True
    braid.term()
    a.close()
    store = braid.state / "handles.redb"
    size = store.stat().st_size
    store.write_bytes(os.urandom(size))
    damaged = store.read_bytes()
    braid.restart()
    log = braid.srv.log.read_text(errors="replace")
    assert "persistent handle store unreadable" in log, log[-2000:]
    assert (braid.state / "handles.redb.unreadable").read_bytes() == damaged
    b = Client(braid, guid)
    try:
        assert status_of(lambda: reconnect(b, "kept.bin", f.file_id, cg)) == STATUS_OBJECT_NAME_NOT_FOUND
        g, resp = persistent_open(b, "after.bin", uuid.uuid4())
        assert persistent_flag(resp) is True
        g.close()
    finally:
        b.close()
