//! The one place storage errors become NTSTATUS codes.

use braid_vfs::VfsError;
use smb_wire::NtStatus;

/// Maps a VFS error to the status a Windows server would return.
pub fn vfs_status(e: &VfsError) -> NtStatus {
    match e {
        VfsError::NotFound => NtStatus::OBJECT_NAME_NOT_FOUND,
        VfsError::PathNotFound => NtStatus::OBJECT_PATH_NOT_FOUND,
        VfsError::Exists => NtStatus::OBJECT_NAME_COLLISION,
        VfsError::IsADirectory => NtStatus::FILE_IS_A_DIRECTORY,
        VfsError::NotADirectory => NtStatus::NOT_A_DIRECTORY,
        VfsError::NotEmpty => NtStatus::DIRECTORY_NOT_EMPTY,
        VfsError::PermissionDenied => NtStatus::ACCESS_DENIED,
        VfsError::InvalidName => NtStatus::OBJECT_NAME_INVALID,
        VfsError::Escape => NtStatus::ACCESS_DENIED,
        VfsError::NoSpace => NtStatus::DISK_FULL,
        VfsError::ReadOnly => NtStatus::MEDIA_WRITE_PROTECTED,
        VfsError::TooLarge => NtStatus::DISK_FULL,
        // EOVERFLOW: a size past what the object can hold (the AFP_AfpInfo stream).
        VfsError::Io(e) if e.raw_os_error() == Some(libc::EOVERFLOW) => NtStatus::ALLOTTED_SPACE_EXCEEDED,
        VfsError::Io(e) if e.kind() == std::io::ErrorKind::InvalidInput => NtStatus::INVALID_PARAMETER,
        // Out of descriptors or memory: the server is short, not the file wrong; the client
        // may try again (Windows answers the same when its handle table is full).
        VfsError::Io(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)) => NtStatus::INSUFFICIENT_RESOURCES,
        VfsError::Io(_) => NtStatus::UNSUCCESSFUL,
    }
}

/// Maps a refused file-state operation to its status. SMB2 answers every byte-range
/// conflict with LOCK_NOT_GRANTED (never FILE_LOCK_CONFLICT).
pub fn state_status(e: braid_filestate::StateError) -> NtStatus {
    use braid_filestate::StateError;
    match e {
        StateError::SharingViolation => NtStatus::SHARING_VIOLATION,
        StateError::LockConflict => NtStatus::LOCK_NOT_GRANTED,
        StateError::InvalidLockRange => NtStatus::INVALID_LOCK_RANGE,
        StateError::RangeNotLocked => NtStatus::RANGE_NOT_LOCKED,
        StateError::TooManyLocks => NtStatus::INSUFFICIENT_RESOURCES,
        // Lease acknowledgments (oplock ones map through `oplock_ack_status`).
        StateError::NoSuchHolder => NtStatus::OBJECT_NAME_NOT_FOUND,
        StateError::NoBreakInProgress => NtStatus::UNSUCCESSFUL,
        StateError::AckAboveOffered => NtStatus::REQUEST_NOT_ACCEPTED,
    }
}

/// Maps a refused oplock break acknowledgment (MS-SMB2 3.3.5.22.1): an acknowledgment at
/// the LEASE level is INVALID_PARAMETER, everything else INVALID_OPLOCK_PROTOCOL.
pub fn oplock_ack_status(e: braid_filestate::StateError, lease_level: bool) -> NtStatus {
    match e {
        braid_filestate::StateError::AckAboveOffered if lease_level => NtStatus::INVALID_PARAMETER,
        _ => NtStatus::INVALID_OPLOCK_PROTOCOL,
    }
}

/// Maps a refused lease break acknowledgment (MS-SMB2 3.3.5.22.2): unknown key
/// OBJECT_NAME_NOT_FOUND, no break UNSUCCESSFUL, more than offered REQUEST_NOT_ACCEPTED.
pub fn lease_ack_status(e: braid_filestate::StateError) -> NtStatus {
    state_status(e)
}
