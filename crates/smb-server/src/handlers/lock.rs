//! LOCK (MS-SMB2 3.3.5.14): shared/exclusive byte ranges, unlock, fail-immediately, and
//! blocking locks answered STATUS_PENDING then completed (or cancelled).

use std::sync::Arc;

use smb_wire::msg::lock::{flags, LockRequest};
use smb_wire::msg::simple::encode_empty;
use smb_wire::NtStatus;

use super::find_open;
use crate::connection::PendingOp;
use crate::locks::{ByteLock, FileNode};
use crate::pipeline::{go_async, Ctx, HResult};
use crate::server::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = LockRequest::decode(cx.msg()).map_err(super::bad("LOCK"))?;
    let open = find_open(cx, req.file_id)?;
    let Some(node) = open.node().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    if open.is_dir() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let owner = open.id.volatile;
    if req.locks[0].flags & flags::UNLOCK != 0 {
        for l in &req.locks {
            if l.flags != flags::UNLOCK {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            node.unlock(owner, l.offset, l.length)?;
        }
        encode_empty(out);
        return Ok(NtStatus::SUCCESS);
    }
    for l in &req.locks {
        let kind = l.flags & !flags::FAIL_IMMEDIATELY;
        if kind != flags::SHARED_LOCK && kind != flags::EXCLUSIVE_LOCK {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if req.locks.len() > 1 && l.flags & flags::FAIL_IMMEDIATELY == 0 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
    }
    let mut taken: Vec<ByteLock> = Vec::new();
    for l in &req.locks {
        let bl = ByteLock { open: owner, offset: l.offset, length: l.length, exclusive: l.flags & flags::EXCLUSIVE_LOCK != 0 };
        let r = if l.flags & flags::FAIL_IMMEDIATELY != 0 { node.try_lock(bl) } else { wait_for_lock(cx, &node, bl).await };
        if let Err(st) = r {
            // All or nothing: undo what this request already took.
            for t in taken.iter().rev() {
                let _ = node.unlock(owner, t.offset, t.length);
            }
            return Err(st);
        }
        taken.push(bl);
    }
    // A blocked lock may complete after its handle was closed; do not leave it behind.
    if cx.session.as_ref().and_then(|s| s.open(owner)).is_none() {
        for t in &taken {
            let _ = node.unlock(owner, t.offset, t.length);
        }
        return Err(NtStatus::FILE_CLOSED);
    }
    encode_empty(out);
    Ok(NtStatus::SUCCESS)
}

/// Takes a lock, going async and waiting for releases when it conflicts. Returns
/// STATUS_CANCELLED when the client cancels or the connection goes away.
async fn wait_for_lock(cx: &mut Ctx<'_>, node: &Arc<FileNode>, bl: ByteLock) -> Result<(), NtStatus> {
    let mut registered: Option<u64> = None;
    let cancel = Arc::new(tokio::sync::Notify::new());
    let result = loop {
        let released = node.unlocked.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        match node.try_lock(bl) {
            Ok(()) => break Ok(()),
            Err(st) if st != NtStatus::LOCK_NOT_GRANTED => break Err(st),
            Err(_) => {}
        }
        if registered.is_none() {
            let async_id = go_async(cx).await;
            let mid = cx.hdr.message_id.0;
            lock(&cx.conn.pending).insert(mid, PendingOp { async_id, cancel: cancel.clone() });
            registered = Some(mid);
            if cx.conn.is_closed() {
                break Err(NtStatus::CANCELLED);
            }
        }
        tokio::select! {
            _ = &mut released => {}
            _ = cancel.notified() => break Err(NtStatus::CANCELLED),
        }
    };
    if let Some(mid) = registered {
        lock(&cx.conn.pending).remove(&mid);
    }
    result
}
