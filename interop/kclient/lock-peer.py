#!/usr/bin/env python3
"""lock-peer.py RUNDIR PATH: the host's side of the locks suite's KC_LOCK_HOLD phase
(guest-locks.sh), with POSIX locks (fcntl F_SETLK) on PATH, the held file as the server
stores it on its own disk (for a server such as nfs-ganesha's VFS FSAL, whose NLM locks are
locks on that file). tests/test_kclient.py plays the same part with an SMB client.

Follows RUNDIR/results.raw (the guest's result lines as they come) and writes commands to
RUNDIR/cmd.in. Prints PEER-RESULT step=<name> ok=<0|1> lines; exits 0 iff all were ok."""

import fcntl
import os
import struct
import sys
import time

RUN, PATH = sys.argv[1], sys.argv[2]
WAIT = float(os.environ.get("PEER_WAIT", "600"))
fails = 0


def result(step, ok, info=""):
    global fails
    fails += 0 if ok else 1
    print(f"PEER-RESULT step={step} ok={int(ok)} {info}", flush=True)


def wait_for(token):
    """Waits until the guest printed a line containing token; returns False on a timeout or
    the guest's end."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            text = open(os.path.join(RUN, "results.raw"), errors="replace").read()
        except FileNotFoundError:
            text = ""
        if token in text:
            return True
        if "KCLIENT-SUMMARY" in text or "KCLIENT-END" in text:
            return False
        time.sleep(0.2)
    return False


def send(word):
    with open(os.path.join(RUN, "cmd.in"), "w") as f:
        f.write(word + "\n")


def lock(fd, typ, start, length):
    """F_SETLK; returns None on success, else the errno name."""
    fl = struct.pack("hhqqi", typ, os.SEEK_SET, start, length, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLK, fl)
        return None
    except OSError as e:
        return e.strerror


if not wait_for("KCLIENT-WAIT for=peer_locked"):
    result("peer_saw_hold", False, "the guest never asked for peer_locked")
    sys.exit(1)
fd = os.open(PATH, os.O_RDWR)
e = lock(fd, fcntl.F_WRLCK, 0, 100)
result("host_lock_0_99_refused", e is not None, f"error={e}")
if e is None:
    lock(fd, fcntl.F_UNLCK, 0, 100)
e = lock(fd, fcntl.F_WRLCK, 200, 100)
result("host_lock_200_299", e is None, f"error={e}")
send("peer_locked")
if not wait_for("KCLIENT-WAIT for=peer_unlocked"):
    result("peer_saw_setlkw", False)
    send("abort")
    sys.exit(1)
time.sleep(1)
lock(fd, fcntl.F_UNLCK, 200, 100)
send("peer_unlocked")
if not wait_for("KCLIENT-WAIT for=peer_done"):
    result("peer_saw_release", False)
    send("abort")
    sys.exit(1)
if os.environ.get("PEER_WAIT_FILE"):  # nlm-ganesha.sh: cb-probe.py's calls come first
    deadline = time.monotonic() + 120
    while not os.path.exists(os.environ["PEER_WAIT_FILE"]) and time.monotonic() < deadline:
        time.sleep(0.2)
e = lock(fd, fcntl.F_WRLCK, 0, 100)
result("host_lock_0_99_after_release", e is None, f"error={e}")
lock(fd, fcntl.F_UNLCK, 0, 100)
os.close(fd)
send("peer_done")
sys.exit(1 if fails else 0)
