//! CHANGE_NOTIFY (MS-SMB2 3.3.5.19): waits, answered STATUS_PENDING, until a change to the
//! watched directory is reported (see `notify.rs`), the request is cancelled, or the
//! directory's handle closes.

use std::sync::Arc;

use smb_wire::msg::create::access;
use smb_wire::msg::notify::{encode_response, NotifyRequest, WATCH_TREE};
use smb_wire::NtStatus;

use super::find_open;
use crate::request::{Ctx, HResult, Reply};
use crate::sync::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = NotifyRequest::decode(cx.msg()).map_err(super::bad("CHANGE_NOTIFY"))?;
    let open = find_open(cx, req.file_id)?;
    if !open.is_dir() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // FILE_LIST_DIRECTORY shares its bit with FILE_READ_DATA.
    if !open.has(access::FILE_READ_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let server = cx.conn.server.clone();
    if req.output_buffer_length > server.config.max_io_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(share) = open.tree.share() else { return Err(NtStatus::INVALID_PARAMETER) };
    let dir = lock(&open.path).clone();
    let watch = server.notify.watch(open.id.volatile, share.index, &dir, req.completion_filter, req.flags & WATCH_TREE != 0);
    // A CLOSE that ran between the lookup and the line above found no watch to end; it is
    // ended here instead of being left behind.
    if cx.session.as_ref().and_then(|s| s.open(open.id.volatile)).is_none() {
        server.notify.closed(open.id.volatile);
        return Err(NtStatus::FILE_CLOSED);
    }
    let max = req.output_buffer_length as usize;
    let cancel = Arc::new(tokio::sync::Notify::new());
    // Registered before the first look: a CANCEL that arrives before the request has gone
    // async names it by MessageId, and must find it (the interim response replaces the entry
    // with one carrying the AsyncId).
    let mid = cx.hdr.message_id.0;
    lock(&cx.conn.pending).insert(mid, crate::connection::PendingOp { async_id: 0, cancel: cancel.clone() });
    let mut pending = false;
    let result = loop {
        // Subscribe before looking, so a change between the two is not missed.
        let changed = watch.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if let Some(r) = crate::notify::take(&watch, max) {
            break r;
        }
        if !pending {
            super::go_pending(cx, out, &cancel).await;
            pending = true;
            if cx.conn.is_closed() {
                break Err(NtStatus::CANCELLED);
            }
        }
        tokio::select! {
            _ = &mut changed => {}
            _ = cancel.notified() => break Err(NtStatus::CANCELLED),
        }
    };
    lock(&cx.conn.pending).remove(&mid);
    match result {
        Ok(info) => {
            encode_response(out, &info);
            Ok(Reply::success())
        }
        // Both carry an empty CHANGE_NOTIFY response, not an error body.
        Err(st @ (NtStatus::NOTIFY_ENUM_DIR | NtStatus::NOTIFY_CLEANUP)) => {
            encode_response(out, &[]);
            Ok(Reply::new(st))
        }
        Err(st) => Err(st),
    }
}
