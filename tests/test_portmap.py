"""Port 111 (`[server] nfs_portmapper`): Debian's nfs-common tools and libnfs find braid's
NFS and MOUNT through a portmapper, as Linux `mount.nfs` does. In `serve` mode braid answers
portmapper v2 and rpcbind v3/v4 queries itself; in `register` and `auto` mode (with Debian's
rpcbind running) it registers with rpcbind and unregisters at stop.

Port 111 is privileged and machine-wide: the tests run as root and one at a time, each first
making sure nothing else holds port 111 (they skip, naming the holder, when something does),
and start and stop their own rpcbind (or use the machine's, when one runs already)."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

import harness
import nfs_harness
import nlm_harness

pytestmark = [
    pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                       reason="the portmapper is braid's own"),
    pytest.mark.skipif(os.geteuid() != 0, reason="port 111 is privileged"),
]

USERS = {"alice": "pw-alice-1", "bob": "pw-bob-1"}
SHARES = [{"name": "data", "lines": ["nfs = true", "nfs_root_squash = false"]}]


def tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
    if path is None:
        pytest.skip(f"{name} not installed (scripts/install-deps.sh)")
    return path


def port_111_holders() -> str:
    out = subprocess.run(["ss", "-Hlntup", "sport = :111"], capture_output=True, text=True).stdout
    return out.strip()


def port_111_free(wait: float = 5.0) -> bool:
    deadline = time.monotonic() + wait
    while port_111_holders():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def free_111():
    holders = port_111_holders()
    if holders:
        pytest.skip(f"port 111 is in use (a system rpcbind? stop it to run these tests): {holders}")
    yield
    assert port_111_free(), f"port 111 still held after the test: {port_111_holders()}"


@pytest.fixture
def rpcbind():
    """Debian's rpcbind in the foreground (-f), stopped after the test; the machine's own
    when one is running already (the package starts one where systemd runs)."""
    holders = port_111_holders()
    if holders:
        if "rpcbind" not in holders:
            pytest.skip(f"port 111 is held by something other than rpcbind: {holders}")
        yield None
        return
    exe = tool("rpcbind")
    proc = subprocess.Popen([exe, "-f", "-w"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while run(tool("rpcinfo"), "-p", "127.0.0.1").returncode != 0:
        assert proc.poll() is None, "rpcbind exited"
        assert time.monotonic() < deadline, "rpcbind did not answer within 10 s"
        time.sleep(0.1)
    yield proc
    proc.terminate()
    proc.wait(10)
    assert port_111_free(), f"port 111 still held after rpcbind stopped: {port_111_holders()}"


def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def programs(wait: float = 0) -> set[tuple[int, int, str, int]]:
    """rpcinfo -p 127.0.0.1: (program, version, proto, port) for each line."""
    r = run(tool("rpcinfo"), "-p", "127.0.0.1")
    assert r.returncode == 0, r.stdout + r.stderr
    out = set()
    for line in r.stdout.splitlines()[1:]:
        f = line.split()
        out.add((int(f[0]), int(f[1]), f[2], int(f[3])))
    return out


def udp_call(proc: int, args: bytes) -> tuple[int, bytes]:
    """A portmapper v2 call over UDP to 127.0.0.1:111: (accept_stat, results)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(struct.pack(">10I", 0x1234, 0, 2, 100000, 2, proc, 0, 0, 0, 0) + args, ("127.0.0.1", 111))
        reply = s.recv(65536)
    xid, mtype, stat, _flavor, _len, accept = struct.unpack(">6I", reply[:24])
    assert (xid, mtype, stat) == (0x1234, 1, 0), reply
    return accept, reply[24:]


def start(tmp_path: Path, mode: str):
    """braid with `nfs_portmapper = mode`, once port 111 names its NFS port (the NFS port
    opens first: port 111 is set up after it)."""
    nlm, nsm = nlm_harness.free_port_both(), nlm_harness.free_port_both()
    extra = [f'nfs_portmapper = "{mode}"', f"nlm_port = {nlm}", f"nsm_port = {nsm}"]
    srv = nfs_harness.start(tmp_path / "srv", USERS, SHARES, server_extra=extra)
    srv.extra["nlm_port"], srv.extra["nsm_port"] = nlm, nsm
    deadline = time.monotonic() + 10
    while True:
        r = run(tool("rpcinfo"), "-p", "127.0.0.1")
        if r.returncode == 0 and f" {srv.extra['nfs_port']} " in r.stdout:
            return srv
        if time.monotonic() > deadline:
            nfs_harness.stop(srv, f"portmap-{mode}-start")
            raise AssertionError(f"port 111 does not name braid's NFS port within 10 s: {r.stdout}{r.stderr}")
        time.sleep(0.05)


def check_clients_find_braid(srv):
    port = srv.extra["nfs_port"]
    got = programs()
    assert (100003, 3, "tcp", port) in got and (100005, 3, "tcp", port) in got, got
    assert not any(p in (100003, 100005) and proto == "udp" for p, _, proto, _ in got), "NFS and MOUNT: not over UDP"
    # The lock service, over both, at its own fixed ports.
    for proto in ("tcp", "udp"):
        assert (100021, 4, proto, srv.extra["nlm_port"]) in got, got
        assert (100024, 1, proto, srv.extra["nsm_port"]) in got, got
    # showmount asks for MOUNT v1's EXPORT (over TCP, then UDP).
    r = run(tool("showmount"), "-e", "127.0.0.1")
    assert r.returncode == 0 and "/data" in r.stdout, r.stdout + r.stderr
    # libnfs with no port in the URL asks the portmapper.
    r = nfs_harness.libnfs("nfs-ls", "nfs://127.0.0.1/data")
    assert r.returncode == 0, r.stdout + r.stderr
    assert b"hello.txt" in r.stdout, r.stdout


def test_serve_answers_rpcinfo_showmount_and_libnfs(free_111, tmp_path):
    srv = start(tmp_path, "serve")
    try:
        (srv.shares["data"] / "hello.txt").write_text("hi")
        check_clients_find_braid(srv)
        got = programs()
        assert {(100000, v, proto, 111) for v in (2, 3, 4) for proto in ("tcp", "udp")} <= got, got
        # rpcbind v3/v4 GETADDR over UDP and TCP (rpcinfo -T asks with rpcbind's own calls).
        for netid in ("tcp", "udp"):
            r = run(tool("rpcinfo"), "-T", netid, "127.0.0.1", "100000", "4")
            assert r.returncode == 0 and "ready and waiting" in r.stdout, r.stdout + r.stderr
        r = run(tool("rpcinfo"), "-T", "tcp", "127.0.0.1", "100003", "3")
        assert r.returncode == 0 and "ready and waiting" in r.stdout, r.stdout + r.stderr
        # Over UDP: GETPORT answers (NFS over TCP; MOUNT over UDP is not served), DUMP does
        # not (its reply would make port 111 a reflector).
        nfs_port = srv.extra["nfs_port"]
        assert udp_call(3, struct.pack(">4I", 100003, 3, 6, 0)) == (0, struct.pack(">I", nfs_port))
        assert udp_call(3, struct.pack(">4I", 100005, 3, 17, 0)) == (0, struct.pack(">I", 0))
        assert udp_call(4, b"") == (3, b""), "PROC_UNAVAIL"
        # Garbage on port 111 gets a clean close, and braid goes on answering.
        with socket.create_connection(("127.0.0.1", 111), timeout=5) as s:
            s.sendall(b"\xff\xff\xff\xff" + b"x" * 64)
            s.settimeout(5)
            assert s.recv(100) == b""
        assert (100003, 3, "tcp", srv.extra["nfs_port"]) in programs()
    finally:
        assert nfs_harness.stop(srv, "portmap-serve") is None
    assert port_111_free(), "braid's port 111 is closed at stop"


@pytest.mark.parametrize("mode", ["register", "auto"])
def test_register_with_rpcbind(rpcbind, tmp_path, mode):
    srv = start(tmp_path, mode)
    try:
        (srv.shares["data"] / "hello.txt").write_text("hi")
        check_clients_find_braid(srv)
        assert "registered with rpcbind" in srv.log.read_text(errors="replace")
    finally:
        assert nfs_harness.stop(srv, f"portmap-{mode}") is None
    got = programs()
    assert not any(p in (100003, 100005, 100021, 100024) for p, *_ in got), f"still registered after braid stopped: {got}"
    assert rpcbind is None or rpcbind.poll() is None


def test_auto_without_rpcbind_serves(free_111, tmp_path):
    srv = start(tmp_path, "auto")
    try:
        assert (100003, 3, "tcp", srv.extra["nfs_port"]) in programs()
    finally:
        assert nfs_harness.stop(srv, "portmap-auto-serve") is None
