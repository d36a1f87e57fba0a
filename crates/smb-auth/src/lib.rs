//! Authentication for SMB: SPNEGO (RFC 4178 / MS-SPNG) wrapping NTLMSSP (MS-NLMP).
//!
//! Sans-IO: [`NtlmServer::step`] consumes one SESSION_SETUP security buffer
//! and says what to answer; [`NtlmClient`] is the matching initiator.
//! Only NTLMv2 is accepted.

#![warn(missing_docs)]

mod client;
mod crypto;
mod der;
mod error;
pub mod flags;
mod messages;
mod server;
pub mod spnego;

pub use client::NtlmClient;
pub use error::AuthError;
pub use server::{NtlmServer, ServerConfig};
pub use spnego::negotiate_token;

use md4::{Digest, Md4};

/// The NT one-way function of a password: MD4 over its UTF-16LE encoding (MS-NLMP 3.3.1).
pub fn nt_hash(password: &str) -> [u8; 16] {
    let utf16: Vec<u8> = password.encode_utf16().flat_map(u16::to_le_bytes).collect();
    Md4::digest(&utf16).into()
}

/// Source of NT hashes (MS-NLMP 3.3.1 NTOWFv1) for the server.
pub trait UserDb {
    /// NT hash of `user`, or `None` if unknown. Lookup is case-insensitive (the implementor's job).
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]>;
}

/// Who authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A named user (MS-NLMP 3.2.5.1.2); names are as sent by the client.
    User {
        /// User name.
        name: String,
        /// Domain name.
        domain: String,
    },
    /// Anonymous logon: empty user name and NT response (MS-NLMP 3.2.5.1.2).
    Anonymous,
}

/// What the SMB layer should answer to a SESSION_SETUP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStep {
    /// Answer STATUS_MORE_PROCESSING_REQUIRED with this security buffer.
    Continue(Vec<u8>),
    /// Authentication succeeded; answer STATUS_SUCCESS with `output` (may be empty).
    Done {
        /// Final security buffer (SPNEGO accept-completed, possibly with mechListMIC).
        output: Vec<u8>,
        /// The authenticated principal.
        identity: Identity,
        /// ExportedSessionKey (MS-NLMP 3.2.5.1.2); all zeros for anonymous.
        session_key: [u8; 16],
    },
    /// Answer STATUS_LOGON_FAILURE (or per error).
    Failed(AuthError),
}

#[cfg(test)]
mod tests;
