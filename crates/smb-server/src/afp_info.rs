//! The `AFP_AfpInfo` stream as macOS servers present it: 60 bytes of Finder metadata
//! (signature "AFP", version, backup date, 32 bytes of FinderInfo, ProDOS info), read and
//! written whole. macOS clients rely on its quirks, which Samba's `vfs_fruit` reproduces
//! and smbtorture `vfs.fruit` checks:
//! - a read at any offset up to 60 reads from the start (clients ask offset 0, length 60;
//!   macOS itself is off by one), past 60 it reads nothing; a stream never written reads as
//!   an empty AfpInfo (signature and version, all else zero);
//! - a write must start with "AFP", must not be a short write at an offset, and stores the
//!   first 60 bytes at offset 0; writes of 16 bytes or fewer change nothing; a write whose
//!   FinderInfo is all zeros removes the stream (that is how macOS deletes it);
//! - setting its size past 60 is ALLOTTED_SPACE_EXCEEDED; other sizes are accepted and
//!   ignored.
//!
//! A [`FileHandle`] wrapper over the stream's handle, so READ, WRITE and SET_INFO need not
//! know.

use std::sync::Arc;

use braid_vfs::{DirEntry, FileAttrs, FileHandle, Result, SetTimes, VfsError};

/// The stream's name and size.
pub const NAME: &str = "AFP_AfpInfo";
pub const SIZE: usize = 60;
/// Where FinderInfo lies in it.
const FINDER_INFO: std::ops::Range<usize> = 16..48;

/// Wraps `h` when it is the `AFP_AfpInfo` stream of a file.
pub fn wrap(h: Arc<dyn FileHandle>) -> Arc<dyn FileHandle> {
    if h.stream_name().is_some_and(|n| n.eq_ignore_ascii_case(NAME)) {
        Arc::new(AfpInfoHandle { inner: h })
    } else {
        h
    }
}

/// The empty AfpInfo: signature "AFP\0", version 1.0, the backup date "never".
fn empty() -> [u8; SIZE] {
    let mut b = [0u8; SIZE];
    b[..4].copy_from_slice(b"AFP\0");
    b[4..8].copy_from_slice(&0x0001_0000u32.to_be_bytes());
    b[12..16].copy_from_slice(&0x8000_0000u32.to_be_bytes());
    b
}

fn invalid() -> VfsError {
    VfsError::Io(std::io::ErrorKind::InvalidInput.into())
}

/// The error that maps to STATUS_ALLOTTED_SPACE_EXCEEDED.
pub fn space_exceeded() -> VfsError {
    VfsError::Io(std::io::Error::from_raw_os_error(libc::EOVERFLOW))
}

#[derive(Debug)]
struct AfpInfoHandle {
    inner: Arc<dyn FileHandle>,
}

impl AfpInfoHandle {
    /// The stream's name now (a rename may have changed it).
    fn stored_name(&self) -> String {
        self.inner.stream_current_name().unwrap_or_else(|| NAME.to_owned())
    }

    /// The stored value, or the empty AfpInfo when nothing (or nothing valid) is stored.
    fn content(&self) -> Result<[u8; SIZE]> {
        let stored = self.inner.read_stream(&self.stored_name())?.map(|(_, d)| d).unwrap_or_default();
        Ok(stored.get(..SIZE).and_then(|s| s.try_into().ok()).unwrap_or_else(empty))
    }
}

impl FileHandle for AfpInfoHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        if offset > SIZE as u64 {
            return Ok(0);
        }
        let data = self.content()?;
        let n = buf.len().min(SIZE);
        buf[..n].copy_from_slice(&data[..n]);
        Ok(n)
    }

    fn write_at(&self, data: &[u8], offset: u64) -> Result<usize> {
        if data.len() < 3 || (offset != 0 && data.len() < SIZE) || &data[..3] != b"AFP" {
            return Err(invalid());
        }
        if data.len() <= FINDER_INFO.start {
            return Ok(data.len());
        }
        let mut value = [0u8; SIZE];
        let n = data.len().min(SIZE);
        value[..n].copy_from_slice(&data[..n]);
        let name = self.stored_name();
        if value[FINDER_INFO].iter().all(|&b| b == 0) {
            self.inner.write_stream(&name, None)?;
        } else {
            self.inner.write_stream(&name, Some(&value))?;
        }
        Ok(data.len())
    }

    fn size(&self) -> Result<u64> {
        Ok(SIZE as u64)
    }

    fn attrs(&self) -> Result<FileAttrs> {
        let mut a = self.inner.attrs()?;
        a.size = SIZE as u64;
        Ok(a)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        if len > SIZE as u64 {
            return Err(space_exceeded());
        }
        Ok(())
    }

    fn allocate(&self, len: u64) -> Result<()> {
        self.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn set_times(&self, times: SetTimes) -> Result<()> {
        self.inner.set_times(times)
    }

    fn set_dos_attributes(&self, attrs: u32) -> Result<()> {
        self.inner.set_dos_attributes(attrs)
    }

    fn read_dir(&self) -> Result<Vec<DirEntry>> {
        Err(VfsError::NotADirectory)
    }

    fn has_child(&self, _name: &str) -> Result<bool> {
        Err(VfsError::NotADirectory)
    }

    fn opened_path(&self) -> Option<braid_vfs::SharePath> {
        self.inner.opened_path()
    }

    fn security_descriptor(&self) -> Result<Option<Vec<u8>>> {
        self.inner.security_descriptor()
    }

    fn set_security_descriptor(&self, sd: &[u8]) -> Result<()> {
        self.inner.set_security_descriptor(sd)
    }

    fn extended_attributes(&self) -> Result<Vec<(String, Vec<u8>)>> {
        self.inner.extended_attributes()
    }

    fn set_extended_attribute(&self, name: &str, value: &[u8]) -> Result<()> {
        self.inner.set_extended_attribute(name, value)
    }

    fn streams(&self) -> Result<Vec<(String, u64)>> {
        self.inner.streams()
    }

    fn read_stream(&self, name: &str) -> Result<Option<(String, Vec<u8>)>> {
        self.inner.read_stream(name)
    }

    fn write_stream(&self, name: &str, data: Option<&[u8]>) -> Result<()> {
        self.inner.write_stream(name, data)
    }

    fn file_attrs(&self) -> Result<FileAttrs> {
        self.inner.file_attrs()
    }

    fn stream_name(&self) -> Option<&str> {
        self.inner.stream_name()
    }

    fn set_mode(&self, mode: u32) -> Result<()> {
        self.inner.set_mode(mode)
    }

    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.inner.set_owner(uid, gid)
    }

    fn stream_current_name(&self) -> Option<String> {
        self.inner.stream_current_name()
    }

    fn find_stream(&self, name: &str) -> Result<Option<(String, u64)>> {
        self.inner.find_stream(name)
    }

    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> Result<()> {
        self.inner.rename_stream(from, to, replace)
    }
}

/// Whether a listed stream is an empty Apple stream, which macOS servers do not list (a
/// never-written AfpInfo or an empty resource fork).
pub fn hidden_when_empty(name: &str, size: u64) -> bool {
    size == 0 && (name.eq_ignore_ascii_case(NAME) || name.eq_ignore_ascii_case("AFP_Resource"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_afpinfo_has_signature_and_version() {
        let e = empty();
        assert_eq!(&e[..8], b"AFP\0\0\x01\0\0");
        assert!(e[FINDER_INFO].iter().all(|&b| b == 0));
        assert!(hidden_when_empty("afp_resource", 0));
        assert!(!hidden_when_empty("AFP_Resource", 1));
        assert!(!hidden_when_empty("Zone.Identifier", 0));
    }
}
