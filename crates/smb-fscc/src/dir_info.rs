//! QUERY_DIRECTORY entry lists (MS-FSCC 2.4 directory classes,
//! MS-SMB2 3.3.5.18).

use crate::attrs::FILE_ATTRIBUTE_REPARSE_POINT;
use crate::class::*;
use crate::wire::{patch_u32, put_u16, put_u32, put_u64, put_u8, put_zeros, utf16le};
use crate::{FileInfo, FsccError};

/// ShortNameLength (1 byte), a reserved byte and the 24-byte ShortName field of the BOTH
/// classes (MS-FSCC 2.4.8); empty for "." and "..".
fn put_short_name(out: &mut Vec<u8>, name: &str) {
    let short = crate::short_name(name).map(|s| utf16le(&s)).unwrap_or_default();
    // At most 12 characters by construction; never overrun the field.
    let n = short.len().min(24);
    put_u8(out, n as u8);
    put_u8(out, 0);
    out.extend_from_slice(&short[..n]);
    put_zeros(out, 24 - n);
}

/// What a macOS client that negotiated readdir attributes (the `AAPL` create context,
/// kAAPL_SUPPORTS_READ_DIR_ATTR) finds in a FileIdBothDirectoryInformation entry instead of
/// the EA size, short name and Reserved2 fields, so that Finder needs no request per file:
/// the fields below.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppleDirInfo {
    /// The access the caller has (in place of EaSize).
    pub max_access: u32,
    /// The resource fork's size (the first 8 bytes of ShortName).
    pub rfork_size: u64,
    /// The compressed Finder info: type, creator, flags, extended flags and the date added,
    /// as Samba's `vfs_fruit` packs them (the other 16 bytes of ShortName).
    pub finder_info: [u8; 16],
    /// The POSIX mode's low 16 bits (in Reserved2).
    pub unix_mode: u16,
}

/// Builds the OutputBuffer of a QUERY_DIRECTORY response: a chain of
/// entries of one class (MS-FSCC 2.4 FileDirectoryInformation 1,
/// FileFullDirectoryInformation 2, FileBothDirectoryInformation 3,
/// FileNamesInformation 12, FileIdBothDirectoryInformation 37,
/// FileIdFullDirectoryInformation 38, FileIdExtdDirectoryInformation 60).
/// Entries start on 8-byte boundaries; each NextEntryOffset points at the
/// following entry and the last one is 0. Short names come from [`crate::short_name`].
#[derive(Debug, Clone)]
pub struct DirWriter {
    class: u8,
    max_len: usize,
    buf: Vec<u8>,
    /// Start of the most recent entry, whose NextEntryOffset gets patched.
    last: Option<usize>,
    count: usize,
}

/// Size of the fixed part of one entry of `class` (before FileName).
fn fixed_len(class: u8) -> Option<usize> {
    Some(match class {
        FILE_DIRECTORY_INFORMATION => 64,
        FILE_FULL_DIRECTORY_INFORMATION => 68,
        FILE_BOTH_DIRECTORY_INFORMATION => 94,
        FILE_NAMES_INFORMATION => 12,
        FILE_ID_BOTH_DIRECTORY_INFORMATION => 104,
        FILE_ID_FULL_DIRECTORY_INFORMATION => 80,
        FILE_ID_EXTD_DIRECTORY_INFORMATION => 88,
        _ => return None,
    })
}

impl DirWriter {
    /// Starts an empty list of `class` entries no longer than `max_len`
    /// bytes (the request's OutputBufferLength). Unsupported classes give
    /// [`FsccError::InvalidClass`].
    pub fn new(class: u8, max_len: usize) -> Result<Self, FsccError> {
        fixed_len(class).ok_or(FsccError::InvalidClass)?;
        Ok(DirWriter { class, max_len, buf: Vec::new(), last: None, count: 0 })
    }

    /// Appends one entry for `name` (a plain file name such as "." or
    /// "a.txt"). Returns false and appends nothing if the entry, including
    /// alignment padding before it, would exceed `max_len`.
    pub fn push(&mut self, name: &str, info: &FileInfo) -> bool {
        self.push_with(name, info, None)
    }

    /// [`DirWriter::push`], with the Apple fields in place of the EA size, short name and
    /// Reserved2 when `apple` is given and the class is FileIdBothDirectoryInformation.
    pub fn push_with(&mut self, name: &str, info: &FileInfo, apple: Option<&AppleDirInfo>) -> bool {
        let fixed = match fixed_len(self.class) {
            Some(f) => f,
            None => return false,
        };
        let name16 = utf16le(name);
        let Ok(name_len) = u32::try_from(name16.len()) else {
            return false;
        };
        // Entries are 8-byte aligned; padding only goes between entries so
        // the buffer never ends in padding.
        let start = if self.last.is_some() { self.buf.len().next_multiple_of(8) } else { 0 };
        let end = match start.checked_add(fixed).and_then(|v| v.checked_add(name16.len())) {
            Some(e) if e <= self.max_len => e,
            _ => return false,
        };
        let Ok(next_off) = u32::try_from(start - self.last.unwrap_or(0)) else {
            return false;
        };
        if let Some(prev) = self.last {
            patch_u32(&mut self.buf, prev, next_off);
        }
        self.buf.resize(start, 0);
        self.write_entry(name, &name16, name_len, info, apple);
        debug_assert_eq!(self.buf.len(), end);
        self.last = Some(start);
        self.count += 1;
        true
    }

    fn write_entry(&mut self, name: &str, name16: &[u8], name_len: u32, i: &FileInfo, apple: Option<&AppleDirInfo>) {
        let out = &mut self.buf;
        put_u32(out, 0); // NextEntryOffset, patched when another entry follows
        put_u32(out, 0); // FileIndex: meaningless for NTFS-like stores
        if self.class == FILE_NAMES_INFORMATION {
            put_u32(out, name_len);
            out.extend_from_slice(name16);
            return;
        }
        crate::file_info::put_times(out, i);
        put_u64(out, i.end_of_file);
        put_u64(out, i.allocation_size);
        put_u32(out, i.wire_attributes());
        put_u32(out, name_len);
        match self.class {
            FILE_FULL_DIRECTORY_INFORMATION => put_u32(out, i.ea_size),
            FILE_BOTH_DIRECTORY_INFORMATION => {
                put_u32(out, i.ea_size);
                put_short_name(out, name); // ShortNameLength, Reserved, ShortName
            }
            FILE_ID_BOTH_DIRECTORY_INFORMATION if apple.is_some() => {
                let a = apple.copied().unwrap_or_default();
                put_u32(out, a.max_access);
                // A short name length of 24, as macOS clients send and expect.
                put_u8(out, 24);
                put_u8(out, 0);
                put_u64(out, a.rfork_size);
                out.extend_from_slice(&a.finder_info);
                put_u16(out, a.unix_mode); // Reserved2
                put_u64(out, i.file_id);
            }
            FILE_ID_BOTH_DIRECTORY_INFORMATION => {
                put_u32(out, i.ea_size);
                put_short_name(out, name); // ShortNameLength, Reserved1, ShortName
                put_u16(out, 0); // Reserved2
                put_u64(out, i.file_id);
            }
            FILE_ID_FULL_DIRECTORY_INFORMATION => {
                put_u32(out, i.ea_size);
                put_u32(out, 0); // Reserved
                put_u64(out, i.file_id);
            }
            FILE_ID_EXTD_DIRECTORY_INFORMATION => {
                put_u32(out, i.ea_size);
                // ReparsePointTag: ea_size carries the tag for reparse points.
                let tag = if i.attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 { i.ea_size } else { 0 };
                put_u32(out, tag);
                put_u64(out, i.file_id); // 128-bit FileId, zero-extended
                put_u64(out, 0);
            }
            _ => {} // FILE_DIRECTORY_INFORMATION: nothing more
        }
        out.extend_from_slice(name16);
    }

    /// True if no entry has been appended yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of entries appended so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Current encoded length in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// The finished OutputBuffer (no trailing padding).
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> FileInfo {
        FileInfo {
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            end_of_file: 5,
            allocation_size: 6,
            attributes: 0,
            file_id: 0xABCD,
            ea_size: 0,
            ..FileInfo::default()
        }
    }

    fn u32_at(b: &[u8], o: usize) -> u32 {
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
    }

    #[test]
    fn fixed_sizes_per_class() {
        for (class, fixed) in [(1u8, 64usize), (2, 68), (3, 94), (12, 12), (37, 104), (38, 80), (60, 88)] {
            let mut w = DirWriter::new(class, 65536).unwrap();
            assert!(w.is_empty());
            assert!(w.push("ab", &info()));
            let b = w.finish();
            assert_eq!(b.len(), fixed + 4, "class {class}");
            assert_eq!(u32_at(&b, 0), 0);
            // FileNameLength sits right before the name for Names/Directory,
            // and at offset 60 for every class with the common header.
            let name_len_off = if class == 12 { 8 } else { 60 };
            assert_eq!(u32_at(&b, name_len_off), 4);
            assert_eq!(&b[fixed..], &[b'a', 0, b'b', 0]);
        }
    }

    #[test]
    fn apple_fields_replace_ea_size_short_name_and_reserved2() {
        let a = AppleDirInfo { max_access: 0x1F01FF, rfork_size: 1 << 20, finder_info: [7; 16], unix_mode: 0o644 };
        let mut w = DirWriter::new(FILE_ID_BOTH_DIRECTORY_INFORMATION, 4096).unwrap();
        assert!(w.push_with("x", &info(), Some(&a)));
        let b = w.finish();
        assert_eq!(b.len(), 104 + 2);
        assert_eq!(u32_at(&b, 64), 0x1F01FF);
        assert_eq!(b[68], 24);
        assert_eq!(&b[70..78], &(1u64 << 20).to_le_bytes());
        assert_eq!(&b[78..94], &[7; 16]);
        assert_eq!(&b[94..96], &0o644u16.to_le_bytes());
        assert_eq!(&b[96..104], &0xABCDu64.to_le_bytes());
        // Other classes ignore them.
        let mut w = DirWriter::new(FILE_FULL_DIRECTORY_INFORMATION, 4096).unwrap();
        assert!(w.push_with("x", &info(), Some(&a)));
        assert_eq!(u32_at(&w.finish(), 64), 0);
    }

    #[test]
    fn id_both_layout() {
        let mut w = DirWriter::new(FILE_ID_BOTH_DIRECTORY_INFORMATION, 4096).unwrap();
        assert!(w.push("x", &info()));
        let b = w.finish();
        assert_eq!(&b[8..16], &1u64.to_le_bytes());
        assert_eq!(&b[40..48], &5u64.to_le_bytes()); // EndOfFile
        assert_eq!(&b[48..56], &6u64.to_le_bytes()); // AllocationSize
        assert_eq!(u32_at(&b, 56), 0x80); // FILE_ATTRIBUTE_NORMAL
        assert_eq!(u32_at(&b, 64), 0); // EaSize
        assert_eq!(b[68], 2); // ShortNameLength: "X"
        assert_eq!(&b[70..72], &[b'X', 0]);
        assert_eq!(&b[96..104], &0xABCDu64.to_le_bytes()); // FileId
        assert_eq!(&b[104..], &[b'x', 0]);
        let mut w = DirWriter::new(FILE_ID_FULL_DIRECTORY_INFORMATION, 4096).unwrap();
        assert!(w.push("x", &info()));
        let b = w.finish();
        assert_eq!(&b[72..80], &0xABCDu64.to_le_bytes());
        let mut w = DirWriter::new(FILE_ID_EXTD_DIRECTORY_INFORMATION, 4096).unwrap();
        assert!(w.push("x", &info()));
        let b = w.finish();
        assert_eq!(&b[72..80], &0xABCDu64.to_le_bytes());
        assert_eq!(&b[80..88], &[0; 8]);
    }

    #[test]
    fn chaining_and_alignment() {
        let mut w = DirWriter::new(FILE_DIRECTORY_INFORMATION, 65536).unwrap();
        assert!(w.push(".", &info())); // 66 bytes
        assert!(w.push("..", &info())); // starts at 72, 68 bytes
        assert!(w.push("abc", &info())); // starts at 144, 70 bytes
        assert_eq!(w.count(), 3);
        let b = w.finish();
        assert_eq!(b.len(), 144 + 70);
        assert_eq!(u32_at(&b, 0), 72);
        assert_eq!(u32_at(&b, 72), 72);
        assert_eq!(u32_at(&b, 144), 0);
        assert!(b[66..72].iter().all(|&x| x == 0));
        assert_eq!(&b[72 + 64..72 + 68], &[b'.', 0, b'.', 0]);
    }

    #[test]
    fn max_len_cutoff() {
        // First entry is 66 bytes, the second needs 72 + 66 = 138.
        let mut w = DirWriter::new(FILE_DIRECTORY_INFORMATION, 137).unwrap();
        assert!(w.push(".", &info()));
        assert!(!w.push(".", &info()));
        assert_eq!(w.len(), 66);
        let b = w.finish();
        assert_eq!(u32_at(&b, 0), 0); // untouched by the failed push
        let mut w = DirWriter::new(FILE_DIRECTORY_INFORMATION, 138).unwrap();
        assert!(w.push(".", &info()));
        assert!(w.push(".", &info()));
        assert_eq!(w.finish().len(), 138);
        let mut w = DirWriter::new(FILE_NAMES_INFORMATION, 13).unwrap();
        assert!(!w.push("ab", &info()));
        assert!(w.is_empty());
        assert!(w.finish().is_empty());
    }

    #[test]
    fn invalid_class() {
        assert_eq!(DirWriter::new(4, 100).err(), Some(FsccError::InvalidClass));
        assert_eq!(DirWriter::new(50, 100).err(), Some(FsccError::InvalidClass));
    }
}
