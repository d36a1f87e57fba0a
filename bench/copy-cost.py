#!/usr/bin/env python3
"""copy-cost.py - what storing one MiB costs on this machine: 1 MiB pwrite()s from a user
buffer over an existing file on tmpfs (overwrites, as the write benchmarks do after their
first pass), one thread. A server that keeps the data pays at least this copy per MiB on
top of receiving it; bench/multichannel.sh with a Braid that discards WRITEs measures the
receiving alone. Together they bound any storing server's write throughput here.

usage: bench/copy-cost.py [MIB]    (default 4096: MiB copied, over a 64 MiB file)"""
import os
import sys
import time

total = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
path = f"/dev/shm/braid-copy-cost.{os.getpid()}"
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
try:
    mib = 1 << 20
    buf = os.urandom(mib)
    for i in range(64):  # lay the file down: later writes are overwrites
        os.pwrite(fd, buf, i * mib)
    start = time.perf_counter()
    for i in range(total):
        os.pwrite(fd, buf, (i % 64) * mib)
    secs = time.perf_counter() - start
    print(f"COPY pwrite 1 MiB into tmpfs: {secs / total * 1e6:.1f} us per MiB ({total / secs:.0f} MiB/s, one thread)")
finally:
    os.close(fd)
    os.unlink(path)
