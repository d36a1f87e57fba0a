//! SET_INFO (MS-SMB2 3.3.5.21): times and attributes, end of file, allocation, delete
//! disposition, rename, position and mode. Security descriptors are accepted and ignored.

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use braid_vfs::{SetTimes, SharePath};
use smb_fscc::{filetime_to_system_time, parse_set_info, FsccError, SetInfo};
use smb_wire::msg::create::access;
use smb_wire::msg::query_info::info_type;
use smb_wire::msg::set_info::SetInfoRequest;
use smb_wire::msg::simple::encode_set_info_response;
use smb_wire::NtStatus;

use super::{blocking, find_open};
use crate::open::{Open, OpenKind};
use crate::pipeline::{Ctx, HResult};
use crate::server::lock;

fn fscc_status(e: FsccError) -> NtStatus {
    match e {
        FsccError::InvalidClass => NtStatus::INVALID_INFO_CLASS,
        FsccError::InfoLengthMismatch => NtStatus::INFO_LENGTH_MISMATCH,
        FsccError::NotSupported => NtStatus::NOT_SUPPORTED,
        _ => NtStatus::INVALID_PARAMETER,
    }
}

/// A FILETIME field of FileBasicInformation: 0 and -1 mean "leave alone".
fn time_field(ft: u64) -> Option<SystemTime> {
    if ft == 0 || ft >= smb_fscc::FILETIME_RESUME_UPDATES {
        None
    } else {
        filetime_to_system_time(ft)
    }
}

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let req = SetInfoRequest::decode(&frame[cx.range.clone()]).map_err(super::bad("SET_INFO"))?;
    let open = find_open(cx, req.file_id)?;
    match req.info_type {
        info_type::FILE => {}
        info_type::SECURITY => {
            if !open.has(access::WRITE_DAC | access::WRITE_OWNER) {
                return Err(NtStatus::ACCESS_DENIED);
            }
            encode_set_info_response(out);
            return Ok(NtStatus::SUCCESS);
        }
        info_type::FILESYSTEM | info_type::QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    let info = parse_set_info(req.info_class, req.buffer).map_err(fscc_status)?;
    let OpenKind::File { handle, is_dir, node, .. } = &open.kind else { return Err(NtStatus::INVALID_PARAMETER) };
    let h = handle.clone();
    let need = |bits: u32| if open.has(bits) { Ok(()) } else { Err(NtStatus::ACCESS_DENIED) };
    let writable = || if open.tree.read_only { Err(NtStatus::MEDIA_WRITE_PROTECTED) } else { Ok(()) };
    match info {
        SetInfo::Basic { creation_time, last_access_time, last_write_time, change_time, attributes } => {
            need(access::FILE_WRITE_ATTRIBUTES)?;
            writable()?;
            if attributes & smb_fscc::FILE_ATTRIBUTE_DIRECTORY != 0 && !is_dir {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            let times = SetTimes {
                created: time_field(creation_time),
                accessed: time_field(last_access_time),
                modified: time_field(last_write_time),
                changed: time_field(change_time),
            };
            blocking(move || {
                if times != SetTimes::default() {
                    h.set_times(times)?;
                }
                if attributes != 0 {
                    h.set_dos_attributes(attributes & 0x27)?;
                }
                Ok(())
            })
            .await?;
        }
        SetInfo::EndOfFile { end_of_file } => {
            need(access::FILE_WRITE_DATA)?;
            writable()?;
            if *is_dir {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            blocking(move || h.set_len(end_of_file)).await?;
        }
        SetInfo::Allocation { allocation_size } => {
            need(access::FILE_WRITE_DATA)?;
            writable()?;
            if *is_dir {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            // Allocation below the end of file truncates (MS-FSA 2.1.5.15.1).
            blocking(move || {
                let size = h.attrs()?.size;
                if allocation_size < size {
                    h.set_len(allocation_size)
                } else {
                    h.allocate(allocation_size)
                }
            })
            .await?;
        }
        SetInfo::Disposition { delete_pending } => set_delete(&open, h, *is_dir, node, delete_pending).await?,
        SetInfo::DispositionEx { flags } => set_delete(&open, h, *is_dir, node, flags & 0x1 != 0).await?,
        SetInfo::Rename { replace_if_exists, root_directory, file_name } => {
            need(access::DELETE)?;
            writable()?;
            rename(cx, &open, replace_if_exists, root_directory, &file_name).await?;
        }
        SetInfo::Position { current_byte_offset } => open.position.store(current_byte_offset, Ordering::Relaxed),
        SetInfo::Mode { mode } => open.mode.store(u64::from(mode), Ordering::Relaxed),
        SetInfo::ValidDataLength { .. } => {
            need(access::FILE_WRITE_DATA)?;
        }
        SetInfo::Link { .. } => return Err(NtStatus::NOT_SUPPORTED),
        SetInfo::FullEa => return Err(NtStatus::EAS_NOT_SUPPORTED),
    }
    encode_set_info_response(out);
    Ok(NtStatus::SUCCESS)
}

async fn set_delete(
    open: &Open,
    h: std::sync::Arc<dyn braid_vfs::FileHandle>,
    is_dir: bool,
    node: &crate::locks::FileNode,
    delete: bool,
) -> Result<(), NtStatus> {
    if !open.has(access::DELETE) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if open.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    if delete {
        let a = blocking({
            let h = h.clone();
            move || h.attrs()
        })
        .await?;
        if a.dos_attributes & braid_vfs::dos::READONLY != 0 {
            return Err(NtStatus::CANNOT_DELETE);
        }
        if is_dir {
            let empty = blocking(move || Ok(h.read_dir()?.is_empty())).await?;
            if !empty {
                return Err(NtStatus::DIRECTORY_NOT_EMPTY);
            }
        }
        if lock(&open.path).is_root() {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    node.delete_pending.store(delete, Ordering::Release);
    if !delete {
        open.delete_on_close.store(false, Ordering::Release);
    }
    Ok(())
}

async fn rename(cx: &Ctx<'_>, open: &Open, replace: bool, root_directory: u64, name: &str) -> Result<(), NtStatus> {
    if root_directory != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(share) = open.tree.share().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    let name = name.strip_prefix('\\').unwrap_or(name);
    if name.contains(':') {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let to = SharePath::from_smb(name).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    let from = lock(&open.path).clone();
    if from.is_root() || to.is_root() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if from == to {
        return Ok(());
    }
    let backend = share.backend.clone();
    // A target that someone has open cannot be replaced (Windows answers ACCESS_DENIED).
    if replace {
        let (b, t) = (backend.clone(), to.clone());
        if let Ok(a) = blocking(move || b.stat(&t)).await {
            if cx.conn.server.files.existing((share.index, a.file_id)).is_some() {
                return Err(NtStatus::ACCESS_DENIED);
            }
        }
    }
    let (f, t) = (from.clone(), to.clone());
    blocking(move || backend.rename(&f, &t, replace)).await?;
    *lock(&open.path) = to;
    Ok(())
}
