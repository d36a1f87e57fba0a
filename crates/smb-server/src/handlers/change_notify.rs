//! CHANGE_NOTIFY (MS-SMB2 3.3.5.19): waits, answered STATUS_PENDING, until a change to the
//! watched directory is reported (see `notify.rs`), the request is cancelled, the
//! directory's handle closes, or the directory is to be deleted.

use std::sync::Arc;

use smb_wire::msg::create::access;
use smb_wire::msg::notify::{encode_response, NotifyRequest, WATCH_TREE};
use smb_wire::NtStatus;

use super::find_open;
use crate::connection::{PendingOp, Registration};
use crate::notify::Watch;
use crate::request::{Ctx, HResult, Reply};
use crate::sync::lock;

/// How often a request that finds changes queued yields before taking them, so that an
/// earlier CHANGE_NOTIFY on the same handle, sent just before it and still on its way
/// (requests run concurrently), registers and is answered first. Yielding, not sleeping:
/// changes that come after the request must not be folded into its answer.
const SETTLE_YIELDS: usize = 3;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = NotifyRequest::decode(cx.msg()).map_err(super::bad("CHANGE_NOTIFY"))?;
    let mid = cx.hdr.message_id.0;
    // A CLOSE sent after this request may have overtaken it (requests run concurrently):
    // the request then ends as the close would have ended it.
    let overtaken =
        |cx: &Ctx<'_>, st| if st == NtStatus::FILE_CLOSED && cx.conn.closed_after(req.file_id.volatile, mid) { NtStatus::NOTIFY_CLEANUP } else { st };
    let open = match find_open(cx, req.file_id) {
        Ok(o) => o,
        Err(st) => return answer(out, Err(overtaken(cx, st))),
    };
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
    let recursive = req.flags & WATCH_TREE != 0;
    let limit = share.config.max_watches;
    let watch = server.notify.watch(open.id.volatile, (share.index, &share.config.name), &dir, req.completion_filter, recursive, limit)?;
    // The backend reports outside changes only for directories it watches: ask for this one
    // (a no-op where it is watched already or the backend learns of no changes).
    let (backend, watched) = (share.backend.clone(), dir.clone());
    let _ = crate::storage::blocking(move || {
        backend.watch_dir(&watched);
        Ok(())
    })
    .await;
    // A CLOSE that ran between the lookup and the line above found no watch to end; it is
    // ended here instead of being left behind.
    if cx.session.as_ref().and_then(|s| s.open(open.id.volatile)).is_none() {
        server.notify.closed(open.id.volatile);
        return answer(out, Err(overtaken(cx, NtStatus::FILE_CLOSED)));
    }
    let cancel = Arc::new(tokio::sync::Notify::new());
    // Registered before the first look: a CANCEL that arrives before the request has gone
    // async names it by MessageId, and must find it (the interim response replaces the entry
    // with one carrying the AsyncId). One that overtook the request cancels it now.
    match cx.conn.register_pending(mid, PendingOp { async_id: 0, cancel: cancel.clone() }) {
        Registration::Registered => {}
        Registration::CancelledAhead => return Err(NtStatus::CANCELLED),
        Registration::Full => return Err(NtStatus::INSUFFICIENT_RESOURCES),
    }
    let who = (mid, cx.conn.id);
    watch.enqueue(who);
    let result = wait(cx, out, &watch, req.output_buffer_length as usize, &cancel).await;
    watch.leave(who);
    lock(&cx.conn.pending).remove(&mid);
    answer(out, result)
}

/// The response to a CHANGE_NOTIFY that ends with `result`.
fn answer(out: &mut Vec<u8>, result: Result<Vec<u8>, NtStatus>) -> HResult {
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

/// Waits until the watch has something for this request (changes go to the oldest request
/// waiting; a close or a pending delete to every one), going async the first time it has
/// nothing; or until the request is cancelled.
async fn wait(cx: &mut Ctx<'_>, out: &mut Vec<u8>, watch: &Watch, max: usize, cancel: &Arc<tokio::sync::Notify>) -> Result<Vec<u8>, NtStatus> {
    let who = (cx.hdr.message_id.0, cx.conn.id);
    let mut pending = false;
    let mut settled = false;
    loop {
        // Subscribe before looking, so a change between the two is not missed.
        let changed = watch.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if (watch.ended() || watch.is_first(who)) && watch.ready() {
            if !settled {
                settled = true;
                for _ in 0..SETTLE_YIELDS {
                    tokio::task::yield_now().await;
                }
                continue;
            }
            if let Some(r) = crate::notify::take(watch, max) {
                return r;
            }
        }
        if !pending {
            // Registered already (the entry is this request's own): never full here.
            super::go_pending(cx, out, cancel).await?;
            pending = true;
            if cx.conn.is_closed() {
                return Err(NtStatus::CANCELLED);
            }
        }
        tokio::select! {
            _ = &mut changed => {}
            _ = cancel.notified() => return Err(NtStatus::CANCELLED),
        }
    }
}
