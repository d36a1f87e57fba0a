//! The one error type of the client.

use smb_wire::NtStatus;

/// Why a client operation failed. `Display` is one line meant for people, e.g.
/// "server refused logon: STATUS_LOGON_FAILURE".
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered a request with an error NTSTATUS.
    #[error("{}", status_line(command, *status))]
    Status {
        /// The SMB2 command that failed, e.g. "CREATE".
        command: &'static str,
        /// The status the server returned.
        status: NtStatus,
    },
    /// Authentication failed on our side (bad token, mechListMIC mismatch ...).
    #[error("authentication failed: {0}")]
    Auth(#[from] smb_auth::AuthError),
    /// The server sent something that breaks the protocol (bad signature, malformed reply ...).
    #[error("protocol error: {0}")]
    Protocol(&'static str),
    /// The server lacks something this operation or configuration needs.
    #[error("not supported: {0}")]
    NotSupported(&'static str),
    /// The connection is closed (by the server, by an earlier error, or by us).
    #[error("connection closed")]
    Disconnected,
}

fn status_line(command: &str, status: NtStatus) -> String {
    match (command, status) {
        ("SESSION_SETUP", _) => format!("server refused logon: {}", status_name(status)),
        ("TREE_CONNECT", _) => format!("server refused share: {}", status_name(status)),
        _ => format!("{command} failed: {}", status_name(status)),
    }
}

/// "STATUS_LOGON_FAILURE" for known codes, "STATUS_0xc000xxxx" otherwise.
pub(crate) fn status_name(s: NtStatus) -> String {
    match s.name() {
        Some(n) => format!("STATUS_{n}"),
        None => format!("STATUS_{:#010x}", s.0),
    }
}

impl From<smb_wire::WireError> for ClientError {
    fn from(e: smb_wire::WireError) -> Self {
        match e {
            smb_wire::WireError::Incomplete => ClientError::Protocol("incomplete message from server"),
            smb_wire::WireError::Malformed(why) => ClientError::Protocol(why),
        }
    }
}

impl From<smb_fscc::FsccError> for ClientError {
    fn from(_: smb_fscc::FsccError) -> Self {
        ClientError::Protocol("malformed information buffer from server")
    }
}

impl From<smb_crypto::CryptoError> for ClientError {
    fn from(_: smb_crypto::CryptoError) -> Self {
        ClientError::Protocol("encryption failure")
    }
}

impl ClientError {
    /// The NTSTATUS, if the server returned one.
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}
