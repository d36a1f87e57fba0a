//! Direct TCP transport framing (MS-SMB2 2.1): a 4-byte header, zero then a 24-bit
//! big-endian length, before every SMB2 message or compound chain.

use crate::WireError;

/// Largest frame the 24-bit length can describe.
pub const MAX_FRAME: usize = 0x00FF_FFFF;

/// Parses the 4-byte transport header, refusing frames larger than `cap` before any
/// allocation is made for them.
pub fn frame_len(hdr: [u8; 4], cap: usize) -> Result<usize, WireError> {
    if hdr[0] != 0 {
        return Err(WireError::Malformed("transport header: nonzero first byte"));
    }
    let len = usize::from(hdr[1]) << 16 | usize::from(hdr[2]) << 8 | usize::from(hdr[3]);
    if len > cap {
        return Err(WireError::Malformed("frame larger than allowed"));
    }
    Ok(len)
}

/// The transport header for a frame of `len` bytes (callers keep `len <= MAX_FRAME`).
pub fn frame_header(len: usize) -> [u8; 4] {
    let l = u32::try_from(len.min(MAX_FRAME)).unwrap_or(0);
    let b = l.to_be_bytes();
    [0, b[1], b[2], b[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trip() {
        assert_eq!(frame_len(frame_header(70000), 1 << 20).unwrap(), 70000);
        assert!(frame_len([0, 0xff, 0xff, 0xff], 1 << 20).is_err());
        assert!(frame_len([0x85, 0, 0, 0], 1 << 20).is_err());
    }
}
