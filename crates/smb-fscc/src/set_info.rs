//! SET_INFO input buffers for file information classes (MS-SMB2 3.3.5.21.1,
//! MS-FSCC 2.4, validation per MS-FSA 2.1.5.15).

use crate::attrs::{
    FILE_RENAME_REPLACE_IF_EXISTS, FILE_SEQUENTIAL_ONLY, FILE_SYNCHRONOUS_IO_ALERT, FILE_SYNCHRONOUS_IO_NONALERT, FILE_WRITE_THROUGH,
};
use crate::class::*;
use crate::wire::{from_utf16le, Reader};
use crate::FsccError;

/// One decoded SET_INFO request body (InfoType SMB2_0_INFO_FILE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetInfo {
    /// MS-FSCC 2.4.7 FileBasicInformation (class 4). Times are raw FILETIMEs:
    /// 0 = leave unchanged, u64::MAX (-1) = stop automatic updates for this
    /// handle (treat like 0 if unsupported), u64::MAX - 1 (-2) = resume them.
    /// Attributes 0 = leave unchanged.
    Basic {
        /// CreationTime
        creation_time: u64,
        /// LastAccessTime
        last_access_time: u64,
        /// LastWriteTime
        last_write_time: u64,
        /// ChangeTime
        change_time: u64,
        /// FileAttributes
        attributes: u32,
    },
    /// MS-FSCC 2.4 FileRenameInformation (class 10, SMB2 TYPE_2 layout) or
    /// FileRenameInformationEx (class 65, where only
    /// FILE_RENAME_REPLACE_IF_EXISTS is kept).
    Rename {
        /// ReplaceIfExists
        replace_if_exists: bool,
        /// RootDirectory; MS-FSCC requires 0 over the network.
        root_directory: u64,
        /// Target path, relative to the share root.
        file_name: String,
    },
    /// MS-FSCC 2.4 FileLinkInformation (class 11): create a hard link.
    Link {
        /// ReplaceIfExists
        replace_if_exists: bool,
        /// New link path, relative to the share root.
        file_name: String,
    },
    /// MS-FSCC 2.4 FileDispositionInformation (class 13).
    Disposition {
        /// DeletePending
        delete_pending: bool,
    },
    /// MS-FSCC 2.4 FileDispositionInformationEx (class 64):
    /// FILE_DISPOSITION_* flags.
    DispositionEx {
        /// Flags
        flags: u32,
    },
    /// MS-FSCC 2.4 FilePositionInformation (class 14).
    Position {
        /// CurrentByteOffset (validated non-negative)
        current_byte_offset: u64,
    },
    /// MS-FSCC 2.4 FileModeInformation (class 16), flags validated per
    /// MS-FSA 2.1.5.15.7 (only the settable ones, not both SYNCHRONOUS_IO
    /// flags). The server still compares the SYNCHRONOUS_IO flags with the
    /// open's mode.
    Mode {
        /// Mode
        mode: u32,
    },
    /// MS-FSCC 2.4 FileAllocationInformation (class 19).
    Allocation {
        /// AllocationSize (validated non-negative)
        allocation_size: u64,
    },
    /// MS-FSCC 2.4 FileEndOfFileInformation (class 20).
    EndOfFile {
        /// EndOfFile (validated non-negative)
        end_of_file: u64,
    },
    /// MS-FSCC 2.4 FileFullEaInformation (class 15): the structurally
    /// validated entries (names not yet checked, see [`crate::valid_ea_name`]).
    FullEa {
        /// The entries, in request order.
        eas: Vec<crate::FullEa>,
    },
    /// MS-FSCC 2.4 FileValidDataLengthInformation (class 39).
    ValidDataLength {
        /// ValidDataLength (validated non-negative)
        valid_data_length: u64,
    },
}

/// Fails with InvalidParameter on values that are negative as i64; sizes
/// and offsets are signed on the wire (MS-FSA 2.1.5.15).
fn non_negative(v: u64) -> Result<u64, FsccError> {
    if v > i64::MAX as u64 {
        Err(FsccError::InvalidParameter)
    } else {
        Ok(v)
    }
}

/// MS-FSA 2.1.5.15.2: times below -2 are invalid.
fn basic_time(v: u64) -> Result<u64, FsccError> {
    if (v as i64) < -2 {
        Err(FsccError::InvalidParameter)
    } else {
        Ok(v)
    }
}

/// Shared body of FileRenameInformation(Ex) / FileLinkInformation(Ex) in
/// the SMB2 TYPE_2 layout: 4-byte flags-or-ReplaceIfExists word, 4 reserved,
/// RootDirectory u64, FileNameLength u32, FileName. Returns (first word,
/// root, name).
fn parse_rename_like(buf: &[u8], ex: bool) -> Result<(u32, u64, String), FsccError> {
    let mut r = Reader::new(buf);
    let word = r.u32()?;
    let _reserved = r.u32()?;
    let root = r.u64()?;
    let name_len = r.u32()? as usize;
    // Classic form: ReplaceIfExists is one byte and the next 7 are
    // reserved, whatever the client left in them.
    let flags = if ex { word } else { word & 0xff };
    // A name longer than what was sent, an odd byte count or an empty name
    // are parameter errors, not length mismatches (MS-FSCC 2.4
    // FileRenameInformation error table).
    if name_len == 0 || name_len & 1 != 0 || name_len > r.remaining() {
        return Err(FsccError::InvalidParameter);
    }
    let name = from_utf16le(r.bytes(name_len)?)?;
    Ok((flags, root, name))
}

/// MS-SMB2 3.3.5.21.1: decode a SET_INFO buffer of file information `class`.
/// Buffers shorter than the fixed structure give
/// [`FsccError::InfoLengthMismatch`]; out-of-range values
/// [`FsccError::InvalidParameter`]; valid set classes this crate does not
/// decode [`FsccError::NotSupported`]; anything else
/// [`FsccError::InvalidClass`]. Trailing bytes are ignored (MS-FSA only
/// checks for too-short buffers).
pub fn parse_set_info(class: u8, buf: &[u8]) -> Result<SetInfo, FsccError> {
    let mut r = Reader::new(buf);
    Ok(match class {
        FILE_BASIC_INFORMATION => {
            if buf.len() < 40 {
                return Err(FsccError::InfoLengthMismatch);
            }
            SetInfo::Basic {
                creation_time: basic_time(r.u64()?)?,
                last_access_time: basic_time(r.u64()?)?,
                last_write_time: basic_time(r.u64()?)?,
                change_time: basic_time(r.u64()?)?,
                attributes: r.u32()?,
            }
        }
        FILE_RENAME_INFORMATION | FILE_RENAME_INFORMATION_EX => {
            let ex = class == FILE_RENAME_INFORMATION_EX;
            let (flags, root_directory, file_name) = parse_rename_like(buf, ex)?;
            SetInfo::Rename { replace_if_exists: flags & FILE_RENAME_REPLACE_IF_EXISTS != 0, root_directory, file_name }
        }
        FILE_LINK_INFORMATION | FILE_LINK_INFORMATION_EX => {
            let ex = class == FILE_LINK_INFORMATION_EX;
            let (flags, _root, file_name) = parse_rename_like(buf, ex)?;
            SetInfo::Link {
                // FILE_LINK_REPLACE_IF_EXISTS shares bit 0 with the rename flag.
                replace_if_exists: flags & 1 != 0,
                file_name,
            }
        }
        FILE_DISPOSITION_INFORMATION => SetInfo::Disposition { delete_pending: r.u8()? != 0 },
        FILE_DISPOSITION_INFORMATION_EX => SetInfo::DispositionEx { flags: r.u32()? },
        FILE_POSITION_INFORMATION => SetInfo::Position { current_byte_offset: non_negative(r.u64()?)? },
        FILE_MODE_INFORMATION => {
            let mode = r.u32()?;
            let settable = FILE_WRITE_THROUGH | FILE_SEQUENTIAL_ONLY | FILE_SYNCHRONOUS_IO_ALERT | FILE_SYNCHRONOUS_IO_NONALERT;
            let both_sync = FILE_SYNCHRONOUS_IO_ALERT | FILE_SYNCHRONOUS_IO_NONALERT;
            if mode & !settable != 0 || mode & both_sync == both_sync {
                return Err(FsccError::InvalidParameter);
            }
            SetInfo::Mode { mode }
        }
        FILE_ALLOCATION_INFORMATION => SetInfo::Allocation { allocation_size: non_negative(r.u64()?)? },
        FILE_END_OF_FILE_INFORMATION => SetInfo::EndOfFile { end_of_file: non_negative(r.u64()?)? },
        FILE_FULL_EA_INFORMATION => SetInfo::FullEa { eas: crate::parse_full_ea_list(buf)? },
        FILE_VALID_DATA_LENGTH_INFORMATION => SetInfo::ValidDataLength { valid_data_length: non_negative(r.u64()?)? },
        FILE_PIPE_INFORMATION
        | FILE_OBJECT_ID_INFORMATION
        | FILE_QUOTA_INFORMATION
        | FILE_TRACKING_INFORMATION
        | FILE_SHORT_NAME_INFORMATION
        | FILE_SFIO_RESERVE_INFORMATION
        | FILE_CASE_SENSITIVE_INFORMATION => return Err(FsccError::NotSupported),
        _ => return Err(FsccError::InvalidClass),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::utf16le;

    fn rename_buf(first: &[u8], name: &str, name_len: Option<u32>) -> Vec<u8> {
        let n = utf16le(name);
        let mut b = vec![0u8; 8];
        b[..first.len()].copy_from_slice(first);
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&name_len.unwrap_or(n.len() as u32).to_le_bytes());
        b.extend_from_slice(&n);
        b
    }

    #[test]
    fn basic() {
        let mut b = Vec::new();
        for t in [0u64, 5, u64::MAX, u64::MAX - 1] {
            b.extend_from_slice(&t.to_le_bytes());
        }
        b.extend_from_slice(&0x20u32.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        assert_eq!(
            parse_set_info(4, &b),
            Ok(SetInfo::Basic { creation_time: 0, last_access_time: 5, last_write_time: u64::MAX, change_time: u64::MAX - 1, attributes: 0x20 })
        );
        assert_eq!(parse_set_info(4, &b[..36]), Err(FsccError::InfoLengthMismatch));
        b[0..8].copy_from_slice(&(-3i64).to_le_bytes());
        assert_eq!(parse_set_info(4, &b), Err(FsccError::InvalidParameter));
    }

    #[test]
    fn rename() {
        let b = rename_buf(&[1, 0xAA], "dir\\new.txt", None);
        assert_eq!(b.len(), 20 + 22);
        assert_eq!(parse_set_info(10, &b), Ok(SetInfo::Rename { replace_if_exists: true, root_directory: 0, file_name: "dir\\new.txt".into() }));
        // Reserved bytes set in the classic form do not count as flags.
        let b = rename_buf(&[0, 1, 1, 1], "x", None);
        assert!(matches!(parse_set_info(10, &b), Ok(SetInfo::Rename { replace_if_exists: false, .. })));
        // Ex form: flags word.
        let b = rename_buf(&3u32.to_le_bytes(), "x", None);
        assert!(matches!(parse_set_info(65, &b), Ok(SetInfo::Rename { replace_if_exists: true, .. })));
        let b = rename_buf(&2u32.to_le_bytes(), "x", None);
        assert!(matches!(parse_set_info(65, &b), Ok(SetInfo::Rename { replace_if_exists: false, .. })));
    }

    #[test]
    fn rename_bad_lengths() {
        let b = rename_buf(&[0], "abc", None);
        for cut in 0..20 {
            assert_eq!(parse_set_info(10, &b[..cut]), Err(FsccError::InfoLengthMismatch));
        }
        // Name length beyond the buffer, huge, odd, zero.
        for len in [8u32, u32::MAX, 0xFFFF_FFFE, 5, 0] {
            let b = rename_buf(&[0], "abc", Some(len));
            assert_eq!(parse_set_info(10, &b), Err(FsccError::InvalidParameter), "{len}");
        }
        // Unpaired surrogate.
        let mut b = rename_buf(&[0], "ab", None);
        b[20..22].copy_from_slice(&0xD800u16.to_le_bytes());
        assert_eq!(parse_set_info(10, &b), Err(FsccError::InvalidParameter));
    }

    #[test]
    fn link() {
        let b = rename_buf(&[1], "l", None);
        assert_eq!(parse_set_info(11, &b), Ok(SetInfo::Link { replace_if_exists: true, file_name: "l".into() }));
    }

    #[test]
    fn small_classes() {
        assert_eq!(parse_set_info(13, &[1]), Ok(SetInfo::Disposition { delete_pending: true }));
        assert_eq!(parse_set_info(13, &[]), Err(FsccError::InfoLengthMismatch));
        assert_eq!(parse_set_info(64, &[3, 0, 0, 0]), Ok(SetInfo::DispositionEx { flags: 3 }));
        assert_eq!(parse_set_info(64, &[3, 0, 0]), Err(FsccError::InfoLengthMismatch));
        let eight = 4096u64.to_le_bytes();
        assert_eq!(parse_set_info(14, &eight), Ok(SetInfo::Position { current_byte_offset: 4096 }));
        assert_eq!(parse_set_info(19, &eight), Ok(SetInfo::Allocation { allocation_size: 4096 }));
        assert_eq!(parse_set_info(20, &eight), Ok(SetInfo::EndOfFile { end_of_file: 4096 }));
        assert_eq!(parse_set_info(39, &eight), Ok(SetInfo::ValidDataLength { valid_data_length: 4096 }));
        let neg = (-1i64).to_le_bytes();
        for c in [14u8, 19, 20, 39] {
            assert_eq!(parse_set_info(c, &eight[..7]), Err(FsccError::InfoLengthMismatch));
            assert_eq!(parse_set_info(c, &neg), Err(FsccError::InvalidParameter));
        }
    }

    #[test]
    fn mode() {
        assert_eq!(parse_set_info(16, &[0x22, 0, 0, 0]), Ok(SetInfo::Mode { mode: 0x22 }));
        assert_eq!(parse_set_info(16, &[0x08, 0, 0, 0]), Err(FsccError::InvalidParameter));
        assert_eq!(parse_set_info(16, &[0x30, 0, 0, 0]), Err(FsccError::InvalidParameter));
        assert_eq!(parse_set_info(16, &[0, 0x10, 0, 0]), Err(FsccError::InvalidParameter));
    }

    #[test]
    fn full_ea() {
        // Two entries: "A"="xy" then "BC"="".
        let mut b = vec![12, 0, 0, 0, 0, 1, 2, 0, b'A', 0, b'x', b'y'];
        b.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 0, b'B', b'C', 0]);
        let Ok(SetInfo::FullEa { eas }) = parse_set_info(15, &b) else {
            panic!("not parsed");
        };
        assert_eq!(eas.len(), 2);
        assert_eq!((eas[0].name.as_str(), eas[0].value.as_slice()), ("A", &b"xy"[..]));
        assert_eq!(parse_set_info(15, &b[..b.len() - 1]), Err(FsccError::InvalidParameter));
        let mut bad = b.clone();
        bad[0] = 200; // next entry out of bounds
        assert_eq!(parse_set_info(15, &bad), Err(FsccError::InvalidParameter));
        let mut bad = b.clone();
        bad[0] = 4; // next entry overlaps this one
        assert_eq!(parse_set_info(15, &bad), Err(FsccError::InvalidParameter));
        assert_eq!(parse_set_info(15, &[]), Err(FsccError::InfoLengthMismatch));
    }

    #[test]
    fn classes() {
        assert_eq!(parse_set_info(40, &[0; 64]), Err(FsccError::NotSupported));
        assert_eq!(parse_set_info(5, &[0; 64]), Err(FsccError::InvalidClass));
        assert_eq!(parse_set_info(0, &[]), Err(FsccError::InvalidClass));
        assert_eq!(parse_set_info(255, &[0; 64]), Err(FsccError::InvalidClass));
    }

    #[test]
    fn never_panics_on_short_or_garbage_input() {
        let mut seed = 0x1234_5678u32;
        for class in 0..=255u8 {
            for len in 0..64 {
                let buf: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                        (seed >> 16) as u8
                    })
                    .collect();
                let _ = parse_set_info(class, &buf);
            }
        }
    }
}
