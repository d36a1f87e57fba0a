//! QUERY_INFO (MS-SMB2 3.3.5.20): file, filesystem and security information.

use smb_fscc::{encode_file_info, encode_fs_info, encode_security_descriptor, FsInfo, FsccError, Sid};
use smb_wire::msg::create::access;
use smb_wire::msg::error::encode_error_with_data;
use smb_wire::msg::query_info::{encode_response, info_type, QueryInfoRequest};
use smb_wire::NtStatus;

use super::{blocking, file_info, find_open};
use crate::open::OpenKind;
use crate::pipeline::{Ctx, HResult};

/// FILE_CASE_SENSITIVE_SEARCH | FILE_CASE_PRESERVED_NAMES | FILE_UNICODE_ON_DISK |
/// FILE_SUPPORTS_SPARSE_FILES (MS-FSCC 2.5.1).
const FS_ATTRIBUTES: u32 = 0x0000_0001 | 0x0000_0002 | 0x0000_0004 | 0x0000_0040;

fn fscc_status(e: FsccError) -> NtStatus {
    match e {
        FsccError::InvalidClass => NtStatus::INVALID_INFO_CLASS,
        FsccError::InfoLengthMismatch => NtStatus::INFO_LENGTH_MISMATCH,
        FsccError::InvalidParameter => NtStatus::INVALID_PARAMETER,
        FsccError::BufferTooSmall => NtStatus::BUFFER_TOO_SMALL,
        FsccError::NotSupported => NtStatus::NOT_SUPPORTED,
        FsccError::NoShortName => NtStatus::OBJECT_NAME_NOT_FOUND,
    }
}

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let req = QueryInfoRequest::decode(&frame[cx.range.clone()]).map_err(super::bad("QUERY_INFO"))?;
    let open = find_open(cx, req.file_id)?;
    let limit = req.output_buffer_length as usize;
    let mut data = Vec::new();
    match req.info_type {
        info_type::FILE => {
            let min = smb_fscc::file_info_min_size(req.info_class);
            if min.is_none() {
                return Err(NtStatus::INVALID_INFO_CLASS);
            }
            if req.info_class != smb_fscc::class::FILE_ACCESS_INFORMATION && !open.has(access::FILE_READ_ATTRIBUTES) && req.info_class != smb_fscc::class::FILE_NAME_INFORMATION {
                return Err(NtStatus::ACCESS_DENIED);
            }
            let info = match &open.kind {
                OpenKind::Pipe(_) => smb_fscc::FileInfo { attributes: smb_fscc::FILE_ATTRIBUTE_NORMAL, number_of_links: 1, access_mask: open.access, ..Default::default() },
                OpenKind::File { handle, .. } => {
                    let h = handle.clone();
                    let a = blocking(move || h.attrs()).await?;
                    file_info(&a, &open)
                }
            };
            encode_file_info(req.info_class, &info, &mut data).map_err(fscc_status)?;
            if min.is_some_and(|m| limit < m) {
                return Err(NtStatus::INFO_LENGTH_MISMATCH);
            }
        }
        info_type::FILESYSTEM => {
            let Some(share) = open.tree.share().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
            let min = smb_fscc::fs_info_min_size(req.info_class);
            if min.is_none() {
                return Err(NtStatus::INVALID_INFO_CLASS);
            }
            let backend = share.backend.clone();
            let st = blocking(move || backend.statfs()).await?;
            let bps = 512u32;
            let spu = (st.block_size / bps).max(1);
            let unit = u64::from(spu * bps);
            let fs = FsInfo {
                volume_label: share.config.name.clone(),
                volume_serial: 0x4252_4149,
                volume_creation_time: cx.conn.server.start_time,
                total_units: st.total_bytes / unit,
                free_units: st.avail_bytes / unit,
                actual_free_units: st.free_bytes / unit,
                sectors_per_unit: spu,
                bytes_per_sector: bps,
                fs_name: "NTFS".into(),
                fs_attributes: FS_ATTRIBUTES,
                max_name_len: st.max_name_len,
                object_id: [0; 16],
            };
            encode_fs_info(req.info_class, &fs, &mut data).map_err(fscc_status)?;
            if min.is_some_and(|m| limit < m) {
                return Err(NtStatus::INFO_LENGTH_MISMATCH);
            }
        }
        info_type::SECURITY => {
            if !open.has(access::READ_CONTROL) {
                return Err(NtStatus::ACCESS_DENIED);
            }
            // A fixed descriptor: owned by the local administrator account, Everyone full
            // control. Real ACLs are future work.
            let owner: Sid = "S-1-5-32-544".parse().unwrap_or_else(|_| Sid::everyone());
            let group: Sid = "S-1-5-32-545".parse().unwrap_or_else(|_| Sid::everyone());
            encode_security_descriptor(req.additional_information, &owner, &group, &mut data);
            if data.len() > limit {
                encode_error_with_data(out, &u32::try_from(data.len()).unwrap_or(0).to_le_bytes());
                return Ok(NtStatus::BUFFER_TOO_SMALL);
            }
        }
        info_type::QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    let mut status = NtStatus::SUCCESS;
    if data.len() > limit {
        data.truncate(limit);
        status = NtStatus::BUFFER_OVERFLOW;
    }
    encode_response(out, &data);
    Ok(status)
}
