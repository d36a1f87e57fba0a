//! Minimal connection-oriented DCE/RPC server (C706 chapter 12, MS-RPCE) for
//! the named pipes an SMB server exposes on `IPC$`: `srvsvc` (MS-SRVS share
//! and server enumeration) and `wkssvc` (MS-WKST). NDR 2.0 little-endian
//! only, no RPC-level authentication. Sans-IO: see [`Pipe`].

pub mod error;
pub mod ndr;
pub mod pdu;
pub mod pipe;
pub mod srvsvc;
pub mod wkssvc;

pub use error::RpcError;
pub use pipe::Pipe;

use pdu::SyntaxId;

/// Share type: disk tree (MS-SRVS §2.2.2.4).
pub const STYPE_DISKTREE: u32 = 0;
/// Share type: interprocess communication (`IPC$`).
pub const STYPE_IPC: u32 = 3;
/// Share type modifier: special/administrative share (`$` suffix).
pub const STYPE_SPECIAL: u32 = 0x8000_0000;

/// Server type bit: workstation service (MS-SRVS §2.2.2.7).
pub const SV_TYPE_WORKSTATION: u32 = 0x0000_0001;
/// Server type bit: server service.
pub const SV_TYPE_SERVER: u32 = 0x0000_0002;
/// Server type bit: Windows NT family.
pub const SV_TYPE_NT: u32 = 0x0000_1000;
/// Server type bit: server that is not a domain controller.
pub const SV_TYPE_SERVER_NT: u32 = 0x0000_8000;

/// srvsvc interface 4b324fc8-1670-01d3-1278-5a47bf6ee188 v3.0 (MS-SRVS §1.9).
pub const SRVSVC_SYNTAX: SyntaxId = SyntaxId::new(0x4b32_4fc8, 0x1670, 0x01d3, [0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e, 0xe1, 0x88], 3, 0);

/// wkssvc interface 6bffd098-a112-3610-9833-46c3f87e345a v1.0 (MS-WKST §1.9).
pub const WKSSVC_SYNTAX: SyntaxId = SyntaxId::new(0x6bff_d098, 0xa112, 0x3610, [0x98, 0x33, 0x46, 0xc3, 0xf8, 0x7e, 0x34, 0x5a], 1, 0);

/// One share as reported by NetrShareEnumAll / NetrShareGetInfo
/// (SHARE_INFO_1 fields, MS-SRVS §2.2.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareInfo {
    /// Share name, e.g. `"data"` or `"IPC$"`.
    pub name: String,
    /// `STYPE_DISKTREE`, `STYPE_IPC`, optionally `| STYPE_SPECIAL`.
    pub share_type: u32,
    /// Free-text remark shown by clients.
    pub comment: String,
}

/// Server description for NetrServerGetInfo (SERVER_INFO_101, MS-SRVS §2.2.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// NetBIOS-style server name, e.g. `"BRAID"`.
    pub name: String,
    /// Server comment.
    pub comment: String,
    /// OS major version reported (e.g. 10).
    pub version_major: u32,
    /// OS minor version reported (e.g. 0).
    pub version_minor: u32,
    /// `SV_TYPE_*` bits.
    pub server_type: u32,
}

/// Server-side data the RPC handlers read; borrowed per call so the SMB
/// layer can reflect configuration changes immediately.
#[derive(Debug, Clone, Copy)]
pub struct RpcContext<'a> {
    /// All shares, including `IPC$` and other special shares.
    pub shares: &'a [ShareInfo],
    /// This server's identity.
    pub server: &'a ServerInfo,
}

/// RPC interfaces reachable through a named pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PipeKind {
    /// `\PIPE\srvsvc`: Server Service Remote Protocol (MS-SRVS).
    Srvsvc,
    /// `\PIPE\wkssvc`: Workstation Service Remote Protocol (MS-WKST).
    Wkssvc,
}

/// Which pipe a client opened, from the SMB2 CREATE name on `IPC$`
/// (case-insensitive, with or without a leading `\` or `PIPE\`).
pub fn pipe_kind(name: &str) -> Option<PipeKind> {
    let n = name.trim_start_matches('\\');
    let n = match n.get(..5) {
        Some(p) if p.eq_ignore_ascii_case("pipe\\") => &n[5..],
        _ => n,
    };
    if n.eq_ignore_ascii_case("srvsvc") {
        Some(PipeKind::Srvsvc)
    } else if n.eq_ignore_ascii_case("wkssvc") {
        Some(PipeKind::Wkssvc)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_names() {
        assert_eq!(pipe_kind("srvsvc"), Some(PipeKind::Srvsvc));
        assert_eq!(pipe_kind("\\SRVSVC"), Some(PipeKind::Srvsvc));
        assert_eq!(pipe_kind("\\PIPE\\srvsvc"), Some(PipeKind::Srvsvc));
        assert_eq!(pipe_kind("pipe\\WksSvc"), Some(PipeKind::Wkssvc));
        assert_eq!(pipe_kind("lsarpc"), None);
        assert_eq!(pipe_kind(""), None);
        assert_eq!(pipe_kind("\\pipe\\"), None);
        assert_eq!(pipe_kind("pipé"), None);
    }

    #[test]
    fn syntax_wire_bytes() {
        // 4b324fc8-1670-01d3-... in little-endian wire order.
        assert_eq!(&SRVSVC_SYNTAX.uuid[..8], &[0xc8, 0x4f, 0x32, 0x4b, 0x70, 0x16, 0xd3, 0x01]);
        assert_eq!(SRVSVC_SYNTAX.version, 3);
    }
}
