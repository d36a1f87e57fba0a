//! Decoding errors.

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// More bytes are needed before the value can be decoded.
    #[error("incomplete message")]
    Incomplete,
    /// The bytes can never form a valid value.
    #[error("malformed message: {0}")]
    Malformed(&'static str),
}
