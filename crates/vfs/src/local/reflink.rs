//! Block cloning on the local file system: `ioctl(FICLONERANGE)`, which makes a range of
//! one file share the other's extents (xfs with reflink, btrfs, bcachefs), and the probe
//! that tells whether a share's file system can do it at all.

use rustix::fd::{AsFd, BorrowedFd};
use rustix::fs::{openat, Mode, OFlags};
use rustix::io::Errno;

use super::errno::map_errno;
use crate::{Result, VfsError};

/// Clones `len` bytes at `src_off` of `src` to `dst_off` of `dst` (the kernel's rules:
/// offsets aligned to the file system block, `len` too unless the range ends at the
/// source's end of file). No support here (another file system, no reflink) is
/// [`VfsError::unsupported`]; a range the kernel refuses is an `EINVAL` I/O error.
pub(crate) fn clone_fds(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, src_off: u64, dst_off: u64, len: u64) -> Result<()> {
    loop {
        return match super::sys::ficlonerange(src, dst, src_off, dst_off, len) {
            Ok(()) => Ok(()),
            Err(Errno::INTR) => continue,
            Err(Errno::OPNOTSUPP | Errno::XDEV | Errno::NOTTY | Errno::NOSYS) => Err(VfsError::unsupported()),
            Err(Errno::INVAL) => Err(VfsError::Io(Errno::INVAL.into())),
            Err(e) => Err(map_errno(e)),
        };
    }
}

/// Whether files under the directory `dir` can share extents: one block written to an
/// unnamed temporary file (`O_TMPFILE`, so nothing ever appears in the share nor is left
/// behind) is cloned into another. A directory the server may not write, or a file system
/// without `O_TMPFILE`, counts as unable.
pub(crate) fn probe(dir: BorrowedFd<'_>, block: u32) -> bool {
    let tmp = || openat(dir, ".", OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC, Mode::from_raw_mode(0o600));
    let (Ok(a), Ok(b)) = (tmp(), tmp()) else { return false };
    let block = block.clamp(512, 1 << 16) as usize;
    let data = vec![0x5a_u8; block];
    if !matches!(rustix::io::pwrite(&a, &data, 0), Ok(n) if n == block) {
        return false;
    }
    clone_fds(a.as_fd(), b.as_fd(), 0, 0, block as u64).is_ok()
}
