//! Numeric information class ids (MS-FSCC 2.4 file classes, 2.5 file
//! system classes). File and file-system ids overlap, so which table applies
//! depends on the SMB2 InfoType.

/// MS-FSCC 2.4 FileDirectoryInformation (QUERY_DIRECTORY)
pub const FILE_DIRECTORY_INFORMATION: u8 = 1;
/// MS-FSCC 2.4 FileFullDirectoryInformation (QUERY_DIRECTORY)
pub const FILE_FULL_DIRECTORY_INFORMATION: u8 = 2;
/// MS-FSCC 2.4 FileBothDirectoryInformation (QUERY_DIRECTORY)
pub const FILE_BOTH_DIRECTORY_INFORMATION: u8 = 3;
/// MS-FSCC 2.4.7 FileBasicInformation (query, set)
pub const FILE_BASIC_INFORMATION: u8 = 4;
/// MS-FSCC 2.4 FileStandardInformation (query)
pub const FILE_STANDARD_INFORMATION: u8 = 5;
/// MS-FSCC 2.4 FileInternalInformation (query)
pub const FILE_INTERNAL_INFORMATION: u8 = 6;
/// MS-FSCC 2.4 FileEaInformation (query)
pub const FILE_EA_INFORMATION: u8 = 7;
/// MS-FSCC 2.4 FileAccessInformation (query)
pub const FILE_ACCESS_INFORMATION: u8 = 8;
/// MS-FSCC 2.4 FileNameInformation (query)
pub const FILE_NAME_INFORMATION: u8 = 9;
/// MS-FSCC 2.4 FileRenameInformation (set)
pub const FILE_RENAME_INFORMATION: u8 = 10;
/// MS-FSCC 2.4 FileLinkInformation (set)
pub const FILE_LINK_INFORMATION: u8 = 11;
/// MS-FSCC 2.4 FileNamesInformation (QUERY_DIRECTORY)
pub const FILE_NAMES_INFORMATION: u8 = 12;
/// MS-FSCC 2.4 FileDispositionInformation (set)
pub const FILE_DISPOSITION_INFORMATION: u8 = 13;
/// MS-FSCC 2.4 FilePositionInformation (query, set)
pub const FILE_POSITION_INFORMATION: u8 = 14;
/// MS-FSCC 2.4 FileFullEaInformation (query, set)
pub const FILE_FULL_EA_INFORMATION: u8 = 15;
/// MS-FSCC 2.4 FileModeInformation (query, set)
pub const FILE_MODE_INFORMATION: u8 = 16;
/// MS-FSCC 2.4 FileAlignmentInformation (query)
pub const FILE_ALIGNMENT_INFORMATION: u8 = 17;
/// MS-FSCC 2.4.2 FileAllInformation (query)
pub const FILE_ALL_INFORMATION: u8 = 18;
/// MS-FSCC 2.4 FileAllocationInformation (set)
pub const FILE_ALLOCATION_INFORMATION: u8 = 19;
/// MS-FSCC 2.4 FileEndOfFileInformation (set)
pub const FILE_END_OF_FILE_INFORMATION: u8 = 20;
/// MS-FSCC 2.4 FileAlternateNameInformation (query)
pub const FILE_ALTERNATE_NAME_INFORMATION: u8 = 21;
/// MS-FSCC 2.4 FileStreamInformation (query)
pub const FILE_STREAM_INFORMATION: u8 = 22;
/// MS-FSCC 2.4 FilePipeInformation (query, set; named pipes only)
pub const FILE_PIPE_INFORMATION: u8 = 23;
/// MS-FSCC 2.4 FileCompressionInformation (query)
pub const FILE_COMPRESSION_INFORMATION: u8 = 28;
/// MS-FSCC 2.4 FileObjectIdInformation (set via FSCTL only; listed for NOT_SUPPORTED)
pub const FILE_OBJECT_ID_INFORMATION: u8 = 29;
/// MS-FSCC 2.4 FileQuotaInformation (query, set)
pub const FILE_QUOTA_INFORMATION: u8 = 32;
/// MS-FSCC 2.4 FileNetworkOpenInformation (query)
pub const FILE_NETWORK_OPEN_INFORMATION: u8 = 34;
/// MS-FSCC 2.4 FileAttributeTagInformation (query)
pub const FILE_ATTRIBUTE_TAG_INFORMATION: u8 = 35;
/// MS-FSCC 2.4 FileTrackingInformation (set)
pub const FILE_TRACKING_INFORMATION: u8 = 36;
/// MS-FSCC 2.4 FileIdBothDirectoryInformation (QUERY_DIRECTORY)
pub const FILE_ID_BOTH_DIRECTORY_INFORMATION: u8 = 37;
/// MS-FSCC 2.4 FileIdFullDirectoryInformation (QUERY_DIRECTORY)
pub const FILE_ID_FULL_DIRECTORY_INFORMATION: u8 = 38;
/// MS-FSCC 2.4 FileValidDataLengthInformation (set)
pub const FILE_VALID_DATA_LENGTH_INFORMATION: u8 = 39;
/// MS-FSCC 2.4 FileShortNameInformation (set)
pub const FILE_SHORT_NAME_INFORMATION: u8 = 40;
/// MS-FSCC 2.4 FileSfioReserveInformation (query, set)
pub const FILE_SFIO_RESERVE_INFORMATION: u8 = 44;
/// MS-FSCC 2.4 FileHardLinkInformation (query, local only)
pub const FILE_HARD_LINK_INFORMATION: u8 = 46;
/// MS-FSCC 2.4 FileNormalizedNameInformation (query)
pub const FILE_NORMALIZED_NAME_INFORMATION: u8 = 48;
/// MS-FSCC 2.4 FileIdGlobalTxDirectoryInformation (QUERY_DIRECTORY, unsupported)
pub const FILE_ID_GLOBAL_TX_DIRECTORY_INFORMATION: u8 = 50;
/// MS-FSCC 2.4 FileStandardLinkInformation (query)
pub const FILE_STANDARD_LINK_INFORMATION: u8 = 54;
/// MS-FSCC 2.4 FileIdInformation (query)
pub const FILE_ID_INFORMATION: u8 = 59;
/// MS-FSCC 2.4 FileIdExtdDirectoryInformation (QUERY_DIRECTORY)
pub const FILE_ID_EXTD_DIRECTORY_INFORMATION: u8 = 60;
/// MS-FSCC 2.4 FileDispositionInformationEx (set)
pub const FILE_DISPOSITION_INFORMATION_EX: u8 = 64;
/// MS-FSCC 2.4 FileRenameInformationEx (set)
pub const FILE_RENAME_INFORMATION_EX: u8 = 65;
/// MS-FSCC 2.4 FileCaseSensitiveInformation (query, set)
pub const FILE_CASE_SENSITIVE_INFORMATION: u8 = 71;
/// MS-FSCC 2.4 FileLinkInformationEx (set)
pub const FILE_LINK_INFORMATION_EX: u8 = 72;

/// MS-FSCC 2.5.9 FileFsVolumeInformation
pub const FILE_FS_VOLUME_INFORMATION: u8 = 1;
/// MS-FSCC 2.5.5 FileFsLabelInformation (set only)
pub const FILE_FS_LABEL_INFORMATION: u8 = 2;
/// MS-FSCC 2.5.8 FileFsSizeInformation
pub const FILE_FS_SIZE_INFORMATION: u8 = 3;
/// MS-FSCC 2.5.10 FileFsDeviceInformation
pub const FILE_FS_DEVICE_INFORMATION: u8 = 4;
/// MS-FSCC 2.5.1 FileFsAttributeInformation
pub const FILE_FS_ATTRIBUTE_INFORMATION: u8 = 5;
/// MS-FSCC 2.5.2 FileFsControlInformation (quotas)
pub const FILE_FS_CONTROL_INFORMATION: u8 = 6;
/// MS-FSCC 2.5.4 FileFsFullSizeInformation
pub const FILE_FS_FULL_SIZE_INFORMATION: u8 = 7;
/// MS-FSCC 2.5.6 FileFsObjectIdInformation
pub const FILE_FS_OBJECT_ID_INFORMATION: u8 = 8;
/// MS-FSCC 2.5.7 FileFsSectorSizeInformation
pub const FILE_FS_SECTOR_SIZE_INFORMATION: u8 = 11;
