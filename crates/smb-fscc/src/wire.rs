//! Little-endian write/read helpers and UTF-16LE conversion.

use crate::FsccError;

pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}
pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_zeros(out: &mut Vec<u8>, n: usize) {
    out.resize(out.len() + n, 0);
}

/// Overwrites a u32 already written at `at` (used for back-patched offsets).
pub(crate) fn patch_u32(out: &mut [u8], at: usize, v: u32) {
    if let Some(dst) = out.get_mut(at..at + 4) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

/// UTF-16LE bytes of `s`.
pub(crate) fn utf16le(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() * 2);
    for u in s.encode_utf16() {
        v.extend_from_slice(&u.to_le_bytes());
    }
    v
}

/// Appends a u32 byte length followed by the UTF-16LE name.
pub(crate) fn put_len_name(out: &mut Vec<u8>, name: &[u8]) {
    // Names come from the local file system and are far below 4 GiB; saturate
    // rather than panic if a caller ever passes something absurd.
    put_u32(out, u32::try_from(name.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(name);
}

/// Decodes UTF-16LE, rejecting odd lengths and unpaired surrogates (a
/// server backed by a UTF-8 file system cannot represent those).
pub(crate) fn from_utf16le(b: &[u8]) -> Result<String, FsccError> {
    if b.len() & 1 != 0 {
        return Err(FsccError::InvalidParameter);
    }
    let units = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units).collect::<Result<String, _>>().map_err(|_| FsccError::InvalidParameter)
}

/// Bounds-checked little-endian reader over an input buffer.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], FsccError> {
        let end = self.pos.checked_add(n).ok_or(FsccError::InfoLengthMismatch)?;
        let s = self.buf.get(self.pos..end).ok_or(FsccError::InfoLengthMismatch)?;
        self.pos = end;
        Ok(s)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, FsccError> {
        Ok(self.bytes(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, FsccError> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, FsccError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, FsccError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}
