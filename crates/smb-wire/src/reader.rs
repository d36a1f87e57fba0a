//! A bounds-checked little-endian cursor over a message.

use crate::WireError;

/// Reads little-endian integers from a slice; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading `buf` at `pos`.
    pub fn new(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos }
    }

    /// Current position from the start of the buffer.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Takes `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Malformed("length overflow"))?;
        let s = self.buf.get(self.pos..end).ok_or(WireError::Malformed("truncated"))?;
        self.pos = end;
        Ok(s)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), WireError> {
        self.bytes(n).map(|_| ())
    }

    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }
}

/// Returns `buf[offset..offset+len]` where `offset` counts from the start of the message.
/// A zero length yields an empty slice whatever the offset (clients send offset 0 then).
pub fn slice_at(buf: &[u8], offset: usize, len: usize) -> Result<&[u8], WireError> {
    if len == 0 {
        return Ok(&[]);
    }
    let end = offset.checked_add(len).ok_or(WireError::Malformed("length overflow"))?;
    buf.get(offset..end).ok_or(WireError::Malformed("buffer outside message"))
}

/// Decodes UTF-16LE into a String; odd lengths and unpaired surrogates are malformed.
pub fn utf16le(b: &[u8]) -> Result<String, WireError> {
    if b.len() % 2 != 0 {
        return Err(WireError::Malformed("odd UTF-16 length"));
    }
    let units = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units).collect::<Result<String, _>>().map_err(|_| WireError::Malformed("invalid UTF-16"))
}

/// Appends `s` as UTF-16LE.
pub fn put_utf16le(out: &mut Vec<u8>, s: &str) {
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
}

/// Length of `s` in UTF-16LE bytes.
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count() * 2
}

/// Little-endian writers for building messages.
pub trait PutLe {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    /// Zero bytes until the length is a multiple of `align`.
    fn pad_to(&mut self, align: usize);
}

impl PutLe for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn pad_to(&mut self, align: usize) {
        while self.len() % align != 0 {
            self.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_bounds() {
        let mut r = Reader::new(&[1, 0, 2, 0, 0, 0], 0);
        assert_eq!(r.u16().unwrap(), 1);
        assert_eq!(r.u32().unwrap(), 2);
        assert!(r.u8().is_err());
        assert!(slice_at(&[0; 4], 3, 2).is_err());
        assert!(slice_at(&[0; 4], usize::MAX, 2).is_err());
        assert_eq!(slice_at(&[0; 4], 99, 0).unwrap(), &[] as &[u8]);
    }

    #[test]
    fn utf16_round_trip() {
        let mut v = Vec::new();
        put_utf16le(&mut v, "dir\\fïle");
        assert_eq!(utf16le(&v).unwrap(), "dir\\fïle");
        assert!(utf16le(&[0x00]).is_err());
        assert!(utf16le(&[0x00, 0xd8]).is_err());
    }
}
