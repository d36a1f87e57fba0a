"""Locks across protocols: NLM v4 locks (tests/nlm_rpc.py, from client hosts on their own
loopback addresses) and SMB byte-range locks and opens (Python smbprotocol) on the same file
of one braid share. They live in one file table, so each protocol's lock refuses the other's,
a blocked request of either protocol is woken by the other's unlock, an SMB exclusive lock
makes NFS READs and WRITEs in its range fail (NFS3ERR_ACCES), an NLM share reservation meets
SMB share modes, and after a restart SMB takes no new lock on a file whose NLM locks are
being reclaimed.

Needs root (the client hosts' portmappers on port 111)."""

from __future__ import annotations

import os
import secrets
import threading
import time

import pytest
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask as A, LockFlags, SMB2LockElement, ShareAccess

import nlm_harness
import nlm_rpc as m
from nfs_rpc import NFS3ERR_ACCES
from harness import Smb

pytestmark = [
    pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                       reason="NLM is braid's own"),
    pytest.mark.skipif(os.geteuid() != 0, reason="port 111 on the client hosts' addresses needs root"),
]

STATUS_SHARING_VIOLATION = 0xC0000043
STATUS_LOCK_NOT_GRANTED = 0xC0000055
EXCLUSIVE = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK
SHARED = LockFlags.SMB2_LOCKFLAG_SHARED_LOCK
NOW = LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
UNLOCK = LockFlags.SMB2_LOCKFLAG_UNLOCK
CALLBACK_WAIT = 10
PROBE = 1  # seconds a lock-holding host may be silent before it is probed


@pytest.fixture(scope="module")
def target():
    yield from nlm_harness.serving("braid", braid_extra=[f'nfs_lock_probe = "{PROBE}s"'])


@pytest.fixture
def smb(target):
    with Smb(target.srv, share="data") as s:
        yield s


@pytest.fixture
def name_fh(target, request):
    """A fresh file: its name in the share and its NFSv3 handle."""
    name = f"x-{request.node.name[:30]}-{secrets.token_hex(3)}"
    return name, target.new_file(name)


def smb_lock(f, offset, length, flags):
    el = SMB2LockElement()
    el["offset"], el["length"], el["flags"] = offset, length, flags
    f.lock([el])


def smb_lock_status(f, offset, length, flags) -> int:
    try:
        smb_lock(f, offset, length, flags)
        return 0
    except SMBResponseException as e:
        return e.status


def expect(res, stat, what):
    assert res.stat == stat, f"{what}: expected {m.stat_name(stat)}, got {res}"
    return res


def test_an_smb_lock_refuses_nlm_locks_and_test_names_it(target, smb, name_fh):
    name, fh = name_fh
    f = smb.open(name)
    smb_lock(f, 100, 100, EXCLUSIVE | NOW)
    with target.client(0) as a:
        la = a.owner(1).lock(fh, 150, 10)
        expect(a.lock(la), m.NLM4_DENIED, "NLM LOCK inside the SMB lock")
        expect(a.lock(la, exclusive=False), m.NLM4_DENIED, "a shared NLM LOCK inside an SMB exclusive lock")
        r = expect(a.test(la), m.NLM4_DENIED, "NLM TEST inside the SMB lock")
        assert (r.holder.exclusive, r.holder.offset, r.holder.length, r.holder.svid) == (True, 100, 100, 0), r
        outside = a.owner(1).lock(fh, 200, 10)
        expect(a.lock(outside), m.NLM4_GRANTED, "NLM LOCK just past the SMB lock")
        smb_lock(f, 100, 100, UNLOCK)
        expect(a.lock(la), m.NLM4_GRANTED, "NLM LOCK after the SMB unlock")
        expect(a.unlock(a.owner(1).lock(fh, 0, 0)), m.NLM4_GRANTED, "NLM UNLOCK of everything")
    f.close()


def test_an_nlm_lock_refuses_smb_locks(target, smb, name_fh):
    name, fh = name_fh
    f = smb.open(name)
    with target.client(0) as a:
        la = a.owner(7).lock(fh, 0, 50)
        expect(a.lock(la), m.NLM4_GRANTED, "NLM exclusive LOCK")
        assert smb_lock_status(f, 10, 5, EXCLUSIVE | NOW) == STATUS_LOCK_NOT_GRANTED
        assert smb_lock_status(f, 10, 5, SHARED | NOW) == STATUS_LOCK_NOT_GRANTED
        assert smb_lock_status(f, 50, 5, EXCLUSIVE | NOW) == 0, "past the NLM lock"
        smb_lock(f, 50, 5, UNLOCK)
        # A shared NLM lock lets SMB share the range, not take it.
        expect(a.lock(la, exclusive=False), m.NLM4_GRANTED, "downgrade to shared")
        assert smb_lock_status(f, 10, 5, SHARED | NOW) == 0
        assert smb_lock_status(f, 20, 5, EXCLUSIVE | NOW) == STATUS_LOCK_NOT_GRANTED
        smb_lock(f, 10, 5, UNLOCK)
        expect(a.unlock(la), m.NLM4_GRANTED, "NLM UNLOCK")
        assert smb_lock_status(f, 10, 5, EXCLUSIVE | NOW) == 0
        expect(a.lock(la), m.NLM4_DENIED, "NLM LOCK under SMB's")
    f.close()


def test_a_blocked_nlm_lock_is_granted_when_smb_unlocks(target, smb, name_fh):
    name, fh = name_fh
    f = smb.open(name)
    smb_lock(f, 0, 10, EXCLUSIVE | NOW)
    host = target.hosts[1]
    with target.client(1) as b:
        lb = b.owner(3).lock(fh, 0, 10)
        expect(b.lock(lb, block=True), m.NLM4_BLOCKED, "blocking NLM LOCK under an SMB lock")
        since = host.mark()
        smb_lock(f, 0, 10, UNLOCK)
        cb = host.wait_for("nlm", [m.NLMPROC4_GRANTED, m.NLMPROC4_GRANTED_MSG], CALLBACK_WAIT,
                           lambda r: r.decoded.lock.fh == fh, since)
        assert cb.decoded.lock.svid == 3, cb
        assert smb_lock_status(f, 0, 10, EXCLUSIVE | NOW) == STATUS_LOCK_NOT_GRANTED, "the NLM client holds it now"
        expect(b.unlock(lb), m.NLM4_GRANTED, "NLM UNLOCK")
    f.close()


def test_a_blocked_smb_lock_is_granted_when_nlm_unlocks(target, smb, name_fh):
    name, fh = name_fh
    f = smb.open(name)
    with target.client(0) as a:
        la = a.owner(9).lock(fh, 0, 10)
        expect(a.lock(la), m.NLM4_GRANTED, "NLM LOCK")
        done: dict = {}

        def blocked_smb_lock():
            done["status"] = smb_lock_status(f, 5, 1, EXCLUSIVE)
            done["at"] = time.monotonic()

        waiter = threading.Thread(target=blocked_smb_lock, daemon=True)
        waiter.start()
        time.sleep(1)
        assert not done, f"the SMB lock did not wait for the NLM one: {done}"
        unlocked_at = time.monotonic()
        expect(a.unlock(la), m.NLM4_GRANTED, "NLM UNLOCK")
        waiter.join(CALLBACK_WAIT)
        assert done.get("status") == 0, done
        assert done["at"] - unlocked_at < 2, "the SMB waiter was not woken by the NLM unlock"
        expect(a.lock(la), m.NLM4_DENIED, "NLM LOCK while SMB holds")
    f.close()


def test_nfs_io_under_an_smb_exclusive_lock_fails(target, smb, name_fh):
    name, fh = name_fh
    f = smb.open(name)
    f.write(b"\0" * 300, 0)
    smb_lock(f, 100, 100, EXCLUSIVE | NOW)
    with target.nfs() as c:
        assert c.write(fh, 150, b"x").status == NFS3ERR_ACCES, "NFS WRITE inside an SMB exclusive lock"
        assert c.read(fh, 90, 20).status == NFS3ERR_ACCES, "NFS READ reaching into it"
        assert c.write(fh, 250, b"y").ok, "NFS WRITE past it"
        assert c.read(fh, 0, 100).ok, "NFS READ before it"
        smb_lock(f, 100, 100, UNLOCK)
        smb_lock(f, 100, 100, SHARED | NOW)
        assert c.read(fh, 150, 10).ok, "a shared lock lets others read"
        assert c.write(fh, 150, b"x").status == NFS3ERR_ACCES, "but not write"
        smb_lock(f, 100, 100, UNLOCK)
        assert c.write(fh, 150, b"x").ok
    f.close()


def test_an_nlm_share_reservation_meets_smb_share_modes(target, smb, name_fh):
    name, fh = name_fh
    with target.client(0) as a:
        o = a.owner(0, b"share-owner")
        expect(a.share(o, fh, m.FSM_DW, m.FSA_R), m.NLM4_GRANTED, "NLM SHARE denying writes")
        with pytest.raises(SMBResponseException) as e:
            smb.open(name, access=A.GENERIC_WRITE)
        assert e.value.status == STATUS_SHARING_VIOLATION
        smb.open(name, access=A.GENERIC_READ).close()
        expect(a.unshare(o, fh, m.FSM_DW, m.FSA_R), m.NLM4_GRANTED, "NLM UNSHARE")
        smb.open(name, access=A.GENERIC_WRITE).close()
        # And the other way: an SMB open that denies writes refuses a SHARE for writing.
        f = smb.open(name, access=A.GENERIC_READ, share_access=ShareAccess.FILE_SHARE_READ)
        expect(a.share(o, fh, m.FSM_DN, m.FSA_W), m.NLM4_DENIED, "NLM SHARE for writing while SMB denies writes")
        f.close()
        expect(a.share(o, fh, m.FSM_DN, m.FSA_W), m.NLM4_GRANTED, "NLM SHARE once the SMB open closed")
        expect(a.unshare(o, fh, m.FSM_DN, m.FSA_W), m.NLM4_GRANTED, "NLM UNSHARE")


def test_smb_takes_no_lock_on_a_file_being_reclaimed(target, name_fh):
    """After a restart, the files NLM clients held locks on are theirs to reclaim during the
    grace period: SMB's new locks there fail (LOCK_NOT_GRANTED), elsewhere they work."""
    name, fh = name_fh
    other, _ = f"{name}-other", target.new_file(f"{name}-other")
    grace = 6
    with target.client(2) as a:
        la = a.owner(5).lock(fh, 0, 10)
        expect(a.lock(la), m.NLM4_GRANTED, "NLM LOCK before the restart")
    target.restart(grace)
    started = time.monotonic()
    with Smb(target.srv, share="data") as s:
        f, g = s.open(name), s.open(other)
        assert smb_lock_status(f, 100, 10, EXCLUSIVE | NOW) == STATUS_LOCK_NOT_GRANTED, "a file being reclaimed"
        assert smb_lock_status(g, 0, 10, EXCLUSIVE | NOW) == 0, "a file nobody held"
        with target.client(2) as a:
            expect(a.lock(la, reclaim=True), m.NLM4_GRANTED, "the reclaim")
            expect(a.unlock(la), m.NLM4_GRANTED, "UNLOCK")
        time.sleep(max(0.0, grace + 0.5 - (time.monotonic() - started)))
        assert smb_lock_status(f, 100, 10, EXCLUSIVE | NOW) == 0, "after the grace period"
        f.close()
        g.close()
    target.wait_out_grace(2 * grace)


def test_a_client_host_that_vanishes_loses_its_locks(target, smb, name_fh):
    """A host holding a lock whose lock manager stops answering (its portmapper and NLM
    service gone, as when it is powered off for good) is probed and, after three missed
    probes, its locks go: SMB and other NLM clients get the range."""
    name, fh = name_fh
    ip = f"127.78.{os.getpid() % 250 + 1}.9"
    host = m.ClientHost(ip, server_nlm=(target.server_ip, target.nlm_port, "udp"))
    try:
        with m.NlmClient(target.server_ip, target.nlm_port, source=ip, caller_name="vanishing-host") as v:
            expect(v.lock(v.owner(4).lock(fh, 0, 10)), m.NLM4_GRANTED, "the vanishing host's LOCK")
        f = smb.open(name)
        time.sleep(3 * PROBE)
        assert smb_lock_status(f, 0, 10, EXCLUSIVE | NOW) == STATUS_LOCK_NOT_GRANTED, "held while the host answers probes"
    finally:
        host.close()
    deadline = time.monotonic() + 10 * PROBE + 10
    while smb_lock_status(f, 0, 10, EXCLUSIVE | NOW) != 0:
        assert time.monotonic() < deadline, "the vanished host's lock was never released"
        time.sleep(0.5)
    smb_lock(f, 0, 10, UNLOCK)
    f.close()
    log = target.srv.log.read_text(errors="replace")
    assert "does not answer; releasing its locks" in log
