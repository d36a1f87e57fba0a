"""The servers that tests/test_nlm.py runs NLM v4 / NSM v1 against, behind one interface
(`NlmTarget`): nfs-ganesha with rpcbind and rpc.statd in their own network namespace
(bench/ganesha.sh with NLM_PORT, the peer that checks the tests themselves), and braid.

Each target has client addresses from which the tests call it, each with a `ClientHost`
(tests/nlm_rpc.py: a portmapper on port 111 and the NLM/NSM callback services) that lives as
long as the target, so that a server which caches where a client's callback service is finds
it at the same place all along.
  - ganesha: server NET.1 in the namespace, clients NET.2.. on this side of a veth pair
    (NET = 10.233.K, K free); NSM is rpc.statd's (ganesha asks statd to SM_MON each client
    and statd calls ganesha back on SM_NOTIFY).
  - braid: server 127.0.0.1, clients 127.77.K.2.. (all of 127/8 is this host); NLM and NSM are
    braid's own ([server] nlm_port, nsm_port, nfs_grace; the NSM state lives in state_dir).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import harness
import nfs_harness
import nfs_rpc
import nlm_rpc

N_CLIENTS = 8
GANESHA = harness.REPO / "bench" / "ganesha.sh"


def _port_111_holders() -> str:
    r = subprocess.run(["ss", "-Hlntup", "sport = :111"], capture_output=True, text=True)
    return r.stdout.strip()


class NlmTarget:
    """A server speaking NLM v4 and NSM v1. `server_ip`, `nlm_port`, `nsm_port`; client
    addresses `client_ips` with their `hosts` (ClientHost) and caller names; `restart(grace)`
    crashes the server and starts it again with a grace period of `grace` seconds."""

    name = "?"
    normal_grace = 0.0  # the grace period the target starts with outside the restart tests

    def __init__(self):
        self.server_ip = ""
        self.nlm_port = self.nsm_port = 0
        self.client_ips: list[str] = []
        self.hosts: list[nlm_rpc.ClientHost] = []
        self.probe_fh: bytes | None = None

    # -- set by each target ----------------------------------------------------------------
    def nfs(self) -> nfs_rpc.Nfs3:
        raise NotImplementedError

    def restart(self, grace: float):
        raise NotImplementedError

    def stop(self) -> str | None:
        raise NotImplementedError

    def health(self) -> str | None:
        raise NotImplementedError

    def logs(self) -> list[Path]:
        return []

    # -- common ----------------------------------------------------------------------------
    def caller_name(self, i: int) -> str:
        """Client i's caller_name: a host name, as real clients send (Linux: its nodename)."""
        return f"nlmtest-{self.name}-{i}"

    def start_hosts(self):
        for ip in self.client_ips:
            try:
                self.hosts.append(nlm_rpc.ClientHost(ip, server_nlm=(self.server_ip, self.nlm_port, "udp")))
            except OSError as e:
                raise RuntimeError(f"cannot run client host {ip}'s services ({e}); holders of port 111: "
                                   f"{_port_111_holders() or 'none'}") from None

    def close_hosts(self):
        for h in self.hosts:
            h.close()
        self.hosts.clear()

    def client(self, i: int, transport: str = "tcp", **kw) -> nlm_rpc.NlmClient:
        return nlm_rpc.NlmClient(self.server_ip, self.nlm_port, transport=transport, source=self.client_ips[i],
                                 caller_name=kw.pop("caller_name", self.caller_name(i)), **kw)

    def nsm(self, i: int, transport: str = "udp") -> nlm_rpc.NsmClient:
        return nlm_rpc.NsmClient(self.server_ip, self.nsm_port, transport=transport, source=self.client_ips[i])

    def new_file(self, name: str) -> bytes:
        """A fresh regular file in the export's root; its NFSv3 handle."""
        with self.nfs() as c:
            r = c.create(c.root("/data"), name, nfs_rpc.UNCHECKED, nfs_rpc.Sattr3(mode=0o666))
            assert r.ok and r.fh, f"CREATE {name}: {r}"
            return r.fh

    def wait_out_grace(self, limit: float):
        """Until a new (non-reclaim) lock is no longer refused for the grace period."""
        if self.probe_fh is None:
            self.probe_fh = self.new_file(f"grace-probe-{os.getpid()}")
        deadline = time.monotonic() + limit
        with self.client(N_CLIENTS - 1, "tcp", timeout=5) as c:
            lock = c.owner(0x6772).lock(self.probe_fh, 0, 1)
            while True:
                r = c.lock(lock)
                if r.stat != nlm_rpc.NLM4_DENIED_GRACE_PERIOD:
                    assert r.stat == nlm_rpc.NLM4_GRANTED, f"grace probe lock: {r}"
                    assert c.unlock(lock).stat == nlm_rpc.NLM4_GRANTED
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.name}: still in its grace period after {limit}s")
                time.sleep(0.2)


# --------------------------------------------------------------------------------------------
# nfs-ganesha in a network namespace (bench/ganesha.sh, NLM mode)
# --------------------------------------------------------------------------------------------

def _free_net() -> str:
    """10.233.K with no namespace or veth of that K yet (another run may hold one)."""
    start = os.getpid() % 240
    for k in range(240):
        n = (start + k) % 240 + 10
        if not os.path.exists(f"/run/netns/braid-gnlm-{n}") and not os.path.exists(f"/sys/class/net/bgnl{n}c"):
            return f"10.233.{n}"
    raise RuntimeError("no free 10.233.K network for the ganesha namespace")


class GaneshaTarget(NlmTarget):
    name = "ganesha"
    normal_grace = 0.0  # Graceless

    def __init__(self):
        super().__init__()
        self.dir = harness.tmp_dir("braid-ganesha-nlm-")
        net = _free_net()
        self.nfs_port, self.mount_port = 2049, 20048  # inside its own namespace: any ports
        self.nlm_port, self.nsm_port = 4045, 4046
        self.env = dict(os.environ, DIR=str(self.dir), NFS_PORT=str(self.nfs_port), MNT_PORT=str(self.mount_port),
                        EXPORT="/data", NLM_PORT=str(self.nlm_port), STATD_PORT=str(self.nsm_port), NET=net,
                        CLIENTS=str(N_CLIENTS), GRACE="0")
        self.server_ip = f"{net}.1"
        self.client_ips = [f"{net}.{i}" for i in range(2, N_CLIENTS + 2)]
        self._run("up")

    def _run(self, cmd: str, **env):
        r = subprocess.run(["bash", str(GANESHA), cmd], env=dict(self.env, **env), capture_output=True,
                           text=True, timeout=90)
        if r.returncode != 0:
            raise RuntimeError(f"bench/ganesha.sh {cmd} failed:\n{r.stdout}{r.stderr}")
        return r.stdout

    def nfs(self) -> nfs_rpc.Nfs3:
        return nfs_rpc.Nfs3(self.server_ip, self.nfs_port, mount_port=self.mount_port, cred=nfs_rpc.AuthSys(0, 0))

    def restart(self, grace: float):
        self._run("restart", GRACE=str(int(grace)))
        if not grace:
            self.wait_out_grace(10)

    def _pid(self) -> int | None:
        try:
            return int((self.dir / "ganesha.pid").read_text())
        except (OSError, ValueError):
            return None

    def health(self) -> str | None:
        pid = self._pid()
        if pid is None:
            return "ganesha is not running (no pid file)"
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return f"ganesha (pid {pid}) is gone; see {self.dir}/ganesha.log and dmesg"
        if "\nState:\tZ" in state:
            return f"ganesha (pid {pid}) died; see {self.dir}/ganesha.log and dmesg"
        return None

    def logs(self) -> list[Path]:
        return [self.dir / f for f in ("ganesha.log", "statd.log", "sm-notify.log")]

    def stop(self) -> str | None:
        problem = self.health()
        try:
            self._run("down")
        finally:
            for f in self.logs():
                if f.exists():
                    shutil.copyfile(f, harness.log_dir() / f"nlm-ganesha-{f.name}")
            shutil.rmtree(self.dir, ignore_errors=True)
        return problem


# --------------------------------------------------------------------------------------------
# braid
# --------------------------------------------------------------------------------------------

BRAID_SHARES = [{"name": "data", "lines": ["nfs = true", "nfs_root_squash = false"]}]


def free_port_both() -> int:
    """A port free for TCP and UDP on 127.0.0.1 (NLM and NSM are served over both)."""
    for _ in range(50):
        port = harness.free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            try:
                u.bind((harness.LOCALHOST, port))
                return port
            except OSError:
                continue
    raise RuntimeError("no port free for both TCP and UDP")


class BraidTarget(NlmTarget):
    """braid with `[server] nlm_port`, `nsm_port` and `nfs_grace` (the contract of its NLM
    service: served over TCP and UDP on each nfs_listen address; callbacks to the caller's
    source address through that host's portmapper, over UDP)."""
    name = "braid"
    normal_grace = 1.0

    def __init__(self, extra_lines=()):
        super().__init__()
        self.nlm_port, self.nsm_port = free_port_both(), free_port_both()
        root = harness.tmp_dir("braid-nlm-")
        users = {"alice": "pw-alice-nlm", "bob": "pw-bob-nlm"}
        extra = [f"nlm_port = {self.nlm_port}", f"nsm_port = {self.nsm_port}",
                 f'nfs_grace = "{int(self.normal_grace)}s"', *extra_lines]
        try:
            self.srv = nfs_harness.start(root, users, BRAID_SHARES, server_extra=extra)
        except Exception:
            shutil.rmtree(root, ignore_errors=True)
            raise
        self.server_ip = harness.LOCALHOST
        k = os.getpid() % 250 + 1
        self.client_ips = [f"127.77.{k}.{i}" for i in range(2, N_CLIENTS + 2)]
        try:
            self._wait_nlm()
        except Exception:
            nfs_harness.stop(self.srv, "braid-nlm")
            raise

    def _wait_nlm(self, wait: float = 10.0):
        deadline = time.monotonic() + wait
        while not harness.port_open(self.nlm_port):
            if self.srv.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"braid does not serve NLM on {harness.LOCALHOST}:{self.nlm_port} "
                                   f"([server] nlm_port); log:\n{self.srv.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)

    def nfs(self) -> nfs_rpc.Nfs3:
        return nfs_harness.client(self.srv)

    def restart(self, grace: float):
        """A crash (SIGKILL) and a start with nfs_grace = grace, same config and state_dir."""
        self.srv.proc.kill()
        self.srv.proc.wait(10)
        cfg = self.srv.root / "braid.toml"
        text = cfg.read_text()
        cfg.write_text(re.sub(r'nfs_grace = "[^"]*"', f'nfs_grace = "{int(grace)}s"', text))
        with open(self.srv.log, "ab") as lf:
            self.srv.proc = subprocess.Popen([str(harness.braid_bin()), "serve", "--config", str(cfg)],
                                             stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                                             env=dict(os.environ, RUST_BACKTRACE="1"), start_new_session=True)
        nfs_harness.wait_port(self.srv, self.srv.extra["nfs_port"])
        self._wait_nlm()

    def health(self) -> str | None:
        return self.srv.health()

    def logs(self) -> list[Path]:
        return [self.srv.log]

    def stop(self) -> str | None:
        return nfs_harness.stop(self.srv, "braid-nlm")


def start(name: str, braid_extra=()) -> NlmTarget:
    """The target `name`; `braid_extra`: more [server] lines for braid."""
    t = GaneshaTarget() if name == "ganesha" else BraidTarget(braid_extra)
    try:
        t.start_hosts()
        if t.normal_grace:
            t.wait_out_grace(t.normal_grace + 15)
    except BaseException:
        t.close_hosts()
        t.stop()
        raise
    return t


def serving(name: str, braid_extra=()):
    """A pytest fixture's body: yields the target `name` (as `start`) and stops it after,
    failing the fixture when it cannot start or did not stop cleanly."""
    import pytest
    try:
        t = start(name, braid_extra)
    except Exception as e:
        pytest.fail(f"could not start {name} with NLM: {e}", pytrace=False)
    try:
        yield t
    finally:
        t.close_hosts()
        problem = t.stop()
        if problem:
            pytest.fail(f"{name}: {problem}", pytrace=False)
