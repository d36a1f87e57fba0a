"""Hostile connections do not shut honest clients out.

A host opens connections to the SMB port and then sends nothing, sends a transport header
and then a byte now and then (SMBLoris), or sends a NEGOTIATE and then nothing. Meanwhile an
honest client from another loopback address logs on, lists a share and must do so within a
second. The attacker's connections are refused beyond the per-client limit, the oldest
not-logged-on ones are closed to make room, and the rest are closed at the logon and frame
timeouts. Every limit hit is counted in /metrics and logged once per client per minute.
NFS gets the same per-client connection limit and record timeout.

The attackers use 127.0.0.2 and up as their source addresses; the honest client 127.0.0.1.
Every loop is bounded in count and time.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import struct
import time
import urllib.request

import pytest

import harness
import nfs_harness
from test_security import frame, hdr, negotiate_body

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                                reason="Braid's connection limits and their metrics")

PER_CLIENT = 40
UNAUTH = 60
LOGON_TIMEOUT = 2.0
FRAME_TIMEOUT = 2.0
NFS_PER_CLIENT = 8


@pytest.fixture(scope="module")
def server():
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    root = harness.tmp_dir("braid-test-admission-")
    extra = [f"max_connections_per_client = {PER_CLIENT}", f"max_unauthenticated = {UNAUTH}",
             f'logon_timeout = "{LOGON_TIMEOUT}s"', f'frame_timeout = "{FRAME_TIMEOUT}s"',
             f"nfs_max_connections_per_client = {NFS_PER_CLIENT}"]
    srv = nfs_harness.start(root, users, [{"name": "data", "lines": ["nfs = true"]}], server_extra=extra)
    try:
        yield srv
    finally:
        problem = harness.stop_braid(srv)
        shutil.rmtree(root, ignore_errors=True)
        assert not problem, problem


def attacker(srv, source: str, port: int | None = None) -> socket.socket | None:
    """A TCP connection from `source`, or None if the connect itself failed."""
    s = socket.socket()
    s.settimeout(5)
    try:
        s.bind((source, 0))
        s.connect((harness.LOCALHOST, port or srv.port))
    except OSError:
        s.close()
        return None
    return s


def closed(s: socket.socket, within: float) -> bool:
    """Whether the server closed `s` within `within` seconds (EOF or reset)."""
    s.settimeout(within)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (socket.timeout, TimeoutError):
        return False


def honest_logon_seconds(srv) -> float:
    """Time for a full logon, tree connect and listing of the share (smbprotocol)."""
    t0 = time.monotonic()
    with harness.Smb(srv) as smb:
        f = smb.open("", directory=True)
        f.query_directory("*", 1)
        f.close()
    return time.monotonic() - t0


def metrics(srv) -> dict[str, float]:
    port = srv.port + 10000 if srv.port + 10000 < 65536 else srv.port - 10000
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(braid_\S+) (\S+)$", text, re.M)}


def hits(srv, limit: str, protocol: str = "smb") -> float:
    return metrics(srv).get(f'braid_limit_hits_total{{protocol="{protocol}",limit="{limit}"}}', 0)


def hold(srv, sources, each: int, send=b""):
    """Opens `each` connections from every source address (sending `send` on each);
    returns those the server kept open for a moment."""
    socks = []
    for src in sources:
        for _ in range(each):
            s = attacker(srv, src)
            if s is None:
                continue
            if send:
                try:
                    s.sendall(send)
                except OSError:
                    s.close()
                    continue
            socks.append(s)
    time.sleep(0.3)
    kept = [s for s in socks if not closed(s, 0.01)]
    for s in socks:
        if s not in kept:
            s.close()
    return kept


def test_idle_connections_from_one_host_stop_at_its_limit(server):
    before = hits(server, "connections_per_client")
    socks = hold(server, ["127.0.0.2"], PER_CLIENT + 30)
    try:
        assert len(socks) == PER_CLIENT, f"{len(socks)} idle connections kept from one host"
        assert hits(server, "connections_per_client") - before >= 30
        assert honest_logon_seconds(server) < 1.0
        # Dropped at the logon timeout.
        assert all(closed(s, LOGON_TIMEOUT + 2) for s in socks), "idle connections outlived the logon timeout"
    finally:
        for s in socks:
            s.close()
    log = server.log.read_text(errors="replace")
    lines = [ln for ln in log.splitlines() if "127.0.0.2" in ln and "connections_per_client" in ln]
    assert len(lines) == 1, f"logged {len(lines)} times, not once a minute: {lines[:3]}"


def test_idle_connections_from_many_hosts_make_room_for_an_honest_one(server):
    before = hits(server, "unauthenticated")
    sources = [f"127.0.0.{i}" for i in range(3, 9)]
    socks = hold(server, sources, PER_CLIENT)
    try:
        assert len(socks) <= UNAUTH, f"{len(socks)} connections not logged on are held"
        assert hits(server, "unauthenticated") - before >= len(sources) * PER_CLIENT - UNAUTH
        for _ in range(3):
            assert honest_logon_seconds(server) < 1.0
    finally:
        for s in socks:
            s.close()


def test_a_logged_on_client_is_never_closed_to_make_room(server):
    with harness.Smb(server) as smb:
        socks = hold(server, [f"127.0.0.{i}" for i in range(10, 14)], PER_CLIENT)
        try:
            f = smb.open("", directory=True)
            f.query_directory("*", 1)
            f.close()
        finally:
            for s in socks:
                s.close()


def test_smbloris_is_cut_off(server):
    before_large, before_slow = hits(server, "frame_too_large"), hits(server, "frame_timeout")
    # A header announcing 2 MiB before any logon: refused at once.
    big = hold(server, ["127.0.0.20"], 10, send=b"\x00\x20\x00\x00")
    assert big == [], "a 2 MiB frame before logon was accepted"
    assert hits(server, "frame_too_large") - before_large >= 10
    # A frame that may be that large (60 KiB), sent a byte at a time: closed at the frame timeout.
    socks = hold(server, ["127.0.0.21"], 10, send=struct.pack(">I", 60 * 1024) + b"\xfe")
    try:
        assert len(socks) == 10
        t0 = time.monotonic()
        for s in socks:
            s.sendall(b"S")
        assert honest_logon_seconds(server) < 1.0
        assert all(closed(s, FRAME_TIMEOUT + 2) for s in socks)
        assert time.monotonic() - t0 < FRAME_TIMEOUT + 3
        assert hits(server, "frame_timeout") - before_slow >= 10
    finally:
        for s in socks:
            s.close()


def test_negotiate_then_silence_is_closed_at_the_logon_timeout(server):
    before = hits(server, "logon_timeout")
    neg = frame(hdr(0, 0) + negotiate_body((0x0202, 0x0210, 0x0300)))
    socks = []
    try:
        for _ in range(20):
            s = attacker(server, "127.0.0.30")
            assert s is not None
            socks.append(s)
            s.sendall(neg)
            head = s.recv(4, socket.MSG_WAITALL)
            assert len(head) == 4 and struct.unpack(">I", head)[0] > 64, "a NEGOTIATE response"
            s.recv(struct.unpack(">I", head)[0], socket.MSG_WAITALL)
        assert honest_logon_seconds(server) < 1.0
        assert all(closed(s, LOGON_TIMEOUT + 2) for s in socks)
        assert hits(server, "logon_timeout") - before >= 20
    finally:
        for s in socks:
            s.close()


def test_nfs_connections_per_client_and_record_timeout(server):
    port = server.extra["nfs_port"]
    before = hits(server, "connections_per_client", "nfs")
    socks = [s for s in (attacker(server, "127.0.0.40", port) for _ in range(NFS_PER_CLIENT + 4)) if s]
    try:
        time.sleep(0.3)
        kept = [s for s in socks if not closed(s, 0.01)]
        assert len(kept) == NFS_PER_CLIENT
        assert hits(server, "connections_per_client", "nfs") - before >= 4
        # Another client is served.
        c = nfs_harness.client(server)
        c.null()
        # Half a record (a fragment header announcing 1000 bytes, then 10): closed in time.
        slow = kept[0]
        slow.sendall(struct.pack(">I", 0x80000000 | 1000) + b"x" * 10)
        assert closed(slow, FRAME_TIMEOUT + 2), "a record that never completes was kept"
        assert hits(server, "frame_timeout", "nfs") >= 1
    finally:
        for s in socks:
            s.close()


def test_limits_show_in_status(server):
    port = server.port + 10000 if server.port + 10000 < 65536 else server.port - 10000
    st = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10).read())
    by = {a["protocol"]: a for a in st["admission"]}
    assert by["smb"]["max_per_client"] == PER_CLIENT and by["smb"]["max_unauthenticated"] == UNAUTH
    assert by["nfs"]["max_per_client"] == NFS_PER_CLIENT and by["nfs"]["max_unauthenticated"] is None
    assert by["smb"]["limit_hits"]["connections_per_client"] >= 1


def test_tree_connects_of_a_session_are_bounded(server):
    from smbprotocol.exceptions import SMBResponseException
    from smbprotocol.tree import TreeConnect

    before = hits(server, "trees_per_session")
    with harness.Smb(server) as smb:
        # The harness's own tree is the first; 1,023 more fit.
        for _ in range(1023):
            TreeConnect(smb.session, server.unc("data")).connect()
        with pytest.raises(SMBResponseException) as e:
            TreeConnect(smb.session, server.unc("data")).connect()
        assert e.value.status == 0xC000009A, f"{e.value.status:#x}"
        # The session still works.
        f = smb.open("", directory=True)
        f.close()
    assert hits(server, "trees_per_session") - before == 1


def test_requests_waiting_on_one_connection_are_bounded(server):
    """CHANGE_NOTIFY requests go async and hand their credits back, so credits do not bound
    them: past 512 waiting on one connection, more get INSUFFICIENT_RESOURCES."""
    from smbprotocol.change_notify import CompletionFilter, SMB2ChangeNotifyRequest

    pending, refused = 0x00000103, 0xC000009A
    before = hits(server, "async_per_connection")
    with harness.Smb(server) as smb:
        smb.conn.echo(sid=smb.session.session_id, credit_request=1024)
        d = smb.open("", directory=True)
        reqs = []
        for _ in range(520):
            req = SMB2ChangeNotifyRequest()
            req["file_id"] = d.file_id
            req["output_buffer_length"] = 4096
            req["completion_filter"] = CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME
            reqs.append(smb.conn.send(req, smb.session.session_id, smb.tree.tree_connect_id))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(r.response is None for r in reqs):
            time.sleep(0.1)
        statuses = [r.response["status"].get_value() if r.response is not None else None for r in reqs]
        assert statuses.count(pending) == 512, statuses
        assert statuses.count(refused) == 8, statuses
        # The connection still serves, and closing the directory ends the waiting ones.
        f = smb.open("x-after-async-limit")
        f.close()
        d.close()
    assert hits(server, "async_per_connection") - before == 8
