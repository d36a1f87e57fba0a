//! SMB2 ERROR Response (MS-SMB2 2.2.2).

use crate::reader::PutLe;

/// Appends an error response body with no error data (ByteCount 0, one pad byte).
pub fn encode_error(out: &mut Vec<u8>) {
    out.put_u16(9);
    out.put_u8(0); // ErrorContextCount
    out.put_u8(0);
    out.put_u32(0); // ByteCount
    out.put_u8(0); // ErrorData: one byte even when empty
}

/// Appends an error response body carrying `data` (e.g. the symlink error context or the
/// required buffer size for STATUS_BUFFER_TOO_SMALL).
pub fn encode_error_with_data(out: &mut Vec<u8>, data: &[u8]) {
    out.put_u16(9);
    out.put_u8(0);
    out.put_u8(0);
    out.put_u32(super::len32(data.len()));
    if data.is_empty() {
        out.put_u8(0);
    } else {
        out.extend_from_slice(data);
    }
}

/// Client side: the ErrorData of an ERROR response (MS-SMB2 2.2.2), empty if absent.
pub fn decode_error(msg: &[u8]) -> Result<&[u8], crate::WireError> {
    let mut r = super::response_body(msg, 9)?;
    r.skip(2)?;
    let len = r.u32()? as usize;
    crate::reader::slice_at(msg, crate::HEADER_LEN + 8, len)
}
