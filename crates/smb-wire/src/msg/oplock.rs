//! OPLOCK_BREAK messages (MS-SMB2 2.2.23-2.2.25): oplock and lease break notifications,
//! acknowledgments and responses, and the lease create contexts (2.2.13.2.8, 2.2.13.2.10,
//! 2.2.14.2.10, 2.2.14.2.11).
//!
//! One command carries two shapes told apart by StructureSize: 24 for oplocks, 36 for lease
//! acknowledgments (44 for lease break notifications).

use crate::reader::{PutLe, Reader};
use crate::{FileId, WireError, HEADER_LEN};

/// Lease state bits (MS-SMB2 2.2.13.2.8).
pub mod lease_state {
    pub const NONE: u32 = 0x00;
    pub const READ: u32 = 0x01;
    pub const HANDLE: u32 = 0x02;
    pub const WRITE: u32 = 0x04;
    pub const ALL: u32 = READ | HANDLE | WRITE;
}

/// LeaseFlags of the lease create contexts.
pub mod lease_flags {
    /// Response: a break of this lease is in progress.
    pub const BREAK_IN_PROGRESS: u32 = 0x02;
    /// v2: ParentLeaseKey is set.
    pub const PARENT_LEASE_KEY_SET: u32 = 0x04;
}

/// Flag of a lease break notification: the client must acknowledge it.
pub const LEASE_BREAK_ACK_REQUIRED: u32 = 0x01;

/// StructureSize of the oplock break messages.
pub const OPLOCK_BREAK_SIZE: u16 = 24;
/// StructureSize of the lease break acknowledgment and response.
pub const LEASE_ACK_SIZE: u16 = 36;
/// StructureSize of the lease break notification.
pub const LEASE_BREAK_SIZE: u16 = 44;

/// Oplock break notification, acknowledgment and response: one layout (2.2.23.1, 2.2.24.1,
/// 2.2.25.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OplockBreak {
    pub oplock_level: u8,
    pub file_id: FileId,
}

impl OplockBreak {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(OPLOCK_BREAK_SIZE);
        out.put_u8(self.oplock_level);
        out.put_u8(0);
        out.put_u32(0);
        out.extend_from_slice(&self.file_id.to_bytes());
    }

    /// Decodes the body of a whole message (header first).
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, OPLOCK_BREAK_SIZE)?;
        let oplock_level = r.u8()?;
        r.skip(5)?;
        Ok(OplockBreak { oplock_level, file_id: FileId::from_bytes(r.array()?) })
    }
}

/// Lease break acknowledgment and response: one layout (2.2.24.2, 2.2.25.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseAck {
    pub flags: u32,
    pub lease_key: [u8; 16],
    pub lease_state: u32,
    pub lease_duration: u64,
}

impl LeaseAck {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(LEASE_ACK_SIZE);
        out.put_u16(0);
        out.put_u32(self.flags);
        out.extend_from_slice(&self.lease_key);
        out.put_u32(self.lease_state);
        out.put_u64(self.lease_duration);
    }

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, LEASE_ACK_SIZE)?;
        r.skip(2)?;
        let flags = r.u32()?;
        let lease_key = r.array()?;
        let lease_state = r.u32()?;
        let lease_duration = r.u64()?;
        Ok(LeaseAck { flags, lease_key, lease_state, lease_duration })
    }
}

/// Lease break notification (2.2.23.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBreak {
    /// v2 leases: the lease's epoch after the break; 0 otherwise.
    pub new_epoch: u16,
    pub flags: u32,
    pub lease_key: [u8; 16],
    pub current_state: u32,
    pub new_state: u32,
}

impl LeaseBreak {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(LEASE_BREAK_SIZE);
        out.put_u16(self.new_epoch);
        out.put_u32(self.flags);
        out.extend_from_slice(&self.lease_key);
        out.put_u32(self.current_state);
        out.put_u32(self.new_state);
        // BreakReason, AccessMaskHint, ShareMaskHint: reserved, zero.
        out.put_u32(0);
        out.put_u32(0);
        out.put_u32(0);
    }

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, LEASE_BREAK_SIZE)?;
        let new_epoch = r.u16()?;
        let flags = r.u32()?;
        let lease_key = r.array()?;
        let current_state = r.u32()?;
        let new_state = r.u32()?;
        Ok(LeaseBreak { new_epoch, flags, lease_key, current_state, new_state })
    }
}

/// Which OPLOCK_BREAK request a message is, from its StructureSize (None: neither).
pub fn break_ack_kind(msg: &[u8]) -> Option<u16> {
    let b = msg.get(HEADER_LEN..HEADER_LEN + 2)?;
    let size = u16::from_le_bytes([b[0], b[1]]);
    matches!(size, OPLOCK_BREAK_SIZE | LEASE_ACK_SIZE).then_some(size)
}

/// The "RqLs" create context, request or response: v1 is 32 bytes, v2 52 (2.2.13.2.8,
/// 2.2.13.2.10, 2.2.14.2.10, 2.2.14.2.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseContext {
    pub key: [u8; 16],
    pub state: u32,
    pub flags: u32,
    /// v2 only: Some((parent lease key, epoch)).
    pub v2: Option<([u8; 16], u16)>,
}

/// Sizes of the two lease context versions.
pub const LEASE_V1_LEN: usize = 32;
pub const LEASE_V2_LEN: usize = 52;

impl LeaseContext {
    /// Decodes the context data: exactly 32 (v1) or 52 (v2) bytes.
    pub fn decode(data: &[u8]) -> Result<Self, WireError> {
        if data.len() != LEASE_V1_LEN && data.len() != LEASE_V2_LEN {
            return Err(WireError::Malformed("lease context size"));
        }
        let mut r = Reader::new(data, 0);
        let key = r.array()?;
        let state = r.u32()?;
        let flags = r.u32()?;
        r.skip(8)?; // LeaseDuration
        let v2 = if data.len() == LEASE_V2_LEN {
            let parent = r.array()?;
            let epoch = r.u16()?;
            Some((parent, epoch))
        } else {
            None
        };
        Ok(LeaseContext { key, state, flags, v2 })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(LEASE_V2_LEN);
        out.extend_from_slice(&self.key);
        out.put_u32(self.state);
        out.put_u32(self.flags);
        out.put_u64(0);
        if let Some((parent, epoch)) = self.v2 {
            out.extend_from_slice(&parent);
            out.put_u16(epoch);
            out.put_u16(0);
        }
        out
    }
}
