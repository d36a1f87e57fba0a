//! The client's half: decoders for what a server sends (QUERY_INFO and QUERY_DIRECTORY
//! output) and encoders for SET_INFO input, the inverses of this crate's server-side
//! encoders and [`crate::parse_set_info`].

use crate::class::*;
use crate::set_info::SetInfo;
use crate::wire::{from_utf16le, put_u32, put_u64, put_u8, put_zeros, utf16le, Reader};
use crate::{FileInfo, FsccError};

/// Decodes MS-FSCC 2.4.2 FileAllInformation: basic, standard, internal, EA, access,
/// position, mode and alignment information, then the name. Fields a client cannot learn
/// from it (volume serial) stay zero.
pub fn decode_file_all_information(buf: &[u8]) -> Result<FileInfo, FsccError> {
    let mut r = Reader::new(buf);
    let mut i = FileInfo {
        creation_time: r.u64()?,
        last_access_time: r.u64()?,
        last_write_time: r.u64()?,
        change_time: r.u64()?,
        attributes: r.u32()?,
        ..FileInfo::default()
    };
    r.u32()?; // Reserved
    i.allocation_size = r.u64()?;
    i.end_of_file = r.u64()?;
    i.number_of_links = r.u32()?;
    i.delete_pending = r.u8()? != 0;
    i.is_directory = r.u8()? != 0;
    r.bytes(2)?;
    i.file_id = r.u64()?;
    i.ea_size = r.u32()?;
    i.access_mask = r.u32()?;
    i.current_offset = r.u64()?;
    i.mode = r.u32()?;
    i.alignment_requirement = r.u32()?;
    let name_len = r.u32()? as usize;
    // Servers truncate the name to the output buffer (STATUS_BUFFER_OVERFLOW); keep what came.
    let name = r.bytes(name_len.min(r.remaining()) & !1)?;
    i.name = from_utf16le(name)?;
    Ok(i)
}

/// Decodes a QUERY_DIRECTORY OutputBuffer of `class` (FileDirectoryInformation 1,
/// FileFullDirectoryInformation 2, FileBothDirectoryInformation 3,
/// FileIdBothDirectoryInformation 37, FileIdFullDirectoryInformation 38; MS-FSCC 2.4)
/// into (name, info) pairs. Entries are followed through NextEntryOffset, which must move
/// forward, so the work is bounded by the buffer length.
pub fn decode_dir_entries(class: u8, buf: &[u8]) -> Result<Vec<(String, FileInfo)>, FsccError> {
    let fixed = match class {
        FILE_DIRECTORY_INFORMATION => 64,
        FILE_FULL_DIRECTORY_INFORMATION => 68,
        FILE_BOTH_DIRECTORY_INFORMATION => 94,
        FILE_ID_BOTH_DIRECTORY_INFORMATION => 104,
        FILE_ID_FULL_DIRECTORY_INFORMATION => 80,
        _ => return Err(FsccError::InvalidClass),
    };
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let entry = buf.get(pos..).ok_or(FsccError::InfoLengthMismatch)?;
        let mut r = Reader::new(entry);
        let next = r.u32()? as usize;
        r.u32()?; // FileIndex
        let mut i = FileInfo {
            creation_time: r.u64()?,
            last_access_time: r.u64()?,
            last_write_time: r.u64()?,
            change_time: r.u64()?,
            end_of_file: r.u64()?,
            allocation_size: r.u64()?,
            attributes: r.u32()?,
            ..FileInfo::default()
        };
        let name_len = r.u32()? as usize;
        if class != FILE_DIRECTORY_INFORMATION {
            i.ea_size = r.u32()?;
        }
        match class {
            FILE_BOTH_DIRECTORY_INFORMATION => {
                r.bytes(26)?; // ShortNameLength, Reserved, ShortName
            }
            FILE_ID_BOTH_DIRECTORY_INFORMATION => {
                r.bytes(28)?; // ShortNameLength, Reserved1, ShortName, Reserved2
                i.file_id = r.u64()?;
            }
            FILE_ID_FULL_DIRECTORY_INFORMATION => {
                r.u32()?;
                i.file_id = r.u64()?;
            }
            _ => {}
        }
        debug_assert_eq!(entry.len() - r.remaining(), fixed);
        let name = from_utf16le(r.bytes(name_len)?)?;
        i.is_directory = i.attributes & crate::FILE_ATTRIBUTE_DIRECTORY != 0;
        out.push((name, i));
        if next == 0 {
            return Ok(out);
        }
        if next < fixed {
            return Err(FsccError::InvalidParameter);
        }
        pos = pos.checked_add(next).ok_or(FsccError::InvalidParameter)?;
    }
}

/// Encodes the SET_INFO input buffer for `info` (MS-FSCC 2.4; rename and link in the SMB2
/// TYPE_2 layout), the inverse of [`crate::parse_set_info`]. Returns the information class
/// to send with it.
pub fn encode_set_info(info: &SetInfo, out: &mut Vec<u8>) -> u8 {
    match info {
        SetInfo::Basic { creation_time, last_access_time, last_write_time, change_time, attributes } => {
            for t in [creation_time, last_access_time, last_write_time, change_time] {
                put_u64(out, *t);
            }
            put_u32(out, *attributes);
            put_u32(out, 0);
            FILE_BASIC_INFORMATION
        }
        SetInfo::Rename { replace_if_exists, root_directory, file_name } => {
            put_rename_like(out, *replace_if_exists, *root_directory, file_name);
            FILE_RENAME_INFORMATION
        }
        SetInfo::Link { replace_if_exists, file_name } => {
            put_rename_like(out, *replace_if_exists, 0, file_name);
            FILE_LINK_INFORMATION
        }
        SetInfo::Disposition { delete_pending } => {
            put_u8(out, u8::from(*delete_pending));
            FILE_DISPOSITION_INFORMATION
        }
        SetInfo::DispositionEx { flags } => {
            put_u32(out, *flags);
            FILE_DISPOSITION_INFORMATION_EX
        }
        SetInfo::Position { current_byte_offset } => {
            put_u64(out, *current_byte_offset);
            FILE_POSITION_INFORMATION
        }
        SetInfo::Mode { mode } => {
            put_u32(out, *mode);
            FILE_MODE_INFORMATION
        }
        SetInfo::Allocation { allocation_size } => {
            put_u64(out, *allocation_size);
            FILE_ALLOCATION_INFORMATION
        }
        SetInfo::EndOfFile { end_of_file } => {
            put_u64(out, *end_of_file);
            FILE_END_OF_FILE_INFORMATION
        }
        SetInfo::FullEa { eas } => {
            crate::encode_full_ea_list(eas, usize::MAX, out);
            FILE_FULL_EA_INFORMATION
        }
        SetInfo::ValidDataLength { valid_data_length } => {
            put_u64(out, *valid_data_length);
            FILE_VALID_DATA_LENGTH_INFORMATION
        }
    }
}

/// ReplaceIfExists (1 byte + 7 reserved), RootDirectory, FileNameLength, FileName.
fn put_rename_like(out: &mut Vec<u8>, replace: bool, root: u64, name: &str) {
    let n = utf16le(name);
    put_u8(out, u8::from(replace));
    put_zeros(out, 7);
    put_u64(out, root);
    put_u32(out, u32::try_from(n.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(&n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode_file_info, parse_set_info, DirWriter};

    fn sample(name: &str, dir: bool) -> FileInfo {
        FileInfo {
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            attributes: if dir { crate::FILE_ATTRIBUTE_DIRECTORY } else { crate::FILE_ATTRIBUTE_ARCHIVE },
            end_of_file: 12345,
            allocation_size: 16384,
            file_id: 0xfeed,
            number_of_links: 1,
            delete_pending: false,
            is_directory: dir,
            ea_size: 0,
            access_mask: 0x1f01ff,
            current_offset: 0,
            mode: 0,
            alignment_requirement: 0,
            name: name.into(),
            volume_serial: 0,
            streams: Vec::new(),
        }
    }

    #[test]
    fn file_all_round_trip() {
        let info = sample("\\dir\\fïle.txt", false);
        let mut buf = Vec::new();
        encode_file_info(FILE_ALL_INFORMATION, &info, &mut buf).unwrap();
        assert_eq!(decode_file_all_information(&buf).unwrap(), info);
        // Truncated names are accepted, truncated fixed parts are not.
        assert_eq!(decode_file_all_information(&buf[..buf.len() - 2]).unwrap().name, "\\dir\\fïle.tx");
        assert!(decode_file_all_information(&buf[..90]).is_err());
    }

    #[test]
    fn dir_entries_round_trip() {
        for class in [1u8, 2, 3, 37, 38] {
            let mut w = DirWriter::new(class, 65536).unwrap();
            let entries = [(".", sample("", true)), ("..", sample("", true)), ("a long file name.txt", sample("", false))];
            for (n, i) in &entries {
                assert!(w.push(n, i));
            }
            let dec = decode_dir_entries(class, &w.finish()).unwrap();
            assert_eq!(dec.len(), 3);
            for ((n, i), (dn, di)) in entries.iter().zip(&dec) {
                assert_eq!(n, dn);
                assert_eq!(i.end_of_file, di.end_of_file);
                assert_eq!(i.is_directory, di.is_directory);
                assert_eq!(i.last_write_time, di.last_write_time);
                if class >= 37 {
                    assert_eq!(di.file_id, 0xfeed);
                }
            }
        }
        assert!(decode_dir_entries(37, &[0; 50]).is_err());
        assert!(decode_dir_entries(12, &[]).is_err());
    }

    #[test]
    fn set_info_round_trip() {
        let cases = [
            SetInfo::Basic { creation_time: 0, last_access_time: 5, last_write_time: u64::MAX, change_time: 7, attributes: 0x20 },
            SetInfo::Rename { replace_if_exists: true, root_directory: 0, file_name: "new\\näme".into() },
            SetInfo::Link { replace_if_exists: false, file_name: "link".into() },
            SetInfo::Disposition { delete_pending: true },
            SetInfo::DispositionEx { flags: 3 },
            SetInfo::Position { current_byte_offset: 99 },
            SetInfo::Mode { mode: 0 },
            SetInfo::Allocation { allocation_size: 4096 },
            SetInfo::EndOfFile { end_of_file: 1 << 40 },
            SetInfo::ValidDataLength { valid_data_length: 10 },
        ];
        for c in cases {
            let mut buf = Vec::new();
            let class = encode_set_info(&c, &mut buf);
            assert_eq!(parse_set_info(class, &buf), Ok(c));
        }
    }
}
