"""nconnect: one NFS client with eight TCP connections (as Linux mounts with `nconnect=8`),
written with tests/nfs_rpc.py, an independent raw client. Writes go round-robin over the
connections; one connection is killed with a WRITE in flight and that call is sent again, with
the same xid, on another connection (what a client does after a reconnect). Nothing may be
lost or applied twice, and `braid status` must show the client with its connections."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess

import pytest

import harness
import nfs_harness
import nfs_rpc as n

pytestmark = [
    pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                       reason="NFS is braid's own"),
    pytest.mark.skipif(os.geteuid() != 0, reason="NFS credentials (setfsuid) need root"),
]

CONNECTIONS = 8
CHUNK = 64 * 1024
CHUNKS = 96  # 6 MiB


@pytest.fixture(scope="module")
def srv():
    root = harness.tmp_dir("braid-nconnect-")
    shares = [{"name": "data", "lines": ["nfs = true", "nfs_root_squash = false"]}]
    try:
        users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
        s = nfs_harness.start(root, users, shares)
    except Exception as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start braid with NFS: {e}", pytrace=False)
    try:
        yield s
    finally:
        problem = nfs_harness.stop(s, "braid-nconnect")
        assert problem is None, problem


def status_json(srv) -> dict:
    r = subprocess.run([str(harness.braid_bin()), "status", "--config", str(srv.root / "braid.toml"), "--json"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def chunk(i: int) -> bytes:
    return hashlib.sha256(i.to_bytes(4, "big")).digest() * (CHUNK // 32)


def kill(conn: n.Nfs3):
    """Closes the connection with a reset (SO_LINGER 0), as a dead link or a crashed client
    side looks to the server."""
    s = conn.rpc.sock
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def retransmit(conn: n.Nfs3, proc: int, args: bytes, xid: int) -> n.Unpacker:
    """Sends call `xid` again until answered. A duplicate of a call still running is dropped
    (the running one's reply answers it, here on a dead connection), so the client, hearing
    nothing, sends it again, as real clients do after their timeout."""
    for _ in range(5):
        conn.rpc.send_call(n.PROG_NFS, 3, proc, args, xid=xid)
        try:
            return conn.rpc.wait_reply(xid, timeout=1.0)
        except TimeoutError:
            continue
    raise AssertionError(f"call {xid:#x} was never answered")


def test_eight_connections_a_killed_one_and_a_retransmission_lose_nothing(srv):
    conns = [nfs_harness.client(srv) for _ in range(CONNECTIONS)]
    try:
        root = conns[0].root("/data")
        made = conns[0].create(root, "nconnect.bin", n.GUARDED)
        assert made.ok, made
        fh = made.fh
        peers = [p for p in status_json(srv).get("peers", []) if p["client"] == harness.LOCALHOST]
        assert peers and peers[0]["protocol"] == "nfs" and peers[0]["connections"] >= CONNECTIONS, peers
        victim = 3
        for i in range(CHUNKS):
            c = conns[i % CONNECTIONS]
            if i == 40:
                # A WRITE in flight when its connection dies: sent, never answered here.
                args = n.Packer().opaque(fh).u64(i * CHUNK).u32(CHUNK).u32(n.UNSTABLE).opaque(chunk(i)).bytes()
                xid = n.next_xid()
                conns[victim].rpc.send_call(n.PROG_NFS, 3, n.WRITE, args, xid=xid)
                kill(conns[victim])
                conns[victim] = nfs_harness.client(srv)
                # The client sends it again on another connection, same xid.
                again = retransmit(conns[(victim + 1) % CONNECTIONS], n.WRITE, args, xid)
                assert again.u32() == n.NFS3_OK
                continue
            w = c.write(fh, i * CHUNK, chunk(i), stable=n.UNSTABLE)
            assert w.ok and w.count == CHUNK, w
        assert conns[0].commit(fh).ok
        attrs = conns[5].getattr(fh)
        assert attrs.ok and attrs.attr.size == CHUNKS * CHUNK, attrs
        got = conns[6].read_all(fh, chunk=CHUNK)
        assert got == b"".join(chunk(i) for i in range(CHUNKS)), "data lost or misplaced"
        # The killed connection is gone from the status; the new one counts.
        peers = [p for p in status_json(srv)["peers"] if p["client"] == harness.LOCALHOST]
        assert peers[0]["connections"] == CONNECTIONS, peers
        assert peers[0]["calls"] >= CHUNKS and peers[0]["bytes_in"] >= CHUNKS * CHUNK, peers
    finally:
        for c in conns:
            try:
                c.close()
            except OSError:
                pass


def test_a_retransmitted_create_on_another_connection_is_not_applied_twice(srv):
    a, b = nfs_harness.client(srv), nfs_harness.client(srv)
    try:
        root = a.root("/data")
        args = a.create_args(root, "once.txt", n.EXCLUSIVE, verf=b"nconnect")
        xid = n.next_xid()
        first = a._created(a.nfs(n.CREATE, args, xid=xid))
        assert first.ok, first
        # The client's connection dies before the reply is read; it asks again elsewhere.
        dup = b._created(b.nfs(n.CREATE, args, xid=xid))
        assert dup.ok and dup.fh == first.fh, dup
        # A REMOVE in flight on a killed connection, sent again: NFS3_OK (not NOENT).
        rm = n.Packer().opaque(root).string("once.txt").bytes()
        xid = n.next_xid()
        a.rpc.send_call(n.PROG_NFS, 3, n.REMOVE, rm, xid=xid)
        kill(a)
        reply = retransmit(b, n.REMOVE, rm, xid)
        assert reply.u32() == n.NFS3_OK, "the REMOVE was applied again (NOENT) instead of answered from the cache"
        assert b.lookup(root, "once.txt").status == n.NFS3ERR_NOENT
    finally:
        b.close()
