//! READ request and response (MS-SMB2 2.2.19, 2.2.20).

use crate::reader::PutLe;
use crate::{FileId, WireError, HEADER_LEN};

/// Where READ response data starts, counted from the header: header + 16 fixed bytes.
pub const DATA_OFFSET: usize = HEADER_LEN + 16;

/// MS-SMB2 2.2.19 READ Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    pub flags: u8,
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub minimum_count: u32,
    pub channel: u32,
}

impl ReadRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 49)?;
        r.u8()?; // Padding
        let flags = r.u8()?;
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::from_bytes(r.array()?);
        let minimum_count = r.u32()?;
        let channel = r.u32()?;
        Ok(ReadRequest { flags, length, offset, file_id, minimum_count, channel })
    }
}

/// Appends the 16 fixed bytes of a READ response for `data_len` bytes of data; the caller
/// appends (or reads directly into) the data itself, avoiding a copy.
pub fn encode_response_prefix(out: &mut Vec<u8>, data_len: u32) {
    encode_response_prefix_padded(out, data_len, 0);
}

/// [`encode_response_prefix`] followed by `padding` zero bytes, DataOffset pointing past
/// them (smbtorture's bug 14607 control; at most 8 are used).
pub fn encode_response_prefix_padded(out: &mut Vec<u8>, data_len: u32, padding: u8) {
    out.put_u16(17);
    out.put_u8(u8::try_from(DATA_OFFSET).unwrap_or(0x50).saturating_add(padding));
    out.put_u8(0);
    out.put_u32(data_len);
    out.put_u32(0); // DataRemaining
    out.put_u32(0); // Flags
    out.resize(out.len() + usize::from(padding), 0);
}

// ---- client side -------------------------------------------------------------------------

impl ReadRequest {
    /// Client side: appends the request body (MS-SMB2 2.2.19) with no channel info and the
    /// one-byte Buffer every client sends.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(49);
        out.put_u8(0x50); // Padding: where we would like the data (header + 16)
        out.put_u8(self.flags);
        out.put_u32(self.length);
        out.put_u64(self.offset);
        out.extend_from_slice(&self.file_id.to_bytes());
        out.put_u32(self.minimum_count);
        out.put_u32(self.channel);
        out.put_u32(0); // RemainingBytes
        out.put_u16(0); // ReadChannelInfoOffset
        out.put_u16(0); // ReadChannelInfoLength
        out.put_u8(0);
    }
}

/// Client side: the range of `msg` holding a READ response's data (MS-SMB2 2.2.20), so the
/// caller can slice it out of the received frame without copying.
pub fn decode_response(msg: &[u8]) -> Result<std::ops::Range<usize>, WireError> {
    let mut r = super::response_body(msg, 17)?;
    let off = usize::from(r.u8()?);
    r.skip(1)?;
    let len = r.u32()? as usize;
    if len == 0 {
        return Ok(0..0);
    }
    let end = off.checked_add(len).ok_or(WireError::Malformed("length overflow"))?;
    if off < HEADER_LEN + 16 || end > msg.len() {
        return Err(WireError::Malformed("read data outside message"));
    }
    Ok(off..end)
}
