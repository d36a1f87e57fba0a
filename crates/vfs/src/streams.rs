//! Named (alternate data) streams: a handle on one stream of a file.
//!
//! A backend stores a file's streams beside it ([`FileHandle::streams`],
//! [`FileHandle::read_stream`], [`FileHandle::write_stream`]): the local backend in user
//! xattrs named [`STREAM_XATTR_PREFIX`] + the stream name, the memory backend in the node.
//! A backend reads and writes a stream positionally ([`FileHandle::stream_read_at`] and
//! friends); the defaults here rewrite the whole value, bounded by [`MAX_STREAM_LEN`], and
//! the local backend moves a stream that outgrows an xattr to a spill file.
//! [`StreamHandle`] gives one stream the ordinary [`FileHandle`] shape, so protocol code
//! reads, writes and sizes it as any file.

use std::sync::{Arc, Mutex};

use crate::{DirEntry, FileAttrs, FileHandle, Result, SetTimes, VfsError};

/// Prefix of the xattrs holding named streams on the local backend; the stream name (as
/// created) follows it.
pub const STREAM_XATTR_PREFIX: &str = "user.braid.stream.";

/// Largest named stream a backend keeps as one value, in bytes: Linux's bound on one xattr
/// value (XATTR_SIZE_MAX). The local backend spills larger streams to files.
pub const MAX_STREAM_LEN: usize = 65_536;

/// Longest stream name, in bytes of UTF-8: an xattr name is at most 255 bytes, prefix
/// included.
pub const MAX_STREAM_NAME_LEN: usize = 255 - STREAM_XATTR_PREFIX.len();

/// Allocation unit reported for a stream's bytes.
const STREAM_BLOCK: u64 = 4096;

/// Serialises the read-modify-write of whole stream values (and the local backend's move
/// of a stream from its xattr to a spill file): two writers to one stream must not
/// interleave. Streams are rare; one lock for the process is enough.
static WRITES: Mutex<()> = Mutex::new(());

/// Takes [`WRITES`].
pub(crate) fn write_lock() -> std::sync::MutexGuard<'static, ()> {
    WRITES.lock().unwrap_or_else(|p| p.into_inner())
}

/// One named stream of an open file, read and written through the file's handle.
#[derive(Debug)]
pub struct StreamHandle {
    base: Arc<dyn FileHandle>,
    /// The stream's name as stored when it was opened: the open's identity
    /// ([`FileHandle::stream_name`]), which a rename does not change.
    name: String,
    /// The stream's name now ([`FileHandle::stream_current_name`]), which I/O goes to.
    current: std::sync::RwLock<String>,
}

impl StreamHandle {
    /// A handle on the existing stream `name` (spelled as stored) of the file `base`.
    pub fn new(base: Arc<dyn FileHandle>, name: String) -> StreamHandle {
        let current = std::sync::RwLock::new(name.clone());
        StreamHandle { base, name, current }
    }

    /// The stream's current name; empty once the stream became the file's main stream.
    fn cur(&self) -> String {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The handle of the file this stream belongs to.
    pub fn base(&self) -> &Arc<dyn FileHandle> {
        &self.base
    }
}

/// `offset..offset + len` as a checked range of a value held whole.
fn span(offset: u64, len: usize) -> Result<(usize, usize)> {
    let start = usize::try_from(offset).map_err(|_| VfsError::TooLarge)?;
    let end = start.checked_add(len).ok_or(VfsError::TooLarge)?;
    if end > MAX_STREAM_LEN {
        return Err(VfsError::TooLarge);
    }
    Ok((start, end))
}

/// [`FileHandle::stream_read_at`] of a backend holding whole values.
pub(crate) fn whole_read_at<H: FileHandle + ?Sized>(h: &H, stored: &str, buf: &mut [u8], offset: u64) -> Result<usize> {
    // A stream removed under an open handle reads as empty, as an unlinked file would.
    let data = h.read_stream(stored)?.map(|(_, d)| d).unwrap_or_default();
    let Some(rest) = usize::try_from(offset).ok().and_then(|o| data.get(o..)) else { return Ok(0) };
    let n = rest.len().min(buf.len());
    buf[..n].copy_from_slice(&rest[..n]);
    Ok(n)
}

/// Changes a whole value under the write lock.
fn modify<H: FileHandle + ?Sized>(h: &H, stored: &str, f: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
    let _g = write_lock();
    let mut data = h.read_stream(stored)?.map(|(_, d)| d).unwrap_or_default();
    f(&mut data);
    h.write_stream(stored, Some(&data))
}

/// [`FileHandle::stream_write_at`] of a backend holding whole values.
pub(crate) fn whole_write_at<H: FileHandle + ?Sized>(h: &H, stored: &str, buf: &[u8], offset: u64) -> Result<usize> {
    let (start, end) = span(offset, buf.len())?;
    modify(h, stored, |data| {
        if data.len() < end {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(buf);
    })?;
    Ok(buf.len())
}

/// [`FileHandle::stream_set_len`] of a backend holding whole values.
pub(crate) fn whole_set_len<H: FileHandle + ?Sized>(h: &H, stored: &str, len: u64) -> Result<()> {
    let (_, end) = span(len, 0)?;
    modify(h, stored, |data| data.resize(end, 0))
}

/// [`FileHandle::rename_stream`] of a backend holding whole values.
pub(crate) fn whole_rename<H: FileHandle + ?Sized>(h: &H, from: &str, to: &str, replace: bool) -> Result<()> {
    check_name(to)?;
    let _g = write_lock();
    let (stored, data) = h.read_stream(from)?.ok_or(VfsError::NotFound)?;
    if let Some((target, _)) = h.find_stream(to)? {
        if !same_name(&target, &stored) && !replace {
            return Err(VfsError::Exists);
        }
        h.write_stream(&target, None)?;
    }
    h.write_stream(&stored, None)?;
    h.write_stream(to, Some(&data))
}

impl FileHandle for StreamHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        match self.cur() {
            main if main.is_empty() => self.base.read_at(buf, offset),
            name => self.base.stream_read_at(&name, buf, offset),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<usize> {
        match self.cur() {
            main if main.is_empty() => self.base.write_at(buf, offset),
            name => self.base.stream_write_at(&name, buf, offset),
        }
    }

    fn size(&self) -> Result<u64> {
        match self.cur() {
            main if main.is_empty() => self.base.size(),
            name => Ok(self.base.find_stream(&name)?.map_or(0, |(_, n)| n)),
        }
    }

    /// The file's attributes with the stream's size: times, attributes and file id are the
    /// file's, as Windows reports them for a stream.
    fn attrs(&self) -> Result<FileAttrs> {
        let mut a = self.base.attrs()?;
        let size = self.size()?;
        a.is_dir = false;
        a.dos_attributes &= !crate::dos::DIRECTORY;
        a.size = size;
        a.alloc_size = size.div_ceil(STREAM_BLOCK) * STREAM_BLOCK;
        Ok(a)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        match self.cur() {
            main if main.is_empty() => self.base.set_len(len),
            name => self.base.stream_set_len(&name, len),
        }
    }

    fn allocate(&self, len: u64) -> Result<()> {
        // Space is taken as the stream is written; only a length no store holds is refused.
        i64::try_from(len).map(|_| ()).map_err(|_| VfsError::TooLarge)
    }

    fn sync(&self) -> Result<()> {
        self.base.sync()
    }

    fn set_times(&self, times: SetTimes) -> Result<()> {
        self.base.set_times(times)
    }

    fn set_dos_attributes(&self, attrs: u32) -> Result<()> {
        self.base.set_dos_attributes(attrs)
    }

    fn read_dir(&self) -> Result<Vec<DirEntry>> {
        Err(VfsError::NotADirectory)
    }

    fn has_child(&self, _name: &str) -> Result<bool> {
        Err(VfsError::NotADirectory)
    }

    fn opened_path(&self) -> Option<crate::SharePath> {
        self.base.opened_path()
    }

    fn security_descriptor(&self) -> Result<Option<Vec<u8>>> {
        self.base.security_descriptor()
    }

    fn set_security_descriptor(&self, sd: &[u8]) -> Result<()> {
        self.base.set_security_descriptor(sd)
    }

    fn extended_attributes(&self) -> Result<Vec<(String, Vec<u8>)>> {
        self.base.extended_attributes()
    }

    fn set_extended_attribute(&self, name: &str, value: &[u8]) -> Result<()> {
        self.base.set_extended_attribute(name, value)
    }

    fn streams(&self) -> Result<Vec<(String, u64)>> {
        self.base.streams()
    }

    fn read_stream(&self, name: &str) -> Result<Option<(String, Vec<u8>)>> {
        self.base.read_stream(name)
    }

    fn write_stream(&self, name: &str, data: Option<&[u8]>) -> Result<()> {
        self.base.write_stream(name, data)
    }

    fn find_stream(&self, name: &str) -> Result<Option<(String, u64)>> {
        self.base.find_stream(name)
    }

    fn stream_read_at(&self, stored: &str, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.base.stream_read_at(stored, buf, offset)
    }

    fn stream_write_at(&self, stored: &str, buf: &[u8], offset: u64) -> Result<usize> {
        self.base.stream_write_at(stored, buf, offset)
    }

    fn stream_set_len(&self, stored: &str, len: u64) -> Result<()> {
        self.base.stream_set_len(stored, len)
    }

    /// Renaming this handle's own stream moves the handle along. `to` empty: the stream
    /// became the file's main stream (the caller moved its content there): it is removed,
    /// and this handle goes to the file's main stream from then on (through the file's
    /// handle, with its access).
    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> Result<()> {
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        if to.is_empty() {
            if !same_name(from, &cur) {
                return Err(VfsError::InvalidName);
            }
            self.base.write_stream(from, None)?;
        } else {
            self.base.rename_stream(from, to, replace)?;
        }
        if same_name(from, &cur) {
            *cur = to.to_owned();
        }
        Ok(())
    }

    fn stream_current_name(&self) -> Option<String> {
        Some(self.cur()).filter(|n| !n.is_empty())
    }

    fn file_attrs(&self) -> Result<FileAttrs> {
        self.base.attrs()
    }

    /// A stream has its file's mode and owner.
    fn set_mode(&self, mode: u32) -> Result<()> {
        self.base.set_mode(mode)
    }

    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.base.set_owner(uid, gid)
    }

    fn stream_name(&self) -> Option<&str> {
        Some(&self.name)
    }
}

/// Whether two stream names are the same name (case-insensitive, as NTFS compares them).
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.eq_ignore_ascii_case(b) || a.to_lowercase() == b.to_lowercase()
}

/// Refuses a stream name no backend stores: empty, with NUL, or over
/// [`MAX_STREAM_NAME_LEN`] bytes.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_STREAM_NAME_LEN || name.contains('\0') {
        return Err(VfsError::InvalidName);
    }
    Ok(())
}
