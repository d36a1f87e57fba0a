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

/// The fixed part of a WRITE request, for a payload that is not in the frame (received
/// straight into a pipe, see the server's splice path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteFixed {
    pub data_offset: u16,
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub channel: u32,
    pub flags: u32,
}

impl WriteFixed {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 49)?;
        let data_offset = r.u16()?;
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::from_bytes(r.array()?);
        let channel = r.u32()?;
        r.skip(4)?; // RemainingBytes
        r.skip(4)?; // WriteChannelInfoOffset/Length
        let flags = r.u32()?;
        Ok(WriteFixed { data_offset, length, offset, file_id, channel, flags })
    }
}

impl<'a> WriteRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let f = WriteFixed::decode(msg)?;
        let data = slice_at(msg, usize::from(f.data_offset), f.length as usize)?;
        Ok(WriteRequest { offset: f.offset, file_id: f.file_id, channel: f.channel, flags: f.flags, data })
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

// ---- client side -------------------------------------------------------------------------

/// Where WRITE request data starts, counted from the header: header + 48 fixed bytes.
pub const DATA_OFFSET: usize = crate::HEADER_LEN + 48;

impl WriteRequest<'_> {
    /// Client side: appends the request body and data (MS-SMB2 2.2.21).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(48 + self.data.len());
        self.encode_fixed(out, self.data.len());
        if self.data.is_empty() {
            out.put_u8(0);
        } else {
            out.extend_from_slice(self.data);
        }
    }

    /// Client side: appends only the 48 fixed bytes, announcing `payload_len` bytes of data
    /// that the caller sends right after them (from its own buffer); `self.data` is unused.
    pub fn encode_fixed(&self, out: &mut Vec<u8>, payload_len: usize) {
        out.put_u16(49);
        out.put_u16(super::off16(DATA_OFFSET));
        out.put_u32(super::len32(payload_len));
        out.put_u64(self.offset);
        out.extend_from_slice(&self.file_id.to_bytes());
        out.put_u32(self.channel);
        out.put_u32(0); // RemainingBytes
        out.put_u16(0); // WriteChannelInfoOffset
        out.put_u16(0); // WriteChannelInfoLength
        out.put_u32(self.flags);
    }
}

/// Client side: the Count of a WRITE response (MS-SMB2 2.2.22).
pub fn decode_response(msg: &[u8]) -> Result<u32, WireError> {
    let mut r = super::response_body(msg, 17)?;
    r.skip(2)?;
    r.u32()
}
