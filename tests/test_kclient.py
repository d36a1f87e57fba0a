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
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
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
