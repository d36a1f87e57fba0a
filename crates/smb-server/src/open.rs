//! Open handles (MS-SMB2 3.3.1.10).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use braid_vfs::{what, ChangeKind, DirEntry, FileHandle, SharePath};
use smb_wire::FileId;

use crate::locks::{FileKey, FileNode};
use crate::tree::Tree;

/// What an open refers to.
#[derive(Debug)]
pub enum OpenKind {
    File { handle: Arc<dyn FileHandle>, is_dir: bool, key: FileKey, node: Arc<FileNode> },
    Pipe(Mutex<dcerpc::Pipe>),
}

/// A directory enumeration in progress.
#[derive(Debug, Default)]
pub struct DirCursor {
    /// Snapshot of the entries (with "." and ".." first), taken at the first query or a
    /// restart.
    pub entries: Option<Vec<DirEntry>>,
    pub pos: usize,
    pub pattern: Option<String>,
    /// Whether any entry was returned since the last restart (NO_SUCH_FILE vs NO_MORE_FILES).
    pub returned: bool,
}

/// One open file, directory or pipe.
#[derive(Debug)]
pub struct Open {
    pub id: FileId,
    pub tree: Arc<Tree>,
    /// Path inside the share; changes on rename.
    pub path: Mutex<SharePath>,
    pub kind: OpenKind,
    pub access: u32,
    pub delete_on_close: AtomicBool,
    pub dir: tokio::sync::Mutex<DirCursor>,
    /// FilePositionInformation (kept for clients that query it; I/O is positional).
    pub position: AtomicU64,
    pub mode: AtomicU64,
    /// Open.ChannelSequence and its request counts (MS-SMB2 3.3.5.2.10, replay detection).
    pub channel_seq: Mutex<ChannelSeq>,
    /// The lease (ClientGuid, LeaseKey) this open was granted under, if any.
    pub lease: Option<crate::oplocks::LeaseId>,
    /// Data was written through this open: its close announces the file modified (size and
    /// last write time: change notifications), which breaks the parent directory's lease
    /// then, not at each WRITE (as Windows does: smbtorture's smb2.lease.v2_request).
    pub written: AtomicBool,
}

/// Open.ChannelSequence, Open.OutstandingRequestCount and Open.OutstandingPreRequestCount:
/// a client that lost a channel bumps its ChannelSequence and replays on another channel;
/// requests still carrying an older sequence are then stale.
#[derive(Debug, Default)]
pub struct ChannelSeq {
    pub seq: u16,
    /// Requests in progress with the current sequence.
    pub outstanding: u64,
    /// Requests in progress with an earlier sequence.
    pub pre_outstanding: u64,
}

impl Open {
    pub fn handle(&self) -> Option<&Arc<dyn FileHandle>> {
        match &self.kind {
            OpenKind::File { handle, .. } => Some(handle),
            OpenKind::Pipe(_) => None,
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.kind, OpenKind::File { is_dir: true, .. })
    }

    pub fn node(&self) -> Option<&Arc<FileNode>> {
        match &self.kind {
            OpenKind::File { node, .. } => Some(node),
            OpenKind::Pipe(_) => None,
        }
    }

    /// The file table key of the file (or stream) this open is on.
    pub fn key(&self) -> Option<FileKey> {
        match &self.kind {
            OpenKind::File { key, .. } => Some(*key),
            OpenKind::Pipe(_) => None,
        }
    }

    pub fn has(&self, bits: u32) -> bool {
        self.access & bits != 0
    }
}

/// The lease keys of `open`, as the origin of a change it makes: its lease's key and the
/// ParentLeaseKey that lease was granted with (lease v2).
pub fn open_origin(open: &Open) -> crate::changes::Origin {
    let parent_lease_key = open.lease.zip(open.node()).and_then(|(id, node)| node.oplocks.lease_parent(id));
    crate::changes::Origin { lease_key: open.lease.map(|l| l.1), parent_lease_key }
}

/// Releases an open already removed from its session: ends its change notifications,
/// drops its share-mode claim and byte locks, and deletes the file if this was the last
/// open and delete was pending. Announces what the close changed, and writes the lease
/// breaks that causes before returning (so before the CLOSE's answer).
pub async fn close_open(server: &Arc<crate::server::ServerState>, open: &Arc<Open>) {
    server.durable.forget(open.id.persistent);
    if crate::persistent::on_ca_share(open) {
        server.persistent.remove(open.id.persistent).await;
    }
    server.replay.forget_open(open.id.volatile);
    if let Some(w) = server.notify.closed(open.id.volatile) {
        // The waiting CHANGE_NOTIFY requests answer NOTIFY_CLEANUP before the CLOSE does.
        w.drain(std::time::Duration::from_millis(500)).await;
    }
    let OpenKind::File { key, node, is_dir, handle } = &open.kind else { return };
    if open.delete_on_close.load(Ordering::Acquire) {
        node.set_delete_pending(true);
    }
    // Taken before the release, which ends the open's lease.
    let origin = open_origin(open);
    if open.written.load(Ordering::Acquire) {
        if let Some(share) = open.tree.share() {
            let path = crate::sync::lock(&open.path).clone();
            let bits = if handle.stream_name().is_some() { what::STREAMS } else { what::SIZE | what::LAST_WRITE };
            crate::changes::modified(server, share.index, &path, false, bits, origin).send(server).await;
        }
    }
    let (mut last, mut pending) = server.files.release(*key, open.id.volatile);
    let Some(share) = open.tree.share() else { return };
    let path = crate::sync::lock(&open.path).clone();
    if let Some(name) = handle.stream_name() {
        if last && pending {
            // Deleting a stream removes the stream alone.
            // By its current name: it may have been renamed through this open.
            let (h, name) = (handle.clone(), handle.stream_current_name().unwrap_or_else(|| name.to_owned()));
            match crate::storage::blocking(move || h.write_stream(&name, None)).await {
                Ok(()) => {
                    let change = braid_vfs::Change { path: path.clone(), kind: ChangeKind::Removed, is_dir: false, what: what::STREAMS };
                    crate::changes::changed(server, share.index, &change, origin).send(server).await;
                }
                Err(st) => tracing::info!(status = ?st, "delete on close of a stream failed"),
            }
        }
        // The file itself goes once the last open of it or of its streams closes.
        (last, pending) = server.files.release_stream_hold(crate::locks::stream_file_key(*key, name), open.id.volatile);
    }
    if !(last && pending) {
        if pending && *is_dir {
            server.notify.delete_pending(share.index, &path);
        }
        return;
    }
    let backend = share.backend.clone();
    let gone = path.clone();
    match crate::storage::blocking(move || backend.remove(&path)).await {
        Ok(()) => crate::changes::name(server, share.index, &gone, ChangeKind::Removed, *is_dir, origin).send(server).await,
        Err(st) => tracing::info!(status = ?st, "delete on close failed"),
    }
}
