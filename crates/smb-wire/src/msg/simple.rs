//! Bodies with nothing but StructureSize and Reserved: ECHO, LOGOFF, TREE_DISCONNECT,
//! CANCEL requests and responses, FLUSH/LOCK/SET_INFO responses (MS-SMB2 2.2.7, 2.2.11,
//! 2.2.28, 2.2.30 …).

use crate::reader::PutLe;
use crate::WireError;

/// Checks a 4-byte request body (StructureSize 4).
pub fn decode_empty(msg: &[u8]) -> Result<(), WireError> {
    super::body(msg, 4).map(|_| ())
}

/// Appends a 4-byte response body.
pub fn encode_empty(out: &mut Vec<u8>) {
    out.put_u16(4);
    out.put_u16(0);
}

/// SET_INFO response body (MS-SMB2 2.2.40): StructureSize 2 only.
pub fn encode_set_info_response(out: &mut Vec<u8>) {
    out.put_u16(2);
}

/// MS-SMB2 2.2.17 FLUSH Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushRequest {
    pub file_id: crate::FileId,
}

impl FlushRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 24)?;
        r.skip(6)?;
        Ok(FlushRequest { file_id: crate::FileId::from_bytes(r.array()?) })
    }
}

// ---- client side -------------------------------------------------------------------------

/// Client side: appends a 4-byte request body (ECHO, LOGOFF, TREE_DISCONNECT, CANCEL).
pub fn encode_empty_request(out: &mut Vec<u8>) {
    encode_empty(out);
}

/// Client side: checks a 4-byte response body (MS-SMB2 2.2.8, 2.2.12, 2.2.18, 2.2.27 ...).
pub fn decode_empty_response(msg: &[u8]) -> Result<(), WireError> {
    super::response_body(msg, 4).map(|_| ())
}

/// Client side: checks a SET_INFO response body (MS-SMB2 2.2.40).
pub fn decode_set_info_response(msg: &[u8]) -> Result<(), WireError> {
    super::response_body(msg, 2).map(|_| ())
}

impl FlushRequest {
    /// Client side: appends the request body (MS-SMB2 2.2.17).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(24);
        out.put_u16(0);
        out.put_u32(0);
        out.extend_from_slice(&self.file_id.to_bytes());
    }
}
