//! One module per SMB2 command. Each takes the request context, decodes its request and
//! appends a response body; the pipeline does everything else.

mod change_notify;
pub mod close;
mod create;
mod echo;
mod flush;
pub(crate) mod ioctl;
mod lock;
mod logoff;
mod oplock_break;
pub use logoff::end_session;
pub mod negotiate;
mod query_directory;
mod query_info;
mod read;
mod session_setup;
mod set_info;
mod tree_connect;
mod tree_disconnect;
mod write;

use smb_wire::{Command, NtStatus, WireError, HEADER_LEN};

use crate::pipeline::{Ctx, HResult};

/// Routes a request to its handler.
pub async fn dispatch(cx: &mut Ctx<'_>, cmd: Command, out: &mut Vec<u8>) -> HResult {
    match cmd {
        Command::Negotiate => negotiate::handle(cx, out).await,
        Command::SessionSetup => session_setup::handle(cx, out).await,
        Command::Logoff => logoff::handle(cx, out).await,
        Command::TreeConnect => tree_connect::handle(cx, out).await,
        Command::TreeDisconnect => tree_disconnect::handle(cx, out).await,
        Command::Create => create::handle(cx, out).await,
        Command::Close => close::handle(cx, out).await,
        Command::Flush => flush::handle(cx, out).await,
        Command::Read => read::handle(cx, out).await,
        Command::Write => write::handle(cx, out).await,
        Command::Lock => lock::handle(cx, out).await,
        Command::Ioctl => ioctl::handle(cx, out).await,
        Command::Cancel => echo::cancel(cx),
        Command::Echo => echo::handle(cx, out),
        Command::QueryDirectory => query_directory::handle(cx, out).await,
        Command::QueryInfo => query_info::handle(cx, out).await,
        Command::SetInfo => set_info::handle(cx, out).await,
        Command::OplockBreak => oplock_break::handle(cx, out).await,
        Command::ChangeNotify => change_notify::handle(cx, out).await,
    }
}

/// Payload size a request moves, for the credit-charge check (MS-SMB2 3.3.5.2.5).
pub fn payload_size(cmd: Command, msg: &[u8]) -> u32 {
    let at = |off: usize| -> u32 { msg.get(HEADER_LEN + off..HEADER_LEN + off + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) };
    match cmd {
        Command::Read | Command::Write => at(4),
        Command::QueryDirectory => at(28),
        Command::Ioctl => at(28).max(at(44)),
        Command::ChangeNotify | Command::QueryInfo => at(4),
        Command::SetInfo => at(4),
        _ => 0,
    }
}

/// Malformed request bodies get STATUS_INVALID_PARAMETER, with a log line.
pub fn bad(cmd: &'static str) -> impl Fn(WireError) -> NtStatus {
    move |e| {
        tracing::debug!(error = %e, "malformed {cmd} request");
        NtStatus::INVALID_PARAMETER
    }
}

/// Finds the open a request names (resolving the related-compound id) and records it for
/// the next related request.
pub fn find_open(cx: &mut Ctx<'_>, id: smb_wire::FileId) -> Result<std::sync::Arc<crate::open::Open>, NtStatus> {
    let id = cx.file_id(id);
    let session = cx.session.as_ref().ok_or(NtStatus::USER_SESSION_DELETED)?;
    let open = session.open(id.volatile).filter(|o| o.id.persistent == id.persistent).ok_or(NtStatus::FILE_CLOSED)?;
    if cx.tree.as_ref().is_some_and(|t| t.id != open.tree.id) {
        return Err(NtStatus::FILE_CLOSED);
    }
    cx.file_id_out = Some(open.id);
    Ok(open)
}

/// Holds an open's outstanding-request count for one request (see [`channel_sequence`]).
pub struct SeqGuard {
    open: std::sync::Arc<crate::open::Open>,
    seq: u16,
}

impl Drop for SeqGuard {
    fn drop(&mut self) {
        let mut g = crate::sync::lock(&self.open.channel_seq);
        if g.seq == self.seq {
            g.outstanding = g.outstanding.saturating_sub(1);
        } else {
            g.pre_outstanding = g.pre_outstanding.saturating_sub(1);
        }
    }
}

/// Verifies a 3.x request's ChannelSequence against the open (MS-SMB2 3.3.5.2.10), for the
/// requests that modify state (WRITE, SET_INFO, IOCTL): after a client moved to a newer
/// sequence (because a channel failed), a request with an older one is stale, and a replay
/// (SMB2_FLAGS_REPLAY_OPERATION) waits until the requests of the older sequence are done, so
/// a replayed write is never overtaken by its stale original. The guard counts the request
/// as outstanding until it completes.
pub fn channel_sequence(cx: &Ctx<'_>, open: &std::sync::Arc<crate::open::Open>) -> Result<Option<SeqGuard>, NtStatus> {
    if !smb_wire::dialect::is_smb3(cx.conn.dialect()) {
        return Ok(None);
    }
    // In 3.x requests the Status field is ChannelSequence (low 16 bits) and Reserved.
    let seq = (cx.hdr.status & 0xFFFF) as u16;
    let replay = cx.hdr.flags & smb_wire::header::flags::REPLAY_OPERATION != 0;
    let mut g = crate::sync::lock(&open.channel_seq);
    if seq != g.seq {
        if seq.wrapping_sub(g.seq) > 0x7FFF {
            tracing::debug!(conn = cx.conn.id, seq, current = g.seq, "stale ChannelSequence");
            return Err(NtStatus::FILE_NOT_AVAILABLE);
        }
        g.pre_outstanding += g.outstanding;
        g.outstanding = 0;
        g.seq = seq;
    }
    if replay && g.pre_outstanding > 0 {
        tracing::debug!(conn = cx.conn.id, seq, "replay while requests of an older ChannelSequence are in progress");
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    g.outstanding += 1;
    Ok(Some(SeqGuard { open: open.clone(), seq }))
}

/// How long storage work may run before its request goes async: past this the client gets
/// STATUS_PENDING (and its credits back) instead of waiting on a silent request.
const ASYNC_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// Answers STATUS_PENDING (MS-SMB2 3.3.4.2) and registers the request so CANCEL and a lost
/// connection can wake it through `cancel`; returns its MessageId, to remove from
/// `Connection::pending` when it completes.
pub async fn go_pending(cx: &mut Ctx<'_>, out: &mut Vec<u8>, cancel: &std::sync::Arc<tokio::sync::Notify>) -> u64 {
    let async_id = crate::pipeline::go_async(cx, out).await;
    let mid = cx.hdr.message_id.0;
    crate::sync::lock(&cx.conn.pending).insert(mid, crate::connection::PendingOp { async_id, cancel: cancel.clone() });
    mid
}

/// Runs blocking work on the blocking pool; if it outlasts [`ASYNC_AFTER`], the request is
/// answered STATUS_PENDING first and completes asynchronously (MS-SMB2 3.3.4.2).
pub async fn blocking_or_pending<T: Send + 'static>(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, NtStatus> {
    pending_after(cx, out, tokio::task::spawn_blocking(f)).await
}

/// Awaits work already started elsewhere (the blocking pool, a file's write queue); past
/// [`ASYNC_AFTER`] the request is answered STATUS_PENDING first. An error from `work` means
/// the work died (panicked) without a result.
async fn pending_after<T, E>(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    mut work: impl std::future::Future<Output = Result<T, E>> + Unpin,
) -> Result<T, NtStatus> {
    let r = tokio::select! {
        r = &mut work => r,
        _ = tokio::time::sleep(ASYNC_AFTER) => {
            crate::pipeline::go_async(cx, out).await;
            work.await
        }
    };
    r.map_err(|_| NtStatus::INTERNAL_ERROR)
}

/// [`storage_or_pending`] for a write: `f` runs after the file's earlier writes, on the
/// thread running them (see `write_queue.rs`).
pub async fn write_or_pending<T: Send + 'static>(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    queue: &crate::write_queue::WriteQueue,
    f: impl FnOnce() -> braid_vfs::Result<T> + Send + 'static,
) -> Result<T, NtStatus> {
    pending_after(cx, out, queue.submit(f)).await?.map_err(storage_status)
}

/// The NTSTATUS for a storage error (logged at debug level).
pub fn storage_status(e: braid_vfs::VfsError) -> NtStatus {
    tracing::debug!(error = %e, "storage error");
    crate::status_map::vfs_status(&e)
}

/// [`blocking_or_pending`] for storage calls, mapping storage errors to NTSTATUS.
pub async fn storage_or_pending<T: Send + 'static>(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    f: impl FnOnce() -> braid_vfs::Result<T> + Send + 'static,
) -> Result<T, NtStatus> {
    blocking_or_pending(cx, out, f).await?.map_err(storage_status)
}

/// Runs blocking storage work on the blocking pool, mapping storage errors to NTSTATUS.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> braid_vfs::Result<T> + Send + 'static) -> Result<T, NtStatus> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(storage_status(e)),
        Err(_) => Err(NtStatus::INTERNAL_ERROR),
    }
}

/// The MS-FSCC view of stored metadata alone (what a directory entry reports).
pub fn attrs_info(a: &braid_vfs::FileAttrs) -> smb_fscc::FileInfo {
    use smb_fscc::system_time_to_filetime as ft;
    smb_fscc::FileInfo {
        creation_time: ft(a.created),
        last_access_time: ft(a.accessed),
        last_write_time: ft(a.modified),
        change_time: ft(a.changed),
        attributes: a.dos_attributes,
        // Windows reports no size for directories.
        end_of_file: if a.is_dir { 0 } else { a.size },
        allocation_size: if a.is_dir { 0 } else { a.alloc_size },
        file_id: a.file_id,
        number_of_links: a.nlink,
        is_directory: a.is_dir,
        ..smb_fscc::FileInfo::default()
    }
}

/// The MS-FSCC view of an open file: stored metadata plus the open's own state.
pub fn file_info(a: &braid_vfs::FileAttrs, open: &crate::open::Open) -> smb_fscc::FileInfo {
    use std::sync::atomic::Ordering;
    let path = crate::sync::lock(&open.path).to_smb_string();
    let delete_pending = open.node().is_some_and(|n| n.delete_pending.load(Ordering::Acquire)) || open.delete_on_close.load(Ordering::Acquire);
    smb_fscc::FileInfo {
        // A link about to be deleted no longer counts (as Windows reports it).
        number_of_links: if delete_pending { a.nlink.saturating_sub(1) } else { a.nlink },
        delete_pending,
        access_mask: open.access,
        current_offset: open.position.load(Ordering::Relaxed),
        mode: u32::try_from(open.mode.load(Ordering::Relaxed)).unwrap_or(0),
        name: format!("\\{path}"),
        volume_serial: 0x4252_4149,
        ..attrs_info(a)
    }
}

/// Share and server facts the RPC pipes answer with.
pub struct RpcInfo {
    shares: Vec<dcerpc::ShareInfo>,
    server: dcerpc::ServerInfo,
}

impl RpcInfo {
    pub fn ctx(&self) -> dcerpc::RpcContext<'_> {
        dcerpc::RpcContext { shares: &self.shares, server: &self.server }
    }
}

/// Builds the share list srvsvc reports: every disk share plus IPC$.
pub fn rpc_context(server: &crate::server::ServerState) -> RpcInfo {
    let mut shares: Vec<dcerpc::ShareInfo> = server
        .shares
        .iter()
        .map(|s| dcerpc::ShareInfo { name: s.config.name.clone(), share_type: dcerpc::STYPE_DISKTREE, comment: s.config.comment.clone() })
        .collect();
    shares.push(dcerpc::ShareInfo { name: "IPC$".into(), share_type: dcerpc::STYPE_IPC | dcerpc::STYPE_SPECIAL, comment: "IPC Service".into() });
    RpcInfo {
        shares,
        server: dcerpc::ServerInfo {
            name: server.config.server_name.clone(),
            comment: "Braid".into(),
            version_major: 10,
            version_minor: 0,
            server_type: dcerpc::SV_TYPE_WORKSTATION | dcerpc::SV_TYPE_SERVER | dcerpc::SV_TYPE_NT,
        },
    }
}
