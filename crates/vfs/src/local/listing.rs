//! Directory listings.
//!
//! Per entry: one `statx(dirfd, name, AT_SYMLINK_NOFOLLOW)` plus two `lgetxattr` calls on
//! `/proc/self/fd/<dirfd>/<name>`. The kernel has no fd-relative getxattr in rustix 0.38, and
//! opening every entry would cost far more; going through the directory's own fd link keeps
//! the lookup pinned to the listed directory, and the no-follow variant never leaves it.
//! Symlink entries are resolved beneath the share root; those that escape or dangle are left
//! out, as are special files and names the share cannot express.

use super::handle::LocalHandle;
use super::meta::{attrs_from, file_type, proc_fd_path, statx_at, statx_fd, XattrAt};
use super::{open_beneath, PATH_ONLY};
use crate::path::validate_component;
use crate::{DirEntry, FileAttrs, Result};
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, Dir, FileType};

/// Lists `h` (an open directory), sorted by name in byte order.
pub(crate) fn list(h: &LocalHandle) -> Result<Vec<DirEntry>> {
    // A fresh open file description: concurrent listings never share a read position.
    let mut dir = Dir::read_from(&h.fd).map_err(super::errno::map_errno)?;
    let dir_proc = h.root.proc_ok.then(|| proc_fd_path(h.fd.as_fd()));
    let mut out = Vec::new();
    while let Some(ent) = dir.read() {
        let ent = ent.map_err(super::errno::map_errno)?;
        let bytes = ent.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        // Names that are not UTF-8 or not valid share names could never be opened by a client.
        let Ok(name) = std::str::from_utf8(bytes) else {
            continue;
        };
        if validate_component(name).is_err() || super::spill::is_hidden_name(name) {
            continue;
        }
        match entry_attrs(h, dir_proc.as_deref(), name) {
            Ok(Some(mut attrs)) => {
                h.root.apply_ctime_override(&mut attrs);
                out.push(DirEntry { name: name.to_owned(), attrs })
            }
            Ok(None) => {}
            // Vanished or unreadable entries are skipped, not fatal to the whole listing.
            Err(e) => tracing::debug!(name, error = %e, "skipping directory entry"),
        }
    }
    out.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}

/// Whether `name` still exists in the directory `h` (a cheap check for enumerations that
/// continue from an older snapshot).
pub(crate) fn has_child(h: &LocalHandle, name: &str) -> Result<bool> {
    if validate_component(name).is_err() || super::spill::is_hidden_name(name) {
        return Ok(false);
    }
    match statx_at(h.fd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(_) => Ok(true),
        Err(crate::VfsError::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Attributes of one entry, or `None` if it must not be listed.
fn entry_attrs(h: &LocalHandle, dir_proc: Option<&str>, name: &str) -> Result<Option<FileAttrs>> {
    let stx = statx_at(h.fd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW)?;
    match file_type(&stx) {
        FileType::RegularFile | FileType::Directory => {
            let attrs = match dir_proc {
                Some(d) => {
                    let p = format!("{d}/{name}");
                    attrs_from(&stx, Some(&XattrAt::NoFollow(&p)))
                }
                None => attrs_from(&stx, None),
            };
            Ok(Some(attrs))
        }
        FileType::Symlink => resolve_symlink(h, name),
        _ => Ok(None),
    }
}

/// Follows a symlink entry beneath the share root; `None` if it escapes or dangles.
fn resolve_symlink(h: &LocalHandle, name: &str) -> Result<Option<FileAttrs>> {
    let path = h.path.join(name)?;
    let fd = match open_beneath(&h.root, &path.to_fs_relative(), PATH_ONLY) {
        Ok(fd) => fd,
        Err(_) => return Ok(None),
    };
    let stx = statx_fd(fd.as_fd())?;
    match file_type(&stx) {
        FileType::RegularFile | FileType::Directory => {}
        _ => return Ok(None),
    }
    let attrs = if h.root.proc_ok {
        let p = proc_fd_path(fd.as_fd());
        attrs_from(&stx, Some(&XattrAt::Follow(&p)))
    } else {
        attrs_from(&stx, None)
    };
    Ok(Some(attrs))
}
