//! Named streams of local files: a small stream is one user xattr named
//! [`STREAM_XATTR_PREFIX`](crate::STREAM_XATTR_PREFIX) + the stream name as created, which
//! goes with the inode; a stream beyond [`spill::SPILL_AT`] bytes, or one the file system
//! will not hold in an xattr, is a spill file ([`spill`]) marked by an empty xattr
//! [`spill::SPILL_XATTR_PREFIX`] + the name. One `listxattr` finds both kinds.

use super::errno::map_errno;
use super::handle::LocalHandle;
use super::meta::{get_xattr_vec, list_xattrs, remove_xattr, set_xattr_kept, XattrAt};
use super::spill::{self, SPILL_AT, SPILL_XATTR_PREFIX};
use crate::streams::{check_name, same_name, write_lock};
use crate::{Result, VfsError, MAX_STREAM_LEN, STREAM_XATTR_PREFIX};
use rustix::fd::{AsFd, OwnedFd};

/// Largest stream [`FileHandle::read_stream`](crate::FileHandle::read_stream) returns
/// whole; positional reads have no bound.
const MAX_WHOLE_READ: u64 = 64 << 20;

/// Where a stream's bytes are.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Place {
    Xattr,
    Spill,
}

/// Every stream of the file: name as stored and where it lives, sorted by name. A name
/// with both (a crash while spilling) is the spill file's.
fn all(at: &XattrAt<'_>) -> Result<Vec<(String, Place)>> {
    let mut out: Vec<(String, Place)> = Vec::new();
    for n in list_xattrs(at, "user.braid.")? {
        if let Some(s) = n.strip_prefix("spill.") {
            out.retain(|(o, _)| o != s);
            out.push((s.to_owned(), Place::Spill));
        } else if let Some(s) = n.strip_prefix("stream.") {
            if !out.iter().any(|(o, _)| o == s) {
                out.push((s.to_owned(), Place::Xattr));
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The stream `name` (matched case-insensitively): stored name and place.
fn locate(at: &XattrAt<'_>, name: &str) -> Result<Option<(String, Place)>> {
    Ok(all(at)?.into_iter().find(|(n, _)| same_name(n, name)))
}

fn xattr_key(stored: &str) -> String {
    format!("{STREAM_XATTR_PREFIX}{stored}")
}

fn marker_key(stored: &str) -> String {
    format!("{SPILL_XATTR_PREFIX}{stored}")
}

/// The xattr value of stream `stored` (empty if gone).
fn xattr_value(at: &XattrAt<'_>, stored: &str) -> Result<Vec<u8>> {
    Ok(get_xattr_vec(at, &xattr_key(stored), MAX_STREAM_LEN)?.unwrap_or_default())
}

impl LocalHandle {
    /// The spill key of this file.
    fn spill_key(&self) -> Result<String> {
        spill::key_of(self.fd.as_fd(), "")
    }

    /// The spill file of stream `stored`, if it has one.
    fn spill_fd(&self, stored: &str) -> Result<Option<OwnedFd>> {
        spill::open(&self.root, &self.spill_key()?, stored, false, false)
    }

    /// Moves stream `stored` (content `data`) from its xattr to a new spill file, which is
    /// returned open. The marker goes on before the xattr comes off, so a crash leaves the
    /// stream in one place or both (the spill file wins); only where the marker cannot be
    /// added beside the value (ext4's full block) is the xattr removed first.
    fn spill(&self, at: &XattrAt<'_>, stored: &str, data: &[u8]) -> Result<OwnedFd> {
        let key = self.spill_key()?;
        let fd = spill::open(&self.root, &key, stored, true, true)?.ok_or(VfsError::NotFound)?;
        write_all_at(&fd, data, 0)?;
        match set_xattr_kept(at, &marker_key(stored), b"") {
            Ok(()) => remove_xattr(at, &xattr_key(stored))?,
            Err(VfsError::TooLarge) => {
                remove_xattr(at, &xattr_key(stored))?;
                set_xattr_kept(at, &marker_key(stored), b"")?;
            }
            Err(e) => {
                let _ = spill::remove(&self.root, &key, stored);
                return Err(e);
            }
        }
        Ok(fd)
    }

    /// Removes stream `stored` wherever it lives.
    fn remove_stream(&self, at: &XattrAt<'_>, stored: &str, place: Place) -> Result<()> {
        if place == Place::Spill {
            spill::remove(&self.root, &self.spill_key()?, stored)?;
            remove_xattr(at, &marker_key(stored))?;
        }
        remove_xattr(at, &xattr_key(stored))
    }

    /// The spill file of stream `stored` to write `end` bytes into: the existing one, or the
    /// xattr's content moved to a new one when `end` passes [`SPILL_AT`]. `None`: the stream
    /// stays in its xattr.
    fn file_for(&self, at: &XattrAt<'_>, stored: &str, place: Option<Place>, end: u64) -> Result<Option<OwnedFd>> {
        match place {
            Some(Place::Spill) => Ok(Some(match self.spill_fd(stored)? {
                Some(fd) => fd,
                None => spill::open(&self.root, &self.spill_key()?, stored, true, false)?.ok_or(VfsError::NotFound)?,
            })),
            _ if end > SPILL_AT => {
                let data = xattr_value(at, stored)?;
                self.spill(at, stored, &data).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Writes a stream's new xattr value, spilling it if the file system refuses it.
    fn set_value(&self, at: &XattrAt<'_>, stored: &str, data: &[u8]) -> Result<()> {
        match set_xattr_kept(at, &xattr_key(stored), data) {
            Err(VfsError::TooLarge) => self.spill(at, stored, data).map(drop),
            r => r,
        }
    }

    fn check_writable(&self) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        Ok(())
    }

    fn with_streams<T>(&self, f: impl FnOnce(&XattrAt<'_>) -> Result<T>) -> Result<T> {
        self.with_xattr_at(|at| match at {
            Some(at) => f(at),
            None => Err(VfsError::unsupported()),
        })
    }
}

/// `pwrite` of all of `data`.
fn write_all_at(fd: &OwnedFd, mut data: &[u8], mut offset: u64) -> Result<()> {
    while !data.is_empty() {
        match rustix::io::pwrite(fd, data, offset) {
            Ok(0) => return Err(VfsError::NoSpace),
            Ok(n) => {
                data = &data[n..];
                offset += n as u64;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(map_errno(e)),
        }
    }
    Ok(())
}

/// Every stream with its size, sorted by name.
pub(super) fn list(h: &LocalHandle) -> Result<Vec<(String, u64)>> {
    h.with_xattr_at(|at| {
        let Some(at) = at else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for (name, place) in all(at)? {
            match place {
                // Removed meanwhile, or not ours (larger than we ever store): skip it.
                Place::Xattr => {
                    if let Some(v) = get_xattr_vec(at, &xattr_key(&name), MAX_STREAM_LEN)? {
                        out.push((name, v.len() as u64));
                    }
                }
                Place::Spill => {
                    let size = spill::size(&h.root, &h.spill_key()?, &name)?;
                    out.push((name, size));
                }
            }
        }
        Ok(out)
    })
}

/// The stream `name` as stored, with its size.
pub(super) fn find(h: &LocalHandle, name: &str) -> Result<Option<(String, u64)>> {
    h.with_xattr_at(|at| {
        let Some(at) = at else { return Ok(None) };
        match locate(at, name)? {
            None => Ok(None),
            Some((stored, Place::Xattr)) => Ok(get_xattr_vec(at, &xattr_key(&stored), MAX_STREAM_LEN)?.map(|v| (stored, v.len() as u64))),
            Some((stored, Place::Spill)) => {
                let size = spill::size(&h.root, &h.spill_key()?, &stored)?;
                Ok(Some((stored, size)))
            }
        }
    })
}

/// The stream `name` as stored, with its content.
pub(super) fn read(h: &LocalHandle, name: &str) -> Result<Option<(String, Vec<u8>)>> {
    let Some((stored, size)) = find(h, name)? else { return Ok(None) };
    if size > MAX_WHOLE_READ {
        return Err(VfsError::TooLarge);
    }
    let mut data = vec![0u8; size as usize];
    let n = read_at(h, &stored, &mut data, 0)?;
    data.truncate(n);
    Ok(Some((stored, data)))
}

/// Reads stream `stored` at `offset`.
pub(super) fn read_at(h: &LocalHandle, stored: &str, buf: &mut [u8], offset: u64) -> Result<usize> {
    let place = h.with_xattr_at(|at| match at {
        Some(at) => locate(at, stored),
        None => Ok(None),
    })?;
    match place {
        None => Ok(0),
        Some((stored, Place::Xattr)) => {
            let data = h.with_streams(|at| xattr_value(at, &stored))?;
            let Some(rest) = usize::try_from(offset).ok().and_then(|o| data.get(o..)) else { return Ok(0) };
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            Ok(n)
        }
        Some((stored, Place::Spill)) => match h.spill_fd(&stored)? {
            Some(fd) => loop {
                match rustix::io::pread(&fd, buf, offset) {
                    Err(rustix::io::Errno::INTR) => {}
                    r => return r.map_err(map_errno),
                }
            },
            None => Ok(0),
        },
    }
}

/// Writes `buf` into stream `stored` at `offset`: in place in a spill file, or by
/// rewriting the xattr while the stream stays small.
pub(super) fn write_at(h: &LocalHandle, stored: &str, buf: &[u8], offset: u64) -> Result<usize> {
    h.check_writable()?;
    check_name(stored)?;
    let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= i64::MAX as u64).ok_or(VfsError::TooLarge)?;
    let _g = write_lock();
    h.with_streams(|at| {
        let found = locate(at, stored)?;
        let name = found.as_ref().map_or(stored, |(n, _)| n.as_str());
        if let Some(fd) = h.file_for(at, name, found.as_ref().map(|f| f.1), end)? {
            write_all_at(&fd, buf, offset)?;
            return Ok(buf.len());
        }
        let mut data = xattr_value(at, name)?;
        let (start, end) = (offset as usize, end as usize);
        if data.len() < end {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(buf);
        h.set_value(at, name, &data)?;
        Ok(buf.len())
    })
}

/// Truncates or extends stream `stored` to `len` bytes.
pub(super) fn set_len(h: &LocalHandle, stored: &str, len: u64) -> Result<()> {
    h.check_writable()?;
    check_name(stored)?;
    if len > i64::MAX as u64 {
        return Err(VfsError::TooLarge);
    }
    let _g = write_lock();
    h.with_streams(|at| {
        let found = locate(at, stored)?;
        let name = found.as_ref().map_or(stored, |(n, _)| n.as_str());
        if len == 0 && found.as_ref().is_some_and(|f| f.1 == Place::Spill) {
            // Emptied (an overwrite of the stream): back to an xattr, the spill file goes.
            h.remove_stream(at, name, Place::Spill)?;
            return h.set_value(at, name, &[]);
        }
        if let Some(fd) = h.file_for(at, name, found.as_ref().map(|f| f.1), len)? {
            return rustix::fs::ftruncate(&fd, len).map_err(map_errno);
        }
        let mut data = xattr_value(at, name)?;
        data.resize(len as usize, 0);
        h.set_value(at, name, &data)
    })
}

/// Creates, replaces or (`None`) removes the stream `name`.
pub(super) fn write(h: &LocalHandle, name: &str, data: Option<&[u8]>) -> Result<()> {
    check_name(name)?;
    let _g = write_lock();
    h.with_streams(|at| {
        let found = locate(at, name)?;
        let stored = found.as_ref().map_or(name, |(n, _)| n.as_str()).to_owned();
        let Some(data) = data else {
            return match found {
                Some((_, place)) => h.remove_stream(at, &stored, place),
                None => Ok(()),
            };
        };
        if let Some((_, Place::Spill)) = found {
            h.remove_stream(at, &stored, Place::Spill)?;
        }
        if data.len() as u64 > SPILL_AT {
            return h.spill(at, &stored, data).map(drop);
        }
        h.set_value(at, &stored, data)
    })
}

/// Renames stream `from` to `to`, replacing another stream `to` only with `replace`.
pub(super) fn rename(h: &LocalHandle, from: &str, to: &str, replace: bool) -> Result<()> {
    h.check_writable()?;
    check_name(to)?;
    let _g = write_lock();
    h.with_streams(|at| {
        let (stored, place) = locate(at, from)?.ok_or(VfsError::NotFound)?;
        if let Some((target, tplace)) = locate(at, to)? {
            if target != stored {
                if !same_name(&target, &stored) && !replace {
                    return Err(VfsError::Exists);
                }
                h.remove_stream(at, &target, tplace)?;
            }
        }
        if stored == to {
            return Ok(());
        }
        match place {
            Place::Xattr => {
                let data = xattr_value(at, &stored)?;
                remove_xattr(at, &xattr_key(&stored))?;
                h.set_value(at, to, &data)
            }
            Place::Spill => {
                spill::rename(&h.root, &h.spill_key()?, &stored, to)?;
                set_xattr_kept(at, &marker_key(to), b"")?;
                remove_xattr(at, &marker_key(&stored))
            }
        }
    })
}
