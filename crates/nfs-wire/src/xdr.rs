//! XDR (RFC 4506) primitives: a bounded reader over a borrowed buffer and a writer that
//! appends to a `Vec<u8>`.
//!
//! Every read checks the bytes actually present before it takes them, and a variable-length
//! item is refused when its declared length exceeds what is left, so no decoder built on this
//! reader can panic or allocate more than its input could describe.

/// Why XDR bytes could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum XdrError {
    /// The input ends before the item does.
    #[error("XDR input ends early")]
    Short,
    /// A length is over the limit the protocol sets for the item.
    #[error("XDR length {len} over the limit {max}")]
    TooLong { len: u32, max: u32 },
    /// An enum or boolean discriminant that the protocol does not define.
    #[error("XDR value {0} is not valid here")]
    BadValue(u32),
}

/// Result of a decode.
pub type Result<T> = std::result::Result<T, XdrError>;

/// Bytes of zero padding after an item of `n` bytes (XDR aligns to 4).
pub const fn pad_len(n: usize) -> usize {
    (4 - (n & 3)) & 3
}

/// Reads XDR items from a borrowed buffer; variable-length items are borrowed, not copied.
#[derive(Debug, Clone)]
pub struct XdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> XdrReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        XdrReader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The bytes not read yet (e.g. the procedure arguments after an RPC call header).
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(XdrError::Short);
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn word(&mut self) -> Result<[u8; 4]> {
        let b = self.take(4)?;
        Ok([b[0], b[1], b[2], b[3]])
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.word()?))
    }

    pub fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.word()?))
    }

    pub fn u64(&mut self) -> Result<u64> {
        let hi = u64::from(self.u32()?);
        let lo = u64::from(self.u32()?);
        Ok(hi << 32 | lo)
    }

    /// An XDR bool: 0 or 1, anything else is an error.
    pub fn bool(&mut self) -> Result<bool> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(XdrError::BadValue(v)),
        }
    }

    /// Fixed-length opaque of `n` bytes, followed by its padding.
    pub fn opaque_fixed(&mut self, n: usize) -> Result<&'a [u8]> {
        let padded = n.checked_add(pad_len(n)).ok_or(XdrError::Short)?;
        let b = self.take(padded)?;
        Ok(&b[..n])
    }

    /// Fixed-length opaque of `N` bytes copied into an array (verifiers, cookie verifiers).
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.opaque_fixed(N)?);
        Ok(out)
    }

    /// Variable-length opaque of at most `max` bytes (`u32::MAX`: no limit but the input).
    pub fn opaque(&mut self, max: u32) -> Result<&'a [u8]> {
        let len = self.u32()?;
        if len > max {
            return Err(XdrError::TooLong { len, max });
        }
        self.opaque_fixed(len as usize)
    }

    /// An XDR string: returned as bytes (the protocol does not promise UTF-8).
    pub fn string(&mut self, max: u32) -> Result<&'a [u8]> {
        self.opaque(max)
    }

    /// Element count of a variable-length array of at most `max` elements, each taking at
    /// least `min_elem` bytes: refused when the input cannot hold that many elements, so a
    /// caller may reserve the count without trusting it.
    pub fn array_len(&mut self, max: u32, min_elem: usize) -> Result<usize> {
        let len = self.u32()?;
        if len > max {
            return Err(XdrError::TooLong { len, max });
        }
        let need = (len as usize).checked_mul(min_elem.max(1)).ok_or(XdrError::Short)?;
        if need > self.remaining() {
            return Err(XdrError::Short);
        }
        Ok(len as usize)
    }

    /// Optional data (`*T` in XDR): the "value follows" boolean.
    pub fn follows(&mut self) -> Result<bool> {
        self.bool()
    }
}

/// Appends XDR items to a caller's buffer (e.g. a reply that already holds its RPC header).
#[derive(Debug)]
pub struct XdrWriter<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> XdrWriter<'a> {
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        XdrWriter { buf }
    }

    /// Bytes in the underlying buffer (including what was there before this writer).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops what was written after `len` (an entry that did not fit).
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// The underlying buffer, for appending bytes (READ data) directly.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        self.buf
    }

    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn bool(&mut self, v: bool) {
        self.u32(u32::from(v));
    }

    /// Zero bytes that align an item of `n` bytes.
    pub fn pad(&mut self, n: usize) {
        self.buf.extend_from_slice(&[0u8; 3][..pad_len(n)]);
    }

    /// Fixed-length opaque: the bytes and their padding.
    pub fn opaque_fixed(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
        self.pad(b.len());
    }

    /// Variable-length opaque: length, bytes, padding. Callers never hold 4 GiB items; a
    /// longer slice would be cut to what the length word can say.
    pub fn opaque(&mut self, b: &[u8]) {
        let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
        self.u32(len);
        self.opaque_fixed(&b[..len as usize]);
    }

    pub fn string(&mut self, b: &[u8]) {
        self.opaque(b);
    }
}

/// A type with an XDR form. Every protocol type also has inherent `decode`/`encode` methods
/// doing the same; the trait serves generic code (composite types, tests, fuzzing).
pub trait Xdr<'a>: Sized {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self>;
    fn encode_xdr(&self, w: &mut XdrWriter<'_>);
}

impl<'a> Xdr<'a> for u32 {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        r.u32()
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.u32(*self);
    }
}

impl<'a> Xdr<'a> for i32 {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        r.i32()
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.i32(*self);
    }
}

impl<'a> Xdr<'a> for u64 {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        r.u64()
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.u64(*self);
    }
}

impl<'a> Xdr<'a> for bool {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        r.bool()
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.bool(*self);
    }
}

/// An unbounded XDR string or opaque (filename3, nfspath3), copied out.
impl<'a> Xdr<'a> for Vec<u8> {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(r.opaque(u32::MAX)?.to_vec())
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.opaque(self);
    }
}

/// An unbounded XDR string or opaque, borrowed from the input.
impl<'a> Xdr<'a> for &'a [u8] {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        r.opaque(u32::MAX)
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.opaque(self);
    }
}

/// A variable-length opaque or string of at most `MAX` bytes (`opaque x<MAX>`), copied out.
/// Decoding refuses a longer length before taking any bytes, so the copy never exceeds `MAX`.
/// Encoding writes what it holds: a caller that builds one longer than `MAX` sends bytes a
/// peer refuses, as it would with any other out-of-range field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Bounded<const MAX: u32>(pub Vec<u8>);

impl<const MAX: u32> Bounded<MAX> {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl<const MAX: u32> From<&[u8]> for Bounded<MAX> {
    fn from(b: &[u8]) -> Self {
        Bounded(b.to_vec())
    }
}

impl<const MAX: u32> From<Vec<u8>> for Bounded<MAX> {
    fn from(b: Vec<u8>) -> Self {
        Bounded(b)
    }
}

impl<'a, const MAX: u32> Xdr<'a> for Bounded<MAX> {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(Bounded(r.opaque(MAX)?.to_vec()))
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.opaque(&self.0);
    }
}

/// Fixed-length opaque (verifiers).
impl<'a, const N: usize> Xdr<'a> for [u8; N] {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        r.array()
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.opaque_fixed(self);
    }
}

/// XDR optional data (`*T`, or a `union switch (bool)` with a void FALSE arm).
impl<'a, T: Xdr<'a>> Xdr<'a> for Option<T> {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(if r.bool()? { Some(T::decode_xdr(r)?) } else { None })
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.bool(self.is_some());
        if let Some(v) = self {
            v.encode_xdr(w);
        }
    }
}

/// Implements [`Xdr`] for types whose inherent `decode`/`encode` take any reader lifetime.
macro_rules! xdr_via_inherent {
    ($($t:ty),+ $(,)?) => {$(
        impl<'a> $crate::xdr::Xdr<'a> for $t {
            fn decode_xdr(r: &mut $crate::xdr::XdrReader<'a>) -> $crate::xdr::Result<Self> {
                <$t>::decode(r)
            }
            fn encode_xdr(&self, w: &mut $crate::xdr::XdrWriter<'_>) {
                <$t>::encode(self, w)
            }
        }
    )+};
}
pub(crate) use xdr_via_inherent;

/// A struct of XDR fields in order, with inherent `decode`/`encode` and [`Xdr`].
macro_rules! xdr_struct {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name { $($(#[$fm])* pub $field: $ty),* }

        impl $name {
            pub fn decode(r: &mut $crate::xdr::XdrReader<'_>) -> $crate::xdr::Result<Self> {
                Ok($name { $($field: <$ty as $crate::xdr::Xdr>::decode_xdr(r)?),* })
            }
            pub fn encode(&self, w: &mut $crate::xdr::XdrWriter<'_>) {
                $($crate::xdr::Xdr::encode_xdr(&self.$field, w);)*
            }
        }
        $crate::xdr::xdr_via_inherent!($name);
    };
}
pub(crate) use xdr_struct;

/// What the codec tests of every module share.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Xdr, XdrReader, XdrWriter};

    /// The bytes `f` writes.
    pub fn encode(f: impl FnOnce(&mut XdrWriter<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut XdrWriter::new(&mut out));
        out
    }

    /// Encodes `v`, decodes it back whole, and checks every shorter prefix fails to decode.
    pub fn round_trip<T: for<'a> Xdr<'a> + PartialEq + std::fmt::Debug>(v: &T) -> Vec<u8> {
        let bytes = encode(|w| v.encode_xdr(w));
        let mut r = XdrReader::new(&bytes);
        assert_eq!(T::decode_xdr(&mut r).as_ref(), Ok(v));
        assert_eq!(r.remaining(), 0);
        for n in 0..bytes.len() {
            assert!(T::decode_xdr(&mut XdrReader::new(&bytes[..n])).is_err(), "prefix {n} of {v:?}");
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_lengths() {
        assert_eq!([pad_len(0), pad_len(1), pad_len(2), pad_len(3), pad_len(4), pad_len(5)], [0, 3, 2, 1, 0, 3]);
    }

    #[test]
    fn primitives_round_trip_and_layout() {
        let mut buf = Vec::new();
        let mut w = XdrWriter::new(&mut buf);
        w.u32(0x0102_0304);
        w.i32(-2);
        w.u64(0x0a0b_0c0d_0e0f_1011);
        w.bool(true);
        w.opaque(b"abcde");
        w.opaque_fixed(&[9, 9]);
        let expect: Vec<u8> = [
            &[1, 2, 3, 4][..],
            &[0xff, 0xff, 0xff, 0xfe],
            &[0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11],
            &[0, 0, 0, 1],
            &[0, 0, 0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0],
            &[9, 9, 0, 0],
        ]
        .concat();
        assert_eq!(buf, expect);
        let mut r = XdrReader::new(&buf);
        assert_eq!(r.u32(), Ok(0x0102_0304));
        assert_eq!(r.i32(), Ok(-2));
        assert_eq!(r.u64(), Ok(0x0a0b_0c0d_0e0f_1011));
        assert_eq!(r.bool(), Ok(true));
        assert_eq!(r.opaque(5), Ok(&b"abcde"[..]));
        assert_eq!(r.array::<2>(), Ok([9, 9]));
        assert_eq!(r.remaining(), 0);
        assert_eq!(r.u32(), Err(XdrError::Short));
    }

    #[test]
    fn bounds_are_checked() {
        let buf = [0, 0, 0, 9, 1, 2, 3, 4];
        assert_eq!(XdrReader::new(&buf).opaque(8), Err(XdrError::TooLong { len: 9, max: 8 }));
        assert_eq!(XdrReader::new(&buf).opaque(100), Err(XdrError::Short));
        let huge = [0xff, 0xff, 0xff, 0xff];
        assert_eq!(XdrReader::new(&huge).opaque(u32::MAX), Err(XdrError::Short));
        assert_eq!(XdrReader::new(&huge).array_len(u32::MAX, 4), Err(XdrError::Short));
        assert_eq!(XdrReader::new(&[0, 0, 0, 2]).bool(), Err(XdrError::BadValue(2)));
        // Padding must be present too.
        assert_eq!(XdrReader::new(&[0, 0, 0, 1, 7]).opaque(4), Err(XdrError::Short));
    }
}
