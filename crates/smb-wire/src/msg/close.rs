//! CLOSE request and response (MS-SMB2 2.2.15, 2.2.16).

use crate::reader::PutLe;
use crate::{FileId, WireError};

/// Flag: return the file's attributes in the response.
pub const FLAG_POSTQUERY_ATTRIB: u16 = 0x0001;

/// MS-SMB2 2.2.15 CLOSE Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseRequest {
    pub flags: u16,
    pub file_id: FileId,
}

impl CloseRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 24)?;
        let flags = r.u16()?;
        r.skip(4)?;
        Ok(CloseRequest { flags, file_id: FileId::from_bytes(r.array()?) })
    }
}

/// MS-SMB2 2.2.16 CLOSE Response; all zero unless POSTQUERY_ATTRIB was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloseResponse {
    pub flags: u16,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: u32,
}

impl CloseResponse {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(60);
        out.put_u16(self.flags);
        out.put_u32(0);
        out.put_u64(self.creation_time);
        out.put_u64(self.last_access_time);
        out.put_u64(self.last_write_time);
        out.put_u64(self.change_time);
        out.put_u64(self.allocation_size);
        out.put_u64(self.end_of_file);
        out.put_u32(self.file_attributes);
    }
}

// ---- client side -------------------------------------------------------------------------

impl CloseRequest {
    /// Client side: appends the request body (MS-SMB2 2.2.15).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(24);
        out.put_u16(self.flags);
        out.put_u32(0);
        out.extend_from_slice(&self.file_id.to_bytes());
    }
}

impl CloseResponse {
    /// Client side: decodes a CLOSE response body (MS-SMB2 2.2.16).
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::response_body(msg, 60)?;
        let flags = r.u16()?;
        r.skip(4)?;
        Ok(CloseResponse {
            flags,
            creation_time: r.u64()?,
            last_access_time: r.u64()?,
            last_write_time: r.u64()?,
            change_time: r.u64()?,
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            file_attributes: r.u32()?,
        })
    }
}
