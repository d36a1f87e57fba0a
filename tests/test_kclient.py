"""The Linux kernel's own cifs client (Debian's 6.1 kernel in a QEMU guest,
interop/kclient/) against a server with its default settings.

A program in the guest (interop/kclient/dircache.c) keeps the share's root directory open,
reads it, changes one name per pass (unlink, rename into a subdirectory, create) and reads
it again after rewinddir, for 200 names. The 6.1 client caches the root's listing under a
directory lease and serves the second read from that cache, so it is right only if the
server's lease break reaches it before the answer to the change. Samba passes by granting
no directory lease; Braid grants one (directory_leases defaults to true) and must write
the break first.

The kernel's NFSv3 client mounts Braid with no port options, through Braid's portmapper.

The kernel's NFSv3 client takes fcntl and flock locks through Braid's NLM (the guest runs
rpcbind and rpc.statd, the mount has no nolock), and they meet an SMB client's byte-range
locks on the same file.
"""

from __future__ import annotations

import os
import random
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import harness

TARGET = os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower()
RUN = harness.REPO / "interop" / "kclient" / "run.sh"
NAMES = 200


@pytest.fixture(scope="module")
def default_server():
    """A server with one share `data` and nothing but defaults otherwise."""
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    root = harness.tmp_dir("braid-test-kclient-")
    if TARGET == "braid":
        srv = harness.start_braid(root, users, share_specs=[{"name": "data"}])
    else:
        srv = harness.start_samba(root, users)
    try:
        yield srv
    finally:
        problem = harness.stop_braid(srv) if TARGET == "braid" else harness.stop_samba(srv)
        if srv.log.exists() and TARGET == "braid":
            shutil.copyfile(srv.log, harness.log_dir() / "braid-kclient.log")
        shutil.rmtree(root, ignore_errors=True)
        assert not problem, problem


def kclient(srv, suite: str, run_dir: Path) -> tuple[int, dict[str, str], str]:
    """Runs the guest; returns its exit status, each step's result line and all output."""
    for tool in ("qemu-system-x86_64", "socat", "gcc"):
        assert shutil.which(tool), f"{tool} missing (scripts/install-deps.sh installs it)"
    env = dict(os.environ, KC_SUITE=suite, KC_NFILES=str(NAMES), KC_QUIET="1", KC_TIMEOUT="540",
               KC_RUNDIR=str(run_dir))
    p = subprocess.run([str(RUN), "smb", str(srv.port), "data", srv.user, srv.password], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    steps = {m.group(1): m.group(0) for m in re.finditer(r"^KCLIENT-RESULT step=(\S+) .*$", p.stdout, re.M)}
    return p.returncode, steps, p.stdout + p.stderr


@pytest.mark.time_limit(660)
def test_a_listing_kept_open_sees_each_change_at_once(default_server):
    run_dir = harness.log_dir() / f"kclient-dircache-{TARGET}"
    shutil.rmtree(run_dir, ignore_errors=True)
    rc, steps, out = kclient(default_server, "dircache", run_dir)
    for step in ("mount", "dircache_unlink", "dircache_rename-out", "dircache_create-in", "umount"):
        assert step in steps, f"no result for {step}:\n{out[-4000:]}"
        assert " ok=1" in steps[step], f"{steps[step]}\n{out[-4000:]}"
        if step.startswith("dircache_"):
            assert f"passes={NAMES} wrong=0 " in steps[step], steps[step]
    assert rc == 0, out[-4000:]
    if TARGET == "braid":
        log = default_server.log.read_text(errors="replace")
        assert "not written in time" not in log, "a break was written after its answer"


@pytest.mark.time_limit(660)
@pytest.mark.skipif(TARGET != "braid", reason="Braid's portmapper and NFS server")
def test_the_kernel_mounts_nfs_with_no_port_options():
    """The kernel's NFSv3 client mounts `SERVER:/data` with `vers=3,nolock,nconnect=8` and no
    port, mountport or mountproto: it asks Braid's portmapper (`nfs_portmapper = "serve"`, port
    111 forwarded into the guest) where MOUNT and NFS are, then writes, reads back, creates,
    renames and deletes files over 8 connections. (`nolock`: the guest has no rpcbind of its
    own for its lockd to register with.)"""
    import nfs_harness
    from test_portmap import port_111_holders

    holders = port_111_holders()
    if holders:
        pytest.skip(f"port 111 is in use (a system rpcbind?): {holders}")
    root = harness.tmp_dir("braid-test-kclient-nfs-")
    srv = nfs_harness.start(root, harness.test_users(), [{"name": "data", "lines": ["nfs = true", "nfs_root_squash = false"]}],
                            server_extra=['nfs_portmapper = "serve"'])
    run_dir = harness.log_dir() / "kclient-nfs-portmapper"
    shutil.rmtree(run_dir, ignore_errors=True)
    try:
        env = dict(os.environ, KC_NFS_OPTS="vers=3,nolock,nconnect=8", KC_FWD_EXTRA="111", KC_EXPECT_CONNS="8",
                   KC_QUIET="1", KC_SIZE_MB="8", KC_NFILES="20", KC_TIMEOUT="540", KC_RUNDIR=str(run_dir))
        p = subprocess.run([str(RUN), "nfs", str(srv.extra["nfs_port"]), "/data"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
        out = p.stdout + p.stderr
        mount = re.search(r"^KCLIENT-INFO mountline=.*$", out, re.M)
        assert mount and "mountproto=tcp" in mount.group(0) and "nconnect=8" in mount.group(0), out[-4000:]
        assert "KCLIENT-RESULT step=nconnect ok=1" in out, out[-4000:]
        assert p.returncode == 0 and "0 failed" in out, out[-4000:]
    finally:
        problem = nfs_harness.stop(srv, "braid-kclient-nfs")
        assert not problem, problem


LOCK_STEPS = (
    # the guest: rpcbind + rpc.statd up, the mount without nolock, lockd registered at fixed ports
    "nlm_userspace", "callback_snat", "egress_filter", "mount", "lk_lockd_registered", "lk_mount_locks",
    # fcntl: a write lock, F_GETLK, a second owner refused, other range free, unlock
    "lk_setlk_w", "lk_getlk_own", "lk_child_setlk_conflict", "lk_child_getlk",
    "lk_child_setlk_other_range", "lk_unlock", "lk_child_setlk_after_unlock", "lk_nsm_monitor",
    # read locks share; a write lock in their range is refused
    "lk_setlk_r", "lk_child_setlk_r", "lk_child_setlk_w_in_r", "lk_unlock_r",
    # F_SETLKW waits for the holder's unlock, then is granted (GRANTED callback or re-poll)
    "lk_setlk_w2", "lk_setlkw_blocks", "lk_unlock_for_setlkw", "lk_setlkw_granted",
    # flock: whole-file NLM locks (a whole-file lock also refuses another owner's fcntl lock)
    "lk_flock_ex", "lk_child_flock_conflict", "lk_child_fcntl_vs_flock", "lk_flock_un",
    "lk_child_flock_after_un", "lk_flock_sh", "lk_child_flock_sh", "lk_flock_un2",
    # the cross-protocol phase (KC_LOCK_HOLD), with this test's SMB client as the peer
    "hold_lock", "peer_setlk_denied", "peer_getlk_locked", "peer_setlkw_blocks",
    "peer_setlkw_granted", "hold_release", "umount",
)


@pytest.mark.time_limit(660)
@pytest.mark.skipif(TARGET != "braid", reason="Braid's NLM, portmapper and SMB locks")
def test_the_kernel_takes_nfs_locks_against_braid():
    """The kernel's NFSv3 client mounts `SERVER:/data` with `vers=3,nconnect=8`, no nolock and
    no port options, and takes fcntl (F_SETLK, F_SETLKW, F_GETLK) and flock locks through
    Braid's NLM v4 (`[server] nlm_port`, found through Braid's portmapper on port 111; the
    guest's lockd speaks NLM over TCP; Braid's NSM is on `nsm_port`). The guest runs rpcbind
    and rpc.statd (interop/kclient KC_SUITE=locks); its steps are listed in LOCK_STEPS.

    Then, across protocols (KC_LOCK_HOLD=1, this test as the guest's peer): while the guest
    holds an fcntl write lock on bytes 0-99 of `kclock-hold.bin`, an SMB client's lock on
    0-99 fails; after the SMB client locks 200-299 exclusively, the guest's F_SETLK there
    fails (EAGAIN/EACCES), F_GETLK reports the SMB lock, and F_SETLKW waits until the SMB
    unlock; after the guest's unlock the SMB client's lock on 0-99 succeeds.

    Callbacks (KC_NLM_CALLBACK): the guest's connections reach Braid from 127.78.X.Y, and
    that address's port 111 (tcp/udp) and the guest's fixed lockd and statd ports are
    forwarded into the guest, so Braid's GRANTED_MSG (a UDP portmapper query to the client's
    address, then the datagram) reaches it; KC_RESTRICT=off because libslirp drops every UDP
    datagram the guest sends under restrict=on, the guest rpcbind's answers included. A grant
    that no callback brings arrives anyway when the client asks again (every 30 s)."""
    import nfs_harness
    import nlm_harness
    from smbprotocol.exceptions import SMBResponseException
    from smbprotocol.open import CreateDisposition, LockFlags, SMB2LockElement
    from test_portmap import port_111_holders

    holders = port_111_holders()
    if holders:
        pytest.skip(f"port 111 is in use (a system rpcbind?): {holders}")
    nlm_port, nsm_port = nlm_harness.free_port_both(), nlm_harness.free_port_both()
    root = harness.tmp_dir("braid-test-kclient-nlm-")
    srv = nfs_harness.start(root, harness.test_users(),
                            [{"name": "data", "lines": ["nfs = true", "nfs_root_squash = false"]}],
                            server_extra=['nfs_portmapper = "serve"', f"nlm_port = {nlm_port}",
                                          f"nsm_port = {nsm_port}"])
    run_dir = harness.log_dir() / "kclient-nfs-locks"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    hold = "kclock-hold.bin"
    (srv.shares["data"] / hold).write_bytes(b"\0" * 512)
    (srv.shares["data"] / hold).chmod(0o666)
    raw = run_dir / "results.raw"
    peer: list[str] = []
    EXCL = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY

    def smb_lock(f, offset, flags):
        el = SMB2LockElement()
        el["offset"], el["length"], el["flags"] = offset, 100, flags
        try:
            f.lock([el])
            return 0
        except SMBResponseException as e:
            return e.status

    def wait_for(token, proc, secs=300):
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            text = raw.read_text(errors="replace") if raw.exists() else ""
            if token in text:
                return True
            if proc.poll() is not None or "KCLIENT-SUMMARY" in text:
                return False
            time.sleep(0.2)
        return False

    def send(word):
        with open(run_dir / "cmd.in", "w") as c:
            c.write(word + "\n")

    env = dict(os.environ, KC_SUITE="locks", KC_LOCK_HOLD="1", KC_LOCK_FILE=hold,
               KC_NFS_OPTS="vers=3,nconnect=8", KC_NLM_PORT=str(nlm_port),
               KC_NLM_CALLBACK=f"127.78.{random.randint(0, 255)}.{random.randint(2, 254)}", KC_RESTRICT="off",
               KC_QUIET="1", KC_TIMEOUT="540", KC_RUNDIR=str(run_dir))
    proc = subprocess.Popen([str(RUN), "nfs", str(srv.extra["nfs_port"]), "/data"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    smb, out, peer_error = None, "", None
    try:
        try:
            assert wait_for("KCLIENT-WAIT for=peer_locked", proc), "the guest never held its lock"
            smb = harness.Smb(srv)
            f = smb.open(hold, disposition=CreateDisposition.FILE_OPEN)
            st = smb_lock(f, 0, EXCL)
            peer.append(f"smb_lock_0_99_while_guest_holds status={st:#x}")
            assert st in (harness.St.LOCK_NOT_GRANTED, harness.St.FILE_LOCK_CONFLICT), peer
            st = smb_lock(f, 200, EXCL)
            peer.append(f"smb_lock_200_299 status={st:#x}")
            assert st == 0, peer
            send("peer_locked")
            assert wait_for("KCLIENT-WAIT for=peer_unlocked", proc), f"the guest did not block on 200-299: {peer}"
            time.sleep(2)
            assert smb_lock(f, 200, LockFlags.SMB2_LOCKFLAG_UNLOCK) == 0
            send("peer_unlocked")
            assert wait_for("KCLIENT-WAIT for=peer_done", proc), f"the guest did not release 0-99: {peer}"
            st = smb_lock(f, 0, EXCL)
            peer.append(f"smb_lock_0_99_after_guest_unlock status={st:#x}")
            assert st == 0, peer
            smb_lock(f, 0, LockFlags.SMB2_LOCKFLAG_UNLOCK)
            f.close()
            send("peer_done")
        except (AssertionError, OSError, SMBResponseException) as e:
            peer_error = e
            if proc.poll() is None and (run_dir / "cmd.in").exists():
                send("abort")
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            out += proc.communicate()[0] or ""
        if smb is not None:
            smb.close()
        problem = nfs_harness.stop(srv, "braid-kclient-nlm")
    tail = out[-6000:] + f"\nSMB peer: {peer}"
    assert peer_error is None, f"SMB peer: {peer_error!r}\n{tail}"
    steps = {m.group(1): m.group(0) for m in re.finditer(r"^KCLIENT-RESULT step=(\S+) .*$", out, re.M)}
    for step in LOCK_STEPS:
        assert step in steps, f"no result for {step}:\n{tail}"
        assert " ok=1" in steps[step], f"{steps[step]}\n{tail}"
    mount = re.search(r"^KCLIENT-INFO mountline=.*$", out, re.M)
    assert mount and "nconnect=8" in mount.group(0) and "nolock" not in mount.group(0), tail
    assert proc.returncode == 0 and "0 failed" in out, tail
    assert not problem, problem
