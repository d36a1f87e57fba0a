//! One module per SMB2 command: request decoders and response encoders (MS-SMB2 2.2.x).
//!
//! Decoders take the whole message (header first) because buffer offsets count from the
//! start of the header. Encoders append the body to a buffer that already holds the header.

pub mod aapl;
pub mod app_instance;
pub mod close;
pub mod copychunk;
pub mod create;
pub mod dup_extents;
pub mod durable;
pub mod error;
pub mod ioctl;
pub mod lock;
pub mod negotiate;
pub mod notify;
pub mod oplock;
pub mod query_directory;
pub mod query_info;
pub mod read;
pub mod session_setup;
pub mod set_info;
pub mod simple;
pub mod sparse;
pub mod tree;
pub mod write;

use crate::reader::Reader;
use crate::{WireError, HEADER_LEN};

/// Starts reading a request body after checking its StructureSize and that the fixed part
/// (StructureSize rounded down to even, the odd bit meaning "variable buffer follows") fits.
pub(crate) fn body(msg: &[u8], structure_size: u16) -> Result<Reader<'_>, WireError> {
    let fixed = usize::from(structure_size & !1);
    if msg.len() < HEADER_LEN + fixed.max(2) {
        return Err(WireError::Malformed("body shorter than StructureSize"));
    }
    let mut r = Reader::new(msg, HEADER_LEN);
    if r.u16()? != structure_size {
        return Err(WireError::Malformed("bad StructureSize"));
    }
    Ok(r)
}

/// Converts a buffer offset for the response: always fits, since responses are capped far
/// below 4 GiB.
pub(crate) fn off16(v: usize) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

pub(crate) fn len32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Start of the message being encoded in `out`, whose header (64 bytes) was appended last:
/// request offsets count from there, so a message can be built inside a larger buffer.
pub(crate) fn msg_base(out: &[u8]) -> usize {
    out.len().saturating_sub(HEADER_LEN)
}

/// Reads a response body: like [`body`], for the client side.
pub(crate) fn response_body(msg: &[u8], structure_size: u16) -> Result<Reader<'_>, WireError> {
    body(msg, structure_size)
}

#[cfg(test)]
mod roundtrip_tests;
