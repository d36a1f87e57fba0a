"""faultfs: a FUSE file system over a directory that fails or blocks on demand (tests).

Run with Debian's python3-fuse (/usr/bin/python3):

    /usr/bin/python3 tests/faultfs.py BACKING MOUNTPOINT CONTROL [-f] [-o OPTIONS]

Every call passes through to BACKING, except as the first word of the file CONTROL says
(read on every call, so a test switches modes by rewriting it):

    ok        pass everything through (also: CONTROL missing or empty)
    eio       reads, writes and fsyncs of files answer EIO (opens, listings, stats work)
    eio-open  opening or creating a file answers EIO as well
    hang      every call blocks until the mode is something else

Calls go to a thread each (fuse-python's default), so a hung call holds one thread, not
the file system.
"""

from __future__ import annotations

import errno
import os
import sys
import time

import fuse

fuse.fuse_python_api = (0, 2)


class FaultFS(fuse.Fuse):
    def __init__(self, backing: str, control: str, *a, **kw):
        super().__init__(*a, **kw)
        self.backing, self.control = backing, control

    # -- the switch -------------------------------------------------------------------------

    def mode(self) -> str:
        try:
            with open(self.control) as f:
                return (f.read().split() or ["ok"])[0]
        except FileNotFoundError:
            return "ok"

    def gate(self, data: bool = False, opening: bool = False):
        """Blocks while the mode is `hang`; an errno for the call, or None to go on."""
        while (m := self.mode()) == "hang":
            time.sleep(0.05)
        if m == "eio-open" and (data or opening):
            return -errno.EIO
        if m == "eio" and data:
            return -errno.EIO
        return None

    def real(self, path: str) -> str:
        return self.backing + path

    def call(self, f, *a, data=False, opening=False):
        """f(*a) after the gate, an OSError as its negative errno."""
        e = self.gate(data=data, opening=opening)
        if e is not None:
            return e
        try:
            return f(*a)
        except OSError as x:
            return -(x.errno or errno.EIO)

    # -- names and attributes ---------------------------------------------------------------

    def getattr(self, path):
        return self.call(os.lstat, self.real(path))

    def readdir(self, path, offset):
        e = self.gate()
        if e is not None:
            return e
        try:
            names = os.listdir(self.real(path))
        except OSError as x:
            return -x.errno
        return [fuse.Direntry(n) for n in [".", "..", *names]]

    def readlink(self, path):
        return self.call(os.readlink, self.real(path))

    def mknod(self, path, mode, dev):
        return self.call(os.mknod, self.real(path), mode, dev)

    def mkdir(self, path, mode):
        return self.call(os.mkdir, self.real(path), mode)

    def unlink(self, path):
        return self.call(os.unlink, self.real(path))

    def rmdir(self, path):
        return self.call(os.rmdir, self.real(path))

    def symlink(self, target, path):
        return self.call(os.symlink, target, self.real(path))

    def rename(self, old, new):
        return self.call(os.rename, self.real(old), self.real(new))

    def link(self, target, path):
        return self.call(os.link, self.real(target), self.real(path))

    def chmod(self, path, mode):
        return self.call(os.chmod, self.real(path), mode)

    def chown(self, path, uid, gid):
        return self.call(os.lchown, self.real(path), uid, gid)

    def truncate(self, path, size):
        return self.call(os.truncate, self.real(path), size, data=True)

    def utimens(self, path, atime, mtime):
        ns = (atime.tv_sec * 10**9 + atime.tv_nsec, mtime.tv_sec * 10**9 + mtime.tv_nsec)
        return self.call(lambda: os.utime(self.real(path), ns=ns, follow_symlinks=False))

    def statfs(self):
        return self.call(os.statvfs, self.backing)

    def access(self, path, mode):
        return self.call(lambda: None if os.access(self.real(path), mode) else -errno.EACCES)

    # Extended attributes are left out: fuse-python decodes values as UTF-8 text and fails
    # on binary ones, so the kernel answers EOPNOTSUPP, as on a file system without them.

    # -- file data: the handle is a descriptor on the backing file --------------------------

    def open(self, path, flags):
        return self.call(lambda: Handle(os.open(self.real(path), flags)), opening=True)

    def create(self, path, flags, mode):
        return self.call(lambda: Handle(os.open(self.real(path), flags | os.O_CREAT, mode)), opening=True)

    def read(self, path, size, offset, fh):
        return self.call(os.pread, fh.fd, size, offset, data=True)

    def write(self, path, buf, offset, fh):
        return self.call(os.pwrite, fh.fd, buf, offset, data=True)

    def ftruncate(self, path, size, fh):
        return self.call(os.ftruncate, fh.fd, size, data=True)

    def fgetattr(self, path, fh):
        return self.call(os.fstat, fh.fd)

    def fsync(self, path, datasync, fh):
        return self.call(os.fdatasync if datasync else os.fsync, fh.fd, data=True)

    def flush(self, path, fh):
        return 0

    def release(self, path, flags, fh):
        # Always closed, whatever the mode: a failed close must not leak the descriptor.
        try:
            os.close(fh.fd)
        except OSError:
            pass
        return 0


class Handle:
    """An open file (fuse-python takes a returned int for a status, not a handle)."""

    def __init__(self, fd: int):
        self.fd = fd


def main():
    backing, mountpoint, control, *rest = sys.argv[1:]
    fs = FaultFS(os.path.abspath(backing), os.path.abspath(control), version="faultfs",
                 usage=__doc__, dash_s_do="setsingle")
    fs.parse(args=[mountpoint, *rest], errex=1)
    fs.main()


if __name__ == "__main__":
    main()
