//! Minimal NDR 2.0 little-endian marshalling (C706 chapter 14) for the few
//! shapes srvsvc/wkssvc use: u32, unique/ref pointers, and conformant-varying
//! UTF-16 strings. Alignment is relative to the start of the stub, which the
//! PDU layer always places on an 8-byte boundary.

/// Stub data could not be unmarshalled; answered with `nca_s_fault_ndr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdrError;

/// Upper bound on a string we accept from the wire, in UTF-16 code units.
/// Share/server names are tiny; this only stops absurd allocations.
const MAX_WSTRING: u32 = 4096;

/// Bounds-checked NDR reader.
pub struct NdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> NdrReader<'a> {
    /// Reader over a complete (reassembled) stub.
    pub fn new(buf: &'a [u8]) -> Self {
        NdrReader { buf, pos: 0 }
    }

    fn align(&mut self, n: usize) -> Result<(), NdrError> {
        let pad = (n - self.pos % n) % n;
        self.take(pad).map(|_| ())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], NdrError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(NdrError)?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// Reads an aligned `unsigned long` (C706 §14.2.5).
    pub fn u32(&mut self) -> Result<u32, NdrError> {
        self.align(4)?;
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a unique/full pointer's referent id; `true` when non-NULL
    /// (C706 §14.3.10).
    pub fn ptr(&mut self) -> Result<bool, NdrError> {
        Ok(self.u32()? != 0)
    }

    /// Reads a conformant-varying `[string] wchar_t*` body (C706 §14.3.4.2):
    /// max_count, offset, actual_count, then UTF-16LE units. The terminating
    /// NUL (if any) is stripped; invalid UTF-16 is replaced, not rejected.
    pub fn wstring(&mut self) -> Result<String, NdrError> {
        let max = self.u32()?;
        let offset = self.u32()?;
        let actual = self.u32()?;
        if max > MAX_WSTRING || offset > max || actual > max - offset {
            return Err(NdrError);
        }
        // actual <= MAX_WSTRING, so this cannot overflow; take() bounds-checks
        // against the real stub before anything is allocated.
        let raw = self.take(actual as usize * 2)?;
        let mut units: Vec<u16> = raw.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        if units.last() == Some(&0) {
            units.pop();
        }
        Ok(String::from_utf16_lossy(&units))
    }

    /// Reads a `[unique, string] wchar_t*` (pointer then deferred string).
    pub fn unique_wstring(&mut self) -> Result<Option<String>, NdrError> {
        if self.ptr()? {
            Ok(Some(self.wstring()?))
        } else {
            Ok(None)
        }
    }
}

/// NDR writer. Handlers write fixed parts first and deferred pointees later,
/// in the order C706 §14.3.12.3 prescribes; this type only supplies the
/// primitives and unique referent ids.
pub struct NdrWriter {
    buf: Vec<u8>,
    next_ref: u32,
}

impl Default for NdrWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl NdrWriter {
    /// Empty writer; referent ids start at 0x00020000 like Windows' stubs.
    pub fn new() -> Self {
        NdrWriter { buf: Vec::new(), next_ref: 0x0002_0000 }
    }

    fn align(&mut self, n: usize) {
        let pad = (n - self.buf.len() % n) % n;
        self.buf.resize(self.buf.len() + pad, 0);
    }

    /// Writes an aligned `unsigned long`.
    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a unique pointer: a fresh non-zero referent id, or 0 for NULL
    /// (C706 §14.3.10.1).
    pub fn ptr(&mut self, present: bool) {
        if present {
            let r = self.next_ref;
            self.next_ref = self.next_ref.wrapping_add(4);
            self.u32(r);
        } else {
            self.u32(0);
        }
    }

    /// Writes a conformant-varying NUL-terminated UTF-16LE string body.
    pub fn wstring(&mut self, s: &str) {
        let units: Vec<u16> = s.encode_utf16().chain(std::iter::once(0)).collect();
        // Strings come from local configuration; saturate instead of panicking.
        let n = u32::try_from(units.len()).unwrap_or(u32::MAX);
        self.u32(n); // max_count
        self.u32(0); // offset
        self.u32(n); // actual_count
        for u in units {
            self.buf.extend_from_slice(&u.to_le_bytes());
        }
    }

    /// Finished stub bytes. Trailing data is already 4-aligned by the last u32.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_roundtrip_and_alignment() {
        let mut w = NdrWriter::new();
        w.ptr(true);
        w.wstring("ab");
        w.u32(7);
        let b = w.into_bytes();
        // 4 ref + 12 hdr + 6 chars + 2 pad + 4
        assert_eq!(b.len(), 28);
        let mut r = NdrReader::new(&b);
        assert_eq!(r.unique_wstring().unwrap().as_deref(), Some("ab"));
        assert_eq!(r.u32().unwrap(), 7);
    }

    #[test]
    fn rejects_bad_counts() {
        // actual_count larger than max_count.
        let mut b = Vec::new();
        for v in [2u32, 0, 3] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(NdrReader::new(&b).wstring(), Err(NdrError));
        // Huge max_count with no data must not allocate.
        let mut b = Vec::new();
        for v in [u32::MAX, 0, u32::MAX] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(NdrReader::new(&b).wstring(), Err(NdrError));
        // Truncated character data.
        let mut b = Vec::new();
        for v in [100u32, 0, 100] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(NdrReader::new(&b).wstring(), Err(NdrError));
    }
}
