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

// ---- client side -------------------------------------------------------------------------

impl SetInfoRequest<'_> {
    /// Client side: appends the request body (MS-SMB2 2.2.39).
    pub fn encode(&self, out: &mut Vec<u8>) {
        use crate::reader::PutLe;
        out.put_u16(33);
        out.put_u8(self.info_type);
        out.put_u8(self.info_class);
        out.put_u32(super::len32(self.buffer.len()));
        out.put_u16(super::off16(crate::HEADER_LEN + 32));
        out.put_u16(0);
        out.put_u32(self.additional_information);
        out.extend_from_slice(&self.file_id.to_bytes());
        if self.buffer.is_empty() {
            out.put_u8(0);
        } else {
            out.extend_from_slice(self.buffer);
        }
    }
}
