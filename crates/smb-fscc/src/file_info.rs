//! QUERY_INFO encoders for file information classes (MS-FSCC 2.4,
//! MS-SMB2 3.3.5.20.1).

use crate::attrs::{FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_REPARSE_POINT};
use crate::class::*;
use crate::wire::{put_len_name, put_u16, put_u32, put_u64, put_u8, put_zeros, utf16le};
use crate::FsccError;

/// Everything needed to answer file information queries for one open
/// (MS-FSCC 2.4 query classes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileInfo {
    /// FILETIME (100 ns since 1601) the file was created.
    pub creation_time: u64,
    /// FILETIME of the last access.
    pub last_access_time: u64,
    /// FILETIME of the last data write.
    pub last_write_time: u64,
    /// FILETIME of the last data or metadata change.
    pub change_time: u64,
    /// FILE_ATTRIBUTE_* flags; encoders send FILE_ATTRIBUTE_NORMAL when 0.
    pub attributes: u32,
    /// Logical size in bytes.
    pub end_of_file: u64,
    /// Bytes allocated on disk.
    pub allocation_size: u64,
    /// IndexNumber: stable 64-bit file id.
    pub file_id: u64,
    /// Hard link count.
    pub number_of_links: u32,
    /// Whether delete-on-close is pending.
    pub delete_pending: bool,
    /// Whether the open is a directory.
    pub is_directory: bool,
    /// Size of the extended attributes (or reparse tag in directory
    /// entries of reparse points).
    pub ea_size: u32,
    /// Access mask granted to the open (FileAccessInformation).
    pub access_mask: u32,
    /// Current byte offset of the open (FilePositionInformation).
    pub current_offset: u64,
    /// FileModeInformation flags of the open.
    pub mode: u32,
    /// Buffer alignment requirement (FileAlignmentInformation), usually 0.
    pub alignment_requirement: u32,
    /// Path from the share root with a leading '\' (FileNameInformation,
    /// FileAllInformation, FileNormalizedNameInformation).
    pub name: String,
    /// Volume serial number (FileIdInformation).
    pub volume_serial: u32,
    /// Named streams (name, size, allocation size), listed by FileStreamInformation after
    /// the unnamed one.
    pub streams: Vec<(String, u64, u64)>,
}

impl FileInfo {
    /// Attributes as sent on the wire: FILE_ATTRIBUTE_NORMAL stands in for
    /// "no attributes" because 0 is not a valid answer (MS-FSCC 2.6).
    pub fn wire_attributes(&self) -> u32 {
        if self.attributes == 0 {
            FILE_ATTRIBUTE_NORMAL
        } else {
            self.attributes
        }
    }
}

/// Minimum OutputBufferLength for a file information query: the fixed part
/// of the structure (MS-SMB2 3.3.5.20.1 fails shorter buffers with
/// STATUS_INFO_LENGTH_MISMATCH). None for classes this crate does not encode.
pub fn file_info_min_size(class: u8) -> Option<usize> {
    Some(match class {
        FILE_BASIC_INFORMATION => 40,
        FILE_STANDARD_INFORMATION => 24,
        FILE_INTERNAL_INFORMATION => 8,
        FILE_EA_INFORMATION | FILE_ACCESS_INFORMATION => 4,
        FILE_NAME_INFORMATION | FILE_NORMALIZED_NAME_INFORMATION => 4,
        // Windows wants room for the length and at least two characters.
        FILE_ALTERNATE_NAME_INFORMATION => 8,
        FILE_POSITION_INFORMATION => 8,
        FILE_MODE_INFORMATION | FILE_ALIGNMENT_INFORMATION => 4,
        // The fixed sub-structures plus FileNameLength and the first
        // characters of the name, as Windows enforces.
        FILE_ALL_INFORMATION => 104,
        // One entry header plus the start of its name; an empty list
        // (directory) still needs none, but Windows rejects shorter buffers.
        FILE_STREAM_INFORMATION => 32,
        FILE_COMPRESSION_INFORMATION => 16,
        FILE_NETWORK_OPEN_INFORMATION => 56,
        FILE_ATTRIBUTE_TAG_INFORMATION => 8,
        FILE_ID_INFORMATION => 24,
        _ => return None,
    })
}

/// The four FILETIMEs every basic, network-open and directory entry starts with: creation,
/// last access, last write, change.
pub(crate) fn put_times(out: &mut Vec<u8>, i: &FileInfo) {
    put_u64(out, i.creation_time);
    put_u64(out, i.last_access_time);
    put_u64(out, i.last_write_time);
    put_u64(out, i.change_time);
}

/// MS-FSCC 2.4.7 FileBasicInformation: four times, attributes, reserved (40 bytes).
fn put_basic(out: &mut Vec<u8>, i: &FileInfo) {
    put_times(out, i);
    put_u32(out, i.wire_attributes());
    put_u32(out, 0);
}

/// MS-FSCC 2.4 FileStandardInformation (24 bytes).
fn put_standard(out: &mut Vec<u8>, i: &FileInfo) {
    put_u64(out, i.allocation_size);
    put_u64(out, i.end_of_file);
    put_u32(out, i.number_of_links);
    put_u8(out, u8::from(i.delete_pending));
    put_u8(out, u8::from(i.is_directory));
    put_u16(out, 0);
}

/// MS-SMB2 3.3.5.20.1: encode one file information class for `info` and
/// append it to `out`. Supported: FileBasicInformation 4,
/// FileStandardInformation 5, FileInternalInformation 6, FileEaInformation 7,
/// FileAccessInformation 8, FileNameInformation 9, FilePositionInformation 14,
/// FileModeInformation 16, FileAlignmentInformation 17, FileAllInformation 18,
/// FileStreamInformation 22, FileCompressionInformation 28,
/// FileNetworkOpenInformation 34, FileAttributeTagInformation 35,
/// FileNormalizedNameInformation 48, FileIdInformation 59.
/// FileAlternateNameInformation 21 yields [`FsccError::NoShortName`] for the
/// share root; other classes [`FsccError::InvalidClass`].
/// Nothing is appended on error. The caller truncates to OutputBufferLength.
pub fn encode_file_info(class: u8, info: &FileInfo, out: &mut Vec<u8>) -> Result<(), FsccError> {
    match class {
        FILE_BASIC_INFORMATION => put_basic(out, info),
        FILE_STANDARD_INFORMATION => put_standard(out, info),
        // MS-FSCC 2.4 FileInternalInformation: IndexNumber.
        FILE_INTERNAL_INFORMATION => put_u64(out, info.file_id),
        // MS-FSCC 2.4 FileEaInformation: EaSize.
        FILE_EA_INFORMATION => put_u32(out, info.ea_size),
        // MS-FSCC 2.4 FileAccessInformation: AccessFlags.
        FILE_ACCESS_INFORMATION => put_u32(out, info.access_mask),
        // MS-FSCC 2.4 FileNameInformation: the path with its leading '\'.
        FILE_NAME_INFORMATION => put_len_name(out, &utf16le(&info.name)),
        // MS-FSCC 2.4.30 FileNormalizedNameInformation: relative to the share
        // root, so the root itself has an empty name.
        FILE_NORMALIZED_NAME_INFORMATION => {
            let rel = info.name.strip_prefix('\\').unwrap_or(&info.name);
            put_len_name(out, &utf16le(rel))
        }
        // MS-FSCC 2.4 FilePositionInformation: CurrentByteOffset.
        FILE_POSITION_INFORMATION => put_u64(out, info.current_offset),
        // MS-FSCC 2.4 FileModeInformation: Mode.
        FILE_MODE_INFORMATION => put_u32(out, info.mode),
        // MS-FSCC 2.4 FileAlignmentInformation: AlignmentRequirement.
        FILE_ALIGNMENT_INFORMATION => put_u32(out, info.alignment_requirement),
        FILE_ALL_INFORMATION => put_all(out, info),
        // MS-FSCC 2.4.5 FileAlternateNameInformation: the 8.3 name of the
        // last component; the root has none.
        FILE_ALTERNATE_NAME_INFORMATION => {
            let last = info.name.rsplit('\\').next().unwrap_or("");
            let short = crate::short_name(last).ok_or(FsccError::NoShortName)?;
            put_len_name(out, &utf16le(&short))
        }
        FILE_STREAM_INFORMATION => put_stream(out, info),
        FILE_COMPRESSION_INFORMATION => put_compression(out, info),
        FILE_NETWORK_OPEN_INFORMATION => put_network_open(out, info),
        // MS-FSCC 2.4 FileAttributeTagInformation: the tag is only meaningful
        // for reparse points; ea_size carries it for those, as in directory
        // entries.
        FILE_ATTRIBUTE_TAG_INFORMATION => {
            put_u32(out, info.wire_attributes());
            let tag = if info.attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 { info.ea_size } else { 0 };
            put_u32(out, tag);
        }
        FILE_ID_INFORMATION => put_id(out, info),
        _ => return Err(FsccError::InvalidClass),
    }
    Ok(())
}

/// MS-FSCC 2.4.2 FileAllInformation: the nine sub-structures back to back.
fn put_all(out: &mut Vec<u8>, info: &FileInfo) {
    put_basic(out, info);
    put_standard(out, info);
    put_u64(out, info.file_id);
    put_u32(out, info.ea_size);
    put_u32(out, info.access_mask);
    put_u64(out, info.current_offset);
    put_u32(out, info.mode);
    put_u32(out, info.alignment_requirement);
    put_len_name(out, &utf16le(&info.name));
}

/// MS-FSCC 2.4.43 FileStreamInformation: the unnamed data stream (a directory has none),
/// then the named ones; entries 8-byte aligned and chained by NextEntryOffset.
fn put_stream(out: &mut Vec<u8>, info: &FileInfo) {
    let main = (!info.is_directory).then(|| (String::new(), info.end_of_file, info.allocation_size));
    let mut last: Option<usize> = None;
    for (name, size, alloc) in main.iter().chain(info.streams.iter()) {
        let start = out.len();
        if let Some(prev) = last {
            // Align this entry and point the previous one at it.
            let pad = (8 - (start - prev) % 8) % 8;
            put_zeros(out, pad);
            let next = (out.len() - prev) as u32;
            out[prev..prev + 4].copy_from_slice(&next.to_le_bytes());
        }
        last = Some(out.len());
        let name = utf16le(&crate::stream_display_name(name));
        put_u32(out, 0); // NextEntryOffset, patched by the next entry
        put_u32(out, name.len() as u32);
        put_u64(out, *size);
        put_u64(out, *alloc);
        out.extend_from_slice(&name);
    }
}

/// MS-FSCC 2.4 FileCompressionInformation: uncompressed, so the compressed size is the
/// logical size and the format is NONE.
fn put_compression(out: &mut Vec<u8>, info: &FileInfo) {
    put_u64(out, info.end_of_file);
    put_u16(out, 0); // COMPRESSION_FORMAT_NONE
    put_u8(out, 0); // CompressionUnitShift
    put_u8(out, 0); // ChunkShift
    put_u8(out, 0); // ClusterShift
    put_zeros(out, 3);
}

/// MS-FSCC 2.4 FileNetworkOpenInformation (56 bytes).
fn put_network_open(out: &mut Vec<u8>, info: &FileInfo) {
    put_times(out, info);
    put_u64(out, info.allocation_size);
    put_u64(out, info.end_of_file);
    put_u32(out, info.wire_attributes());
    put_u32(out, 0);
}

/// MS-FSCC 2.4 FileIdInformation: 64-bit VolumeSerialNumber and a 128-bit FileId (our
/// 64-bit id zero-extended).
fn put_id(out: &mut Vec<u8>, info: &FileInfo) {
    put_u64(out, u64::from(info.volume_serial));
    put_u64(out, info.file_id);
    put_u64(out, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FileInfo {
        FileInfo {
            creation_time: 0x0101_0101_0101_0101,
            last_access_time: 0x0202_0202_0202_0202,
            last_write_time: 0x0303_0303_0303_0303,
            change_time: 0x0404_0404_0404_0404,
            attributes: 0,
            end_of_file: 1000,
            allocation_size: 4096,
            file_id: 0x1122_3344_5566_7788,
            number_of_links: 1,
            delete_pending: true,
            is_directory: false,
            ea_size: 0,
            access_mask: 0x0012_019F,
            current_offset: 77,
            mode: 0x20,
            alignment_requirement: 0,
            name: "\\dir\\a.txt".into(),
            volume_serial: 0xCAFE_BABE,
            streams: Vec::new(),
        }
    }

    fn enc(class: u8, i: &FileInfo) -> Vec<u8> {
        let mut v = Vec::new();
        encode_file_info(class, i, &mut v).unwrap();
        v
    }

    fn u32_at(b: &[u8], o: usize) -> u32 {
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], o: usize) -> u64 {
        u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
    }

    #[test]
    fn basic_is_40_bytes_and_normal_when_zero() {
        let b = enc(FILE_BASIC_INFORMATION, &sample());
        assert_eq!(b.len(), 40);
        assert_eq!(u64_at(&b, 0), 0x0101_0101_0101_0101);
        assert_eq!(u64_at(&b, 24), 0x0404_0404_0404_0404);
        assert_eq!(u32_at(&b, 32), FILE_ATTRIBUTE_NORMAL);
        assert_eq!(u32_at(&b, 36), 0);
        let mut i = sample();
        i.attributes = 0x21;
        assert_eq!(u32_at(&enc(FILE_BASIC_INFORMATION, &i), 32), 0x21);
    }

    #[test]
    fn standard_layout() {
        let mut i = sample();
        i.is_directory = true;
        let b = enc(FILE_STANDARD_INFORMATION, &i);
        assert_eq!(
            b,
            [
                0, 0x10, 0, 0, 0, 0, 0, 0, // AllocationSize 4096
                0xE8, 3, 0, 0, 0, 0, 0, 0, // EndOfFile 1000
                1, 0, 0, 0, // NumberOfLinks
                1, 1, 0, 0, // DeletePending, Directory, Reserved
            ]
        );
    }

    #[test]
    fn small_fixed_classes() {
        let i = sample();
        assert_eq!(enc(FILE_INTERNAL_INFORMATION, &i), 0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(enc(FILE_EA_INFORMATION, &i), [0, 0, 0, 0]);
        assert_eq!(enc(FILE_ACCESS_INFORMATION, &i), 0x0012_019Fu32.to_le_bytes());
        assert_eq!(enc(FILE_POSITION_INFORMATION, &i), 77u64.to_le_bytes());
        assert_eq!(enc(FILE_MODE_INFORMATION, &i), 0x20u32.to_le_bytes());
        assert_eq!(enc(FILE_ALIGNMENT_INFORMATION, &i), [0, 0, 0, 0]);
        assert_eq!(enc(FILE_ATTRIBUTE_TAG_INFORMATION, &i), [0x80, 0, 0, 0, 0, 0, 0, 0]);
        let c = enc(FILE_COMPRESSION_INFORMATION, &i);
        assert_eq!(c.len(), 16);
        assert_eq!(u64_at(&c, 0), 1000);
        assert!(c[8..].iter().all(|&x| x == 0));
    }

    #[test]
    fn name_information() {
        let b = enc(FILE_NAME_INFORMATION, &sample());
        // "\dir\a.txt" is 10 UTF-16 units.
        assert_eq!(u32_at(&b, 0), 20);
        assert_eq!(b.len(), 24);
        assert_eq!(&b[4..8], &[b'\\', 0, b'd', 0]);
        // The normalized name has no leading separator.
        let n = enc(FILE_NORMALIZED_NAME_INFORMATION, &sample());
        assert_eq!(u32_at(&n, 0), 18);
        assert_eq!(&n[4..], &b[6..]);
    }

    #[test]
    fn all_information_is_100_plus_name() {
        let i = sample();
        let b = enc(FILE_ALL_INFORMATION, &i);
        assert_eq!(b.len(), 100 + 20);
        assert_eq!(&b[..40], &enc(FILE_BASIC_INFORMATION, &i)[..]);
        assert_eq!(&b[40..64], &enc(FILE_STANDARD_INFORMATION, &i)[..]);
        assert_eq!(u64_at(&b, 64), i.file_id);
        assert_eq!(u32_at(&b, 72), i.ea_size);
        assert_eq!(u32_at(&b, 76), i.access_mask);
        assert_eq!(u64_at(&b, 80), 77);
        assert_eq!(u32_at(&b, 88), 0x20);
        assert_eq!(u32_at(&b, 92), 0);
        assert_eq!(&b[96..], &enc(FILE_NAME_INFORMATION, &i)[..]);
    }

    #[test]
    fn network_open_is_56() {
        let b = enc(FILE_NETWORK_OPEN_INFORMATION, &sample());
        assert_eq!(b.len(), 56);
        assert_eq!(u64_at(&b, 32), 4096);
        assert_eq!(u64_at(&b, 40), 1000);
        assert_eq!(u32_at(&b, 48), FILE_ATTRIBUTE_NORMAL);
        assert_eq!(u32_at(&b, 52), 0);
    }

    #[test]
    fn stream_information() {
        let b = enc(FILE_STREAM_INFORMATION, &sample());
        assert_eq!(b.len(), 24 + 14);
        assert_eq!(u32_at(&b, 0), 0);
        assert_eq!(u32_at(&b, 4), 14);
        assert_eq!(u64_at(&b, 8), 1000);
        assert_eq!(u64_at(&b, 16), 4096);
        assert_eq!(&b[24..], &utf16le("::$DATA")[..]);
        let mut d = sample();
        d.is_directory = true;
        assert!(enc(FILE_STREAM_INFORMATION, &d).is_empty());
    }

    #[test]
    fn stream_information_lists_named_streams_aligned() {
        let mut i = sample();
        i.streams = vec![("Zone.Identifier".into(), 26, 4096), ("ab".into(), 0, 0)];
        let b = enc(FILE_STREAM_INFORMATION, &i);
        // ::$DATA: 24 + 14 bytes, padded to 40.
        assert_eq!(u32_at(&b, 0), 40);
        let zone = utf16le(":Zone.Identifier:$DATA");
        assert_eq!(u32_at(&b, 44), zone.len() as u32);
        assert_eq!(u64_at(&b, 48), 26);
        assert_eq!(&b[64..64 + zone.len()], &zone[..]);
        let third = 40 + u32_at(&b, 40) as usize;
        assert_eq!(third % 8, 0);
        assert_eq!(u32_at(&b, third), 0);
        assert_eq!(&b[third + 24..], &utf16le(":ab:$DATA")[..]);
        // A directory lists its named streams only.
        i.is_directory = true;
        let b = enc(FILE_STREAM_INFORMATION, &i);
        assert_eq!(&b[24..24 + zone.len()], &zone[..]);
    }

    #[test]
    fn id_information() {
        let b = enc(FILE_ID_INFORMATION, &sample());
        assert_eq!(b.len(), 24);
        assert_eq!(u64_at(&b, 0), 0xCAFE_BABE);
        assert_eq!(u64_at(&b, 8), 0x1122_3344_5566_7788);
        assert_eq!(u64_at(&b, 16), 0);
    }

    #[test]
    fn errors_and_min_sizes() {
        let mut v = vec![9];
        let root = FileInfo { name: "\\".into(), ..sample() };
        assert_eq!(encode_file_info(FILE_ALTERNATE_NAME_INFORMATION, &root, &mut v), Err(FsccError::NoShortName));
        let alt = enc(FILE_ALTERNATE_NAME_INFORMATION, &sample());
        assert_eq!(&alt[..4], &10u32.to_le_bytes());
        assert_eq!(enc(FILE_NORMALIZED_NAME_INFORMATION, &root), [0; 4]);
        assert_eq!(encode_file_info(200, &sample(), &mut v), Err(FsccError::InvalidClass));
        assert_eq!(encode_file_info(FILE_RENAME_INFORMATION, &sample(), &mut v), Err(FsccError::InvalidClass));
        assert_eq!(v, [9]);
        for c in 0..=255u8 {
            let mut out = Vec::new();
            match (encode_file_info(c, &sample(), &mut out), file_info_min_size(c)) {
                (Ok(()), Some(min)) => assert!(out.len() >= min, "class {c}"),
                (Ok(()), None) => panic!("class {c} encodes but has no min size"),
                (Err(_), _) => assert!(out.is_empty()),
            }
        }
    }
}
