//! TREE_CONNECT request and response (MS-SMB2 2.2.9, 2.2.10).

use crate::reader::{slice_at, utf16le, PutLe};
use crate::WireError;

/// Request flag: a TREE_CONNECT_Request_Extension follows (3.1.1).
pub const FLAG_EXTENSION_PRESENT: u16 = 0x0004;

/// Share types (MS-SMB2 2.2.10).
pub const SHARE_TYPE_DISK: u8 = 0x01;
pub const SHARE_TYPE_PIPE: u8 = 0x02;

/// Share flags (MS-SMB2 2.2.10).
pub mod share_flags {
    pub const MANUAL_CACHING: u32 = 0x0000_0000;
    pub const NO_CACHING: u32 = 0x0000_0030;
    pub const ENCRYPT_DATA: u32 = 0x0000_8000;
}

/// Share capabilities (MS-SMB2 2.2.10).
pub mod share_caps {
    pub const DFS: u32 = 0x08;
    pub const CONTINUOUS_AVAILABILITY: u32 = 0x10;
    pub const SCALEOUT: u32 = 0x20;
    pub const CLUSTER: u32 = 0x40;
    pub const ASYMMETRIC: u32 = 0x80;
}

/// MS-SMB2 2.2.9 TREE_CONNECT Request: the UNC path `\\server\share`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeConnectRequest {
    pub flags: u16,
    pub path: String,
}

impl TreeConnectRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 9)?;
        let flags = r.u16()?;
        // With the 3.1.1 extension present, PathOffset still points at the path name
        // (inside the extension), so the same decode serves both forms.
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        let path = utf16le(slice_at(msg, off, len)?)?;
        Ok(TreeConnectRequest { flags, path })
    }

    /// The share name: the last component of `\\server\share`, or None if malformed.
    pub fn share_name(&self) -> Option<&str> {
        let p = self.path.strip_prefix("\\\\")?;
        let (_, share) = p.split_once('\\')?;
        if share.is_empty() || share.contains('\\') {
            return None;
        }
        Some(share)
    }
}

/// MS-SMB2 2.2.10 TREE_CONNECT Response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeConnectResponse {
    pub share_type: u8,
    pub share_flags: u32,
    pub capabilities: u32,
    pub maximal_access: u32,
}

impl TreeConnectResponse {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(16);
        out.put_u8(self.share_type);
        out.put_u8(0);
        out.put_u32(self.share_flags);
        out.put_u32(self.capabilities);
        out.put_u32(self.maximal_access);
    }
}

// ---- client side -------------------------------------------------------------------------

impl TreeConnectRequest {
    /// Client side: appends the request body (MS-SMB2 2.2.9) without the 3.1.1 extension.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut path = Vec::new();
        crate::reader::put_utf16le(&mut path, &self.path);
        out.put_u16(9);
        out.put_u16(self.flags & !FLAG_EXTENSION_PRESENT);
        out.put_u16(super::off16(crate::HEADER_LEN + 8));
        out.put_u16(super::off16(path.len()));
        if path.is_empty() {
            out.put_u8(0);
        } else {
            out.extend_from_slice(&path);
        }
    }
}

impl TreeConnectResponse {
    /// Client side: decodes a TREE_CONNECT response body (MS-SMB2 2.2.10).
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::response_body(msg, 16)?;
        let share_type = r.u8()?;
        r.skip(1)?;
        let share_flags = r.u32()?;
        let capabilities = r.u32()?;
        let maximal_access = r.u32()?;
        Ok(TreeConnectResponse { share_type, share_flags, capabilities, maximal_access })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_names() {
        let t = |p: &str| TreeConnectRequest { flags: 0, path: p.into() };
        assert_eq!(t("\\\\127.0.0.1\\data").share_name(), Some("data"));
        assert_eq!(t("\\\\host\\IPC$").share_name(), Some("IPC$"));
        assert_eq!(t("\\\\host\\a\\b").share_name(), None);
        assert_eq!(t("host\\a").share_name(), None);
        assert_eq!(t("\\\\host\\").share_name(), None);
    }
}
