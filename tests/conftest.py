"""pytest fixtures for Braid's interop tests.

BRAID_TEST_TARGET=braid (default) starts target/release/braid (or $BRAID_BIN);
BRAID_TEST_TARGET=samba runs the same tests against a private Samba smbd (scripts/samba-peer.sh),
which is how the tests themselves are validated.
BRAID_TEST_TIMEOUT (default 300) bounds each test (SIGALRM).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

TARGET = os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower()
TEST_TIMEOUT = int(os.environ.get("BRAID_TEST_TIMEOUT", "300"))


def pytest_report_header(config):
    where = harness.braid_bin() if TARGET == "braid" else "scripts/samba-peer.sh"
    return f"interop target: {TARGET} ({where})"



@pytest.fixture(scope="session")
def braid_server():
    """The server under test: host, port, user/password (alice), user2/password2 (bob),
    shares {data, ro, alice_only} -> directories on disk."""
    if TARGET not in ("braid", "samba"):
        pytest.exit(f"BRAID_TEST_TARGET must be braid or samba, not {TARGET!r}", 2)
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    root = harness.tmp_dir(f"braid-test-{TARGET}-")
    try:
        srv = harness.start_braid(root, users) if TARGET == "braid" else harness.start_samba(root, users)
    except Exception as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start the {TARGET} server: {e}", pytrace=False)
    try:
        yield srv
    finally:
        problem = harness.stop_braid(srv) if TARGET == "braid" else harness.stop_samba(srv)
        problem = srv.crashed or problem
        saved = None
        if srv.log.exists() and (TARGET == "braid" or problem):
            saved = harness.log_dir() / f"{TARGET}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
            shutil.copyfile(srv.log, saved)
        shutil.rmtree(root, ignore_errors=True)
        if problem:
            pytest.fail(f"server under test crashed: {problem} (log saved to {saved})", pytrace=False)


@pytest.fixture(scope="session")
def client_conf():
    d = harness.tmp_dir("braid-test-client-")
    try:
        yield harness.client_conf(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def smbc(braid_server, client_conf):
    """smbc(share, cmd, **kw) -> harness.Result; share=None lists shares (-L)."""
    def run(share, cmd=None, **kw):
        return harness.smbclient(braid_server, client_conf, share, cmd, **kw)
    return run


@pytest.fixture
def scratch(braid_server, request):
    """A fresh, empty directory name inside the data share: (name, path on disk)."""
    name = "t_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:60]
    name += "_" + secrets.token_hex(3)
    path = braid_server.shares["data"] / name
    path.mkdir()
    path.chmod(0o777)
    yield name, path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def _guard(request):
    """Per-test time limit, and fail the test if the server crashed while it ran."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"test exceeded its time limit (BRAID_TEST_TIMEOUT={TEST_TIMEOUT}s or its time_limit mark)")

    old = signal.signal(signal.SIGALRM, on_alarm)
    # A test that boots a virtual machine may ask for more (@pytest.mark.time_limit(s)).
    marker = request.node.get_closest_marker("time_limit")
    signal.alarm(max(TEST_TIMEOUT, marker.args[0]) if marker else TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if "braid_server" in request.fixturenames:
        srv = request.getfixturevalue("braid_server")
        problem = srv.health()
        if problem:
            srv.crashed = srv.crashed or problem
            pytest.fail(f"server crashed during this test: {problem}", pytrace=False)
