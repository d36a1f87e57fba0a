//! One module per SMB2 command. Each takes the request context, decodes its request and
//! appends a response body; the pipeline does everything else. Handlers depend on the state
//! modules and on [`crate::request`], never on the pipeline; `commands.rs` routes to them.

pub(crate) mod change_notify;
pub(crate) mod close;
pub(crate) mod create;
pub(crate) mod echo;
pub(crate) mod flush;
pub(crate) mod ioctl;
pub(crate) mod lock;
pub(crate) mod logoff;
pub(crate) mod negotiate;
pub(crate) mod oplock_break;
pub(crate) mod query_directory;
pub(crate) mod query_info;
pub(crate) mod read;
pub(crate) mod session_setup;
pub(crate) mod set_info;
pub(crate) mod tree_connect;
pub(crate) mod tree_disconnect;
pub(crate) mod write;

use smb_wire::{NtStatus, WireError};

pub use crate::request::{blocking_or_pending, channel_sequence, find_open, go_pending, storage_or_pending, write_or_pending};
pub use crate::storage::{blocking, storage_status};

/// Malformed request bodies get STATUS_INVALID_PARAMETER, with a log line.
/// Announces that properties (`what` bits) of `open`'s file changed through it, and writes
/// the lease breaks that causes before the request answers.
pub async fn announce(cx: &crate::request::Ctx<'_>, open: &crate::open::Open, bits: u32) {
    if let Some(share) = open.tree.share() {
        let path = crate::sync::lock(&open.path).clone();
        let server = &cx.conn.server;
        crate::changes::modified(server, share.index, &path, open.is_dir(), bits, crate::open::open_origin(open)).send(server).await;
    }
}

pub fn bad(cmd: &'static str) -> impl Fn(WireError) -> NtStatus {
    move |e| {
        tracing::debug!(error = %e, "malformed {cmd} request");
        NtStatus::INVALID_PARAMETER
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
    let mut path = crate::sync::lock(&open.path).to_smb_string();
    // A stream's name is its file's with `:stream` (FileNameInformation and the normalized
    // name, as Windows answers).
    if let Some(stream) = open.handle().and_then(|h| h.stream_current_name()) {
        path = format!("{path}:{stream}");
    }
    let delete_pending = open.node().is_some_and(|n| n.is_delete_pending()) || open.delete_on_close.load(Ordering::Acquire);
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
