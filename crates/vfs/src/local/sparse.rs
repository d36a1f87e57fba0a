//! Where a local file has data: `lseek(SEEK_DATA/SEEK_HOLE)`, which every file system
//! answers (those without holes report all of a file as data), so allocated ranges are
//! the file system's own account, never a guess.

use super::errno::map_errno;
use crate::Result;
use rustix::fd::BorrowedFd;
use rustix::fs::{seek, SeekFrom};
use rustix::io::Errno;

/// The data ranges (offset, length) of `offset..end` of the file `fd` (`end` at most the
/// end of file), adjacent ones merged, at most `max` of them.
pub(crate) fn data_ranges(fd: BorrowedFd<'_>, offset: u64, end: u64, max: usize) -> Result<Vec<(u64, u64)>> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut at = offset;
    while at < end {
        let Some(data) = next(fd, SeekFrom::Data(to_off(at)))? else { break };
        if data >= end {
            break;
        }
        // No hole after `data` means the data runs to the end of file.
        let hole = next(fd, SeekFrom::Hole(to_off(data)))?.unwrap_or(end).min(end);
        if hole <= data {
            // A file changed between the two calls: look again from here.
            at = data.max(at + 1);
            continue;
        }
        let full = out.len() >= max;
        match out.last_mut() {
            Some(last) if last.0 + last.1 == data => last.1 += hole - data,
            _ if full => break,
            _ => out.push((data, hole - data)),
        }
        at = hole;
    }
    Ok(out)
}

/// One `lseek`; `None` when there is nothing of that kind past the offset (ENXIO).
fn next(fd: BorrowedFd<'_>, whence: SeekFrom) -> Result<Option<u64>> {
    match seek(fd, whence) {
        Ok(p) => Ok(Some(p)),
        Err(Errno::NXIO) => Ok(None),
        Err(e) => Err(map_errno(e)),
    }
}

/// An offset for `SeekFrom` (callers keep offsets at most `i64::MAX`).
fn to_off(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
