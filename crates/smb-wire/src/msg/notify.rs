//! CHANGE_NOTIFY request and response (MS-SMB2 2.2.35, 2.2.36) and the
//! FILE_NOTIFY_INFORMATION entries of the response (MS-FSCC 2.7.1).

use crate::reader::PutLe;
use crate::{FileId, WireError};

/// Flag: watch the whole subtree, not only the directory itself.
pub const WATCH_TREE: u16 = 0x0001;

/// CompletionFilter bits (MS-SMB2 2.2.35).
pub mod filter {
    pub const FILE_NAME: u32 = 0x0000_0001;
    pub const DIR_NAME: u32 = 0x0000_0002;
    pub const ATTRIBUTES: u32 = 0x0000_0004;
    pub const SIZE: u32 = 0x0000_0008;
    pub const LAST_WRITE: u32 = 0x0000_0010;
    pub const LAST_ACCESS: u32 = 0x0000_0020;
    pub const CREATION: u32 = 0x0000_0040;
    pub const EA: u32 = 0x0000_0080;
    pub const SECURITY: u32 = 0x0000_0100;
    pub const STREAM_NAME: u32 = 0x0000_0200;
    pub const STREAM_SIZE: u32 = 0x0000_0400;
    pub const STREAM_WRITE: u32 = 0x0000_0800;
}

/// FILE_NOTIFY_INFORMATION Action values (MS-FSCC 2.7.1).
pub mod action {
    pub const ADDED: u32 = 1;
    pub const REMOVED: u32 = 2;
    pub const MODIFIED: u32 = 3;
    pub const RENAMED_OLD_NAME: u32 = 4;
    pub const RENAMED_NEW_NAME: u32 = 5;
    pub const ADDED_STREAM: u32 = 6;
    pub const REMOVED_STREAM: u32 = 7;
    pub const MODIFIED_STREAM: u32 = 8;
}

/// MS-SMB2 2.2.35 CHANGE_NOTIFY Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyRequest {
    pub flags: u16,
    pub output_buffer_length: u32,
    pub file_id: FileId,
    pub completion_filter: u32,
}

impl NotifyRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 32)?;
        let flags = r.u16()?;
        let output_buffer_length = r.u32()?;
        let file_id = FileId::from_bytes(r.array()?);
        let completion_filter = r.u32()?;
        Ok(NotifyRequest { flags, output_buffer_length, file_id, completion_filter })
    }

    /// Client side: appends the request body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(32);
        out.put_u16(self.flags);
        out.put_u32(self.output_buffer_length);
        out.extend_from_slice(&self.file_id.to_bytes());
        out.put_u32(self.completion_filter);
        out.put_u32(0);
    }
}

/// Appends a CHANGE_NOTIFY response body carrying `info` (FILE_NOTIFY_INFORMATION entries,
/// possibly none).
pub fn encode_response(out: &mut Vec<u8>, info: &[u8]) {
    out.put_u16(9);
    // The buffer follows the 64-byte header and the 8-byte fixed part.
    out.put_u16(if info.is_empty() { 0 } else { 64 + 8 });
    out.put_u32(info.len() as u32);
    out.extend_from_slice(info);
}

/// FILE_NOTIFY_INFORMATION entries for `changes` (action, name relative to the watched
/// directory, `\`-separated), each 4-byte aligned; None if they need more than `max` bytes.
pub fn encode_changes<'a>(changes: impl IntoIterator<Item = (u32, &'a str)>, max: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut last: Option<usize> = None;
    for (action, name) in changes {
        if let Some(prev) = last {
            // Padding goes before each following entry, so the last one ends the buffer.
            out.resize(out.len().next_multiple_of(4), 0);
            let next = (out.len() - prev) as u32;
            out[prev..prev + 4].copy_from_slice(&next.to_le_bytes());
        }
        last = Some(out.len());
        let name: Vec<u16> = name.encode_utf16().collect();
        out.put_u32(0);
        out.put_u32(action);
        out.put_u32((name.len() * 2) as u32);
        for c in name {
            out.put_u16(c);
        }
        if out.len() > max {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip() {
        let req = NotifyRequest {
            flags: WATCH_TREE,
            output_buffer_length: 1000,
            file_id: FileId::from_bytes([7; 16]),
            completion_filter: filter::FILE_NAME,
        };
        let mut body = Vec::new();
        req.encode(&mut body);
        assert_eq!(body.len(), 32);
        let mut msg = vec![0u8; 64];
        msg.extend_from_slice(&body);
        assert_eq!(NotifyRequest::decode(&msg).unwrap(), req);
    }

    #[test]
    fn entries_are_chained_and_aligned() {
        let buf = encode_changes([(action::ADDED, "a"), (action::REMOVED, "dir\\bc")], 1000).unwrap();
        // first entry: 12 + 2 bytes, padded to 16
        assert_eq!(u32::from_le_bytes(buf[0..4].try_into().unwrap()), 16);
        assert_eq!(u32::from_le_bytes(buf[4..8].try_into().unwrap()), action::ADDED);
        assert_eq!(u32::from_le_bytes(buf[8..12].try_into().unwrap()), 2);
        // last entry: NextEntryOffset 0, no trailing padding
        assert_eq!(u32::from_le_bytes(buf[16..20].try_into().unwrap()), 0);
        assert_eq!(u32::from_le_bytes(buf[24..28].try_into().unwrap()), 12);
        assert_eq!(buf.len(), 16 + 12 + 12);
        assert!(encode_changes([(action::ADDED, "a")], 13).is_none());
        assert_eq!(encode_changes(std::iter::empty(), 0).unwrap(), Vec::<u8>::new());
    }
}
