//! Spill files of large named streams.
//!
//! A stream that outgrows [`SPILL_AT`] bytes, or that the file system refuses to keep in an
//! xattr (ext4 holds all of an inode's xattrs in one block), moves to an ordinary file
//! `.braid-streams/<key>/<escaped name>` at the share root; `<key>` is the hex of the
//! file's kernel handle (its persistent token without the directory hint), so it survives
//! renames and is the same for every hard link. The file keeps an empty marker xattr
//! [`SPILL_XATTR_PREFIX`]`<name>` per spilled stream, so listing its streams stays one
//! `listxattr`. The directory is hidden from every lookup and listing of the share
//! ([`is_hidden`]); removing the last link of a file removes its spill directory
//! ([`LocalBackend::drop_spilled`]), and spill directories whose file is gone (a crash in
//! between, or a removal from outside the server) are swept when the share starts.

use super::errno::map_errno;
use super::meta::statx_fd;
use super::sys::name_to_handle;
use super::{openat2_retry, LocalBackend, Root, RESOLVE};
use crate::{Result, SharePath, VfsError};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{fchmod, mkdirat, unlinkat, AtFlags, Dir, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::sync::atomic::Ordering;

/// The hidden directory at the share root holding spill files.
pub const SPILL_DIR: &str = ".braid-streams";

/// Prefix of the marker xattrs of spilled streams; the stream name (as created) follows.
pub const SPILL_XATTR_PREFIX: &str = "user.braid.spill.";

/// Streams larger than this many bytes live in spill files: below it an xattr rewrite per
/// WRITE is cheap, above it positional I/O on a file is.
pub const SPILL_AT: u64 = 16 << 10;

/// On each spill directory: the device of the file system it was made on (u64, LE). The
/// startup sweep removes a directory whose file is gone only when it was made on this very
/// file system: after a copy of the share elsewhere (a restore from backup), every kernel
/// handle looks stale, and nothing may be removed on that evidence.
const DEV_XATTR: &str = "user.braid.dev";

/// The device of the share's file system.
fn root_dev(root: &Root) -> Option<u64> {
    let stx = statx_fd(root.fd.as_fd()).ok()?;
    Some((u64::from(stx.stx_dev_major) << 32) | u64::from(stx.stx_dev_minor))
}

/// Whether the spill directory `key` (under `top`) was made on the share's file system.
fn made_here(root: &Root, top: BorrowedFd<'_>, key: &str) -> bool {
    let Some(dev) = root_dev(root) else { return false };
    let Ok(dir) = openat2_retry(top, key, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty(), STRICT) else { return false };
    let mut buf = [0u8; 8];
    matches!(rustix::fs::fgetxattr(&dir, DEV_XATTR, &mut buf), Ok(8)) && u64::from_le_bytes(buf) == dev
}

/// Most spill directories one share start examines for orphans.
const SWEEP_MAX: usize = 4096;

/// Lookups of spill paths: never through a symlink, never out of the share.
const STRICT: ResolveFlags = RESOLVE.union(ResolveFlags::NO_SYMLINKS);

/// Whether `path` goes through a name reserved for the spill directory. The name is
/// refused at any depth, so a symlink to the root (`link/.braid-streams`) cannot reach it.
pub(crate) fn is_hidden(path: &SharePath) -> bool {
    path.components().iter().any(|c| is_hidden_name(c))
}

/// Whether a symlink target leads through the reserved name.
pub(crate) fn is_hidden_target(target: &str) -> bool {
    target.split('/').any(is_hidden_name)
}

/// The refusal of a hidden path: not found to a lookup, access denied to a creation.
pub(crate) fn hidden_err(creating: bool) -> VfsError {
    if creating {
        VfsError::PermissionDenied
    } else {
        VfsError::NotFound
    }
}

/// Whether a directory entry named `name` is the spill directory (or its name elsewhere).
pub(crate) fn is_hidden_name(name: &str) -> bool {
    name.len() == SPILL_DIR.len() && super::case::eq_fold(name, SPILL_DIR)
}

/// The spill key of the object `name` in `dir` (`""`: `dir` itself): its kernel handle
/// (type, then bytes) in hex. `TooLarge` where the file system makes no handles, since the
/// stream then cannot leave its xattr.
pub(crate) fn key_of(dir: BorrowedFd<'_>, name: &str) -> Result<String> {
    let h = name_to_handle(dir, name).map_err(|_| VfsError::TooLarge)?;
    let mut raw = h.handle_type.to_le_bytes().to_vec();
    raw.extend_from_slice(&h.bytes);
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// A key back to its handle `(type, bytes)`; `None` if it is not one of ours.
fn parse_key(key: &str) -> Option<(i32, Vec<u8>)> {
    if key.len() % 2 != 0 || key.len() < 10 || key.len() > 2 * (4 + 128) {
        return None;
    }
    let raw: Option<Vec<u8>> = (0..key.len()).step_by(2).map(|i| u8::from_str_radix(key.get(i..i + 2)?, 16).ok()).collect();
    let raw = raw?;
    let ty = i32::from_le_bytes(raw[..4].try_into().ok()?);
    Some((ty, raw[4..].to_vec()))
}

/// The file name of stream `name` in a spill directory: `%` and a leading `.` escaped, so
/// no stream name is `.`, `..` or a clash. (`/` and NUL never occur in stream names.)
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        match c {
            '%' => out.push_str("%25"),
            '.' if i == 0 => out.push_str("%2E"),
            c => out.push(c),
        }
    }
    out
}

/// `mkdirat` + an exact mode: spill directories are writable by whatever user a request
/// runs as (an NFS client's REMOVE cleans up after an SMB client's streams).
fn make_dir(dir: BorrowedFd<'_>, name: &str) -> Result<()> {
    match mkdirat(dir, name, Mode::from_raw_mode(0o700)) {
        Ok(()) => {
            let fd = openat2_retry(dir, name, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty(), STRICT).map_err(map_errno)?;
            fchmod(&fd, Mode::from_raw_mode(0o777)).map_err(map_errno)
        }
        Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(map_errno(e)),
    }
}

/// The spill directory of `key`, created with `create`; `None` if missing.
fn key_dir(root: &Root, key: &str, create: bool) -> Result<Option<OwnedFd>> {
    let rel = format!("{SPILL_DIR}/{key}");
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    match openat2_retry(root.fd.as_fd(), &rel, flags, Mode::empty(), STRICT) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) if create => {
            make_dir(root.fd.as_fd(), SPILL_DIR)?;
            root.spill_seen.store(true, Ordering::Relaxed);
            let top = openat2_retry(root.fd.as_fd(), SPILL_DIR, flags, Mode::empty(), STRICT).map_err(map_errno)?;
            make_dir(top.as_fd(), key)?;
            // Without the mark the sweep only keeps the directory: nothing is lost.
            if let (Some(dev), Ok(d)) = (root_dev(root), openat2_retry(top.as_fd(), key, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty(), STRICT)) {
                let _ = rustix::fs::fsetxattr(&d, DEV_XATTR, &dev.to_le_bytes(), rustix::fs::XattrFlags::empty());
            }
            openat2_retry(root.fd.as_fd(), &rel, flags, Mode::empty(), STRICT).map(Some).map_err(map_errno)
        }
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(map_errno(e)),
    }
}

/// Opens the spill file of stream `name` under `key` for reading and writing: created
/// (empty) with `create`, truncated with `truncate`; `None` if missing.
pub(crate) fn open(root: &Root, key: &str, name: &str, create: bool, truncate: bool) -> Result<Option<OwnedFd>> {
    let Some(dir) = key_dir(root, key, create)? else { return Ok(None) };
    let mut flags = OFlags::RDWR | OFlags::NOFOLLOW;
    if create {
        flags |= OFlags::CREATE;
    }
    if truncate {
        flags |= OFlags::TRUNC;
    }
    // openat2 refuses a mode without O_CREAT.
    let mode = if create { Mode::from_raw_mode(0o600) } else { Mode::empty() };
    match openat2_retry(dir.as_fd(), &escape(name), flags, mode, STRICT) {
        Ok(fd) => {
            // The directory is writable by anyone: a spill file is a regular file with one
            // link, never something planted there (a hard link to another file).
            let stx = statx_fd(fd.as_fd())?;
            if super::meta::file_type(&stx) != rustix::fs::FileType::RegularFile || stx.stx_nlink != 1 {
                return Err(VfsError::PermissionDenied);
            }
            Ok(Some(fd))
        }
        Err(Errno::NOENT) if !create => Ok(None),
        Err(Errno::NAMETOOLONG) => Err(VfsError::InvalidName),
        Err(e) => Err(map_errno(e)),
    }
}

/// The size of stream `name`'s spill file (0 if missing).
pub(crate) fn size(root: &Root, key: &str, name: &str) -> Result<u64> {
    match open(root, key, name, false, false)? {
        Some(fd) => Ok(statx_fd(fd.as_fd())?.stx_size),
        None => Ok(0),
    }
}

/// Renames stream `from`'s spill file to `to`'s name.
pub(crate) fn rename(root: &Root, key: &str, from: &str, to: &str) -> Result<()> {
    let Some(dir) = key_dir(root, key, false)? else { return Err(VfsError::NotFound) };
    rustix::fs::renameat(&dir, escape(from).as_str(), &dir, escape(to).as_str()).map_err(map_errno)
}

/// Removes stream `name`'s spill file, and the key's directory once it is empty.
pub(crate) fn remove(root: &Root, key: &str, name: &str) -> Result<()> {
    let Some(dir) = key_dir(root, key, false)? else { return Ok(()) };
    match unlinkat(&dir, escape(name).as_str(), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(map_errno(e)),
    }
    drop(dir);
    remove_dir_if_empty(root, key);
    Ok(())
}

/// Removes the directory of `key` if nothing is left in it.
fn remove_dir_if_empty(root: &Root, key: &str) {
    if let Ok(top) = openat2_retry(root.fd.as_fd(), SPILL_DIR, OFlags::PATH | OFlags::DIRECTORY, Mode::empty(), STRICT) {
        // ENOTEMPTY: another stream of the file is still spilled.
        let _ = unlinkat(&top, key, AtFlags::REMOVEDIR);
    }
}

/// Removes the directory of `key` with every spill file in it.
pub(crate) fn remove_all(root: &Root, key: &str) -> Result<()> {
    let top = match openat2_retry(root.fd.as_fd(), SPILL_DIR, OFlags::PATH | OFlags::DIRECTORY, Mode::empty(), STRICT) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(map_errno(e)),
    };
    let dir = match openat2_retry(top.as_fd(), key, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty(), STRICT) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(map_errno(e)),
    };
    let mut names = Vec::new();
    let mut list = Dir::read_from(&dir).map_err(map_errno)?;
    while let Some(ent) = list.read() {
        let ent = ent.map_err(map_errno)?;
        let name = ent.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(ent.file_name().to_owned());
        }
    }
    for n in names {
        let _ = unlinkat(&dir, n.as_c_str(), AtFlags::empty());
    }
    match unlinkat(&top, key, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(map_errno(e)),
    }
}

impl LocalBackend {
    /// The spill key of the object `name` in `dir` if the removal about to happen drops its
    /// last link and the share has spill files at all; [`Self::drop_spilled`] takes it once
    /// the removal succeeded.
    pub(crate) fn spilled_key_before_remove(&self, dir: BorrowedFd<'_>, name: &str) -> Option<String> {
        if !self.root.spill_seen.load(Ordering::Relaxed) {
            return None;
        }
        let stx = super::meta::statx_at(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        // A directory has one name whatever its link count says.
        let last = match super::meta::file_type(&stx) {
            rustix::fs::FileType::RegularFile => stx.stx_nlink == 1,
            rustix::fs::FileType::Directory => true,
            _ => false,
        };
        last.then(|| key_of(dir, name).ok()).flatten()
    }

    /// Removes the spill directory of `key` (from [`Self::spilled_key_before_remove`]).
    pub(crate) fn drop_spilled(&self, key: Option<String>) {
        if let Some(key) = key {
            if let Err(e) = remove_all(&self.root, &key) {
                tracing::info!(error = %e, "spilled streams of a removed file left for the startup sweep");
            }
        }
    }

    /// Removes spill directories whose file is gone (at most [`SWEEP_MAX`] examined), if
    /// they were made on this file system ([`DEV_XATTR`]).
    pub(crate) fn sweep_spilled(&self) {
        let Ok(top) = openat2_retry(self.root.fd.as_fd(), SPILL_DIR, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty(), STRICT) else {
            return;
        };
        self.root.spill_seen.store(true, Ordering::Relaxed);
        if self.root.read_only || self.root.handle_mount.is_none() {
            return;
        }
        let Ok(mut list) = Dir::read_from(&top) else { return };
        let (mut seen, mut swept, mut kept) = (0usize, 0usize, 0usize);
        while let Some(Ok(ent)) = list.read() {
            let Ok(key) = ent.file_name().to_str() else { continue };
            if key == "." || key == ".." {
                continue;
            }
            seen += 1;
            if seen > SWEEP_MAX {
                tracing::info!(limit = SWEEP_MAX, "spill directory sweep stopped at its bound");
                break;
            }
            let alive = parse_key(key).map(|(ty, bytes)| match self.open_handle((ty, &bytes)) {
                Ok(fd) => statx_fd(fd.as_fd()).map_or(true, |s| s.stx_nlink > 0),
                Err(VfsError::NotFound) => false,
                // Cannot tell (no CAP_DAC_READ_SEARCH, say): keep it.
                Err(_) => true,
            });
            if alive == Some(false) {
                if !made_here(&self.root, top.as_fd(), key) {
                    kept += 1;
                } else if remove_all(&self.root, key).is_ok() {
                    swept += 1;
                }
            }
        }
        if swept > 0 {
            tracing::info!(swept, examined = seen.min(SWEEP_MAX), "removed spilled streams of files that are gone");
        }
        if kept > 0 {
            tracing::warn!(kept, "spilled streams made on another file system (a copied share?) have no file here; kept");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_keeps_names_apart_and_plain() {
        assert_eq!(escape("AFP_Resource"), "AFP_Resource");
        assert_eq!(escape("."), "%2E");
        assert_eq!(escape(".."), "%2E.");
        assert_eq!(escape("a%2E"), "a%252E");
        assert_eq!(escape("a.b"), "a.b");
        assert!(is_hidden_name(".BRAID-streams") && !is_hidden_name(".braid-streams2"));
        assert_eq!(parse_key("0100000001020304"), Some((1, vec![1, 2, 3, 4])));
        assert_eq!(parse_key("zz"), None);
    }
}
