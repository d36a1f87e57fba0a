//! Block cloning (MS-FSCC 2.3.7.2 SMB2_DUPLICATE_EXTENTS_DATA, 2.3.9.2
//! SMB2_DUPLICATE_EXTENTS_DATA_EX): the input of FSCTL_DUPLICATE_EXTENTS_TO_FILE(_EX), sent
//! on the target's open and naming the source open by its FileId. Offsets and the count
//! are signed on the wire (LONGLONG); they stay `i64` so a caller can refuse negative ones.

use crate::reader::{PutLe, Reader};
use crate::{FileId, WireError};

/// Bytes of SMB2_DUPLICATE_EXTENTS_DATA.
pub const DATA_LEN: usize = 40;
/// Bytes of SMB2_DUPLICATE_EXTENTS_DATA_EX.
pub const DATA_EX_LEN: usize = 56;
/// The StructureSize an SMB2_DUPLICATE_EXTENTS_DATA_EX carries (that of the local
/// structure, whose handle is 8 bytes where the FileId is 16).
pub const EX_STRUCTURE_SIZE: u64 = 0x30;
/// DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC: the source range is cloned whole or not at all.
pub const SOURCE_ATOMIC: u32 = 0x1;

/// One request to clone `byte_count` bytes at `source_offset` of the source open to
/// `target_offset` of the open the IOCTL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DuplicateExtents {
    pub source: FileId,
    pub source_offset: i64,
    pub target_offset: i64,
    pub byte_count: i64,
    /// The _EX form's Flags; 0 for the plain form.
    pub flags: u32,
}

impl DuplicateExtents {
    /// Decodes SMB2_DUPLICATE_EXTENTS_DATA; a shorter input is an error, more is ignored.
    pub fn decode(input: &[u8]) -> Result<DuplicateExtents, WireError> {
        let mut r = Reader::new(input, 0);
        Self::decode_fields(&mut r, 0)
    }

    /// Decodes SMB2_DUPLICATE_EXTENTS_DATA_EX. Its StructureSize is not checked (the spec
    /// fixes it, and nothing depends on it); a shorter input is an error.
    pub fn decode_ex(input: &[u8]) -> Result<DuplicateExtents, WireError> {
        if input.len() < DATA_EX_LEN {
            return Err(WireError::Malformed("DUPLICATE_EXTENTS_DATA_EX too short"));
        }
        let mut r = Reader::new(input, 8);
        let mut d = Self::decode_fields(&mut r, 0)?;
        d.flags = r.u32()?;
        Ok(d)
    }

    fn decode_fields(r: &mut Reader<'_>, flags: u32) -> Result<DuplicateExtents, WireError> {
        let source = FileId::from_bytes(r.array()?);
        let (source_offset, target_offset, byte_count) = (r.u64()? as i64, r.u64()? as i64, r.u64()? as i64);
        Ok(DuplicateExtents { source, source_offset, target_offset, byte_count, flags })
    }

    /// Appends SMB2_DUPLICATE_EXTENTS_DATA (the flags are not part of it).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.source.to_bytes());
        out.put_u64(self.source_offset as u64);
        out.put_u64(self.target_offset as u64);
        out.put_u64(self.byte_count as u64);
    }

    /// Appends SMB2_DUPLICATE_EXTENTS_DATA_EX.
    pub fn encode_ex(&self, out: &mut Vec<u8>) {
        out.put_u64(EX_STRUCTURE_SIZE);
        self.encode(out);
        out.put_u32(self.flags);
        out.put_u32(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(flags: u32) -> DuplicateExtents {
        DuplicateExtents {
            source: FileId { persistent: 0x0102_0304_0506_0708, volatile: u64::MAX - 1 },
            source_offset: 4096,
            target_offset: -1,
            byte_count: 64 << 20,
            flags,
        }
    }

    #[test]
    fn both_forms_round_trip_with_the_layout_of_the_spec() {
        let d = sample(0);
        let mut b = Vec::new();
        d.encode(&mut b);
        assert_eq!(b.len(), DATA_LEN);
        assert_eq!(&b[..8], &0x0102_0304_0506_0708u64.to_le_bytes(), "SourceFileID.Persistent first");
        assert_eq!(&b[16..24], &4096u64.to_le_bytes());
        assert_eq!(&b[24..32], &[0xff; 8], "a negative TargetFileOffset stays negative");
        assert_eq!(DuplicateExtents::decode(&b).unwrap(), d);
        let e = sample(SOURCE_ATOMIC);
        let mut b = Vec::new();
        e.encode_ex(&mut b);
        assert_eq!(b.len(), DATA_EX_LEN);
        assert_eq!(&b[..8], &EX_STRUCTURE_SIZE.to_le_bytes());
        assert_eq!(&b[48..52], &SOURCE_ATOMIC.to_le_bytes());
        assert_eq!(DuplicateExtents::decode_ex(&b).unwrap(), e);
    }

    #[test]
    fn short_inputs_are_refused_and_longer_ones_read_their_start() {
        let mut b = Vec::new();
        sample(0).encode(&mut b);
        assert!(DuplicateExtents::decode(&b[..DATA_LEN - 1]).is_err());
        assert!(DuplicateExtents::decode(&[]).is_err());
        b.extend_from_slice(&[9; 7]);
        assert_eq!(DuplicateExtents::decode(&b).unwrap(), sample(0));
        let mut x = Vec::new();
        sample(1).encode_ex(&mut x);
        assert!(DuplicateExtents::decode_ex(&x[..DATA_EX_LEN - 1]).is_err(), "the Reserved field too must be present");
    }
}
