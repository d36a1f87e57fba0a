//! Storage errors, free of protocol status codes.

/// Why a VFS call failed.
#[derive(Debug, thiserror::Error)]
pub enum VfsError {
    #[error("not found")]
    NotFound,
    /// A parent component is missing or not a directory.
    #[error("path not found")]
    PathNotFound,
    #[error("already exists")]
    Exists,
    #[error("is a directory")]
    IsADirectory,
    #[error("not a directory")]
    NotADirectory,
    #[error("directory not empty")]
    NotEmpty,
    #[error("permission denied")]
    PermissionDenied,
    /// A name the share cannot hold (NUL, `..`, stream syntax, too long, …).
    #[error("invalid name")]
    InvalidName,
    /// A path resolved (through a symlink) outside the share.
    #[error("path escapes the share")]
    Escape,
    #[error("no space left")]
    NoSpace,
    #[error("read-only filesystem")]
    ReadOnly,
    #[error("file too large")]
    TooLarge,
    #[error("io error: {0}")]
    Io(std::io::Error),
}
