//! Durable handle create contexts (MS-SMB2 2.2.13.2.3, 2.2.13.2.4, 2.2.13.2.11,
//! 2.2.13.2.12, 2.2.14.2.3, 2.2.14.2.12): requests to make an open durable, reconnects of
//! a durable open after a lost connection, and the responses granting durability.

use crate::reader::{PutLe, Reader};
use crate::{FileId, WireError};

/// Context names.
pub const DHNQ: &[u8] = b"DHnQ";
pub const DHNC: &[u8] = b"DHnC";
pub const DH2Q: &[u8] = b"DH2Q";
pub const DH2C: &[u8] = b"DH2C";

/// SMB2_DHANDLE_FLAG_PERSISTENT (2.2.13.2.11).
pub const FLAG_PERSISTENT: u32 = 0x0000_0002;

/// DHnQ request: 16 reserved bytes.
pub const DHNQ_LEN: usize = 16;
/// DHnC request: the FileId of the open to reconnect.
pub const DHNC_LEN: usize = 16;
/// DH2Q request: Timeout, Flags, 8 reserved bytes, CreateGuid.
pub const DH2Q_LEN: usize = 32;
/// DH2C request: FileId, CreateGuid, Flags.
pub const DH2C_LEN: usize = 36;

/// SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2 (2.2.13.2.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableRequestV2 {
    /// Milliseconds the open may stay disconnected; 0 lets the server choose.
    pub timeout: u32,
    pub flags: u32,
    pub create_guid: [u8; 16],
}

impl DurableRequestV2 {
    pub fn decode(data: &[u8]) -> Result<Self, WireError> {
        if data.len() != DH2Q_LEN {
            return Err(WireError::Malformed("DH2Q size"));
        }
        let mut r = Reader::new(data, 0);
        let timeout = r.u32()?;
        let flags = r.u32()?;
        r.skip(8)?;
        Ok(DurableRequestV2 { timeout, flags, create_guid: r.array()? })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DH2Q_LEN);
        out.put_u32(self.timeout);
        out.put_u32(self.flags);
        out.put_u64(0);
        out.extend_from_slice(&self.create_guid);
        out
    }
}

/// SMB2_CREATE_DURABLE_HANDLE_RECONNECT (2.2.13.2.4): v1 names the open by FileId only.
pub fn decode_reconnect_v1(data: &[u8]) -> Result<FileId, WireError> {
    let bytes: [u8; 16] = data.try_into().map_err(|_| WireError::Malformed("DHnC size"))?;
    Ok(FileId::from_bytes(bytes))
}

/// SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2 (2.2.13.2.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableReconnectV2 {
    pub file_id: FileId,
    pub create_guid: [u8; 16],
    pub flags: u32,
}

impl DurableReconnectV2 {
    pub fn decode(data: &[u8]) -> Result<Self, WireError> {
        if data.len() != DH2C_LEN {
            return Err(WireError::Malformed("DH2C size"));
        }
        let mut r = Reader::new(data, 0);
        let file_id = FileId::from_bytes(r.array()?);
        let create_guid = r.array()?;
        Ok(DurableReconnectV2 { file_id, create_guid, flags: r.u32()? })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DH2C_LEN);
        out.extend_from_slice(&self.file_id.to_bytes());
        out.extend_from_slice(&self.create_guid);
        out.put_u32(self.flags);
        out
    }
}

/// The DHnQ response (2.2.14.2.3): 8 reserved bytes.
pub fn encode_response_v1() -> Vec<u8> {
    vec![0; 8]
}

/// The DH2Q response (2.2.14.2.12): the timeout granted (milliseconds) and flags.
pub fn encode_response_v2(timeout_ms: u32, flags: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    out.put_u32(timeout_ms);
    out.put_u32(flags);
    out
}

/// Client side: the DH2Q response's (timeout, flags).
pub fn decode_response_v2(data: &[u8]) -> Result<(u32, u32), WireError> {
    if data.len() < 8 {
        return Err(WireError::Malformed("DH2Q response size"));
    }
    let mut r = Reader::new(data, 0);
    Ok((r.u32()?, r.u32()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_round_trips_and_sizes_are_exact() {
        let q = DurableRequestV2 { timeout: 300_000, flags: FLAG_PERSISTENT, create_guid: [7; 16] };
        assert_eq!(DurableRequestV2::decode(&q.encode()), Ok(q));
        assert!(DurableRequestV2::decode(&[0; 31]).is_err());
        let c = DurableReconnectV2 { file_id: FileId { persistent: 5, volatile: 6 }, create_guid: [9; 16], flags: 0 };
        assert_eq!(DurableReconnectV2::decode(&c.encode()), Ok(c));
        assert!(DurableReconnectV2::decode(&[0; 37]).is_err());
        assert_eq!(decode_reconnect_v1(&c.file_id.to_bytes()), Ok(c.file_id));
        assert!(decode_reconnect_v1(&[0; 15]).is_err());
        assert_eq!(decode_response_v2(&encode_response_v2(60_000, 0)), Ok((60_000, 0)));
    }
}
