//! QUERY_INFO request (MS-SMB2 2.2.37); the response shares QUERY_DIRECTORY's layout.

use crate::reader::slice_at;
use crate::{FileId, WireError};

pub use super::query_directory::encode_output_response as encode_response;

/// InfoType values (MS-SMB2 2.2.37).
pub mod info_type {
    pub const FILE: u8 = 0x01;
    pub const FILESYSTEM: u8 = 0x02;
    pub const SECURITY: u8 = 0x03;
    pub const QUOTA: u8 = 0x04;
}

/// MS-SMB2 2.2.37 QUERY_INFO Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryInfoRequest<'a> {
    pub info_type: u8,
    pub info_class: u8,
    pub output_buffer_length: u32,
    pub input: &'a [u8],
    pub additional_information: u32,
    pub flags: u32,
    pub file_id: FileId,
}

impl<'a> QueryInfoRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 41)?;
        let info_type = r.u8()?;
        let info_class = r.u8()?;
        let output_buffer_length = r.u32()?;
        let in_off = usize::from(r.u16()?);
        r.skip(2)?;
        let in_len = r.u32()? as usize;
        let additional_information = r.u32()?;
        let flags = r.u32()?;
        let file_id = FileId::from_bytes(r.array()?);
        let input = slice_at(msg, in_off, in_len)?;
        Ok(QueryInfoRequest { info_type, info_class, output_buffer_length, input, additional_information, flags, file_id })
    }
}

// ---- client side -------------------------------------------------------------------------

pub use super::query_directory::decode_output_response as decode_response;

impl QueryInfoRequest<'_> {
    /// Client side: appends the request body (MS-SMB2 2.2.37).
    pub fn encode(&self, out: &mut Vec<u8>) {
        use crate::reader::PutLe;
        out.put_u16(41);
        out.put_u8(self.info_type);
        out.put_u8(self.info_class);
        out.put_u32(self.output_buffer_length);
        out.put_u16(if self.input.is_empty() { 0 } else { super::off16(crate::HEADER_LEN + 40) });
        out.put_u16(0);
        out.put_u32(super::len32(self.input.len()));
        out.put_u32(self.additional_information);
        out.put_u32(self.flags);
        out.extend_from_slice(&self.file_id.to_bytes());
        if self.input.is_empty() {
            out.put_u8(0);
        } else {
            out.extend_from_slice(self.input);
        }
    }
}
