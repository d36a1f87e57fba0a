"""`braid status` and the admin endpoint: sessions, channels and byte counters of a live server."""
import json
import subprocess
import urllib.request

import pytest

from harness import Smb


def braid_exe(srv):
    return srv.proc.args[0]


def status_json(srv):
    cfg = srv.root / "braid.toml"
    r = subprocess.run([braid_exe(srv), "status", "--config", str(cfg), "--json"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_status_lists_session_and_channel(braid_server):
    if braid_server.target != "braid":
        pytest.skip("braid only")
    s = Smb(braid_server)
    try:
        st = status_json(braid_server)
        mine = [x for x in st["sessions"] if x["user"].lower() == braid_server.user.lower()]
        assert mine, st
        sess = mine[0]
        assert sess["current_channels"] == len(sess["channels"]) >= 1
        assert sess["dialect"] == "3.1.1"
        assert sess["signing"] is True
        ch = sess["channels"][0]
        assert ch["bytes_in"] > 0 and ch["bytes_out"] > 0
        # The human table names the same session.
        cfg = braid_server.root / "braid.toml"
        r = subprocess.run([braid_exe(braid_server), "status", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
        assert r.returncode == 0 and f"user {sess['user']}" in r.stdout, r.stdout + r.stderr
    finally:
        s.close()


def test_metrics_endpoint(braid_server):
    if braid_server.target != "braid":
        pytest.skip("braid only")
    port = braid_server.port + 10000 if braid_server.port + 10000 < 65536 else braid_server.port - 10000
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "braid_connections" in body and "braid_sessions" in body


def test_status_unreachable_is_one_clear_line(braid_server, tmp_path):
    if braid_server.target != "braid":
        pytest.skip("braid only")
    r = subprocess.run([braid_exe(braid_server), "status", "--admin", "127.0.0.1:1"], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert r.stderr.startswith("braid: error: cannot reach the admin endpoint"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
