"""A small, independent ONC RPC / NFSv3 / MOUNTv3 client over TCP, for tests.

Written from the RFCs (RFC 5531: ONC RPC v2, record marking, AUTH_NONE/AUTH_SYS;
RFC 1813: NFS version 3 and MOUNT version 3), not from Braid's code, so that a test and the
server cannot share a mistake. XDR is packed with `struct` (big-endian, 4-byte units).

Every NFS/MOUNT procedure has one method on `Nfs3`; it returns a `Res` whose `status` is the
nfsstat3 (or mountstat3) and whose other attributes are the resok (or resfail) fields.
RPC-level failures (a denied call, an accept_stat other than SUCCESS) raise `RpcError`.
`RpcConn.send_raw` and `RpcConn.send_record` send arbitrary bytes for garbage tests.
"""

from __future__ import annotations

import itertools
import os
import select
import socket
import struct
from dataclasses import dataclass, field

# --------------------------------------------------------------------------------------------
# constants (RFC 5531 and RFC 1813)
# --------------------------------------------------------------------------------------------

RPC_VERS = 2
CALL, REPLY = 0, 1
MSG_ACCEPTED, MSG_DENIED = 0, 1
SUCCESS, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS, SYSTEM_ERR = range(6)
RPC_MISMATCH, AUTH_ERROR = 0, 1
AUTH_OK, AUTH_BADCRED, AUTH_REJECTEDCRED, AUTH_BADVERF, AUTH_REJECTEDVERF, AUTH_TOOWEAK = range(6)
AUTH_NONE_FLAVOR, AUTH_SYS_FLAVOR = 0, 1

PROG_PORTMAP, PROG_NFS, PROG_MOUNT = 100000, 100003, 100005
NFS_V3 = MOUNT_V3 = 3

# NFSv3 procedures
(NFSPROC3_NULL, GETATTR, SETATTR, LOOKUP, ACCESS, READLINK, READ, WRITE, CREATE, MKDIR, SYMLINK,
 MKNOD, REMOVE, RMDIR, RENAME, LINK, READDIR, READDIRPLUS, FSSTAT, FSINFO, PATHCONF,
 COMMIT) = range(22)
# MOUNTv3 procedures
MOUNTPROC3_NULL, MNT, DUMP, UMNT, UMNTALL, EXPORT = range(6)

# nfsstat3
NFS3_OK = 0
NFS3ERR_PERM, NFS3ERR_NOENT, NFS3ERR_IO, NFS3ERR_NXIO = 1, 2, 5, 6
NFS3ERR_ACCES, NFS3ERR_EXIST, NFS3ERR_XDEV, NFS3ERR_NODEV = 13, 17, 18, 19
NFS3ERR_NOTDIR, NFS3ERR_ISDIR, NFS3ERR_INVAL, NFS3ERR_FBIG = 20, 21, 22, 27
NFS3ERR_NOSPC, NFS3ERR_ROFS, NFS3ERR_MLINK, NFS3ERR_NAMETOOLONG = 28, 30, 31, 63
NFS3ERR_NOTEMPTY, NFS3ERR_DQUOT, NFS3ERR_STALE, NFS3ERR_REMOTE = 66, 69, 70, 71
NFS3ERR_BADHANDLE, NFS3ERR_NOT_SYNC, NFS3ERR_BAD_COOKIE, NFS3ERR_NOTSUPP = 10001, 10002, 10003, 10004
NFS3ERR_TOOSMALL, NFS3ERR_SERVERFAULT, NFS3ERR_BADTYPE, NFS3ERR_JUKEBOX = 10005, 10006, 10007, 10008

# mountstat3
MNT3_OK, MNT3ERR_PERM, MNT3ERR_NOENT, MNT3ERR_IO, MNT3ERR_ACCES = 0, 1, 2, 5, 13
MNT3ERR_NOTDIR, MNT3ERR_INVAL, MNT3ERR_NAMETOOLONG = 20, 22, 63
MNT3ERR_NOTSUPP, MNT3ERR_SERVERFAULT = 10004, 10006

# ftype3
NF3REG, NF3DIR, NF3BLK, NF3CHR, NF3LNK, NF3SOCK, NF3FIFO = range(1, 8)
# ACCESS bits
ACCESS3_READ, ACCESS3_LOOKUP, ACCESS3_MODIFY = 0x01, 0x02, 0x04
ACCESS3_EXTEND, ACCESS3_DELETE, ACCESS3_EXECUTE = 0x08, 0x10, 0x20
ACCESS3_ALL = 0x3F
# stable_how
UNSTABLE, DATA_SYNC, FILE_SYNC = 0, 1, 2
# createmode3
UNCHECKED, GUARDED, EXCLUSIVE = 0, 1, 2
# time_how
DONT_CHANGE, SET_TO_SERVER_TIME, SET_TO_CLIENT_TIME = 0, 1, 2

NFS3_FHSIZE = 64
MAX_RECORD = 4 << 20  # what this client accepts from a server

STATUS_NAMES = {v: k for k, v in list(globals().items())
                if k.startswith(("NFS3ERR_", "NFS3_OK")) and isinstance(v, int)}


def status_name(st: int) -> str:
    return STATUS_NAMES.get(st, str(st))


# --------------------------------------------------------------------------------------------
# XDR (RFC 4506)
# --------------------------------------------------------------------------------------------

class XdrError(Exception):
    """A reply too short or malformed for what was expected."""


def _pad(n: int) -> int:
    return (4 - n % 4) % 4


class Packer:
    def __init__(self):
        self.buf = bytearray()

    def u32(self, v: int) -> "Packer":
        self.buf += struct.pack(">I", v & 0xFFFFFFFF)
        return self

    def i32(self, v: int) -> "Packer":
        self.buf += struct.pack(">i", v)
        return self

    def u64(self, v: int) -> "Packer":
        self.buf += struct.pack(">Q", v & 0xFFFFFFFFFFFFFFFF)
        return self

    def bool(self, v: bool) -> "Packer":
        return self.u32(1 if v else 0)

    def opaque_fixed(self, b: bytes) -> "Packer":
        self.buf += b + b"\0" * _pad(len(b))
        return self

    def opaque(self, b: bytes) -> "Packer":
        self.u32(len(b))
        return self.opaque_fixed(b)

    def string(self, s: str | bytes) -> "Packer":
        return self.opaque(s.encode() if isinstance(s, str) else s)

    def raw(self, b: bytes) -> "Packer":
        self.buf += b
        return self

    def bytes(self) -> bytes:
        return bytes(self.buf)


class Unpacker:
    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise XdrError(f"need {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32(self) -> int:
        return struct.unpack(">I", self._take(4))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def u64(self) -> int:
        return struct.unpack(">Q", self._take(8))[0]

    def bool(self) -> bool:
        v = self.u32()
        if v > 1:
            raise XdrError(f"bool {v}")
        return v == 1

    def opaque_fixed(self, n: int) -> bytes:
        b = self._take(n)
        pad = self._take(_pad(n))
        if pad.strip(b"\0"):
            raise XdrError("non-zero XDR padding")
        return b

    def opaque(self, maxlen: int | None = None) -> bytes:
        n = self.u32()
        if maxlen is not None and n > maxlen:
            raise XdrError(f"opaque of {n} bytes over its bound {maxlen}")
        return self.opaque_fixed(n)

    def string(self, maxlen: int | None = None) -> bytes:
        return self.opaque(maxlen)

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def done(self):
        if self.remaining():
            raise XdrError(f"{self.remaining()} bytes left over")


# --------------------------------------------------------------------------------------------
# RPC: credentials, calls, replies, record marking
# --------------------------------------------------------------------------------------------

@dataclass
class AuthNone:
    def encode(self, p: Packer):
        p.u32(AUTH_NONE_FLAVOR).opaque(b"")


@dataclass
class AuthSys:
    uid: int = 0
    gid: int = 0
    gids: list[int] = field(default_factory=list)
    machine: str = "braid-test"
    stamp: int = 0x5EED

    def encode(self, p: Packer):
        body = Packer().u32(self.stamp).string(self.machine).u32(self.uid).u32(self.gid)
        body.u32(len(self.gids))
        for g in self.gids:
            body.u32(g)
        p.u32(AUTH_SYS_FLAVOR).opaque(body.bytes())


@dataclass
class AuthRaw:
    """Any flavor with any body (for tests of unknown flavors and malformed credentials)."""
    flavor: int
    body: bytes = b""

    def encode(self, p: Packer):
        p.u32(self.flavor).opaque(self.body)


class RpcError(Exception):
    """A call the server did not execute: denied (RPC_MISMATCH, AUTH_ERROR) or accepted with a
    status other than SUCCESS. `kind` is "denied" or "accepted"; `stat` the reject_stat or
    accept_stat; `detail` the auth_stat or the (low, high) version pair where there is one."""

    def __init__(self, kind: str, stat: int, detail=None):
        self.kind, self.stat, self.detail = kind, stat, detail
        super().__init__(f"RPC {kind} stat={stat} detail={detail}")


def encode_call(xid: int, prog: int, vers: int, proc: int, cred, args: bytes, verf=None) -> bytes:
    p = Packer().u32(xid).u32(CALL).u32(RPC_VERS).u32(prog).u32(vers).u32(proc)
    cred.encode(p)
    (verf or AuthNone()).encode(p)
    return p.bytes() + args


def decode_reply(msg: bytes) -> tuple[int, Unpacker | RpcError]:
    """(xid, an Unpacker at the results) or (xid, the RpcError the reply says)."""
    u = Unpacker(msg)
    xid = u.u32()
    if u.u32() != REPLY:
        raise XdrError("not a REPLY")
    stat = u.u32()
    if stat == MSG_DENIED:
        rs = u.u32()
        if rs == RPC_MISMATCH:
            return xid, RpcError("denied", rs, (u.u32(), u.u32()))
        if rs == AUTH_ERROR:
            return xid, RpcError("denied", rs, u.u32())
        raise XdrError(f"reject_stat {rs}")
    if stat != MSG_ACCEPTED:
        raise XdrError(f"reply_stat {stat}")
    u.u32()
    u.opaque(400)  # verifier (RFC 5531: body at most 400 bytes)
    ast = u.u32()
    if ast == SUCCESS:
        return xid, u
    if ast == PROG_MISMATCH:
        return xid, RpcError("accepted", ast, (u.u32(), u.u32()))
    return xid, RpcError("accepted", ast)


def mark(length: int, last: bool = True) -> bytes:
    """A record-marking header (RFC 5531 section 11)."""
    return struct.pack(">I", (0x80000000 if last else 0) | length)


_xids = itertools.count(int.from_bytes(os.urandom(3), "big") << 4)


def next_xid() -> int:
    return next(_xids) & 0xFFFFFFFF


class RpcConn:
    """One TCP connection: record-marked calls out, replies in (matched by xid)."""

    def __init__(self, host: str, port: int, *, cred=None, timeout: float = 10.0, source: str | None = None):
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.cred = cred if cred is not None else AuthSys()
        self.pending: dict[int, bytes] = {}
        self._buf = bytearray()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- raw bytes -------------------------------------------------------------------------
    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send_record(self, msg: bytes, fragments: int = 1):
        """Sends one record, split into `fragments` fragments."""
        n = max(1, fragments)
        step = max(1, -(-len(msg) // n))
        pieces = [msg[i:i + step] for i in range(0, len(msg), step)] or [b""]
        out = bytearray()
        for i, piece in enumerate(pieces):
            out += mark(len(piece), i == len(pieces) - 1) + piece
        self.sock.sendall(bytes(out))

    def _fill(self, n: int, deadline_s: float):
        self.sock.settimeout(deadline_s)
        while len(self._buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self._buf += chunk

    def recv_record(self, timeout: float | None = None) -> bytes:
        t = self.timeout if timeout is None else timeout
        rec = bytearray()
        while True:
            self._fill(4, t)
            hdr = struct.unpack(">I", self._buf[:4])[0]
            n = hdr & 0x7FFFFFFF
            if len(rec) + n > MAX_RECORD:
                raise XdrError(f"reply record over {MAX_RECORD} bytes")
            self._fill(4 + n, t)
            rec += self._buf[4:4 + n]
            del self._buf[:4 + n]
            if hdr & 0x80000000:
                return bytes(rec)

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True when the server closes the connection (EOF or reset) within `timeout`; bytes
        that arrive first are read and dropped."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def readable_within(self, timeout: float) -> bool:
        if self._buf:
            return True
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    # -- calls -----------------------------------------------------------------------------
    def send_call(self, prog: int, vers: int, proc: int, args: bytes = b"", *, xid: int | None = None,
                  cred=None, fragments: int = 1) -> int:
        xid = next_xid() if xid is None else xid
        self.send_record(encode_call(xid, prog, vers, proc, cred or self.cred, args), fragments)
        return xid

    def wait_reply(self, xid: int, timeout: float | None = None) -> Unpacker:
        """The results of call `xid`; replies to other calls are kept for their own wait."""
        while xid not in self.pending:
            msg = self.recv_record(timeout)
            rx, _ = decode_reply(msg)
            self.pending[rx] = msg
        _, res = decode_reply(self.pending.pop(xid))
        if isinstance(res, RpcError):
            raise res
        return res

    def call(self, prog: int, vers: int, proc: int, args: bytes = b"", **kw) -> Unpacker:
        timeout = kw.pop("timeout", None)
        return self.wait_reply(self.send_call(prog, vers, proc, args, **kw), timeout)


# --------------------------------------------------------------------------------------------
# NFSv3 / MOUNTv3 types
# --------------------------------------------------------------------------------------------

@dataclass
class Fattr3:
    type: int
    mode: int
    nlink: int
    uid: int
    gid: int
    size: int
    used: int
    rdev: tuple[int, int]
    fsid: int
    fileid: int
    atime: tuple[int, int]
    mtime: tuple[int, int]
    ctime: tuple[int, int]


def _time(u: Unpacker) -> tuple[int, int]:
    return (u.u32(), u.u32())


def fattr3(u: Unpacker) -> Fattr3:
    return Fattr3(u.u32(), u.u32(), u.u32(), u.u32(), u.u32(), u.u64(), u.u64(), (u.u32(), u.u32()),
                  u.u64(), u.u64(), _time(u), _time(u), _time(u))


def post_op_attr(u: Unpacker) -> Fattr3 | None:
    return fattr3(u) if u.bool() else None


@dataclass
class WccAttr:
    size: int
    mtime: tuple[int, int]
    ctime: tuple[int, int]


@dataclass
class WccData:
    before: WccAttr | None
    after: Fattr3 | None


def wcc_data(u: Unpacker) -> WccData:
    before = WccAttr(u.u64(), _time(u), _time(u)) if u.bool() else None
    return WccData(before, post_op_attr(u))


def post_op_fh3(u: Unpacker) -> bytes | None:
    return u.opaque(NFS3_FHSIZE) if u.bool() else None


@dataclass
class Sattr3:
    """Attributes to set; None leaves one unchanged. atime/mtime: None, "server" or (s, ns)."""
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    size: int | None = None
    atime: object = None
    mtime: object = None

    def encode(self, p: Packer):
        for v in (self.mode, self.uid, self.gid):
            p.bool(v is not None)
            if v is not None:
                p.u32(v)
        p.bool(self.size is not None)
        if self.size is not None:
            p.u64(self.size)
        for t in (self.atime, self.mtime):
            if t is None:
                p.u32(DONT_CHANGE)
            elif t == "server":
                p.u32(SET_TO_SERVER_TIME)
            else:
                p.u32(SET_TO_CLIENT_TIME).u32(t[0]).u32(t[1])


class Res:
    """A procedure's result: `status` plus the fields the reply carried."""

    def __init__(self, status: int, **fields):
        self.status = status
        self.__dict__.update(fields)

    @property
    def ok(self) -> bool:
        return self.status == 0

    def __repr__(self):
        body = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k != "status")
        return f"Res({status_name(self.status)}{', ' if body else ''}{body})"


@dataclass
class Entry:
    fileid: int
    name: bytes
    cookie: int
    attr: Fattr3 | None = None
    fh: bytes | None = None


def _fh(p: Packer, fh: bytes) -> Packer:
    return p.opaque(fh)


def _diropargs(p: Packer, dirfh: bytes, name) -> Packer:
    return p.opaque(dirfh).string(name)


# --------------------------------------------------------------------------------------------
# the client
# --------------------------------------------------------------------------------------------

class Nfs3:
    """NFSv3 and MOUNTv3 over one connection (`nfs_port`), MOUNT over its own connection when
    the server has a separate `mount_port` (nfs-ganesha)."""

    def __init__(self, host: str, port: int, *, mount_port: int | None = None, cred=None,
                 timeout: float = 10.0, source: str | None = None):
        self.rpc = RpcConn(host, port, cred=cred, timeout=timeout, source=source)
        self.mrpc = self.rpc
        if mount_port is not None and mount_port != port:
            self.mrpc = RpcConn(host, mount_port, cred=cred, timeout=timeout, source=source)

    def close(self):
        self.rpc.close()
        if self.mrpc is not self.rpc:
            self.mrpc.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def cred(self):
        return self.rpc.cred

    @cred.setter
    def cred(self, c):
        self.rpc.cred = self.mrpc.cred = c

    def nfs(self, proc: int, args: bytes, **kw) -> Unpacker:
        return self.rpc.call(PROG_NFS, NFS_V3, proc, args, **kw)

    # -- MOUNT v3 --------------------------------------------------------------------------
    def mount_null(self):
        self.mrpc.call(PROG_MOUNT, MOUNT_V3, MOUNTPROC3_NULL).done()

    def mnt(self, path: str) -> Res:
        u = self.mrpc.call(PROG_MOUNT, MOUNT_V3, MNT, Packer().string(path).bytes())
        st = u.u32()
        if st != MNT3_OK:
            return Res(st)
        fh = u.opaque(NFS3_FHSIZE)
        flavors = [u.u32() for _ in range(u.u32())]
        return Res(st, fh=fh, flavors=flavors)

    def root(self, path: str) -> bytes:
        r = self.mnt(path)
        assert r.ok, f"MNT {path}: mountstat3 {r.status}"
        return r.fh

    def umnt(self, path: str):
        self.mrpc.call(PROG_MOUNT, MOUNT_V3, UMNT, Packer().string(path).bytes()).done()

    def umntall(self):
        self.mrpc.call(PROG_MOUNT, MOUNT_V3, UMNTALL).done()

    def dump(self) -> list[tuple[bytes, bytes]]:
        u = self.mrpc.call(PROG_MOUNT, MOUNT_V3, DUMP)
        out = []
        while u.bool():
            out.append((u.string(255), u.string(1024)))
        return out

    def export(self) -> list[tuple[bytes, list[bytes]]]:
        u = self.mrpc.call(PROG_MOUNT, MOUNT_V3, EXPORT)
        out = []
        while u.bool():
            d = u.string(1024)
            groups = []
            while u.bool():
                groups.append(u.string(255))
            out.append((d, groups))
        return out

    # -- NFS v3 ----------------------------------------------------------------------------
    def null(self):
        self.nfs(NFSPROC3_NULL, b"").done()

    def getattr(self, fh: bytes, **kw) -> Res:
        u = self.nfs(GETATTR, _fh(Packer(), fh).bytes(), **kw)
        st = u.u32()
        return Res(st, attr=fattr3(u)) if st == NFS3_OK else Res(st)

    def setattr(self, fh: bytes, attrs: Sattr3, guard_ctime: tuple[int, int] | None = None) -> Res:
        p = _fh(Packer(), fh)
        attrs.encode(p)
        p.bool(guard_ctime is not None)
        if guard_ctime is not None:
            p.u32(guard_ctime[0]).u32(guard_ctime[1])
        u = self.nfs(SETATTR, p.bytes())
        return Res(u.u32(), wcc=wcc_data(u))

    def lookup(self, dirfh: bytes, name) -> Res:
        u = self.nfs(LOOKUP, _diropargs(Packer(), dirfh, name).bytes())
        st = u.u32()
        if st == NFS3_OK:
            return Res(st, fh=u.opaque(NFS3_FHSIZE), attr=post_op_attr(u), dir_attr=post_op_attr(u))
        return Res(st, dir_attr=post_op_attr(u))

    def access(self, fh: bytes, bits: int = ACCESS3_ALL) -> Res:
        u = self.nfs(ACCESS, _fh(Packer(), fh).u32(bits).bytes())
        st = u.u32()
        attr = post_op_attr(u)
        return Res(st, attr=attr, access=u.u32()) if st == NFS3_OK else Res(st, attr=attr)

    def readlink(self, fh: bytes) -> Res:
        u = self.nfs(READLINK, _fh(Packer(), fh).bytes())
        st = u.u32()
        attr = post_op_attr(u)
        return Res(st, attr=attr, data=u.string()) if st == NFS3_OK else Res(st, attr=attr)

    def read(self, fh: bytes, offset: int, count: int) -> Res:
        u = self.nfs(READ, _fh(Packer(), fh).u64(offset).u32(count).bytes())
        st = u.u32()
        attr = post_op_attr(u)
        if st != NFS3_OK:
            return Res(st, attr=attr)
        n, eof = u.u32(), u.bool()
        data = u.opaque()
        assert n == len(data), f"READ count {n} but {len(data)} data bytes"
        return Res(st, attr=attr, count=n, eof=eof, data=data)

    def write(self, fh: bytes, offset: int, data: bytes, stable: int = FILE_SYNC,
              count: int | None = None, **kw) -> Res:
        p = _fh(Packer(), fh).u64(offset).u32(len(data) if count is None else count).u32(stable).opaque(data)
        u = self.nfs(WRITE, p.bytes(), **kw)
        st = u.u32()
        wcc = wcc_data(u)
        if st != NFS3_OK:
            return Res(st, wcc=wcc)
        return Res(st, wcc=wcc, count=u.u32(), committed=u.u32(), verf=u.opaque_fixed(8))

    def _created(self, u: Unpacker) -> Res:
        st = u.u32()
        if st == NFS3_OK:
            return Res(st, fh=post_op_fh3(u), attr=post_op_attr(u), dir_wcc=wcc_data(u))
        return Res(st, dir_wcc=wcc_data(u))

    def create_args(self, dirfh: bytes, name, how: int = UNCHECKED, attrs: Sattr3 | None = None,
                    verf: bytes = b"") -> bytes:
        p = _diropargs(Packer(), dirfh, name).u32(how)
        if how == EXCLUSIVE:
            p.opaque_fixed(verf.ljust(8, b"\0")[:8])
        else:
            (attrs or Sattr3()).encode(p)
        return p.bytes()

    def create(self, dirfh: bytes, name, how: int = UNCHECKED, attrs: Sattr3 | None = None,
               verf: bytes = b"", **kw) -> Res:
        return self._created(self.nfs(CREATE, self.create_args(dirfh, name, how, attrs, verf), **kw))

    def mkdir(self, dirfh: bytes, name, attrs: Sattr3 | None = None) -> Res:
        p = _diropargs(Packer(), dirfh, name)
        (attrs or Sattr3()).encode(p)
        return self._created(self.nfs(MKDIR, p.bytes()))

    def symlink(self, dirfh: bytes, name, target, attrs: Sattr3 | None = None) -> Res:
        p = _diropargs(Packer(), dirfh, name)
        (attrs or Sattr3()).encode(p)
        p.string(target)
        return self._created(self.nfs(SYMLINK, p.bytes()))

    def mknod(self, dirfh: bytes, name, ftype: int, attrs: Sattr3 | None = None,
              rdev: tuple[int, int] = (0, 0)) -> Res:
        p = _diropargs(Packer(), dirfh, name).u32(ftype)
        if ftype in (NF3CHR, NF3BLK):
            (attrs or Sattr3()).encode(p)
            p.u32(rdev[0]).u32(rdev[1])
        elif ftype in (NF3SOCK, NF3FIFO):
            (attrs or Sattr3()).encode(p)
        return self._created(self.nfs(MKNOD, p.bytes()))

    def remove(self, dirfh: bytes, name) -> Res:
        u = self.nfs(REMOVE, _diropargs(Packer(), dirfh, name).bytes())
        return Res(u.u32(), dir_wcc=wcc_data(u))

    def rmdir(self, dirfh: bytes, name) -> Res:
        u = self.nfs(RMDIR, _diropargs(Packer(), dirfh, name).bytes())
        return Res(u.u32(), dir_wcc=wcc_data(u))

    def rename(self, fromdir: bytes, fromname, todir: bytes, toname) -> Res:
        p = _diropargs(_diropargs(Packer(), fromdir, fromname), todir, toname)
        u = self.nfs(RENAME, p.bytes())
        return Res(u.u32(), from_wcc=wcc_data(u), to_wcc=wcc_data(u))

    def link(self, fh: bytes, dirfh: bytes, name) -> Res:
        u = self.nfs(LINK, _diropargs(_fh(Packer(), fh), dirfh, name).bytes())
        return Res(u.u32(), attr=post_op_attr(u), dir_wcc=wcc_data(u))

    def readdir(self, dirfh: bytes, cookie: int = 0, verf: bytes = b"\0" * 8, count: int = 8192) -> Res:
        u = self.nfs(READDIR, _fh(Packer(), dirfh).u64(cookie).opaque_fixed(verf).u32(count).bytes())
        st = u.u32()
        attr = post_op_attr(u)
        if st != NFS3_OK:
            return Res(st, attr=attr)
        verf = u.opaque_fixed(8)
        entries = []
        while u.bool():
            entries.append(Entry(u.u64(), u.string(), u.u64()))
        return Res(st, attr=attr, verf=verf, entries=entries, eof=u.bool())

    def readdirplus(self, dirfh: bytes, cookie: int = 0, verf: bytes = b"\0" * 8, dircount: int = 4096,
                    maxcount: int = 32768) -> Res:
        p = _fh(Packer(), dirfh).u64(cookie).opaque_fixed(verf).u32(dircount).u32(maxcount)
        u = self.nfs(READDIRPLUS, p.bytes())
        st = u.u32()
        attr = post_op_attr(u)
        if st != NFS3_OK:
            return Res(st, attr=attr)
        verf = u.opaque_fixed(8)
        entries = []
        while u.bool():
            fileid, name, cookie = u.u64(), u.string(), u.u64()
            entries.append(Entry(fileid, name, cookie, post_op_attr(u), post_op_fh3(u)))
        return Res(st, attr=attr, verf=verf, entries=entries, eof=u.bool())

    def list_all(self, dirfh: bytes, plus: bool = True, count: int = 8192) -> list[Entry]:
        """Every entry of a directory, following cookies until eof."""
        out, cookie, verf = [], 0, b"\0" * 8
        for _ in range(100000):
            r = (self.readdirplus(dirfh, cookie, verf, count, count * 4) if plus
                 else self.readdir(dirfh, cookie, verf, count))
            assert r.ok, f"READDIR: {r}"
            out += r.entries
            if r.eof:
                return out
            assert r.entries, "READDIR: no entries and no eof"
            cookie, verf = r.entries[-1].cookie, r.verf
        raise AssertionError("READDIR never reached eof")

    def fsstat(self, fh: bytes) -> Res:
        u = self.nfs(FSSTAT, _fh(Packer(), fh).bytes())
        st = u.u32()
        attr = post_op_attr(u)
        if st != NFS3_OK:
            return Res(st, attr=attr)
        return Res(st, attr=attr, tbytes=u.u64(), fbytes=u.u64(), abytes=u.u64(), tfiles=u.u64(),
                   ffiles=u.u64(), afiles=u.u64(), invarsec=u.u32())

    def fsinfo(self, fh: bytes) -> Res:
        u = self.nfs(FSINFO, _fh(Packer(), fh).bytes())
        st = u.u32()
        attr = post_op_attr(u)
        if st != NFS3_OK:
            return Res(st, attr=attr)
        return Res(st, attr=attr, rtmax=u.u32(), rtpref=u.u32(), rtmult=u.u32(), wtmax=u.u32(),
                   wtpref=u.u32(), wtmult=u.u32(), dtpref=u.u32(), maxfilesize=u.u64(),
                   time_delta=_time(u), properties=u.u32())

    def pathconf(self, fh: bytes) -> Res:
        u = self.nfs(PATHCONF, _fh(Packer(), fh).bytes())
        st = u.u32()
        attr = post_op_attr(u)
        if st != NFS3_OK:
            return Res(st, attr=attr)
        return Res(st, attr=attr, linkmax=u.u32(), name_max=u.u32(), no_trunc=u.bool(),
                   chown_restricted=u.bool(), case_insensitive=u.bool(), case_preserving=u.bool())

    def commit(self, fh: bytes, offset: int = 0, count: int = 0) -> Res:
        u = self.nfs(COMMIT, _fh(Packer(), fh).u64(offset).u32(count).bytes())
        st = u.u32()
        wcc = wcc_data(u)
        return Res(st, wcc=wcc, verf=u.opaque_fixed(8)) if st == NFS3_OK else Res(st, wcc=wcc)

    # -- conveniences ----------------------------------------------------------------------
    def walk(self, root: bytes, path: str) -> bytes:
        fh = root
        for part in [p for p in path.split("/") if p]:
            r = self.lookup(fh, part)
            assert r.ok, f"LOOKUP {part} in {path}: {r}"
            fh = r.fh
        return fh

    def read_all(self, fh: bytes, chunk: int = 65536) -> bytes:
        out, off = bytearray(), 0
        while True:
            r = self.read(fh, off, chunk)
            assert r.ok, f"READ at {off}: {r}"
            out += r.data
            off += r.count
            if r.eof:
                return bytes(out)
            assert r.count, "READ: 0 bytes and no eof"

    def write_all(self, fh: bytes, data: bytes, chunk: int = 65536, stable: int = FILE_SYNC):
        for off in range(0, len(data), chunk):
            r = self.write(fh, off, data[off:off + chunk], stable)
            assert r.ok, f"WRITE at {off}: {r}"
            assert r.count == len(data[off:off + chunk]), f"short WRITE at {off}: {r.count}"
