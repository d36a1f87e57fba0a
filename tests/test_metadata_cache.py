"""The metadata cache (`metadata_cache = true`) against changes made behind Braid's back: a
local process creates, grows, touches, re-attributes, renames and removes files in a share's
directory while a client watches through Braid. On file systems that report changes (tmpfs,
ext4) the client must see each change within a short bound; on FUSE (bindfs), where nothing is
reported, possibly stale answers are allowed only until `metadata_ttl` has passed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import smbclient as hl

import harness

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                                reason="starts braid with cached shares on several file systems")

TTL = 1.0
# Events arrive within milliseconds; this bounds a loaded machine.
EVENT_BOUND = 2.0
HIDDEN = 0x2


def _run(*cmd) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


class Fs:
    """A directory on one kind of file system, and how to undo it."""

    def __init__(self, kind: str, base: Path):
        self.kind = kind
        self.base = base
        self.dir: Path | None = None
        self.cleanup: list[list[str]] = []

    def close(self):
        for cmd in reversed(self.cleanup):
            subprocess.run(cmd, capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


def make_fs(kind: str) -> Fs:
    fs = Fs(kind, harness.tmp_dir(f"braid-mdcache-{kind}-"))
    if kind == "tmpfs":
        if not str(fs.base).startswith("/dev/shm"):
            fs.close()
            pytest.skip("no tmpfs at /dev/shm")
        fs.dir = fs.base / "share"
        fs.dir.mkdir()
    elif kind == "ext4":
        if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
            fs.close()
            pytest.skip("ext4 needs root and mkfs.ext4")
        img, mnt = fs.base / "fs.img", fs.base / "mnt"
        mnt.mkdir()
        with open(img, "wb") as f:
            f.truncate(64 << 20)
        if not _run("mkfs.ext4", "-q", "-F", str(img)) or not _run("mount", "-o", "loop", str(img), str(mnt)):
            fs.close()
            pytest.skip("cannot make or loop-mount an ext4 image here")
        fs.cleanup.append(["umount", "-l", str(mnt)])
        fs.dir = mnt / "share"
        fs.dir.mkdir()
    else:
        if not Path("/dev/fuse").exists() or not shutil.which("bindfs"):
            fs.close()
            pytest.skip("bindfs needs /dev/fuse and the bindfs package")
        raw, mnt = fs.base / "raw", fs.base / "mnt"
        raw.mkdir()
        mnt.mkdir()
        if not _run("bindfs", "--no-allow-other", str(raw), str(mnt)):
            fs.close()
            pytest.skip("bindfs cannot mount here")
        fs.cleanup.append(["fusermount", "-u", "-z", str(mnt)])
        fs.dir = mnt
    fs.dir.chmod(0o777)
    return fs


@pytest.fixture(scope="module", params=["tmpfs", "ext4", "bindfs"])
def cached(request):
    """(server, share directory, file system kind) with one cached share `c` there."""
    fs = make_fs(request.param)
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    root = harness.tmp_dir("braid-mdcache-srv-")
    lines = ["metadata_cache = true", f'metadata_ttl = "{int(TTL * 1000)}ms"']
    try:
        srv = harness.start_braid(root, users, share_specs=[{"name": "c", "lines": lines}])
    except Exception as e:
        fs.close()
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start braid: {e}", pytrace=False)
    # The share's directory is the file system under test: point the share there.
    harness.stop_braid(srv)
    cfg = (root / "braid.toml").read_text().replace(str(srv.shares["c"]), str(fs.dir))
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "braid.toml").write_text(cfg)
    srv = _serve(root, srv)
    cache = {}
    kw = dict(username=srv.user, password=srv.password, port=srv.port, connection_cache=cache, auth_protocol="ntlm")
    try:
        yield srv, fs, kw
    finally:
        hl.reset_connection_cache(connection_cache=cache)
        problem = harness.stop_braid(srv)
        fs.close()
        shutil.rmtree(root, ignore_errors=True)
        if problem:
            pytest.fail(f"braid crashed: {problem}", pytrace=False)


def _serve(root: Path, old):
    """Starts braid again with the config in `root` (same port and users as `old`)."""
    log = root / "braid.log"
    with open(log, "wb") as lf:
        proc = subprocess.Popen([str(harness.braid_bin()), "serve", "--config", str(root / "braid.toml")],
                                stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
    srv = harness.Server("braid", old.host, old.port, old.user, old.password, old.user2, old.password2,
                         {}, root, log, proc)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not harness.port_open(old.port):
        assert proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.05)
    return srv


def unc(srv, name=""):
    return srv.unc("c", name)


def settle(fs: Fs, check, what: str):
    """Waits for `check()` to hold: within EVENT_BOUND where changes are reported; on bindfs
    it may fail until the ttl has passed, and must hold right after it."""
    if fs.kind == "bindfs":
        time.sleep(TTL + 0.2)
        assert check(), f"{what}: still stale after metadata_ttl"
        return
    end = time.monotonic() + EVENT_BOUND
    while not check():
        assert time.monotonic() < end, f"{what}: not seen within {EVENT_BOUND}s"
        time.sleep(0.02)


def names(srv, kw):
    return sorted(hl.listdir(unc(srv), **kw))


def test_outside_changes_reach_clients(cached):
    srv, fs, kw = cached
    d = fs.dir
    (d / "a.txt").write_bytes(b"1")
    settle(fs, lambda: "a.txt" in names(srv, kw), "a file created outside")
    # Now cached: the listing, the name and its attributes.
    assert hl.stat(unc(srv, "a.txt"), **kw).st_size == 1
    assert not hl.path.exists(unc(srv, "b.txt"), **kw)
    # Grown.
    (d / "a.txt").write_bytes(b"12345")
    settle(fs, lambda: hl.stat(unc(srv, "a.txt"), **kw).st_size == 5, "size")
    settle(fs, lambda: [e.smb_info.end_of_file for e in hl.scandir(unc(srv), **kw) if e.name == "a.txt"] == [5], "listed size")
    # Touched.
    os.utime(d / "a.txt", (1_000_000_000, 1_000_000_000))
    settle(fs, lambda: int(hl.stat(unc(srv, "a.txt"), **kw).st_mtime) == 1_000_000_000, "last write time")
    # DOS attributes (kept in an xattr where the file system has user xattrs).
    try:
        os.setxattr(d / "a.txt", "user.braid.dosattrib", HIDDEN.to_bytes(4, "little"))
    except OSError:
        pass
    else:
        settle(fs, lambda: hl.stat(unc(srv, "a.txt"), **kw).st_file_attributes & HIDDEN != 0, "DOS attributes")
    # Mode: read-only for everyone shows as nothing a client sees here, but must not break a look.
    os.chmod(d / "a.txt", 0o444)
    settle(fs, lambda: hl.stat(unc(srv, "a.txt"), **kw).st_size == 5, "after chmod")
    os.chmod(d / "a.txt", 0o666)
    # Renamed: the old name goes, the new one (a name the cache knew was missing) comes.
    os.rename(d / "a.txt", d / "b.txt")
    settle(fs, lambda: not hl.path.exists(unc(srv, "a.txt"), **kw) and hl.path.exists(unc(srv, "b.txt"), **kw), "rename")
    settle(fs, lambda: names(srv, kw) == ["b.txt"], "listing after rename")
    # Removed.
    os.remove(d / "b.txt")
    settle(fs, lambda: not hl.path.exists(unc(srv, "b.txt"), **kw), "remove")
    settle(fs, lambda: names(srv, kw) == [], "listing after remove")


def test_outside_changes_in_a_subdirectory(cached):
    srv, fs, kw = cached
    hl.makedirs(unc(srv, "sub\\deeper"), exist_ok=True, **kw)
    with hl.open_file(unc(srv, "sub\\deeper\\f.txt"), mode="wb", **kw) as f:
        f.write(b"abc")
    assert hl.stat(unc(srv, "sub\\deeper\\f.txt"), **kw).st_size == 3
    assert hl.listdir(unc(srv, "sub\\deeper"), **kw) == ["f.txt"]
    # The whole subtree moves away outside: nothing cached beneath it may be served.
    os.rename(fs.dir / "sub", fs.dir / "moved")
    settle(fs, lambda: not hl.path.exists(unc(srv, "sub\\deeper\\f.txt"), **kw), "subtree renamed away")
    assert hl.stat(unc(srv, "moved\\deeper\\f.txt"), **kw).st_size == 3
    shutil.rmtree(fs.dir / "moved")
    settle(fs, lambda: not hl.path.exists(unc(srv, "moved"), **kw), "subtree removed")


def test_changes_through_braid_are_seen_at_once(cached):
    """The cache must never hide a change a client made through Braid, on any file system."""
    srv, fs, kw = cached
    p = unc(srv, "own.txt")
    with hl.open_file(p, mode="wb", **kw) as f:
        f.write(b"x" * 10)
    assert hl.stat(p, **kw).st_size == 10
    with hl.open_file(p, mode="ab", **kw) as f:
        f.write(b"y" * 5)
    assert hl.stat(p, **kw).st_size == 15
    hl.rename(p, unc(srv, "own2.txt"), **kw)
    assert not hl.path.exists(p, **kw)
    assert "own2.txt" in names(srv, kw)
    hl.remove(unc(srv, "own2.txt"), **kw)
    assert "own2.txt" not in names(srv, kw)


def test_cache_figures_in_metrics(cached):
    srv, fs, kw = cached
    for _ in range(3):
        names(srv, kw)
    port = srv.port + 10000 if srv.port + 10000 < 65536 else srv.port - 10000
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    except OSError:
        pytest.skip("no metrics endpoint")
    hits = [ln for ln in body.splitlines() if ln.startswith('braid_metadata_cache_hits_total{share="c"}')]
    assert hits, body
    assert int(hits[0].split()[-1]) > 0, body
