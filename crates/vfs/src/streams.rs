//! Named (alternate data) streams: a handle on one stream of a file.
//!
//! A backend stores a file's streams beside it ([`FileHandle::streams`],
//! [`FileHandle::read_stream`], [`FileHandle::write_stream`]): the local backend in user
//! xattrs named [`STREAM_XATTR_PREFIX`] + the stream name, the memory backend in the node.
//! A stream is read and written whole, so it is bounded by [`MAX_STREAM_LEN`], the largest
//! value Linux lets one xattr hold. [`StreamHandle`] gives one stream the ordinary
//! [`FileHandle`] shape, so protocol code reads, writes and sizes it as any file.

use std::sync::{Arc, Mutex};

use crate::{DirEntry, FileAttrs, FileHandle, Result, SetTimes, VfsError};

/// Prefix of the xattrs holding named streams on the local backend; the stream name (as
/// created) follows it.
pub const STREAM_XATTR_PREFIX: &str = "user.braid.stream.";

/// Largest named stream, in bytes: Linux's bound on one xattr value (XATTR_SIZE_MAX). Some
/// file systems hold less (ext4 without `ea_inode`: one block); a write they refuse is
/// `TooLarge` too.
pub const MAX_STREAM_LEN: usize = 65_536;

/// Longest stream name, in bytes of UTF-8: an xattr name is at most 255 bytes, prefix
/// included.
pub const MAX_STREAM_NAME_LEN: usize = 255 - STREAM_XATTR_PREFIX.len();

/// Allocation unit reported for a stream's bytes.
const STREAM_BLOCK: u64 = 4096;

/// Serialises the read-modify-write of stream contents: a write replaces the whole value,
/// so two writers to one stream must not interleave. Streams are small and rare; one lock
/// for the process is enough.
static WRITES: Mutex<()> = Mutex::new(());

/// One named stream of an open file, read and written through the file's handle.
#[derive(Debug)]
pub struct StreamHandle {
    base: Arc<dyn FileHandle>,
    /// The stream's name as stored.
    name: String,
}

impl StreamHandle {
    /// A handle on the existing stream `name` (spelled as stored) of the file `base`.
    pub fn new(base: Arc<dyn FileHandle>, name: String) -> StreamHandle {
        StreamHandle { base, name }
    }

    /// The handle of the file this stream belongs to.
    pub fn base(&self) -> &Arc<dyn FileHandle> {
        &self.base
    }

    fn content(&self) -> Result<Vec<u8>> {
        // A stream removed under an open handle reads as empty, as an unlinked file would.
        Ok(self.base.read_stream(&self.name)?.map(|(_, d)| d).unwrap_or_default())
    }

    /// Changes the content under the write lock.
    fn modify(&self, f: impl FnOnce(&mut Vec<u8>) -> Result<()>) -> Result<()> {
        let _g = WRITES.lock().unwrap_or_else(|p| p.into_inner());
        let mut data = self.content()?;
        f(&mut data)?;
        if data.len() > MAX_STREAM_LEN {
            return Err(VfsError::TooLarge);
        }
        self.base.write_stream(&self.name, Some(&data))
    }
}

/// `offset..offset + len` as a checked range of a stream.
fn span(offset: u64, len: usize) -> Result<(usize, usize)> {
    let start = usize::try_from(offset).map_err(|_| VfsError::TooLarge)?;
    let end = start.checked_add(len).ok_or(VfsError::TooLarge)?;
    if end > MAX_STREAM_LEN {
        return Err(VfsError::TooLarge);
    }
    Ok((start, end))
}

impl FileHandle for StreamHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let data = self.content()?;
        let Some(rest) = usize::try_from(offset).ok().and_then(|o| data.get(o..)) else { return Ok(0) };
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<usize> {
        let (start, end) = span(offset, buf.len())?;
        self.modify(|data| {
            if data.len() < end {
                data.resize(end, 0);
            }
            data[start..end].copy_from_slice(buf);
            Ok(())
        })?;
        Ok(buf.len())
    }

    fn size(&self) -> Result<u64> {
        Ok(self.content()?.len() as u64)
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
        let (_, end) = span(len, 0)?;
        self.modify(|data| {
            data.resize(end, 0);
            Ok(())
        })
    }

    fn allocate(&self, len: u64) -> Result<()> {
        span(len, 0).map(|_| ())
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

    fn file_attrs(&self) -> Result<FileAttrs> {
        self.base.attrs()
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
