#!/usr/bin/env python3
"""soak.py - run Braid for a long time under SMB and NFS load at once and watch whether it grows.

One braid (SMB and NFSv3 on loopback, one share exported over both) serves three loops of
`braid bench` rounds at once, each round a new process, so connections, sessions and opens
come and go all the time:

  smb-data  4 KiB random reads and writes, 50% writes, --verify (4 workers x 4 deep)
  nfs-data  the same over NFSv3, --nconnect 2, --verify
  smb-meta  the metadata mix create,open,close,delete,stat (4 workers)

Every minute the server is sampled: resident memory (VmRSS), open descriptors, threads, and
from /metrics the metadata cache (entries, bytes), connections and sessions. At the end the
growth from minute GROWTH_FROM (5) to the last minute is printed per quantity (the two
samples, and the medians of the first and last 11 minutes), with every
round that failed (a --verify mismatch makes `braid bench` exit non-zero).

The share has a provisioned limit (--iops, default 3000, SMB and NFS together; 0 = none):
the soak looks for growth, not speed, and the limit keeps it from taking the machine.

usage: bench/soak.py [--minutes 60] [--round 30] [--iops 3000] [--root DIR] [--csv FILE]
  --root  where the share lives (default: $SHARE_ROOT, else /dev/shm, i.e. tmpfs); a
          directory on a disk file system soaks that instead, e.g.
          bench/diskfs.sh -- bench/soak.py (an ext4 loop image on the machine's disk).
Last line: "soak: N rounds, N failed; growth ..." ; exit status 1 if any round failed.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
import harness  # noqa: E402
import nfs_harness  # noqa: E402

GROWTH_FROM = 5
WINDOW = 11
GAUGES = {
    "cache_entries": "braid_metadata_cache_entries",
    "cache_bytes": "braid_metadata_cache_bytes",
    "connections": "braid_connections",
    "sessions": "braid_sessions",
}


def loops(srv, round_s: int) -> dict[str, list[str]]:
    """The bench command of each loop, without the duration."""
    bench = [str(harness.braid_bin()), "bench"]
    smb = f"smb://{srv.user}:{srv.password}@{harness.LOCALHOST}:{srv.port}/data"
    nfs = f"nfs://{harness.LOCALHOST}:{srv.extra['nfs_port']}/data"
    data = ["-b", "4k", "-w", "50", "-t", "4", "-o", "4", "-f", "4", "-c", "16m", "--verify", "-d", str(round_s)]
    return {
        "smb-data": [*bench, *data, "--dir", "soak-smb", smb],
        "nfs-data": [*bench, *data, "--nconnect", "2", "--dir", "soak-nfs", nfs],
        "smb-meta": [*bench, "--meta", "create,open,close,delete,stat", "-t", "4", "-d", str(round_s),
                     "--dir", "soak-meta", smb],
    }


class Rounds:
    """Runs one loop's rounds until `stop`; counts them and keeps the failures."""

    def __init__(self, name: str, cmd: list[str], logs: Path):
        self.name, self.cmd, self.logs = name, cmd, logs
        self.done = 0
        self.failed: list[str] = []

    def run(self, stop: threading.Event):
        while not stop.is_set():
            log = self.logs / f"{self.name}-{self.done:04d}.log"
            with open(log, "wb") as f:
                rc = subprocess.run(self.cmd, stdout=f, stderr=subprocess.STDOUT, timeout=600).returncode
            self.done += 1
            if rc != 0:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                self.failed.append(f"{self.name} round {self.done}: exit {rc}: {' | '.join(tail)}")
            else:
                log.unlink()


def proc_status(pid: int) -> dict[str, float]:
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", text, re.M).group(1))
    threads = int(re.search(r"^Threads:\s+(\d+)", text, re.M).group(1))
    return {"rss_mib": rss / 1024, "fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": threads}


def metrics(admin_port: int) -> dict[str, float]:
    """Sums each gauge of GAUGES over its series (one per share for the cache)."""
    body = urllib.request.urlopen(f"http://{harness.LOCALHOST}:{admin_port}/metrics", timeout=10).read().decode()
    out = dict.fromkeys(GAUGES, 0.0)
    for line in body.splitlines():
        for key, name in GAUGES.items():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                out[key] += float(line.rsplit(" ", 1)[1])
    return out


def pct(a: float, b: float) -> str:
    p = (b - a) / a * 100 if a else (0.0 if b == 0 else float("inf"))
    return f"{a:.1f} -> {b:.1f} ({p:+.1f}%)"


def growth(rows: list[dict], key: str) -> str:
    """Growth of `key` from minute GROWTH_FROM to the last: the two samples, and the medians
    of the WINDOW minutes from each (one sample catches whatever is in flight that second;
    RSS swings by tens of MiB with the buffers of the requests running)."""
    after = [r[key] for r in rows if r["minute"] >= GROWTH_FROM]
    if len(after) < 2:
        return "n/a"
    w = min(WINDOW, len(after) // 2)
    return f"{pct(after[0], after[-1])}, medians {pct(statistics.median(after[:w]), statistics.median(after[-w:]))}"


def sample_until(srv, admin_port: int, minutes: int, writer) -> list[dict]:
    rows, t0 = [], time.monotonic()
    for minute in range(1, minutes + 1):
        time.sleep(max(0.0, t0 + minute * 60 - time.monotonic()))
        if srv.proc.poll() is not None:
            raise RuntimeError(f"braid exited with status {srv.proc.returncode}; log: {srv.log}")
        row = {"minute": minute, **proc_status(srv.proc.pid), **metrics(admin_port)}
        rows.append(row)
        writer.writerow(row)
        print("  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--round", type=int, default=30, help="seconds per bench round")
    ap.add_argument("--iops", type=int, default=3000, help="the share's IOPS limit (0: none)")
    ap.add_argument("--root", type=Path, help="parent directory of the share (default tmpfs)")
    ap.add_argument("--csv", type=Path, default=REPO / "target" / "soak.csv")
    a = ap.parse_args()
    root = Path(a.root or os.environ.get("SHARE_ROOT") or "/dev/shm") / f"braid-soak-{os.getpid()}"
    root.mkdir(parents=True)
    admin_port = harness.free_port()
    lines = ["nfs = true", "nfs_root_squash = false", *([f"iops = {a.iops}"] if a.iops else [])]
    srv = nfs_harness.start(root, harness.test_users(), [{"name": "data", "lines": lines}],
                            server_extra=[f'admin = "{harness.LOCALHOST}:{admin_port}"'])
    logs = root / "rounds"
    logs.mkdir()
    stop = threading.Event()
    rounds = [Rounds(n, c, logs) for n, c in loops(srv, a.round).items()]
    threads = [threading.Thread(target=r.run, args=(stop,), daemon=True) for r in rounds]
    for t in threads:
        t.start()
    a.csv.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["minute", "rss_mib", "fds", "threads", *GAUGES])
            w.writeheader()
            rows = sample_until(srv, admin_port, a.minutes, w)
    finally:
        stop.set()
        for t in threads:
            t.join(700)
        problem = harness.stop_braid(srv)
        shutil.rmtree(root, ignore_errors=True)
    failed = [x for r in rounds for x in r.failed]
    for x in failed:
        print("FAILED", x)
    print(f"csv: {a.csv}")
    keys = ["rss_mib", "fds", "threads", *GAUGES]
    summary = "; ".join(f"{k} {growth(rows, k)}" for k in keys)
    total = sum(r.done for r in rounds)
    print(f"soak: {total} rounds, {len(failed)} failed; growth min {GROWTH_FROM}->{a.minutes}: {summary}")
    if problem:
        print("braid:", problem)
    return 1 if failed or problem else 0


if __name__ == "__main__":
    sys.exit(main())
