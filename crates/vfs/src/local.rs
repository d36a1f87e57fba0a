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
//! DOS attributes and creation-time overrides live in user xattrs ([`DOS_ATTR_XATTR`],
//! [`BTIME_XATTR`]); on filesystems without user xattrs they silently are not persisted.

mod errno;
mod handle;
mod listing;
mod meta;

pub use handle::LocalHandle;
pub use meta::{BTIME_XATTR, DOS_ATTR_XATTR};

use crate::{
    Backend, CreateMode, FileAttrs, FileHandle, FsStats, OpenOptions, OpenOutcome, Result,
    SharePath, VfsError,
};
use errno::map_errno;
use handle::FdAccess;
use meta::{attrs_from, file_type, proc_fd_path, statx_at, statx_fd, XattrAt};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{
    fstatvfs, ftruncate, mkdirat, openat2, renameat_with, unlinkat, AtFlags, FileType, Mode,
    OFlags, RenameFlags, ResolveFlags, CWD,
};
use rustix::io::Errno;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
        f.debug_struct("LocalBackend")
            .field("root", &self.root_path)
            .field("read_only", &self.root.read_only)
            .finish()
    }
}

/// `openat2` with retries on the transient errors it may return.
fn openat2_retry(
    dirfd: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    mode: Mode,
    resolve: ResolveFlags,
) -> std::result::Result<OwnedFd, Errno> {
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
pub(crate) fn open_beneath(
    root: &Root,
    rel: &str,
    flags: OFlags,
) -> std::result::Result<OwnedFd, Errno> {
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

/// Whether an open failure is a permission problem worth retrying with less access.
fn is_access_refusal(e: Errno) -> bool {
    matches!(e, Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::TXTBSY)
}

impl LocalBackend {
    /// Opens the share rooted at `root` (which must be an existing directory).
    ///
    /// With `read_only`, every mutating call fails with [`VfsError::ReadOnly`].
    pub fn new(root: &Path, read_only: bool) -> Result<Self> {
        let fd = rustix::fs::openat(
            CWD,
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(map_errno)?;
        // Fail now, not on the first request, if the kernel lacks openat2 (Linux < 5.6).
        drop(openat2_retry(fd.as_fd(), ".", PATH_ONLY, Mode::empty(), RESOLVE).map_err(map_errno)?);
        let proc_ok = Path::new("/proc/self/fd").is_dir();
        if !proc_ok {
            tracing::warn!("/proc is not mounted: DOS attributes of listings will not be read");
        }
        Ok(LocalBackend {
            root: Arc::new(Root {
                fd,
                read_only,
                proc_ok,
            }),
            root_path: root.to_path_buf(),
        })
    }

    /// The directory this share is rooted in, as given to [`LocalBackend::new`].
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// Whether this backend refuses all changes.
    pub fn is_read_only(&self) -> bool {
        self.root.read_only
    }

    /// Like [`Backend::open`], returning the concrete handle type.
    pub fn open_local(
        &self,
        path: &SharePath,
        opts: OpenOptions,
    ) -> Result<(LocalHandle, OpenOutcome)> {
        if opts.directory && opts.non_directory {
            // Contradictory request: no object can satisfy it.
            return Err(VfsError::InvalidName);
        }
        let ro = self.root.read_only;
        if ro && (opts.write || opts.truncate || opts.create == CreateMode::CreateNew) {
            return Err(VfsError::ReadOnly);
        }
        match opts.create {
            CreateMode::OpenExisting => Ok((self.open_existing(path, opts)?, OpenOutcome::Opened)),
            CreateMode::CreateNew => Ok((self.create(path, opts)?, OpenOutcome::Created)),
            CreateMode::OpenOrCreate => match self.open_existing(path, opts) {
                Err(VfsError::NotFound) if ro => Err(VfsError::ReadOnly),
                Err(VfsError::NotFound) => match self.create(path, opts) {
                    Ok(h) => Ok((h, OpenOutcome::Created)),
                    // Lost a race with another creator, or a dangling symlink holds the name.
                    Err(VfsError::Exists) => match self.open_existing(path, opts) {
                        Err(VfsError::NotFound) => Err(VfsError::Exists),
                        r => r.map(|h| (h, OpenOutcome::Opened)),
                    },
                    Err(e) => Err(e),
                },
                r => r.map(|h| (h, OpenOutcome::Opened)),
            },
        }
    }

    fn handle(
        &self,
        fd: OwnedFd,
        is_dir: bool,
        access: FdAccess,
        path: &SharePath,
        opts: OpenOptions,
    ) -> LocalHandle {
        LocalHandle {
            fd,
            is_dir,
            access,
            allow_read: opts.read,
            allow_write: opts.write,
            path: path.clone(),
            root: Arc::clone(&self.root),
        }
    }

    /// Tries each `(flags, access)` in turn, moving on only when refused for permissions.
    fn open_first(
        &self,
        rel: &str,
        candidates: &[(OFlags, FdAccess)],
    ) -> std::result::Result<(OwnedFd, FdAccess), Errno> {
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
        let mut dir_cands = vec![(
            OFlags::RDONLY | OFlags::DIRECTORY | data,
            FdAccess::ReadOnly,
        )];
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
            let fd = openat2_retry(parent.as_fd(), name, flags, Mode::empty(), strict)
                .map_err(at_parent_err)?;
            (fd, true, FdAccess::ReadOnly)
        } else {
            let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL;
            let mode = Mode::from_raw_mode(FILE_MODE);
            let fd =
                openat2_retry(parent.as_fd(), name, flags, mode, strict).map_err(at_parent_err)?;
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
        open_beneath(
            &self.root,
            &parent.to_fs_relative(),
            PATH_ONLY | OFlags::DIRECTORY,
        )
        .map(DirFd::Sub)
        .map_err(|e| match e {
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
    fn open(
        &self,
        path: &SharePath,
        opts: OpenOptions,
    ) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        let (h, outcome) = self.open_local(path, opts)?;
        Ok((Box::new(h), outcome))
    }

    fn stat(&self, path: &SharePath) -> Result<FileAttrs> {
        let fd = open_beneath(&self.root, &path.to_fs_relative(), PATH_ONLY)
            .map_err(|e| self.classify(path, e))?;
        let stx = statx_fd(fd.as_fd())?;
        if self.root.proc_ok {
            let p = proc_fd_path(fd.as_fd());
            Ok(attrs_from(&stx, Some(&XattrAt::Follow(&p))))
        } else {
            Ok(attrs_from(&stx, None))
        }
    }

    fn remove(&self, path: &SharePath) -> Result<()> {
        if path.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        let (parent, name) = self.parent_and_name(path)?;
        // Try as a file first (the common case); Linux says EISDIR for a directory.
        match unlinkat(&parent, name, AtFlags::empty()) {
            Ok(()) => Ok(()),
            Err(Errno::ISDIR) => unlinkat(&parent, name, AtFlags::REMOVEDIR).map_err(|e| match e {
                Errno::NOTEMPTY | Errno::EXIST => VfsError::NotEmpty,
                e => map_errno(e),
            }),
            Err(e) => Err(map_errno(e)),
        }
    }

    /// Renames without following a final symlink (the link itself moves). Replacing never
    /// touches a directory: a directory target, or a directory source over a file, is
    /// `PermissionDenied` (as on Windows). A cross-filesystem move inside the share is
    /// `Io(EXDEV)`.
    fn rename(&self, from: &SharePath, to: &SharePath, replace: bool) -> Result<()> {
        if from.is_root() || to.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        let (fp, fname) = self.parent_and_name(from)?;
        let (tp, tname) = self.parent_and_name(to)?;
        let src = statx_at(fp.as_fd(), fname, AtFlags::SYMLINK_NOFOLLOW)?;
        if from == to {
            return Ok(());
        }
        let src_dir = file_type(&src) == FileType::Directory;
        match statx_at(tp.as_fd(), tname, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) if !replace => return Err(VfsError::Exists),
            Ok(dst) if src_dir || file_type(&dst) == FileType::Directory => {
                return Err(VfsError::PermissionDenied)
            }
            Ok(_) | Err(VfsError::NotFound) => {}
            Err(e) => return Err(e),
        }
        let flags = if replace {
            RenameFlags::empty()
        } else {
            // Closes the window between the check above and the rename.
            RenameFlags::NOREPLACE
        };
        let r = match renameat_with(&fp, fname, &tp, tname, flags) {
            // Filesystems without RENAME_NOREPLACE; the check above must do.
            Err(Errno::INVAL) if !replace => {
                renameat_with(&fp, fname, &tp, tname, RenameFlags::empty())
            }
            r => r,
        };
        r.map_err(|e| match e {
            // Moving a directory into itself.
            Errno::INVAL => VfsError::PermissionDenied,
            // Here EXDEV means another mount inside the share, not an escape.
            Errno::XDEV => VfsError::Io(e.into()),
            e => map_errno(e),
        })
    }

    fn statfs(&self) -> Result<FsStats> {
        let v = fstatvfs(&self.root.fd).map_err(map_errno)?;
        // Block counts are in fragment units; old filesystems report only f_bsize.
        let unit = if v.f_frsize != 0 {
            v.f_frsize
        } else {
            v.f_bsize
        };
        Ok(FsStats {
            total_bytes: v.f_blocks.saturating_mul(unit),
            free_bytes: v.f_bfree.saturating_mul(unit),
            avail_bytes: v.f_bavail.saturating_mul(unit),
            block_size: u32::try_from(unit).unwrap_or(u32::MAX),
            max_name_len: MAX_NAME_LEN,
        })
    }
}
