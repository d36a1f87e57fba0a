//! MS-FSCC data structures for an SMB2 file server, sans-IO.
//!
//! Encoders for QUERY_INFO (file and file-system classes), QUERY_DIRECTORY
//! entries, a parser for SET_INFO input buffers, MS-FSA wildcard matching,
//! FILETIME conversion and a minimal self-relative security descriptor.
//! Everything is little-endian and never panics on network input.

#![warn(missing_docs)]

pub mod acl;
mod attrs;
pub mod class;
mod client;
mod dir_info;
mod ea;
mod error;
mod file_info;
mod fs_info;
mod security;
mod set_info;
mod shortname;
mod stream_name;
mod time;
mod wildcard;
mod wire;

pub use attrs::*;
pub use client::{decode_dir_entries, decode_file_all_information, encode_set_info};
pub use dir_info::{AppleDirInfo, DirWriter};
pub use ea::{encode_full_ea_list, full_ea_list_size, parse_full_ea_list, parse_get_ea_list, valid_ea_name, FullEa, MAX_EA_NAME_LEN};
pub use error::FsccError;
pub use file_info::{encode_file_info, file_info_min_size, FileInfo};
pub use fs_info::{encode_fs_info, fs_info_min_size, FsInfo};
pub use security::{
    encode_security_descriptor, SecurityDescriptor, Sid, DACL_SECURITY_INFORMATION, FILE_ALL_ACCESS, GROUP_SECURITY_INFORMATION,
    MAX_SECURITY_DESCRIPTOR_LEN, OWNER_SECURITY_INFORMATION, SACL_SECURITY_INFORMATION, SE_DACL_PRESENT, SE_SACL_PRESENT,
};
pub use set_info::{parse_set_info, SetInfo};
pub use shortname::short_name;
pub use stream_name::{split_stream_path, stream_display_name, BadStreamName, StreamPath};
pub use time::{filetime_to_system_time, system_time_to_filetime, FILETIME_RESUME_UPDATES, FILETIME_STOP_UPDATES};
pub use wildcard::{has_wildcards, wildcard_match};
