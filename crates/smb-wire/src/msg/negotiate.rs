//! NEGOTIATE request and response with SMB 3.1.1 negotiate contexts (MS-SMB2 2.2.3, 2.2.4).

use super::{len32, off16};
use crate::reader::{slice_at, utf16le, PutLe, Reader};
use crate::{WireError, HEADER_LEN};

/// Security mode bits (MS-SMB2 2.2.3).
pub const SIGNING_ENABLED: u16 = 0x1;
pub const SIGNING_REQUIRED: u16 = 0x2;

/// Global capabilities (MS-SMB2 2.2.3).
pub mod cap {
    pub const DFS: u32 = 0x01;
    pub const LEASING: u32 = 0x02;
    pub const LARGE_MTU: u32 = 0x04;
    pub const MULTI_CHANNEL: u32 = 0x08;
    pub const PERSISTENT_HANDLES: u32 = 0x10;
    pub const DIRECTORY_LEASING: u32 = 0x20;
    pub const ENCRYPTION: u32 = 0x40;
}

/// Negotiate context types (MS-SMB2 2.2.3.1).
pub mod ctx {
    pub const PREAUTH_INTEGRITY: u16 = 0x0001;
    pub const ENCRYPTION: u16 = 0x0002;
    pub const COMPRESSION: u16 = 0x0003;
    pub const NETNAME: u16 = 0x0005;
    pub const TRANSPORT: u16 = 0x0006;
    pub const RDMA_TRANSFORM: u16 = 0x0007;
    pub const SIGNING: u16 = 0x0008;
}

/// SHA-512, the only preauth integrity hash algorithm (MS-SMB2 2.2.3.1.1).
pub const HASH_SHA512: u16 = 0x0001;

/// A negotiate context as sent by the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegotiateContext {
    PreauthIntegrity {
        hash_algorithms: Vec<u16>,
        salt: Vec<u8>,
    },
    Encryption {
        ciphers: Vec<u16>,
    },
    Signing {
        algorithms: Vec<u16>,
    },
    NetName(String),
    /// Anything else: type and raw data (ignored, as MS-SMB2 3.3.5.4 says).
    Other {
        context_type: u16,
        data: Vec<u8>,
    },
}

/// MS-SMB2 2.2.3 NEGOTIATE Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiateRequest {
    pub security_mode: u16,
    pub capabilities: u32,
    pub client_guid: [u8; 16],
    pub dialects: Vec<u16>,
    pub contexts: Vec<NegotiateContext>,
}

/// Most dialects a real client offers is 5; anything beyond a few dozen is hostile.
const MAX_DIALECTS: u16 = 64;
const MAX_CONTEXTS: u16 = 32;

impl NegotiateRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::body(msg, 36)?;
        let count = r.u16()?;
        if count == 0 || count > MAX_DIALECTS {
            return Err(WireError::Malformed("negotiate: dialect count"));
        }
        let security_mode = r.u16()?;
        r.skip(2)?;
        let capabilities = r.u32()?;
        let client_guid = r.array::<16>()?;
        let ctx_offset = r.u32()?;
        let ctx_count = r.u16()?;
        r.skip(2)?;
        let mut dialects = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            dialects.push(r.u16()?);
        }
        let mut contexts = Vec::new();
        // The offset/count fields only carry contexts when 3.1.1 is offered; for older
        // dialect lists they are ClientStartTime and must be ignored.
        if dialects.contains(&crate::dialect::SMB311) && ctx_count > 0 {
            if ctx_count > MAX_CONTEXTS {
                return Err(WireError::Malformed("negotiate: too many contexts"));
            }
            contexts = decode_contexts(msg, ctx_offset as usize, ctx_count)?;
        }
        Ok(NegotiateRequest { security_mode, capabilities, client_guid, dialects, contexts })
    }
}

fn decode_contexts(msg: &[u8], offset: usize, count: u16) -> Result<Vec<NegotiateContext>, WireError> {
    if offset < HEADER_LEN || offset % 8 != 0 {
        return Err(WireError::Malformed("negotiate: context offset"));
    }
    let mut pos = offset;
    let mut out = Vec::with_capacity(usize::from(count));
    for i in 0..count {
        if i > 0 {
            pos = pos.checked_add(7).ok_or(WireError::Malformed("overflow"))? & !7;
        }
        let mut r = Reader::new(msg, pos);
        let context_type = r.u16()?;
        let len = usize::from(r.u16()?);
        r.skip(4)?;
        let data = r.bytes(len)?;
        pos = r.pos();
        out.push(decode_context(context_type, data)?);
    }
    Ok(out)
}

fn u16_list(r: &mut Reader<'_>, n: u16) -> Result<Vec<u16>, WireError> {
    (0..n).map(|_| r.u16()).collect()
}

fn decode_context(context_type: u16, data: &[u8]) -> Result<NegotiateContext, WireError> {
    let mut r = Reader::new(data, 0);
    Ok(match context_type {
        ctx::PREAUTH_INTEGRITY => {
            let n = r.u16()?;
            let salt_len = usize::from(r.u16()?);
            if n == 0 {
                return Err(WireError::Malformed("preauth: no hash algorithms"));
            }
            let hash_algorithms = u16_list(&mut r, n)?;
            let salt = r.bytes(salt_len)?.to_vec();
            NegotiateContext::PreauthIntegrity { hash_algorithms, salt }
        }
        // An empty cipher list is accepted: clients with encryption off send one, and
        // the server answers it with no cipher (Samba and Windows do the same).
        ctx::ENCRYPTION => {
            let n = r.u16()?;
            NegotiateContext::Encryption { ciphers: u16_list(&mut r, n)? }
        }
        ctx::SIGNING => {
            let n = r.u16()?;
            if n == 0 {
                return Err(WireError::Malformed("signing: no algorithms"));
            }
            NegotiateContext::Signing { algorithms: u16_list(&mut r, n)? }
        }
        ctx::NETNAME => NegotiateContext::NetName(utf16le(data).unwrap_or_default()),
        _ => NegotiateContext::Other { context_type, data: data.to_vec() },
    })
}

/// MS-SMB2 2.2.4 NEGOTIATE Response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiateResponse {
    pub security_mode: u16,
    pub dialect: u16,
    pub server_guid: [u8; 16],
    pub capabilities: u32,
    pub max_transact_size: u32,
    pub max_read_size: u32,
    pub max_write_size: u32,
    pub system_time: u64,
    pub server_start_time: u64,
    pub security_buffer: Vec<u8>,
    /// Response contexts (3.1.1 only): type and encoded data.
    pub contexts: Vec<(u16, Vec<u8>)>,
}

impl NegotiateResponse {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let base = out.len() - HEADER_LEN;
        let sec_off = HEADER_LEN + 64;
        out.put_u16(65);
        out.put_u16(self.security_mode);
        out.put_u16(self.dialect);
        out.put_u16(u16::try_from(self.contexts.len()).unwrap_or(0));
        out.extend_from_slice(&self.server_guid);
        out.put_u32(self.capabilities);
        out.put_u32(self.max_transact_size);
        out.put_u32(self.max_read_size);
        out.put_u32(self.max_write_size);
        out.put_u64(self.system_time);
        out.put_u64(self.server_start_time);
        out.put_u16(off16(sec_off));
        out.put_u16(off16(self.security_buffer.len()));
        let ctx_off_pos = out.len();
        out.put_u32(0);
        out.extend_from_slice(&self.security_buffer);
        if self.contexts.is_empty() {
            if self.security_buffer.is_empty() {
                out.put_u8(0);
            }
            return;
        }
        // Contexts start 8-byte aligned relative to the header.
        while (out.len() - base) % 8 != 0 {
            out.push(0);
        }
        let ctx_off = len32(out.len() - base);
        out[ctx_off_pos..ctx_off_pos + 4].copy_from_slice(&ctx_off.to_le_bytes());
        for (i, (t, data)) in self.contexts.iter().enumerate() {
            if i > 0 {
                while (out.len() - base) % 8 != 0 {
                    out.push(0);
                }
            }
            out.put_u16(*t);
            out.put_u16(off16(data.len()));
            out.put_u32(0);
            out.extend_from_slice(data);
        }
    }
}

/// Encodes the data of a preauth integrity context naming SHA-512 with `salt`.
pub fn preauth_context_data(salt: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(6 + salt.len());
    v.put_u16(1);
    v.put_u16(off16(salt.len()));
    v.put_u16(HASH_SHA512);
    v.extend_from_slice(salt);
    v
}

/// Encodes a context that carries a count and a list of u16 ids (encryption, signing).
pub fn id_list_context_data(ids: &[u16]) -> Vec<u8> {
    let mut v = Vec::with_capacity(2 + 2 * ids.len());
    v.put_u16(u16::try_from(ids.len()).unwrap_or(0));
    for id in ids {
        v.put_u16(*id);
    }
    v
}

/// Reads the security buffer of a response, for the client side and tests.
pub fn security_buffer_of(msg: &[u8]) -> Result<&[u8], WireError> {
    let mut r = super::body(msg, 65)?;
    r.skip(54)?;
    let off = usize::from(r.u16()?);
    let len = usize::from(r.u16()?);
    slice_at(msg, off, len)
}

// ---- client side -------------------------------------------------------------------------

impl NegotiateContext {
    /// The context type and encoded data of this context (MS-SMB2 2.2.3.1).
    pub fn encode_data(&self) -> (u16, Vec<u8>) {
        match self {
            NegotiateContext::PreauthIntegrity { hash_algorithms, salt } => {
                let mut v = Vec::with_capacity(4 + 2 * hash_algorithms.len() + salt.len());
                v.put_u16(u16::try_from(hash_algorithms.len()).unwrap_or(0));
                v.put_u16(off16(salt.len()));
                for h in hash_algorithms {
                    v.put_u16(*h);
                }
                v.extend_from_slice(salt);
                (ctx::PREAUTH_INTEGRITY, v)
            }
            NegotiateContext::Encryption { ciphers } => (ctx::ENCRYPTION, id_list_context_data(ciphers)),
            NegotiateContext::Signing { algorithms } => (ctx::SIGNING, id_list_context_data(algorithms)),
            NegotiateContext::NetName(name) => {
                let mut v = Vec::new();
                crate::reader::put_utf16le(&mut v, name);
                (ctx::NETNAME, v)
            }
            NegotiateContext::Other { context_type, data } => (*context_type, data.clone()),
        }
    }
}

impl NegotiateRequest {
    /// Client side: appends the request body after the header just written to `out`
    /// (MS-SMB2 2.2.3). Contexts are sent only when 3.1.1 is among the dialects, since the
    /// fields mean ClientStartTime otherwise.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let base = super::msg_base(out);
        let with_ctx = self.dialects.contains(&crate::dialect::SMB311) && !self.contexts.is_empty();
        out.put_u16(36);
        out.put_u16(u16::try_from(self.dialects.len()).unwrap_or(0));
        out.put_u16(self.security_mode);
        out.put_u16(0);
        out.put_u32(self.capabilities);
        out.extend_from_slice(&self.client_guid);
        let ctx_off_pos = out.len();
        out.put_u32(0);
        out.put_u16(if with_ctx { u16::try_from(self.contexts.len()).unwrap_or(0) } else { 0 });
        out.put_u16(0);
        for d in &self.dialects {
            out.put_u16(*d);
        }
        if !with_ctx {
            return;
        }
        for (i, c) in self.contexts.iter().enumerate() {
            // Contexts start 8-byte aligned relative to the header (MS-SMB2 2.2.3.1).
            while (out.len() - base) % 8 != 0 {
                out.push(0);
            }
            if i == 0 {
                let off = len32(out.len() - base);
                out[ctx_off_pos..ctx_off_pos + 4].copy_from_slice(&off.to_le_bytes());
            }
            let (t, data) = c.encode_data();
            out.put_u16(t);
            out.put_u16(off16(data.len()));
            out.put_u32(0);
            out.extend_from_slice(&data);
        }
    }
}

impl NegotiateResponse {
    /// Client side: decodes a NEGOTIATE response (MS-SMB2 2.2.4). Contexts are read only
    /// for dialect 3.1.1, with the same count cap as requests.
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = super::response_body(msg, 65)?;
        let security_mode = r.u16()?;
        let dialect = r.u16()?;
        let ctx_count = r.u16()?;
        let server_guid = r.array::<16>()?;
        let capabilities = r.u32()?;
        let max_transact_size = r.u32()?;
        let max_read_size = r.u32()?;
        let max_write_size = r.u32()?;
        let system_time = r.u64()?;
        let server_start_time = r.u64()?;
        let sec_off = usize::from(r.u16()?);
        let sec_len = usize::from(r.u16()?);
        let ctx_off = r.u32()? as usize;
        let security_buffer = slice_at(msg, sec_off, sec_len)?.to_vec();
        let mut contexts = Vec::new();
        if dialect == crate::dialect::SMB311 && ctx_count > 0 {
            if ctx_count > MAX_CONTEXTS {
                return Err(WireError::Malformed("negotiate: too many contexts"));
            }
            if ctx_off < HEADER_LEN || ctx_off % 8 != 0 {
                return Err(WireError::Malformed("negotiate: context offset"));
            }
            let mut pos = ctx_off;
            for i in 0..ctx_count {
                if i > 0 {
                    pos = pos.checked_add(7).ok_or(WireError::Malformed("overflow"))? & !7;
                }
                let mut r = Reader::new(msg, pos);
                let t = r.u16()?;
                let len = usize::from(r.u16()?);
                r.skip(4)?;
                contexts.push((t, r.bytes(len)?.to_vec()));
                pos = r.pos();
            }
        }
        Ok(NegotiateResponse {
            security_mode,
            dialect,
            server_guid,
            capabilities,
            max_transact_size,
            max_read_size,
            max_write_size,
            system_time,
            server_start_time,
            security_buffer,
            contexts,
        })
    }
}

/// Decodes the data of one negotiate context of type `context_type` (request or response:
/// the layouts are the same, MS-SMB2 2.2.3.1 / 2.2.4.1).
pub fn parse_context(context_type: u16, data: &[u8]) -> Result<NegotiateContext, WireError> {
    decode_context(context_type, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;

    fn request(dialects: &[u16], contexts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut m = Vec::new();
        Header {
            credit_charge: 0,
            status: 0,
            command: 0,
            credits: 1,
            flags: 0,
            next_command: 0,
            message_id: crate::MessageId(0),
            async_id: 0,
            tree_id: crate::TreeId(0),
            session_id: crate::SessionId(0),
            signature: [0; 16],
        }
        .encode(&mut m);
        m.put_u16(36);
        m.put_u16(dialects.len() as u16);
        m.put_u16(1);
        m.put_u16(0);
        m.put_u32(0x7f);
        m.extend_from_slice(&[9; 16]);
        let ctx_off_pos = m.len();
        m.put_u32(0);
        m.put_u16(contexts.len() as u16);
        m.put_u16(0);
        for d in dialects {
            m.put_u16(*d);
        }
        if !contexts.is_empty() {
            m.pad_to(8);
            let off = m.len() as u32;
            m[ctx_off_pos..ctx_off_pos + 4].copy_from_slice(&off.to_le_bytes());
            for (i, (t, d)) in contexts.iter().enumerate() {
                if i > 0 {
                    m.pad_to(8);
                }
                m.put_u16(*t);
                m.put_u16(d.len() as u16);
                m.put_u32(0);
                m.extend_from_slice(d);
            }
        }
        m
    }

    #[test]
    fn decodes_311_contexts() {
        let m = request(
            &[0x0202, 0x0311],
            &[
                (ctx::PREAUTH_INTEGRITY, preauth_context_data(&[1; 32])),
                (ctx::ENCRYPTION, id_list_context_data(&[2, 1])),
                (ctx::SIGNING, id_list_context_data(&[2, 1, 0])),
                (0x99, vec![1, 2, 3]),
            ],
        );
        let r = NegotiateRequest::decode(&m).unwrap();
        assert_eq!(r.dialects, vec![0x0202, 0x0311]);
        assert_eq!(r.contexts.len(), 4);
        assert_eq!(r.contexts[1], NegotiateContext::Encryption { ciphers: vec![2, 1] });
        assert_eq!(r.contexts[2], NegotiateContext::Signing { algorithms: vec![2, 1, 0] });
    }

    #[test]
    fn accepts_an_empty_cipher_list() {
        let m = request(&[0x0311], &[(ctx::PREAUTH_INTEGRITY, preauth_context_data(&[1; 32])), (ctx::ENCRYPTION, id_list_context_data(&[]))]);
        let r = NegotiateRequest::decode(&m).unwrap();
        assert_eq!(r.contexts[1], NegotiateContext::Encryption { ciphers: vec![] });
        // A count beyond the context's data is still malformed.
        let m = request(&[0x0311], &[(ctx::ENCRYPTION, vec![2, 0, 1, 0])]);
        assert!(NegotiateRequest::decode(&m).is_err());
    }

    #[test]
    fn rejects_bad_counts() {
        let mut m = request(&[0x0202], &[]);
        m[66..68].copy_from_slice(&0u16.to_le_bytes());
        assert!(NegotiateRequest::decode(&m).is_err());
        m[66..68].copy_from_slice(&0xffffu16.to_le_bytes());
        assert!(NegotiateRequest::decode(&m).is_err());
    }

    #[test]
    fn response_round_trip_security_buffer() {
        let mut out = vec![0u8; HEADER_LEN];
        out[..4].copy_from_slice(&crate::header::PROTOCOL_ID);
        out[4] = 64;
        let resp = NegotiateResponse {
            security_mode: 1,
            dialect: 0x311,
            server_guid: [3; 16],
            capabilities: 0,
            max_transact_size: 1 << 20,
            max_read_size: 1 << 20,
            max_write_size: 1 << 20,
            system_time: 0,
            server_start_time: 0,
            security_buffer: vec![0xa0, 1, 2],
            contexts: vec![(ctx::PREAUTH_INTEGRITY, preauth_context_data(&[5; 32]))],
        };
        resp.encode(&mut out);
        assert_eq!(security_buffer_of(&out).unwrap(), &[0xa0, 1, 2]);
        let ctx_off = u32::from_le_bytes(out[124..128].try_into().unwrap()) as usize;
        assert_eq!(ctx_off % 8, 0);
        assert_eq!(u16::from_le_bytes([out[ctx_off], out[ctx_off + 1]]), ctx::PREAUTH_INTEGRITY);
    }
}
