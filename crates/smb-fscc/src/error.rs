//! Error type shared by all encoders and parsers of this crate.

/// Failure of an MS-FSCC encode or parse; each variant maps to one NTSTATUS
/// (MS-SMB2 3.3.5.20 / 3.3.5.21).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FsccError {
    /// Unknown or unusable information class: STATUS_INVALID_INFO_CLASS.
    #[error("invalid information class")]
    InvalidClass,
    /// Input shorter than the fixed part of the class: STATUS_INFO_LENGTH_MISMATCH.
    #[error("information length mismatch")]
    InfoLengthMismatch,
    /// Malformed field values: STATUS_INVALID_PARAMETER.
    #[error("invalid parameter")]
    InvalidParameter,
    /// Output does not fit: STATUS_BUFFER_TOO_SMALL (or STATUS_BUFFER_OVERFLOW
    /// when a truncated answer is sent).
    #[error("buffer too small")]
    BufferTooSmall,
    /// Valid class this server does not implement: STATUS_NOT_SUPPORTED.
    #[error("not supported")]
    NotSupported,
    /// FileAlternateNameInformation on a file without an 8.3 name:
    /// STATUS_OBJECT_NAME_NOT_FOUND, as Windows answers.
    #[error("no short name")]
    NoShortName,
}
