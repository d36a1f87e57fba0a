//! [`LocalHandle`]: an open file or directory of a [`LocalBackend`](super::LocalBackend).

use super::errno::map_errno;
use super::listing;
use super::meta::{
    attrs_from, encode_btime, get_xattr_vec, list_xattrs, proc_fd_path, remove_xattr, set_xattr, statx_fd, stored_dos, to_timespec, XattrAt,
    BTIME_XATTR, DOS_ATTR_XATTR, EA_XATTR_PREFIX, SECURITY_XATTR, STORED_DOS,
};
use super::Root;
use crate::{dos, DirEntry, FastPaths, FileAttrs, FileHandle, MappedRange, Result, SetTimes, SharePath, VfsError};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{fallocate, fsync, ftruncate, futimens, utimensat, AtFlags, FallocateFlags, Timespec, Timestamps, UTIME_NOW, UTIME_OMIT};
use rustix::io::{pread, pwrite, Errno};
use std::fmt;
use std::sync::Arc;

/// What the kernel lets us do with a handle's fd (independent of what the client asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FdAccess {
    /// `O_RDWR`: data and metadata changes possible.
    ReadWrite,
    /// `O_RDONLY` (all directories, and files we may not write).
    ReadOnly,
    /// `O_PATH`: metadata only, for objects we may neither read nor write.
    PathOnly,
}

/// An open file or directory on the local filesystem.
///
/// Read and write permissions asked for at open time are enforced here for `read_at` and
/// `write_at`; metadata calls (`set_len`, `set_times`, …) work on any handle whose fd allows
/// them, since the protocol layer checks its own access masks.
pub struct LocalHandle {
    pub(crate) fd: OwnedFd,
    pub(crate) is_dir: bool,
    pub(crate) access: FdAccess,
    pub(crate) allow_read: bool,
    pub(crate) allow_write: bool,
    /// The file lives on tmpfs or ramfs: reads never wait for a device.
    pub(crate) memory_backed: bool,
    /// An `O_PATH` fd of a symlink itself (`Backend::open_exact`): nothing may go through
    /// its `/proc` link, which would follow the symlink.
    pub(crate) symlink: bool,
    /// Path at open time; used to resolve symlinks met while listing (stale after a rename
    /// of an ancestor, which only affects such symlink entries).
    pub(crate) path: SharePath,
    pub(crate) root: Arc<Root>,
    /// Set once a change time was set through this handle: like Windows (MS-FSA
    /// 2.1.5.14.2, Open.UserSetChangeTime), later changes through it keep that time.
    pub(crate) sticky_ctime: std::sync::atomic::AtomicBool,
    /// Mappings of the file, for [`FastPaths::map_range`], shared with the file's other
    /// handles (set at open for memory files, at the first mapping for others), and the few
    /// this handle used last (`Windows::range_through`).
    pub(crate) windows: std::sync::OnceLock<Arc<crate::mapped::Windows>>,
    pub(crate) recent_windows: crate::mapped::Windows,
}

/// Whether `fd` is on a file system kept in memory (tmpfs, ramfs), whose reads never wait
/// for a device. (A tmpfs page in swap is the exception; reading it back blocks briefly.)
pub(crate) fn is_memory_fs(fd: &OwnedFd) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    rustix::fs::fstatfs(fd).is_ok_and(|s| {
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let t = s.f_type as i64;
        t == TMPFS_MAGIC || t == RAMFS_MAGIC
    })
}

impl fmt::Debug for LocalHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalHandle")
            .field("path", &self.path.to_smb_string())
            .field("is_dir", &self.is_dir)
            .field("access", &self.access)
            .field("read", &self.allow_read)
            .field("write", &self.allow_write)
            .finish()
    }
}

impl LocalHandle {
    /// The share path this handle was opened with.
    pub fn path(&self) -> &SharePath {
        &self.path
    }

    /// Whether this handle refers to a directory.
    pub fn is_dir(&self) -> bool {
        self.is_dir
    }

    /// A range of the file from its mapped windows (see `Windows::range_through`). Only
    /// memory files get writable windows: files on disk are mapped for reading alone.
    fn window_range(&self, offset: u64, len: usize, writable: bool) -> Option<MappedRange> {
        let shared = self.windows.get_or_init(|| crate::mapped::shared(self.fd.as_fd()));
        let rw = self.memory_backed && self.access == FdAccess::ReadWrite;
        self.recent_windows.range_through(shared, self.fd.as_fd(), offset, len, writable, rw)
    }

    /// A writable mapped range for a write of `len` bytes at `offset`, when the file is in
    /// memory, open for writing, the write large enough to be worth it and wholly inside
    /// the file (`fill_mapped`, `copy_mapped`); `None`: write the ordinary way.
    fn overwrite_range(&self, offset: u64, len: usize) -> Result<Option<MappedRange>> {
        if !self.mapped_overwrite(offset, len)? {
            return Ok(None);
        }
        Ok(self.window_range(offset, len, true))
    }

    /// The gate of `overwrite_range` (and of [`FileHandle::overwrites_in_place`]).
    fn mapped_overwrite(&self, offset: u64, len: usize) -> Result<bool> {
        if !self.memory_backed || self.access != FdAccess::ReadWrite || len < MAPPED_WRITE_MIN {
            return Ok(false);
        }
        let Some(end) = offset.checked_add(len as u64).filter(|e| *e <= MAX_OFFSET) else { return Ok(false) };
        Ok(self.size()? >= end)
    }

    /// Sets the write time as a write would: a write through a mapping does not.
    fn touch_write_time(&self) -> Result<()> {
        let now = Timespec { tv_sec: 0, tv_nsec: UTIME_NOW };
        let keep = Timespec { tv_sec: 0, tv_nsec: UTIME_OMIT };
        futimens(&self.fd, &Timestamps { last_access: keep, last_modification: now }).map_err(map_errno)
    }

    /// Copies up to `len` bytes of a pipe into a memory file at `offset` through a writable
    /// mapping, when the range lies inside the file: a plain copy into the page cache,
    /// where the file system's write path (splice, pwrite) costs about twice as much per
    /// page. Returns the bytes copied; the caller writes the rest the ordinary way (a range
    /// past the end of file, or a file cut short meanwhile). A write through a mapping does
    /// not touch the file's times, so they are set here as a write would set them.
    fn fill_mapped(&self, from: std::os::fd::BorrowedFd<'_>, offset: u64, len: usize) -> Result<usize> {
        let Some(m) = self.overwrite_range(offset, len)? else { return Ok(0) };
        let mut done = 0;
        while done < len {
            match m.fill_from(from, done) {
                Ok(0) => return Err(VfsError::Io(std::io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The file shrank under the mapping: the rest goes through the write path,
                // which extends it again as a write past the end does.
                Err(e) if e.raw_os_error() == Some(libc::EFAULT) => break,
                Err(e) => return Err(VfsError::Io(e)),
            }
        }
        if done > 0 {
            self.touch_write_time()?;
        }
        Ok(done)
    }

    /// Copies a buffered write into a memory file through a writable mapping when the range
    /// lies inside the file (see `fill_mapped`; here the copy is user space's, a plain
    /// `memcpy` where pwrite's per-page path costs ~3x as much on tmpfs). `None`: write the
    /// ordinary way.
    fn copy_mapped(&self, buf: &[u8], offset: u64) -> Result<Option<usize>> {
        let Some(m) = self.overwrite_range(offset, buf.len())? else { return Ok(None) };
        if m.copy_in(buf).is_none() {
            return Ok(None);
        }
        self.touch_write_time()?;
        Ok(Some(buf.len()))
    }

    /// Copies a large read of a memory file out of its mapping: one `memcpy`, where pread's
    /// per-page path costs ~2.5x as much on tmpfs (1 MiB: ~45 against ~130 µs). `None`:
    /// read the ordinary way. Bytes past a new end of file (the file cut short during the
    /// copy) read as zeros, as they do for READs sent from the mapping.
    fn copy_out_mapped(&self, buf: &mut [u8], offset: u64) -> Result<Option<usize>> {
        if buf.len() < MAPPED_READ_MIN {
            return Ok(None);
        }
        if !self.memory_backed {
            return Ok(None);
        }
        let Some(m) = self.map_range(offset, buf.len()) else { return Ok(None) };
        let m = m?;
        Ok(m.with_bytes(|b| {
            buf[..b.len()].copy_from_slice(b);
            b.len()
        }))
    }

    /// Common gate of every call that changes the file's data.
    fn check_data_change(&self) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        if self.is_dir {
            return Err(VfsError::IsADirectory);
        }
        if self.access != FdAccess::ReadWrite {
            return Err(VfsError::PermissionDenied);
        }
        Ok(())
    }

    /// Runs a change through this handle, keeping a client-set change time in force when
    /// this handle set it (see `sticky_ctime`).
    fn keeping_ctime<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        use std::sync::atomic::Ordering;
        if !self.sticky_ctime.load(Ordering::Relaxed) {
            return f();
        }
        let kernel_ctime = || -> Result<(u64, std::time::SystemTime)> {
            let stx = statx_fd(self.fd.as_fd())?;
            let a = attrs_from(&stx, None);
            Ok((a.file_id, a.changed))
        };
        let before = kernel_ctime()?;
        let current = self.root.ctime_override_current(before.0, before.1);
        let r = f()?;
        if current {
            let after = kernel_ctime()?;
            self.root.retarget_ctime_override(after.0, after.1);
        }
        Ok(r)
    }

    /// Changes the times that are `Some` (see [`FileHandle::set_times`]).
    fn apply_times(&self, times: SetTimes) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        if let Some(created) = times.created {
            self.with_xattr_at(|at| match at {
                Some(at) => set_xattr(at, BTIME_XATTR, &encode_btime(created)),
                None => Ok(()),
            })?;
        }
        if times.accessed.is_some() || times.modified.is_some() {
            let ts = |t: Option<_>| t.map(to_timespec).unwrap_or(Timespec { tv_sec: 0, tv_nsec: UTIME_OMIT });
            let stamps = Timestamps { last_access: ts(times.accessed), last_modification: ts(times.modified) };
            let r = if self.access == FdAccess::PathOnly {
                // futimens refuses O_PATH fds; the empty-path form does not.
                utimensat(&self.fd, "", &stamps, AtFlags::EMPTY_PATH)
            } else {
                futimens(&self.fd, &stamps)
            };
            r.map_err(map_errno)?;
        }
        if let Some(changed) = times.changed {
            // Linux cannot set ctime: remember the wish until the file next changes
            // through another handle.
            let stx = statx_fd(self.fd.as_fd())?;
            let now = attrs_from(&stx, None);
            self.root.set_ctime_override(now.file_id, changed, now.changed);
            self.sticky_ctime.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Replaces the stored DOS attributes with `f(what is stored now)`.
    fn store_dos(&self, f: impl FnOnce(Option<u32>) -> u32) -> Result<()> {
        self.with_xattr_at(|at| match at {
            Some(at) => set_xattr(at, DOS_ATTR_XATTR, &f(stored_dos(at)).to_le_bytes()),
            None => Ok(()),
        })
    }

    /// Zeros `offset..offset + len` (inside the file) with fallocate: a punched hole when
    /// `deallocate`, else zeroed blocks that stay allocated (ZERO_RANGE). `false`: the file
    /// system cannot (tmpfs has no ZERO_RANGE, and a hole allocated again there reads as a
    /// hole to SEEK_DATA), so the caller writes zeros.
    fn fallocate_zeros(&self, offset: u64, len: u64, deallocate: bool) -> Result<bool> {
        let mode = if deallocate { FallocateFlags::PUNCH_HOLE } else { FallocateFlags::ZERO_RANGE };
        match fallocate(&self.fd, FallocateFlags::KEEP_SIZE | mode, offset, len) {
            Ok(()) => Ok(true),
            Err(Errno::NOTSUP) => Ok(false),
            Err(e) => Err(map_errno(e)),
        }
    }

    /// Runs `f` with the xattr location of this handle's object.
    pub(super) fn with_xattr_at<T>(&self, f: impl FnOnce(Option<&XattrAt<'_>>) -> T) -> T {
        if self.symlink {
            // Its /proc link would lead on to the target; symlinks hold no user xattrs.
            return f(None);
        }
        if self.access == FdAccess::PathOnly {
            if !self.root.proc_ok {
                return f(None);
            }
            let p = proc_fd_path(self.fd.as_fd());
            f(Some(&XattrAt::Follow(&p)))
        } else {
            f(Some(&XattrAt::Fd(self.fd.as_fd())))
        }
    }
}

/// Largest offset the kernel accepts (`loff_t` is signed).
const MAX_OFFSET: u64 = i64::MAX as u64;

/// Smallest write copied through a mapping (`fill_mapped`, `copy_mapped`): below it the size
/// check and the time update cost more than the write path saves.
const MAPPED_WRITE_MIN: usize = 64 << 10;

/// Smallest read of a memory file copied out of a mapping (`copy_out_mapped`): below it the
/// window's bookkeeping costs about what pread's per-page path does.
const MAPPED_READ_MIN: usize = 64 << 10;

/// Smallest READ of a file on disk served from a mapping (`map_range`): below it the
/// residency check and the window's bookkeeping cost about what the copy saves.
const MAPPED_CACHED_READ_MIN: usize = 64 << 10;

impl FastPaths for LocalHandle {
    fn in_memory(&self) -> bool {
        self.memory_backed
    }

    fn copy_fd(&self) -> Option<BorrowedFd<'_>> {
        // An O_PATH descriptor reads and writes nothing: such opens copy through the buffer.
        (!self.is_dir && !self.symlink && self.access != FdAccess::PathOnly).then(|| self.fd.as_fd())
    }

    fn overwrites_in_place(&self, offset: u64, len: usize) -> bool {
        self.mapped_overwrite(offset, len).unwrap_or(false)
    }

    fn read_at_nowait(&self, buf: &mut [u8], offset: u64) -> Option<Result<usize>> {
        if self.is_dir || !self.allow_read || self.access == FdAccess::PathOnly {
            return None;
        }
        if self.memory_backed {
            // tmpfs answers RWF_NOWAIT with EOPNOTSUPP, but its pages are memory already.
            return Some(self.read_at(buf, offset));
        }
        if offset.checked_add(buf.len() as u64).is_none_or(|e| e > MAX_OFFSET) {
            return None;
        }
        // Whole or nothing: a short read may be a partly cached range, which the blocking
        // path then reads in full.
        match rustix::io::preadv2(&self.fd, &mut [std::io::IoSliceMut::new(buf)], offset, rustix::io::ReadWriteFlags::NOWAIT) {
            Ok(n) if n == buf.len() => Some(Ok(n)),
            _ => None,
        }
    }

    fn can_splice_from(&self) -> bool {
        !self.is_dir && self.allow_write && self.access != FdAccess::PathOnly
    }

    fn splice_from(&self, from: std::os::fd::BorrowedFd<'_>, offset: u64, len: usize) -> Result<usize> {
        self.keeping_ctime(|| {
            self.check_data_change()?;
            if !self.can_splice_from() {
                return Err(VfsError::PermissionDenied);
            }
            match offset.checked_add(len as u64) {
                Some(end) if end <= MAX_OFFSET => {}
                _ => return Err(VfsError::TooLarge),
            }
            let mut done = self.fill_mapped(from, offset, len)?;
            let mut off = offset + done as u64;
            while done < len {
                match rustix::pipe::splice(from, None, &self.fd, Some(&mut off), len - done, rustix::pipe::SpliceFlags::MOVE) {
                    // The pipe holds the whole payload: running dry means the caller lied.
                    Ok(0) => return Err(VfsError::Io(std::io::ErrorKind::UnexpectedEof.into())),
                    Ok(n) => done += n,
                    Err(Errno::INTR) => continue,
                    Err(e) => return Err(map_errno(e)),
                }
            }
            Ok(done)
        })
    }

    fn can_send_to(&self) -> bool {
        !self.is_dir && self.allow_read && self.access != FdAccess::PathOnly
    }

    fn send_to(&self, out: std::os::fd::BorrowedFd<'_>, offset: u64, len: usize) -> std::io::Result<usize> {
        if self.is_dir || !self.allow_read || self.access == FdAccess::PathOnly {
            return Err(std::io::ErrorKind::PermissionDenied.into());
        }
        let mut off = offset;
        rustix::fs::sendfile(out, &self.fd, Some(&mut off), len).map_err(std::io::Error::from)
    }

    fn map_range(&self, offset: u64, len: usize) -> Option<Result<MappedRange>> {
        if self.is_dir || !self.allow_read || self.access == FdAccess::PathOnly {
            return None;
        }
        if !self.memory_backed && len < MAPPED_CACHED_READ_MIN {
            return None;
        }
        let size = match self.size() {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        let avail = size.saturating_sub(offset).min(len as u64);
        if avail == 0 {
            return Some(Ok(MappedRange::empty()));
        }
        let m = self.window_range(offset, avail as usize, false)?;
        // A file on disk is sent from its mapping only while its pages are all in the page
        // cache: the caller copies from the mapping on an async worker, which must not wait
        // for the disk. Otherwise it reads the ordinary way, on a thread that may block.
        if !self.memory_backed && !m.resident() {
            return None;
        }
        Some(Ok(m))
    }
}

impl FileHandle for LocalHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        if self.is_dir {
            return Err(VfsError::IsADirectory);
        }
        if !self.allow_read || self.access == FdAccess::PathOnly {
            return Err(VfsError::PermissionDenied);
        }
        if let Some(n) = self.copy_out_mapped(buf, offset)? {
            return Ok(n);
        }
        let mut done = 0;
        while done < buf.len() {
            let Some(pos) = offset.checked_add(done as u64).filter(|p| *p <= MAX_OFFSET) else {
                break;
            };
            match pread(&self.fd, &mut buf[done..], pos) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(map_errno(e)),
            }
        }
        Ok(done)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<usize> {
        self.keeping_ctime(|| {
            self.check_data_change()?;
            if !self.allow_write {
                return Err(VfsError::PermissionDenied);
            }
            match offset.checked_add(buf.len() as u64) {
                Some(end) if end <= MAX_OFFSET => {}
                _ => return Err(VfsError::TooLarge),
            }
            if let Some(n) = self.copy_mapped(buf, offset)? {
                return Ok(n);
            }
            let mut done = 0;
            while done < buf.len() {
                match pwrite(&self.fd, &buf[done..], offset + done as u64) {
                    Ok(0) => return Err(VfsError::Io(std::io::ErrorKind::WriteZero.into())),
                    Ok(n) => done += n,
                    Err(Errno::INTR) => continue,
                    Err(e) => return Err(map_errno(e)),
                }
            }
            Ok(done)
        })
    }

    fn size(&self) -> Result<u64> {
        let st = rustix::fs::fstat(&self.fd).map_err(map_errno)?;
        Ok(u64::try_from(st.st_size).unwrap_or(0))
    }

    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        Some(self)
    }

    fn attrs(&self) -> Result<FileAttrs> {
        let stx = statx_fd(self.fd.as_fd())?;
        let mut a = self.with_xattr_at(|at| attrs_from(&stx, at));
        self.root.apply_ctime_override(&mut a);
        Ok(a)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.keeping_ctime(|| {
            self.check_data_change()?;
            if len > MAX_OFFSET {
                return Err(VfsError::TooLarge);
            }
            ftruncate(&self.fd, len).map_err(map_errno)
        })
    }

    fn allocate(&self, len: u64) -> Result<()> {
        self.keeping_ctime(|| {
            self.check_data_change()?;
            if len == 0 {
                return Ok(());
            }
            if len > MAX_OFFSET {
                return Err(VfsError::TooLarge);
            }
            // KEEP_SIZE: reserving space must not move the end of file.
            match fallocate(&self.fd, FallocateFlags::KEEP_SIZE, 0, len) {
                Ok(()) | Err(Errno::NOTSUP) => Ok(()),
                Err(e) => Err(map_errno(e)),
            }
        })
    }

    fn sync(&self) -> Result<()> {
        if self.access == FdAccess::PathOnly {
            // Nothing can have been written through a path-only handle.
            return Ok(());
        }
        fsync(&self.fd).map_err(map_errno)
    }

    fn set_times(&self, times: SetTimes) -> Result<()> {
        if times.changed.is_none() {
            self.keeping_ctime(|| self.apply_times(times))
        } else {
            self.apply_times(times)
        }
    }

    fn set_dos_attributes(&self, attrs: u32) -> Result<()> {
        self.keeping_ctime(|| {
            if self.root.read_only {
                return Err(VfsError::ReadOnly);
            }
            self.store_dos(|stored| (attrs & STORED_DOS) | (stored.unwrap_or(0) & dos::SPARSE_FILE))
        })
    }

    fn set_sparse(&self, sparse: bool) -> Result<()> {
        self.keeping_ctime(|| {
            if self.root.read_only {
                return Err(VfsError::ReadOnly);
            }
            if self.is_dir {
                return Err(VfsError::IsADirectory);
            }
            // Nothing stored reads as ARCHIVE (see `attrs_from`): keep that meaning.
            self.store_dos(|stored| {
                let v = stored.unwrap_or(dos::ARCHIVE);
                if sparse {
                    v | dos::SPARSE_FILE
                } else {
                    v & !dos::SPARSE_FILE
                }
            })
        })
    }

    fn zero_range(&self, offset: u64, len: u64, deallocate: bool) -> Result<()> {
        self.keeping_ctime(|| {
            self.check_data_change()?;
            let end = offset.saturating_add(len).min(self.size()?).min(MAX_OFFSET);
            if end <= offset {
                return Ok(());
            }
            if self.fallocate_zeros(offset, end - offset, deallocate)? {
                return Ok(());
            }
            crate::write_zeros(self, offset, end - offset)
        })
    }

    fn allocated_ranges(&self, offset: u64, len: u64, max: usize) -> Result<Vec<(u64, u64)>> {
        if self.is_dir {
            return Err(VfsError::IsADirectory);
        }
        if self.access == FdAccess::PathOnly {
            return Err(VfsError::PermissionDenied);
        }
        let end = offset.saturating_add(len).min(self.size()?).min(MAX_OFFSET);
        super::sparse::data_ranges(self.fd.as_fd(), offset, end, max)
    }

    fn set_mode(&self, mode: u32) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        if self.symlink {
            // Linux has no lchmod; the /proc route would change the target instead.
            return Err(VfsError::unsupported());
        }
        super::posix::chmod_fd(&self.root, self.fd.as_fd(), mode)
    }

    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        super::sys::fchown_empty(self.fd.as_fd(), uid, gid).map_err(map_errno)
    }

    fn read_dir(&self) -> Result<Vec<DirEntry>> {
        if !self.is_dir {
            return Err(VfsError::NotADirectory);
        }
        if self.access == FdAccess::PathOnly {
            return Err(VfsError::PermissionDenied);
        }
        listing::list(self)
    }

    fn has_child(&self, name: &str) -> Result<bool> {
        if !self.is_dir {
            return Err(VfsError::NotADirectory);
        }
        listing::has_child(self, name)
    }

    fn opened_path(&self) -> Option<SharePath> {
        Some(self.path.clone())
    }

    fn security_descriptor(&self) -> Result<Option<Vec<u8>>> {
        self.with_xattr_at(|at| match at {
            Some(at) => get_xattr_vec(at, SECURITY_XATTR, crate::MAX_SECURITY_DESCRIPTOR_LEN),
            None => Ok(None),
        })
    }

    fn extended_attributes(&self) -> Result<Vec<(String, Vec<u8>)>> {
        self.with_xattr_at(|at| {
            let Some(at) = at else { return Ok(Vec::new()) };
            let mut names = list_xattrs(at, EA_XATTR_PREFIX)?;
            names.sort_unstable();
            names.truncate(crate::MAX_EAS);
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                let key = format!("{EA_XATTR_PREFIX}{name}");
                // Removed meanwhile, or larger than we ever store: skip it.
                if let Some(v) = get_xattr_vec(at, &key, crate::MAX_EA_VALUE_LEN)? {
                    out.push((name, v));
                }
            }
            Ok(out)
        })
    }

    fn set_extended_attribute(&self, name: &str, value: &[u8]) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        if name.is_empty() || name.len() > 255 || name.contains('\0') {
            return Err(VfsError::InvalidName);
        }
        if value.len() > crate::MAX_EA_VALUE_LEN {
            return Err(VfsError::TooLarge);
        }
        let key = format!("{EA_XATTR_PREFIX}{name}");
        self.keeping_ctime(|| {
            self.with_xattr_at(|at| {
                let Some(at) = at else { return Ok(()) };
                if value.is_empty() {
                    return remove_xattr(at, &key);
                }
                // Bound the number per file; replacing an existing one is always fine.
                let names = list_xattrs(at, EA_XATTR_PREFIX)?;
                if names.len() >= crate::MAX_EAS && !names.iter().any(|n| n == name) {
                    return Err(VfsError::TooLarge);
                }
                set_xattr(at, &key, value)
            })
        })
    }

    fn streams(&self) -> Result<Vec<(String, u64)>> {
        super::streams::list(self)
    }

    fn read_stream(&self, name: &str) -> Result<Option<(String, Vec<u8>)>> {
        super::streams::read(self, name)
    }

    fn write_stream(&self, name: &str, data: Option<&[u8]>) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        super::streams::write(self, name, data)
    }

    fn find_stream(&self, name: &str) -> Result<Option<(String, u64)>> {
        super::streams::find(self, name)
    }

    fn stream_read_at(&self, stored: &str, buf: &mut [u8], offset: u64) -> Result<usize> {
        super::streams::read_at(self, stored, buf, offset)
    }

    fn stream_write_at(&self, stored: &str, buf: &[u8], offset: u64) -> Result<usize> {
        super::streams::write_at(self, stored, buf, offset)
    }

    fn stream_set_len(&self, stored: &str, len: u64) -> Result<()> {
        super::streams::set_len(self, stored, len)
    }

    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> Result<()> {
        super::streams::rename(self, from, to, replace)
    }

    fn set_security_descriptor(&self, sd: &[u8]) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        if sd.len() > crate::MAX_SECURITY_DESCRIPTOR_LEN {
            return Err(VfsError::TooLarge);
        }
        self.root.mark_acls()?;
        self.keeping_ctime(|| {
            self.with_xattr_at(|at| match at {
                Some(at) => set_xattr(at, SECURITY_XATTR, sd),
                None => Ok(()),
            })
        })
    }
}
