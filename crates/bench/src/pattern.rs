//! The `--verify` data pattern. Every 16-byte unit of a file holds its own absolute offset
//! (u64), the file number (u32) and the write generation (u32), little-endian, scrambled by
//! a fixed XOR mask so the data is not mostly zeros. A misplaced, stale or foreign block
//! therefore decodes to where it really came from, which makes mismatch reports useful.

use std::fmt;

const MASK: [u8; 16] = *b"braid-bench-v1\xa5\x5a";
const UNIT: u64 = 16;

fn unit(abs: u64, file: u32, gen: u32) -> [u8; 16] {
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&abs.to_le_bytes());
    u[8..12].copy_from_slice(&file.to_le_bytes());
    u[12..].copy_from_slice(&gen.to_le_bytes());
    for (b, m) in u.iter_mut().zip(MASK) {
        *b ^= m;
    }
    u
}

/// Fills `buf`, which lands at byte `offset` of file `file`, with generation `gen`.
pub fn fill(buf: &mut [u8], file: u32, offset: u64, gen: u32) {
    let mut abs = offset;
    let mut i = 0;
    while i < buf.len() {
        let base = abs - abs % UNIT;
        let u = unit(base, file, gen);
        let from = (abs - base) as usize;
        let n = (16 - from).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&u[from..from + n]);
        i += n;
        abs += n as u64;
    }
}

/// The first differing byte found by [`check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// File number.
    pub file: u32,
    /// Absolute byte offset in the file of the first bad byte.
    pub offset: u64,
    /// Expected generation.
    pub gen: u32,
    /// Expected byte.
    pub expected: u8,
    /// Byte read back (None when the read returned fewer bytes).
    pub got: Option<u8>,
    /// Bytes that differ in the checked range.
    pub bad_bytes: u64,
    /// What the 16-byte unit holding the bad byte decodes to: (offset, file, generation),
    /// when the read returned the whole unit.
    pub decoded: Option<(u64, u32, u32)>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "verify failed: file {} offset {}: expected 0x{:02x} (generation {})", self.file, self.offset, self.expected, self.gen)?;
        match self.got {
            Some(g) => write!(f, ", read 0x{g:02x}")?,
            None => write!(f, ", read returned too few bytes")?,
        }
        write!(f, "; {} byte(s) differ", self.bad_bytes)?;
        if let Some((o, fi, g)) = self.decoded {
            write!(f, "; the data there looks like file {fi} offset {o} generation {g}")?;
        }
        Ok(())
    }
}

/// Checks that `data`, read from byte `offset` of file `file`, is generation `gen` and
/// `want` bytes long.
pub fn check(data: &[u8], want: usize, file: u32, offset: u64, gen: u32) -> Result<(), Box<Mismatch>> {
    let mut expect = vec![0u8; want];
    fill(&mut expect, file, offset, gen);
    let short = data.len() < want;
    let mut first = None;
    let mut bad = (want.saturating_sub(data.len())) as u64;
    for (i, (a, b)) in expect.iter().zip(data).enumerate() {
        if a != b {
            bad += 1;
            first.get_or_insert(i);
        }
    }
    let first = match (first, short) {
        (Some(i), _) => i,
        (None, true) => data.len(),
        (None, false) => return Ok(()),
    };
    let abs = offset + first as u64;
    let base = abs - abs % UNIT;
    let decoded = if base >= offset && (base - offset + UNIT) as usize <= data.len() {
        let s = (base - offset) as usize;
        let mut u = [0u8; 16];
        for (k, b) in u.iter_mut().enumerate() {
            *b = data[s + k] ^ MASK[k];
        }
        Some((
            u64::from_le_bytes(u[..8].try_into().unwrap_or_default()),
            u32::from_le_bytes([u[8], u[9], u[10], u[11]]),
            u32::from_le_bytes([u[12], u[13], u[14], u[15]]),
        ))
    } else {
        None
    };
    Err(Box::new(Mismatch { file, offset: abs, gen, expected: expect[first], got: data.get(first).copied(), bad_bytes: bad, decoded }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_unaligned_pieces() {
        let mut whole = vec![0u8; 4096];
        fill(&mut whole, 3, 8192, 7);
        assert!(check(&whole, 4096, 3, 8192, 7).is_ok());
        // A piece starting mid-unit equals the matching slice of the whole.
        let mut piece = vec![0u8; 1000];
        fill(&mut piece, 3, 8192 + 37, 7);
        assert_eq!(&piece[..], &whole[37..1037]);
        // Not just a constant: units differ.
        assert_ne!(&whole[..16], &whole[16..32]);
    }

    #[test]
    fn detects_and_explains() {
        let mut data = vec![0u8; 4096];
        fill(&mut data, 1, 4096, 2);
        // Stale generation: every unit differs, decoded as generation 1.
        let mut stale = vec![0u8; 4096];
        fill(&mut stale, 1, 4096, 1);
        let m = check(&stale, 4096, 1, 4096, 2).unwrap_err();
        assert_eq!(m.decoded, Some((4096, 1, 1)));
        assert_eq!(m.offset, 4096 + 12);
        // One flipped byte.
        let mut one = data.clone();
        one[100] ^= 0xff;
        let m = check(&one, 4096, 1, 4096, 2).unwrap_err();
        assert_eq!(m.offset, 4196);
        assert_eq!(m.bad_bytes, 1);
        assert_eq!(m.got, Some(data[100] ^ 0xff));
        let text = m.to_string();
        assert!(text.contains("file 1 offset 4196") && text.contains("generation 2"), "{text}");
        // Wrong place: data of offset 0.
        let mut moved = vec![0u8; 4096];
        fill(&mut moved, 1, 0, 2);
        assert_eq!(check(&moved, 4096, 1, 4096, 2).unwrap_err().decoded, Some((0, 1, 2)));
        // Short read.
        let m = check(&data[..4000], 4096, 1, 4096, 2).unwrap_err();
        assert_eq!((m.offset, m.got, m.bad_bytes), (4096 + 4000, None, 96));
    }
}
