#!/usr/bin/env python3
"""cb-probe.py ADDR [--notify STATE] : what an NLM/NSM server does to call a client back, aimed
at a guest's callback forwards (run.sh KC_NLM_CALLBACK=ADDR): ask the portmapper at ADDR:111
(PMAPPROC_GETPORT, v2, the answer is a port only) where the client's NLM v4 and NSM v1 are,
over TCP and over UDP, then call their NULL procedure there over the same transport.
--notify STATE also sends SM_NOTIFY(mon_name=kcserver-probe, state=STATE) to the client's
statd over TCP and UDP (statd takes it for the server it monitors when the sender's address
or mon_name resolves to that server: the guest's SNAT makes the sender 10.0.2.100).
Prints one PROBE line per call: ok=1 when a reply came."""

import os
import socket
import struct
import sys

ADDR = sys.argv[1]
NOTIFY = int(sys.argv[sys.argv.index("--notify") + 1]) if "--notify" in sys.argv else None
TIMEOUT = 4.0
PMAP, NLM, NSM = 100000, 100021, 100024


def call_bytes(xid, prog, vers, proc, args=b""):
    # xid, CALL, rpcvers 2, prog, vers, proc, cred AUTH_NONE, verf AUTH_NONE
    return struct.pack(">IIIIIIIIII", xid, 0, 2, prog, vers, proc, 0, 0, 0, 0) + args


def reply_body(data, xid):
    x, mtype, stat = struct.unpack(">III", data[:12])
    if x != xid or mtype != 1 or stat != 0:
        raise RuntimeError(f"bad reply xid={x} mtype={mtype} reply_stat={stat}")
    flavor, vlen = struct.unpack(">II", data[12:20])
    off = 20 + (vlen + 3) // 4 * 4
    (accept,) = struct.unpack(">I", data[off:off + 4])
    if accept != 0:
        raise RuntimeError(f"accept_stat={accept}")
    return data[off + 4:]


def call(port, prog, vers, proc, args=b"", tcp=True):
    xid = int.from_bytes(os.urandom(4), "big")
    msg = call_bytes(xid, prog, vers, proc, args)
    if tcp:
        with socket.create_connection((ADDR, port), timeout=TIMEOUT) as s:
            s.sendall(struct.pack(">I", 0x80000000 | len(msg)) + msg)
            buf = b""
            while True:
                hdr = b""
                while len(hdr) < 4:
                    c = s.recv(4 - len(hdr))
                    if not c:
                        raise RuntimeError("connection closed")
                    hdr += c
                (m,) = struct.unpack(">I", hdr)
                n = m & 0x7FFFFFFF
                while n:
                    c = s.recv(n)
                    if not c:
                        raise RuntimeError("connection closed")
                    buf += c
                    n -= len(c)
                if m & 0x80000000:
                    return reply_body(buf, xid)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(TIMEOUT)
        s.sendto(msg, (ADDR, port))
        data, _ = s.recvfrom(65536)
        return reply_body(data, xid)


def probe(name, fn):
    try:
        r = fn()
        print(f"PROBE {name} ok=1 {r}", flush=True)
        return r
    except Exception as e:  # noqa: BLE001 - every failure is a result here
        print(f"PROBE {name} ok=0 error={type(e).__name__}:{e}", flush=True)
        return None


for tcp in (True, False):
    t = "tcp" if tcp else "udp"
    ports = {}
    for prog, vers in ((NLM, 4), (NSM, 1)):
        args = struct.pack(">IIII", prog, vers, 6 if tcp else 17, 0)
        r = probe(f"{t} getport prog={prog} vers={vers} at {ADDR}:111",
                  lambda: "port=%d" % struct.unpack(">I", call(111, PMAP, 2, 3, args, tcp)[:4]))
        if r:
            ports[prog] = int(r.split("=")[1])
    for prog, vers in ((NLM, 4), (NSM, 1)):
        if ports.get(prog):
            probe(f"{t} null prog={prog} vers={vers} at {ADDR}:{ports[prog]}",
                  lambda: "reply" if call(ports[prog], prog, vers, 0, b"", tcp) is not None else "")
    if NOTIFY is not None:
        name = b"kcserver-probe"
        args = struct.pack(">I", len(name)) + name + b"\0" * ((4 - len(name) % 4) % 4) + struct.pack(">I", NOTIFY + (0 if tcp else 2))
        port = ports.get(NSM) or int(os.environ.get("KC_STATD_PORT", "30003"))
        probe(f"{t} sm_notify state={NOTIFY + (0 if tcp else 2)} at {ADDR}:{port}",
              lambda: "reply" if call(port, NSM, 1, 6, args, tcp) is not None else "")
