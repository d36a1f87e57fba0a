"""Shared helpers for Braid's interop tests: NT hash, server processes (braid or the Samba peer),
smbclient invocations and a small wrapper around smbprotocol's low-level API.

Also a tiny CLI used by scripts/test.sh:  python3 tests/harness.py nthash PASSWORD
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCALHOST = "127.0.0.1"


def tmp_dir(prefix: str) -> Path:
    """A fresh directory for a test server's shares and state, on tmpfs where there is one
    (conformance runs use tmpfs: disk allocation sizes alone fail smbtorture checks)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    d.chmod(0o755)
    return d


# --------------------------------------------------------------------------------------------
# NT hash (MD4 of the UTF-16LE password).  hashlib's md4 is usually disabled under OpenSSL 3.
# --------------------------------------------------------------------------------------------

def _md4_pure(data: bytes) -> bytes:
    def rol(x, n):
        x &= 0xFFFFFFFF
        return ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF

    msg = bytearray(data)
    bitlen = (8 * len(data)) & 0xFFFFFFFFFFFFFFFF
    msg.append(0x80)
    while len(msg) % 64 != 56:
        msg.append(0)
    msg += struct.pack("<Q", bitlen)
    a, b, c, d = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476
    for off in range(0, len(msg), 64):
        x = struct.unpack("<16I", msg[off:off + 64])
        aa, bb, cc, dd = a, b, c, d
        f = lambda x_, y, z: (x_ & y) | (~x_ & z)
        g = lambda x_, y, z: (x_ & y) | (x_ & z) | (y & z)
        h = lambda x_, y, z: x_ ^ y ^ z
        for i in range(16):
            k = i
            s = (3, 7, 11, 19)[i % 4]
            if i % 4 == 0:
                a = rol(a + f(b, c, d) + x[k], s)
            elif i % 4 == 1:
                d = rol(d + f(a, b, c) + x[k], s)
            elif i % 4 == 2:
                c = rol(c + f(d, a, b) + x[k], s)
            else:
                b = rol(b + f(c, d, a) + x[k], s)
        for i in range(16):
            k = (i % 4) * 4 + i // 4
            s = (3, 5, 9, 13)[i % 4]
            if i % 4 == 0:
                a = rol(a + g(b, c, d) + x[k] + 0x5A827999, s)
            elif i % 4 == 1:
                d = rol(d + g(a, b, c) + x[k] + 0x5A827999, s)
            elif i % 4 == 2:
                c = rol(c + g(d, a, b) + x[k] + 0x5A827999, s)
            else:
                b = rol(b + g(c, d, a) + x[k] + 0x5A827999, s)
        order = (0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15)
        for i in range(16):
            k = order[i]
            s = (3, 9, 11, 15)[i % 4]
            if i % 4 == 0:
                a = rol(a + h(b, c, d) + x[k] + 0x6ED9EBA1, s)
            elif i % 4 == 1:
                d = rol(d + h(a, b, c) + x[k] + 0x6ED9EBA1, s)
            elif i % 4 == 2:
                c = rol(c + h(d, a, b) + x[k] + 0x6ED9EBA1, s)
            else:
                b = rol(b + h(c, d, a) + x[k] + 0x6ED9EBA1, s)
        a, b, c, d = (a + aa) & 0xFFFFFFFF, (b + bb) & 0xFFFFFFFF, (c + cc) & 0xFFFFFFFF, (d + dd) & 0xFFFFFFFF
    return struct.pack("<4I", a, b, c, d)


def nt_hash(password: str) -> str:
    """32 lowercase hex digits."""
    return _md4_pure(password.encode("utf-16-le")).hex()


# NTSTATUS values used by the tests (smbprotocol's NtStatus lacks some of them)
class St:
    SUCCESS = 0x00000000
    PENDING = 0x00000103
    NOTIFY_CLEANUP = 0x0000010B
    INVALID_PARAMETER = 0xC000000D
    END_OF_FILE = 0xC0000011
    MORE_PROCESSING_REQUIRED = 0xC0000016
    ACCESS_DENIED = 0xC0000022
    OBJECT_NAME_INVALID = 0xC0000033
    OBJECT_NAME_NOT_FOUND = 0xC0000034
    OBJECT_NAME_COLLISION = 0xC0000035
    OBJECT_PATH_NOT_FOUND = 0xC000003A
    OBJECT_PATH_SYNTAX_BAD = 0xC000003B
    SHARING_VIOLATION = 0xC0000043
    DELETE_PENDING = 0xC0000056
    FILE_LOCK_CONFLICT = 0xC0000054
    LOCK_NOT_GRANTED = 0xC0000055
    LOGON_FAILURE = 0xC000006D
    RANGE_NOT_LOCKED = 0xC000007E
    INSUFFICIENT_RESOURCES = 0xC000009A
    MEDIA_WRITE_PROTECTED = 0xC00000A2
    FILE_IS_A_DIRECTORY = 0xC00000BA
    NOT_SUPPORTED = 0xC00000BB
    NETWORK_NAME_DELETED = 0xC00000C9
    BAD_NETWORK_NAME = 0xC00000CC
    NOT_A_DIRECTORY = 0xC0000103
    USER_SESSION_DELETED = 0xC0000203
    STOPPED_ON_SYMLINK = 0x8000002D


# --------------------------------------------------------------------------------------------
# processes and ports
# --------------------------------------------------------------------------------------------

def sha256_file(p: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOCALHOST, 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = LOCALHOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def braid_bin() -> Path:
    return Path(os.environ.get("BRAID_BIN") or REPO / "target" / "release" / "braid")


def log_dir() -> Path:
    d = Path(os.environ.get("BRAID_TEST_LOGDIR") or REPO / "target" / "test-logs")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _toml_str(s: str) -> str:
    # TOML basic string; JSON-style escaping is valid TOML for the characters we use
    import json
    return json.dumps(str(s))


def braid_config(port: int, users: dict[str, str], shares: list[dict], server_extra=()) -> str:
    """users: name -> password; shares: dicts with name, path, read_only, users, guest_ok,
    encrypt, lines (more TOML lines for the share), directory_leases (False switches them
    off), max_watches, or instead of path backend="memory" and an optional capacity (e.g. "8M");
    server_extra: more TOML lines for the [server] section."""
    out = ["[server]", f"listen = [{_toml_str(f'{LOCALHOST}:{port}')}]", *server_extra, ""]
    for name, pw in users.items():
        out += ["[[user]]", f"name = {_toml_str(name)}", f"nt_hash = {_toml_str(nt_hash(pw))}", ""]
    for sh in shares:
        out += [
            "[[share]]",
            f"name = {_toml_str(sh['name'])}",
            *([f"path = {_toml_str(sh['path'])}"] if "path" in sh else []),
            *([f"backend = {_toml_str(sh['backend'])}"] if "backend" in sh else []),
            *([f"capacity = {_toml_str(sh['capacity'])}"] if "capacity" in sh else []),
            f"read_only = {'true' if sh.get('read_only') else 'false'}",
            "users = [" + ", ".join(_toml_str(u) for u in sh.get("users", [])) + "]",
            f"guest_ok = {'true' if sh.get('guest_ok') else 'false'}",
            *(["encrypt = true"] if sh.get("encrypt") else []),
            *sh.get("lines", []),
            *(["directory_leases = false"] if sh.get("directory_leases") is False else []),
            *([f"max_watches = {int(sh['max_watches'])}"] if "max_watches" in sh else []),
            "",
        ]
    return "\n".join(out)


@dataclass
class Server:
    """A running SMB server under test (braid or the Samba peer)."""

    target: str                      # "braid" | "samba"
    host: str
    port: int
    user: str
    password: str
    user2: str
    password2: str
    shares: dict[str, Path]          # share name -> directory on disk (memory shares: none)
    root: Path                       # private temp dir (config, logs, shares)
    log: Path
    proc: subprocess.Popen | None = None
    crashed: str | None = None
    extra: dict = field(default_factory=dict)

    def unc(self, share: str, path: str = "") -> str:
        p = rf"\\{self.host}\{share}"
        return p + ("\\" + path if path else "")

    # -- health --------------------------------------------------------------------------
    def health(self) -> str | None:
        """None if the server looks healthy, else a description of the problem."""
        if self.target == "braid":
            rc = self.proc.poll()
            if rc is not None:
                return f"braid exited unexpectedly (status {rc}{_sig_name(rc)}); log: {self.log}"
            if _log_has_panic(self.log):
                return f"braid logged a panic; log: {self.log}"
            return None
        pidfile = self.root / "smbd.pid"
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return f"samba peer smbd is gone; logs in {self.root / 'log'}"
        return None


def _sig_name(rc: int) -> str:
    if rc < 0:
        try:
            return f", killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f", killed by signal {-rc}"
    return ""


def _log_has_panic(log: Path) -> bool:
    try:
        with open(log, "rb") as f:
            return b"panicked" in f.read()
    except OSError:
        return False


def _mk_share_dirs(root: Path, names) -> dict[str, Path]:
    shares = {}
    for n in names:
        p = root / "shares" / n
        p.mkdir(parents=True, exist_ok=True)
        p.chmod(0o777)
        shares[n] = p
    return shares


def start_braid(root: Path, users: dict[str, str], wait: float = 10.0, *, share_specs=None,
                server_extra=()) -> Server:
    """Starts braid on a free port. By default shares data, ro and alice_only; share_specs (dicts
    as for braid_config, without path; a memory share gets no directory) and server_extra
    ([server] lines) make custom servers."""
    exe = braid_bin()
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise RuntimeError(f"braid binary not found at {exe} (cargo build --release, or set BRAID_BIN)")
    names = list(users)
    if share_specs is None:
        share_specs = [{"name": "data"}, {"name": "ro", "read_only": True},
                       {"name": "alice_only", "users": [names[0]]}]
    shares = _mk_share_dirs(root, [sh["name"] for sh in share_specs if sh.get("backend") != "memory"])
    port = free_port()
    cfg = root / "braid.toml"
    specs = [dict(sh, path=str(shares[sh["name"]])) if sh["name"] in shares else sh for sh in share_specs]
    cfg.write_text(braid_config(port, users, specs, server_extra))
    log = root / "braid.log"
    env = dict(os.environ, RUST_BACKTRACE="1")
    with open(log, "wb") as lf:
        proc = subprocess.Popen([str(exe), "serve", "--config", str(cfg)], stdin=subprocess.DEVNULL,
                                stdout=lf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    srv = Server("braid", LOCALHOST, port, names[0], users[names[0]], names[1], users[names[1]],
                 shares, root, log, proc)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if port_open(port):
            return srv
        time.sleep(0.05)
    stop_braid(srv)
    raise RuntimeError(f"braid did not listen on {LOCALHOST}:{port} within {wait}s "
                       f"(status {proc.returncode}); log:\n{log.read_text(errors='replace')[-3000:]}")


def test_users() -> dict[str, str]:
    """Users alice and bob with fresh random passwords."""
    return {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}


@contextlib.contextmanager
def running_braid(prefix: str, **kw):
    """braid started as start_braid(root, test_users(), **kw) in a fresh directory; at the
    end stopped, its directory removed, and a crash reported as a failure."""
    root = tmp_dir(prefix)
    srv = start_braid(root, test_users(), **kw)
    try:
        yield srv
    finally:
        problem = stop_braid(srv)
        shutil.rmtree(root, ignore_errors=True)
        assert not problem, problem


def stop_braid(srv: Server) -> str | None:
    """Stops braid; returns a crash description (or None)."""
    problem = srv.health()
    p = srv.proc
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
            problem = problem or None  # a slow shutdown is not a crash
        else:
            rc = p.returncode
            # clean: 0, or killed by our SIGTERM / 128+15
            if rc not in (0, -signal.SIGTERM, 128 + signal.SIGTERM) and problem is None:
                problem = f"braid exited with status {rc}{_sig_name(rc)} on SIGTERM; log: {srv.log}"
    if problem is None and _log_has_panic(srv.log):
        problem = f"braid logged a panic; log: {srv.log}"
    return problem


def start_samba(root: Path, users: dict[str, str]) -> Server:
    names = list(users)
    port = free_port()
    env = dict(os.environ, PORT=str(port), DIR=str(root), SHARE_ROOT=str(root / "shares"),
               USERS=" ".join(f"{u}:{p}" for u, p in users.items()))
    r = subprocess.run(["bash", str(REPO / "scripts" / "samba-peer.sh"), "up"], env=env,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"samba-peer.sh up failed:\n{r.stdout}\n{r.stderr}")
    shares = {n: root / "shares" / n for n in ("data", "ro", "alice_only", "tmp")}
    return Server("samba", LOCALHOST, port, names[0], users[names[0]], names[1], users[names[1]],
                  shares, root, root / "log" / "log.smbd", None, extra={"env": env})


def stop_samba(srv: Server) -> str | None:
    problem = srv.health()
    subprocess.run(["bash", str(REPO / "scripts" / "samba-peer.sh"), "down"], env=srv.extra["env"],
                   capture_output=True, timeout=60)
    return problem


# --------------------------------------------------------------------------------------------
# smbclient (Samba's command line client)
# --------------------------------------------------------------------------------------------

def client_conf(dirpath: Path) -> Path:
    """A private smb.conf for smbclient/smbtorture: the system one never matters."""
    for d in ("lock", "private", "state", "cache", "run", "ncalrpc"):
        (dirpath / d).mkdir(parents=True, exist_ok=True)
    conf = dirpath / "smb.conf"
    conf.write_text(
        "[global]\n  workgroup = WORKGROUP\n  client min protocol = SMB2_02\n"
        "  client max protocol = SMB3\n  disable netbios = yes\n  name resolve order = host\n"
        + "".join(f"  {k} = {dirpath / v}\n" for k, v in (
            ("lock directory", "lock"), ("private dir", "private"), ("state directory", "state"),
            ("cache directory", "cache"), ("pid directory", "run"), ("ncalrpc dir", "ncalrpc"))))
    return conf


@dataclass
class Result:
    rc: int
    out: str

    @property
    def ok(self) -> bool:
        return self.rc == 0 and "NT_STATUS_" not in self.out


def smbclient(srv: Server, conf: Path, share: str | None, cmd: str | None = None, *,
              user: str | None = None, password: str | None = None, extra=(), timeout=60) -> Result:
    user = user or srv.user
    password = srv.password if password is None else password
    args = ["smbclient", "-s", str(conf), "-p", str(srv.port), "-U", f"{user}%{password}"]
    if share is None:
        args += ["-L", f"//{srv.host}"]
    else:
        args += [f"//{srv.host}/{share}"]
    if cmd is not None:
        args += ["-c", cmd]
    args += list(extra)
    try:
        r = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return Result(-999, f"TIMEOUT after {timeout}s\n{out}")
    return Result(r.returncode, r.stdout + r.stderr)


# --------------------------------------------------------------------------------------------
# smbprotocol low level
# --------------------------------------------------------------------------------------------

class Smb:
    """Connection + session + tree connect with smbprotocol's low-level API."""

    def __init__(self, srv: Server, share: str = "data", dialect: int | None = None,
                 user: str | None = None, password: str | None = None, require_signing: bool = True,
                 require_encryption: bool = False, capabilities: int = 0):
        from smbprotocol.connection import Connection
        from smbprotocol.session import Session
        from smbprotocol.tree import TreeConnect

        self.srv = srv
        self.conn = Connection(uuid.uuid4(), srv.host, srv.port, require_signing=require_signing)
        # capabilities: more NEGOTIATE capabilities to offer (e.g. DIRECTORY_LEASING).
        self.conn.client_capabilities |= capabilities
        self.conn.connect(dialect=dialect, timeout=10)
        self.session = self.tree = None
        try:
            self.session = Session(self.conn, user or srv.user,
                                   srv.password if password is None else password,
                                   require_encryption=require_encryption, auth_protocol="ntlm")
            self.session.connect()
            self.tree = TreeConnect(self.session, srv.unc(share))
            self.tree.connect()
        except BaseException:
            self.close()
            raise

    def open(self, name: str, *, access=None, disposition=None, options=None, share_access=None,
             attributes=None, directory=False):
        from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                                      FilePipePrinterAccessMask as A, ImpersonationLevel, Open,
                                      ShareAccess)
        if access is None:
            access = A.GENERIC_READ | A.GENERIC_WRITE | A.DELETE
        if disposition is None:
            disposition = CreateDisposition.FILE_OPEN_IF
        if options is None:
            options = CreateOptions.FILE_DIRECTORY_FILE if directory else CreateOptions.FILE_NON_DIRECTORY_FILE
        if share_access is None:
            share_access = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
        if attributes is None:
            attributes = FileAttributes.FILE_ATTRIBUTE_DIRECTORY if directory else FileAttributes.FILE_ATTRIBUTE_NORMAL
        f = Open(self.tree, name)
        f.create(ImpersonationLevel.Impersonation, access, attributes, share_access, disposition, options)
        return f

    def query_info(self, f, info_class):
        from smbprotocol.open import SMB2QueryInfoRequest, SMB2QueryInfoResponse
        obj = info_class()
        req = SMB2QueryInfoRequest()
        req["info_type"] = obj.INFO_TYPE
        req["file_info_class"] = obj.INFO_CLASS
        req["file_id"] = f.file_id
        req["output_buffer_length"] = 4096
        request = self.conn.send(req, self.session.session_id, self.tree.tree_connect_id)
        resp = self.conn.receive(request)
        q = SMB2QueryInfoResponse()
        q.unpack(resp["data"].get_value())
        return q.parse_buffer(info_class)

    def set_info(self, f, info):
        from smbprotocol.open import SMB2SetInfoRequest, SMB2SetInfoResponse
        req = SMB2SetInfoRequest()
        req["info_type"] = info.INFO_TYPE
        req["file_info_class"] = info.INFO_CLASS
        req["file_id"] = f.file_id
        req["buffer"] = info
        request = self.conn.send(req, self.session.session_id, self.tree.tree_connect_id)
        resp = self.conn.receive(request)
        r = SMB2SetInfoResponse()
        r.unpack(resp["data"].get_value())
        return r

    def close(self):
        for step in (lambda: self.tree and self.tree.disconnect(),
                     lambda: self.session and self.session.disconnect(),
                     lambda: self.conn.disconnect(True)):
            try:
                step()
            except Exception:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv):
    if len(argv) == 2 and argv[0] == "nthash":
        print(nt_hash(argv[1]))
        return 0
    print("usage: harness.py nthash PASSWORD", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
