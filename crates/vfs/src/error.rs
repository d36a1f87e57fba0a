//! Storage errors, free of protocol status codes.

/// Why a VFS call failed.
#[derive(Debug, thiserror::Error)]
pub enum VfsError {
    /// The final component does not exist.
    #[error("not found")]
    NotFound,
    /// A parent component is missing or not a directory.
    #[error("path not found")]
    PathNotFound,
    /// The name is taken.
    #[error("already exists")]
    Exists,
    /// A directory where a non-directory was required.
    #[error("is a directory")]
    IsADirectory,
    /// A non-directory where a directory was required.
    #[error("not a directory")]
    NotADirectory,
    /// Removing a directory that still has entries.
    #[error("directory not empty")]
    NotEmpty,
    /// The filesystem or the backend refuses the operation.
    #[error("permission denied")]
    PermissionDenied,
    /// A name the share cannot hold (NUL, `..`, stream syntax, too long, …).
    #[error("invalid name")]
    InvalidName,
    /// A path resolved (through a symlink) outside the share.
    #[error("path escapes the share")]
    Escape,
    /// The filesystem (or a quota) is full.
    #[error("no space left")]
    NoSpace,
    /// The share or filesystem is read-only.
    #[error("read-only filesystem")]
    ReadOnly,
    /// An offset or size beyond what the filesystem supports.
    #[error("file too large")]
    TooLarge,
    /// Any other failure, with the underlying error.
    #[error("io error: {0}")]
    Io(std::io::Error),
}
