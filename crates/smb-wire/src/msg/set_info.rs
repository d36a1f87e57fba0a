//! SET_INFO request (MS-SMB2 2.2.39); the response is `simple::encode_set_info_response`.

use crate::reader::slice_at;
use crate::{FileId, WireError};

/// MS-SMB2 2.2.39 SET_INFO Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetInfoRequest<'a> {
    pub info_type: u8,
    pub info_class: u8,
    pub buffer: &'a [u8],
    pub additional_information: u32,
    pub file_id: FileId,
}

impl<'a> SetInfoRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 33)?;
        let info_type = r.u8()?;
        let info_class = r.u8()?;
        let len = r.u32()? as usize;
        let off = usize::from(r.u16()?);
        r.skip(2)?;
        let additional_information = r.u32()?;
        let file_id = FileId::from_bytes(r.array()?);
        let buffer = slice_at(msg, off, len)?;
        Ok(SetInfoRequest { info_type, info_class, buffer, additional_information, file_id })
    }
}
