"""Reloading a running braid's configuration (SIGHUP and `braid reload --config`): shares,
users, limits and NFS exports added, changed and removed while clients stay connected; a
broken file is refused with its line and changes nothing."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import harness
import nfs_harness
from harness import St, Smb

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid") != "braid", reason="braid only")

USERS = {"alice": "A-" + secrets.token_urlsafe(10), "bob": "B-" + secrets.token_urlsafe(10)}


def specs_with_paths(srv: harness.Server, specs: list[dict]) -> list[dict]:
    """Share specs with their directories (made under the server's root when new)."""
    out = []
    for sh in specs:
        if sh.get("backend") == "memory":
            out.append(sh)
            continue
        p = srv.shares.get(sh["name"]) or srv.root / "shares" / sh["name"]
        p.mkdir(parents=True, exist_ok=True)
        p.chmod(0o777)
        srv.shares[sh["name"]] = p
        out.append(dict(sh, path=str(p)))
    return out


def rewrite(srv: harness.Server, users: dict[str, str], specs: list[dict], extra=()):
    """Writes a new config for the running server (same port and [server] settings)."""
    (srv.root / "braid.toml").write_text(harness.braid_config(srv.port, users, specs_with_paths(srv, specs), extra))


def reload_cli(srv: harness.Server, *args: str) -> subprocess.CompletedProcess:
    cfg = srv.root / "braid.toml"
    return subprocess.run([str(harness.braid_bin()), "reload", "--config", str(cfg), *args],
                          capture_output=True, text=True, timeout=30)


def wait_log(srv: harness.Server, needle: str, count: int = 1, wait: float = 10.0):
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if srv.log.read_text(errors="replace").count(needle) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not logged {count} time(s); log:\n{srv.log.read_text(errors='replace')[-3000:]}")


def status_of(fn) -> int:
    """The NTSTATUS an smbprotocol call fails with (0 if it succeeds)."""
    from smbprotocol.exceptions import SMBResponseException
    try:
        fn()
        return 0
    except SMBResponseException as e:
        return e.status


@pytest.fixture
def server():
    root = harness.tmp_dir("braid-reload-")
    specs = [{"name": "data"}, {"name": "old"}]
    srv = harness.start_braid(root, USERS, share_specs=specs)
    srv.extra["specs"] = specs
    try:
        yield srv
    finally:
        problem = harness.stop_braid(srv)
        shutil.copyfile(srv.log, harness.log_dir() / f"reload-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
        shutil.rmtree(root, ignore_errors=True)
        assert problem is None, problem


def test_reload_adds_and_removes_shares_and_users_without_dropping_sessions(server, tmp_path):
    srv = server
    conf = harness.client_conf(tmp_path)
    keep = Smb(srv, "data")                         # alice on a share that stays
    gone_share = Smb(srv, "old")                    # alice on a share that goes
    # Unsigned: the answer to a request of an ended session cannot be signed (no key is
    # left), which smbprotocol would take for a forgery.
    gone_user = Smb(srv, "data", user="bob", password=USERS["bob"], require_signing=False)
    try:
        f = keep.open("kept.bin")
        f.write(b"before", 0)
        g = gone_share.open("x.bin")
        h = gone_user.open("y.bin")
        rewrite(srv, {"alice": USERS["alice"]}, [{"name": "data"}, {"name": "new"}])
        r = reload_cli(srv)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "shares added: new" in r.stdout and "shares removed: old" in r.stdout, r.stdout
        assert "users removed: bob" in r.stdout and "1 session(s) of removed users ended" in r.stdout, r.stdout
        # The session on the kept share goes on, its open file too.
        f.write(b"after!", 6)
        assert f.read(0, 12) == b"beforeafter!"
        # The removed share's tree and the removed user's session are gone.
        assert status_of(lambda: g.read(0, 1)) == St.NETWORK_NAME_DELETED
        assert status_of(lambda: h.read(0, 1)) == St.USER_SESSION_DELETED
        # The new share serves; the old one and the removed user are refused.
        assert harness.smbclient(srv, conf, "new", "ls").ok
        old = harness.smbclient(srv, conf, "old", "ls")
        assert "NT_STATUS_BAD_NETWORK_NAME" in old.out, old.out
        bob = harness.smbclient(srv, conf, "data", "ls", user="bob", password=USERS["bob"])
        assert "NT_STATUS_LOGON_FAILURE" in bob.out, bob.out
        f.close()
    finally:
        for s in (keep, gone_share, gone_user):
            s.close()
    assert (srv.shares["data"] / "kept.bin").read_bytes() == b"beforeafter!"


def test_sighup_reloads_users_and_shares(server, tmp_path):
    srv = server
    conf = harness.client_conf(tmp_path)
    carol = "C-" + secrets.token_urlsafe(10)
    s = Smb(srv, "data")
    narrowed = Smb(srv, "old")
    kept = Smb(srv, "old", user="bob", password=USERS["bob"])
    try:
        g, k = narrowed.open("n.txt"), kept.open("k.txt")
        specs = [{"name": "data"}, {"name": "old", "users": ["bob"]}, {"name": "mem", "backend": "memory"}]
        rewrite(srv, dict(USERS, carol=carol), specs)
        srv.proc.send_signal(signal.SIGHUP)
        wait_log(srv, "reloaded")
        log = srv.log.read_text()
        assert "users added: carol" in log and "shares changed: old" in log, log[-2000:]
        # A share that no longer admits a user disconnects that user's tree only.
        assert status_of(lambda: g.read(0, 1)) == St.NETWORK_NAME_DELETED
        k.write(b"bob", 0)
        k.close()
        r = harness.smbclient(srv, conf, "mem", "ls", user="carol", password=carol)
        assert r.ok, r.out
        # A changed password takes effect for new sessions; the running one stays.
        rewrite(srv, {"alice": "new-" + USERS["alice"], "bob": USERS["bob"]}, srv.extra["specs"])
        srv.proc.send_signal(signal.SIGHUP)
        wait_log(srv, "reloaded", 2)
        assert "passwords changed: alice" in srv.log.read_text()
        assert "NT_STATUS_LOGON_FAILURE" in harness.smbclient(srv, conf, "data", "ls").out
        assert harness.smbclient(srv, conf, "data", "ls", password="new-" + USERS["alice"]).ok
        f = s.open("still.txt")
        f.write(b"ok", 0)
        f.close()
    finally:
        for x in (s, narrowed, kept):
            x.close()


def test_a_broken_file_is_refused_and_changes_nothing(server, tmp_path):
    srv = server
    conf = harness.client_conf(tmp_path)
    cfg = srv.root / "braid.toml"
    good = cfg.read_text()
    s = Smb(srv, "old")
    try:
        # Line 3 is broken; the share list would also change if it were read.
        lines = good.splitlines()
        lines.insert(2, "max_io_size = \"lots\"")
        cfg.write_text("\n".join(lines).replace('name = "old"', 'name = "renamed"') + "\n")
        r = reload_cli(srv)
        assert r.returncode != 0
        assert re.search(r"braid\.toml:3: .*max_io_size", r.stderr), r.stderr
        # The server itself refuses its broken file, with the same line (asked with a
        # valid copy, so the client-side check passes; and by SIGHUP).
        copy = tmp_path / "copy.toml"
        copy.write_text(good)
        admin = re.search(r"admin endpoint listening addr=(\S+)", srv.log.read_text()).group(1)
        r = subprocess.run([str(harness.braid_bin()), "reload", "--config", str(copy), "--admin", admin],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "refused the reload" in r.stderr and re.search(r"braid\.toml:3: .*max_io_size", r.stderr), r.stderr
        srv.proc.send_signal(signal.SIGHUP)
        wait_log(srv, "reload refused", 2)
        # Nothing changed: the old share still serves, the running tree too.
        assert harness.smbclient(srv, conf, "old", "ls").ok
        assert "NT_STATUS_BAD_NETWORK_NAME" in harness.smbclient(srv, conf, "renamed", "ls").out
        f = s.open("a.txt")
        f.write(b"x", 0)
        f.close()
    finally:
        s.close()
        cfg.write_text(good)


def test_settings_that_need_a_restart_are_named(server):
    srv = server
    rewrite(srv, USERS, srv.extra["specs"], extra=['server_name = "OTHERNAME"'])
    r = reload_cli(srv)
    assert r.returncode == 0, r.stderr
    assert "needs a restart (ignored for now): server_name" in r.stdout, r.stdout


def io_loop(s: Smb, stop: threading.Event, counts: list, errors: list):
    """4 KiB reads as fast as one client goes; counts[i] is the number done by time i*0.1 s."""
    f = s.open("load.bin")
    f.write(b"\0" * 65536, 0)
    start = time.monotonic()
    n = 0
    try:
        while not stop.is_set():
            f.read((n % 16) * 4096, 4096)
            n += 1
            while len(counts) <= (time.monotonic() - start) * 10:
                counts.append(n)
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def test_io_goes_on_through_reloads(server, tmp_path):
    """A client reading in a loop sees no error and no pause while shares come and go."""
    srv = server
    conf = harness.client_conf(tmp_path)
    s = Smb(srv, "data")
    stop, counts, errors = threading.Event(), [], []
    t = threading.Thread(target=io_loop, args=(s, stop, counts, errors), daemon=True)
    try:
        t.start()
        time.sleep(0.5)
        for i in range(4):
            specs = [{"name": "data"}, {"name": f"extra{i}"}]
            rewrite(srv, USERS, specs)
            if i % 2:
                srv.proc.send_signal(signal.SIGHUP)
                wait_log(srv, f"shares added: extra{i}")
            else:
                r = reload_cli(srv)
                assert r.returncode == 0 and f"shares added: extra{i}" in r.stdout, r.stdout + r.stderr
            assert harness.smbclient(srv, conf, f"extra{i}", "ls").ok
            time.sleep(0.5)
        stop.set()
        t.join(10)
        assert not errors, errors
        # Reads went on in every second (none stalled on a reload).
        steps = [b - a for a, b in zip(counts[5:], counts[15:])]
        assert steps and min(steps) > 0, counts
    finally:
        stop.set()
        s.close()


# Uses the `iops` share key (issue 22); skipped only while `braid check` rejects it.
def test_a_new_limit_applies_within_a_second_while_io_runs(server, tmp_path):
    srv = server
    probe = tmp_path / "probe.toml"
    probe.write_text(harness.braid_config(srv.port, USERS, specs_with_paths(srv, [{"name": "data", "lines": ["iops = 50"]}])))
    chk = subprocess.run([str(harness.braid_bin()), "check", "--config", str(probe)], capture_output=True, text=True)
    if chk.returncode != 0 and "iops" in chk.stderr:
        pytest.skip(f"the iops key is not parsed yet: {chk.stderr.strip()}")
    assert chk.returncode == 0, chk.stderr
    s = Smb(srv, "data")
    stop, counts, errors = threading.Event(), [], []
    t = threading.Thread(target=io_loop, args=(s, stop, counts, errors), daemon=True)
    try:
        t.start()
        time.sleep(2)
        before = counts[-1] - counts[-11]
        rewrite(srv, USERS, [{"name": "data", "lines": ["iops = 50"]}, {"name": "old"}, {"name": "added"}])
        changed_at = len(counts)
        r = reload_cli(srv)
        assert r.returncode == 0 and "limits changed: data" in r.stdout, r.stdout + r.stderr
        # A share added under load serves at once.
        assert harness.smbclient(srv, harness.client_conf(tmp_path), "added", "ls").ok
        time.sleep(4)
        stop.set()
        t.join(10)
        assert not errors, errors
        # From one second after the reload on: the limit (reads and the rest count 1 each).
        after = (counts[-1] - counts[changed_at + 10]) / ((len(counts) - 1 - changed_at - 10) / 10)
        assert before > 200, f"the unlimited rate should be well above the limit: {before}/s"
        assert after <= 50 * 1.2, f"{after:.0f} IOPS after the reload, limit 50"
    finally:
        stop.set()
        s.close()


def test_nfs_exports_follow_a_reload(tmp_path):
    root = harness.tmp_dir("braid-reload-nfs-")
    nfs = ["nfs = true", "nfs_root_squash = false"]
    specs = [{"name": "keep", "lines": nfs}, {"name": "drop", "lines": nfs}, {"name": "later"}]
    srv = nfs_harness.start(root, USERS, specs)
    try:
        c = nfs_harness.client(srv)
        names = lambda: sorted(e[0] for e in c.export())  # noqa: E731
        assert names() == [b"/drop", b"/keep"]
        keep, drop = c.root("/keep"), c.root("/drop")
        made = c.create(keep, "f.txt")
        assert made.ok, made
        extra = [f'nfs_listen = ["{harness.LOCALHOST}:{srv.extra["nfs_port"]}"]',
                 f"state_dir = {harness._toml_str(str(srv.extra['state_dir']))}"]
        rewrite(srv, USERS, [{"name": "keep", "lines": nfs}, {"name": "drop"}, {"name": "later", "lines": nfs}], extra)
        r = reload_cli(srv)
        assert r.returncode == 0, r.stderr
        assert "NFS exports added: later" in r.stdout and "NFS exports removed: drop" in r.stdout, r.stdout
        assert names() == [b"/keep", b"/later"]
        # Handles of a kept export stay valid; a removed export's do not.
        assert c.getattr(made.fh).ok
        assert c.lookup(keep, "f.txt").ok
        assert not c.getattr(drop).ok
        later = c.root("/later")
        assert c.create(later, "g.txt").ok
        assert (srv.shares["later"] / "g.txt").exists()
        c.close()
    finally:
        problem = nfs_harness.stop(srv, "reload-nfs")
        assert problem is None, problem
