//! Errors reported by the NTLM/SPNEGO state machines.

use thiserror::Error;

/// Why an authentication exchange failed.
///
/// The SMB layer maps every variant to STATUS_LOGON_FAILURE except where the
/// caller decides otherwise (e.g. guest mapping for [`AuthError::UnknownUser`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    /// A token could not be decoded (bad DER, bad NTLMSSP field bounds, ...).
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// A well-formed token arrived at a point of the exchange where it makes no sense.
    #[error("unexpected token: {0}")]
    UnexpectedToken(&'static str),
    /// The user is not in the user database.
    #[error("unknown user {domain}\\{name}")]
    UnknownUser {
        /// User name as sent by the client.
        name: String,
        /// Domain name as sent by the client.
        domain: String,
    },
    /// The NTLMv2 proof did not match the stored NT hash.
    #[error("wrong password for user {name}")]
    WrongPassword {
        /// User name as sent by the client.
        name: String,
    },
    /// The peer offered no mechanism we implement (NTLMSSP is the only one).
    #[error("no supported security mechanism offered")]
    UnsupportedMech,
    /// The client answered with an NTLMv1 or LM-only response (MS-NLMP 3.3.1), which we refuse.
    #[error("NTLMv1/LM authentication refused")]
    NtlmV1Refused,
    /// The AUTHENTICATE_MESSAGE MIC (MS-NLMP 3.1.5.1.2) did not verify.
    #[error("AUTHENTICATE message MIC mismatch")]
    BadMic,
    /// The SPNEGO mechListMIC (RFC 4178 5) did not verify.
    #[error("SPNEGO mechListMIC mismatch")]
    BadMechListMic,
    /// The peer sent negState = reject (RFC 4178 4.2.2).
    #[error("peer rejected the negotiation")]
    Rejected,
}
