//! The one place where kernel errnos become [`VfsError`]s.

use crate::VfsError;
use rustix::io::Errno;

/// Maps an errno from a call on a final component (or a handle) to a [`VfsError`].
///
/// `ENOENT` means the final component is missing; callers that resolved a parent directory
/// turn its failures into [`VfsError::PathNotFound`] themselves.
pub(crate) fn map_errno(e: Errno) -> VfsError {
    match e {
        Errno::NOENT => VfsError::NotFound,
        Errno::NOTDIR => VfsError::NotADirectory,
        Errno::ISDIR => VfsError::IsADirectory,
        Errno::EXIST => VfsError::Exists,
        Errno::NOTEMPTY => VfsError::NotEmpty,
        // Busy (mount points) and text-busy files are refusals, not I/O faults.
        Errno::ACCESS | Errno::PERM | Errno::BUSY | Errno::TXTBSY => VfsError::PermissionDenied,
        Errno::NOSPC | Errno::DQUOT => VfsError::NoSpace,
        Errno::ROFS => VfsError::ReadOnly,
        Errno::FBIG => VfsError::TooLarge,
        // openat2 with RESOLVE_BENEATH reports an escape attempt as EXDEV.
        Errno::XDEV => VfsError::Escape,
        Errno::NAMETOOLONG => VfsError::InvalidName,
        other => VfsError::Io(other.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert!(matches!(map_errno(Errno::NOENT), VfsError::NotFound));
        assert!(matches!(map_errno(Errno::XDEV), VfsError::Escape));
        assert!(matches!(map_errno(Errno::PERM), VfsError::PermissionDenied));
        assert!(matches!(map_errno(Errno::NOTEMPTY), VfsError::NotEmpty));
        assert!(matches!(map_errno(Errno::ROFS), VfsError::ReadOnly));
        match map_errno(Errno::IO) {
            VfsError::Io(e) => assert_eq!(e.raw_os_error(), Some(Errno::IO.raw_os_error())),
            other => panic!("unexpected {other:?}"),
        }
    }
}
