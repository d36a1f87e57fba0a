//! Server-side copy (MS-SMB2 2.2.31.1, 2.2.32.1, 2.2.32.3): the resume key that names a
//! source open, the chunk list of FSCTL_SRV_COPYCHUNK(_WRITE), and its response.

use crate::reader::{PutLe, Reader};
use crate::WireError;

/// Bytes of a resume key (opaque to the client).
pub const RESUME_KEY_LEN: usize = 24;
/// Bytes of SRV_COPYCHUNK_COPY before its chunks.
pub const COPY_HEADER_LEN: usize = 32;
/// Bytes of one SRV_COPYCHUNK.
pub const CHUNK_LEN: usize = 24;
/// Bytes of SRV_COPYCHUNK_RESPONSE.
pub const RESPONSE_LEN: usize = 12;

/// One range to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub source_offset: u64,
    pub target_offset: u64,
    pub length: u32,
}

/// SRV_COPYCHUNK_COPY: the source's resume key and the chunks, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRequest {
    pub source_key: [u8; RESUME_KEY_LEN],
    pub chunks: Vec<Chunk>,
}

impl CopyRequest {
    /// Decodes the request. A ChunkCount larger than the input holds is an error, so
    /// the chunk list never grows beyond what arrived.
    pub fn decode(input: &[u8]) -> Result<CopyRequest, WireError> {
        let mut r = Reader::new(input, 0);
        let source_key = r.array()?;
        let count = r.u32()? as usize;
        r.skip(4)?;
        if count > input.len().saturating_sub(COPY_HEADER_LEN) / CHUNK_LEN {
            return Err(WireError::Malformed("copy chunk count exceeds the input"));
        }
        let mut chunks = Vec::with_capacity(count);
        for _ in 0..count {
            let (source_offset, target_offset, length) = (r.u64()?, r.u64()?, r.u32()?);
            r.skip(4)?;
            chunks.push(Chunk { source_offset, target_offset, length });
        }
        Ok(CopyRequest { source_key, chunks })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.source_key);
        out.put_u32(self.chunks.len() as u32);
        out.put_u32(0);
        for c in &self.chunks {
            out.put_u64(c.source_offset);
            out.put_u64(c.target_offset);
            out.put_u32(c.length);
            out.put_u32(0);
        }
    }
}

/// SRV_COPYCHUNK_RESPONSE. On success: chunks copied, 0, bytes copied. On a limit
/// exceeded (STATUS_INVALID_PARAMETER): the server's limits. After a failed chunk: the
/// chunks copied before it, 0, and their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyResponse {
    pub chunks_written: u32,
    pub chunk_bytes_written: u32,
    pub total_bytes_written: u32,
}

impl CopyResponse {
    pub fn encode(&self) -> [u8; RESPONSE_LEN] {
        let mut b = [0u8; RESPONSE_LEN];
        b[..4].copy_from_slice(&self.chunks_written.to_le_bytes());
        b[4..8].copy_from_slice(&self.chunk_bytes_written.to_le_bytes());
        b[8..].copy_from_slice(&self.total_bytes_written.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<CopyResponse, WireError> {
        let mut r = Reader::new(b, 0);
        Ok(CopyResponse { chunks_written: r.u32()?, chunk_bytes_written: r.u32()?, total_bytes_written: r.u32()? })
    }
}

/// SRV_REQUEST_RESUME_KEY's response: the key, ContextLength 0, and the four zero bytes
/// Windows sends as Context (MS-SMB2 <56>).
pub fn encode_resume_key(key: &[u8; RESUME_KEY_LEN]) -> [u8; RESUME_KEY_LEN + 8] {
    let mut b = [0u8; RESUME_KEY_LEN + 8];
    b[..RESUME_KEY_LEN].copy_from_slice(key);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_request_round_trips() {
        let req = CopyRequest {
            source_key: [7; 24],
            chunks: vec![
                Chunk { source_offset: 0, target_offset: 4096, length: 4096 },
                Chunk { source_offset: u64::MAX, target_offset: 1, length: u32::MAX },
            ],
        };
        let mut b = Vec::new();
        req.encode(&mut b);
        assert_eq!(b.len(), COPY_HEADER_LEN + 2 * CHUNK_LEN);
        assert_eq!(CopyRequest::decode(&b).unwrap(), req);
    }

    #[test]
    fn a_chunk_count_beyond_the_input_is_refused_before_allocating() {
        let mut b = vec![0u8; COPY_HEADER_LEN + CHUNK_LEN];
        b[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(CopyRequest::decode(&b).is_err());
        b[24..28].copy_from_slice(&2u32.to_le_bytes());
        assert!(CopyRequest::decode(&b).is_err());
        b[24..28].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(CopyRequest::decode(&b).unwrap().chunks.len(), 1);
        assert!(CopyRequest::decode(&b[..20]).is_err());
    }

    #[test]
    fn responses_are_three_little_endian_counts() {
        let r = CopyResponse { chunks_written: 256, chunk_bytes_written: 1 << 20, total_bytes_written: 16 << 20 };
        assert_eq!(CopyResponse::decode(&r.encode()).unwrap(), r);
        assert_eq!(&r.encode()[..4], &[0, 1, 0, 0]);
        assert_eq!(encode_resume_key(&[9; 24])[24..], [0; 8]);
    }
}
