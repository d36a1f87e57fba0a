//! WRITE request and response (MS-SMB2 2.2.21, 2.2.22).

use crate::reader::{slice_at, PutLe};
use crate::{FileId, WireError};

/// MS-SMB2 2.2.21 WRITE Request; `data` borrows the payload from the received frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRequest<'a> {
    pub offset: u64,
    pub file_id: FileId,
    pub channel: u32,
    pub flags: u32,
    pub data: &'a [u8],
}

impl<'a> WriteRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 49)?;
        let data_off = usize::from(r.u16()?);
        let length = r.u32()? as usize;
        let offset = r.u64()?;
        let file_id = FileId::from_bytes(r.array()?);
        let channel = r.u32()?;
        r.skip(4)?; // RemainingBytes
        r.skip(4)?; // WriteChannelInfoOffset/Length
        let flags = r.u32()?;
        let data = slice_at(msg, data_off, length)?;
        Ok(WriteRequest { offset, file_id, channel, flags, data })
    }

    /// Payload length as sent (for credit checks before decoding the whole request).
    pub fn peek_length(msg: &[u8]) -> Result<u32, WireError> {
        let mut r = super::body(msg, 49)?;
        r.skip(2)?;
        r.u32()
    }
}

/// Appends a WRITE response body.
pub fn encode_response(out: &mut Vec<u8>, count: u32) {
    out.put_u16(17);
    out.put_u16(0);
    out.put_u32(count);
    out.put_u32(0); // Remaining
    out.put_u16(0);
    out.put_u16(0);
}
