//! QUERY_DIRECTORY request and response (MS-SMB2 2.2.33, 2.2.34).

use crate::reader::{slice_at, utf16le, PutLe};
use crate::{FileId, WireError, HEADER_LEN};

/// Request flags.
pub mod flags {
    pub const RESTART_SCANS: u8 = 0x01;
    pub const RETURN_SINGLE_ENTRY: u8 = 0x02;
    pub const INDEX_SPECIFIED: u8 = 0x04;
    pub const REOPEN: u8 = 0x10;
}

/// MS-SMB2 2.2.33 QUERY_DIRECTORY Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryDirectoryRequest {
    pub info_class: u8,
    pub flags: u8,
    pub file_index: u32,
    pub file_id: FileId,
    pub pattern: String,
    pub output_buffer_length: u32,
}

impl QueryDirectoryRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 33)?;
        let info_class = r.u8()?;
        let flags = r.u8()?;
        let file_index = r.u32()?;
        let file_id = FileId::from_bytes(r.array()?);
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        let output_buffer_length = r.u32()?;
        let pattern = utf16le(slice_at(msg, off, len)?)?;
        Ok(QueryDirectoryRequest { info_class, flags, file_index, file_id, pattern, output_buffer_length })
    }
}

/// Appends a QUERY_DIRECTORY or QUERY_INFO response (same layout, MS-SMB2 2.2.34/2.2.38).
pub fn encode_output_response(out: &mut Vec<u8>, data: &[u8]) {
    out.put_u16(9);
    out.put_u16(u16::try_from(HEADER_LEN + 8).unwrap_or(72));
    out.put_u32(super::len32(data.len()));
    if data.is_empty() {
        out.put_u8(0);
    } else {
        out.extend_from_slice(data);
    }
}

// ---- client side -------------------------------------------------------------------------

impl QueryDirectoryRequest {
    /// Client side: appends the request body (MS-SMB2 2.2.33).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut pattern = Vec::new();
        crate::reader::put_utf16le(&mut pattern, &self.pattern);
        out.put_u16(33);
        out.put_u8(self.info_class);
        out.put_u8(self.flags);
        out.put_u32(self.file_index);
        out.extend_from_slice(&self.file_id.to_bytes());
        out.put_u16(super::off16(HEADER_LEN + 32));
        out.put_u16(super::off16(pattern.len()));
        out.put_u32(self.output_buffer_length);
        if pattern.is_empty() {
            out.put_u8(0);
        } else {
            out.extend_from_slice(&pattern);
        }
    }
}

/// Client side: the OutputBuffer of a QUERY_DIRECTORY or QUERY_INFO response
/// (MS-SMB2 2.2.34, 2.2.38).
pub fn decode_output_response(msg: &[u8]) -> Result<&[u8], WireError> {
    let mut r = super::response_body(msg, 9)?;
    let off = usize::from(r.u16()?);
    let len = r.u32()? as usize;
    slice_at(msg, off, len)
}
