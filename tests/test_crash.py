"""`kill -9` during writes loses nothing that was acknowledged as stable.

braid serves an ext4 loop image over SMB and NFS. Clients write 64 KiB chunks of known
bytes: SMB writes followed by a FLUSH every few chunks, SMB writes with WRITE_THROUGH, NFS
FILE_SYNC writes, and NFS UNSTABLE writes followed by a COMMIT. Each records how far the
server has acknowledged the data as stable. braid is killed with SIGKILL while they write,
started again on the same file system, and every file must hold, byte for byte, at least
what was acknowledged. The persistent state (the NFS handle key) survives too: handles from
before the kill still work.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import threading
import time

import pytest
from smbprotocol.open import CreateDisposition

import harness
import nfs_harness
import nfs_rpc

pytestmark = [
    pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                       reason="kills and restarts its own braid"),
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mkfs.ext4"), reason="mounts an ext4 loop image (root, e2fsprogs)"),
]

CHUNK = 64 * 1024
FLUSH_EVERY = 4
MAX_CHUNKS = 1200  # 75 MiB per file at most: the loop is bounded whatever the timing


def chunk(name: str, i: int) -> bytes:
    seed = sum(name.encode()) + i * 131
    return bytes((seed + j * 7) & 0xFF for j in range(256)) * (CHUNK // 256)


@pytest.fixture()
def ext4():
    root = harness.tmp_dir("braid-test-crash-")
    image, mnt = root / "ext4.img", root / "shares" / "data"
    mnt.mkdir(parents=True)
    with open(image, "wb") as f:
        f.truncate(512 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    mnt.chmod(0o777)
    try:
        yield root, mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        shutil.rmtree(root, ignore_errors=True)


class Progress:
    """How far each file's data has been acknowledged as stable."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stable: dict[str, int] = {}

    def set(self, name: str, chunks: int):
        with self.lock:
            self.stable[name] = chunks


def smb_writer(srv, name: str, progress: Progress, through: bool, stop: threading.Event):
    try:
        with harness.Smb(srv) as smb:
            f = smb.open(name, disposition=CreateDisposition.FILE_OVERWRITE_IF)
            for i in range(MAX_CHUNKS):
                if stop.is_set():
                    return
                f.write(chunk(name, i), i * CHUNK, write_through=through)
                if through:
                    progress.set(name, i + 1)
                elif (i + 1) % FLUSH_EVERY == 0:
                    f.flush()
                    progress.set(name, i + 1)
    except Exception:
        return  # the server was killed


def nfs_writer(srv, name: str, progress: Progress, stable: int, stop: threading.Event):
    try:
        c = nfs_harness.client(srv)
        root = c.root("/data")
        fh = c.create(root, name).fh
        for i in range(MAX_CHUNKS):
            if stop.is_set():
                return
            r = c.write(fh, i * CHUNK, chunk(name, i), stable=stable)
            if not r.ok:
                return
            if stable == nfs_rpc.FILE_SYNC:
                progress.set(name, i + 1)
            elif (i + 1) % FLUSH_EVERY == 0:
                if not c.commit(fh, 0, 0).ok:
                    return
                progress.set(name, i + 1)
    except Exception:
        return


def start_again(srv):
    cfg = srv.root / "braid.toml"
    with open(srv.log, "ab") as lf:
        srv.proc = subprocess.Popen([str(harness.braid_bin()), "serve", "--config", str(cfg)], stdin=subprocess.DEVNULL,
                                    stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
    for port in (srv.port, srv.extra["nfs_port"]):
        nfs_harness.wait_port(srv, port)


def test_kill_9_loses_nothing_acknowledged(ext4):
    root, mnt = ext4
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    srv = nfs_harness.start(root, users, [{"name": "data", "lines": ["nfs = true", "nfs_all_squash = true"]}])
    try:
        progress, stop = Progress(), threading.Event()
        jobs = [(smb_writer, "smb-flush.bin", False), (smb_writer, "smb-through.bin", True),
                (nfs_writer, "nfs-sync.bin", nfs_rpc.FILE_SYNC), (nfs_writer, "nfs-commit.bin", nfs_rpc.UNSTABLE)]
        threads = [threading.Thread(target=fn, args=(srv, name, progress, how, stop), daemon=True) for fn, name, how in jobs]
        for t in threads:
            t.start()
        # Kill once every writer has something acknowledged, writes still in flight.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len([n for n in progress.stable.values() if n >= FLUSH_EVERY]) < len(jobs):
            time.sleep(0.05)
        time.sleep(0.1)
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(10)
        with progress.lock:
            acked = dict(progress.stable)
        stop.set()
        for t in threads:
            t.join(20)
        assert len(acked) == len(jobs) and all(n >= FLUSH_EVERY for n in acked.values()), acked
        assert all(n < MAX_CHUNKS for n in acked.values()), f"a writer had finished before the kill: {acked}"
        start_again(srv)
        for name, n in acked.items():
            data = (mnt / name).read_bytes()
            assert len(data) >= n * CHUNK, f"{name}: {len(data)} bytes, {n * CHUNK} acknowledged"
            for i in range(n):
                assert data[i * CHUNK:(i + 1) * CHUNK] == chunk(name, i), f"{name}: chunk {i} of {n} acknowledged differs"
            # And through the restarted server.
            with harness.Smb(srv) as smb:
                f = smb.open(name, disposition=CreateDisposition.FILE_OPEN)
                assert f.read(0, CHUNK) == chunk(name, 0)
                f.close()
    finally:
        if srv.proc.poll() is None:
            harness.stop_braid(srv)
