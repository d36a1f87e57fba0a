//! SESSION_SETUP request and response (MS-SMB2 2.2.5, 2.2.6).

use super::off16;
use crate::reader::{slice_at, PutLe};
use crate::{WireError, HEADER_LEN};

/// Request flag: bind this connection to an existing session (multichannel).
pub const FLAG_BINDING: u8 = 0x01;

/// Response SessionFlags (MS-SMB2 2.2.6).
pub const SESSION_FLAG_IS_GUEST: u16 = 0x0001;
pub const SESSION_FLAG_IS_NULL: u16 = 0x0002;
pub const SESSION_FLAG_ENCRYPT_DATA: u16 = 0x0004;

/// MS-SMB2 2.2.5 SESSION_SETUP Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSetupRequest<'a> {
    pub flags: u8,
    pub security_mode: u8,
    pub capabilities: u32,
    pub previous_session_id: u64,
    pub security_buffer: &'a [u8],
}

impl<'a> SessionSetupRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 25)?;
        let flags = r.u8()?;
        let security_mode = r.u8()?;
        let capabilities = r.u32()?;
        r.skip(4)?; // Channel
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        let previous_session_id = r.u64()?;
        let security_buffer = slice_at(msg, off, len)?;
        Ok(SessionSetupRequest { flags, security_mode, capabilities, previous_session_id, security_buffer })
    }
}

/// Appends a SESSION_SETUP response body.
pub fn encode_response(out: &mut Vec<u8>, session_flags: u16, security_buffer: &[u8]) {
    out.put_u16(9);
    out.put_u16(session_flags);
    out.put_u16(off16(HEADER_LEN + 8));
    out.put_u16(off16(security_buffer.len()));
    if security_buffer.is_empty() {
        out.put_u8(0);
    } else {
        out.extend_from_slice(security_buffer);
    }
}

// ---- client side -------------------------------------------------------------------------

impl SessionSetupRequest<'_> {
    /// Client side: appends the request body (MS-SMB2 2.2.5); Channel is 0.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(25);
        out.put_u8(self.flags);
        out.put_u8(self.security_mode);
        out.put_u32(self.capabilities);
        out.put_u32(0); // Channel
        out.put_u16(off16(HEADER_LEN + 24));
        out.put_u16(off16(self.security_buffer.len()));
        out.put_u64(self.previous_session_id);
        if self.security_buffer.is_empty() {
            out.put_u8(0);
        } else {
            out.extend_from_slice(self.security_buffer);
        }
    }
}

/// MS-SMB2 2.2.6 SESSION_SETUP Response, decoded by the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSetupResponse<'a> {
    pub session_flags: u16,
    pub security_buffer: &'a [u8],
}

impl<'a> SessionSetupResponse<'a> {
    /// Decodes a SESSION_SETUP response body.
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = super::response_body(msg, 9)?;
        let session_flags = r.u16()?;
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        Ok(SessionSetupResponse { session_flags, security_buffer: slice_at(msg, off, len)? })
    }
}
