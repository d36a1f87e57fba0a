//! CREATE request and response with create contexts (MS-SMB2 2.2.13, 2.2.14).

use super::len32;
use crate::reader::{slice_at, utf16le, PutLe, Reader};
use crate::{FileId, WireError, HEADER_LEN};

/// CreateDisposition values (MS-SMB2 2.2.13).
pub mod disposition {
    pub const SUPERSEDE: u32 = 0;
    pub const OPEN: u32 = 1;
    pub const CREATE: u32 = 2;
    pub const OPEN_IF: u32 = 3;
    pub const OVERWRITE: u32 = 4;
    pub const OVERWRITE_IF: u32 = 5;
}

/// CreateOptions bits (MS-SMB2 2.2.13).
pub mod options {
    pub const DIRECTORY_FILE: u32 = 0x0000_0001;
    pub const WRITE_THROUGH: u32 = 0x0000_0002;
    pub const SEQUENTIAL_ONLY: u32 = 0x0000_0004;
    pub const NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
    pub const SYNCHRONOUS_IO_ALERT: u32 = 0x0000_0010;
    pub const SYNCHRONOUS_IO_NONALERT: u32 = 0x0000_0020;
    pub const NON_DIRECTORY_FILE: u32 = 0x0000_0040;
    pub const COMPLETE_IF_OPLOCKED: u32 = 0x0000_0100;
    pub const NO_EA_KNOWLEDGE: u32 = 0x0000_0200;
    pub const RANDOM_ACCESS: u32 = 0x0000_0800;
    pub const DELETE_ON_CLOSE: u32 = 0x0000_1000;
    pub const OPEN_BY_FILE_ID: u32 = 0x0000_2000;
    pub const OPEN_FOR_BACKUP_INTENT: u32 = 0x0000_4000;
    pub const NO_COMPRESSION: u32 = 0x0000_8000;
    pub const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    pub const OPEN_NO_RECALL: u32 = 0x0040_0000;
    pub const OPEN_FOR_FREE_SPACE_QUERY: u32 = 0x0080_0000;
    /// Bits MS-SMB2 3.3.5.9 says the server must refuse with STATUS_NOT_SUPPORTED.
    pub const RESERVED_MASK: u32 = 0xFF00_0000;
}

/// Access mask bits (MS-SMB2 2.2.13.1).
pub mod access {
    pub const FILE_READ_DATA: u32 = 0x0000_0001;
    pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
    pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
    pub const FILE_READ_EA: u32 = 0x0000_0008;
    pub const FILE_WRITE_EA: u32 = 0x0000_0010;
    pub const FILE_EXECUTE: u32 = 0x0000_0020;
    pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
    pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0001_0000;
    pub const READ_CONTROL: u32 = 0x0002_0000;
    pub const WRITE_DAC: u32 = 0x0004_0000;
    pub const WRITE_OWNER: u32 = 0x0008_0000;
    pub const SYNCHRONIZE: u32 = 0x0010_0000;
    pub const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
    pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
    pub const GENERIC_ALL: u32 = 0x1000_0000;
    pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
    pub const GENERIC_WRITE: u32 = 0x4000_0000;
    pub const GENERIC_READ: u32 = 0x8000_0000;
    /// Every specific and standard right a file can grant.
    pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;
    pub const FILE_GENERIC_READ: u32 = 0x0012_0089;
    pub const FILE_GENERIC_WRITE: u32 = 0x0012_0116;
    pub const FILE_GENERIC_EXECUTE: u32 = 0x0012_00A0;
}

/// ShareAccess bits.
pub mod share {
    pub const READ: u32 = 0x1;
    pub const WRITE: u32 = 0x2;
    pub const DELETE: u32 = 0x4;
}

/// CreateAction values in the response.
pub mod action {
    pub const SUPERSEDED: u32 = 0;
    pub const OPENED: u32 = 1;
    pub const CREATED: u32 = 2;
    pub const OVERWRITTEN: u32 = 3;
}

/// Oplock levels.
pub mod oplock {
    pub const NONE: u8 = 0x00;
    pub const II: u8 = 0x01;
    pub const EXCLUSIVE: u8 = 0x08;
    pub const BATCH: u8 = 0x09;
    pub const LEASE: u8 = 0xFF;
}

/// One create context (MS-SMB2 2.2.13.2): a 4-byte-or-longer ASCII name and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateContext<'a> {
    pub name: &'a [u8],
    pub data: &'a [u8],
}

/// MS-SMB2 2.2.13 CREATE Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest<'a> {
    pub security_flags: u8,
    pub oplock_level: u8,
    pub impersonation_level: u32,
    pub desired_access: u32,
    pub file_attributes: u32,
    pub share_access: u32,
    pub create_disposition: u32,
    pub create_options: u32,
    pub name: String,
    pub contexts: Vec<CreateContext<'a>>,
}

/// A single request cannot hold more contexts than this.
const MAX_CONTEXTS: usize = 64;

impl<'a> CreateRequest<'a> {
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 57)?;
        let security_flags = r.u8()?;
        let oplock_level = r.u8()?;
        let impersonation_level = r.u32()?;
        r.skip(16)?; // SmbCreateFlags, Reserved
        let desired_access = r.u32()?;
        let file_attributes = r.u32()?;
        let share_access = r.u32()?;
        let create_disposition = r.u32()?;
        let create_options = r.u32()?;
        let name_off = usize::from(r.u16()?);
        let name_len = usize::from(r.u16()?);
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        let name = utf16le(slice_at(msg, name_off, name_len)?)?;
        let contexts = if ctx_len == 0 { Vec::new() } else { decode_contexts(slice_at(msg, ctx_off, ctx_len)?)? };
        Ok(CreateRequest {
            security_flags,
            oplock_level,
            impersonation_level,
            desired_access,
            file_attributes,
            share_access,
            create_disposition,
            create_options,
            name,
            contexts,
        })
    }

    /// The data of the context named `name`, if present.
    pub fn context(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.contexts.iter().find(|c| c.name == name).map(|c| c.data)
    }
}

/// Decodes a chain of create contexts (each 8-byte aligned, linked by Next).
pub fn decode_contexts(buf: &[u8]) -> Result<Vec<CreateContext<'_>>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        if out.len() >= MAX_CONTEXTS {
            return Err(WireError::Malformed("create: too many contexts"));
        }
        let mut r = Reader::new(buf, pos);
        let next = r.u32()? as usize;
        let name_off = usize::from(r.u16()?);
        let name_len = usize::from(r.u16()?);
        r.skip(2)?;
        let data_off = usize::from(r.u16()?);
        let data_len = r.u32()? as usize;
        let entry = match next {
            0 => &buf[pos..],
            n => buf.get(pos..pos.checked_add(n).ok_or(WireError::Malformed("overflow"))?).ok_or(WireError::Malformed("create context next"))?,
        };
        if name_len == 0 {
            return Err(WireError::Malformed("create context name"));
        }
        let name = slice_at(entry, name_off, name_len)?;
        let data = slice_at(entry, data_off, data_len)?;
        out.push(CreateContext { name, data });
        if next == 0 {
            return Ok(out);
        }
        if next % 8 != 0 || next < 16 {
            return Err(WireError::Malformed("create context alignment"));
        }
        pos += next;
    }
}

/// Encodes response create contexts (name, data) into a chain.
pub fn encode_contexts(contexts: &[(&[u8], Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (name, data)) in contexts.iter().enumerate() {
        let start = out.len();
        let name_off = 16usize;
        let data_off = (name_off + name.len() + 7) & !7;
        out.put_u32(0);
        out.put_u16(16);
        out.put_u16(u16::try_from(name.len()).unwrap_or(0));
        out.put_u16(0);
        out.put_u16(u16::try_from(data_off).unwrap_or(0));
        out.put_u32(len32(data.len()));
        out.extend_from_slice(name);
        while out.len() - start < data_off {
            out.push(0);
        }
        out.extend_from_slice(data);
        if i + 1 < contexts.len() {
            out.pad_to(8);
            let next = len32(out.len() - start);
            out[start..start + 4].copy_from_slice(&next.to_le_bytes());
        }
    }
    out
}

/// MS-SMB2 2.2.14 CREATE Response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateResponse {
    pub oplock_level: u8,
    pub flags: u8,
    pub create_action: u32,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: u32,
    pub file_id: FileId,
    /// Already-encoded context chain (see [`encode_contexts`]).
    pub contexts: Vec<u8>,
}

impl CreateResponse {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(89);
        out.put_u8(self.oplock_level);
        out.put_u8(self.flags);
        out.put_u32(self.create_action);
        out.put_u64(self.creation_time);
        out.put_u64(self.last_access_time);
        out.put_u64(self.last_write_time);
        out.put_u64(self.change_time);
        out.put_u64(self.allocation_size);
        out.put_u64(self.end_of_file);
        out.put_u32(self.file_attributes);
        out.put_u32(0);
        out.extend_from_slice(&self.file_id.to_bytes());
        if self.contexts.is_empty() {
            out.put_u32(0);
            out.put_u32(0);
            out.put_u8(0);
        } else {
            out.put_u32(len32(HEADER_LEN + 88));
            out.put_u32(len32(self.contexts.len()));
            out.extend_from_slice(&self.contexts);
        }
    }
}

// ---- client side -------------------------------------------------------------------------

impl CreateRequest<'_> {
    /// Client side: appends the request body (MS-SMB2 2.2.13). The name is UTF-16LE at
    /// header + 120; contexts follow 8-byte aligned.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let base = super::msg_base(out);
        let mut name = Vec::new();
        crate::reader::put_utf16le(&mut name, &self.name);
        out.put_u16(57);
        out.put_u8(self.security_flags);
        out.put_u8(self.oplock_level);
        out.put_u32(self.impersonation_level);
        out.put_u64(0); // SmbCreateFlags
        out.put_u64(0); // Reserved
        out.put_u32(self.desired_access);
        out.put_u32(self.file_attributes);
        out.put_u32(self.share_access);
        out.put_u32(self.create_disposition);
        out.put_u32(self.create_options);
        out.put_u16(super::off16(HEADER_LEN + 56));
        out.put_u16(super::off16(name.len()));
        let ctx_pos = out.len();
        out.put_u32(0);
        out.put_u32(0);
        if name.is_empty() {
            out.put_u8(0); // the Buffer is never empty on the wire
        } else {
            out.extend_from_slice(&name);
        }
        if self.contexts.is_empty() {
            return;
        }
        while (out.len() - base) % 8 != 0 {
            out.push(0);
        }
        let owned: Vec<(&[u8], Vec<u8>)> = self.contexts.iter().map(|c| (c.name, c.data.to_vec())).collect();
        let chain = encode_contexts(&owned);
        let off = len32(out.len() - base);
        out[ctx_pos..ctx_pos + 4].copy_from_slice(&off.to_le_bytes());
        out[ctx_pos + 4..ctx_pos + 8].copy_from_slice(&len32(chain.len()).to_le_bytes());
        out.extend_from_slice(&chain);
    }
}

impl CreateResponse {
    /// Client side: decodes a CREATE response body (MS-SMB2 2.2.14); `contexts` keeps the
    /// raw chain (see [`decode_contexts`]).
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::response_body(msg, 89)?;
        let oplock_level = r.u8()?;
        let flags = r.u8()?;
        let create_action = r.u32()?;
        let creation_time = r.u64()?;
        let last_access_time = r.u64()?;
        let last_write_time = r.u64()?;
        let change_time = r.u64()?;
        let allocation_size = r.u64()?;
        let end_of_file = r.u64()?;
        let file_attributes = r.u32()?;
        r.skip(4)?;
        let file_id = FileId::from_bytes(r.array()?);
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        let contexts = slice_at(msg, ctx_off, ctx_len)?.to_vec();
        Ok(CreateResponse {
            oplock_level,
            flags,
            create_action,
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            allocation_size,
            end_of_file,
            file_attributes,
            file_id,
            contexts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_chain_round_trip() {
        let enc = encode_contexts(&[(b"MxAc", vec![0; 8]), (b"QFid", vec![1; 32])]);
        let dec = decode_contexts(&enc).unwrap();
        assert_eq!(dec.len(), 2);
        assert_eq!(dec[0].name, b"MxAc");
        assert_eq!(dec[1].data, &[1; 32][..]);
    }

    #[test]
    fn context_garbage_is_rejected() {
        assert!(decode_contexts(&[0xff; 8]).is_err());
        let mut enc = encode_contexts(&[(b"MxAc", vec![0; 8]), (b"QFid", vec![])]);
        enc[0] = 3; // misaligned Next
        assert!(decode_contexts(&enc).is_err());
    }
}
