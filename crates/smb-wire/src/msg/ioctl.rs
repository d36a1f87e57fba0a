//! IOCTL request and response (MS-SMB2 2.2.31, 2.2.32).

use super::len32;
use crate::reader::{slice_at, PutLe};
use crate::{FileId, WireError, HEADER_LEN};

/// Request flag: this is an FSCTL (the only kind SMB2 carries).
pub const FLAG_IS_FSCTL: u32 = 0x1;

/// Control codes the server knows (MS-FSCC 2.3, MS-SMB2 2.2.31).
pub mod fsctl {
    pub const DFS_GET_REFERRALS: u32 = 0x0006_0194;
    pub const DFS_GET_REFERRALS_EX: u32 = 0x0006_01B0;
    pub const PIPE_PEEK: u32 = 0x0011_400C;
    pub const PIPE_WAIT: u32 = 0x0011_0018;
    pub const PIPE_TRANSCEIVE: u32 = 0x0011_C017;
    pub const SRV_COPYCHUNK: u32 = 0x0014_40F2;
    pub const SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
    pub const SRV_ENUMERATE_SNAPSHOTS: u32 = 0x0014_4064;
    pub const SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
    pub const SRV_READ_HASH: u32 = 0x0014_41BB;
    pub const LMR_REQUEST_RESILIENCY: u32 = 0x0014_01D4;
    pub const QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;
    pub const SET_REPARSE_POINT: u32 = 0x0009_00A4;
    pub const GET_REPARSE_POINT: u32 = 0x0009_00A8;
    pub const FILE_LEVEL_TRIM: u32 = 0x0009_8208;
    pub const VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;
    pub const SET_SPARSE: u32 = 0x0009_00C4;
    pub const SET_ZERO_DATA: u32 = 0x0009_80C8;
    pub const QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
    pub const DUPLICATE_EXTENTS_TO_FILE: u32 = 0x0009_8344;
    pub const DUPLICATE_EXTENTS_TO_FILE_EX: u32 = 0x0009_83E8;
    /// Samba's private test control (libcli/smb/smb_constants.h): from now on the server
    /// treats nothing sent on this connection as acknowledged by TCP, so smbtorture can
    /// test break retries on other channels without blocking packets.
    pub const SMBTORTURE_FORCE_UNACKED_TIMEOUT: u32 = 0x8384_8003;
    /// Samba's private test control: the request sleeps for its one input byte in
    /// milliseconds on an open, then answers FILE_CLOSED if the open was closed meanwhile
    /// (smbtorture's bug14769: a CLOSE must wait for the requests in progress on its open).
    pub const SMBTORTURE_FSP_ASYNC_SLEEP: u32 = 0x8384_8043;
    /// Samba's private test controls for its bug 14607 (a client that must honour the
    /// offsets of a response with a longer body): this IOCTL's answer carries 8 bytes of
    /// padding after its fixed part and its output filled with 8s ...
    pub const SMBTORTURE_IOCTL_RESPONSE_BODY_PADDING8: u32 = 0x8384_8013;
    /// ... and from now on every READ response on the connection carries 8 bytes of padding
    /// before its data.
    pub const SMBTORTURE_GLOBAL_READ_RESPONSE_BODY_PADDING8: u32 = 0x8384_8023;
    pub const CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;
    pub const GET_COMPRESSION: u32 = 0x0009_003C;
    pub const SET_COMPRESSION: u32 = 0x0009_C040;
    pub const GET_INTEGRITY_INFORMATION: u32 = 0x0009_027C;
    pub const QUERY_FILE_REGIONS: u32 = 0x0009_0284;
}

/// MS-SMB2 2.2.31 IOCTL Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlRequest<'a> {
    pub ctl_code: u32,
    pub file_id: FileId,
    pub input: &'a [u8],
    pub max_input_response: u32,
    pub max_output_response: u32,
    pub flags: u32,
}

impl<'a> IoctlRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 57)?;
        r.skip(2)?;
        let ctl_code = r.u32()?;
        let file_id = FileId::from_bytes(r.array()?);
        let in_off = r.u32()? as usize;
        let in_len = r.u32()? as usize;
        let max_input_response = r.u32()?;
        r.skip(8)?; // OutputOffset, OutputCount: must be zero in requests, ignored
        let max_output_response = r.u32()?;
        let flags = r.u32()?;
        let input = slice_at(msg, in_off, in_len)?;
        Ok(IoctlRequest { ctl_code, file_id, input, max_input_response, max_output_response, flags })
    }
}

/// Appends an IOCTL response with `output` (input echo is never returned).
pub fn encode_response(out: &mut Vec<u8>, ctl_code: u32, file_id: FileId, output: &[u8]) {
    encode_response_padded(out, ctl_code, file_id, output, 0);
}

/// [`encode_response`] with `padding` zero bytes between the fixed part and the output,
/// the offsets pointing past them (smbtorture's bug 14607 control).
pub fn encode_response_padded(out: &mut Vec<u8>, ctl_code: u32, file_id: FileId, output: &[u8], padding: usize) {
    let data_off = len32(HEADER_LEN + 48 + padding);
    out.put_u16(49);
    out.put_u16(0);
    out.put_u32(ctl_code);
    out.extend_from_slice(&file_id.to_bytes());
    out.put_u32(data_off); // InputOffset
    out.put_u32(0); // InputCount
    out.put_u32(if output.is_empty() { 0 } else { data_off });
    out.put_u32(len32(output.len()));
    out.put_u32(0);
    out.put_u32(0);
    out.resize(out.len() + padding, 0);
    out.extend_from_slice(output);
}

// ---- client side -------------------------------------------------------------------------

impl IoctlRequest<'_> {
    /// Client side: appends the request body and input (MS-SMB2 2.2.31).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let in_off = if self.input.is_empty() { 0 } else { len32(HEADER_LEN + 56) };
        out.put_u16(57);
        out.put_u16(0);
        out.put_u32(self.ctl_code);
        out.extend_from_slice(&self.file_id.to_bytes());
        out.put_u32(in_off);
        out.put_u32(len32(self.input.len()));
        out.put_u32(self.max_input_response);
        out.put_u32(0); // OutputOffset
        out.put_u32(0); // OutputCount
        out.put_u32(self.max_output_response);
        out.put_u32(self.flags);
        out.put_u32(0); // Reserved2
        out.extend_from_slice(self.input);
    }
}

/// Client side: the Output buffer of an IOCTL response (MS-SMB2 2.2.32).
pub fn decode_response(msg: &[u8]) -> Result<&[u8], WireError> {
    let mut r = super::response_body(msg, 49)?;
    r.skip(2 + 4 + 16 + 8)?; // Reserved, CtlCode, FileId, InputOffset/Count
    let out_off = r.u32()? as usize;
    let out_len = r.u32()? as usize;
    slice_at(msg, out_off, out_len)
}

/// NETWORK_INTERFACE_INFO Capability bits (MS-SMB2 2.2.32.5).
pub mod interface_caps {
    pub const RSS_CAPABLE: u32 = 0x1;
    pub const RDMA_CAPABLE: u32 = 0x2;
}

/// One NETWORK_INTERFACE_INFO entry (MS-SMB2 2.2.32.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkInterfaceInfo {
    pub if_index: u32,
    pub capability: u32,
    /// Link speed in bits per second.
    pub link_speed: u64,
    /// The address, if its family is IPv4 or IPv6 (others are kept as `None`).
    pub addr: Option<std::net::IpAddr>,
}

/// Size of one NETWORK_INTERFACE_INFO entry: 24 fixed bytes and a 128-byte SOCKADDR_STORAGE.
const IFACE_LEN: usize = 152;

/// Decodes the chain of NETWORK_INTERFACE_INFO entries returned by
/// FSCTL_QUERY_NETWORK_INTERFACE_INFO (MS-SMB2 2.2.32.5). Each entry is at least 152 bytes,
/// so the output is bounded by the input length.
pub fn decode_network_interfaces(buf: &[u8]) -> Result<Vec<NetworkInterfaceInfo>, WireError> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let entry =
            buf.get(pos..pos.checked_add(IFACE_LEN).ok_or(WireError::Malformed("overflow"))?).ok_or(WireError::Malformed("interface truncated"))?;
        let mut r = crate::reader::Reader::new(entry, 0);
        let next = r.u32()? as usize;
        let if_index = r.u32()?;
        let capability = r.u32()?;
        r.skip(4)?;
        let link_speed = r.u64()?;
        let family = r.u16()?;
        let _port = r.u16()?;
        let addr = match family {
            0x0002 => Some(IpAddr::V4(Ipv4Addr::from(r.array::<4>()?))),
            0x0017 => {
                r.skip(4)?; // FlowInfo
                Some(IpAddr::V6(Ipv6Addr::from(r.array::<16>()?)))
            }
            _ => None,
        };
        out.push(NetworkInterfaceInfo { if_index, capability, link_speed, addr });
        if next == 0 {
            break;
        }
        if next < IFACE_LEN {
            return Err(WireError::Malformed("interface Next"));
        }
        pos = pos.checked_add(next).ok_or(WireError::Malformed("overflow"))?;
    }
    Ok(out)
}

/// Encodes NETWORK_INTERFACE_INFO entries (MS-SMB2 2.2.32.5), for a server answering
/// FSCTL_QUERY_NETWORK_INTERFACE_INFO and for tests.
pub fn encode_network_interfaces(ifaces: &[NetworkInterfaceInfo]) -> Vec<u8> {
    use std::net::IpAddr;
    let mut out = Vec::with_capacity(ifaces.len() * IFACE_LEN);
    for (i, f) in ifaces.iter().enumerate() {
        let start = out.len();
        out.put_u32(if i + 1 < ifaces.len() { len32(IFACE_LEN) } else { 0 });
        out.put_u32(f.if_index);
        out.put_u32(f.capability);
        out.put_u32(0);
        out.put_u64(f.link_speed);
        match f.addr {
            Some(IpAddr::V4(a)) => {
                out.put_u16(0x0002);
                out.put_u16(0);
                out.extend_from_slice(&a.octets());
            }
            Some(IpAddr::V6(a)) => {
                out.put_u16(0x0017);
                out.put_u16(0);
                out.put_u32(0);
                out.extend_from_slice(&a.octets());
            }
            None => {}
        }
        out.resize(start + IFACE_LEN, 0);
    }
    out
}
