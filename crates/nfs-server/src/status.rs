//! `VfsError` to `nfsstat3`, in exactly one place.

use braid_vfs::VfsError;
use nfs_wire::nfs3::Nfsstat3;

/// The NFS status of a storage error (logged at debug level).
pub fn nfs_status(e: &VfsError) -> Nfsstat3 {
    tracing::debug!(error = %e, "storage error");
    match e {
        VfsError::NotFound => Nfsstat3::Noent,
        VfsError::PathNotFound => Nfsstat3::Noent,
        VfsError::Exists => Nfsstat3::Exist,
        VfsError::IsADirectory => Nfsstat3::Isdir,
        VfsError::NotADirectory => Nfsstat3::Notdir,
        VfsError::NotEmpty => Nfsstat3::Notempty,
        VfsError::PermissionDenied => Nfsstat3::Acces,
        VfsError::InvalidName => Nfsstat3::Inval,
        VfsError::Escape => Nfsstat3::Acces,
        VfsError::NoSpace => Nfsstat3::Nospc,
        VfsError::ReadOnly => Nfsstat3::Rofs,
        VfsError::TooLarge => Nfsstat3::Fbig,
        VfsError::Io(io) => io_status(io),
    }
}

fn io_status(e: &std::io::Error) -> Nfsstat3 {
    if let Some(errno) = e.raw_os_error() {
        return match errno {
            libc::EPERM => Nfsstat3::Perm,
            libc::ENOENT => Nfsstat3::Noent,
            libc::EACCES => Nfsstat3::Acces,
            libc::EEXIST => Nfsstat3::Exist,
            libc::EXDEV => Nfsstat3::Xdev,
            libc::ENOTDIR => Nfsstat3::Notdir,
            libc::EISDIR => Nfsstat3::Isdir,
            libc::EINVAL => Nfsstat3::Inval,
            libc::EFBIG => Nfsstat3::Fbig,
            libc::ENOSPC => Nfsstat3::Nospc,
            libc::EROFS => Nfsstat3::Rofs,
            libc::EMLINK => Nfsstat3::Mlink,
            libc::ENAMETOOLONG => Nfsstat3::Nametoolong,
            libc::ENOTEMPTY => Nfsstat3::Notempty,
            libc::EDQUOT => Nfsstat3::Dquot,
            libc::ESTALE => Nfsstat3::Stale,
            libc::ENXIO => Nfsstat3::Nxio,
            libc::ENODEV => Nfsstat3::Nodev,
            libc::EOPNOTSUPP => Nfsstat3::Notsupp,
            // Out of descriptors or memory: the client retries later (the server recovers
            // once descriptors are free again).
            libc::EMFILE | libc::ENFILE | libc::ENOMEM => Nfsstat3::Jukebox,
            _ => Nfsstat3::Io,
        };
    }
    match e.kind() {
        std::io::ErrorKind::Unsupported => Nfsstat3::Notsupp,
        std::io::ErrorKind::PermissionDenied => Nfsstat3::Acces,
        std::io::ErrorKind::NotFound => Nfsstat3::Noent,
        std::io::ErrorKind::AlreadyExists => Nfsstat3::Exist,
        _ => Nfsstat3::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map() {
        assert_eq!(nfs_status(&VfsError::NotEmpty), Nfsstat3::Notempty);
        assert_eq!(nfs_status(&VfsError::Io(std::io::Error::from_raw_os_error(libc::EMLINK))), Nfsstat3::Mlink);
        assert_eq!(nfs_status(&VfsError::unsupported()), Nfsstat3::Notsupp);
        assert_eq!(nfs_status(&VfsError::Io(std::io::Error::other("x"))), Nfsstat3::Io);
    }
}
