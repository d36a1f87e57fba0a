//! Sparse files (MS-FSCC 2.3.64 FSCTL_SET_SPARSE, 2.3.67 FSCTL_SET_ZERO_DATA, 2.3.51/2.3.52
//! FSCTL_QUERY_ALLOCATED_RANGES): the FILE_SET_SPARSE_BUFFER flag, FILE_ZERO_DATA_INFORMATION
//! and FILE_ALLOCATED_RANGE_BUFFER. Offsets are signed on the wire (LONGLONG); they are
//! kept as `i64` so a caller can refuse negative ones as MS-FSA asks.

use crate::reader::{PutLe, Reader};
use crate::WireError;

/// Bytes of FILE_ZERO_DATA_INFORMATION and of one FILE_ALLOCATED_RANGE_BUFFER.
pub const RANGE_LEN: usize = 16;

/// FILE_SET_SPARSE_BUFFER: whether to set the sparse attribute. No buffer at all means
/// set (MS-FSCC 2.3.64); a longer buffer is accepted, as Windows does, and only its first
/// byte counts.
pub fn decode_set_sparse(input: &[u8]) -> bool {
    input.first().is_none_or(|&b| b != 0)
}

/// FILE_ZERO_DATA_INFORMATION: zero `file_offset..beyond_final_zero`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroData {
    pub file_offset: i64,
    pub beyond_final_zero: i64,
}

impl ZeroData {
    /// Decodes the first 16 bytes; a shorter input is an error, more is ignored.
    pub fn decode(input: &[u8]) -> Result<ZeroData, WireError> {
        let mut r = Reader::new(input, 0);
        Ok(ZeroData { file_offset: r.u64()? as i64, beyond_final_zero: r.u64()? as i64 })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.file_offset as u64);
        out.put_u64(self.beyond_final_zero as u64);
    }
}

/// FILE_ALLOCATED_RANGE_BUFFER: a range asked about, or one found allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocatedRange {
    pub file_offset: i64,
    pub length: i64,
}

impl AllocatedRange {
    /// Decodes the first 16 bytes (the request's range); a shorter input is an error.
    pub fn decode(input: &[u8]) -> Result<AllocatedRange, WireError> {
        let mut r = Reader::new(input, 0);
        Ok(AllocatedRange { file_offset: r.u64()? as i64, length: r.u64()? as i64 })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.file_offset as u64);
        out.put_u64(self.length as u64);
    }

    /// Decodes a response's array of ranges (a trailing partial entry is an error).
    pub fn decode_list(output: &[u8]) -> Result<Vec<AllocatedRange>, WireError> {
        if output.len() % RANGE_LEN != 0 {
            return Err(WireError::Malformed("allocated ranges not a multiple of 16 bytes"));
        }
        output.chunks_exact(RANGE_LEN).map(AllocatedRange::decode).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_sparse_buffer() {
        assert!(decode_set_sparse(&[]), "no buffer sets");
        assert!(decode_set_sparse(&[0xff]));
        assert!(decode_set_sparse(&[1, 0, 0]));
        assert!(!decode_set_sparse(&[0]));
        assert!(!decode_set_sparse(&[0; 100]), "only the first byte counts");
    }

    #[test]
    fn zero_data_round_trip_and_short_input() {
        let z = ZeroData { file_offset: 4096, beyond_final_zero: -1 };
        let mut b = Vec::new();
        z.encode(&mut b);
        assert_eq!(b.len(), RANGE_LEN);
        assert_eq!(ZeroData::decode(&b).unwrap(), z);
        b.extend_from_slice(&[9; 16]);
        assert_eq!(ZeroData::decode(&b).unwrap(), z, "trailing bytes are ignored");
        assert!(ZeroData::decode(&b[..15]).is_err());
        assert!(ZeroData::decode(&[]).is_err());
    }

    #[test]
    fn allocated_ranges_round_trip() {
        let list = [AllocatedRange { file_offset: 0, length: 1024 }, AllocatedRange { file_offset: 1 << 26, length: i64::MAX }];
        let mut b = Vec::new();
        list.iter().for_each(|r| r.encode(&mut b));
        assert_eq!(b.len(), 2 * RANGE_LEN);
        assert_eq!(&b[..8], &0u64.to_le_bytes());
        assert_eq!(&b[8..16], &1024u64.to_le_bytes());
        assert_eq!(AllocatedRange::decode_list(&b).unwrap(), list);
        assert_eq!(AllocatedRange::decode(&b).unwrap(), list[0]);
        assert!(AllocatedRange::decode_list(&b[..31]).is_err());
        assert!(AllocatedRange::decode(&b[..8]).is_err());
        assert_eq!(AllocatedRange::decode_list(&[]).unwrap(), vec![]);
    }
}
