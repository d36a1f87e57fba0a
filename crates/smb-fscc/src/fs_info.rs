//! QUERY_INFO encoders for file system information classes (MS-FSCC 2.5,
//! MS-SMB2 3.3.5.20.2).

use crate::attrs::{
    FILE_DEVICE_DISK, FILE_DEVICE_IS_MOUNTED, FILE_SUPPORTS_OBJECT_IDS, SSINFO_FLAGS_ALIGNED_DEVICE, SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE,
};
use crate::class::*;
use crate::wire::{put_len_name, put_u32, put_u64, put_u8, put_zeros, utf16le};
use crate::FsccError;

/// Volume facts needed to answer file system information queries
/// (MS-FSCC 2.5).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsInfo {
    /// Volume label (FileFsVolumeInformation).
    pub volume_label: String,
    /// Volume serial number.
    pub volume_serial: u32,
    /// FILETIME the volume was created.
    pub volume_creation_time: u64,
    /// Total allocation units.
    pub total_units: u64,
    /// Free allocation units available to the caller.
    pub free_units: u64,
    /// Free allocation units on the volume (FileFsFullSizeInformation).
    pub actual_free_units: u64,
    /// Sectors per allocation unit.
    pub sectors_per_unit: u32,
    /// Bytes per sector; also used for every FileFsSectorSizeInformation field.
    pub bytes_per_sector: u32,
    /// File system name, e.g. "NTFS".
    pub fs_name: String,
    /// FILE_* file system attribute flags (MS-FSCC 2.5.1).
    pub fs_attributes: u32,
    /// Maximum length of one path component, in characters.
    pub max_name_len: u32,
    /// Volume object id (FileFsObjectIdInformation).
    pub object_id: [u8; 16],
}

/// Minimum OutputBufferLength for a file system query: the fixed part of
/// the structure. None for classes this crate does not encode.
pub fn fs_info_min_size(class: u8) -> Option<usize> {
    Some(match class {
        // Windows insists on room for part of the label beyond the 18 fixed bytes.
        FILE_FS_VOLUME_INFORMATION => 24,
        FILE_FS_SIZE_INFORMATION => 24,
        FILE_FS_DEVICE_INFORMATION => 8,
        // Likewise 12 fixed bytes plus the start of the file system name.
        FILE_FS_ATTRIBUTE_INFORMATION => 16,
        FILE_FS_CONTROL_INFORMATION => 48,
        FILE_FS_FULL_SIZE_INFORMATION => 32,
        FILE_FS_OBJECT_ID_INFORMATION => 64,
        FILE_FS_SECTOR_SIZE_INFORMATION => 28,
        _ => return None,
    })
}

/// MS-SMB2 3.3.5.20.2: encode one file system information class and append
/// it to `out`. Supported: FileFsVolumeInformation 1, FileFsSizeInformation 3,
/// FileFsDeviceInformation 4, FileFsAttributeInformation 5,
/// FileFsFullSizeInformation 7, FileFsObjectIdInformation 8,
/// FileFsSectorSizeInformation 11, and FileFsControlInformation 6 describing
/// a volume without quotas; anything else gives [`FsccError::InvalidClass`].
/// Nothing is appended on error.
pub fn encode_fs_info(class: u8, fs: &FsInfo, out: &mut Vec<u8>) -> Result<(), FsccError> {
    match class {
        // MS-FSCC 2.5.9 FileFsVolumeInformation: 18 fixed bytes + label.
        FILE_FS_VOLUME_INFORMATION => {
            let label = utf16le(&fs.volume_label);
            put_u64(out, fs.volume_creation_time);
            put_u32(out, fs.volume_serial);
            put_u32(out, u32::try_from(label.len()).unwrap_or(u32::MAX));
            put_u8(out, u8::from(fs.fs_attributes & FILE_SUPPORTS_OBJECT_IDS != 0));
            put_u8(out, 0); // Reserved
            out.extend_from_slice(&label);
        }
        // MS-FSCC 2.5.8 FileFsSizeInformation (24 bytes).
        FILE_FS_SIZE_INFORMATION => {
            put_u64(out, fs.total_units);
            put_u64(out, fs.free_units);
            put_u32(out, fs.sectors_per_unit);
            put_u32(out, fs.bytes_per_sector);
        }
        // MS-FSCC 2.5.10 FileFsDeviceInformation: a mounted disk.
        FILE_FS_DEVICE_INFORMATION => {
            put_u32(out, FILE_DEVICE_DISK);
            put_u32(out, FILE_DEVICE_IS_MOUNTED);
        }
        // MS-FSCC 2.5.1 FileFsAttributeInformation: 12 fixed bytes + name.
        FILE_FS_ATTRIBUTE_INFORMATION => {
            put_u32(out, fs.fs_attributes);
            put_u32(out, fs.max_name_len);
            put_len_name(out, &utf16le(&fs.fs_name));
        }
        // MS-FSCC 2.5.4 FileFsFullSizeInformation (32 bytes).
        FILE_FS_FULL_SIZE_INFORMATION => {
            put_u64(out, fs.total_units);
            put_u64(out, fs.free_units);
            put_u64(out, fs.actual_free_units);
            put_u32(out, fs.sectors_per_unit);
            put_u32(out, fs.bytes_per_sector);
        }
        // MS-FSCC 2.5.6 FileFsObjectIdInformation: ObjectId + 48 bytes of
        // ExtendedInfo, which we leave zero.
        FILE_FS_OBJECT_ID_INFORMATION => {
            out.extend_from_slice(&fs.object_id);
            put_zeros(out, 48);
        }
        // MS-FSCC 2.5.7 FileFsSectorSizeInformation (28 bytes): report a
        // plain aligned device whose logical and physical sectors agree.
        FILE_FS_SECTOR_SIZE_INFORMATION => {
            let b = fs.bytes_per_sector;
            put_u32(out, b); // LogicalBytesPerSector
            put_u32(out, b); // PhysicalBytesPerSectorForAtomicity
            put_u32(out, b); // PhysicalBytesPerSectorForPerformance
            put_u32(out, b); // FileSystemEffectivePhysicalBytesPerSectorForAtomicity
            put_u32(out, SSINFO_FLAGS_ALIGNED_DEVICE | SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE);
            put_u32(out, 0); // ByteOffsetForSectorAlignment
            put_u32(out, 0); // ByteOffsetForPartitionAlignment
        }
        // MS-FSCC 2.5.2 FileFsControlInformation: no content-indexing filter
        // thresholds, no default quota (-1 = none), quotas not tracked.
        FILE_FS_CONTROL_INFORMATION => {
            put_u64(out, 0); // FreeSpaceStartFiltering
            put_u64(out, 0); // FreeSpaceThreshold
            put_u64(out, 0); // FreeSpaceStopFiltering
            put_u64(out, u64::MAX); // DefaultQuotaThreshold
            put_u64(out, u64::MAX); // DefaultQuotaLimit
            put_u32(out, 0); // FileSystemControlFlags
            put_u32(out, 0); // Padding
        }
        _ => return Err(FsccError::InvalidClass),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::*;

    fn fs() -> FsInfo {
        FsInfo {
            volume_label: "share".into(),
            volume_serial: 0x1234_5678,
            volume_creation_time: 0x01D0_0000_0000_0000,
            total_units: 1000,
            free_units: 400,
            actual_free_units: 500,
            sectors_per_unit: 8,
            bytes_per_sector: 512,
            fs_name: "NTFS".into(),
            fs_attributes: FILE_CASE_PRESERVED_NAMES
                | FILE_UNICODE_ON_DISK
                | FILE_PERSISTENT_ACLS
                | FILE_SUPPORTS_SPARSE_FILES
                | FILE_SUPPORTS_OBJECT_IDS,
            max_name_len: 255,
            object_id: [7; 16],
        }
    }

    fn enc(class: u8) -> Vec<u8> {
        let mut v = Vec::new();
        encode_fs_info(class, &fs(), &mut v).unwrap();
        v
    }

    #[test]
    fn volume() {
        let b = enc(FILE_FS_VOLUME_INFORMATION);
        let mut want = 0x01D0_0000_0000_0000u64.to_le_bytes().to_vec();
        want.extend_from_slice(&0x1234_5678u32.to_le_bytes());
        want.extend_from_slice(&10u32.to_le_bytes());
        want.extend_from_slice(&[1, 0]);
        want.extend_from_slice(&utf16le("share"));
        assert_eq!(b, want);
        assert_eq!(b.len(), 18 + 10);
    }

    #[test]
    fn sizes() {
        let b = enc(FILE_FS_SIZE_INFORMATION);
        assert_eq!(b.len(), 24);
        assert_eq!(&b[8..16], &400u64.to_le_bytes());
        assert_eq!(&b[16..24], &[8, 0, 0, 0, 0, 2, 0, 0]);
        let f = enc(FILE_FS_FULL_SIZE_INFORMATION);
        assert_eq!(f.len(), 32);
        assert_eq!(&f[0..8], &1000u64.to_le_bytes());
        assert_eq!(&f[8..16], &400u64.to_le_bytes());
        assert_eq!(&f[16..24], &500u64.to_le_bytes());
        assert_eq!(&f[24..32], &[8, 0, 0, 0, 0, 2, 0, 0]);
    }

    #[test]
    fn device_attribute_objectid_sector() {
        assert_eq!(enc(FILE_FS_DEVICE_INFORMATION), [7, 0, 0, 0, 0x20, 0, 0, 0]);
        let a = enc(FILE_FS_ATTRIBUTE_INFORMATION);
        assert_eq!(&a[0..4], &0x0001_004Eu32.to_le_bytes());
        assert_eq!(&a[4..8], &255u32.to_le_bytes());
        assert_eq!(&a[8..12], &8u32.to_le_bytes());
        assert_eq!(&a[12..], &utf16le("NTFS")[..]);
        let o = enc(FILE_FS_OBJECT_ID_INFORMATION);
        assert_eq!(o.len(), 64);
        assert_eq!(&o[..16], &[7; 16]);
        assert!(o[16..].iter().all(|&x| x == 0));
        let s = enc(FILE_FS_SECTOR_SIZE_INFORMATION);
        let mut want = Vec::new();
        for v in [512u32, 512, 512, 512, 3, 0, 0] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(s, want);
    }

    #[test]
    fn errors_and_min_sizes() {
        let mut v = Vec::new();
        let mut q = Vec::new();
        encode_fs_info(FILE_FS_CONTROL_INFORMATION, &fs(), &mut q).unwrap();
        assert_eq!(q.len(), 48);
        assert_eq!(encode_fs_info(FILE_FS_LABEL_INFORMATION, &fs(), &mut v), Err(FsccError::InvalidClass));
        assert!(v.is_empty());
        for c in 0..=255u8 {
            let mut out = Vec::new();
            if encode_fs_info(c, &fs(), &mut out).is_ok() {
                assert!(out.len() >= fs_info_min_size(c).unwrap());
            }
        }
    }
}
