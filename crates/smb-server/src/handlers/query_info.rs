//! QUERY_INFO (MS-SMB2 3.3.5.20): file, filesystem and security information.

use std::sync::Arc;

use braid_vfs::FileHandle;
use smb_fscc::{encode_file_info, encode_fs_info, FsInfo, FsccError, FullEa, SecurityDescriptor, Sid};
use smb_wire::msg::create::access;
use smb_wire::msg::error::encode_error_with_data;
use smb_wire::msg::query_info::{encode_response, info_type, QueryInfoRequest};
use smb_wire::NtStatus;

use super::{blocking, file_info, find_open};
use crate::open::{Open, OpenKind};
use crate::request::{Ctx, HResult, Reply};

/// FILE_CASE_SENSITIVE_SEARCH | FILE_CASE_PRESERVED_NAMES | FILE_UNICODE_ON_DISK |
/// FILE_SUPPORTS_SPARSE_FILES | FILE_NAMED_STREAMS | FILE_SUPPORTS_EXTENDED_ATTRIBUTES
/// (MS-FSCC 2.5.1): what every share reports.
const FS_ATTRIBUTES: u32 = 0x0000_0001 | 0x0000_0002 | 0x0000_0004 | 0x0000_0040 | smb_fscc::FILE_NAMED_STREAMS | 0x0080_0000;
/// FILE_SUPPORTS_BLOCK_REFCOUNTING: reported by shares whose file system clones blocks
/// (FSCTL_DUPLICATE_EXTENTS_TO_FILE, `handlers/ioctl/block_clone.rs`).
const FILE_SUPPORTS_BLOCK_REFCOUNTING: u32 = 0x0800_0000;

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

/// OWNER, GROUP, DACL and SACL_SECURITY_INFORMATION: the sections a stored descriptor has.
pub(crate) const ALL_SECTIONS: u32 = 0xF;

/// The descriptor of files without a stored one: owned by BUILTIN\Administrators, group
/// BUILTIN\Users, Everyone full control.
pub(crate) fn synthetic_sd() -> SecurityDescriptor {
    let owner: Sid = "S-1-5-32-544".parse().unwrap_or_else(|_| Sid::everyone());
    let group: Sid = "S-1-5-32-545".parse().unwrap_or_else(|_| Sid::everyone());
    SecurityDescriptor::synthetic(owner, group)
}

/// The descriptor of an open file: the stored one, else the synthetic one. A stored value
/// that no longer parses (written by something else) is treated as absent.
pub(crate) fn load_sd(h: &dyn FileHandle) -> braid_vfs::Result<SecurityDescriptor> {
    Ok(h.security_descriptor()?.and_then(|b| SecurityDescriptor::parse(&b).ok()).unwrap_or_else(synthetic_sd))
}

/// Replaces the `sections` of the file's descriptor by those of `new` and stores the result,
/// so that setting only the DACL keeps the owner and group.
///
/// Descriptors are stored and reported but not enforced: access checks use the share's
/// permissions (and the server's POSIX identity) only, never these ACLs.
pub(crate) fn store_sd(h: &dyn FileHandle, new: &SecurityDescriptor, sections: u32) -> braid_vfs::Result<()> {
    let mut sd = load_sd(h)?;
    sd.merge(new, sections);
    let mut bytes = Vec::new();
    sd.encode(ALL_SECTIONS, &mut bytes);
    h.set_security_descriptor(&bytes)
}

/// A file's EAs in wire form.
fn ea_list(eas: Vec<(String, Vec<u8>)>) -> Vec<FullEa> {
    eas.into_iter().map(|(name, value)| FullEa { flags: 0, name, value }).collect()
}

/// QUERY_INFO FileFullEaInformation (MS-SMB2 3.3.5.20.1, MS-FSA 2.1.5.11.9): all EAs, or
/// those named in the input's FILE_GET_EA_INFORMATION list (a missing one comes back with
/// an empty value), as many whole entries as fit. Every query starts from the first EA:
/// no per-open EA index is kept.
async fn query_eas(open: &crate::open::Open, req: &QueryInfoRequest<'_>, limit: usize, out: &mut Vec<u8>) -> HResult {
    if !open.has(access::FILE_READ_EA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let OpenKind::File { handle, .. } = &open.kind else { return Err(NtStatus::NO_EAS_ON_FILE) };
    let wanted = if req.input.is_empty() { None } else { Some(smb_fscc::parse_get_ea_list(req.input).map_err(|_| NtStatus::INVALID_PARAMETER)?) };
    let h = handle.clone();
    let eas = ea_list(blocking(move || h.extended_attributes()).await?);
    let list = match wanted {
        None => eas,
        Some(names) => names
            .into_iter()
            .map(|n| {
                let upper = n.to_ascii_uppercase();
                eas.iter().find(|e| e.name == upper).cloned().unwrap_or(FullEa { flags: 0, name: upper, value: Vec::new() })
            })
            .collect(),
    };
    if list.is_empty() {
        return Err(NtStatus::NO_EAS_ON_FILE);
    }
    let mut data = Vec::new();
    let n = smb_fscc::encode_full_ea_list(&list, limit, &mut data);
    if n == 0 {
        encode_error_with_data(out, &smb_fscc::full_ea_list_size(&list[..1]).to_le_bytes());
        return Ok(Reply::new(NtStatus::BUFFER_TOO_SMALL));
    }
    encode_response(out, &data);
    Ok(Reply::new(if n < list.len() { NtStatus::BUFFER_OVERFLOW } else { NtStatus::SUCCESS }))
}

/// The access a file information class needs (MS-FSA 2.1.5.11): the attribute-bearing
/// classes need FILE_READ_ATTRIBUTES, the others none beyond having the open.
fn required_access(class: u8) -> u32 {
    use smb_fscc::class::*;
    match class {
        FILE_BASIC_INFORMATION | FILE_ALL_INFORMATION | FILE_NETWORK_OPEN_INFORMATION | FILE_ATTRIBUTE_TAG_INFORMATION => {
            access::FILE_READ_ATTRIBUTES
        }
        FILE_FULL_EA_INFORMATION => access::FILE_READ_EA,
        _ => 0,
    }
}

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let req = QueryInfoRequest::decode(&frame[cx.range.clone()]).map_err(super::bad("QUERY_INFO"))?;
    let open = find_open(cx, req.file_id)?;
    let limit = req.output_buffer_length as usize;
    let mut data = Vec::new();
    match req.info_type {
        info_type::FILE if req.info_class == smb_fscc::class::FILE_FULL_EA_INFORMATION => {
            return query_eas(&open, &req, limit, out).await;
        }
        info_type::FILE => query_file(cx, &open, &req, limit, &mut data).await?,
        info_type::FILESYSTEM => query_fs(cx, &open, &req, limit, &mut data).await?,
        info_type::SECURITY => {
            query_security(&open, &req, nfs_aces(cx), &mut data).await?;
            if data.len() > limit {
                encode_error_with_data(out, &u32::try_from(data.len()).unwrap_or(0).to_le_bytes());
                return Ok(Reply::new(NtStatus::BUFFER_TOO_SMALL));
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
    Ok(Reply::new(status))
}

/// A file information class (MS-FSCC 2.4) of the open.
async fn query_file(cx: &Ctx<'_>, open: &Open, req: &QueryInfoRequest<'_>, limit: usize, data: &mut Vec<u8>) -> Result<(), NtStatus> {
    let min = smb_fscc::file_info_min_size(req.info_class);
    if min.is_none() {
        return Err(NtStatus::INVALID_INFO_CLASS);
    }
    if req.info_class == smb_fscc::class::FILE_NORMALIZED_NAME_INFORMATION && cx.conn.dialect() < smb_wire::dialect::SMB311 {
        // MS-SMB2 3.3.5.20.1: only offered from SMB 3.1.1 on.
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let needed = required_access(req.info_class);
    if needed != 0 && !open.has(needed) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let info = match &open.kind {
        OpenKind::Pipe(_) => {
            smb_fscc::FileInfo { attributes: smb_fscc::FILE_ATTRIBUTE_NORMAL, number_of_links: 1, access_mask: open.access, ..Default::default() }
        }
        OpenKind::File { handle, .. } if req.info_class == smb_fscc::class::FILE_STREAM_INFORMATION => stream_info(open, handle.clone()).await?,
        OpenKind::File { handle, .. } => {
            let h = handle.clone();
            // EaSize only where it is the point of the class: directory listings and
            // FileAllInformation report 0 (computing it per listed entry would cost a
            // listxattr each), and those two must agree with each other.
            let with_eas = req.info_class == smb_fscc::class::FILE_EA_INFORMATION;
            let (a, ea_size) = blocking(move || {
                let ea_size = if with_eas { smb_fscc::full_ea_list_size(&ea_list(h.extended_attributes()?)) } else { 0 };
                Ok((h.attrs()?, ea_size))
            })
            .await?;
            let mut info = file_info(&a, open);
            info.ea_size = ea_size;
            info
        }
    };
    encode_file_info(req.info_class, &info, data).map_err(fscc_status)?;
    if min.is_some_and(|m| limit < m) {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    Ok(())
}

/// FileStreamInformation (MS-FSCC 2.4.43): the file's unnamed stream and its named ones,
/// whichever of its streams the open is on.
async fn stream_info(open: &Open, h: Arc<dyn FileHandle>) -> Result<smb_fscc::FileInfo, NtStatus> {
    let (a, streams) = blocking(move || Ok((h.file_attrs()?, h.streams()?))).await?;
    let mut info = file_info(&a, open);
    info.streams = streams
        .into_iter()
        .filter(|(name, size)| !crate::afp_info::hidden_when_empty(name, *size))
        .map(|(name, size)| (name, size, size.div_ceil(4096) * 4096))
        .collect();
    Ok(info)
}

/// A filesystem information class (MS-FSCC 2.5) of the open's share.
async fn query_fs(cx: &Ctx<'_>, open: &Open, req: &QueryInfoRequest<'_>, limit: usize, data: &mut Vec<u8>) -> Result<(), NtStatus> {
    let Some(share) = open.tree.share().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    let min = smb_fscc::fs_info_min_size(req.info_class);
    if min.is_none() {
        return Err(NtStatus::INVALID_INFO_CLASS);
    }
    let backend = share.backend.clone();
    let (st, cloning) = blocking(move || Ok((backend.statfs()?, backend.block_cloning()))).await?;
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
        fs_attributes: FS_ATTRIBUTES | if cloning { FILE_SUPPORTS_BLOCK_REFCOUNTING } else { 0 },
        max_name_len: st.max_name_len,
        object_id: [0; 16],
    };
    encode_fs_info(req.info_class, &fs, data).map_err(fscc_status)?;
    if min.is_some_and(|m| limit < m) {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    Ok(())
}

/// Whether the connection negotiated Apple's NFS ACEs (`create/aapl.rs`): security
/// descriptors then carry the file's POSIX owner, group and mode as S-1-5-88 ACEs.
pub(crate) fn nfs_aces(cx: &Ctx<'_>) -> bool {
    cx.conn.apple.get().is_some_and(|caps| caps & smb_wire::msg::aapl::SUPPORTS_NFS_ACE != 0)
}

/// The open's security descriptor (the stored one, or the synthetic one), restricted to
/// the requested sections; with `nfs_aces` and the DACL asked for, its DACL ends with the
/// file's S-1-5-88 ACEs (any stored ones replaced), as Samba's vfs_fruit reports them.
async fn query_security(open: &Open, req: &QueryInfoRequest<'_>, nfs_aces: bool, data: &mut Vec<u8>) -> Result<(), NtStatus> {
    if !open.has(access::READ_CONTROL) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let sd = match &open.kind {
        OpenKind::Pipe(_) => synthetic_sd(),
        OpenKind::File { handle, .. } => {
            let h = handle.clone();
            let with_nfs = nfs_aces && req.additional_information & smb_fscc::DACL_SECURITY_INFORMATION != 0;
            blocking(move || {
                let mut sd = load_sd(h.as_ref())?;
                if with_nfs {
                    let posix = h.file_attrs()?.posix;
                    smb_fscc::acl::add_nfs_aces(&mut sd, super::query_directory::st_mode(&posix), posix.uid, posix.gid);
                }
                Ok(sd)
            })
            .await?
        }
    };
    sd.encode(req.additional_information, data);
    Ok(())
}
