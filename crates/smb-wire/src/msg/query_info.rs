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
