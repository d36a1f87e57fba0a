"""Starting braid with NFS exports for the NFS tests (tests/test_nfs.py, tests/test_nfs_smb.py),
and running libnfs's command line tools (nfs-ls, nfs-cp, nfs-cat) against it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import harness
import nfs_rpc

LOCALHOST = harness.LOCALHOST


def wait_port(srv: harness.Server, port: int, wait: float = 10.0):
    deadline = time.monotonic() + wait
    while not harness.port_open(port):
        if srv.proc.poll() is not None:
            raise RuntimeError(f"braid exited (status {srv.proc.returncode}); log:\n"
                               f"{srv.log.read_text(errors='replace')[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"braid did not listen for NFS on {LOCALHOST}:{port} within {wait}s; log:\n"
                               f"{srv.log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


def start(root: Path, users: dict[str, str], share_specs: list[dict], *, state_dir: Path | None = None,
          server_extra=()) -> harness.Server:
    """braid with SMB on a free port and NFS (`nfs_listen`) on another; `srv.extra["nfs_port"]`.
    Shares are as for harness.start_braid; put `nfs = true` and nfs_* keys in their "lines"."""
    nfs_port = harness.free_port()
    state_dir = state_dir or root / "state"
    extra = [f'nfs_listen = ["{LOCALHOST}:{nfs_port}"]', f"state_dir = {harness._toml_str(str(state_dir))}",
             *server_extra]
    # Port 111 and the machine's rpcbind are left alone unless a test asks (tests/test_portmap.py).
    if not any(line.startswith("nfs_portmapper") for line in extra):
        extra.append('nfs_portmapper = "off"')
    # The lock service's fixed default ports (4045, 4046) would clash between servers:
    # off unless a test names its own (tests/test_nlm.py).
    if not any(line.startswith("nlm_port") for line in extra):
        extra.append("nlm_port = 0")
    srv = harness.start_braid(root, users, share_specs=share_specs, server_extra=extra)
    srv.extra["nfs_port"] = nfs_port
    srv.extra["state_dir"] = state_dir
    try:
        wait_port(srv, nfs_port)
    except Exception:
        harness.stop_braid(srv)
        raise
    return srv


def restart(srv: harness.Server, *, edit=None) -> harness.Server:
    """Stops braid and starts it again with the same config file (same ports), after
    `edit(text) -> text` rewrote the config if given. Raises on a crash at the stop."""
    problem = harness.stop_braid(srv)
    assert problem is None, problem
    cfg = srv.root / "braid.toml"
    if edit is not None:
        cfg.write_text(edit(cfg.read_text()))
    with open(srv.log, "ab") as lf:
        proc = subprocess.Popen([str(harness.braid_bin()), "serve", "--config", str(cfg)],
                                stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                                env=dict(os.environ, RUST_BACKTRACE="1"), start_new_session=True)
    srv.proc = proc
    for port in (srv.port, srv.extra["nfs_port"]):
        wait_port(srv, port)
    return srv


def stop(srv: harness.Server, keep_log_as: str) -> str | None:
    """Stops braid, keeps its log in target/test-logs, removes its directory."""
    problem = harness.stop_braid(srv)
    if srv.log.exists():
        shutil.copyfile(srv.log, harness.log_dir() / f"{keep_log_as}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
    shutil.rmtree(srv.root, ignore_errors=True)
    return problem


def client(srv: harness.Server, cred=None, **kw) -> nfs_rpc.Nfs3:
    """A raw NFSv3 client connected to the server's NFS port (AUTH_SYS root by default)."""
    return nfs_rpc.Nfs3(LOCALHOST, srv.extra["nfs_port"], mount_port=srv.extra.get("mount_port"),
                        cred=cred or nfs_rpc.AuthSys(0, 0), **kw)


def url(srv: harness.Server, path: str) -> str:
    return nfs_url(srv.extra["nfs_port"], path, srv.extra.get("mount_port"))


# --------------------------------------------------------------------------------------------
# nfs-ganesha (bench/ganesha.sh), the peer that checks the tests themselves
# --------------------------------------------------------------------------------------------

GANESHA = harness.REPO / "bench" / "ganesha.sh"


def ganesha_env(d: Path, nfs_port: int, mount_port: int, export: str) -> dict:
    return dict(os.environ, DIR=str(d), NFS_PORT=str(nfs_port), MNT_PORT=str(mount_port), EXPORT=export)


def start_ganesha(export: str = "/data") -> harness.Server:
    """nfs-ganesha exporting one directory as `export` (no root squash), shaped like a braid
    Server: shares {export name: directory}, extra nfs_port, mount_port, env."""
    d = harness.tmp_dir("braid-ganesha-")
    nport, mport = harness.free_port(), harness.free_port()
    env = ganesha_env(d, nport, mport, export)
    r = subprocess.run(["bash", str(GANESHA), "up"], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        shutil.rmtree(d, ignore_errors=True)
        raise RuntimeError(f"bench/ganesha.sh up failed:\n{r.stdout}{r.stderr}")
    return harness.Server("ganesha", LOCALHOST, nport, "", "", "", "", {export.strip("/"): d / "data"}, d,
                          d / "ganesha.log", None, extra={"nfs_port": nport, "mount_port": mport, "env": env})


def stop_ganesha(srv: harness.Server):
    subprocess.run(["bash", str(GANESHA), "down"], env=srv.extra["env"], capture_output=True, timeout=60)
    shutil.rmtree(srv.root, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# libnfs utilities
# --------------------------------------------------------------------------------------------

def nfs_url(nfs_port: int, path: str, mount_port: int | None = None) -> str:
    """libnfs URL with the ports given, so that libnfs asks no portmapper."""
    return f"nfs://{LOCALHOST}{path}?nfsport={nfs_port}&mountport={mount_port or nfs_port}"


def libnfs(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs nfs-ls / nfs-cp / nfs-cat; output as bytes."""
    if not shutil.which(args[0]):
        import pytest
        pytest.skip(f"{args[0]} not installed (apt-get install libnfs-utils)")
    try:
        return subprocess.run(list(args), stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{' '.join(args)}: no answer within {timeout}s; output {e.stdout!r} {e.stderr!r}")

