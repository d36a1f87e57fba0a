//! CREATE (MS-SMB2 3.3.5.9): dispositions, directory options, access and share modes,
//! delete-on-close, the MxAc and QFid contexts, and named pipes on IPC$; durable handle
//! contexts in `durable`.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use braid_filestate::{Access, ShareMode};
use braid_vfs::{CreateMode, OpenOptions, OpenOutcome, SharePath};
use smb_fscc::FileInfo;
use smb_wire::msg::create::{access, action, disposition, encode_contexts, oplock, options, CreateRequest, CreateResponse};
use smb_wire::msg::oplock::{lease_flags, LeaseContext};
use smb_wire::{dialect, FileId, NtStatus};

use super::{blocking, file_info};
use crate::breaks::Notices;
use crate::locks::{is_stat_open, FileKey, FileNode, FileTable, STREAM_HOLD};
use crate::open::{DirCursor, Open, OpenKind};
use crate::oplocks::{Event, LeaseId, Owner, Reach, Requester};
use crate::request::{Ctx, HResult, Reply};
use crate::server::Share;
use crate::session::Session;
use crate::status_map::state_status;
use crate::sync::lock;
use crate::tree::{Tree, TreeKind};

mod aapl;
mod acl;
mod app_instance;
mod durable;
mod stream;

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
    // Durable contexts mean nothing on IPC$; a reconnect ignores the other fields.
    let ask = if tree.share().is_some() { durable::parse(&req)? } else { durable::Ask::Nothing };
    if let durable::Ask::Reconnect { file_id, create_guid } = ask {
        return durable::reconnect(cx, &req, (&tree, &session), (file_id, create_guid), out).await;
    }
    // Before the durable request (MS-SMB2 3.3.5.9.10): the old instance's opens go first.
    if let Some(app) = tree.share().map(|_| app_instance::parse(cx, &req)).transpose()?.flatten() {
        app_instance::close_prior(cx, &req, app, &tree, &session).await?;
    }
    let reserved = match durable::replay(cx, &req, ask, (&tree, &session), out).await {
        Ok(r) => r,
        Err(answered) => return answered,
    };
    let result = open_new(cx, &req, ask, (&tree, &session), reserved, out).await;
    if let Some(r) = reserved {
        // A no-op once the open was recorded; otherwise the CreateGuid is free again.
        cx.conn.server.replay.release(r);
    }
    result
}

/// A CREATE that opens (or creates) a file, directory or pipe; `reserved`: its CreateGuid,
/// recorded for replays once it succeeds.
async fn open_new(
    cx: &mut Ctx<'_>,
    req: &CreateRequest<'_>,
    ask: durable::Ask,
    (tree, session): (&Arc<Tree>, &Arc<Session>),
    reserved: Option<crate::replay::Reservation>,
    out: &mut Vec<u8>,
) -> HResult {
    let (granted, lease_req) = check_request(cx, req, tree, session)?;
    let share = match &tree.kind {
        TreeKind::Ipc => return open_pipe(cx, req, granted, out),
        TreeKind::Disk(s) => s.clone(),
    };
    let plan = plan_disk_open(req, granted)?;
    let aapl_ctx = aapl::answer(cx, req, &share).await?;
    let (opened, key, file_key) = open_disk(cx, &share, &plan, granted).await?;
    let granted = acl::check(&opened, req.desired_access, granted)?;
    let server = cx.conn.server.clone();
    let files = &server.files;
    let volatile = cx.conn.server.new_file_id();
    // A lease key names one file (MS-SMB2 3.3.5.9.11), checked for directories too.
    if lease_req.is_some_and(|l| files.lease_file((session.client_guid, l.key)).is_some_and(|k| k != key)) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // Directories get no oplock, and a lease only where the connection negotiated directory
    // leasing (3.x, offered by the client) and the share allows it.
    let negotiated = cx.conn.negotiated.get().map_or(0, |n| n.server_capabilities);
    let dir_lease = negotiated & smb_wire::msg::negotiate::cap::DIRECTORY_LEASING != 0 && share.config.directory_leases;
    let lease_id = lease_req.filter(|_| !opened.is_dir() || dir_lease).map(|l| (session.client_guid, l.key));
    let who = Requester { open: volatile, lease: lease_id };
    let flags = (plan.truncate, plan.delete_on_close, reserved.is_some());
    let node = claim_after_breaks(cx, out, key, who, granted, req.share_access, flags).await;
    let node = admit(files, node, (key, file_key), volatile)?;
    let (attrs, create_action) = match apply_create_settings(req, &plan, &opened).await {
        Ok(r) => r,
        Err(st) => {
            files.release(key, volatile);
            file_key.map(|k| files.release_stream_hold(k, volatile));
            return Err(st);
        }
    };
    let id = FileId { persistent: volatile, volatile };
    let owner = Owner { session: session.id, conn: cx.conn.id, encrypt: tree.encrypt };
    let lease = lease_req.zip(lease_id);
    let (oplock_level, lease_ctx) = grant_caching(files, &node, key, Reach { owner, file_id: id }, req.oplock_level, lease, opened.is_dir());
    let Opened { handle, path, created, named, .. } = opened;
    let open = Arc::new(Open {
        id,
        tree: tree.clone(),
        path: Mutex::new(path),
        kind: OpenKind::File { handle, is_dir: attrs.is_dir, key, node },
        access: granted,
        delete_on_close: AtomicBool::new(plan.delete_on_close),
        dir: tokio::sync::Mutex::new(DirCursor::default()),
        position: AtomicU64::new(0),
        mode: AtomicU64::new(u64::from(req.create_options & 0x3E)),
        channel_seq: Default::default(),
        lease: lease_id.filter(|_| oplock_level == oplock::LEASE),
        written: AtomicBool::new(false),
    });
    if !session.add_open(open.clone()) {
        // The session ended while this CREATE waited: nothing else would close the open.
        crate::open::close_open(&server, &open).await;
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    if let Some(r) = reserved {
        server.replay.opened(r, session.id, volatile, create_action);
    }
    if open.is_dir() && open.lease.is_some() {
        lease_directory(&server, &share, &open).await;
    }
    announce_create(&cx.conn.server, share.index, &open, (created, named), create_action).send(&cx.conn.server).await;
    // A stream open is not made durable: a reconnect reopens the file by name alone.
    let ask = if plan.stream.is_some() { durable::Ask::Nothing } else { ask };
    let durable_ctx = durable::grant(cx, ask, &open, session, (share.index, create_action));
    if durable_ctx.is_some() {
        app_instance::record(&server, &open, session, app_instance::parse(cx, req).ok().flatten());
    }
    // After the app instance id is on the grant: the persistent record carries it.
    durable::persist(cx, &open, session, req.share_access).await?;
    let answer = Answer { oplock_level, create_action, lease_ctx, durable_ctx, aapl_ctx };
    encode_response(out, req, tree, share.index, &attrs, &open, answer);
    Ok(Reply { file_id: Some(id), ..Reply::success() })
}

/// Opens the file (or stream) a disk CREATE names: the open, its file-state key and, for a
/// stream, its file's key (the stream open holds that file too). An open of a file with
/// DELETE access is refused while a stream of it does not share DELETE.
async fn open_disk(cx: &Ctx<'_>, share: &Share, plan: &DiskPlan, granted: u32) -> Result<(Opened, FileKey, Option<FileKey>), NtStatus> {
    let opened = match &plan.stream {
        Some(name) => stream::open(share, plan, granted, name, acl::token(cx)).await?,
        None => open_in_backend(cx, share, plan, granted).await?,
    };
    if plan.stream.is_none() && granted & access::DELETE != 0 {
        stream::check_delete_shared(&cx.conn.server.files, share.index, &opened).await?;
    }
    let key = stream::key(share.index, opened.attrs.file_id, plan.stream.as_deref());
    let file_key = plan.stream.as_ref().map(|_| (share.index, opened.attrs.file_id));
    Ok((opened, key, file_key))
}

/// The open's claim, unless its file's deletion is pending; a stream open also holds its
/// file (`file_key`). On failure nothing stays claimed.
fn admit(
    files: &FileTable,
    node: Result<Arc<FileNode>, NtStatus>,
    (key, file_key): (FileKey, Option<FileKey>),
    open: u64,
) -> Result<Arc<FileNode>, NtStatus> {
    let r = node.and_then(|n| if n.is_delete_pending() { Err(NtStatus::DELETE_PENDING) } else { Ok(n) });
    let r = r.and_then(|n| file_key.map_or(Ok(()), |k| files.hold_for_stream(k, open)).map(|()| n));
    if r.is_err() {
        files.release(key, open);
    }
    r
}

/// Announces what a CREATE changed: a new name, or the data and attributes an overwrite or
/// supersede replaced (MS-FSA 2.1.5.1.2.1: modified, size, last write and attributes).
/// Registers a leased directory open, and asks the backend to watch the directory so that
/// changes made outside Braid break the lease too (before the client hears of its lease).
async fn lease_directory(server: &Arc<crate::server::ServerState>, share: &Arc<crate::server::Share>, open: &Arc<Open>) {
    server.dir_leases.register(server, share.index, open);
    let (backend, dir) = (share.backend.clone(), lock(&open.path).clone());
    let _ = crate::storage::blocking(move || {
        backend.watch_dir(&dir);
        Ok(())
    })
    .await;
}

fn announce_create(server: &crate::server::ServerState, share: usize, open: &Open, (created, named): (bool, bool), create_action: u32) -> Notices {
    use braid_vfs::{what, Change, ChangeKind};
    let origin = crate::open::open_origin(open);
    let path = lock(&open.path).clone();
    if open.handle().is_some_and(|h| h.stream_name().is_some()) {
        // A stream's CREATE: its file's name if that is new, then the stream's change.
        let mut breaks = Notices::default();
        if named {
            breaks.add(crate::changes::name(server, share, &path, ChangeKind::Added, false, origin));
        }
        let kind = if created { ChangeKind::Added } else { ChangeKind::Modified };
        if created || create_action == action::OVERWRITTEN || create_action == action::SUPERSEDED {
            breaks.add(crate::changes::changed(server, share, &Change { path, kind, is_dir: false, what: what::STREAMS }, origin));
        }
        breaks
    } else if created {
        crate::changes::name(server, share, &path, braid_vfs::ChangeKind::Added, open.is_dir(), origin)
    } else if create_action == action::OVERWRITTEN || create_action == action::SUPERSEDED {
        crate::changes::modified(server, share, &path, false, what::SIZE | what::LAST_WRITE | what::ATTRIBUTES, origin)
    } else {
        Notices::default()
    }
}

/// The checks of a CREATE that come before its name is looked at (MS-SMB2 3.3.5.9):
/// returns the access granted and the lease asked for, if any.
fn check_request(cx: &Ctx<'_>, req: &CreateRequest<'_>, tree: &Tree, session: &Session) -> Result<(u32, Option<LeaseContext>), NtStatus> {
    if req.impersonation_level > 3 {
        return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
    }
    // Reserved access bits are an access failure, checked before the other fields.
    if req.desired_access & 0x0CE0_FE00 != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // Create context names are at least four bytes (MS-SMB2 2.2.13.2).
    if req.contexts.iter().any(|c| c.name.len() < 4) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // A lease request (MS-SMB2 2.2.13.2.8, 2.2.13.2.10): only with OplockLevel LEASE, from
    // 2.1 on; v2 contexts only mean v2 in 3.x. A wrong size is refused.
    let lease_req = match req.context(b"RqLs") {
        Some(d) if req.oplock_level == oplock::LEASE && cx.conn.dialect() >= dialect::SMB210 => {
            let mut l = LeaseContext::decode(d).map_err(|_| NtStatus::INVALID_PARAMETER)?;
            if !dialect::is_smb3(cx.conn.dialect()) {
                l.v2 = None;
            }
            Some(l)
        }
        _ => None,
    };
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
        cx.conn.server.admission.hit(braid_admission::Limit::OpensPerSession, cx.conn.peer.ip());
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let granted = map_generic(req.desired_access, tree.maximal_access);
    if granted & !tree.maximal_access & !access::ACCESS_SYSTEM_SECURITY != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if granted & access::ACCESS_SYSTEM_SECURITY != 0 {
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    Ok((granted, lease_req))
}

/// What a disk CREATE is to do, every field checked before anything is created.
struct DiskPlan {
    path: SharePath,
    opts: OpenOptions,
    truncate: bool,
    delete_on_close: bool,
    /// A file this CREATE makes gets FILE_ATTRIBUTE_READONLY: with delete on close, that
    /// is STATUS_CANNOT_DELETE (MS-FSA 2.1.5.1.2.1), and no file is left behind.
    readonly_new: bool,
    sec_desc: Option<smb_fscc::SecurityDescriptor>,
    eas: Option<Vec<smb_fscc::FullEa>>,
    /// The named stream to open, if the name has one.
    stream: Option<String>,
}

/// Checks a disk CREATE's options, contexts and name, and decides how to open.
fn plan_disk_open(req: &CreateRequest<'_>, granted: u32) -> Result<DiskPlan, NtStatus> {
    // Tree connections in CREATE, open by id and filter oplocks are not offered (as Windows
    // answers over SMB2).
    if req.create_options & (options::OPEN_BY_FILE_ID | CREATE_TREE_CONNECTION | RESERVE_OPFILTER) != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let sec_desc = match req.context(b"SecD") {
        Some(d) => Some(smb_fscc::SecurityDescriptor::parse(d).map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?),
        None => None,
    };
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
    let (path, stream, main_data) = split_name(&req.name)?;
    let want_dir = req.create_options & options::DIRECTORY_FILE != 0;
    // A stream, the main one named too, is never a directory.
    if want_dir && (stream.is_some() || main_data) {
        return Err(NtStatus::NOT_A_DIRECTORY);
    }
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
    let readonly_new = !want_dir && req.file_attributes & braid_vfs::dos::READONLY != 0;
    if readonly_new && delete_on_close && mode == CreateMode::CreateNew {
        return Err(NtStatus::CANNOT_DELETE);
    }
    if path.is_root() && stream.is_none() && (mode == CreateMode::CreateNew || truncate || delete_on_close) {
        return Err(if mode == CreateMode::CreateNew { NtStatus::OBJECT_NAME_COLLISION } else { NtStatus::ACCESS_DENIED });
    }
    let opts = OpenOptions {
        read: granted & (access::FILE_READ_DATA | access::FILE_EXECUTE) != 0,
        write: granted & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0,
        create: mode,
        truncate: false,
        directory: want_dir,
        non_directory: req.create_options & options::NON_DIRECTORY_FILE != 0 || main_data,
    };
    Ok(DiskPlan { path, opts, truncate, delete_on_close, readonly_new, sec_desc, eas, stream })
}

/// The CREATE name as the file's path, the named stream (if any) and whether the main
/// stream was named (`::$DATA`).
fn split_name(name: &str) -> Result<(SharePath, Option<String>, bool), NtStatus> {
    let name = resolve_dot_dot(name)?;
    let parts = smb_fscc::split_stream_path(&name).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    if parts.stream.is_some_and(|s| s.len() > braid_vfs::MAX_STREAM_NAME_LEN) {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    let path = SharePath::from_smb(parts.file).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    Ok((path, parts.stream.map(str::to_owned), parts.main_data))
}

/// Resolves `..` components the way Windows' and Samba's servers do (`dir\..\x` names
/// `x`), by the name alone; one that would climb above the share root is
/// OBJECT_PATH_SYNTAX_BAD. What is left goes through `SharePath`'s checks as any name.
fn resolve_dot_dot(name: &str) -> Result<std::borrow::Cow<'_, str>, NtStatus> {
    if !name.split('\\').any(|c| c == "..") {
        return Ok(std::borrow::Cow::Borrowed(name));
    }
    let mut kept: Vec<&str> = Vec::new();
    for c in name.split('\\') {
        if c == ".." {
            kept.pop().ok_or(NtStatus::OBJECT_PATH_SYNTAX_BAD)?;
        } else {
            kept.push(c);
        }
    }
    Ok(std::borrow::Cow::Owned(kept.join("\\")))
}

/// A file or directory the backend opened (or created) for a CREATE.
struct Opened {
    handle: Arc<dyn braid_vfs::FileHandle>,
    created: bool,
    /// Whether a new name appeared: the file was created (by a stream's CREATE too).
    named: bool,
    attrs: braid_vfs::FileAttrs,
    /// The on-disk spelling of the name.
    path: SharePath,
    /// What the object's stored DACL grants the session (`acl.rs`), looked up in the same
    /// trip to the blocking pool as the open; None: nothing stored, or not looked up.
    acl_allowed: Option<u32>,
}

impl Opened {
    fn is_dir(&self) -> bool {
        self.attrs.is_dir
    }
}

/// Opens or creates the file, and refuses what the opened file does not allow (writing or
/// deleting a read-only file, deleting the root).
async fn open_in_backend(cx: &Ctx<'_>, share: &Share, plan: &DiskPlan, granted: u32) -> Result<Opened, NtStatus> {
    let backend = share.backend.clone();
    let (p2, opts) = (plan.path.clone(), plan.opts);
    let token = acl::token(cx);
    let (handle, outcome, attrs, acl_allowed) = blocking(move || {
        let (h, outcome) = backend.open(&p2, opts)?;
        let attrs = h.attrs()?;
        let h = Arc::<dyn braid_vfs::FileHandle>::from(h);
        // Stored ACLs: checked for an existing object, inherited by a new one.
        let path = h.opened_path().unwrap_or(p2);
        let acl_allowed = match outcome {
            OpenOutcome::Opened => acl::allowed(h.as_ref(), backend.as_ref(), &path, &token),
            OpenOutcome::Created => {
                acl::inherit(h.as_ref(), backend.as_ref(), &path, attrs.is_dir, &token);
                None
            }
        };
        Ok((h, outcome, attrs, acl_allowed))
    })
    .await
    .map_err(|s| if s == NtStatus::ACCESS_DENIED && cx.tree.as_ref().is_some_and(|t| t.read_only) { NtStatus::ACCESS_DENIED } else { s })?;
    let created = outcome == OpenOutcome::Created;
    // Names are case-insensitive: remember the on-disk spelling, which later renames, name
    // queries and path comparisons between opens rely on.
    let path = handle.opened_path().unwrap_or_else(|| plan.path.clone());
    // A read-only file can be opened for reading only, and cannot be deleted.
    if !created && attrs.dos_attributes & braid_vfs::dos::READONLY != 0 && !attrs.is_dir {
        if granted & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0 || plan.truncate {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if plan.delete_on_close {
            return Err(NtStatus::CANNOT_DELETE);
        }
    }
    if plan.delete_on_close && attrs.is_dir && path.is_root() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if created && plan.delete_on_close && plan.readonly_new {
        let (backend, p) = (share.backend.clone(), path.clone());
        drop(handle);
        blocking(move || backend.remove(&p)).await?;
        return Err(NtStatus::CANNOT_DELETE);
    }
    Ok(Opened { handle, created, named: created, attrs, path, acl_allowed })
}

/// What a CREATE sets on the file it opened, now that its share modes passed: truncation
/// (or the attributes of a new file), the SecD descriptor, EAs and the allocation size.
/// Returns the file's attributes afterwards and the CreateAction to answer.
async fn apply_create_settings(req: &CreateRequest<'_>, plan: &DiskPlan, opened: &Opened) -> Result<(braid_vfs::FileAttrs, u32), NtStatus> {
    let (created, truncate) = (opened.created, plan.truncate);
    let mut attrs = opened.attrs.clone();
    let mut create_action = if created { action::CREATED } else { action::OPENED };
    let set = req.file_attributes & smb_fscc::SETTABLE_ATTRIBUTES;
    if truncate && !created {
        let h = opened.handle.clone();
        // Overwriting the file replaces the attributes (MS-FSA 2.1.5.1.2.1): the sparse
        // mark goes, and so do its named streams. Overwriting a stream touches that alone.
        let main = plan.stream.is_none();
        let unsparse = main && attrs.dos_attributes & braid_vfs::dos::SPARSE_FILE != 0;
        attrs = blocking(move || {
            h.set_len(0)?;
            if unsparse {
                h.set_sparse(false)?;
            }
            for (name, _) in if main { h.streams()? } else { Vec::new() } {
                h.write_stream(&name, None)?;
            }
            if set != 0 {
                h.set_dos_attributes(set)?;
            }
            h.attrs()
        })
        .await?;
        create_action = if req.create_disposition == disposition::SUPERSEDE { action::SUPERSEDED } else { action::OVERWRITTEN };
    } else if created && set != 0 {
        // A new file is ARCHIVE whatever else it is created with (as Windows and Samba).
        let set = if opened.is_dir() { set } else { set | smb_fscc::FILE_ATTRIBUTE_ARCHIVE };
        let h = opened.handle.clone();
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
    if let Some(sd) = plan.sec_desc.clone().filter(|_| created) {
        let sections = sd.present_sections() & !smb_fscc::SACL_SECURITY_INFORMATION;
        if sections != 0 {
            let h = opened.handle.clone();
            if let Err(st) = blocking(move || super::query_info::store_sd(h.as_ref(), &sd, sections)).await {
                tracing::debug!(status = ?st, "storing the create-time security descriptor failed");
            }
        }
    }
    if let Some(eas) = plan.eas.clone().filter(|_| created || truncate) {
        let h = opened.handle.clone();
        blocking(move || super::set_info::apply_eas(h.as_ref(), &eas)).await.map_err(super::set_info::ea_status)?;
    }
    // The allocation size applies to a new or overwritten file (MS-SMB2 2.2.13.2.4); report
    // the space actually reserved.
    if let Some(alloc) = req.context(b"AlSi").and_then(|d| d.get(..8)).filter(|_| (created || truncate) && !opened.is_dir()) {
        let size = u64::from_le_bytes(alloc.try_into().unwrap_or([0; 8]));
        let h = opened.handle.clone();
        if let Ok(a) = blocking(move || {
            h.allocate(size)?;
            h.attrs()
        })
        .await
        {
            attrs = a;
        }
    }
    Ok((attrs, create_action))
}

/// Grants the open its oplock or lease (MS-SMB2 3.3.5.9.8, 3.3.5.9.11), now that it is
/// sure to exist: the OplockLevel to answer and the lease response context, if any.
fn grant_caching(
    files: &FileTable,
    node: &FileNode,
    key: FileKey,
    reach: Reach,
    requested: u8,
    lease: Option<(LeaseContext, LeaseId)>,
    is_dir: bool,
) -> (u8, Option<Vec<u8>>) {
    let volatile = reach.file_id.volatile;
    let Some((l, lid)) = lease else {
        if is_dir || requested == oplock::NONE || requested == oplock::LEASE {
            return (oplock::NONE, None);
        }
        // A stream open's hold on its file is not an open of the file.
        let others = node.other_opens(|o, _| o == volatile || o & STREAM_HOLD != 0);
        return (node.oplocks.grant_oplock(volatile, reach, requested, others), None);
    };
    let mine = node.oplocks.lease_opens(lid);
    // Stat opens without a lease of their own do not stop write caching.
    let others = node.other_opens(|o, acc| {
        o == volatile
            || o & STREAM_HOLD != 0
            || mine.contains(&o)
            || (is_stat_open(acc.0 & !access::READ_CONTROL) && node.oplocks.lease_of(o).is_none())
    });
    let g = node.oplocks.grant_lease(volatile, reach, lid, &l, others, is_dir);
    if files.bind_lease(lid, key).is_err() {
        tracing::debug!("lease key raced onto another file");
    }
    let mut flags = 0;
    if g.breaking_to.is_some() {
        flags |= lease_flags::BREAK_IN_PROGRESS;
    }
    if g.info.parent.is_some() {
        flags |= lease_flags::PARENT_LEASE_KEY_SET;
    }
    // The answer has the lease's version, whatever version this request used.
    let v2 = g.info.v2.then(|| (g.info.parent.unwrap_or([0; 16]), g.epoch));
    (oplock::LEASE, Some(LeaseContext { key: g.key.1, state: g.state.0, flags, v2 }.encode()))
}

/// What a CREATE decided, for its response.
struct Answer {
    oplock_level: u8,
    create_action: u32,
    lease_ctx: Option<Vec<u8>>,
    /// The DHnQ or DH2Q response context when the open was made durable.
    durable_ctx: Option<(&'static [u8], Vec<u8>)>,
    /// The `AAPL` response context (macOS clients).
    aapl_ctx: Option<Vec<u8>>,
}

/// Encodes the CREATE response with the MxAc, QFid, lease, durable and AAPL contexts asked
/// for.
fn encode_response(
    out: &mut Vec<u8>,
    req: &CreateRequest<'_>,
    tree: &Tree,
    share_index: usize,
    attrs: &braid_vfs::FileAttrs,
    open: &Open,
    a: Answer,
) {
    let info = file_info(attrs, open);
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
        d[16..24].copy_from_slice(&(share_index as u64 + 1).to_le_bytes());
        ctxs.push((b"QFid", d));
    }
    if let Some(d) = a.lease_ctx {
        ctxs.push((b"RqLs", d));
    }
    if let Some((name, d)) = a.durable_ctx {
        ctxs.push((name, d));
    }
    if let Some(d) = a.aapl_ctx {
        ctxs.push((smb_wire::msg::aapl::NAME, d));
    }
    CreateResponse {
        oplock_level: a.oplock_level,
        flags: 0,
        create_action: a.create_action,
        creation_time: info.creation_time,
        last_access_time: info.last_access_time,
        last_write_time: info.last_write_time,
        change_time: info.change_time,
        allocation_size: info.allocation_size,
        end_of_file: info.end_of_file,
        file_attributes: info.wire_attributes(),
        file_id: open.id,
        contexts: encode_contexts(&ctxs),
    }
    .encode(out);
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
        lease: None,
        written: AtomicBool::new(false),
    });
    if !session.add_open(open) {
        return Err(NtStatus::USER_SESSION_DELETED);
    }
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
    Ok(Reply { file_id: Some(id), ..Reply::success() })
}

/// Breaks what the new open conflicts with, waits for the acknowledgments, then checks
/// share modes and records the open on the file's node. An open that would meet a sharing
/// violation breaks only batch oplocks and handle caching (their holders may close cached
/// handles) and is checked once more; exclusive oplocks stay. So does an open that deletes
/// on close: the name is going, and holders of cached handles must let go of them (what
/// Windows does; smbtorture's smb2.lease.unlink). A stat open (attributes and SYNCHRONIZE
/// only, not truncating) breaks nothing. Returns the node the open is on.
async fn claim_after_breaks(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    key: crate::locks::FileKey,
    who: Requester,
    granted: u32,
    share_access: u32,
    (truncate, delete_on_close, outlive): (bool, bool, bool),
) -> Result<Arc<FileNode>, NtStatus> {
    let server = cx.conn.server.clone();
    let files = &server.files;
    let stat = is_stat_open(granted) && !truncate;
    // For leases READ_CONTROL is a stat right too (what Windows does; not for oplocks).
    let spare_leases = is_stat_open(granted & !access::READ_CONTROL) && !truncate;
    // Windows order: the open's own breaks first (W, exclusive and batch oplocks), then,
    // if share modes still conflict, handle caching, then the share check itself.
    let mut step = 0;
    loop {
        let node = files.node(key);
        // A file whose deletion is pending takes no new opens, and breaks nothing for one
        // (MS-FSA checks DeletePending before oplocks; smbtorture smb2.oplock.doc).
        if node.is_delete_pending() {
            return Err(NtStatus::DELETE_PENDING);
        }
        if !stat && step < 2 {
            let conflict = node.check_share(Access(granted), ShareMode(share_access)).is_err();
            let event = match step {
                0 => Event::Open { truncate, spare_leases, share_conflict: conflict, retry: false },
                _ if conflict => Event::SharingViolation,
                _ if delete_on_close => Event::Namespace,
                _ => {
                    step = 2;
                    continue;
                }
            };
            step += 1;
            let acted = wait_breaks(cx, out, &node, who, event, outlive).await?;
            // Every other open may have closed while we waited, dropping that node.
            if acted && !Arc::ptr_eq(&node, &files.node(key)) {
                step = 0;
            }
            continue;
        }
        return node.claim(who.open, Access(granted), ShareMode(share_access)).map(|()| node).map_err(state_status);
    }
}

/// How often the channels of sent breaks are asked whether TCP has delivered them.
const DELIVERY_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Starts the breaks `event` calls for and waits until none is pending (acknowledged,
/// closed or timed out), going async (STATUS_PENDING) when it has to wait. CANCEL or the
/// loss of the connection ends the wait with STATUS_CANCELLED, but with `outlive` (a CREATE
/// the client may replay on another channel) the loss of this channel does not while the
/// session has another: the open is made, and the replay finds it (as Samba does). Returns
/// whether anything was broken or waited for.
pub(super) async fn wait_breaks(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    node: &Arc<FileNode>,
    who: Requester,
    event: Event,
    outlive: bool,
) -> Result<bool, NtStatus> {
    use crate::breaks::DeliveryState;
    let server = cx.conn.server.clone();
    let mut registered: Option<u64> = None;
    let cancel = Arc::new(tokio::sync::Notify::new());
    let mut acted = false;
    // Breaks awaiting an acknowledgment: the channels tried, and the delivery not yet
    // confirmed by the client's TCP.
    let mut sent: Vec<(crate::oplocks::Notice, Vec<u64>, Option<crate::breaks::Delivery>)> = Vec::new();
    let mut tick = tokio::time::interval(DELIVERY_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = loop {
        // Subscribe before looking, so an acknowledgment between the two is not missed.
        let changed = node.oplocks.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        // After the first look, an open is a retry (it waits for any break in progress).
        let event = match event {
            Event::Open { truncate, spare_leases, share_conflict, .. } if acted => {
                Event::Open { truncate, spare_leases, share_conflict, retry: true }
            }
            e => e,
        };
        let b = node.oplocks.start_breaks(who, event, tokio::time::Instant::now());
        acted |= !b.notices.is_empty() || b.wait_until.is_some();
        for n in b.notices {
            let mut tried = Vec::new();
            let d = crate::breaks::send_notice(&server, &n, &mut tried).await;
            if n.needs_ack() {
                sent.push((n, tried, d));
            }
        }
        let Some(until) = b.wait_until else { break Ok(acted) };
        if registered.is_none() {
            match super::go_pending(cx, out, &cancel).await {
                Ok(mid) => registered = Some(mid),
                Err(st) => break Err(st),
            }
        }
        let lost = cx.conn.is_closed();
        if lost && !(outlive && other_channel_alive(cx)) {
            break Err(NtStatus::CANCELLED);
        }
        tokio::select! {
            _ = &mut changed => {}
            _ = tokio::time::sleep_until(until) => node.oplocks.expire_now(),
            // A break the client's TCP never acknowledged went to a dead channel (the
            // server may not know yet): that channel is closed, as the client would find
            // it anyway, and the break goes again on the session's next channel.
            _ = tick.tick(), if sent.iter().any(|s| s.2.is_some()) => {
                let now = tokio::time::Instant::now();
                for (n, tried, delivery) in sent.iter_mut() {
                    let Some(d) = delivery else { continue };
                    match d.check(now) {
                        DeliveryState::Acked => *delivery = None,
                        DeliveryState::Pending => {}
                        DeliveryState::Lost(conn) => {
                            tracing::warn!(conn = conn.id(), peer = %conn.peer(), "a break notification was not acknowledged by TCP; closing the channel and trying the next");
                            conn.abort();
                            *delivery = crate::breaks::send_notice(&server, n, tried).await;
                        }
                        DeliveryState::Gone => *delivery = crate::breaks::send_notice(&server, n, tried).await,
                    }
                }
            }
            // Once the channel is lost, nothing can cancel the request but the session's end.
            _ = cancel.notified(), if !lost => {
                if !(outlive && cx.conn.is_closed() && other_channel_alive(cx)) {
                    break Err(NtStatus::CANCELLED);
                }
            }
            _ = tokio::time::sleep(DELIVERY_CHECK), if lost => {}
        }
    };
    if let Some(mid) = registered {
        lock(&cx.conn.pending).remove(&mid);
    }
    result
}

/// Whether the request's session has a live channel besides this connection.
fn other_channel_alive(cx: &Ctx<'_>) -> bool {
    let Some(session) = &cx.session else { return false };
    let server = &cx.conn.server;
    session
        .channel_ids()
        .into_iter()
        .filter(|&c| c != cx.conn.id)
        .any(|c| server.connections.get(&c).and_then(|w| w.upgrade()).is_some_and(|conn| !conn.is_closed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_resolves_within_the_share() {
        let r = |n: &str| resolve_dot_dot(n).map(|c| c.into_owned());
        assert_eq!(r("a\\b.txt"), Ok("a\\b.txt".into()));
        assert_eq!(r("a\\..\\b"), Ok("b".into()));
        assert_eq!(r("a\\b\\..\\..\\c"), Ok("c".into()));
        assert_eq!(r("a\\.."), Ok("".into()), "the root");
        assert_eq!(r(".."), Err(NtStatus::OBJECT_PATH_SYNTAX_BAD));
        assert_eq!(r("a\\..\\..\\etc"), Err(NtStatus::OBJECT_PATH_SYNTAX_BAD));
        assert_eq!(r("a..b"), Ok("a..b".into()), "only whole components");
    }
}
