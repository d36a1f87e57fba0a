//! Error type for the DCE/RPC pipe layer.

use thiserror::Error;

/// Fatal errors on a pipe. Any of these means the byte stream can no longer
/// be trusted (C706 §12.6 framing is lost), so the SMB server should fail the
/// I/O and close the pipe handle. Recoverable RPC-level problems (unknown
/// opnum, bad stub data, unsupported syntax) are *not* errors: they are
/// answered in-band with `fault` or `bind_nak` PDUs.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RpcError {
    /// `rpc_vers`/`rpc_vers_minor` is not 5.0 (C706 §12.6.3.1).
    #[error("unsupported RPC version {0}.{1}")]
    BadVersion(u8, u8),
    /// `frag_length` is smaller than the PDU's fixed part.
    #[error("fragment length {0} too small")]
    FragTooShort(u16),
    /// `frag_length` exceeds the receive fragment size we advertised.
    #[error("fragment length {0} exceeds maximum {1}")]
    FragTooLarge(u16, u16),
    /// `auth_length` is non-zero; this server implements no RPC-level
    /// authentication (the SMB session already authenticates the pipe).
    #[error("RPC authentication is not supported (auth_length {0})")]
    AuthNotSupported(u16),
    /// A PDU type that a client must never send (or that we do not implement).
    #[error("unexpected PDU type {0}")]
    UnexpectedPtype(u8),
    /// A PDU body is shorter than its declared contents.
    #[error("malformed {0} PDU")]
    Malformed(&'static str),
    /// Buffered, not yet consumed input would exceed the per-pipe limit.
    #[error("pipe input buffer limit exceeded")]
    InputTooLarge,
    /// Queued, not yet read output would exceed the per-pipe limit (the
    /// client keeps writing without reading responses).
    #[error("pipe output buffer limit exceeded")]
    OutputTooLarge,
    /// A previous error already broke this pipe; it must be closed.
    #[error("pipe is broken by an earlier protocol error")]
    Broken,
}
