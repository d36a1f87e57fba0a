//! LOCK request (MS-SMB2 2.2.26); the response is the empty body of `simple`.

use crate::{FileId, WireError};

/// SMB2_LOCK_ELEMENT flags.
pub mod flags {
    pub const SHARED_LOCK: u32 = 0x01;
    pub const EXCLUSIVE_LOCK: u32 = 0x02;
    pub const UNLOCK: u32 = 0x04;
    pub const FAIL_IMMEDIATELY: u32 = 0x10;
}

/// One byte range to lock or unlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockElement {
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
}

/// MS-SMB2 2.2.26 LOCK Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRequest {
    pub lock_sequence: u32,
    pub file_id: FileId,
    pub locks: Vec<LockElement>,
}

/// A request holding more elements than this is refused (Windows caps far lower).
const MAX_LOCKS: u16 = 4096;

impl LockRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 48)?;
        let count = r.u16()?;
        if count == 0 || count > MAX_LOCKS {
            return Err(WireError::Malformed("lock count"));
        }
        let lock_sequence = r.u32()?;
        let file_id = FileId::from_bytes(r.array()?);
        let mut locks = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let offset = r.u64()?;
            let length = r.u64()?;
            let flags = r.u32()?;
            r.skip(4)?;
            locks.push(LockElement { offset, length, flags });
        }
        Ok(LockRequest { lock_sequence, file_id, locks })
    }
}

// ---- client side -------------------------------------------------------------------------

impl LockRequest {
    /// Client side: appends the request body (MS-SMB2 2.2.26).
    pub fn encode(&self, out: &mut Vec<u8>) {
        use crate::reader::PutLe;
        out.put_u16(48);
        out.put_u16(u16::try_from(self.locks.len()).unwrap_or(0));
        out.put_u32(self.lock_sequence);
        out.extend_from_slice(&self.file_id.to_bytes());
        for l in &self.locks {
            out.put_u64(l.offset);
            out.put_u64(l.length);
            out.put_u32(l.flags);
            out.put_u32(0);
        }
    }
}
