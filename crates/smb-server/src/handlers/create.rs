//! CREATE (MS-SMB2 3.3.5.9): dispositions, directory options, access and share modes,
//! delete-on-close, the MxAc and QFid contexts, and named pipes on IPC$.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use braid_vfs::{CreateMode, OpenOptions, OpenOutcome, SharePath};
use smb_fscc::FileInfo;
use smb_wire::msg::create::{access, action, disposition, encode_contexts, options, CreateRequest, CreateResponse};
use smb_wire::{FileId, NtStatus};

use super::{blocking, file_info};
use crate::open::{DirCursor, Open, OpenKind};
use crate::pipeline::{Ctx, HResult};
use crate::tree::TreeKind;

/// FILE_CREATE_TREE_CONNECTION (MS-SMB2 2.2.13).
const CREATE_TREE_CONNECTION: u32 = 0x0000_0080;
/// FILE_RESERVE_OPFILTER (MS-SMB2 2.2.13).
const RESERVE_OPFILTER: u32 = 0x0010_0000;
/// FileAttributes a CREATE may carry (MS-SMB2 2.2.13, MS-FSCC 2.6): everything else, such as
/// DEVICE, VOLUME, INTEGRITY_STREAM and the high bits, is invalid.
const VALID_CREATE_ATTRIBUTES: u32 = 0x0000_7FB7;

/// Maps GENERIC_* and MAXIMUM_ALLOWED to specific rights (MS-SMB2 3.3.5.9, MS-DTYP 2.4.3).
fn map_generic(mut a: u32, maximal: u32) -> u32 {
    if a & access::GENERIC_READ != 0 {
        a |= access::FILE_GENERIC_READ;
    }
    if a & access::GENERIC_WRITE != 0 {
        a |= access::FILE_GENERIC_WRITE;
    }
    if a & access::GENERIC_EXECUTE != 0 {
        a |= access::FILE_GENERIC_EXECUTE;
    }
    if a & access::GENERIC_ALL != 0 {
        a |= access::FILE_ALL_ACCESS;
    }
    if a & access::MAXIMUM_ALLOWED != 0 {
        a |= maximal;
    }
    a & !(access::GENERIC_READ | access::GENERIC_WRITE | access::GENERIC_EXECUTE | access::GENERIC_ALL | access::MAXIMUM_ALLOWED)
}

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let req = CreateRequest::decode(&frame[cx.range.clone()]).map_err(super::bad("CREATE"))?;
    let tree = cx.tree.clone().ok_or(NtStatus::NETWORK_NAME_DELETED)?;
    let session = cx.session.clone().ok_or(NtStatus::USER_SESSION_DELETED)?;
    if req.impersonation_level > 3 {
        return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
    }
    // MS-SMB2 3.3.5.9: reserved access bits are an access failure, checked before the other
    // fields.
    if req.desired_access & 0x0CE0_FE00 != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // Create context names are at least four bytes (MS-SMB2 2.2.13.2).
    if req.contexts.iter().any(|c| c.name.len() < 4) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if req.create_disposition > disposition::OVERWRITE_IF
        || req.create_options & options::RESERVED_MASK != 0
        || (req.create_options & options::DIRECTORY_FILE != 0 && req.create_options & options::NON_DIRECTORY_FILE != 0)
        || req.file_attributes & !VALID_CREATE_ATTRIBUTES != 0
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // A temporary directory makes no sense (MS-FSA 2.1.5.1.2.1).
    if req.create_options & options::DIRECTORY_FILE != 0 && req.file_attributes & smb_fscc::FILE_ATTRIBUTE_TEMPORARY != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if session.open_count() >= cx.conn.server.config.max_opens_per_session {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let granted = map_generic(req.desired_access, tree.maximal_access);
    if granted & !tree.maximal_access & !access::ACCESS_SYSTEM_SECURITY != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if granted & access::ACCESS_SYSTEM_SECURITY != 0 {
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    let share = match &tree.kind {
        TreeKind::Ipc => return open_pipe(cx, &req, granted, out),
        TreeKind::Disk(s) => s.clone(),
    };
    // Tree connections in CREATE, open by id and filter oplocks are not offered (as Windows
    // answers over SMB2).
    if req.create_options & (options::OPEN_BY_FILE_ID | CREATE_TREE_CONNECTION | RESERVE_OPFILTER) != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    // A descriptor for the new file: validated before anything is created.
    let sec_desc = match req.context(b"SecD") {
        Some(d) => Some(smb_fscc::SecurityDescriptor::parse(d).map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?),
        None => None,
    };
    // EAs for a new or overwritten file: validated before anything is created.
    let eas = match req.context(b"ExtA") {
        Some(d) => Some(super::set_info::check_eas(smb_fscc::parse_full_ea_list(d).map_err(|_| NtStatus::INVALID_PARAMETER)?)?),
        None => None,
    };
    // Previous versions (snapshots) are not kept: no such version of the file exists.
    if req.context(b"TWrp").is_some() {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    // MS-SMB2 3.3.5.9: a name may not start with a separator.
    if req.name.starts_with('\\') {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let name = req.name.strip_suffix("::$DATA").unwrap_or(&req.name);
    if name.contains(':') {
        // Alternate data streams are not stored by this backend.
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    let path = SharePath::from_smb(name).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    let want_dir = req.create_options & options::DIRECTORY_FILE != 0;
    let delete_on_close = req.create_options & options::DELETE_ON_CLOSE != 0;
    if delete_on_close && granted & access::DELETE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (mode, truncate) = match req.create_disposition {
        disposition::SUPERSEDE => (CreateMode::OpenOrCreate, true),
        disposition::OPEN => (CreateMode::OpenExisting, false),
        disposition::CREATE => (CreateMode::CreateNew, false),
        disposition::OPEN_IF => (CreateMode::OpenOrCreate, false),
        disposition::OVERWRITE => (CreateMode::OpenExisting, true),
        _ => (CreateMode::OpenOrCreate, true),
    };
    if want_dir && truncate {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if path.is_root() && (mode == CreateMode::CreateNew || truncate || delete_on_close) {
        return Err(if mode == CreateMode::CreateNew { NtStatus::OBJECT_NAME_COLLISION } else { NtStatus::ACCESS_DENIED });
    }
    let opts = OpenOptions {
        read: granted & (access::FILE_READ_DATA | access::FILE_EXECUTE) != 0,
        write: granted & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0,
        create: mode,
        truncate: false,
        directory: want_dir,
        non_directory: req.create_options & options::NON_DIRECTORY_FILE != 0,
    };
    let backend = share.backend.clone();
    let p2 = path.clone();
    let (handle, outcome, attrs) = blocking(move || {
        let (h, outcome) = backend.open(&p2, opts)?;
        let attrs = h.attrs()?;
        Ok((Arc::<dyn braid_vfs::FileHandle>::from(h), outcome, attrs))
    })
    .await
    .map_err(|s| if s == NtStatus::ACCESS_DENIED && cx.tree.as_ref().is_some_and(|t| t.read_only) { NtStatus::ACCESS_DENIED } else { s })?;
    let is_dir = attrs.is_dir;
    let created = outcome == OpenOutcome::Created;
    // Names are case-insensitive: remember the on-disk spelling, which later renames, name
    // queries and path comparisons between opens rely on.
    let path = handle.opened_path().unwrap_or(path);
    // A read-only file can be opened for reading only, and cannot be deleted.
    if !created && attrs.dos_attributes & braid_vfs::dos::READONLY != 0 && !is_dir {
        if granted & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0 || truncate {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if delete_on_close {
            return Err(NtStatus::CANNOT_DELETE);
        }
    }
    if delete_on_close && is_dir && path.is_root() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let key = (share.index, attrs.file_id);
    let files = &cx.conn.server.files;
    let node = files.node(key);
    let volatile = cx.conn.server.new_file_id();
    if node.delete_pending.load(Ordering::Acquire) {
        files.release(key, volatile);
        return Err(NtStatus::DELETE_PENDING);
    }
    if let Err(st) = node.claim(volatile, granted, req.share_access) {
        files.release(key, volatile);
        return Err(st);
    }
    let mut attrs = attrs;
    let mut create_action = if created { action::CREATED } else { action::OPENED };
    if truncate && !created {
        let h = handle.clone();
        let set = req.file_attributes;
        let r = blocking(move || {
            h.set_len(0)?;
            if set & smb_fscc::SETTABLE_ATTRIBUTES != 0 {
                h.set_dos_attributes(set & smb_fscc::SETTABLE_ATTRIBUTES)?;
            }
            h.attrs()
        })
        .await;
        match r {
            Ok(a) => attrs = a,
            Err(st) => {
                files.release(key, volatile);
                return Err(st);
            }
        }
        create_action = if req.create_disposition == disposition::SUPERSEDE { action::SUPERSEDED } else { action::OVERWRITTEN };
    } else if created && req.file_attributes & smb_fscc::SETTABLE_ATTRIBUTES != 0 {
        let h = handle.clone();
        let set = req.file_attributes & smb_fscc::SETTABLE_ATTRIBUTES;
        if let Ok(a) = blocking(move || {
            h.set_dos_attributes(set)?;
            h.attrs()
        })
        .await
        {
            attrs = a;
        }
    }
    // The SecD descriptor applies to a new file only (MS-SMB2 2.2.13.2); sections it does not
    // carry keep the defaults. A SACL would need ACCESS_SYSTEM_SECURITY, never granted, so
    // it is not stored. Failing to store is logged, not fatal: the file exists by now.
    if let Some(sd) = sec_desc.filter(|_| created) {
        let sections = sd.present_sections() & !smb_fscc::SACL_SECURITY_INFORMATION;
        if sections != 0 {
            let h = handle.clone();
            if let Err(st) = blocking(move || super::query_info::store_sd(h.as_ref(), &sd, sections)).await {
                tracing::debug!(status = ?st, "storing the create-time security descriptor failed");
            }
        }
    }
    if let Some(eas) = eas.filter(|_| created || truncate) {
        let h = handle.clone();
        if let Err(st) = blocking(move || super::set_info::apply_eas(h.as_ref(), &eas)).await {
            files.release(key, volatile);
            return Err(super::set_info::ea_status(st));
        }
    }
    // The allocation size applies to a new or overwritten file (MS-SMB2 2.2.13.2.4); report
    // the space actually reserved.
    if (created || truncate) && !is_dir {
        if let Some(alloc) = req.context(b"AlSi").and_then(|d| d.get(..8)) {
            let size = u64::from_le_bytes(alloc.try_into().unwrap_or([0; 8]));
            let h = handle.clone();
            if let Ok(a) = blocking(move || {
                h.allocate(size)?;
                h.attrs()
            })
            .await
            {
                attrs = a;
            }
        }
    }
    let id = FileId { persistent: volatile, volatile };
    let open = Arc::new(Open {
        id,
        tree: tree.clone(),
        path: Mutex::new(path),
        kind: OpenKind::File { handle, is_dir, key, node },
        access: granted,
        delete_on_close: AtomicBool::new(delete_on_close),
        dir: tokio::sync::Mutex::new(DirCursor::default()),
        position: AtomicU64::new(0),
        mode: AtomicU64::new(u64::from(req.create_options & 0x3E)),
        channel_seq: Default::default(),
    });
    session.add_open(open.clone());
    cx.file_id_out = Some(id);

    let info = file_info(&attrs, &open);
    let mut ctxs: Vec<(&[u8], Vec<u8>)> = Vec::new();
    if req.context(b"MxAc").is_some() {
        let mut d = Vec::with_capacity(8);
        d.extend_from_slice(&0u32.to_le_bytes());
        d.extend_from_slice(&tree.maximal_access.to_le_bytes());
        ctxs.push((b"MxAc", d));
    }
    if req.context(b"QFid").is_some() {
        let mut d = vec![0u8; 32];
        d[..8].copy_from_slice(&attrs.file_id.to_le_bytes());
        d[16..24].copy_from_slice(&(share.index as u64 + 1).to_le_bytes());
        ctxs.push((b"QFid", d));
    }
    CreateResponse {
        oplock_level: 0,
        flags: 0,
        create_action,
        creation_time: info.creation_time,
        last_access_time: info.last_access_time,
        last_write_time: info.last_write_time,
        change_time: info.change_time,
        allocation_size: info.allocation_size,
        end_of_file: info.end_of_file,
        file_attributes: info.wire_attributes(),
        file_id: id,
        contexts: encode_contexts(&ctxs),
    }
    .encode(out);
    Ok(NtStatus::SUCCESS)
}

/// Opens a named pipe on IPC$ (srvsvc, wkssvc).
fn open_pipe(cx: &mut Ctx<'_>, req: &CreateRequest<'_>, granted: u32, out: &mut Vec<u8>) -> HResult {
    let Some(kind) = dcerpc::pipe_kind(&req.name) else {
        tracing::debug!(pipe = %req.name, "unknown pipe");
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    };
    let tree = cx.tree.clone().ok_or(NtStatus::NETWORK_NAME_DELETED)?;
    let session = cx.session.clone().ok_or(NtStatus::USER_SESSION_DELETED)?;
    let volatile = cx.conn.server.new_file_id();
    let id = FileId { persistent: volatile, volatile };
    let open = Arc::new(Open {
        id,
        tree,
        path: Mutex::new(SharePath::default()),
        kind: OpenKind::Pipe(Mutex::new(dcerpc::Pipe::new(kind))),
        access: granted,
        delete_on_close: AtomicBool::new(false),
        dir: tokio::sync::Mutex::new(DirCursor::default()),
        position: AtomicU64::new(0),
        mode: AtomicU64::new(0),
        channel_seq: Default::default(),
    });
    session.add_open(open);
    cx.file_id_out = Some(id);
    let info = FileInfo { attributes: smb_fscc::FILE_ATTRIBUTE_NORMAL, allocation_size: 4096, ..FileInfo::default() };
    CreateResponse {
        oplock_level: 0,
        flags: 0,
        create_action: action::OPENED,
        creation_time: 0,
        last_access_time: 0,
        last_write_time: 0,
        change_time: 0,
        allocation_size: info.allocation_size,
        end_of_file: 0,
        file_attributes: info.attributes,
        file_id: id,
        contexts: Vec::new(),
    }
    .encode(out);
    Ok(NtStatus::SUCCESS)
}
