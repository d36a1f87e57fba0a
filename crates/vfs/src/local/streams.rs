//! Named streams of local files: one user xattr per stream, named
//! [`STREAM_XATTR_PREFIX`](crate::STREAM_XATTR_PREFIX) + the stream name as created. The
//! xattrs go with the inode, so removing or renaming the file takes its streams along.

use super::handle::LocalHandle;
use super::meta::{get_xattr_vec, list_xattrs, remove_xattr, set_xattr_kept, XattrAt};
use crate::{Result, VfsError, MAX_STREAM_LEN, STREAM_XATTR_PREFIX};

/// The stored spelling of the stream `name` at `at` (names are case-insensitive).
fn stored_name(at: &XattrAt<'_>, name: &str) -> Result<Option<String>> {
    Ok(list_xattrs(at, STREAM_XATTR_PREFIX)?.into_iter().find(|n| crate::streams::same_name(n, name)))
}

/// Every stream with its size, sorted by name.
pub(super) fn list(h: &LocalHandle) -> Result<Vec<(String, u64)>> {
    h.with_xattr_at(|at| {
        let Some(at) = at else { return Ok(Vec::new()) };
        let mut names = list_xattrs(at, STREAM_XATTR_PREFIX)?;
        names.sort_unstable();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            // Removed meanwhile, or not ours (larger than we ever store): skip it.
            if let Some(v) = get_xattr_vec(at, &format!("{STREAM_XATTR_PREFIX}{name}"), MAX_STREAM_LEN)? {
                out.push((name, v.len() as u64));
            }
        }
        Ok(out)
    })
}

/// The stream `name` as stored, with its content.
pub(super) fn read(h: &LocalHandle, name: &str) -> Result<Option<(String, Vec<u8>)>> {
    h.with_xattr_at(|at| {
        let Some(at) = at else { return Ok(None) };
        let Some(stored) = stored_name(at, name)? else { return Ok(None) };
        let data = get_xattr_vec(at, &format!("{STREAM_XATTR_PREFIX}{stored}"), MAX_STREAM_LEN)?;
        Ok(data.map(|d| (stored, d)))
    })
}

/// Creates, replaces or (`None`) removes the stream `name`.
pub(super) fn write(h: &LocalHandle, name: &str, data: Option<&[u8]>) -> Result<()> {
    crate::streams::check_name(name)?;
    if data.is_some_and(|d| d.len() > MAX_STREAM_LEN) {
        return Err(VfsError::TooLarge);
    }
    h.with_xattr_at(|at| {
        let Some(at) = at else { return Err(VfsError::unsupported()) };
        let stored = stored_name(at, name)?;
        let key = format!("{STREAM_XATTR_PREFIX}{}", stored.as_deref().unwrap_or(name));
        match data {
            Some(d) => set_xattr_kept(at, &key, d),
            None => remove_xattr(at, &key),
        }
    })
}
