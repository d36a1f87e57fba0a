//! The 64-byte SMB2 packet header (MS-SMB2 2.2.1).

use crate::reader::Reader;
use crate::{Command, MessageId, NtStatus, SessionId, TreeId, WireError};

/// Length of the SMB2 header.
pub const HEADER_LEN: usize = 64;
/// ProtocolId of an SMB2 header.
pub const PROTOCOL_ID: [u8; 4] = [0xFE, b'S', b'M', b'B'];

/// Header flags (MS-SMB2 2.2.1.2).
pub mod flags {
    pub const SERVER_TO_REDIR: u32 = 0x0000_0001;
    pub const ASYNC_COMMAND: u32 = 0x0000_0002;
    pub const RELATED_OPERATIONS: u32 = 0x0000_0004;
    pub const SIGNED: u32 = 0x0000_0008;
    pub const PRIORITY_MASK: u32 = 0x0000_0070;
    pub const DFS_OPERATIONS: u32 = 0x1000_0000;
    pub const REPLAY_OPERATION: u32 = 0x2000_0000;
}

/// A decoded SMB2 header. `async_id` is set instead of `tree_id` when ASYNC_COMMAND is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub credit_charge: u16,
    /// Status in responses; ChannelSequence (low 16 bits) in 3.x requests.
    pub status: u32,
    /// Raw command code (may be unknown).
    pub command: u16,
    /// CreditRequest in requests, CreditResponse in responses.
    pub credits: u16,
    pub flags: u32,
    pub next_command: u32,
    pub message_id: MessageId,
    pub async_id: u64,
    pub tree_id: TreeId,
    pub session_id: SessionId,
    pub signature: [u8; 16],
}

impl Header {
    /// Decodes the header at the start of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Header, WireError> {
        if buf.len() < HEADER_LEN {
            return Err(WireError::Malformed("message shorter than header"));
        }
        let mut r = Reader::new(buf, 0);
        if r.array::<4>()? != PROTOCOL_ID {
            return Err(WireError::Malformed("not an SMB2 header"));
        }
        if r.u16()? != 64 {
            return Err(WireError::Malformed("header StructureSize"));
        }
        let credit_charge = r.u16()?;
        let status = r.u32()?;
        let command = r.u16()?;
        let credits = r.u16()?;
        let flags = r.u32()?;
        let next_command = r.u32()?;
        let message_id = MessageId(r.u64()?);
        let (async_id, tree_id) = if flags & flags::ASYNC_COMMAND != 0 {
            (r.u64()?, TreeId(0))
        } else {
            r.u32()?;
            (0, TreeId(r.u32()?))
        };
        let session_id = SessionId(r.u64()?);
        let signature = r.array::<16>()?;
        Ok(Header { credit_charge, status, command, credits, flags, next_command, message_id, async_id, tree_id, session_id, signature })
    }

    /// Appends the encoded header to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&PROTOCOL_ID);
        out.extend_from_slice(&64u16.to_le_bytes());
        out.extend_from_slice(&self.credit_charge.to_le_bytes());
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&self.command.to_le_bytes());
        out.extend_from_slice(&self.credits.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.next_command.to_le_bytes());
        out.extend_from_slice(&self.message_id.0.to_le_bytes());
        if self.flags & flags::ASYNC_COMMAND != 0 {
            out.extend_from_slice(&self.async_id.to_le_bytes());
        } else {
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&self.tree_id.0.to_le_bytes());
        }
        out.extend_from_slice(&self.session_id.0.to_le_bytes());
        out.extend_from_slice(&self.signature);
    }

    /// The known command, if any.
    pub fn command(&self) -> Option<Command> {
        Command::from_u16(self.command)
    }

    /// The NTSTATUS of a response.
    pub fn nt_status(&self) -> NtStatus {
        NtStatus(self.status)
    }

    pub fn is_response(&self) -> bool {
        self.flags & flags::SERVER_TO_REDIR != 0
    }
    pub fn is_signed(&self) -> bool {
        self.flags & flags::SIGNED != 0
    }
    pub fn is_related(&self) -> bool {
        self.flags & flags::RELATED_OPERATIONS != 0
    }
    pub fn is_async(&self) -> bool {
        self.flags & flags::ASYNC_COMMAND != 0
    }
}

/// Offsets of header fields, for patching an encoded message in place.
pub mod offset {
    pub const CREDIT_CHARGE: usize = 6;
    pub const STATUS: usize = 8;
    pub const COMMAND: usize = 12;
    pub const CREDITS: usize = 14;
    pub const FLAGS: usize = 16;
    pub const NEXT_COMMAND: usize = 20;
    pub const MESSAGE_ID: usize = 24;
    pub const TREE_ID: usize = 36;
    pub const SESSION_ID: usize = 40;
    pub const SIGNATURE: usize = 48;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_sync_and_async() {
        for flags in [flags::SIGNED, flags::ASYNC_COMMAND | flags::SERVER_TO_REDIR] {
            let h = Header {
                credit_charge: 3,
                status: 0x103,
                command: 8,
                credits: 17,
                flags,
                next_command: 0,
                message_id: MessageId(42),
                async_id: if flags & flags::ASYNC_COMMAND != 0 { 9 } else { 0 },
                tree_id: TreeId(if flags & flags::ASYNC_COMMAND != 0 { 0 } else { 5 }),
                session_id: SessionId(0x1234),
                signature: [7; 16],
            };
            let mut v = Vec::new();
            h.encode(&mut v);
            assert_eq!(v.len(), HEADER_LEN);
            assert_eq!(Header::decode(&v).unwrap(), h);
        }
    }

    #[test]
    fn rejects_bad_headers() {
        assert!(Header::decode(&[0u8; 63]).is_err());
        let mut v = vec![0u8; 64];
        assert!(Header::decode(&v).is_err());
        v[..4].copy_from_slice(&PROTOCOL_ID);
        v[4] = 63;
        assert!(Header::decode(&v).is_err());
    }
}
