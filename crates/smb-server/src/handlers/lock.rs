//! LOCK (MS-SMB2 3.3.5.14): shared/exclusive byte ranges, unlock, fail-immediately,
//! blocking locks answered STATUS_PENDING then completed (or cancelled), and lock sequence
//! replay detection for resilient opens.

use std::sync::Arc;

use braid_filestate::StateError;
use smb_wire::msg::lock::{flags, LockRequest};
use smb_wire::msg::simple::encode_empty;
use smb_wire::{dialect, NtStatus};

use super::find_open;
use crate::locks::{unlock, ByteLock, FileNode};
use crate::open::Open;
use crate::request::{Ctx, HResult, Reply};
use crate::status_map::state_status;
use crate::sync::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = LockRequest::decode(cx.msg()).map_err(super::bad("LOCK"))?;
    let open = find_open(cx, req.file_id)?;
    let Some(node) = open.node().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    if open.is_dir() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let owner = open.id.volatile;
    // LockSequence is reserved in 2.0.2; later dialects check it on opens that asked for
    // it (3.3.5.14): a replay of the last successful request of a bucket changes nothing.
    // On a 3.x connection that offered multichannel, every open is checked (a LOCK may be
    // resent on another channel), as the specification says the server should.
    let sequenced = cx.conn.dialect() >= dialect::SMB210;
    let multichannel = cx.conn.negotiated.get().is_some_and(|n| n.server_capabilities & smb_wire::msg::negotiate::cap::MULTI_CHANNEL != 0);
    if sequenced && multichannel && dialect::is_smb3(cx.conn.dialect()) {
        node.enable_lock_sequences(owner);
    }
    if sequenced && node.lock_sequence_replayed(owner, req.lock_sequence) {
        encode_empty(out);
        return Ok(Reply::success());
    }
    let result = apply(cx, &open, &node, &req, out).await;
    if result.is_ok() && sequenced {
        node.lock_sequence_done(owner, req.lock_sequence);
    }
    result?;
    persist_locks(cx, &open, &req).await?;
    encode_empty(out);
    Ok(Reply::success())
}

/// A persistent open's locks are committed before the LOCK is answered.
async fn persist_locks(cx: &Ctx<'_>, open: &Open, req: &LockRequest) -> Result<(), NtStatus> {
    if !crate::persistent::on_ca_share(open) {
        return Ok(());
    }
    let (mut taken, mut unlocked) = (Vec::new(), Vec::new());
    for l in &req.locks {
        if l.flags & flags::UNLOCK != 0 {
            unlocked.push((l.offset, l.length));
        } else {
            taken.push(braid_handlestore::LockRecord { offset: l.offset, length: l.length, exclusive: l.flags & flags::EXCLUSIVE_LOCK != 0 });
        }
    }
    crate::persistent::locked(&cx.conn.server, open, &taken, &unlocked).await
}

/// Carries out the unlocks or the locks of one request, all or nothing.
async fn apply(cx: &mut Ctx<'_>, open: &Arc<Open>, node: &Arc<FileNode>, req: &LockRequest, out: &mut Vec<u8>) -> Result<(), NtStatus> {
    let owner = open.id.volatile;
    if req.locks[0].flags & flags::UNLOCK != 0 {
        for l in &req.locks {
            if l.flags != flags::UNLOCK {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            unlock(node, owner, l.offset, l.length)?;
        }
        return Ok(());
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
    // After a restart, NFS clients reclaim the locks they held through NLM during the grace
    // period; no new SMB lock may take those files' ranges first (NLM refuses its own new
    // locks then too, with NLM4_DENIED_GRACE_PERIOD).
    if open.key().is_some_and(|k| cx.conn.server.files.shared().grace_for(k).is_some()) {
        return Err(NtStatus::LOCK_NOT_GRANTED);
    }
    // A byte-range lock ends level II oplocks and read caching of the other opens.
    crate::breaks::break_level2(open).send(&cx.conn.server).await;
    let mut taken: Vec<ByteLock> = Vec::new();
    for l in &req.locks {
        let bl = ByteLock { open: owner, offset: l.offset, length: l.length, exclusive: l.flags & flags::EXCLUSIVE_LOCK != 0 };
        let r = if l.flags & flags::FAIL_IMMEDIATELY != 0 {
            node.try_lock(bl).map_err(state_status)
        } else {
            wait_for_lock(cx, open, node, bl, out).await
        };
        if let Err(st) = r {
            // All or nothing: undo what this request already took.
            for t in taken.iter().rev() {
                let _ = unlock(node, owner, t.offset, t.length);
            }
            return Err(st);
        }
        taken.push(bl);
    }
    // A blocked lock may be granted just as its handle is closed; do not leave it behind.
    if !still_open(cx, open) {
        for t in &taken {
            let _ = unlock(node, owner, t.offset, t.length);
        }
        return Err(NtStatus::RANGE_NOT_LOCKED);
    }
    Ok(())
}

/// Whether `open` is still in its session (CLOSE, TREE_DISCONNECT and LOGOFF remove it
/// before releasing its locks).
fn still_open(cx: &Ctx<'_>, open: &Arc<Open>) -> bool {
    cx.session.as_ref().and_then(|s| s.open(open.id.volatile)).is_some_and(|o| Arc::ptr_eq(&o, open))
}

/// Takes a lock, going async and waiting for releases when it conflicts. Returns
/// STATUS_CANCELLED when the client cancels or the connection goes away, and
/// STATUS_RANGE_NOT_LOCKED when the handle is closed meanwhile (as Windows does).
async fn wait_for_lock(cx: &mut Ctx<'_>, open: &Arc<Open>, node: &Arc<FileNode>, bl: ByteLock, out: &mut Vec<u8>) -> Result<(), NtStatus> {
    let mut registered: Option<u64> = None;
    let cancel = Arc::new(tokio::sync::Notify::new());
    let result = loop {
        // Subscribe before looking, so a release between the checks and the wait is seen.
        let released = node.core().unlocked.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        if !still_open(cx, open) {
            break Err(NtStatus::RANGE_NOT_LOCKED);
        }
        match node.try_lock(bl) {
            Ok(()) => break Ok(()),
            Err(StateError::LockConflict) => {}
            Err(e) => break Err(state_status(e)),
        }
        if registered.is_none() {
            match super::go_pending(cx, out, &cancel).await {
                Ok(mid) => registered = Some(mid),
                Err(st) => break Err(st),
            }
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
