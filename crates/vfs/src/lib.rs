//! Protocol-neutral storage for Braid.
//!
//! The VFS knows nothing of SMB or NFS: it takes validated share-relative paths and returns
//! plain metadata and [`VfsError`]s. Each protocol maps errors to its own status codes in one
//! place. All calls are synchronous and may block; servers call them off the async reactor.
//!
//! Two backends implement [`Backend`]: [`LocalBackend`] serves a directory of the local file
//! system and offers every transport fast path ([`FastPaths`]); [`MemoryBackend`] holds a
//! share in memory, bounded by a capacity, and offers none.

#![warn(missing_docs)]

mod cache;
mod copy;
pub mod creds;
mod error;
mod events;
mod fault_guard;
mod local;
mod mapped;
mod memory;
mod path;
mod streams;
pub use cache::{CacheConfig, CachedBackend, CachedHandle};
pub use copy::{clone_range, copy_range};
pub use error::VfsError;
pub use events::{what, CacheStats, Change, ChangeKind, ChangeSink, Delivery};
pub use local::{LocalBackend, LocalHandle, BTIME_XATTR, DOS_ATTR_XATTR, EA_XATTR_PREFIX, SECURITY_XATTR, SPILL_AT, SPILL_DIR, SPILL_XATTR_PREFIX};
pub use mapped::MappedRange;
pub use memory::{MemoryBackend, MemoryHandle};
pub use path::{validate_component, SharePath, MAX_COMPONENT_LEN, MAX_PATH_LEN};
pub use streams::{StreamHandle, MAX_STREAM_LEN, MAX_STREAM_NAME_LEN, STREAM_XATTR_PREFIX};

use std::time::SystemTime;

/// Result type of every VFS call.
pub type Result<T> = std::result::Result<T, VfsError>;

/// DOS-style attributes a backend stores beside the POSIX mode (MS-FSCC 2.6 values).
pub mod dos {
    /// Read-only file.
    pub const READONLY: u32 = 0x1;
    /// Hidden from ordinary listings.
    pub const HIDDEN: u32 = 0x2;
    /// Used by the operating system.
    pub const SYSTEM: u32 = 0x4;
    /// A directory (derived, never stored).
    pub const DIRECTORY: u32 = 0x10;
    /// Changed since the last backup.
    pub const ARCHIVE: u32 = 0x20;
    /// No other attribute set (wire-only; never reported by the VFS).
    pub const NORMAL: u32 = 0x80;
    /// Short-lived file (files only).
    pub const TEMPORARY: u32 = 0x100;
    /// A sparse file (files only): set and cleared by [`FileHandle::set_sparse`] alone,
    /// never by [`FileHandle::set_dos_attributes`], which keeps it as it is.
    pub const SPARSE_FILE: u32 = 0x200;
    /// Data not immediately available.
    pub const OFFLINE: u32 = 0x1000;
    /// Not to be indexed by content indexing services.
    pub const NOT_CONTENT_INDEXED: u32 = 0x2000;
}

/// Metadata of one file or directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileAttrs {
    /// Whether this is a directory.
    pub is_dir: bool,
    /// Logical size (end of file); 0 for directories.
    pub size: u64,
    /// Bytes allocated on disk.
    pub alloc_size: u64,
    /// Number of hard links.
    pub nlink: u32,
    /// Stable id unique within the share (inode number on the local backend).
    pub file_id: u64,
    /// Creation (birth) time.
    pub created: SystemTime,
    /// Last access time.
    pub accessed: SystemTime,
    /// Last data modification time.
    pub modified: SystemTime,
    /// Metadata change time.
    pub changed: SystemTime,
    /// DOS attributes (`dos::*`); DIRECTORY is set for directories, NORMAL never (the SMB
    /// layer adds it when nothing else is set).
    pub dos_attributes: u32,
    /// The POSIX view: object kind, permission bits, owner, device numbers.
    pub posix: Posix,
}

/// The kind of a file system object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (reported only by the `*_exact` calls, which do not follow it).
    Symlink,
    /// A block device.
    Block,
    /// A character device.
    Char,
    /// A named pipe.
    Fifo,
    /// A UNIX domain socket.
    Socket,
}

/// POSIX metadata of a file system object, as NFS reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posix {
    /// What the object is.
    pub kind: FileKind,
    /// Permission bits, setuid/setgid/sticky included (`0o7777`; no file type bits).
    pub mode: u32,
    /// Owning user id.
    pub uid: u32,
    /// Owning group id.
    pub gid: u32,
    /// Device numbers (major, minor) of a block or character device; (0, 0) otherwise.
    pub rdev: (u32, u32),
    /// Identifies the file system holding the object (device numbers on the local backend).
    pub fsid: u64,
}

/// Longest token [`Backend::file_token`] returns, in bytes.
pub const MAX_TOKEN_LEN: usize = 40;

impl VfsError {
    /// The error of an operation this backend (or this file system) cannot do.
    pub fn unsupported() -> VfsError {
        VfsError::Io(std::io::ErrorKind::Unsupported.into())
    }
}

/// Times to change; `None` leaves a time as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetTimes {
    /// New creation time.
    pub created: Option<SystemTime>,
    /// New last access time.
    pub accessed: Option<SystemTime>,
    /// New last modification time.
    pub modified: Option<SystemTime>,
    /// New metadata change time (backends that cannot set it ignore it).
    pub changed: Option<SystemTime>,
}

/// How [`Backend::open`] treats an existing or missing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    /// Fail with `NotFound` if missing.
    OpenExisting,
    /// Fail with `Exists` if present.
    CreateNew,
    /// Open if present, create if missing.
    OpenOrCreate,
}

/// What to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// The handle may read data.
    pub read: bool,
    /// The handle may write data.
    pub write: bool,
    /// What to do when the file exists or is missing.
    pub create: CreateMode,
    /// Truncate to zero length after opening (an existing file).
    pub truncate: bool,
    /// Must be (or, with a create mode, is created as) a directory; `NotADirectory` otherwise.
    pub directory: bool,
    /// Must not be a directory; `IsADirectory` otherwise.
    pub non_directory: bool,
}

impl OpenOptions {
    /// An existing object, opened to read or change its metadata only (no data access).
    pub const METADATA: OpenOptions =
        OpenOptions { read: false, write: false, create: CreateMode::OpenExisting, truncate: false, directory: false, non_directory: false };
}

/// Whether an open created the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenOutcome {
    /// An existing file was opened.
    Opened,
    /// The file was created.
    Created,
}

/// One entry of a directory listing (never `.` or `..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (a single valid component).
    pub name: String,
    /// The entry's metadata (of the target, for a symlink inside the share).
    pub attrs: FileAttrs,
}

/// Space figures of the filesystem under a share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    /// Size of the filesystem.
    pub total_bytes: u64,
    /// Free bytes in total.
    pub free_bytes: u64,
    /// Bytes available to the caller (may be less than free).
    pub avail_bytes: u64,
    /// Allocation unit in bytes.
    pub block_size: u32,
    /// Longest file name in bytes.
    pub max_name_len: u32,
    /// How many files (inodes) the filesystem can hold; 0 where it does not say.
    pub total_files: u64,
    /// Files that can still be created.
    pub free_files: u64,
    /// Files the caller can still create (may be less than free).
    pub avail_files: u64,
}

/// An open file or directory. Positional I/O only, so one handle serves concurrent requests.
pub trait FileHandle: Send + Sync + std::fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns bytes read (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize>;
    /// Writes all of `buf` at `offset`; returns bytes written.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<usize>;
    /// End of file, cheaper than [`FileHandle::attrs`] where the backend can tell it alone.
    fn size(&self) -> Result<u64> {
        Ok(self.attrs()?.size)
    }
    /// The transport fast paths this handle offers, if any: a server that holds only a
    /// `FileHandle` asks here before taking a path that bypasses `read_at`/`write_at`.
    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        None
    }
    /// Opens now what the handle would open on first use (a cached handle opens its file
    /// late), so that [`FileHandle::fast_paths`] answers for the file itself: a block clone
    /// ([`clone_range`]) needs both files' descriptors, and has no slower way to use.
    fn open_now(&self) -> Result<()> {
        Ok(())
    }
    /// Current metadata.
    fn attrs(&self) -> Result<FileAttrs>;
    /// Sets the end of file (truncate or extend with zeros).
    fn set_len(&self, len: u64) -> Result<()>;
    /// Reserves space (allocation size); may be a no-op where unsupported.
    fn allocate(&self, len: u64) -> Result<()>;
    /// fsync.
    fn sync(&self) -> Result<()>;
    /// Changes the times that are `Some`.
    fn set_times(&self, times: SetTimes) -> Result<()>;
    /// Stores the DOS attributes (READONLY, HIDDEN, SYSTEM, ARCHIVE, TEMPORARY, OFFLINE,
    /// NOT_CONTENT_INDEXED; others ignored). The file's [`dos::SPARSE_FILE`] stays as it is.
    fn set_dos_attributes(&self, attrs: u32) -> Result<()>;
    /// Marks a file sparse or not ([`dos::SPARSE_FILE`], stored with the DOS attributes).
    /// Only the mark changes: clearing it fills no hole. Directories: `IsADirectory`.
    fn set_sparse(&self, sparse: bool) -> Result<()> {
        let _ = sparse;
        Err(VfsError::unsupported())
    }
    /// Makes the bytes `offset..offset + len` read as zeros without moving the end of
    /// file; bytes past the end of file are left alone. With `deallocate` the storage of
    /// the range is freed where the file system can (a hole is punched; partial blocks are
    /// zeroed), otherwise it stays allocated. The default writes zeros through
    /// [`FileHandle::write_at`].
    fn zero_range(&self, offset: u64, len: u64, deallocate: bool) -> Result<()> {
        let _ = deallocate;
        write_zeros(self, offset, len)
    }
    /// The allocated ranges (offset, length) of `offset..offset + len`, clipped to the end
    /// of file, in order and merged, at most `max` of them (the caller asks for one more
    /// than it can answer to learn that more exist). Bytes in none of them read as zeros.
    /// The default reports the whole clipped range: storage without holes.
    fn allocated_ranges(&self, offset: u64, len: u64, max: usize) -> Result<Vec<(u64, u64)>> {
        let end = offset.saturating_add(len).min(self.size()?);
        Ok(if end > offset && max > 0 { vec![(offset, end - offset)] } else { Vec::new() })
    }
    /// Lists a directory handle's entries, sorted by name.
    fn read_dir(&self) -> Result<Vec<DirEntry>>;
    /// Whether a directory handle still has an entry `name` (without following a final
    /// symlink); lets an enumeration served from an older listing skip removed entries.
    fn has_child(&self, name: &str) -> Result<bool>;
    /// The path this handle was opened at, spelled as on disk: names are case-insensitive,
    /// so it may differ in case from the path the caller asked for. `None` if the backend
    /// does not know it.
    fn opened_path(&self) -> Option<SharePath> {
        None
    }
    /// The stored security descriptor, opaque to the VFS; `None` if none was stored (or the
    /// filesystem cannot store one).
    fn security_descriptor(&self) -> Result<Option<Vec<u8>>>;
    /// Stores a security descriptor of at most [`MAX_SECURITY_DESCRIPTOR_LEN`] bytes,
    /// replacing any earlier one. The bytes are kept, not enforced. On filesystems without
    /// user xattrs nothing is persisted (as for DOS attributes).
    fn set_security_descriptor(&self, sd: &[u8]) -> Result<()>;
    /// The extended attributes (name, non-empty value), sorted by name, at most [`MAX_EAS`].
    fn extended_attributes(&self) -> Result<Vec<(String, Vec<u8>)>>;
    /// Sets extended attribute `name` (1 to 255 bytes, no NUL; `InvalidName` otherwise) to
    /// `value` (at most [`MAX_EA_VALUE_LEN`] bytes); an empty value removes it. Adding one
    /// beyond [`MAX_EAS`] fails with `TooLarge`. Names are stored as given: callers that
    /// want case-insensitive names normalise them first.
    fn set_extended_attribute(&self, name: &str, value: &[u8]) -> Result<()>;
    /// The named (alternate data) streams of this file: each stream's name as created and
    /// its size, sorted by name. The main stream is not listed. Backends without streams
    /// have none.
    fn streams(&self) -> Result<Vec<(String, u64)>> {
        Ok(Vec::new())
    }
    /// The named stream `name` (matched case-insensitively): its name as stored and its
    /// content; `None` when the file has no such stream.
    fn read_stream(&self, name: &str) -> Result<Option<(String, Vec<u8>)>> {
        let _ = name;
        Ok(None)
    }
    /// Creates or replaces the named stream `name` with `data`, or removes it (`data` is
    /// `None`; removing a missing stream is not an error). An existing stream keeps its
    /// stored spelling. A backend that keeps whole values holds at most [`MAX_STREAM_LEN`]
    /// bytes (`TooLarge` beyond); the local backend spills larger streams to files.
    /// Backends without streams answer `Unsupported`.
    fn write_stream(&self, name: &str, data: Option<&[u8]>) -> Result<()> {
        let _ = (name, data);
        Err(VfsError::unsupported())
    }
    /// The named stream `name` (matched case-insensitively): its name as stored and its
    /// size, without reading its content.
    fn find_stream(&self, name: &str) -> Result<Option<(String, u64)>> {
        Ok(self.read_stream(name)?.map(|(n, d)| (n, d.len() as u64)))
    }
    /// Reads the stream `stored` (its stored name) at `offset`; a missing stream reads as
    /// empty. The default reads the whole value.
    fn stream_read_at(&self, stored: &str, buf: &mut [u8], offset: u64) -> Result<usize> {
        streams::whole_read_at(self, stored, buf, offset)
    }
    /// Writes `buf` into the stream `stored` at `offset`, growing it as needed. The default
    /// rewrites the whole value (bounded by [`MAX_STREAM_LEN`]).
    fn stream_write_at(&self, stored: &str, buf: &[u8], offset: u64) -> Result<usize> {
        streams::whole_write_at(self, stored, buf, offset)
    }
    /// Truncates or extends the stream `stored` to `len` bytes.
    fn stream_set_len(&self, stored: &str, len: u64) -> Result<()> {
        streams::whole_set_len(self, stored, len)
    }
    /// Renames the stream `from` to `to` (MS-FSA 2.1.5.14.11): `Exists` when `to` names
    /// another stream and `replace` is false; the content moves unchanged. On a
    /// [`StreamHandle`] renaming its own stream, the handle follows, and an empty `to` means
    /// the stream became the main stream (the caller copied its content there).
    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> Result<()> {
        streams::whole_rename(self, from, to, replace)
    }
    /// The metadata of the file itself: [`FileHandle::attrs`], except that a stream's
    /// handle answers for its file (the main stream's size, a directory's kind).
    fn file_attrs(&self) -> Result<FileAttrs> {
        self.attrs()
    }
    /// The name of the named stream this handle was opened on, if it is one
    /// ([`StreamHandle`]); `None` for the main stream. It stays the open's identity (its
    /// file-state key) when the stream is renamed.
    fn stream_name(&self) -> Option<&str> {
        None
    }
    /// The name the stream of this handle has now: [`FileHandle::stream_name`] unless the
    /// stream was renamed through this handle ([`FileHandle::rename_stream`]).
    fn stream_current_name(&self) -> Option<String> {
        self.stream_name().map(str::to_owned)
    }
    /// Sets the permission bits (`mode & 0o7777`), as chmod(2) does.
    fn set_mode(&self, mode: u32) -> Result<()> {
        let _ = mode;
        Err(VfsError::unsupported())
    }
    /// Changes the owning user and/or group (`None` keeps one), as chown(2) does.
    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        let _ = (uid, gid);
        Err(VfsError::unsupported())
    }
}

/// Writes zeros over `offset..offset + len`, clipped to the end of file, in bounded
/// pieces: the fallback of [`FileHandle::zero_range`].
pub(crate) fn write_zeros<H: FileHandle + ?Sized>(h: &H, offset: u64, len: u64) -> Result<()> {
    const PIECE: usize = 1 << 20;
    let end = offset.saturating_add(len).min(h.size()?);
    if end <= offset {
        return Ok(());
    }
    let zeros = vec![0u8; PIECE.min(usize::try_from(end - offset).unwrap_or(PIECE))];
    let mut at = offset;
    while at < end {
        let n = zeros.len().min(usize::try_from(end - at).unwrap_or(PIECE));
        h.write_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Transport fast paths a backend may offer beside [`FileHandle`]'s storage operations:
/// reads that must not block, and transfers between a file and a socket or pipe that skip
/// user space or a copy. Every method has a safe answer ("cannot", "no"), so a backend
/// implements only what it can do; a server falls back to `read_at`/`write_at` otherwise.
pub trait FastPaths: Send + Sync {
    /// [`FileHandle::read_at`] only if it cannot block on storage: the data is in memory
    /// (page cache, or a memory file system). `None` means "could block": call `read_at` on a
    /// thread that may. Lets a server answer cached reads without a thread hand-off.
    fn read_at_nowait(&self, _buf: &mut [u8], _offset: u64) -> Option<Result<usize>> {
        None
    }
    /// Whether this file's data lives in memory (tmpfs, ramfs), so small reads and writes
    /// never wait for a device (short of swap or memory reclaim).
    fn in_memory(&self) -> bool {
        false
    }
    /// Whether a write of `len` bytes at `offset` would be copied into the file in place (a
    /// memory file's mapping, wholly inside the file) rather than go through the file
    /// system's write path; lets a caller pick how to receive the bytes.
    fn overwrites_in_place(&self, _offset: u64, _len: usize) -> bool {
        false
    }
    /// One zero-copy transfer of up to `len` bytes at `offset` to `out` (a socket), as
    /// sendfile(2) does: returns the bytes sent, `WouldBlock` when `out` is full, and
    /// `Unsupported` when the backend cannot (the caller then reads and sends itself).
    fn send_to(&self, out: std::os::fd::BorrowedFd<'_>, offset: u64, len: usize) -> std::io::Result<usize> {
        let _ = (out, offset, len);
        Err(std::io::ErrorKind::Unsupported.into())
    }
    /// Whether [`FastPaths::send_to`] works on this handle.
    fn can_send_to(&self) -> bool {
        false
    }
    /// Up to `len` bytes at `offset` as a range of a memory mapping that can be written to
    /// a socket in one copy ([`MappedRange::write_after`]) without waiting for a device: the
    /// file is in memory, or the range's pages are all in the page cache now. The range ends
    /// at the end of file. `None` when the backend does not map this range (pages not
    /// cached, not readable, too long or too short a range, address-space budget spent):
    /// read it instead, on a thread that may block.
    fn map_range(&self, _offset: u64, _len: usize) -> Option<Result<MappedRange>> {
        None
    }
    /// Moves exactly `len` bytes from the pipe `from` into the file at `offset` with
    /// splice(2), so they never pass through user space; returns bytes written. The
    /// default (and a backend that cannot) answers `Unsupported` before taking any byte.
    fn splice_from(&self, from: std::os::fd::BorrowedFd<'_>, offset: u64, len: usize) -> Result<usize> {
        let _ = (from, offset, len);
        Err(VfsError::Io(std::io::ErrorKind::Unsupported.into()))
    }
    /// Whether [`FastPaths::splice_from`] works on this handle.
    fn can_splice_from(&self) -> bool {
        false
    }
    /// The file's descriptor, for a copy the kernel makes between two files
    /// ([`copy_range`]); `None` when the backend has none to offer (the copy then goes
    /// through `read_at`/`write_at`).
    fn copy_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

/// Most extended attributes a file may hold.
pub const MAX_EAS: usize = 128;

/// Largest extended attribute value, in bytes (the SMB length field is 16 bits).
pub const MAX_EA_VALUE_LEN: usize = 65_535;

/// Largest security descriptor a backend must store, in bytes (room for two maximal ACLs).
pub const MAX_SECURITY_DESCRIPTOR_LEN: usize = 192 * 1024;

/// A share's storage. Every path is relative to the share root and can never leave it.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Opens (or creates) a file or directory as `opts` say.
    fn open(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)>;
    /// Metadata without opening (does not follow a final symlink out of the share).
    fn stat(&self, path: &SharePath) -> Result<FileAttrs>;
    /// Removes a file, or an empty directory (`NotEmpty` otherwise).
    fn remove(&self, path: &SharePath) -> Result<()>;
    /// Renames; with `replace == false` fails with `Exists` if `to` exists.
    fn rename(&self, from: &SharePath, to: &SharePath, replace: bool) -> Result<()>;
    /// Space figures of the filesystem holding the share.
    fn statfs(&self) -> Result<FsStats>;
    /// Starts delivering changes made outside Braid to `sink` (once per backend; a later
    /// call replaces the sink) and says how such changes are learnt. The default backend
    /// learns of none.
    fn subscribe(&self, sink: ChangeSink) -> Delivery {
        let _ = sink;
        Delivery::None
    }
    /// The metadata cache's counters, if the backend caches metadata.
    fn cache_stats(&self) -> Option<CacheStats> {
        None
    }
    /// Whether files of this share can share extents ([`clone_range`]: xfs with reflink,
    /// btrfs). May block the first time (the local backend probes its file system once);
    /// the default backend cannot.
    fn block_cloning(&self) -> bool {
        false
    }
    /// Whether any file of this share may have a stored security descriptor
    /// ([`FileHandle::set_security_descriptor`]): when not, a server may skip reading
    /// descriptors to check access. The default cannot tell, so says yes.
    fn may_have_security_descriptors(&self) -> bool {
        true
    }
    /// Like [`Backend::open`] for a `path` already spelled as on disk, whose missing final
    /// name has no other spelling either: backends with case-insensitive lookups skip the
    /// directory scan. Symlinks are followed as by `open`. A cache that knows both calls
    /// this.
    fn open_spelled(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        self.open(path, opts)
    }
    /// Like [`Backend::open`], POSIX style, for NFS: exact names (no case-insensitive
    /// fallback: a create adds this spelling, even beside another spelling where the
    /// backend can hold both), and a final symlink is not followed. A symlink or special
    /// file opens for attributes only (neither read, write, truncate nor directory; those
    /// are `PermissionDenied` or `NotADirectory`), and a create mode on one is `Exists`;
    /// through such a handle `attrs`, `set_owner` and `set_times` act on the object itself,
    /// and `set_mode` of a symlink is unsupported (Linux has no lchmod).
    fn open_exact(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        self.open(path, opts)
    }
    /// Asks for the directory `path` to be watched for outside changes even when nothing of
    /// it is cached (a client watches it: SMB CHANGE_NOTIFY), so that [`Backend::subscribe`]'s
    /// sink hears of them. Backends that learn of no changes ignore it.
    fn watch_dir(&self, path: &SharePath) {
        let _ = path;
    }

    // POSIX calls, for NFS. Names are exact: no case-insensitive fallback ever applies to
    // these (nor to `open_exact`), and a final symlink is never followed (SMB's calls
    // follow symlinks that stay beneath the root).

    /// Metadata of the object at `path` itself (a final symlink is reported as
    /// [`FileKind::Symlink`], not followed), exact spelling only.
    fn stat_exact(&self, path: &SharePath) -> Result<FileAttrs> {
        let _ = path;
        Err(VfsError::unsupported())
    }
    /// Every entry of the directory `dir` (exact spelling) with its own metadata (symlinks
    /// and special files included, nothing followed), sorted by name. Names the share cannot
    /// express (not UTF-8, or invalid for [`SharePath`]) are left out.
    fn read_dir_exact(&self, dir: &SharePath) -> Result<Vec<DirEntry>> {
        let _ = dir;
        Err(VfsError::unsupported())
    }
    /// Removes the entry `path` (exact spelling; a file, symlink, special file, or an empty
    /// directory: `NotEmpty` otherwise).
    fn remove_exact(&self, path: &SharePath) -> Result<()> {
        let _ = path;
        Err(VfsError::unsupported())
    }
    /// Renames with POSIX rename(2) semantics and exact names: an existing `to` is replaced
    /// (a file by a file, a directory by a directory only if that one is empty); a final
    /// symlink is moved, not followed.
    fn rename_exact(&self, from: &SharePath, to: &SharePath) -> Result<()> {
        let _ = (from, to);
        Err(VfsError::unsupported())
    }
    /// The target of the symlink at `path` (exact spelling); `InvalidName` if not a symlink.
    fn readlink(&self, path: &SharePath) -> Result<String> {
        let _ = path;
        Err(VfsError::unsupported())
    }
    /// Creates the symlink `at` (exact spelling) pointing to `target`, which is stored as
    /// given (it is only followed beneath the share root by SMB lookups).
    fn symlink(&self, target: &str, at: &SharePath) -> Result<()> {
        let _ = (target, at);
        Err(VfsError::unsupported())
    }
    /// Adds the name `new` for the existing non-directory `existing` (a hard link).
    fn link(&self, existing: &SharePath, new: &SharePath) -> Result<()> {
        let _ = (existing, new);
        Err(VfsError::unsupported())
    }
    /// Creates a special file `at`: [`FileKind::Fifo`] or [`FileKind::Socket`], or a device
    /// ([`FileKind::Block`], [`FileKind::Char`] with `rdev`) where the process may; other
    /// kinds are `InvalidName`. `mode & 0o7777` is applied exactly (no umask).
    fn mknod(&self, at: &SharePath, kind: FileKind, mode: u32, rdev: (u32, u32)) -> Result<()> {
        let _ = (at, kind, mode, rdev);
        Err(VfsError::unsupported())
    }
    /// Creates the directory `at` (exact spelling) with exactly `mode & 0o7777` (no umask).
    fn mkdir(&self, at: &SharePath, mode: u32) -> Result<()> {
        let _ = (at, mode);
        Err(VfsError::unsupported())
    }
    /// A token of at most [`MAX_TOKEN_LEN`] bytes naming the object at `path` (exact
    /// spelling, not followed) that stays valid while the object exists, across renames
    /// and server restarts (on the local backend), and never names another object later.
    fn file_token(&self, path: &SharePath) -> Result<Vec<u8>> {
        let _ = path;
        Err(VfsError::unsupported())
    }
    /// The current path of the object a [`Backend::file_token`] token names, always inside
    /// the share. `NotFound` when the object is gone (stale); `Escape` when it now lies
    /// outside the share (moved out; as good as stale for a client); `InvalidName` for a
    /// token this backend never made; `PermissionDenied` on the local backend without
    /// CAP_DAC_READ_SEARCH (call it as the server, not inside [`creds::with_creds`]).
    fn resolve_token(&self, token: &[u8]) -> Result<SharePath> {
        let _ = token;
        Err(VfsError::unsupported())
    }
}
