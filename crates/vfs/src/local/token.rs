//! Persistent file tokens of [`LocalBackend`]: the file system's own handles.
//!
//! A token is `name_to_handle_at`'s handle of the object (its type, then its length and
//! bytes) followed, when it fits in [`MAX_TOKEN_LEN`], by the handle of the directory the
//! name was in (type and bytes). It survives server restarts and renames, and the kernel
//! makes it stale when the object is removed (the inode generation).
//!
//! Resolving (`open_by_handle_at` on the root's mount, CAP_DAC_READ_SEARCH) gives an fd
//! whose path, read back from `/proc/self/fd`, must lie beneath the share root and lead to
//! the same inode again through the ordinary `openat2(RESOLVE_BENEATH)` lookup; anything
//! else is refused. A non-directory whose dentry the kernel had evicted comes back
//! disconnected, without a path: then the directory's handle (directories always come back
//! connected) is resolved the same way and searched for an entry with the object's inode.

use super::errno::map_errno;
use super::meta::{kind_of, proc_fd_path, statx_at, statx_fd};
use super::sys::{name_to_handle, open_by_handle, KernelHandle};
use super::{same_object, LocalBackend};
use crate::path::validate_component;
use crate::{FileKind, Result, SharePath, VfsError, MAX_TOKEN_LEN};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{openat, AtFlags, Dir, Mode, OFlags, Statx};
use rustix::io::Errno;

/// Bytes of a handle's type.
const TYPE_LEN: usize = 4;

/// Appends `h`'s type and bytes.
fn push(t: &mut Vec<u8>, h: &KernelHandle) {
    t.extend_from_slice(&h.handle_type.to_le_bytes());
    t.extend_from_slice(&h.bytes);
}

/// The object's handle and the directory hint, if any: `(type, bytes)` each.
type Parsed<'a> = ((i32, &'a [u8]), Option<(i32, &'a [u8])>);

/// Splits a token; `None` if it is malformed.
fn parse(token: &[u8]) -> Option<Parsed<'_>> {
    let split_type = |b: &[u8]| -> Option<(i32, usize)> { Some((i32::from_le_bytes(b.get(..TYPE_LEN)?.try_into().ok()?), TYPE_LEN)) };
    if token.len() > MAX_TOKEN_LEN {
        return None;
    }
    let (ty, at) = split_type(token)?;
    let len = usize::from(*token.get(at)?);
    let bytes = token.get(at + 1..at + 1 + len).filter(|b| !b.is_empty())?;
    let rest = &token[at + 1 + len..];
    if rest.is_empty() {
        return Some(((ty, bytes), None));
    }
    let (pty, pat) = split_type(rest)?;
    let pbytes = rest.get(pat..).filter(|b| !b.is_empty())?;
    Some(((ty, bytes), Some((pty, pbytes))))
}

impl LocalBackend {
    /// See [`crate::Backend::file_token`].
    pub(crate) fn token(&self, path: &SharePath) -> Result<Vec<u8>> {
        let mount = self.root.handle_mount.as_ref().map(|(id, _)| *id).ok_or_else(VfsError::unsupported)?;
        let handle_err = |e| match e {
            Errno::OPNOTSUPP | Errno::OVERFLOW => VfsError::unsupported(),
            e => map_errno(e),
        };
        let (h, dir) = if path.is_root() {
            (name_to_handle(self.root.fd.as_fd(), "").map_err(handle_err)?, None)
        } else {
            let (parent, name) = self.parent_and_name(path)?;
            let h = name_to_handle(parent.as_fd(), name).map_err(handle_err)?;
            (h, name_to_handle(parent.as_fd(), "").ok())
        };
        let len = u8::try_from(h.bytes.len()).map_err(|_| VfsError::unsupported())?;
        let own = TYPE_LEN + 1 + h.bytes.len();
        if h.mount_id != mount || own > MAX_TOKEN_LEN {
            // Another mount inside the share, or a handle too long for a token.
            return Err(VfsError::unsupported());
        }
        let mut t = Vec::with_capacity(MAX_TOKEN_LEN);
        t.extend_from_slice(&h.handle_type.to_le_bytes());
        t.push(len);
        t.extend_from_slice(&h.bytes);
        if let Some(d) = dir.filter(|d| d.mount_id == mount && own + TYPE_LEN + d.bytes.len() <= MAX_TOKEN_LEN) {
            push(&mut t, &d);
        }
        Ok(t)
    }

    /// `open_by_handle_at` of one handle on the share's mount.
    pub(super) fn open_handle(&self, (ty, bytes): (i32, &[u8])) -> Result<OwnedFd> {
        let (_, mount_fd) = self.root.handle_mount.as_ref().ok_or_else(VfsError::unsupported)?;
        open_by_handle(mount_fd.as_fd(), ty, bytes).map_err(|e| match e {
            Errno::STALE | Errno::NOENT => VfsError::NotFound,
            Errno::INVAL | Errno::OPNOTSUPP => VfsError::InvalidName,
            e => map_errno(e),
        })
    }

    /// See [`crate::Backend::resolve_token`].
    pub(crate) fn resolve(&self, token: &[u8]) -> Result<SharePath> {
        let (own, dir) = parse(token).ok_or(VfsError::InvalidName)?;
        if !self.root.proc_ok {
            return Err(VfsError::unsupported());
        }
        let fd = self.open_handle(own)?;
        let stx = statx_fd(fd.as_fd())?;
        if stx.stx_nlink == 0 {
            // Removed, still held open somewhere.
            return Err(VfsError::NotFound);
        }
        let first = self.path_of(fd.as_fd()).and_then(|p| self.check_path(p, &stx));
        match (first, dir) {
            (Ok(p), _) => Ok(p),
            (Err(e), Some(dir)) if kind_of(&stx) != FileKind::Dir => self.find_in_dir(dir, &stx).ok_or(e),
            (Err(e), _) => Err(e),
        }
    }

    /// `path` if the share's own lookup of it leads to the object `stx` describes.
    fn check_path(&self, path: SharePath, stx: &Statx) -> Result<SharePath> {
        let again = if path.is_root() {
            statx_fd(self.root.fd.as_fd())?
        } else {
            let (parent, name) = self.parent_and_name(&path).map_err(|_| VfsError::NotFound)?;
            statx_at(parent.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW).map_err(|_| VfsError::NotFound)?
        };
        if !same_object(stx, &again) {
            return Err(VfsError::NotFound);
        }
        Ok(path)
    }

    /// The name of the object `stx` describes in the directory the hint names, when that
    /// directory is in the share.
    fn find_in_dir(&self, dir: (i32, &[u8]), stx: &Statx) -> Option<SharePath> {
        let dfd = self.open_handle(dir).ok()?;
        let dstx = statx_fd(dfd.as_fd()).ok()?;
        let dpath = self.path_of(dfd.as_fd()).and_then(|p| self.check_path(p, &dstx)).ok()?;
        // An O_PATH fd cannot be listed: reopen the same directory (".", no traversal).
        let rd = openat(&dfd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
        let mut entries = Dir::new(rd).ok()?;
        while let Some(Ok(ent)) = entries.read() {
            if ent.ino() != stx.stx_ino {
                continue;
            }
            let Ok(name) = std::str::from_utf8(ent.file_name().to_bytes()) else { continue };
            if validate_component(name).is_err() {
                continue;
            }
            if let Some(p) = dpath.join(name).ok().and_then(|p| self.check_path(p, stx).ok()) {
                return Some(p);
            }
        }
        None
    }

    /// The share path of the object `fd` refers to: its `/proc` link relative to the root's.
    fn path_of(&self, fd: BorrowedFd<'_>) -> Result<SharePath> {
        let link = |fd: BorrowedFd<'_>| std::fs::read_link(proc_fd_path(fd)).map_err(VfsError::Io);
        let root = link(self.root.fd.as_fd())?;
        let at = link(fd)?;
        let rel = at.strip_prefix(&root).map_err(|_| VfsError::Escape)?;
        let mut comps = Vec::new();
        for c in rel.components() {
            let std::path::Component::Normal(c) = c else { return Err(VfsError::Escape) };
            let c = c.to_str().ok_or(VfsError::InvalidName)?;
            validate_component(c)?;
            comps.push(c.to_owned());
        }
        Ok(SharePath::from_components(comps))
    }

    /// Test hook: resolves through the directory hint alone, as for a disconnected object.
    #[cfg(test)]
    pub(crate) fn resolve_by_hint(&self, token: &[u8]) -> Option<SharePath> {
        let (own, dir) = parse(token)?;
        let fd = self.open_handle(own).ok()?;
        let stx = statx_fd(fd.as_fd()).ok()?;
        self.find_in_dir(dir?, &stx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_tokens_are_refused_before_any_system_call() {
        let ok = [1, 0, 0, 0, 2, 9, 9];
        assert!(parse(&ok).is_some_and(|(own, dir)| own == (1, &[9, 9][..]) && dir.is_none()));
        let with_dir = [1, 0, 0, 0, 1, 9, 2, 0, 0, 0, 7];
        assert!(parse(&with_dir).is_some_and(|(_, dir)| dir == Some((2, &[7][..]))));
        for bad in
            [&[][..], &[1, 0, 0], &[1, 0, 0, 0], &[1, 0, 0, 0, 0], &[1, 0, 0, 0, 3, 9], &[1, 0, 0, 0, 1, 9, 2, 0], &[1, 0, 0, 0, 1, 9, 2, 0, 0, 0]]
        {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
        assert!(parse(&[0u8; MAX_TOKEN_LEN + 1]).is_none());
    }

    #[test]
    fn the_directory_hint_finds_the_name() {
        if !crate::creds::can_switch() {
            eprintln!("not root: skipped");
            return;
        }
        let base = if std::path::Path::new("/dev/shm").is_dir() { std::path::PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("braid-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(dir.join("d/f"), b"x").unwrap();
        let b = LocalBackend::new(&dir, false).unwrap();
        let p = |s: &str| SharePath::from_smb(s).unwrap();
        let t = b.token(&p("d\\f")).unwrap();
        assert_eq!(b.resolve_by_hint(&t), Some(p("d\\f")));
        // Renamed inside the same directory: found under its new name.
        std::fs::rename(dir.join("d/f"), dir.join("d/g")).unwrap();
        assert_eq!(b.resolve_by_hint(&t), Some(p("d\\g")));
        // Moved elsewhere: the hint no longer holds it.
        std::fs::rename(dir.join("d/g"), dir.join("g")).unwrap();
        assert_eq!(b.resolve_by_hint(&t), None);
        assert_eq!(b.resolve(&t).unwrap(), p("g"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
