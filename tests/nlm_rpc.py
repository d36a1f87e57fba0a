"""A small, independent NLM v4 / NSM v1 client for tests, and the client host's side of it.

Written from the protocol documents, not from Braid's code or any other implementation, so
that a test and the server cannot share a mistake:
  - NLM v4: RFC 1813 appendix II and the Open Group's XNFS "Network Lock Manager Protocol"
    (program 100021, version 4, 64-bit offsets, nlm4_stats);
  - NSM v1: XNFS "Network Status Monitor Protocol" (program 100024, version 1);
  - ONC RPC: RFC 5531 (record marking over TCP, one message per UDP datagram, AUTH_SYS);
  - portmapper v2 (RFC 1833 section 3) and rpcbind v3/v4 GETADDR (RFC 1833 section 2).
XDR comes from tests/nfs_rpc.py (Packer, Unpacker), as do the RPC call/reply codecs.

What is here:
  - `NlmClient`: NLM v4 calls over TCP or UDP, AUTH_SYS, from a chosen source address (bind to
    127.0.0.N so that the server sees a distinct client host): NULL, TEST, LOCK, CANCEL, UNLOCK,
    the _MSG variants (the results come back as separate _RES calls to the client host),
    GRANTED_RES, SHARE, UNSHARE, NM_LOCK, FREE_ALL. `Owner` is a lock owner (caller_name, `oh`
    netobj, svid); every call carries a fresh cookie unless one is given.
  - `NsmClient`: NSM v1 NULL, SM_STAT, SM_MON, SM_UNMON, SM_UNMON_ALL, SM_NOTIFY.
  - `ClientHost`: the services a client host runs on its own address, for the server's calls
    back: a portmapper on port 111 (UDP and TCP: portmapper v2 GETPORT, rpcbind v3/v4 GETADDR)
    naming an NLM v4 service and an NSM v1 service (each on one port, UDP and TCP). They
    record every call (`received`), answer GRANTED with a chosen nlm4_stats, answer a
    GRANTED_MSG with a GRANTED_RES call to the server's NLM port (as the protocol wants), and
    record _RES calls and SM_NOTIFY.
Protocol-level failures raise nfs_rpc.RpcError (GARBAGE_ARGS, PROC_UNAVAIL, ...); a reply
that does not decode raises nfs_rpc.XdrError; no reply in time raises TimeoutError.
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import nfs_rpc
from nfs_rpc import (AuthNone, AuthSys, Packer, RpcConn, RpcError, Unpacker, XdrError, decode_reply,
                     encode_call, mark, next_xid)

# --------------------------------------------------------------------------------------------
# constants
# --------------------------------------------------------------------------------------------

PROG_PORTMAP, PROG_NLM, PROG_NSM = 100000, 100021, 100024
PMAP_V2, RPCB_V3, RPCB_V4 = 2, 3, 4
NLM_V4, NSM_V1 = 4, 1
IPPROTO_TCP, IPPROTO_UDP = 6, 17

# portmapper v2 / rpcbind procedures
PMAPPROC_NULL, PMAPPROC_SET, PMAPPROC_UNSET, PMAPPROC_GETPORT, PMAPPROC_DUMP = 0, 1, 2, 3, 4
RPCBPROC_GETADDR = 3
RPCBPROC_GETVERSADDR = 9

# NLM v4 procedures
NLMPROC4_NULL, NLMPROC4_TEST, NLMPROC4_LOCK, NLMPROC4_CANCEL, NLMPROC4_UNLOCK = 0, 1, 2, 3, 4
NLMPROC4_GRANTED = 5
NLMPROC4_TEST_MSG, NLMPROC4_LOCK_MSG, NLMPROC4_CANCEL_MSG, NLMPROC4_UNLOCK_MSG = 6, 7, 8, 9
NLMPROC4_GRANTED_MSG = 10
NLMPROC4_TEST_RES, NLMPROC4_LOCK_RES, NLMPROC4_CANCEL_RES, NLMPROC4_UNLOCK_RES = 11, 12, 13, 14
NLMPROC4_GRANTED_RES = 15
NLMPROC4_SHARE, NLMPROC4_UNSHARE, NLMPROC4_NM_LOCK, NLMPROC4_FREE_ALL = 20, 21, 22, 23
NLM_PROC_NAMES = {v: k[len("NLMPROC4_"):] for k, v in list(globals().items()) if k.startswith("NLMPROC4_")}

# nlm4_stats
NLM4_GRANTED, NLM4_DENIED, NLM4_DENIED_NOLOCKS, NLM4_BLOCKED, NLM4_DENIED_GRACE_PERIOD = 0, 1, 2, 3, 4
NLM4_DEADLCK, NLM4_ROFS, NLM4_STALE_FH, NLM4_FBIG, NLM4_FAILED = 5, 6, 7, 8, 9
NLM4_STAT_NAMES = {v: k for k, v in list(globals().items()) if k.startswith("NLM4_") and isinstance(v, int)}

# fsh4_mode (deny) and fsh4_access, for SHARE
FSM_DN, FSM_DR, FSM_DW, FSM_DRW = 0, 1, 2, 3
FSA_NONE, FSA_R, FSA_W, FSA_RW = 0, 1, 2, 3

# NSM v1 procedures and results
SM_NULL, SM_STAT, SM_MON, SM_UNMON, SM_UNMON_ALL, SM_SIMU_CRASH, SM_NOTIFY = range(7)
STAT_SUCC, STAT_FAIL = 0, 1

LM_MAXSTRLEN = 1024     # caller_name
MAXNETOBJ_SZ = 1024     # netobj (cookie, fh, oh)
SM_MAXSTRLEN = 1024     # NSM names
SM_PRIV_SIZE = 16

RPC_ACCEPT_NAMES = {nfs_rpc.SUCCESS: "SUCCESS", nfs_rpc.PROG_UNAVAIL: "PROG_UNAVAIL",
                    nfs_rpc.PROG_MISMATCH: "PROG_MISMATCH", nfs_rpc.PROC_UNAVAIL: "PROC_UNAVAIL",
                    nfs_rpc.GARBAGE_ARGS: "GARBAGE_ARGS", nfs_rpc.SYSTEM_ERR: "SYSTEM_ERR"}


def stat_name(st: int) -> str:
    return NLM4_STAT_NAMES.get(st, f"nlm4_stats({st})")


def proc_name(proc: int) -> str:
    return NLM_PROC_NAMES.get(proc, str(proc))


# --------------------------------------------------------------------------------------------
# NLM v4 types
# --------------------------------------------------------------------------------------------

_cookies = iter(range(int.from_bytes(os.urandom(3), "big") << 8, 1 << 40))


def new_cookie() -> bytes:
    """An 8-byte cookie no other call of this process used."""
    return next(_cookies).to_bytes(8, "big")


@dataclass
class Owner:
    """A lock owner: the client host's caller_name, the `oh` netobj and the svid (a process id
    on the client). Two owners conflict unless all three (and the client host) match."""
    caller_name: str
    oh: bytes
    svid: int

    @classmethod
    def make(cls, caller_name: str, svid: int) -> "Owner":
        return cls(caller_name, f"{svid}@{caller_name}".encode(), svid)

    def lock(self, fh: bytes, offset: int = 0, length: int = 0) -> "Lock":
        return Lock(self.caller_name, fh, self.oh, self.svid, offset, length)


@dataclass
class Lock:
    """nlm4_lock; length 0 means "to the end of the file and beyond"."""
    caller_name: str
    fh: bytes
    oh: bytes
    svid: int
    offset: int = 0
    length: int = 0

    def encode(self, p: Packer) -> Packer:
        return (p.string(self.caller_name).opaque(self.fh).opaque(self.oh).i32(self.svid)
                .u64(self.offset).u64(self.length))

    @classmethod
    def decode(cls, u: Unpacker) -> "Lock":
        return cls(u.string(LM_MAXSTRLEN).decode(errors="replace"), u.opaque(MAXNETOBJ_SZ),
                   u.opaque(MAXNETOBJ_SZ), u.i32(), u.u64(), u.u64())


@dataclass
class Holder:
    """nlm4_holder: who holds the lock that a TEST ran into."""
    exclusive: bool
    svid: int
    oh: bytes
    offset: int
    length: int


@dataclass
class NlmRes:
    """nlm4_res, nlm4_testres (holder when DENIED) or nlm4_shareres (sequence)."""
    stat: int
    cookie: bytes
    holder: Holder | None = None
    sequence: int | None = None

    @property
    def name(self) -> str:
        return stat_name(self.stat)

    def __repr__(self):
        extra = f", holder={self.holder}" if self.holder else ""
        extra += f", sequence={self.sequence}" if self.sequence is not None else ""
        return f"NlmRes({self.name}, cookie={self.cookie.hex()}{extra})"


def decode_res(u: Unpacker) -> NlmRes:
    return NlmRes(cookie=u.opaque(MAXNETOBJ_SZ), stat=u.u32())


def decode_testres(u: Unpacker) -> NlmRes:
    cookie = u.opaque(MAXNETOBJ_SZ)
    st = u.u32()
    holder = None
    if st == NLM4_DENIED:
        holder = Holder(u.bool(), u.i32(), u.opaque(MAXNETOBJ_SZ), u.u64(), u.u64())
    return NlmRes(st, cookie, holder)


def testargs(cookie: bytes, exclusive: bool, lock: Lock) -> bytes:
    return lock.encode(Packer().opaque(cookie).bool(exclusive)).bytes()


def lockargs(cookie: bytes, block: bool, exclusive: bool, lock: Lock, reclaim: bool, state: int) -> bytes:
    return lock.encode(Packer().opaque(cookie).bool(block).bool(exclusive)).bool(reclaim).i32(state).bytes()


def cancargs(cookie: bytes, block: bool, exclusive: bool, lock: Lock) -> bytes:
    return lock.encode(Packer().opaque(cookie).bool(block).bool(exclusive)).bytes()


def unlockargs(cookie: bytes, lock: Lock) -> bytes:
    return lock.encode(Packer().opaque(cookie)).bytes()


def res_args(cookie: bytes, stat: int) -> bytes:
    """nlm4_res as the arguments of a _RES call (GRANTED_RES from the client)."""
    return Packer().opaque(cookie).u32(stat).bytes()


def shareargs(cookie: bytes, caller_name: str, fh: bytes, oh: bytes, mode: int, access: int,
              reclaim: bool) -> bytes:
    return (Packer().opaque(cookie).string(caller_name).opaque(fh).opaque(oh).u32(mode).u32(access)
            .bool(reclaim).bytes())


# --------------------------------------------------------------------------------------------
# transports: TCP (nfs_rpc.RpcConn) and UDP
# --------------------------------------------------------------------------------------------

class Closing:
    """`with` support for anything with close()."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class UdpRpc(Closing):
    """ONC RPC over UDP from a chosen source address: one call per datagram, the same xid
    retransmitted each `retry` seconds until a reply or the timeout (RFC 5531 leaves
    retransmission to the client)."""

    def __init__(self, host: str, port: int, *, cred=None, timeout: float = 10.0, source: str | None = None,
                 retry: float = 1.0):
        self.addr = (host, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((source or "0.0.0.0", 0))
        self.timeout, self.retry = timeout, retry
        self.cred = cred if cred is not None else AuthSys()
        self.pending: dict[int, bytes] = {}
        self.sent: dict[int, bytes] = {}

    def close(self):
        self.sock.close()

    def send_raw(self, data: bytes):
        self.sock.sendto(data, self.addr)

    def send_call(self, prog: int, vers: int, proc: int, args: bytes = b"", *, xid: int | None = None,
                  cred=None) -> int:
        xid = next_xid() if xid is None else xid
        msg = encode_call(xid, prog, vers, proc, cred or self.cred, args)
        self.sent[xid] = msg
        self.send_raw(msg)
        return xid

    def _recv(self, until: float) -> bool:
        left = until - time.monotonic()
        if left <= 0:
            return False
        self.sock.settimeout(left)
        try:
            data, peer = self.sock.recvfrom(65536)
        except socket.timeout:
            return False
        if peer != self.addr:
            return True  # not from the server we call: ignored
        try:
            rx, _ = decode_reply(data)
        except (XdrError, struct.error):
            return True
        self.pending[rx] = data
        return True

    def wait_reply(self, xid: int, timeout: float | None = None, retransmit: bool = True) -> Unpacker:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        next_send = time.monotonic() + self.retry
        while xid not in self.pending:
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError(f"no UDP reply to xid {xid:#x} from {self.addr} within the timeout")
            if retransmit and now >= next_send and xid in self.sent:
                self.send_raw(self.sent[xid])
                next_send = now + self.retry
            self._recv(min(deadline, next_send if retransmit else deadline))
        self.sent.pop(xid, None)
        _, res = decode_reply(self.pending.pop(xid))
        if isinstance(res, RpcError):
            raise res
        return res

    def reply_within(self, xid: int, timeout: float) -> bytes | None:
        """The raw reply to `xid` if one arrives within `timeout` (no retransmission)."""
        deadline = time.monotonic() + timeout
        while xid not in self.pending and self._recv(deadline):
            pass
        self.sent.pop(xid, None)
        return self.pending.pop(xid, None)

    def call(self, prog: int, vers: int, proc: int, args: bytes = b"", **kw) -> Unpacker:
        timeout = kw.pop("timeout", None)
        return self.wait_reply(self.send_call(prog, vers, proc, args, **kw), timeout)


class TcpRpc(RpcConn):
    """nfs_rpc.RpcConn (record marking), plus reply_within for calls that may get no reply."""

    def reply_within(self, xid: int, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while xid not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not self.readable_within(left):
                return None
            msg = self.recv_record(max(left, 0.01))
            rx, _ = decode_reply(msg)
            self.pending[rx] = msg
        return self.pending.pop(xid)


def connect(host: str, port: int, transport: str, *, source: str | None = None, cred=None,
            timeout: float = 10.0):
    if transport == "tcp":
        return TcpRpc(host, port, cred=cred, timeout=timeout, source=source)
    if transport == "udp":
        return UdpRpc(host, port, cred=cred, timeout=timeout, source=source)
    raise ValueError(f"transport must be tcp or udp, not {transport!r}")


# --------------------------------------------------------------------------------------------
# the NLM v4 client
# --------------------------------------------------------------------------------------------

class NlmClient(Closing):
    """NLM v4 calls to (host, port) over `transport` ("tcp" or "udp") from `source`.
    The AUTH_SYS machine name is the caller_name (`source` unless given)."""

    def __init__(self, host: str, port: int, *, transport: str = "tcp", source: str | None = None,
                 caller_name: str | None = None, cred=None, timeout: float = 10.0):
        self.host, self.port, self.transport, self.source = host, port, transport, source
        self.caller_name = caller_name or source or socket.gethostname()
        self.rpc = connect(host, port, transport, source=source, timeout=timeout,
                           cred=cred if cred is not None else AuthSys(0, 0, machine=self.caller_name))

    def close(self):
        self.rpc.close()

    def owner(self, svid: int, oh: bytes | None = None) -> Owner:
        o = Owner.make(self.caller_name, svid)
        return Owner(o.caller_name, oh, svid) if oh is not None else o

    def call(self, proc: int, args: bytes = b"", **kw) -> Unpacker:
        return self.rpc.call(PROG_NLM, NLM_V4, proc, args, **kw)

    def _done(self, u: Unpacker, res: NlmRes, sent_cookie: bytes) -> NlmRes:
        u.done()
        if res.cookie != sent_cookie:
            raise XdrError(f"reply cookie {res.cookie.hex()} is not the call's {sent_cookie.hex()}")
        return res

    # -- synchronous procedures ------------------------------------------------------------
    def null(self):
        self.call(NLMPROC4_NULL).done()

    def test(self, lock: Lock, exclusive: bool = True, cookie: bytes | None = None) -> NlmRes:
        cookie = new_cookie() if cookie is None else cookie
        u = self.call(NLMPROC4_TEST, testargs(cookie, exclusive, lock))
        return self._done(u, decode_testres(u), cookie)

    def lock(self, lock: Lock, exclusive: bool = True, *, block: bool = False, reclaim: bool = False,
             state: int = 1, cookie: bytes | None = None) -> NlmRes:
        cookie = new_cookie() if cookie is None else cookie
        u = self.call(NLMPROC4_LOCK, lockargs(cookie, block, exclusive, lock, reclaim, state))
        return self._done(u, decode_res(u), cookie)

    def nm_lock(self, lock: Lock, exclusive: bool = True, *, state: int = 0, cookie: bytes | None = None) -> NlmRes:
        """LOCK without monitoring (NM_LOCK: no blocking, no SM_MON of the client)."""
        cookie = new_cookie() if cookie is None else cookie
        u = self.call(NLMPROC4_NM_LOCK, lockargs(cookie, False, exclusive, lock, False, state))
        return self._done(u, decode_res(u), cookie)

    def cancel(self, lock: Lock, exclusive: bool = True, *, block: bool = True,
               cookie: bytes | None = None) -> NlmRes:
        cookie = new_cookie() if cookie is None else cookie
        u = self.call(NLMPROC4_CANCEL, cancargs(cookie, block, exclusive, lock))
        return self._done(u, decode_res(u), cookie)

    def unlock(self, lock: Lock, cookie: bytes | None = None) -> NlmRes:
        cookie = new_cookie() if cookie is None else cookie
        u = self.call(NLMPROC4_UNLOCK, unlockargs(cookie, lock))
        return self._done(u, decode_res(u), cookie)

    def share(self, owner: Owner, fh: bytes, mode: int, access: int, *, reclaim: bool = False,
              cookie: bytes | None = None, proc: int = NLMPROC4_SHARE) -> NlmRes:
        cookie = new_cookie() if cookie is None else cookie
        u = self.call(proc, shareargs(cookie, owner.caller_name, fh, owner.oh, mode, access, reclaim))
        res = NlmRes(cookie=u.opaque(MAXNETOBJ_SZ), stat=u.u32(), sequence=u.i32())
        return self._done(u, res, cookie)

    def unshare(self, owner: Owner, fh: bytes, mode: int, access: int, *, cookie: bytes | None = None) -> NlmRes:
        """UNSHARE, with the mode and access of the SHARE it undoes (nfs-ganesha removes only
        the deny and access bits named here: an UNSHARE with fsm_DN/fsa_NONE leaves the share)."""
        return self.share(owner, fh, mode, access, cookie=cookie, proc=NLMPROC4_UNSHARE)

    def free_all(self, name: str | None = None, state: int = 0):
        """FREE_ALL (nlm4_notify): the server drops every lock and share of host `name`."""
        self.call(NLMPROC4_FREE_ALL, Packer().string(name or self.caller_name).i32(state).bytes()).done()

    # -- asynchronous (_MSG) procedures: the results come as _RES calls to the client host ---
    def send_msg(self, proc: int, args: bytes) -> int:
        """Sends one _MSG (or _RES) call; its results, if any, come back as a separate call to
        the client host. Returns the xid (see `reply_within` for a reply to this call itself)."""
        return self.rpc.send_call(PROG_NLM, NLM_V4, proc, args)

    def test_msg(self, lock: Lock, exclusive: bool = True, cookie: bytes | None = None) -> bytes:
        cookie = new_cookie() if cookie is None else cookie
        self.send_msg(NLMPROC4_TEST_MSG, testargs(cookie, exclusive, lock))
        return cookie

    def lock_msg(self, lock: Lock, exclusive: bool = True, *, block: bool = False, reclaim: bool = False,
                 state: int = 1, cookie: bytes | None = None) -> bytes:
        cookie = new_cookie() if cookie is None else cookie
        self.send_msg(NLMPROC4_LOCK_MSG, lockargs(cookie, block, exclusive, lock, reclaim, state))
        return cookie

    def cancel_msg(self, lock: Lock, exclusive: bool = True, *, block: bool = True,
                   cookie: bytes | None = None) -> bytes:
        cookie = new_cookie() if cookie is None else cookie
        self.send_msg(NLMPROC4_CANCEL_MSG, cancargs(cookie, block, exclusive, lock))
        return cookie

    def unlock_msg(self, lock: Lock, cookie: bytes | None = None) -> bytes:
        cookie = new_cookie() if cookie is None else cookie
        self.send_msg(NLMPROC4_UNLOCK_MSG, unlockargs(cookie, lock))
        return cookie

    def granted_res(self, cookie: bytes, stat: int = NLM4_GRANTED) -> int:
        """The client's answer to a GRANTED_MSG: a new call, GRANTED_RES, with its cookie."""
        return self.send_msg(NLMPROC4_GRANTED_RES, res_args(cookie, stat))

    def reply_within(self, xid: int, timeout: float) -> bytes | None:
        return self.rpc.reply_within(xid, timeout)


# --------------------------------------------------------------------------------------------
# the NSM v1 client
# --------------------------------------------------------------------------------------------

@dataclass
class SmStat:
    res: int      # STAT_SUCC or STAT_FAIL
    state: int    # the NSM state number of the answering host


class NsmClient(Closing):
    """NSM v1 calls to a status monitor (the server host's, for SM_NOTIFY after this client
    host "rebooted")."""

    def __init__(self, host: str, port: int, *, transport: str = "udp", source: str | None = None,
                 timeout: float = 10.0):
        self.rpc = connect(host, port, transport, source=source, timeout=timeout, cred=AuthNone())

    def close(self):
        self.rpc.close()

    def call(self, proc: int, args: bytes = b"", **kw) -> Unpacker:
        return self.rpc.call(PROG_NSM, NSM_V1, proc, args, **kw)

    def null(self):
        self.call(SM_NULL).done()

    def stat(self, mon_name: str) -> SmStat:
        u = self.call(SM_STAT, Packer().string(mon_name).bytes())
        r = SmStat(u.u32(), u.i32())
        u.done()
        return r

    def mon(self, mon_name: str, my_name: str, my_prog: int, my_vers: int, my_proc: int,
            priv: bytes = b"\0" * SM_PRIV_SIZE) -> SmStat:
        p = Packer().string(mon_name).string(my_name).i32(my_prog).i32(my_vers).i32(my_proc)
        u = self.call(SM_MON, p.opaque_fixed(priv.ljust(SM_PRIV_SIZE, b"\0")[:SM_PRIV_SIZE]).bytes())
        r = SmStat(u.u32(), u.i32())
        u.done()
        return r

    def notify(self, mon_name: str, state: int):
        """SM_NOTIFY (stat_chge): host `mon_name` restarted and its NSM state is now `state`."""
        self.call(SM_NOTIFY, Packer().string(mon_name).i32(state).bytes()).done()


# --------------------------------------------------------------------------------------------
# the client host's services: portmapper, NLM callbacks, NSM
# --------------------------------------------------------------------------------------------

@dataclass
class Received:
    """One call that reached the client host."""
    service: str          # "portmap", "nlm" or "nsm"
    transport: str        # "tcp" or "udp"
    peer: tuple[str, int]
    prog: int
    vers: int
    proc: int
    xid: int
    args: bytes           # the raw arguments
    decoded: object = None  # NlmRes / (cookie, exclusive, Lock) / (mon_name, state) / ...
    at: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        if self.service == "nlm":
            return proc_name(self.proc)
        if self.service == "nsm":
            return {SM_NOTIFY: "SM_NOTIFY", SM_NULL: "SM_NULL"}.get(self.proc, f"SM_{self.proc}")
        return f"{self.service}v{self.vers}.{self.proc}"

    def __repr__(self):
        return f"Received({self.name} via {self.transport} from {self.peer[0]}:{self.peer[1]}: {self.decoded!r})"


@dataclass
class Granted:
    """The arguments of a GRANTED / GRANTED_MSG call (nlm4_testargs)."""
    cookie: bytes
    exclusive: bool
    lock: Lock


def _accepted(xid: int, stat: int = nfs_rpc.SUCCESS, body: bytes = b"") -> bytes:
    return Packer().u32(xid).u32(nfs_rpc.REPLY).u32(nfs_rpc.MSG_ACCEPTED).u32(0).opaque(b"").u32(stat).bytes() + body


def _prog_mismatch(xid: int, low: int, high: int) -> bytes:
    return _accepted(xid, nfs_rpc.PROG_MISMATCH, struct.pack(">II", low, high))


class _Reply(Exception):
    """Raised by a handler: send this accept_stat with no results."""

    def __init__(self, stat: int, body: bytes = b""):
        self.stat, self.body = stat, body


class ClientHost(Closing):
    """The services of one client host on address `ip`, for the server's calls back:
      - port 111 (UDP and TCP): portmapper v2 GETPORT and rpcbind v3/v4 GETADDR for NLM v4 and
        NSM v1 (other programs: port 0 / empty address);
      - `nlm_port` (UDP and TCP): NLM v4 callbacks. GRANTED is answered with `granted_stat`;
        GRANTED_MSG gets a void reply and then a GRANTED_RES call (its cookie, `granted_stat`)
        to `server_nlm` = (ip, port, transport) when set, else to the caller's address at
        `server_nlm_port` over UDP; TEST_RES, LOCK_RES, CANCEL_RES, UNLOCK_RES are recorded;
      - `nsm_port` (UDP and TCP): NSM v1, SM_NOTIFY recorded.
    Every call is kept in `received` (thread-safe; `wait_for` polls it). Stop with close()."""

    def __init__(self, ip: str, *, portmap_port: int = 111, server_nlm: tuple[str, int, str] | None = None,
                 granted_stat: int = NLM4_GRANTED, answer_granted_msg: bool = True):
        self.ip = ip
        self.server_nlm = server_nlm
        self.granted_stat = granted_stat
        self.answer_granted_msg = answer_granted_msg
        self.received: list[Received] = []
        self.granted_res_sent: list[tuple[bytes, int]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._sel = selectors.DefaultSelector()
        self._socks: list[socket.socket] = []
        self._stop = False
        try:
            self.portmap_port = self._listen(portmap_port, "portmap")
            self.nlm_port = self._listen_pair("nlm")
            self.nsm_port = self._listen_pair("nsm")
        except Exception:
            self._close_socks()
            raise
        self._thread = threading.Thread(target=self._run, name=f"client-host-{ip}", daemon=True)
        self._thread.start()

    # -- sockets ---------------------------------------------------------------------------
    def _listen(self, port: int, service: str) -> int:
        """UDP and TCP on (ip, port); port 0 picks one free on both."""
        for _ in range(50):
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                u.bind((self.ip, port))
                t.bind((self.ip, u.getsockname()[1]))
            except OSError as e:
                u.close()
                t.close()
                if port:
                    raise OSError(e.errno, f"{self.ip}:{port} ({service}): {e.strerror}") from None
                continue
            t.listen(16)
            for s in (u, t):
                s.setblocking(False)
                self._socks.append(s)
            self._sel.register(u, selectors.EVENT_READ, ("udp", service))
            self._sel.register(t, selectors.EVENT_READ, ("listen", service))
            return u.getsockname()[1]
        raise OSError(f"no port free for both UDP and TCP on {self.ip}")

    def _listen_pair(self, service: str) -> int:
        return self._listen(0, service)

    def _close_socks(self):
        for s in self._socks:
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        self._socks.clear()

    def close(self):
        self._stop = True
        self._thread.join(5)
        self._close_socks()
        self._sel.close()

    # -- the loop --------------------------------------------------------------------------
    def _run(self):
        bufs: dict[socket.socket, bytearray] = {}
        while not self._stop:
            for key, _ in self._sel.select(0.1):
                kind, service = key.data
                s = key.fileobj
                try:
                    if kind == "udp":
                        data, peer = s.recvfrom(65536)
                        out = self._dispatch(service, "udp", peer, data)
                        if out is not None:
                            s.sendto(out, peer)
                    elif kind == "listen":
                        c, _ = s.accept()
                        c.setblocking(False)
                        self._socks.append(c)
                        bufs[c] = bytearray()
                        self._sel.register(c, selectors.EVENT_READ, ("tcp", service))
                    else:
                        self._tcp_read(s, service, bufs)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as e:
                    if kind == "tcp":
                        self._drop(s, bufs)
                    else:
                        self.errors.append(f"{service} {kind}: {e}")

    def _drop(self, s, bufs):
        try:
            self._sel.unregister(s)
        except (KeyError, ValueError):
            pass
        bufs.pop(s, None)
        if s in self._socks:
            self._socks.remove(s)
        s.close()

    def _tcp_read(self, s, service, bufs):
        data = s.recv(65536)
        if not data:
            self._drop(s, bufs)
            return
        buf = bufs[s]
        buf += data
        # records: fragments up to the last-fragment bit (RFC 5531 section 11)
        while True:
            pos, rec, last = 0, bytearray(), False
            while not last and len(buf) >= pos + 4:
                hdr = struct.unpack(">I", buf[pos:pos + 4])[0]
                n, last = hdr & 0x7FFFFFFF, bool(hdr & 0x80000000)
                if len(buf) < pos + 4 + n:
                    return
                rec += buf[pos + 4:pos + 4 + n]
                pos += 4 + n
            if not last:
                return
            del buf[:pos]
            out = self._dispatch(service, "tcp", s.getpeername(), bytes(rec))
            if out is not None:
                s.setblocking(True)
                try:
                    s.sendall(mark(len(out)) + out)
                finally:
                    s.setblocking(False)

    def _dispatch(self, service: str, transport: str, peer, msg: bytes) -> bytes | None:
        """The reply to one call (None: no reply)."""
        try:
            u = Unpacker(msg)
            xid, mtype = u.u32(), u.u32()
            if mtype != nfs_rpc.CALL:
                return None
            rpcvers, prog, vers, proc = u.u32(), u.u32(), u.u32(), u.u32()
            u.u32(); u.opaque(400)  # credential
            u.u32(); u.opaque(400)  # verifier
        except XdrError:
            return None
        if rpcvers != nfs_rpc.RPC_VERS:
            return Packer().u32(xid).u32(nfs_rpc.REPLY).u32(nfs_rpc.MSG_DENIED).u32(nfs_rpc.RPC_MISMATCH) \
                .u32(2).u32(2).bytes()
        args = msg[u.pos:]
        rec = Received(service, transport, tuple(peer[:2]), prog, vers, proc, xid, args)
        handler = {"portmap": self._portmap, "nlm": self._nlm, "nsm": self._nsm}[service]
        try:
            body = handler(rec, Unpacker(args))
            reply = _accepted(xid, nfs_rpc.SUCCESS, body or b"")
        except _Reply as r:
            reply = _accepted(xid, r.stat, r.body)
        except (XdrError, struct.error):
            reply = _accepted(xid, nfs_rpc.GARBAGE_ARGS)
        with self._lock:
            self.received.append(rec)
        return reply

    # -- the services ----------------------------------------------------------------------
    def _port_of(self, prog: int, vers: int) -> int:
        if (prog, vers) == (PROG_NLM, NLM_V4):
            return self.nlm_port
        if (prog, vers) == (PROG_NSM, NSM_V1):
            return self.nsm_port
        return 0

    def _portmap(self, rec: Received, u: Unpacker) -> bytes:
        if rec.prog != PROG_PORTMAP:
            raise _Reply(nfs_rpc.PROG_UNAVAIL)
        if rec.vers not in (PMAP_V2, RPCB_V3, RPCB_V4):
            raise _Reply(nfs_rpc.PROG_MISMATCH, struct.pack(">II", PMAP_V2, RPCB_V4))
        if rec.proc == PMAPPROC_NULL:
            return b""
        if rec.vers == PMAP_V2 and rec.proc == PMAPPROC_GETPORT:
            prog, vers, prot = u.u32(), u.u32(), u.u32()
            u.u32()  # the port field of a GETPORT query is ignored
            rec.decoded = ("GETPORT", prog, vers, {IPPROTO_TCP: "tcp", IPPROTO_UDP: "udp"}.get(prot, prot))
            port = self._port_of(prog, vers) if prot in (IPPROTO_TCP, IPPROTO_UDP) else 0
            return Packer().u32(port).bytes()
        if rec.vers in (RPCB_V3, RPCB_V4) and rec.proc in (RPCBPROC_GETADDR, RPCBPROC_GETVERSADDR):
            prog, vers = u.u32(), u.u32()
            netid = u.string(255).decode(errors="replace")
            u.string(255)
            u.string(255)
            rec.decoded = ("GETADDR", prog, vers, netid)
            port = self._port_of(prog, vers) if netid in ("tcp", "udp") else 0
            uaddr = f"{self.ip}.{port >> 8}.{port & 255}" if port else ""
            return Packer().string(uaddr).bytes()
        raise _Reply(nfs_rpc.PROC_UNAVAIL)

    def _nlm(self, rec: Received, u: Unpacker) -> bytes:
        if rec.prog != PROG_NLM:
            raise _Reply(nfs_rpc.PROG_UNAVAIL)
        if rec.vers != NLM_V4:
            raise _Reply(nfs_rpc.PROG_MISMATCH, struct.pack(">II", NLM_V4, NLM_V4))
        p = rec.proc
        if p == NLMPROC4_NULL:
            return b""
        if p in (NLMPROC4_GRANTED, NLMPROC4_GRANTED_MSG):
            rec.decoded = Granted(u.opaque(MAXNETOBJ_SZ), u.bool(), Lock.decode(u))
            u.done()
            if p == NLMPROC4_GRANTED:
                return Packer().opaque(rec.decoded.cookie).u32(self.granted_stat).bytes()
            if self.answer_granted_msg:
                threading.Thread(target=self._send_granted_res, args=(rec,), daemon=True).start()
            return b""
        if p == NLMPROC4_TEST_RES:
            rec.decoded = decode_testres(u)
        elif p in (NLMPROC4_LOCK_RES, NLMPROC4_CANCEL_RES, NLMPROC4_UNLOCK_RES, NLMPROC4_GRANTED_RES):
            rec.decoded = decode_res(u)
        else:
            raise _Reply(nfs_rpc.PROC_UNAVAIL)
        u.done()
        return b""

    def _send_granted_res(self, rec: Received):
        """GRANTED_RES: a new call to the server's NLM service, with the GRANTED_MSG's cookie."""
        ip, port, transport = self.server_nlm or (rec.peer[0], 0, "udp")
        if not port:
            self.errors.append(f"GRANTED_MSG from {rec.peer}: no server NLM port to send GRANTED_RES to")
            return
        try:
            with NlmClient(ip, port, transport=transport, source=self.ip, timeout=5) as c:
                xid = c.granted_res(rec.decoded.cookie, self.granted_stat)
                self.granted_res_sent.append((rec.decoded.cookie, self.granted_stat))
                c.reply_within(xid, 1.0)  # a void reply or none: both are fine
        except (OSError, RpcError, XdrError) as e:
            self.errors.append(f"GRANTED_RES to {ip}:{port}/{transport}: {e}")

    def _nsm(self, rec: Received, u: Unpacker) -> bytes:
        if rec.prog != PROG_NSM:
            raise _Reply(nfs_rpc.PROG_UNAVAIL)
        if rec.vers != NSM_V1:
            raise _Reply(nfs_rpc.PROG_MISMATCH, struct.pack(">II", NSM_V1, NSM_V1))
        if rec.proc == SM_NULL:
            return b""
        if rec.proc == SM_NOTIFY:
            rec.decoded = (u.string(SM_MAXSTRLEN).decode(errors="replace"), u.i32())
            u.done()
            return b""
        raise _Reply(nfs_rpc.PROC_UNAVAIL)

    # -- for assertions --------------------------------------------------------------------
    def calls(self, service: str | None = None, proc: int | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.received
                    if (service is None or r.service == service) and (proc is None or r.proc == proc)]

    def wait_for(self, service: str, procs, timeout: float, pred=None, since: int = 0) -> Received:
        """The first call to `service` with a procedure in `procs` (after the first `since`
        calls recorded) for which pred(rec) holds; AssertionError after `timeout` seconds."""
        procs = {procs} if isinstance(procs, int) else set(procs)
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                for r in self.received[since:]:
                    if r.service == service and r.proc in procs and (pred is None or pred(r)):
                        return r
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.ip}: no {service} call {sorted(procs)} within {timeout}s; "
                                     f"received {self.received}; errors {self.errors}")
            time.sleep(0.02)

    def mark(self) -> int:
        """A position in `received`, for wait_for(since=...)."""
        with self._lock:
            return len(self.received)
