#!/usr/bin/env python3
"""hostile.py - hold many hostile connections against an SMB server and measure what an
honest client sees: Braid and the Samba peer, one after the other, in one run.

Attacks (each connection from its own loopback source address, 127.1.x.y, so per-client
limits do not simply refuse them):
  idle       connect and send nothing
  loris      send a transport header announcing a 60 KiB frame, then one byte every 5 s
             (a frame that may be that large before logon: the worst case for Braid)
  negotiate  send a valid NEGOTIATE, read its answer, then nothing

For each server and attack: the connections the server still holds after the hold time, the
server's memory (RSS of every server process), and the honest client's logon time (logon,
tree connect and a listing with smbprotocol from 127.0.0.1; median and worst of 5) while
the attack holds. Every socket is closed at the end; everything stays on loopback.

usage: bench/hostile.py [--connections N] [--hold S] [--attacks idle,loris,negotiate]
                        [--servers braid,samba]
prints one Markdown row per server and attack.
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import harness  # noqa: E402
from test_security import frame, hdr, negotiate_body  # noqa: E402


def source(i: int) -> str:
    return f"127.1.{i // 250}.{i % 250 + 1}"


def open_attack(port: int, n: int, attack: str) -> list[socket.socket]:
    socks = []
    neg = frame(hdr(0, 0) + negotiate_body((0x0202, 0x0210, 0x0300)))
    for i in range(n):
        s = socket.socket()
        s.setblocking(True)
        s.settimeout(2)
        try:
            s.bind((source(i), 0))
            s.connect((harness.LOCALHOST, port))
            if attack == "loris":
                s.sendall(struct.pack(">I", 60 * 1024) + b"\xfe")
            elif attack == "negotiate":
                s.sendall(neg)
        except OSError:
            s.close()
            continue
        socks.append(s)
    return socks


def still_open(socks: list[socket.socket]) -> int:
    """How many the server has not closed (a pending answer is read and dropped)."""
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n


def pss_mib(pids: list[int]) -> float:
    """Proportional set size of the server's processes: each shared page counted once in
    all (a sum of RSS would count the shared libraries of every forked process again)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def server_pids(srv) -> list[int]:
    if srv.proc is not None:
        return [srv.proc.pid]
    out = subprocess.run(["pgrep", "-f", str(srv.root)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


HONEST = """
import sys, time
sys.path.insert(0, sys.argv[1])
import harness
srv = harness.Server("x", harness.LOCALHOST, int(sys.argv[2]), sys.argv[3], sys.argv[4], "", "", {}, None, None, None)
t0 = time.monotonic()
with harness.Smb(srv) as smb:
    f = smb.open("", directory=True)
    f.query_directory("*", 1)
    f.close()
print(time.monotonic() - t0)
"""


def logon_times(srv, n: int = 5) -> list[float]:
    """Each logon in a process of its own: this one holds thousands of descriptors, more
    than smbprotocol's select() takes."""
    times = []
    for _ in range(n):
        r = subprocess.run([sys.executable, "-c", HONEST, str(REPO / "tests"), str(srv.port), srv.user, srv.password],
                           capture_output=True, text=True, timeout=60)
        try:
            times.append(float(r.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            print(f"  honest logon failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
            times.append(float("inf"))
    return times


def run(target: str, attacks: list[str], n: int, hold: float) -> list[str]:
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    root = harness.tmp_dir(f"braid-hostile-{target}-")
    srv = harness.start_braid(root, users) if target == "braid" else harness.start_samba(root, users)
    rows = []
    try:
        pids = server_pids(srv)
        base = pss_mib(server_pids(srv))
        for attack in attacks:
            t0 = time.monotonic()
            socks = open_attack(srv.port, n, attack)
            opened = time.monotonic() - t0
            deadline = time.monotonic() + hold
            loris_next = time.monotonic() + 5
            while time.monotonic() < deadline:
                if attack == "loris" and time.monotonic() >= loris_next:
                    for s in socks:
                        try:
                            s.send(b"S")
                        except OSError:
                            pass
                    loris_next += 5
                time.sleep(0.2)
            pids = server_pids(srv)
            mem = pss_mib(pids)
            times = logon_times(srv)
            held = still_open(socks)
            for s in socks:
                s.close()
            med, worst = statistics.median(times), max(times)
            rows.append(f"| {target} | {attack} | {n} | {len(socks)} | {held} | {len(pids)} | {mem:.0f} (idle {base:.0f}) | "
                        f"{med * 1000:.0f} / {worst * 1000:.0f} | {opened:.1f} |")
            print(rows[-1], flush=True)
            time.sleep(2)
    finally:
        if target == "braid":
            harness.stop_braid(srv)
        else:
            harness.stop_samba(srv)
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--hold", type=float, default=15.0, help="seconds the attack holds before measuring")
    ap.add_argument("--attacks", default="idle,loris,negotiate")
    ap.add_argument("--servers", default="braid,samba")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, a.connections + 4096)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    print("| server | attack | attempted | connected | held at the end | server processes | memory MiB (PSS) | honest logon ms (median / worst of 5) | seconds to open |")
    print("|---|---|---|---|---|---|---|---|---|")
    for target in a.servers.split(","):
        run(target, a.attacks.split(","), a.connections, a.hold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
