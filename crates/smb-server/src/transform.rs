//! SMB3 encryption of whole frames (MS-SMB2 3.3.5.2.1.1 decrypt, 3.3.4.1.4 encrypt).
//!
//! A frame that starts with a TRANSFORM_HEADER is decrypted in place before anything else
//! looks at it; its responses are encrypted with the same session's key instead of signed.

use std::sync::Arc;

use smb_crypto::parse_transform_header;

use crate::connection::Connection;
use crate::session::Session;

/// Bytes of the TRANSFORM_HEADER in front of encrypted messages.
pub const TRANSFORM_LEN: usize = 52;

/// ProtocolId of a TRANSFORM_HEADER.
pub const TRANSFORM_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];

/// Whether a frame is encrypted.
pub fn is_encrypted(frame: &[u8]) -> bool {
    frame.len() >= 4 && frame[..4] == TRANSFORM_ID
}

/// Decrypts `frame` in place. On success the plaintext messages start at [`TRANSFORM_LEN`]
/// and the session whose key opened them is returned; any failure means the connection must
/// be dropped (MS-SMB2 3.3.5.2.1.1), which the caller does with a log line.
pub fn decrypt(conn: &Connection, frame: &mut [u8]) -> Result<Arc<Session>, &'static str> {
    let th = parse_transform_header(frame).map_err(|_| "malformed transform header")?;
    let dialect = conn.dialect();
    if !smb_wire::dialect::is_smb3(dialect) {
        return Err("encrypted frame on a pre-SMB3 connection");
    }
    let session = conn.server.sessions.get(&smb_wire::SessionId(th.session_id)).ok_or("unknown session")?;
    let sealer = session.security.get().and_then(|s| s.decryptor.as_ref()).ok_or("session has no decryption key")?;
    let range = sealer.open(frame).map_err(|_| "decryption failed")?;
    if range.start != TRANSFORM_LEN || range.end != frame.len() {
        return Err("transform size mismatch");
    }
    Ok(session)
}

/// Encrypts a response frame in place: `out` holds the 4-byte transport header, then
/// [`TRANSFORM_LEN`] reserved bytes, then the plaintext responses.
pub fn encrypt(session: &Session, out: &mut [u8]) -> Result<(), &'static str> {
    let sealer = session.security.get().and_then(|s| s.encryptor.as_ref()).ok_or("session has no encryption key")?;
    sealer.seal(session.id.0, &mut out[4..]).map_err(|_| "encryption failed")
}

/// Encrypts a response whose READ data is read in place from a file's mapping (no copy
/// before the cipher): `out` holds the 4-byte transport header, [`TRANSFORM_LEN`] reserved
/// bytes, `head_len` bytes of plaintext response, then room for `tail.len() + 16` bytes.
/// Returns the length of the finished frame at the start of `out`.
pub fn encrypt_with_tail(session: &Session, out: &mut [u8], head_len: usize, tail: &[u8]) -> Result<usize, &'static str> {
    let sealer = session.security.get().and_then(|s| s.encryptor.as_ref()).ok_or("session has no encryption key")?;
    let n = sealer.seal_with_tail(session.id.0, &mut out[4..], head_len, tail).map_err(|_| "encryption failed")?;
    Ok(4 + n)
}
