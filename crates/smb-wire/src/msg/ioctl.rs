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
    let data_off = len32(HEADER_LEN + 48);
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
    out.extend_from_slice(output);
}
