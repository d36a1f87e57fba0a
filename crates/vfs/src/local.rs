//! [`LocalBackend`]: a share rooted in a directory of the local filesystem.
//!
//! Every lookup goes through `openat2` relative to an `O_PATH` fd of the root with
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, so the kernel itself refuses any resolution
//! (through `..` in a symlink, an absolute symlink, or a magic link) that would leave the
//! share; symlinks that stay inside are followed. Calls on a final name (create, mkdir,
//! unlink, rename) open the parent beneath the root and use the `*at` call with the single
//! validated component. Note that absolute symlinks are always refused, even ones that point
//! back into the share, since `RESOLVE_BENEATH` cannot tell.
//!
//! Names are case-insensitive and case-preserving (see [`case`]): a component missing with
//! the client's spelling is looked up case-insensitively in its parent, and the on-disk
//! spelling then goes through the same `openat2` resolution. The exact spelling is always
//! tried first, so only misses (and creations, which must not add a second spelling of an
//! existing name) pay for a directory scan.
//!
//! DOS attributes and creation-time overrides live in user xattrs ([`DOS_ATTR_XATTR`],
//! [`BTIME_XATTR`]); on filesystems without user xattrs they silently are not persisted.

pub(crate) mod case;
mod errno;
mod handle;
mod listing;
mod meta;
mod posix;
pub(crate) mod reflink;
mod sparse;
mod spill;
mod streams;
mod sys;
mod token;

pub use handle::LocalHandle;
pub use meta::{BTIME_XATTR, DOS_ATTR_XATTR, EA_XATTR_PREFIX, SECURITY_XATTR};
pub use spill::{SPILL_AT, SPILL_DIR, SPILL_XATTR_PREFIX};

use crate::{Backend, CreateMode, DirEntry, FileAttrs, FileHandle, FileKind, FsStats, OpenOptions, OpenOutcome, Result, SharePath, VfsError};
use errno::map_errno;
use handle::FdAccess;
use meta::{attrs_from, file_type, proc_fd_path, statx_at, statx_fd, XattrAt};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{fstatvfs, ftruncate, mkdirat, openat2, renameat_with, unlinkat, AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags, CWD};
use rustix::io::Errno;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Resolution rules of every lookup from the root.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);
/// Flags for a metadata-only lookup.
pub(crate) const PATH_ONLY: OFlags = OFlags::PATH;
/// Mode of new files (the umask still applies).
const FILE_MODE: u32 = 0o644;
/// Mode of new directories (the umask still applies).
const DIR_MODE: u32 = 0o755;
/// Longest name the share accepts, in bytes.
const MAX_NAME_LEN: u32 = 255;

/// State shared by a backend and all its handles.
pub(crate) struct Root {
    /// `O_PATH | O_DIRECTORY` fd of the share root.
    pub(crate) fd: OwnedFd,
    pub(crate) read_only: bool,
    /// Whether `/proc/self/fd` is usable, for xattrs of `O_PATH` fds and directory entries.
    pub(crate) proc_ok: bool,
    /// Change times set explicitly by clients, by file id: (time to report, kernel ctime
    /// right after the set). Linux cannot set ctime, so the override holds only until the
    /// file changes again (its kernel ctime moves). Kept in memory only and bounded.
    pub(crate) ctime_overrides: Mutex<HashMap<u64, (SystemTime, SystemTime)>>,
    /// The process umask, which `mkdir` and `mknod` undo to apply a mode exactly.
    pub(crate) umask: u32,
    /// When the root's file system makes kernel file handles (file tokens): the root's
    /// mount id, and an fd of the root open for reading (open_by_handle_at refuses O_PATH
    /// fds as its mount fd).
    pub(crate) handle_mount: Option<(i32, OwnedFd)>,
    /// Whether the file system can clone blocks between files (`reflink::probe`), learnt
    /// the first time it is asked.
    pub(crate) block_cloning: std::sync::OnceLock<bool>,
    /// Whether the share has (or had) a spill directory of large streams ([`spill`]):
    /// until it has, removals skip looking for spilled streams.
    pub(crate) spill_seen: std::sync::atomic::AtomicBool,
    /// Some file of the share has (or had) a stored security descriptor: the root carries
    /// [`meta::ACL_MARKER_XATTR`]. Read at start, set with the first descriptor stored.
    pub(crate) acls_seen: std::sync::atomic::AtomicBool,
}

/// Most change-time overrides remembered per share.
const MAX_CTIME_OVERRIDES: usize = 4096;

impl Root {
    /// Reads the root's [`meta::ACL_MARKER_XATTR`] into `acls_seen`.
    fn load_acl_marker(&self) {
        let seen = self.proc_ok && {
            let p = meta::proc_fd_path(self.fd.as_fd());
            matches!(meta::get_xattr_vec(&meta::XattrAt::Follow(&p), meta::ACL_MARKER_XATTR, 16), Ok(Some(_)))
        };
        self.acls_seen.store(seen, std::sync::atomic::Ordering::Release);
    }

    /// Records that a descriptor is being stored on this share: marks the root once (on
    /// disk first, so a crash between the two cannot leave a descriptor unmarked).
    pub(crate) fn mark_acls(&self) -> Result<()> {
        if self.acls_seen.load(std::sync::atomic::Ordering::Acquire) || !self.proc_ok {
            return Ok(());
        }
        let p = meta::proc_fd_path(self.fd.as_fd());
        meta::set_xattr(&meta::XattrAt::Follow(&p), meta::ACL_MARKER_XATTR, b"1")?;
        self.acls_seen.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// The current override of `file_id` if it still matches kernel ctime `kernel`.
    pub(crate) fn ctime_override_current(&self, file_id: u64, kernel: SystemTime) -> bool {
        let m = self.ctime_overrides.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&file_id).is_some_and(|&(_, k)| k == kernel)
    }

    /// Moves the kernel ctime an override of `file_id` is tied to, keeping the reported time.
    pub(crate) fn retarget_ctime_override(&self, file_id: u64, kernel: SystemTime) {
        let mut m = self.ctime_overrides.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = m.get_mut(&file_id) {
            e.1 = kernel;
        }
    }

    /// Records that `file_id` must report `changed` while its kernel ctime stays `kernel`.
    pub(crate) fn set_ctime_override(&self, file_id: u64, changed: SystemTime, kernel: SystemTime) {
        let mut m = self.ctime_overrides.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= MAX_CTIME_OVERRIDES && !m.contains_key(&file_id) {
            // Forget an arbitrary one: a lost override only means reporting the real ctime.
            if let Some(k) = m.keys().next().copied() {
                m.remove(&k);
            }
        }
        m.insert(file_id, (changed, kernel));
    }

    /// Replaces the kernel ctime in `a` by a client-set one that is still current.
    pub(crate) fn apply_ctime_override(&self, a: &mut FileAttrs) {
        let mut m = self.ctime_overrides.lock().unwrap_or_else(|e| e.into_inner());
        if m.is_empty() {
            return;
        }
        match m.get(&a.file_id) {
            Some(&(changed, kernel)) if kernel == a.changed => a.changed = changed,
            // The file changed since (or the id was reused): the override is stale.
            Some(_) => {
                m.remove(&a.file_id);
            }
            None => {}
        }
    }
}

/// A share stored in a local directory.
///
/// Cheap to clone (the root fd is shared); `Send + Sync` with no lock: every call is a few
/// independent system calls.
#[derive(Clone)]
pub struct LocalBackend {
    root: Arc<Root>,
    root_path: PathBuf,
}

impl fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalBackend").field("root", &self.root_path).field("read_only", &self.root.read_only).finish()
    }
}

/// `openat2` with retries on the transient errors it may return.
fn openat2_retry(dirfd: BorrowedFd<'_>, rel: &str, flags: OFlags, mode: Mode, resolve: ResolveFlags) -> std::result::Result<OwnedFd, Errno> {
    let mut again = 0;
    loop {
        match openat2(dirfd, rel, flags | OFlags::CLOEXEC, mode, resolve) {
            // RESOLVE_BENEATH returns EAGAIN when a concurrent rename may have raced `..`.
            Err(Errno::AGAIN) if again < 8 => again += 1,
            Err(Errno::INTR) => {}
            r => return r,
        }
    }
}

/// Opens `rel` (a `/`-joined share-relative path) beneath the root.
pub(crate) fn open_beneath(root: &Root, rel: &str, flags: OFlags) -> std::result::Result<OwnedFd, Errno> {
    openat2_retry(root.fd.as_fd(), rel, flags, Mode::empty(), RESOLVE)
}

/// A resolved parent directory: the root fd itself, or an `O_PATH` fd beneath it.
enum DirFd<'a> {
    Root(BorrowedFd<'a>),
    Sub(OwnedFd),
}

impl AsFd for DirFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            DirFd::Root(fd) => *fd,
            DirFd::Sub(fd) => fd.as_fd(),
        }
    }
}

/// Errors of a `*at` call on a final name in an already-open parent: a missing parent now
/// means it was removed meanwhile.
fn at_parent_err(e: Errno) -> VfsError {
    match e {
        Errno::NOENT => VfsError::PathNotFound,
        e => map_errno(e),
    }
}

/// Errors of `renameat`.
fn rename_err(e: Errno) -> VfsError {
    match e {
        // Moving a directory into itself.
        Errno::INVAL => VfsError::PermissionDenied,
        // Here EXDEV means another mount inside the share, not an escape.
        Errno::XDEV => VfsError::Io(e.into()),
        e => map_errno(e),
    }
}

/// Whether two statx results describe the same inode.
fn same_object(a: &rustix::fs::Statx, b: &rustix::fs::Statx) -> bool {
    a.stx_ino == b.stx_ino && a.stx_dev_major == b.stx_dev_major && a.stx_dev_minor == b.stx_dev_minor
}

/// Whether two resolved parents are the same directory.
fn same_dir(a: &DirFd<'_>, b: &DirFd<'_>) -> Result<bool> {
    Ok(same_object(&statx_fd(a.as_fd())?, &statx_fd(b.as_fd())?))
}

/// The entry a new name collides with in `dir`: the exact name, else a differently cased
/// one, with its spelling on disk.
fn colliding_entry(dir: BorrowedFd<'_>, name: &str) -> Result<Option<(String, rustix::fs::Statx)>> {
    match statx_at(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(dst) => Ok(Some((name.to_owned(), dst))),
        Err(VfsError::NotFound) => match case::find_in_dir(dir, name) {
            Some(n) => match statx_at(dir, &n, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(dst) => Ok(Some((n, dst))),
                Err(VfsError::NotFound) => Ok(None),
                Err(e) => Err(e),
            },
            None => Ok(None),
        },
        Err(e) => Err(e),
    }
}

/// Whether an open failure is a permission problem worth retrying with less access.
fn is_access_refusal(e: Errno) -> bool {
    matches!(e, Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::TXTBSY)
}

impl LocalBackend {
    /// Opens the share rooted at `root` (which must be an existing directory).
    ///
    /// With `read_only`, every mutating call fails with [`VfsError::ReadOnly`].
    pub fn new(root: &Path, read_only: bool) -> Result<Self> {
        let fd = rustix::fs::openat(CWD, root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).map_err(map_errno)?;
        // Fail now, not on the first request, if the kernel lacks openat2 (Linux < 5.6).
        drop(openat2_retry(fd.as_fd(), ".", PATH_ONLY, Mode::empty(), RESOLVE).map_err(map_errno)?);
        let proc_ok = Path::new("/proc/self/fd").is_dir();
        if !proc_ok {
            tracing::warn!("/proc is not mounted: DOS attributes of listings will not be read");
        }
        let handle_mount = sys::name_to_handle(fd.as_fd(), "").ok().and_then(|h| {
            let dir = rustix::fs::openat(&fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
            Some((h.mount_id, dir))
        });
        let umask = posix::process_umask();
        let b = LocalBackend {
            root: Arc::new(Root {
                fd,
                read_only,
                proc_ok,
                ctime_overrides: Mutex::new(HashMap::new()),
                umask,
                handle_mount,
                block_cloning: std::sync::OnceLock::new(),
                spill_seen: Default::default(),
                acls_seen: Default::default(),
            }),
            root_path: root.to_path_buf(),
        };
        b.sweep_spilled();
        b.root.load_acl_marker();
        Ok(b)
    }

    /// The directory this share is rooted in, as given to [`LocalBackend::new`].
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// Whether this backend refuses all changes.
    pub fn is_read_only(&self) -> bool {
        self.root.read_only
    }

    /// Refuses what no open can satisfy here: a contradictory request, or a change on a
    /// read-only share. Returns whether the share is read-only.
    fn check_open(&self, opts: OpenOptions) -> Result<bool> {
        if opts.directory && opts.non_directory {
            // Contradictory request: no object can satisfy it.
            return Err(VfsError::InvalidName);
        }
        let ro = self.root.read_only;
        if ro && (opts.write || opts.truncate || opts.create == CreateMode::CreateNew) {
            return Err(VfsError::ReadOnly);
        }
        Ok(ro)
    }

    /// Like [`Backend::open`], returning the concrete handle type.
    pub fn open_local(&self, path: &SharePath, opts: OpenOptions) -> Result<(LocalHandle, OpenOutcome)> {
        let ro = self.check_open(opts)?;
        match opts.create {
            CreateMode::OpenExisting => {
                let (r, _) = self.open_existing_ci(path, opts);
                Ok((r?, OpenOutcome::Opened))
            }
            CreateMode::CreateNew => {
                // A differently cased entry already holds the name: creating at its on-disk
                // spelling makes the exclusive create report it.
                let resolved = self.resolve_case(path);
                let path = resolved.as_ref().unwrap_or(path);
                Ok((self.create(path, opts)?, OpenOutcome::Created))
            }
            CreateMode::OpenOrCreate => {
                let (r, resolved) = self.open_existing_ci(path, opts);
                let path = resolved.as_ref().unwrap_or(path);
                match r {
                    Err(VfsError::NotFound) if ro => Err(VfsError::ReadOnly),
                    Err(VfsError::NotFound) => match self.create(path, opts) {
                        Ok(h) => Ok((h, OpenOutcome::Created)),
                        // Lost a race with another creator, or a dangling symlink holds the
                        // name.
                        Err(VfsError::Exists) => match self.open_existing_ci(path, opts).0 {
                            Err(VfsError::NotFound) => Err(VfsError::Exists),
                            r => r.map(|h| (h, OpenOutcome::Opened)),
                        },
                        Err(e) => Err(e),
                    },
                    r => r.map(|h| (h, OpenOutcome::Opened)),
                }
            }
        }
    }

    /// Like [`LocalBackend::open_local`] for a path spelled as on disk whose missing final
    /// name has no other spelling (see [`Backend::open_spelled`]): no case-insensitive scan.
    pub fn open_local_exact(&self, path: &SharePath, opts: OpenOptions) -> Result<(LocalHandle, OpenOutcome)> {
        let ro = self.check_open(opts)?;
        match opts.create {
            CreateMode::OpenExisting => Ok((self.open_existing(path, opts)?, OpenOutcome::Opened)),
            CreateMode::CreateNew => Ok((self.create(path, opts)?, OpenOutcome::Created)),
            CreateMode::OpenOrCreate => match self.open_existing(path, opts) {
                Err(VfsError::NotFound) if ro => Err(VfsError::ReadOnly),
                Err(VfsError::NotFound) => match self.create(path, opts) {
                    Ok(h) => Ok((h, OpenOutcome::Created)),
                    Err(VfsError::Exists) => self.open_existing(path, opts).map(|h| (h, OpenOutcome::Opened)),
                    Err(e) => Err(e),
                },
                r => r.map(|h| (h, OpenOutcome::Opened)),
            },
        }
    }

    /// `path` spelled as on disk where a component exists only in another case; `None`
    /// when nothing differs (see [`case::resolve`]).
    fn resolve_case(&self, path: &SharePath) -> Option<SharePath> {
        case::resolve(&self.root, path)
    }

    /// Opens an existing object, falling back to a case-insensitive lookup when the exact
    /// spelling is missing. Also returns the resolved path when the fallback changed it, so
    /// a following create lands in the right (on-disk) parent.
    fn open_existing_ci(&self, path: &SharePath, opts: OpenOptions) -> (Result<LocalHandle>, Option<SharePath>) {
        match self.open_existing(path, opts) {
            Err(e @ (VfsError::NotFound | VfsError::PathNotFound)) => match self.resolve_case(path) {
                Some(r) => (self.open_existing(&r, opts), Some(r)),
                None => (Err(e), None),
            },
            r => (r, None),
        }
    }

    /// Runs `f` on `path`, and once more on its on-disk spelling if `f` found nothing.
    fn with_case_fallback<T>(&self, path: &SharePath, f: impl Fn(&SharePath) -> Result<T>) -> Result<T> {
        match f(path) {
            Err(e @ (VfsError::NotFound | VfsError::PathNotFound)) => match self.resolve_case(path) {
                Some(r) => f(&r),
                None => Err(e),
            },
            r => r,
        }
    }

    /// Metadata of `path`, exact spelling only.
    fn stat_spelled(&self, path: &SharePath) -> Result<FileAttrs> {
        let fd = open_beneath(&self.root, &path.to_fs_relative(), PATH_ONLY).map_err(|e| self.classify(path, e))?;
        let stx = statx_fd(fd.as_fd())?;
        let mut a = if self.root.proc_ok {
            let p = proc_fd_path(fd.as_fd());
            attrs_from(&stx, Some(&XattrAt::Follow(&p)))
        } else {
            attrs_from(&stx, None)
        };
        self.root.apply_ctime_override(&mut a);
        Ok(a)
    }

    /// Whether the entry `path` exists with this exact spelling (a final symlink is not
    /// followed).
    fn lstat_exact(&self, path: &SharePath) -> Result<()> {
        let (parent, name) = self.parent_and_name(path)?;
        statx_at(parent.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW).map(|_| ())
    }

    /// Removes `path`, exact spelling only.
    fn remove_spelled(&self, path: &SharePath) -> Result<()> {
        let (parent, name) = self.parent_and_name(path)?;
        let spilled = self.spilled_key_before_remove(parent.as_fd(), name);
        // Try as a file first (the common case); Linux says EISDIR for a directory.
        let r = match unlinkat(&parent, name, AtFlags::empty()) {
            Err(Errno::ISDIR) => unlinkat(&parent, name, AtFlags::REMOVEDIR).map_err(|e| match e {
                Errno::NOTEMPTY | Errno::EXIST => VfsError::NotEmpty,
                e => map_errno(e),
            }),
            r => r.map_err(map_errno),
        };
        // The removed object's spilled streams go with it.
        r.map(|()| self.drop_spilled(spilled))
    }

    pub(crate) fn handle(&self, fd: OwnedFd, is_dir: bool, access: FdAccess, path: &SharePath, opts: OpenOptions) -> LocalHandle {
        let memory_backed = (opts.read || opts.write) && !is_dir && handle::is_memory_fs(&fd);
        // Memory files are mapped for most large transfers; files on disk only for cached
        // READs, so they look their windows up when they first map one.
        let windows = std::sync::OnceLock::new();
        if memory_backed {
            let _ = windows.set(crate::mapped::shared(fd.as_fd()));
        }
        LocalHandle {
            fd,
            is_dir,
            access,
            allow_read: opts.read,
            allow_write: opts.write,
            memory_backed,
            symlink: false,
            sticky_ctime: std::sync::atomic::AtomicBool::new(false),
            windows,
            recent_windows: Default::default(),
            path: path.clone(),
            root: Arc::clone(&self.root),
        }
    }

    /// Tries each `(flags, access)` in turn, moving on only when refused for permissions.
    fn open_first(&self, rel: &str, candidates: &[(OFlags, FdAccess)]) -> std::result::Result<(OwnedFd, FdAccess), Errno> {
        let mut last = Errno::ACCESS;
        for &(flags, access) in candidates {
            match open_beneath(&self.root, rel, flags) {
                Ok(fd) => return Ok((fd, access)),
                Err(e) if is_access_refusal(e) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    fn open_existing(&self, path: &SharePath, opts: OpenOptions) -> Result<LocalHandle> {
        let rel = path.to_fs_relative();
        // NONBLOCK so a FIFO in the share cannot hang us; it is refused right after.
        let data = OFlags::NONBLOCK | OFlags::NOCTTY;
        let mut dir_cands = vec![(OFlags::RDONLY | OFlags::DIRECTORY | data, FdAccess::ReadOnly)];
        if !opts.read {
            dir_cands.push((OFlags::PATH | OFlags::DIRECTORY, FdAccess::PathOnly));
        }
        let opened = if opts.directory {
            self.open_first(&rel, &dir_cands)
        } else {
            // O_RDWR whenever possible so set_len & co. work on any handle.
            let mut cands = Vec::with_capacity(3);
            if !self.root.read_only {
                cands.push((OFlags::RDWR | data, FdAccess::ReadWrite));
            }
            if !opts.write {
                cands.push((OFlags::RDONLY | data, FdAccess::ReadOnly));
                if !opts.read {
                    cands.push((OFlags::PATH, FdAccess::PathOnly));
                }
            }
            match self.open_first(&rel, &cands) {
                Err(Errno::ISDIR) if opts.non_directory => return Err(VfsError::IsADirectory),
                Err(Errno::ISDIR) => self.open_first(&rel, &dir_cands),
                r => r,
            }
        };
        let (fd, access) = opened.map_err(|e| self.classify(path, e))?;
        let is_dir = match file_type(&statx_fd(fd.as_fd())?) {
            FileType::Directory => true,
            FileType::RegularFile => false,
            // Devices, FIFOs and sockets are not served.
            _ => return Err(VfsError::PermissionDenied),
        };
        if is_dir && opts.non_directory {
            return Err(VfsError::IsADirectory);
        }
        if !is_dir && opts.directory {
            return Err(VfsError::NotADirectory);
        }
        if opts.truncate {
            if is_dir {
                return Err(VfsError::IsADirectory);
            }
            if access != FdAccess::ReadWrite {
                return Err(VfsError::PermissionDenied);
            }
            ftruncate(&fd, 0).map_err(map_errno)?;
        }
        Ok(self.handle(fd, is_dir, access, path, opts))
    }

    fn create(&self, path: &SharePath, opts: OpenOptions) -> Result<LocalHandle> {
        let Some(name) = path.file_name() else {
            // The root always exists.
            return Err(VfsError::Exists);
        };
        let parent = self.open_parent(path)?;
        // The name was just created by us: never follow anything at it.
        let strict = RESOLVE | ResolveFlags::NO_SYMLINKS;
        let (fd, is_dir, access) = if opts.directory {
            mkdirat(&parent, name, Mode::from_raw_mode(DIR_MODE)).map_err(at_parent_err)?;
            let flags = OFlags::RDONLY | OFlags::DIRECTORY;
            let fd = openat2_retry(parent.as_fd(), name, flags, Mode::empty(), strict).map_err(at_parent_err)?;
            (fd, true, FdAccess::ReadOnly)
        } else {
            let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL;
            let mode = Mode::from_raw_mode(FILE_MODE);
            let fd = openat2_retry(parent.as_fd(), name, flags, mode, strict).map_err(at_parent_err)?;
            (fd, false, FdAccess::ReadWrite)
        };
        Ok(self.handle(fd, is_dir, access, path, opts))
    }

    /// Opens the parent of `path` beneath the root; its failures mean `PathNotFound`.
    fn open_parent(&self, path: &SharePath) -> Result<DirFd<'_>> {
        let parent = path.parent().ok_or(VfsError::PermissionDenied)?;
        if parent.is_root() {
            return Ok(DirFd::Root(self.root.fd.as_fd()));
        }
        open_beneath(&self.root, &parent.to_fs_relative(), PATH_ONLY | OFlags::DIRECTORY).map(DirFd::Sub).map_err(|e| match e {
            Errno::NOENT | Errno::NOTDIR | Errno::LOOP => VfsError::PathNotFound,
            e => map_errno(e),
        })
    }

    /// Maps a failed lookup of `path`, telling a missing final name from a missing parent.
    fn classify(&self, path: &SharePath, e: Errno) -> VfsError {
        match e {
            Errno::NOENT | Errno::NOTDIR | Errno::LOOP if !path.is_root() => {
                match self.open_parent(path) {
                    Err(pe) => pe,
                    Ok(_) if e == Errno::NOTDIR => VfsError::NotADirectory,
                    // A symlink loop at the final name is as good as a dangling link.
                    Ok(_) => VfsError::NotFound,
                }
            }
            e => map_errno(e),
        }
    }

    /// Splits a non-root path into its resolved parent and final name.
    fn parent_and_name<'p>(&self, path: &'p SharePath) -> Result<(DirFd<'_>, &'p str)> {
        let name = path.file_name().ok_or(VfsError::PermissionDenied)?;
        Ok((self.open_parent(path)?, name))
    }
}

impl Backend for LocalBackend {
    fn open(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(opts.create != CreateMode::OpenExisting));
        }
        let (h, outcome) = self.open_local(path, opts)?;
        Ok((Box::new(h), outcome))
    }

    fn open_spelled(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(opts.create != CreateMode::OpenExisting));
        }
        let (h, outcome) = self.open_local_exact(path, opts)?;
        Ok((Box::new(h), outcome))
    }

    fn open_exact(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(opts.create != CreateMode::OpenExisting));
        }
        let (h, outcome) = self.open_local_posix(path, opts)?;
        Ok((Box::new(h), outcome))
    }

    fn stat(&self, path: &SharePath) -> Result<FileAttrs> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(false));
        }
        self.with_case_fallback(path, |p| self.stat_spelled(p))
    }

    fn remove(&self, path: &SharePath) -> Result<()> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(false));
        }
        if path.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        self.with_case_fallback(path, |p| self.remove_spelled(p))
    }

    /// Renames without following a final symlink (the link itself moves). Replacing never
    /// touches a directory: a directory target, or a directory source over a file, is
    /// `PermissionDenied` (as on Windows). A cross-filesystem move inside the share is
    /// `Io(EXDEV)`.
    fn rename(&self, from: &SharePath, to: &SharePath, replace: bool) -> Result<()> {
        if spill::is_hidden(from) || spill::is_hidden(to) {
            return Err(spill::hidden_err(spill::is_hidden(to) && !spill::is_hidden(from)));
        }
        if from.is_root() || to.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        // The source by its on-disk spelling.
        let from_res = match self.lstat_exact(from) {
            Err(VfsError::NotFound | VfsError::PathNotFound) => self.resolve_case(from),
            _ => None,
        };
        let from = from_res.as_ref().unwrap_or(from);
        let (fp, fname) = self.parent_and_name(from)?;
        let src = statx_at(fp.as_fd(), fname, AtFlags::SYMLINK_NOFOLLOW)?;
        if from == to {
            return Ok(());
        }
        // The target's parent by its on-disk spelling; the final name keeps the client's
        // spelling, since that is the new name.
        let to_res;
        let (tp, to) = match self.open_parent(to) {
            Ok(tp) => (tp, to),
            Err(VfsError::PathNotFound) => {
                let name = to.file_name().ok_or(VfsError::PermissionDenied)?;
                let parent = to.parent().ok_or(VfsError::PermissionDenied)?;
                to_res = self.resolve_case(&parent).ok_or(VfsError::PathNotFound)?.join(name)?;
                (self.open_parent(&to_res)?, &to_res)
            }
            Err(e) => return Err(e),
        };
        let tname = to.file_name().ok_or(VfsError::PermissionDenied)?;
        let existing = colliding_entry(tp.as_fd(), tname)?;
        // The spill files of a file this rename replaces go with it.
        let spilled = match &existing {
            Some((name, dst)) if replace && !same_object(&src, dst) => self.spilled_key_before_remove(tp.as_fd(), name),
            _ => None,
        };
        let src_dir = file_type(&src) == FileType::Directory;
        // A differently cased entry to replace (renamed to the new spelling afterwards).
        let mut replaced_spelling = None;
        if let Some((name, dst)) = existing {
            if name == fname && same_object(&src, &dst) && same_dir(&fp, &tp)? {
                // Only the case of the source's own name changes: a plain rename to the new
                // spelling, nothing is replaced.
            } else if !replace {
                return Err(VfsError::Exists);
            } else if src_dir || file_type(&dst) == FileType::Directory {
                return Err(VfsError::PermissionDenied);
            } else if name != tname {
                replaced_spelling = Some(name);
            }
        }
        if let Some(old) = replaced_spelling {
            // Replace the entry under its own spelling (atomically), then give it the new
            // spelling. Should the second step fail, the file still moved, under the old
            // spelling of the name, which a case-insensitive client sees as the same name.
            renameat_with(&fp, fname, &tp, old.as_str(), RenameFlags::empty()).map_err(rename_err)?;
            if let Err(e) = renameat_with(&tp, old.as_str(), &tp, tname, RenameFlags::NOREPLACE) {
                tracing::debug!(error = %e, "keeping the replaced entry's spelling");
            }
            self.drop_spilled(spilled);
            return Ok(());
        }
        let flags = if replace {
            RenameFlags::empty()
        } else {
            // Closes the window between the check above and the rename.
            RenameFlags::NOREPLACE
        };
        let r = match renameat_with(&fp, fname, &tp, tname, flags) {
            // Filesystems without RENAME_NOREPLACE; the check above must do.
            Err(Errno::INVAL) if !replace => renameat_with(&fp, fname, &tp, tname, RenameFlags::empty()),
            r => r,
        };
        r.map_err(rename_err)?;
        self.drop_spilled(spilled);
        Ok(())
    }

    fn stat_exact(&self, path: &SharePath) -> Result<FileAttrs> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(false));
        }
        self.posix_stat(path)
    }

    fn read_dir_exact(&self, dir: &SharePath) -> Result<Vec<DirEntry>> {
        if spill::is_hidden(dir) {
            return Err(spill::hidden_err(false));
        }
        self.posix_read_dir(dir)
    }

    fn remove_exact(&self, path: &SharePath) -> Result<()> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(false));
        }
        self.posix_remove(path)
    }

    fn rename_exact(&self, from: &SharePath, to: &SharePath) -> Result<()> {
        if spill::is_hidden(from) || spill::is_hidden(to) {
            return Err(spill::hidden_err(spill::is_hidden(to) && !spill::is_hidden(from)));
        }
        self.posix_rename(from, to)
    }

    fn readlink(&self, path: &SharePath) -> Result<String> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(false));
        }
        self.posix_readlink(path)
    }

    fn symlink(&self, target: &str, at: &SharePath) -> Result<()> {
        if spill::is_hidden(at) || spill::is_hidden_target(target) {
            return Err(spill::hidden_err(true));
        }
        self.posix_symlink(target, at)
    }

    fn link(&self, existing: &SharePath, new: &SharePath) -> Result<()> {
        if spill::is_hidden(existing) || spill::is_hidden(new) {
            return Err(spill::hidden_err(spill::is_hidden(new)));
        }
        self.posix_link(existing, new)
    }

    fn mknod(&self, at: &SharePath, kind: FileKind, mode: u32, rdev: (u32, u32)) -> Result<()> {
        if spill::is_hidden(at) {
            return Err(spill::hidden_err(true));
        }
        self.posix_mknod(at, kind, mode, rdev)
    }

    fn mkdir(&self, at: &SharePath, mode: u32) -> Result<()> {
        if spill::is_hidden(at) {
            return Err(spill::hidden_err(true));
        }
        self.posix_mkdir(at, mode)
    }

    fn file_token(&self, path: &SharePath) -> Result<Vec<u8>> {
        if spill::is_hidden(path) {
            return Err(spill::hidden_err(false));
        }
        self.token(path)
    }

    fn resolve_token(&self, token: &[u8]) -> Result<SharePath> {
        let path = self.resolve(token)?;
        if spill::is_hidden(&path) {
            return Err(VfsError::NotFound);
        }
        Ok(path)
    }

    fn statfs(&self) -> Result<FsStats> {
        let v = fstatvfs(&self.root.fd).map_err(map_errno)?;
        // Block counts are in fragment units; old filesystems report only f_bsize.
        let unit = if v.f_frsize != 0 { v.f_frsize } else { v.f_bsize };
        Ok(FsStats {
            total_bytes: v.f_blocks.saturating_mul(unit),
            free_bytes: v.f_bfree.saturating_mul(unit),
            avail_bytes: v.f_bavail.saturating_mul(unit),
            block_size: u32::try_from(unit).unwrap_or(u32::MAX),
            max_name_len: MAX_NAME_LEN,
            total_files: v.f_files,
            free_files: v.f_ffree,
            avail_files: v.f_favail,
        })
    }

    fn may_have_security_descriptors(&self) -> bool {
        self.root.acls_seen.load(std::sync::atomic::Ordering::Acquire)
    }

    fn block_cloning(&self) -> bool {
        *self.root.block_cloning.get_or_init(|| {
            let block = self.statfs().map_or(4096, |s| s.block_size);
            let can = !self.root.read_only && reflink::probe(self.root.fd.as_fd(), block);
            tracing::debug!(root = %self.root_path.display(), can, "block cloning probed");
            can
        })
    }
}
