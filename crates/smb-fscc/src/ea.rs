//! Extended attributes: FILE_FULL_EA_INFORMATION lists (MS-FSCC 2.4.15) as
//! sent in SET_INFO and the ExtA create context, and as returned by
//! QUERY_INFO; FILE_GET_EA_INFORMATION name lists (MS-FSCC 2.4.15.1).

use crate::wire::{put_u16, put_u32, put_u8, Reader};
use crate::FsccError;

/// Longest EA name, in bytes (the length field is one byte).
pub const MAX_EA_NAME_LEN: usize = 255;

/// One extended attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullEa {
    /// Flags (FILE_NEED_EA = 0x80); kept on the wire only.
    pub flags: u8,
    /// The name as sent (ASCII for any name [`valid_ea_name`] accepts).
    pub name: String,
    /// The value; empty means "delete" when setting.
    pub value: Vec<u8>,
}

/// Whether `name` is a legal EA name: 1 to 255 printable ASCII characters
/// other than those Windows reserves in EA names.
pub fn valid_ea_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_EA_NAME_LEN && name.bytes().all(|c| (0x20..0x7F).contains(&c) && !b"\"*+,/:;<=>?[\\]|".contains(&c))
}

/// Walks a chain of entries linked by a leading u32 NextEntryOffset (0 ends
/// it), each at least 4-byte aligned past the previous entry's `used` bytes.
fn walk<T>(buf: &[u8], mut entry: impl FnMut(&[u8]) -> Result<(T, usize), FsccError>) -> Result<Vec<T>, FsccError> {
    let bad = FsccError::InvalidParameter;
    if buf.is_empty() {
        return Err(FsccError::InfoLengthMismatch);
    }
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let e = buf.get(pos..).ok_or(bad)?;
        let next = Reader::new(e).u32().map_err(|_| bad)? as usize;
        let (item, used) = entry(e)?;
        out.push(item);
        if next == 0 {
            return Ok(out);
        }
        if next & 3 != 0 || next < used {
            return Err(bad);
        }
        // Entries take at least 8 bytes each, so `out` stays bounded by the
        // buffer size.
        pos = pos.checked_add(next).ok_or(bad)?;
    }
}

/// Parses a FILE_FULL_EA_INFORMATION chain: every entry in bounds, name
/// non-empty, NUL-terminated and UTF-8, offsets 4-byte aligned and advancing.
/// Name legality is left to [`valid_ea_name`] (it has its own status).
pub fn parse_full_ea_list(buf: &[u8]) -> Result<Vec<FullEa>, FsccError> {
    let bad = FsccError::InvalidParameter;
    walk(buf, |e| {
        let mut r = Reader::new(e);
        let _next = r.u32().map_err(|_| bad)?;
        let flags = r.u8().map_err(|_| bad)?;
        let name_len = usize::from(r.u8().map_err(|_| bad)?);
        let value_len = usize::from(r.u16().map_err(|_| bad)?);
        let name = r.bytes(name_len).map_err(|_| bad)?;
        let nul = r.u8().map_err(|_| bad)?;
        let value = r.bytes(value_len).map_err(|_| bad)?;
        if name_len == 0 || nul != 0 || name.contains(&0) {
            return Err(bad);
        }
        let name = std::str::from_utf8(name).map_err(|_| bad)?.to_owned();
        let ea = FullEa { flags, name, value: value.to_vec() };
        Ok((ea, 8 + name_len + 1 + value_len))
    })
}

/// Parses a FILE_GET_EA_INFORMATION chain (the names a QUERY_INFO asks for).
pub fn parse_get_ea_list(buf: &[u8]) -> Result<Vec<String>, FsccError> {
    let bad = FsccError::InvalidParameter;
    walk(buf, |e| {
        let mut r = Reader::new(e);
        let _next = r.u32().map_err(|_| bad)?;
        let name_len = usize::from(r.u8().map_err(|_| bad)?);
        let name = r.bytes(name_len).map_err(|_| bad)?;
        // The terminating NUL is optional in practice; names may not hold one.
        if name_len == 0 || name.contains(&0) {
            return Err(bad);
        }
        let name = std::str::from_utf8(name).map_err(|_| bad)?.to_owned();
        Ok((name, 5 + name_len))
    })
}

/// Bytes one entry takes in a list, padding to the next entry included.
fn entry_len(ea: &FullEa) -> usize {
    (8 + ea.name.len() + 1 + ea.value.len() + 3) & !3
}

/// Size of the FILE_FULL_EA_INFORMATION list of `eas`, as FileEaInformation's
/// EaSize reports it (0 without EAs).
pub fn full_ea_list_size(eas: &[FullEa]) -> u32 {
    let total: usize = eas.iter().map(entry_len).sum();
    u32::try_from(total).unwrap_or(u32::MAX)
}

/// Appends as many whole entries of `eas` as fit in `limit` bytes (the last
/// entry unpadded, as it has no successor); returns how many were written.
/// Names longer than 255 bytes or values over 65535 bytes are cut to fit
/// their length fields (callers store nothing larger).
pub fn encode_full_ea_list(eas: &[FullEa], limit: usize, out: &mut Vec<u8>) -> usize {
    let base = out.len();
    let mut prev: Option<usize> = None;
    let mut written = 0;
    for ea in eas {
        let name = &ea.name.as_bytes()[..ea.name.len().min(MAX_EA_NAME_LEN)];
        let value = &ea.value[..ea.value.len().min(usize::from(u16::MAX))];
        let start = match prev {
            // Pad the previous entry to 4 bytes, then link it to this one.
            Some(_) => (out.len() - base + 3) & !3,
            None => 0,
        };
        if start + 8 + name.len() + 1 + value.len() > limit {
            break;
        }
        out.resize(base + start, 0);
        if let Some(p) = prev {
            let off = u32::try_from(start - p).unwrap_or(0);
            out[base + p..base + p + 4].copy_from_slice(&off.to_le_bytes());
        }
        put_u32(out, 0); // NextEntryOffset, patched by the next entry
        put_u8(out, ea.flags);
        put_u8(out, name.len() as u8);
        put_u16(out, value.len() as u16);
        out.extend_from_slice(name);
        put_u8(out, 0);
        out.extend_from_slice(value);
        prev = Some(start);
        written += 1;
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ea(name: &str, value: &[u8]) -> FullEa {
        FullEa { flags: 0, name: name.into(), value: value.to_vec() }
    }

    #[test]
    fn round_trip() {
        let eas = vec![ea("EAONE", b"VALUE1"), ea("SECONDEA", b"ValueTwo"), ea("Z", b"")];
        let mut b = Vec::new();
        assert_eq!(encode_full_ea_list(&eas, usize::MAX, &mut b), 3);
        assert_eq!(parse_full_ea_list(&b).unwrap(), eas);
        // EAONE entry: 8 + 5 + 1 + 6 = 20, already aligned.
        assert_eq!(&b[..4], &[20, 0, 0, 0]);
        assert_eq!(full_ea_list_size(&eas), 20 + 28 + 12);
        // A limit that fits only the first entry.
        let mut small = Vec::new();
        assert_eq!(encode_full_ea_list(&eas, 25, &mut small), 1);
        assert_eq!(small.len(), 20);
        assert_eq!(&small[..4], &[0, 0, 0, 0]);
        assert_eq!(encode_full_ea_list(&eas, 10, &mut Vec::new()), 0);
    }

    #[test]
    fn malformed_lists() {
        let mut b = vec![12, 0, 0, 0, 0, 1, 2, 0, b'A', 0, b'x', b'y'];
        b.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 0, b'B', b'C', 0]);
        assert_eq!(parse_full_ea_list(&b).unwrap().len(), 2);
        for n in 1..b.len() {
            assert!(parse_full_ea_list(&b[..n]).is_err(), "len {n}");
        }
        let mut bad = b.clone();
        bad[0] = 200;
        assert!(parse_full_ea_list(&bad).is_err());
        bad[0] = 4;
        assert!(parse_full_ea_list(&bad).is_err());
        bad[0] = 13;
        assert!(parse_full_ea_list(&bad).is_err());
        assert_eq!(parse_full_ea_list(&[]), Err(FsccError::InfoLengthMismatch));
        for n in 0..40 {
            let _ = parse_full_ea_list(&vec![0xFF; n]);
            let _ = parse_get_ea_list(&vec![0x01; n]);
        }
    }

    #[test]
    fn get_list_and_names() {
        let b = [8, 0, 0, 0, 2, b'A', b'B', 0, 0, 0, 0, 0, 1, b'c', 0];
        assert_eq!(parse_get_ea_list(&b).unwrap(), ["AB", "c"]);
        assert!(valid_ea_name("NewEA"));
        assert!(valid_ea_name("user.x-y_1 z"));
        assert!(!valid_ea_name(""));
        assert!(!valid_ea_name("a*b"));
        assert!(!valid_ea_name("é"));
        assert!(!valid_ea_name(&"x".repeat(256)));
    }
}
