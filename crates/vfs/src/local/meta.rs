//! Metadata: statx results, the `user.braid.*` xattrs, and time conversions.

use super::errno::map_errno;
use crate::{dos, FileAttrs, FileKind, Posix, Result, VfsError};
use rustix::fd::{AsRawFd, BorrowedFd};
use rustix::fs::{
    fgetxattr, flistxattr, fremovexattr, fsetxattr, getxattr, lgetxattr, listxattr, llistxattr, removexattr, setxattr, statx, AtFlags, FileType,
    Statx, StatxFlags, StatxTimestamp, Timespec, XattrFlags,
};
use rustix::io::Errno;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Xattr holding the stored DOS attributes (u32, little-endian).
pub const DOS_ATTR_XATTR: &str = "user.braid.dosattrib";
/// Xattr holding a creation-time override (u64 LE nanoseconds since the UNIX epoch), because
/// Linux cannot set a file's birth time.
pub const BTIME_XATTR: &str = "user.braid.btime";

/// Xattr holding a stored security descriptor (self-relative, opaque to the VFS).
pub const SECURITY_XATTR: &str = "user.braid.ntacl";
/// On the share root: some file of the share has a stored security descriptor (set with
/// the first one, never removed), so servers check access against descriptors.
pub const ACL_MARKER_XATTR: &str = "user.braid.acls";

/// Prefix of the xattrs holding extended attributes (EAs) set by clients: the EA name
/// follows it.
pub const EA_XATTR_PREFIX: &str = "user.braid.ea.";

/// The DOS attributes kept in [`DOS_ATTR_XATTR`]; everything else is derived or ignored.
pub(crate) const STORED_DOS: u32 =
    dos::READONLY | dos::HIDDEN | dos::SYSTEM | dos::ARCHIVE | dos::TEMPORARY | dos::OFFLINE | dos::NOT_CONTENT_INDEXED;

const STATX_MASK: StatxFlags = StatxFlags::BASIC_STATS.union(StatxFlags::BTIME);

/// Where to read or write a file's xattrs.
pub(crate) enum XattrAt<'a> {
    /// An fd open for I/O (not `O_PATH`).
    Fd(BorrowedFd<'a>),
    /// A path whose final symlink is followed (used for `/proc/self/fd/N` of `O_PATH` fds).
    Follow(&'a str),
    /// A path whose final symlink is not followed (directory entries).
    NoFollow(&'a str),
}

/// `/proc/self/fd/N`: lets xattr calls reach the object behind an `O_PATH` fd, which the
/// f*xattr calls refuse.
pub(crate) fn proc_fd_path(fd: BorrowedFd<'_>) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// The DOS attributes stored at `at`, as stored (nothing derived added); `None` when none
/// were stored.
pub(crate) fn stored_dos(at: &XattrAt<'_>) -> Option<u32> {
    get_xattr::<4>(at, DOS_ATTR_XATTR).map(u32::from_le_bytes)
}

/// Reads a small xattr; `None` when absent, unsupported, or unreadable (attributes then
/// degrade to their defaults rather than failing the stat).
fn get_xattr<const N: usize>(at: &XattrAt<'_>, name: &str) -> Option<[u8; N]> {
    let mut buf = [0u8; N];
    let n = match at {
        XattrAt::Fd(fd) => fgetxattr(fd, name, &mut buf),
        XattrAt::Follow(p) => getxattr(*p, name, &mut buf),
        XattrAt::NoFollow(p) => lgetxattr(*p, name, &mut buf),
    };
    // A value of another length was not written by us: ignore it.
    match n {
        Ok(n) if n == N => Some(buf),
        _ => None,
    }
}

/// Writes an xattr; silently does nothing on filesystems without user xattrs.
pub(crate) fn set_xattr(at: &XattrAt<'_>, name: &str, value: &[u8]) -> Result<()> {
    let r = match at {
        XattrAt::Fd(fd) => fsetxattr(fd, name, value, XattrFlags::empty()),
        XattrAt::Follow(p) => setxattr(*p, name, value, XattrFlags::empty()),
        // Never used for writing: user xattrs cannot live on symlinks anyway.
        XattrAt::NoFollow(_) => return Ok(()),
    };
    match r {
        Ok(()) | Err(Errno::NOTSUP) => Ok(()),
        Err(e) => Err(map_errno(e)),
    }
}

/// Writes an xattr that must be kept (a named stream's data): a file system without user
/// xattrs is `Unsupported`, and a value it cannot hold (E2BIG, ENOSPC: ext4 keeps a value
/// in one block) is `TooLarge`.
pub(crate) fn set_xattr_kept(at: &XattrAt<'_>, name: &str, value: &[u8]) -> Result<()> {
    let r = match at {
        XattrAt::Fd(fd) => fsetxattr(fd, name, value, XattrFlags::empty()),
        XattrAt::Follow(p) => setxattr(*p, name, value, XattrFlags::empty()),
        XattrAt::NoFollow(_) => return Err(VfsError::unsupported()),
    };
    match r {
        Ok(()) => Ok(()),
        Err(Errno::NOTSUP) => Err(VfsError::unsupported()),
        Err(Errno::TOOBIG | Errno::NOSPC | Errno::RANGE) => Err(VfsError::TooLarge),
        Err(e) => Err(map_errno(e)),
    }
}

/// Reads an xattr of any length up to `max` bytes; `None` when absent, unsupported, or
/// larger than `max` (not written by us).
pub(crate) fn get_xattr_vec(at: &XattrAt<'_>, name: &str, max: usize) -> Result<Option<Vec<u8>>> {
    let call = |buf: &mut [u8]| match at {
        XattrAt::Fd(fd) => fgetxattr(fd, name, buf),
        XattrAt::Follow(p) => getxattr(*p, name, buf),
        XattrAt::NoFollow(p) => lgetxattr(*p, name, buf),
    };
    // The value may grow between asking its size and reading it; retry a few times.
    for _ in 0..3 {
        let size = match call(&mut []) {
            Ok(n) => n,
            Err(Errno::NODATA | Errno::NOTSUP) => return Ok(None),
            Err(e) => return Err(map_errno(e)),
        };
        if size > max {
            return Ok(None);
        }
        let mut buf = vec![0u8; size];
        match call(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(Some(buf));
            }
            Err(Errno::RANGE) => continue,
            Err(Errno::NODATA | Errno::NOTSUP) => return Ok(None),
            Err(e) => return Err(map_errno(e)),
        }
    }
    Ok(None)
}

/// Names of all xattrs at `at` that start with `prefix`, with the prefix stripped; names
/// that are not UTF-8 are skipped. Empty on filesystems without xattrs.
pub(crate) fn list_xattrs(at: &XattrAt<'_>, prefix: &str) -> Result<Vec<String>> {
    let call = |buf: &mut [u8]| match at {
        XattrAt::Fd(fd) => flistxattr(fd, buf),
        XattrAt::Follow(p) => listxattr(*p, buf),
        XattrAt::NoFollow(p) => llistxattr(*p, buf),
    };
    // The kernel never returns lists over 64 KiB (XATTR_LIST_MAX).
    const MAX_LIST: usize = 64 * 1024;
    let mut raw = Vec::new();
    for _ in 0..3 {
        let size = match call(&mut []) {
            Ok(n) => n.min(MAX_LIST),
            Err(Errno::NOTSUP) => return Ok(Vec::new()),
            Err(e) => return Err(map_errno(e)),
        };
        let mut buf = vec![0u8; size];
        match call(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                raw = buf;
                break;
            }
            // Grew in between: ask again.
            Err(Errno::RANGE) => continue,
            Err(e) => return Err(map_errno(e)),
        }
    }
    Ok(raw
        .split(|&b| b == 0)
        .filter_map(|n| std::str::from_utf8(n).ok()?.strip_prefix(prefix))
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Removes an xattr; absent ones and filesystems without user xattrs are fine.
pub(crate) fn remove_xattr(at: &XattrAt<'_>, name: &str) -> Result<()> {
    let r = match at {
        XattrAt::Fd(fd) => fremovexattr(fd, name),
        XattrAt::Follow(p) => removexattr(*p, name),
        XattrAt::NoFollow(_) => return Ok(()),
    };
    match r {
        Ok(()) | Err(Errno::NODATA | Errno::NOTSUP) => Ok(()),
        Err(e) => Err(map_errno(e)),
    }
}

/// statx of `name` relative to `dirfd` (`""` with `AT_EMPTY_PATH` for the fd itself).
pub(crate) fn statx_at(dirfd: BorrowedFd<'_>, name: &str, flags: AtFlags) -> Result<Statx> {
    statx(dirfd, name, flags, STATX_MASK).map_err(map_errno)
}

/// statx of the object an fd refers to (works on `O_PATH` fds too).
pub(crate) fn statx_fd(fd: BorrowedFd<'_>) -> Result<Statx> {
    statx_at(fd, "", AtFlags::EMPTY_PATH)
}

/// The file type bits of a statx result.
pub(crate) fn file_type(stx: &Statx) -> FileType {
    FileType::from_raw_mode(u32::from(stx.stx_mode))
}

/// Builds [`FileAttrs`] from statx plus the xattrs found at `at` (if any).
pub(crate) fn attrs_from(stx: &Statx, at: Option<&XattrAt<'_>>) -> FileAttrs {
    let is_dir = file_type(stx) == FileType::Directory;
    let stored_dos = at.and_then(stored_dos);
    let btime_override = at.and_then(|a| get_xattr::<8>(a, BTIME_XATTR)).map(u64::from_le_bytes);

    let mut dos_attributes = if is_dir { dos::DIRECTORY } else { 0 };
    match stored_dos {
        // Only files are sparse (FSCTL_SET_SPARSE refuses directories, as Windows does).
        Some(v) => dos_attributes |= v & if is_dir { STORED_DOS } else { STORED_DOS | dos::SPARSE_FILE },
        // Windows marks new files for backup; do the same when nothing was stored.
        None if !is_dir => dos_attributes |= dos::ARCHIVE,
        None => {}
    }
    // Mode-derived READONLY only for files: on directories Windows gives it another meaning.
    if !is_dir && stx.stx_mode & 0o200 == 0 {
        dos_attributes |= dos::READONLY;
    }

    let modified = from_statx_ts(&stx.stx_mtime);
    let changed = from_statx_ts(&stx.stx_ctime);
    let created = match btime_override {
        Some(ns) => UNIX_EPOCH + Duration::from_nanos(ns),
        None if stx.stx_mask & StatxFlags::BTIME.bits() != 0 => from_statx_ts(&stx.stx_btime),
        None => modified.min(changed),
    };
    FileAttrs {
        is_dir,
        size: if is_dir { 0 } else { stx.stx_size },
        alloc_size: stx.stx_blocks.saturating_mul(512),
        nlink: stx.stx_nlink,
        file_id: stx.stx_ino,
        created,
        accessed: from_statx_ts(&stx.stx_atime),
        modified,
        changed,
        dos_attributes,
        posix: posix_from(stx),
    }
}

/// The kind of object a statx result describes.
pub(crate) fn kind_of(stx: &Statx) -> FileKind {
    match file_type(stx) {
        FileType::Directory => FileKind::Dir,
        FileType::Symlink => FileKind::Symlink,
        FileType::BlockDevice => FileKind::Block,
        FileType::CharacterDevice => FileKind::Char,
        FileType::Fifo => FileKind::Fifo,
        FileType::Socket => FileKind::Socket,
        _ => FileKind::File,
    }
}

/// The POSIX part of the attributes.
fn posix_from(stx: &Statx) -> Posix {
    Posix {
        kind: kind_of(stx),
        mode: u32::from(stx.stx_mode) & 0o7777,
        uid: stx.stx_uid,
        gid: stx.stx_gid,
        rdev: (stx.stx_rdev_major, stx.stx_rdev_minor),
        fsid: (u64::from(stx.stx_dev_major) << 32) | u64::from(stx.stx_dev_minor),
    }
}

/// Converts a kernel timestamp (possibly before 1970) to `SystemTime`.
fn from_statx_ts(ts: &StatxTimestamp) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(ts.tv_nsec));
    let t = if ts.tv_sec >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(ts.tv_sec.unsigned_abs()))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(ts.tv_sec.unsigned_abs()))
    };
    t.and_then(|t| t.checked_add(nanos)).unwrap_or(UNIX_EPOCH)
}

/// Converts a `SystemTime` to a kernel timespec (negative seconds before 1970).
pub(crate) fn to_timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec { tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX), tv_nsec: i64::from(d.subsec_nanos()) },
        Err(e) => {
            let d = e.duration();
            let mut sec = -i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            let mut nsec = i64::from(d.subsec_nanos());
            // tv_nsec must be non-negative: borrow a second.
            if nsec > 0 {
                sec = sec.saturating_sub(1);
                nsec = 1_000_000_000 - nsec;
            }
            Timespec { tv_sec: sec, tv_nsec: nsec }
        }
    }
}

/// Encodes a creation time for [`BTIME_XATTR`]; times before 1970 clamp to the epoch.
pub(crate) fn encode_btime(t: SystemTime) -> [u8; 8] {
    let ns = t.duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)).unwrap_or(0);
    ns.to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespec_round_trip() {
        let before = UNIX_EPOCH - Duration::new(10, 250_000_000);
        let ts = to_timespec(before);
        assert_eq!((ts.tv_sec, ts.tv_nsec), (-11, 750_000_000));
        let stx = StatxTimestamp { tv_sec: ts.tv_sec, tv_nsec: ts.tv_nsec as u32, __reserved: 0 };
        assert_eq!(from_statx_ts(&stx), before);
        let after = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let ts = to_timespec(after);
        assert_eq!((ts.tv_sec, ts.tv_nsec), (1_700_000_000, 5));
    }
}
