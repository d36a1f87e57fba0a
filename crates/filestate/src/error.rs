//! Why a file-state operation was refused.

/// A refused operation; each protocol maps these to its own codes (SMB: NTSTATUS in
/// smb-server's `status_map.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The open's access or share mode conflicts with another open's (MS-FSA 2.1.5.1.2).
    #[error("sharing violation")]
    SharingViolation,
    /// Another lock holds part of the range (MS-FSA 2.1.5.7).
    #[error("byte-range lock conflict")]
    LockConflict,
    /// The range runs past the end of the 64-bit offset space.
    #[error("invalid lock range")]
    InvalidLockRange,
    /// No lock of this open has exactly this offset and length.
    #[error("range not locked")]
    RangeNotLocked,
    /// The file holds as many byte-range locks as it may.
    #[error("too many byte-range locks on the file")]
    TooManyLocks,
    /// A break acknowledgment names no oplock or lease on this file.
    #[error("no such caching holder")]
    NoSuchHolder,
    /// A break acknowledgment while no break is in progress.
    #[error("no break in progress")]
    NoBreakInProgress,
    /// A break acknowledgment keeps more than the break offered.
    #[error("acknowledgment above the offered state")]
    AckAboveOffered,
}
