//! The POSIX calls of [`LocalBackend`] (for NFS): exact names only (never the
//! case-insensitive fallback), no final symlink followed, links, special files, modes and
//! owners (file tokens are in `token.rs`).

use super::errno::map_errno;
use super::handle::{FdAccess, LocalHandle};
use super::meta::{attrs_from, kind_of, proc_fd_path, statx_at, statx_fd, XattrAt};
use super::{at_parent_err, open_beneath, openat2_retry, rename_err, LocalBackend, Root, RESOLVE};
use crate::path::validate_component;
use crate::{CreateMode, DirEntry, FileAttrs, FileKind, OpenOptions, OpenOutcome, Result, SharePath, VfsError};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{linkat, mkdirat, mknodat, readlinkat, renameat_with, symlinkat, AtFlags, Dir, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

/// Longest symlink target accepted, in bytes (`PATH_MAX`).
const MAX_TARGET_LEN: usize = 4096;

/// The process umask, read once from `/proc/self/status` (reading it with umask(2) would
/// change it for a moment under every thread); `0o022` if it cannot be read.
pub(crate) fn process_umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Umask:")).and_then(|v| u32::from_str_radix(v.trim(), 8).ok()).unwrap_or(0o022)
}

/// Sets the mode of the object `fd` (possibly `O_PATH`) refers to.
pub(crate) fn chmod_fd(root: &Root, fd: BorrowedFd<'_>, mode: u32) -> Result<()> {
    let mode = Mode::from_raw_mode(mode & 0o7777);
    match rustix::fs::fchmod(fd, mode) {
        // An O_PATH fd: through its /proc link, which leads to exactly this inode.
        Err(Errno::BADF) if root.proc_ok => rustix::fs::chmod(proc_fd_path(fd).as_str(), mode).map_err(map_errno),
        r => r.map_err(map_errno),
    }
}

/// Whether a new object made with `mode` needs a chmod after creation: the umask took bits
/// away, or special bits were asked for that mkdir/mknod do not set.
fn needs_chmod(root: &Root, mode: u32) -> bool {
    mode & 0o7777 != mode & 0o777 & !root.umask
}

/// Errors of a create at a final name.
fn create_err(e: Errno) -> VfsError {
    at_parent_err(e)
}

/// Kernel file type of a special file kind; `None` for the others.
fn special_type(kind: FileKind) -> Option<FileType> {
    match kind {
        FileKind::Fifo => Some(FileType::Fifo),
        FileKind::Socket => Some(FileType::Socket),
        FileKind::Block => Some(FileType::BlockDevice),
        FileKind::Char => Some(FileType::CharacterDevice),
        FileKind::File | FileKind::Dir | FileKind::Symlink => None,
    }
}

impl LocalBackend {
    fn check_writable(&self) -> Result<()> {
        if self.root.read_only {
            return Err(VfsError::ReadOnly);
        }
        Ok(())
    }

    /// Attributes of the entry `name` of `dir` itself (a symlink is not followed).
    fn entry_attrs(&self, dir: BorrowedFd<'_>, name: &str) -> Result<FileAttrs> {
        let stx = statx_at(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let mut a = if self.root.proc_ok && kind_of(&stx) != FileKind::Symlink {
            let p = format!("{}/{name}", proc_fd_path(dir));
            attrs_from(&stx, Some(&XattrAt::NoFollow(&p)))
        } else {
            attrs_from(&stx, None)
        };
        self.root.apply_ctime_override(&mut a);
        Ok(a)
    }

    /// Like [`crate::Backend::open_exact`], returning the concrete handle type.
    pub fn open_local_posix(&self, path: &SharePath, opts: OpenOptions) -> Result<(LocalHandle, OpenOutcome)> {
        // The object at the name itself first, so a device is never opened for data.
        let at = match path.is_root() {
            true => Ok(FileKind::Dir),
            false => {
                self.parent_and_name(path).and_then(|(parent, name)| statx_at(parent.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW)).map(|s| kind_of(&s))
            }
        };
        let kind = match at {
            Ok(k) => k,
            // Missing: created (never through a symlink), or the parent's error.
            Err(VfsError::NotFound) => return self.open_local_exact(path, opts),
            Err(e) => return Err(e),
        };
        if matches!(kind, FileKind::File | FileKind::Dir) {
            return self.open_local_exact(path, opts);
        }
        if opts.create != CreateMode::OpenExisting {
            return Err(VfsError::Exists);
        }
        if opts.directory {
            return Err(VfsError::NotADirectory);
        }
        if opts.read || opts.write || opts.truncate {
            return Err(VfsError::PermissionDenied);
        }
        let (parent, name) = self.parent_and_name(path)?;
        // O_PATH | O_NOFOLLOW: the symlink (or special file) itself, never what it names.
        let strict = RESOLVE | ResolveFlags::NO_SYMLINKS;
        let fd = openat2_retry(parent.as_fd(), name, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty(), strict).map_err(at_parent_err)?;
        let stx = statx_fd(fd.as_fd())?;
        if matches!(kind_of(&stx), FileKind::File | FileKind::Dir) {
            // Replaced meanwhile by a file or directory: open that the ordinary way.
            return self.open_local_exact(path, opts);
        }
        let mut h = self.handle(fd, false, FdAccess::PathOnly, path, opts);
        h.symlink = kind_of(&stx) == FileKind::Symlink;
        Ok((h, OpenOutcome::Opened))
    }

    /// See [`crate::Backend::stat_exact`].
    pub(crate) fn posix_stat(&self, path: &SharePath) -> Result<FileAttrs> {
        if path.is_root() {
            return self.stat_spelled(path);
        }
        let (parent, name) = self.parent_and_name(path)?;
        self.entry_attrs(parent.as_fd(), name)
    }

    /// Opens the directory `dir` for reading, exact spelling, not following a final symlink.
    fn open_dir_exact(&self, dir: &SharePath) -> Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW;
        open_beneath(&self.root, &dir.to_fs_relative(), flags).map_err(|e| match e {
            // A symlink at the final name (O_NOFOLLOW | O_DIRECTORY).
            Errno::LOOP => VfsError::NotADirectory,
            e => self.classify(dir, e),
        })
    }

    /// See [`crate::Backend::read_dir_exact`].
    pub(crate) fn posix_read_dir(&self, dir: &SharePath) -> Result<Vec<DirEntry>> {
        let fd = self.open_dir_exact(dir)?;
        let mut entries = Dir::read_from(&fd).map_err(map_errno)?;
        let mut out = Vec::new();
        while let Some(ent) = entries.read() {
            let ent = ent.map_err(map_errno)?;
            let Ok(name) = std::str::from_utf8(ent.file_name().to_bytes()) else { continue };
            if validate_component(name).is_err() || super::spill::is_hidden_name(name) {
                continue;
            }
            match self.entry_attrs(fd.as_fd(), name) {
                Ok(attrs) => out.push(DirEntry { name: name.to_owned(), attrs }),
                // Removed since the directory was read.
                Err(VfsError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        Ok(out)
    }

    /// See [`crate::Backend::remove_exact`].
    pub(crate) fn posix_remove(&self, path: &SharePath) -> Result<()> {
        if path.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        self.check_writable()?;
        self.remove_spelled(path)
    }

    /// See [`crate::Backend::rename_exact`].
    pub(crate) fn posix_rename(&self, from: &SharePath, to: &SharePath) -> Result<()> {
        if from.is_root() || to.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        self.check_writable()?;
        let (fp, fname) = self.parent_and_name(from)?;
        let (tp, tname) = self.parent_and_name(to)?;
        let replaced = self.root.spill_seen.load(std::sync::atomic::Ordering::Relaxed)
            && matches!((statx_at(fp.as_fd(), fname, AtFlags::SYMLINK_NOFOLLOW), statx_at(tp.as_fd(), tname, AtFlags::SYMLINK_NOFOLLOW)),
                (Ok(s), Ok(d)) if !super::same_object(&s, &d));
        let spilled = if replaced { self.spilled_key_before_remove(tp.as_fd(), tname) } else { None };
        renameat_with(&fp, fname, &tp, tname, RenameFlags::empty()).map_err(rename_err)?;
        self.drop_spilled(spilled);
        Ok(())
    }

    /// See [`crate::Backend::readlink`].
    pub(crate) fn posix_readlink(&self, path: &SharePath) -> Result<String> {
        let (parent, name) = self.parent_and_name(path)?;
        let target = readlinkat(&parent, name, Vec::new()).map_err(|e| match e {
            Errno::INVAL => VfsError::InvalidName,
            e => map_errno(e),
        })?;
        target.into_string().map_err(|_| VfsError::InvalidName)
    }

    /// See [`crate::Backend::symlink`].
    pub(crate) fn posix_symlink(&self, target: &str, at: &SharePath) -> Result<()> {
        self.check_writable()?;
        if target.is_empty() || target.len() > MAX_TARGET_LEN || target.contains('\0') {
            return Err(VfsError::InvalidName);
        }
        let (parent, name) = self.parent_and_name(at)?;
        symlinkat(target, &parent, name).map_err(create_err)
    }

    /// See [`crate::Backend::link`].
    pub(crate) fn posix_link(&self, existing: &SharePath, new: &SharePath) -> Result<()> {
        self.check_writable()?;
        let (ep, ename) = self.parent_and_name(existing)?;
        let (np, nname) = self.parent_and_name(new)?;
        linkat(&ep, ename, &np, nname, AtFlags::empty()).map_err(|e| match e {
            // Another mount inside the share, not an escape.
            Errno::XDEV => VfsError::Io(e.into()),
            // Directories cannot be linked (other refusals: protected_hardlinks).
            Errno::PERM => match statx_at(ep.as_fd(), ename, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stx) if kind_of(&stx) == FileKind::Dir => VfsError::IsADirectory,
                _ => VfsError::PermissionDenied,
            },
            // Both parents were found: the existing name is what is missing.
            Errno::NOENT => VfsError::NotFound,
            e => create_err(e),
        })
    }

    /// Gives the object just created at `name` in `parent` exactly `mode`, through an fd
    /// that cannot be a symlink someone put there meanwhile.
    fn fix_mode(&self, parent: BorrowedFd<'_>, name: &str, mode: u32) -> Result<()> {
        if !needs_chmod(&self.root, mode) {
            return Ok(());
        }
        let strict = RESOLVE | ResolveFlags::NO_SYMLINKS;
        let fd = openat2_retry(parent, name, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty(), strict).map_err(map_errno)?;
        if kind_of(&statx_fd(fd.as_fd())?) == FileKind::Symlink {
            return Err(VfsError::Exists);
        }
        chmod_fd(&self.root, fd.as_fd(), mode)
    }

    /// See [`crate::Backend::mknod`].
    pub(crate) fn posix_mknod(&self, at: &SharePath, kind: FileKind, mode: u32, rdev: (u32, u32)) -> Result<()> {
        self.check_writable()?;
        let ft = special_type(kind).ok_or(VfsError::InvalidName)?;
        let (parent, name) = self.parent_and_name(at)?;
        let dev = if matches!(kind, FileKind::Block | FileKind::Char) { rustix::fs::makedev(rdev.0, rdev.1) } else { 0 };
        mknodat(&parent, name, ft, Mode::from_raw_mode(mode & 0o777), dev).map_err(create_err)?;
        self.fix_mode(parent.as_fd(), name, mode)
    }

    /// See [`crate::Backend::mkdir`].
    pub(crate) fn posix_mkdir(&self, at: &SharePath, mode: u32) -> Result<()> {
        self.check_writable()?;
        let (parent, name) = self.parent_and_name(at)?;
        mkdirat(&parent, name, Mode::from_raw_mode(mode & 0o777)).map_err(create_err)?;
        self.fix_mode(parent.as_fd(), name, mode)
    }
}
