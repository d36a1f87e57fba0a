"""NLM v4 (byte-range locks and shares for NFSv3) and NSM v1 (reboot notification), through
tests/nlm_rpc.py, a raw client written from the protocol documents, against two targets:
nfs-ganesha (bench/ganesha.sh with NLM, rpcbind and rpc.statd in a network namespace), which
checks the tests themselves, and braid (`-k braid`).

Every client of a test calls from its own address (a distinct client host for the server) and
runs there what a client host runs for the server's calls back: a portmapper on port 111 and
the NLM and NSM callback services (nlm_rpc.ClientHost), which record what arrives.

Needs root (port 111, network namespaces). BRAID_BIN selects the braid binary.
"""

from __future__ import annotations

import os
import secrets
import shutil
import struct
import time

import pytest

import nlm_harness
import nlm_rpc as m
from nfs_rpc import GARBAGE_ARGS, PROC_UNAVAIL, PROG_MISMATCH, Packer, RpcError

pytestmark = [
    pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                       reason="NLM is braid's own"),
    pytest.mark.skipif(os.geteuid() != 0, reason="port 111 and network namespaces need root"),
]

GRACE = 5            # seconds of grace after the restarts below
CALLBACK_WAIT = 10   # how long a callback (GRANTED, _RES, SM_NOTIFY) may take to arrive


def _missing_ganesha_tools() -> list[str]:
    need = ["ganesha.nfsd", "rpcbind", "rpc.statd", "sm-notify", "ip", "unshare"]
    return [t for t in need if not (shutil.which(t) or os.path.exists(f"/usr/sbin/{t}"))]


@pytest.fixture(scope="module", params=["ganesha", "braid"])
def target(request):
    """The server under test, with its client hosts (see tests/nlm_harness.py)."""
    if request.param == "ganesha" and _missing_ganesha_tools():
        pytest.skip(f"not installed: {_missing_ganesha_tools()} (nfs-ganesha, rpcbind, nfs-common)")
    yield from nlm_harness.serving(request.param)


@pytest.fixture
def t(target):
    """The target, checked after the test: a server that died fails the test that killed it."""
    yield target
    problem = target.health()
    if problem:
        pytest.fail(f"{target.name} died during this test: {problem}", pytrace=False)


@pytest.fixture
def fh(t, request):
    """A fresh file's NFSv3 handle."""
    return t.new_file(f"nlm-{request.node.name[:40]}-{secrets.token_hex(3)}".replace("[", "-").replace("]", ""))


def expect(res: m.NlmRes, stat: int, what: str) -> m.NlmRes:
    assert res.stat == stat, f"{what}: expected {m.stat_name(stat)}, got {res}"
    return res


def rpc_error(fn, *args, **kw) -> RpcError:
    with pytest.raises(RpcError) as ei:
        fn(*args, **kw)
    return ei.value


def granted_callback(host: m.ClientHost, lock: m.Lock, since: int) -> m.Received:
    """The GRANTED or GRANTED_MSG that tells `host` its blocked `lock` is now held."""
    def same(r):
        g = r.decoded
        return (g.lock.svid, g.lock.oh, g.lock.offset, g.lock.length, g.lock.fh) == \
               (lock.svid, lock.oh, lock.offset, lock.length, lock.fh)
    return host.wait_for("nlm", [m.NLMPROC4_GRANTED, m.NLMPROC4_GRANTED_MSG], CALLBACK_WAIT, same, since)


def res_call(host: m.ClientHost, proc: int, cookie: bytes, since: int) -> m.NlmRes:
    """The _RES call (proc) to `host` that carries `cookie`: the results of a _MSG call."""
    return host.wait_for("nlm", proc, CALLBACK_WAIT, lambda r: r.decoded.cookie == cookie, since).decoded


# --------------------------------------------------------------------------------------------
# the basics
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_null_and_sm_stat(t, transport):
    with t.client(0, transport) as c:
        c.null()
    with t.nsm(0, transport) as n:
        n.null()
        st = n.stat(t.caller_name(0))
        assert st.res in (m.STAT_SUCC, m.STAT_FAIL), st
        assert st.state % 2 == 1, f"an NSM state number is odd while the host is up: {st}"


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_lock_conflict_test_unlock(t, fh, transport):
    """Two client hosts: the second is refused while the first holds the range, TEST names the
    holder, and after UNLOCK the second gets it. Every reply carries the call's cookie
    (NlmClient checks)."""
    with t.client(0, transport) as a, t.client(1, transport) as b:
        la = a.owner(101).lock(fh, 0, 100)
        lb = b.owner(202).lock(fh, 50, 10)
        expect(a.lock(la), m.NLM4_GRANTED, "A's LOCK")
        expect(a.lock(la), m.NLM4_GRANTED, "A's LOCK again (the same owner and range)")
        expect(b.lock(lb), m.NLM4_DENIED, "B's conflicting LOCK")
        r = expect(b.test(lb), m.NLM4_DENIED, "B's TEST")
        assert r.holder == m.Holder(True, 101, la.oh, 0, 100), r
        expect(a.test(la), m.NLM4_GRANTED, "A's TEST of its own lock")
        expect(b.test(b.owner(202).lock(fh, 100, 10)), m.NLM4_GRANTED, "B's TEST past A's range")
        expect(a.unlock(la), m.NLM4_GRANTED, "A's UNLOCK")
        expect(b.test(lb), m.NLM4_GRANTED, "B's TEST after A's UNLOCK")
        expect(b.lock(lb), m.NLM4_GRANTED, "B's LOCK after A's UNLOCK")
        r = expect(a.test(la), m.NLM4_DENIED, "A's TEST while B holds")
        assert (r.holder.svid, r.holder.oh, r.holder.offset, r.holder.length) == (202, lb.oh, 50, 10), r
        expect(b.unlock(lb), m.NLM4_GRANTED, "B's UNLOCK")
        expect(b.unlock(lb), m.NLM4_GRANTED, "B's UNLOCK of a range it no longer holds")


def test_owners_on_one_host_and_shared_locks(t, fh):
    """On one client host the svid/oh tell owners apart; read (shared) locks coexist and
    conflict only with write locks; a TEST reports a shared holder as not exclusive."""
    with t.client(2) as a:
        one, two = a.owner(1), a.owner(2)
        expect(a.lock(one.lock(fh, 0, 10)), m.NLM4_GRANTED, "owner 1's write lock")
        expect(a.lock(two.lock(fh, 5, 10)), m.NLM4_DENIED, "owner 2's overlapping write lock")
        expect(a.lock(two.lock(fh, 10, 10)), m.NLM4_GRANTED, "owner 2's adjacent write lock")
        expect(a.lock(one.lock(fh, 100, 10), exclusive=False), m.NLM4_GRANTED, "owner 1's read lock")
        expect(a.lock(two.lock(fh, 100, 10), exclusive=False), m.NLM4_GRANTED, "owner 2's read lock")
        r = expect(a.test(two.lock(fh, 105, 1)), m.NLM4_DENIED, "owner 2's write TEST over two read locks")
        assert r.holder == m.Holder(False, 1, one.oh, 100, 10), r
        with t.client(3) as b:
            expect(b.test(b.owner(9).lock(fh, 100, 10), exclusive=False), m.NLM4_GRANTED, "another host's read TEST")
            expect(b.lock(b.owner(9).lock(fh, 0, 0)), m.NLM4_DENIED, "another host's whole-file write lock")
        for o, rng in ((one, (0, 10)), (two, (10, 10)), (one, (100, 10)), (two, (100, 10))):
            expect(a.unlock(o.lock(fh, *rng)), m.NLM4_GRANTED, "UNLOCK")


# --------------------------------------------------------------------------------------------
# blocking locks: BLOCKED, then GRANTED / GRANTED_MSG; CANCEL
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_blocked_lock_is_granted_by_callback(t, fh, transport):
    """A blocking LOCK that conflicts is answered BLOCKED; when the holder unlocks, the
    server calls the waiting client host back (GRANTED, or GRANTED_MSG answered by a
    GRANTED_RES call) and the lock is then held."""
    hb = t.hosts[1]
    with t.client(0, transport) as a, t.client(1, transport) as b:
        la = a.owner(11).lock(fh, 0, 0)
        lb = b.owner(22).lock(fh, 0, 4096)
        expect(a.lock(la), m.NLM4_GRANTED, "A's LOCK")
        expect(b.lock(lb, block=True), m.NLM4_BLOCKED, "B's blocking LOCK")
        since = hb.mark()
        expect(a.unlock(la), m.NLM4_GRANTED, "A's UNLOCK")
        cb = granted_callback(hb, lb, since)
        assert cb.decoded.exclusive is True, cb
        if cb.proc == m.NLMPROC4_GRANTED_MSG:
            deadline = time.monotonic() + 5
            while cb.decoded.cookie not in [c for c, _ in hb.granted_res_sent]:
                assert time.monotonic() < deadline, f"no GRANTED_RES sent: {hb.errors}"
                time.sleep(0.02)
        r = expect(a.test(la), m.NLM4_DENIED, "A's TEST after B was granted")
        assert (r.holder.svid, r.holder.oh) == (22, lb.oh), r
        expect(a.lock(la), m.NLM4_DENIED, "A's LOCK while B holds")
        expect(b.unlock(lb), m.NLM4_GRANTED, "B's UNLOCK")
        expect(a.lock(la), m.NLM4_GRANTED, "A's LOCK after B's UNLOCK")
        expect(a.unlock(la), m.NLM4_GRANTED, "A's UNLOCK")


def test_cancel_of_a_blocked_lock(t, fh):
    """CANCEL withdraws a blocked request: no GRANTED comes when the holder unlocks, and a
    third host gets the range."""
    hb = t.hosts[1]
    with t.client(0) as a, t.client(1) as b, t.client(2) as c:
        la, lb, lc = a.owner(1).lock(fh, 0, 10), b.owner(2).lock(fh, 0, 10), c.owner(3).lock(fh, 0, 10)
        expect(a.lock(la), m.NLM4_GRANTED, "A's LOCK")
        expect(b.lock(lb, block=True), m.NLM4_BLOCKED, "B's blocking LOCK")
        expect(b.cancel(lb, block=True), m.NLM4_GRANTED, "B's CANCEL")
        since = hb.mark()
        expect(a.unlock(la), m.NLM4_GRANTED, "A's UNLOCK")
        time.sleep(2)
        late = [r for r in hb.calls("nlm")[since:] if r.proc in (m.NLMPROC4_GRANTED, m.NLMPROC4_GRANTED_MSG)]
        assert not late, f"a cancelled request was granted: {late}"
        expect(c.lock(lc), m.NLM4_GRANTED, "C's LOCK after the CANCEL")
        expect(b.lock(lb), m.NLM4_DENIED, "B's LOCK while C holds")
        expect(c.unlock(lc), m.NLM4_GRANTED, "C's UNLOCK")


# --------------------------------------------------------------------------------------------
# the _MSG procedures and their _RES calls back
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_msg_procedures_answer_with_res_calls(t, fh, transport):
    """TEST_MSG, LOCK_MSG, CANCEL_MSG and UNLOCK_MSG get no results in their replies: the
    server calls the client host back with TEST_RES, LOCK_RES, CANCEL_RES, UNLOCK_RES, each
    with the cookie of the call it answers; a blocked LOCK_MSG ends in a GRANTED_MSG."""
    ha, hb = t.hosts[4], t.hosts[5]
    with t.client(4, transport) as a, t.client(5, transport) as b:
        la = a.owner(41).lock(fh, 0, 100)
        lb = b.owner(52).lock(fh, 10, 10)
        since_a, since_b = ha.mark(), hb.mark()
        expect(res_call(ha, m.NLMPROC4_LOCK_RES, a.lock_msg(la), since_a), m.NLM4_GRANTED, "LOCK_RES to A")
        r = expect(res_call(hb, m.NLMPROC4_TEST_RES, b.test_msg(lb), since_b), m.NLM4_DENIED, "TEST_RES to B")
        assert r.holder == m.Holder(True, 41, la.oh, 0, 100), r
        expect(res_call(hb, m.NLMPROC4_LOCK_RES, b.lock_msg(lb), since_b), m.NLM4_DENIED, "LOCK_RES to B")
        expect(res_call(hb, m.NLMPROC4_LOCK_RES, b.lock_msg(lb, block=True), since_b), m.NLM4_BLOCKED,
               "LOCK_RES to B (blocking)")
        expect(res_call(hb, m.NLMPROC4_CANCEL_RES, b.cancel_msg(lb), since_b), m.NLM4_GRANTED, "CANCEL_RES to B")
        expect(res_call(hb, m.NLMPROC4_LOCK_RES, b.lock_msg(lb, block=True), since_b), m.NLM4_BLOCKED,
               "LOCK_RES to B (blocking again)")
        mark_b = hb.mark()
        expect(res_call(ha, m.NLMPROC4_UNLOCK_RES, a.unlock_msg(la), since_a), m.NLM4_GRANTED, "UNLOCK_RES to A")
        granted_callback(hb, lb, mark_b)
        r = expect(res_call(ha, m.NLMPROC4_TEST_RES, a.test_msg(la), since_a), m.NLM4_DENIED, "TEST_RES to A")
        assert (r.holder.svid, r.holder.oh) == (52, lb.oh), r
        expect(res_call(hb, m.NLMPROC4_UNLOCK_RES, b.unlock_msg(lb), since_b), m.NLM4_GRANTED, "UNLOCK_RES to B")
        expect(res_call(ha, m.NLMPROC4_TEST_RES, a.test_msg(la), since_a), m.NLM4_GRANTED, "TEST_RES to A")


# --------------------------------------------------------------------------------------------
# SHARE / UNSHARE, FREE_ALL
# --------------------------------------------------------------------------------------------

# Hosts 6 and 7 do the SHARE tests and are never sent FREE_ALL or SM_NOTIFY: nfs-ganesha 4.3
# crashes when a host that used SHARE is freed or notified (test_sm_notify_after_share below).
SHARE_HOSTS = (6, 7)
GANESHA_UNSHARE = ("nfs-ganesha 4.3: UNSHARE (with the SHARE's mode and access) answers GRANTED but the "
                   "deny mode stays in force (another host's SHARE for write is still DENIED seconds later); "
                   "and a DENIED SHARE leaves its access/deny counts on the owner's share state")


def share_or_skip(c: m.NlmClient, *args, **kw) -> m.NlmRes:
    try:
        return c.share(*args, **kw)
    except RpcError as e:
        if e.stat == PROC_UNAVAIL:
            pytest.skip("the target does not serve NLM SHARE (PROC_UNAVAIL)")
        raise


def test_share_conflicts(t, fh):
    """DOS-style shares: an access (R, W) is refused where another host denies it (DR, DW),
    and a deny is refused where another host has that access. Each attempt is a new owner."""
    i, j = SHARE_HOSTS
    with t.client(i) as a, t.client(j) as b:
        expect(share_or_skip(a, a.owner(1), fh, m.FSM_DW, m.FSA_R), m.NLM4_GRANTED, "A: read, deny write")
        expect(b.share(b.owner(2), fh, m.FSM_DN, m.FSA_W), m.NLM4_DENIED, "B: write while A denies write")
        r = expect(b.share(b.owner(3), fh, m.FSM_DN, m.FSA_R), m.NLM4_GRANTED, "B: read, deny none")
        assert r.sequence is not None
        expect(b.share(b.owner(4), fh, m.FSM_DR, m.FSA_R), m.NLM4_DENIED, "B: deny read while A reads")
        expect(b.share(b.owner(5), fh, m.FSM_DN, m.FSA_RW), m.NLM4_DENIED, "B: read-write while A denies write")
        expect(b.share(b.owner(6), fh, m.FSM_DW, m.FSA_R), m.NLM4_GRANTED, "B: read, deny write (no one writes)")


def test_unshare_lifts_the_share(t, fh):
    """UNSHARE (with the SHARE's mode and access) ends a share: its deny no longer refuses
    others, and the owner's exclusive SHARE is possible once all others are gone."""
    if t.name == "ganesha":
        pytest.skip(GANESHA_UNSHARE)
    i, j = SHARE_HOSTS
    with t.client(i) as a, t.client(j) as b:
        oa, ob = a.owner(11), b.owner(12)
        expect(share_or_skip(a, oa, fh, m.FSM_DW, m.FSA_R), m.NLM4_GRANTED, "A: read, deny write")
        expect(b.share(b.owner(13), fh, m.FSM_DN, m.FSA_W), m.NLM4_DENIED, "B: write while A denies write")
        expect(a.unshare(oa, fh, m.FSM_DW, m.FSA_R), m.NLM4_GRANTED, "A's UNSHARE")
        expect(b.share(ob, fh, m.FSM_DN, m.FSA_W), m.NLM4_GRANTED, "B: write after A's UNSHARE")
        expect(a.share(oa, fh, m.FSM_DRW, m.FSA_RW), m.NLM4_DENIED, "A: exclusive while B writes")
        expect(b.unshare(ob, fh, m.FSM_DN, m.FSA_W), m.NLM4_GRANTED, "B's UNSHARE")
        expect(a.share(oa, fh, m.FSM_DRW, m.FSA_RW), m.NLM4_GRANTED, "A: exclusive after all UNSHAREs")
        expect(a.unshare(oa, fh, m.FSM_DRW, m.FSA_RW), m.NLM4_GRANTED, "A's last UNSHARE")
        expect(a.unshare(oa, fh, m.FSM_DRW, m.FSA_RW), m.NLM4_GRANTED, "A's UNSHARE of nothing")


def test_free_all_drops_the_hosts_locks(t, fh):
    """FREE_ALL (what a client sends when it restarts without NSM) drops every lock of that
    client host."""
    with t.client(3, "udp") as a, t.client(2) as b:
        expect(a.lock(a.owner(1).lock(fh, 0, 10)), m.NLM4_GRANTED, "A's LOCK 1")
        expect(a.lock(a.owner(2).lock(fh, 10, 10)), m.NLM4_GRANTED, "A's LOCK 2")
        expect(b.lock(b.owner(9).lock(fh, 0, 20)), m.NLM4_DENIED, "B's LOCK")
        a.free_all(t.caller_name(3), 3)
        deadline = time.monotonic() + 5
        while (r := b.lock(b.owner(9).lock(fh, 0, 20))).stat != m.NLM4_GRANTED:
            assert time.monotonic() < deadline, f"A's locks survive its FREE_ALL: {r}"
            time.sleep(0.1)
        expect(b.unlock(b.owner(9).lock(fh, 0, 20)), m.NLM4_GRANTED, "B's UNLOCK")


# --------------------------------------------------------------------------------------------
# NSM: a client's reboot, the server's reboot and its grace period
# --------------------------------------------------------------------------------------------

def test_sm_notify_from_a_rebooted_client_releases_its_locks(t, fh):
    """A client host that restarts tells the server's NSM (SM_NOTIFY: its name, its new state);
    the server drops the locks that host held, so another host gets them."""
    with t.client(0, "udp") as a, t.client(1) as b:
        expect(a.lock(a.owner(1).lock(fh, 0, 10), state=3), m.NLM4_GRANTED, "A's LOCK 1")
        expect(a.lock(a.owner(2).lock(fh, 100, 10), state=3), m.NLM4_GRANTED, "A's LOCK 2")
        expect(b.lock(b.owner(7).lock(fh, 0, 200)), m.NLM4_DENIED, "B's LOCK while A holds")
        with t.nsm(0) as n:
            n.notify(t.caller_name(0), 5)
        deadline = time.monotonic() + 10
        while (r := b.lock(b.owner(7).lock(fh, 0, 200))).stat != m.NLM4_GRANTED:
            assert time.monotonic() < deadline, f"A's locks survive its SM_NOTIFY: {r}"
            time.sleep(0.1)
        expect(b.unlock(b.owner(7).lock(fh, 0, 200)), m.NLM4_GRANTED, "B's UNLOCK")
        # the restarted A locks again
        expect(a.lock(a.owner(1).lock(fh, 0, 10), state=5), m.NLM4_GRANTED, "A's LOCK after its restart")
        expect(a.unlock(a.owner(1).lock(fh, 0, 10)), m.NLM4_GRANTED, "A's UNLOCK")


def test_sm_notify_after_share(t, fh):
    """A host that had used SHARE restarts: the SM_NOTIFY drops its shares too, and the server
    keeps serving."""
    if t.name == "ganesha":
        pytest.skip("nfs-ganesha 4.3 segfaults (in pthread_mutex_lock, handling the SM_NOTIFY downcall "
                    "from statd; FREE_ALL likewise) for a host that used SHARE and UNSHARE")
    with t.client(5) as a, t.client(4) as b:
        oa = a.owner(1)
        expect(share_or_skip(a, oa, fh, m.FSM_DRW, m.FSA_RW), m.NLM4_GRANTED, "A's exclusive SHARE")
        expect(b.share(b.owner(2), fh, m.FSM_DN, m.FSA_R), m.NLM4_DENIED, "B's SHARE")
        with t.nsm(5) as n:
            n.notify(t.caller_name(5), 7)
        deadline = time.monotonic() + 10
        while (r := b.share(b.owner(2), fh, m.FSM_DN, m.FSA_R)).stat != m.NLM4_GRANTED:
            assert time.monotonic() < deadline, f"A's share survives its SM_NOTIFY: {r}"
            time.sleep(0.1)
        expect(b.unshare(b.owner(2), fh, m.FSM_DN, m.FSA_R), m.NLM4_GRANTED, "B's UNSHARE")


@pytest.fixture
def restarted(t):
    """Restarts the target in the test (`restart(grace)`), and afterwards once more with its
    usual grace period, so that later tests find it as before."""
    yield t.restart
    t.restart(t.normal_grace)
    if t.normal_grace:
        t.wait_out_grace(t.normal_grace + 15)


def test_server_restart_notifies_lock_holders(t, fh, restarted):
    """After a crash and restart the server's NSM state is new (and odd), and the server sends
    SM_NOTIFY to the client hosts that held locks, via their portmapper (port 111)."""
    ha = t.hosts[2]
    with t.nsm(2) as n:
        before = n.stat(t.caller_name(2)).state
    with t.client(2, "udp") as a:
        expect(a.lock(a.owner(1).lock(fh, 0, 10), state=1), m.NLM4_GRANTED, "A's LOCK")
    since = ha.mark()
    restarted(GRACE)
    note = ha.wait_for("nsm", m.SM_NOTIFY, GRACE + CALLBACK_WAIT, since=since)
    mon_name, state = note.decoded
    assert mon_name, note
    with t.nsm(2) as n:
        after = n.stat(t.caller_name(2)).state
    assert after % 2 == 1 and after > before, f"NSM state before {before}, after the restart {after}"
    assert state == after, f"SM_NOTIFY state {state}, SM_STAT state {after}"
    lookups = [r for r in ha.calls("portmap")[since:] if r.decoded and r.decoded[1] == m.PROG_NSM]
    assert lookups, f"the SM_NOTIFY came without a portmapper lookup: {ha.calls()[since:]}"


def test_grace_period_after_restart(t, fh, restarted):
    """After a restart the server is in its grace period: new locks (and TESTs) are refused
    with DENIED_GRACE_PERIOD while the old holders reclaim theirs (reclaim = true), and once
    the grace period is over new locks are granted again, the reclaimed ones still held."""
    with t.client(0) as a:
        la = a.owner(1).lock(fh, 0, 100)
        expect(a.lock(la, state=1), m.NLM4_GRANTED, "A's LOCK before the restart")
    restarted(GRACE)
    started = time.monotonic()
    with t.client(0) as a, t.client(1) as b:
        lb = b.owner(2).lock(fh, 50, 10)
        free = b.owner(3).lock(fh, 1000, 10)
        expect(b.lock(lb), m.NLM4_DENIED_GRACE_PERIOD, "B's new conflicting LOCK in grace")
        expect(b.lock(free), m.NLM4_DENIED_GRACE_PERIOD, "B's new LOCK of a free range in grace")
        expect(b.test(lb), m.NLM4_DENIED_GRACE_PERIOD, "B's TEST in grace")
        expect(a.lock(la, reclaim=True, state=3), m.NLM4_GRANTED, "A's reclaim in grace")
        expect(b.lock(lb, reclaim=True), m.NLM4_DENIED, "B's reclaim that conflicts with A's")
        while (r := b.lock(free)).stat == m.NLM4_DENIED_GRACE_PERIOD:
            assert time.monotonic() - started < GRACE + 10, f"grace of {GRACE}s does not end: {r}"
            time.sleep(0.2)
        expect(r, m.NLM4_GRANTED, "B's new LOCK after the grace period")
        expect(b.lock(lb), m.NLM4_DENIED, "B's LOCK of A's reclaimed range after the grace period")
        r = expect(b.test(lb), m.NLM4_DENIED, "B's TEST after the grace period")
        assert (r.holder.svid, r.holder.oh) == (1, la.oh), r
        expect(b.unlock(free), m.NLM4_GRANTED, "B's UNLOCK")
        expect(a.unlock(la), m.NLM4_GRANTED, "A's UNLOCK")


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------

def _lock_bytes(fh: bytes, *, caller=b"bad-input", oh=b"oh", cookie=b"ck") -> bytes:
    lock = Packer().string(caller).opaque(fh).opaque(oh).i32(1).u64(0).u64(1)
    return Packer().opaque(cookie).bool(False).bool(True).raw(lock.bytes()).bool(False).i32(1).bytes()


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_bad_input_is_refused_and_the_server_keeps_serving(t, fh, transport):
    """Truncated arguments, a netobj or name over its bound (1024 bytes), a length that runs
    past the message: GARBAGE_ARGS. An unknown procedure: PROC_UNAVAIL; an unknown version:
    PROG_MISMATCH naming version 4. Then the same connection still serves."""
    with t.client(3, transport) as c:
        good = _lock_bytes(fh)
        bad = {
            "truncated": good[:len(good) // 2],
            "empty": b"",
            "oh of 1025 bytes": _lock_bytes(fh, oh=b"o" * 1025),
            "cookie of 4096 bytes": _lock_bytes(fh, cookie=b"c" * 4096),
            "caller_name of 1025 bytes": _lock_bytes(fh, caller=b"n" * 1025),
            "netobj length past the end": Packer().u32(0x7FFFFFF0).raw(b"x" * 64).bytes(),
        }
        # nfs-ganesha over UDP decodes a datagram's missing tail as zeros (a truncated LOCK
        # gets a reply, STALE_FH): there only the bounds are checked
        lenient = ("truncated", "empty") if (t.name, transport) == ("ganesha", "udp") else ()
        for what, args in bad.items():
            if what in lenient:
                continue
            e = rpc_error(c.call, m.NLMPROC4_LOCK, args)
            assert e.stat == GARBAGE_ARGS, f"LOCK with {what}: {e}"
        for proc in (99, 0x7FFFFFFF):
            e = rpc_error(c.call, proc, good)
            assert e.stat == PROC_UNAVAIL, f"procedure {proc}: {e}"
        e = rpc_error(c.rpc.call, m.PROG_NLM, 9, m.NLMPROC4_NULL)
        assert e.stat == PROG_MISMATCH and e.detail[0] <= 4 <= e.detail[1], f"NLM version 9: {e}"
        c.null()
        lock = c.owner(5).lock(fh, 0, 1)
        expect(c.lock(lock), m.NLM4_GRANTED, "LOCK after the bad calls")
        expect(c.unlock(lock), m.NLM4_GRANTED, "UNLOCK after the bad calls")
    with t.nsm(3, transport) as n:
        e = rpc_error(n.call, m.SM_NOTIFY, struct.pack(">I", 0x7FFFFFF0))
        assert e.stat == GARBAGE_ARGS, f"SM_NOTIFY with a name past the end: {e}"
        e = rpc_error(n.call, 99)
        assert e.stat == PROC_UNAVAIL, f"NSM procedure 99: {e}"
        n.null()
