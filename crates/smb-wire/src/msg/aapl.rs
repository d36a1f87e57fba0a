//! The Apple create context `AAPL` that macOS clients send on their first CREATE of a tree.
//! It is not in MS-SMB2; the layout is the one Apple's SMB client and Samba's `vfs_fruit`
//! use: a command code, then for kAAPL_SERVER_QUERY a bitmap of what the client asks for
//! and the client's capabilities, answered with the server's capabilities, the volume's and
//! a model string; for kAAPL_RESOLVE_ID a file id, answered with a status and the path of
//! that file in the share.

use crate::reader::{PutLe, Reader};
use crate::WireError;

/// The context name.
pub const NAME: &[u8] = b"AAPL";

/// Command codes.
pub const SERVER_QUERY: u32 = 1;
pub const RESOLVE_ID: u32 = 2;

/// Bits of the request and reply bitmaps: which parts the answer holds, in this order.
pub const SERVER_CAPS: u64 = 0x1;
pub const VOLUME_CAPS: u64 = 0x2;
pub const MODEL_INFO: u64 = 0x4;

/// Client and server capability bits.
pub const SUPPORTS_READ_DIR_ATTR: u64 = 0x1;
pub const SUPPORTS_OSX_COPYFILE: u64 = 0x2;
pub const UNIX_BASED: u64 = 0x4;
pub const SUPPORTS_NFS_ACE: u64 = 0x8;

/// Volume capability bits.
pub const SUPPORT_RESOLVE_ID: u64 = 0x1;
pub const CASE_SENSITIVE: u64 = 0x2;
pub const SUPPORTS_FULL_SYNC: u64 = 0x4;

/// A decoded `AAPL` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AaplRequest {
    /// kAAPL_SERVER_QUERY: the parts asked for (`SERVER_CAPS`…) and the client's
    /// capabilities (`SUPPORTS_READ_DIR_ATTR`…).
    ServerQuery { bitmap: u64, client_caps: u64 },
    /// kAAPL_RESOLVE_ID: the file id (as FileInternalInformation gives it) to find.
    ResolveId { file_id: u64 },
}

impl AaplRequest {
    /// Decodes the context data: 24 bytes for a server query, 16 for a resolve (each
    /// exactly, as Samba and Apple's client size them).
    pub fn decode(data: &[u8]) -> Result<AaplRequest, WireError> {
        let mut r = Reader::new(data, 0);
        let command = r.u32()?;
        r.skip(4)?;
        let req = match (command, data.len()) {
            (SERVER_QUERY, 24) => AaplRequest::ServerQuery { bitmap: r.u64()?, client_caps: r.u64()? },
            (RESOLVE_ID, 16) => AaplRequest::ResolveId { file_id: r.u64()? },
            (SERVER_QUERY | RESOLVE_ID, _) => return Err(WireError::Malformed("AAPL context size")),
            _ => return Err(WireError::Malformed("AAPL command")),
        };
        Ok(req)
    }

    /// The context data (client side).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        match *self {
            AaplRequest::ServerQuery { bitmap, client_caps } => {
                out.put_u32(SERVER_QUERY);
                out.put_u32(0);
                out.put_u64(bitmap);
                out.put_u64(client_caps);
            }
            AaplRequest::ResolveId { file_id } => {
                out.put_u32(RESOLVE_ID);
                out.put_u32(0);
                out.put_u64(file_id);
            }
        }
        out
    }
}

/// The answer to a server query: only the parts in `bitmap` are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerQueryReply {
    pub bitmap: u64,
    pub server_caps: u64,
    pub volume_caps: u64,
    pub model: String,
}

impl ServerQueryReply {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + 2 * self.model.len());
        out.put_u32(SERVER_QUERY);
        out.put_u32(0);
        out.put_u64(self.bitmap);
        if self.bitmap & SERVER_CAPS != 0 {
            out.put_u64(self.server_caps);
        }
        if self.bitmap & VOLUME_CAPS != 0 {
            out.put_u64(self.volume_caps);
        }
        if self.bitmap & MODEL_INFO != 0 {
            let model: Vec<u16> = self.model.encode_utf16().collect();
            out.put_u32(0);
            out.put_u32(2 * model.len() as u32);
            for c in model {
                out.put_u16(c);
            }
        }
        out
    }
}

/// The answer to a resolve: an NTSTATUS and, on success, the path (backslashes, relative
/// to the share root).
pub fn encode_resolve_reply(status: u32, path: &str) -> Vec<u8> {
    let units: Vec<u16> = path.encode_utf16().collect();
    let mut out = Vec::with_capacity(16 + 2 * units.len());
    out.put_u32(RESOLVE_ID);
    out.put_u32(0);
    out.put_u32(status);
    out.put_u32(2 * units.len() as u32);
    for c in units {
        out.put_u16(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_are_sized_exactly() {
        let q = AaplRequest::ServerQuery { bitmap: 7, client_caps: 7 };
        assert_eq!(AaplRequest::decode(&q.encode()).unwrap(), q);
        let r = AaplRequest::ResolveId { file_id: 42 };
        assert_eq!(AaplRequest::decode(&r.encode()).unwrap(), r);
        let mut long = q.encode();
        long.push(0);
        assert!(AaplRequest::decode(&long).is_err());
        assert!(AaplRequest::decode(&q.encode()[..16]).is_err());
        let mut other = q.encode();
        other[0] = 9;
        assert!(AaplRequest::decode(&other).is_err());
        assert!(AaplRequest::decode(&[1, 0]).is_err());
    }

    #[test]
    fn the_reply_holds_only_the_parts_asked_for() {
        let mut reply = ServerQueryReply { bitmap: SERVER_CAPS, server_caps: UNIX_BASED, volume_caps: 0, model: "Braid".into() };
        assert_eq!(reply.encode().len(), 24);
        reply.bitmap = SERVER_CAPS | VOLUME_CAPS | MODEL_INFO;
        let d = reply.encode();
        // header 16, caps 8 + 8, pad and length 8, "Braid" in UTF-16
        assert_eq!(d.len(), 16 + 16 + 8 + 10);
        assert_eq!(u32::from_le_bytes(d[36..40].try_into().unwrap()), 10);
        let r = encode_resolve_reply(0, "a\\b");
        assert_eq!(r.len(), 16 + 6);
    }
}
