//! CLOSE (MS-SMB2 3.3.5.10), and the release of an open shared with logoff, tree
//! disconnect and connection teardown.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smb_wire::msg::close::{CloseRequest, CloseResponse, FLAG_POSTQUERY_ATTRIB};
use smb_wire::NtStatus;

use super::{blocking, file_info, find_open};
use crate::open::{Open, OpenKind};
use crate::pipeline::{Ctx, HResult};
use crate::server::ServerState;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = CloseRequest::decode(cx.msg()).map_err(super::bad("CLOSE"))?;
    let open = find_open(cx, req.file_id)?;
    let session = cx.session.clone().ok_or(NtStatus::USER_SESSION_DELETED)?;
    if session.remove_open(open.id.volatile).is_none() {
        return Err(NtStatus::FILE_CLOSED);
    }
    let mut resp = CloseResponse::default();
    if req.flags & FLAG_POSTQUERY_ATTRIB != 0 {
        if let Some(h) = open.handle().cloned() {
            if let Ok(a) = blocking(move || h.attrs()).await {
                let i = file_info(&a, &open);
                resp = CloseResponse {
                    flags: FLAG_POSTQUERY_ATTRIB,
                    creation_time: i.creation_time,
                    last_access_time: i.last_access_time,
                    last_write_time: i.last_write_time,
                    change_time: i.change_time,
                    allocation_size: i.allocation_size,
                    end_of_file: i.end_of_file,
                    file_attributes: i.wire_attributes(),
                };
            }
        }
    }
    close_open(&cx.conn.server, &open).await;
    resp.encode(out);
    Ok(NtStatus::SUCCESS)
}

/// Releases an open already removed from its session: drops its share-mode claim and byte
/// locks, and deletes the file if this was the last open and delete was pending.
pub async fn close_open(server: &ServerState, open: &Arc<Open>) {
    server.notify.closed(open.id.volatile);
    let OpenKind::File { key, node, is_dir, .. } = &open.kind else { return };
    if open.delete_on_close.load(Ordering::Acquire) {
        node.set_delete_pending(true);
    }
    let (last, pending) = server.files.release(*key, open.id.volatile);
    if let (true, true, Some(share)) = (last, pending, open.tree.share()) {
        let path = crate::server::lock(&open.path).clone();
        let backend = share.backend.clone();
        let gone = path.clone();
        match blocking(move || backend.remove(&path)).await {
            Ok(()) => server.notify.report(share.index, &gone, smb_wire::msg::notify::action::REMOVED, *is_dir),
            Err(st) => tracing::info!(status = ?st, "delete on close failed"),
        }
    }
}
