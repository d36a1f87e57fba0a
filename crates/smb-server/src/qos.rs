//! A request's admission against its share's provisioned performance (`braid_qos`): after
//! the gate, before the handler, every request that reaches a disk share's files waits
//! here until the share (and, for READ and WRITE, the file) is within its limits.
//!
//! Waiting never fails a request. A wait longer than [`ASYNC_AFTER`] is answered
//! STATUS_PENDING first, like slow storage, so the client does not time the request out;
//! and a request that waited grants no more credits than it charged (`Ctx::throttled`), so
//! a client over its limit does not widen its window of requests in flight. Only CANCEL, or
//! the connection going away, ends a wait early (STATUS_CANCELLED; the request never runs).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use braid_qos::Io;
use smb_wire::{Command, NtStatus, HEADER_LEN};
use tokio::sync::Notify;

use crate::connection::{PendingOp, Registration};
use crate::open::OpenKind;
use crate::request::{go_async, Ctx, ASYNC_AFTER};
use crate::sync::lock;

/// What `cmd` costs its share; None for the commands that do not reach the share's files
/// (session and tree setup, ECHO, CANCEL, break acknowledgments).
fn cost(cmd: Command, msg: &[u8]) -> Option<Io> {
    use Command as C;
    Some(match cmd {
        C::Read => Io::Read(u64::from(length(msg))),
        C::Write => Io::Write(u64::from(length(msg))),
        // A server-side copy writes its chunks' bytes to the share without a WRITE.
        C::Ioctl => copy_bytes(msg).map_or(Io::Meta, Io::Write),
        C::Create | C::Close | C::Flush | C::Lock | C::QueryDirectory | C::QueryInfo | C::SetInfo | C::ChangeNotify => Io::Meta,
        C::Negotiate | C::SessionSetup | C::Logoff | C::TreeConnect | C::TreeDisconnect | C::Cancel | C::Echo | C::OplockBreak => return None,
    })
}

/// The bytes an FSCTL_SRV_COPYCHUNK(_WRITE) asks to copy (at most the server's limit: a
/// larger request is refused unrun), or None for any other IOCTL.
fn copy_bytes(msg: &[u8]) -> Option<u64> {
    use smb_wire::msg::ioctl::{fsctl, IoctlRequest};
    let req = IoctlRequest::decode(msg).ok()?;
    if req.ctl_code != fsctl::SRV_COPYCHUNK && req.ctl_code != fsctl::SRV_COPYCHUNK_WRITE {
        return None;
    }
    let copy = smb_wire::msg::copychunk::CopyRequest::decode(req.input).ok()?;
    Some(copy.chunks.iter().map(|c| u64::from(c.length)).sum::<u64>().min(16 << 20))
}

/// READ and WRITE Length (body offset 4); 0 in a message too short (the handler refuses it).
fn length(msg: &[u8]) -> u32 {
    msg.get(HEADER_LEN + 4..HEADER_LEN + 8).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Waits until the request is within its share's limits (see the module comment). Requests
/// outside a disk tree, and those admitted at once, return without a timer. Err: the wait
/// was cancelled (CANCEL, or the connection went away): the request is answered with it
/// and never runs.
pub async fn admit(cx: &mut Ctx<'_>, cmd: Command, out: &mut Vec<u8>) -> Result<(), NtStatus> {
    let Some(tree) = cx.tree.clone() else { return Ok(()) };
    let (Some(share), Some(slot)) = (tree.share(), tree.qos.as_ref()) else { return Ok(()) };
    let Some(io) = cost(cmd, cx.msg()) else { return Ok(()) };
    // On a limited share, whether or not it has per-file limits: a read lock of the
    // session's opens costs less than asking the limiter (a lock all its clients share).
    let file = match io {
        Io::Read(_) | Io::Write(_) if !share.qos.is_unlimited() => file_key(cx, cmd),
        _ => None,
    };
    let mut wait = std::pin::pin!(share.qos.admit(slot, file, io));
    if poll_once(wait.as_mut()).await.is_some() {
        return Ok(());
    }
    // It waits: set before an interim response, which grants credits too.
    cx.throttled = true;
    // Registered as a blocking lock is, so that CANCEL and a lost connection end the wait
    // (the reader waits for every request in flight before it closes the session's opens).
    let cancel = Arc::new(Notify::new());
    let mid = cx.hdr.message_id.0;
    match cx.conn.register_pending(mid, PendingOp { async_id: cx.async_id.unwrap_or(0), cancel: cancel.clone() }) {
        Registration::Registered => {}
        Registration::CancelledAhead => return Err(NtStatus::CANCELLED),
        // The connection holds its maximum of waiting requests: this one waits without
        // going async, so it keeps its credits and the client's credits bound the rest.
        Registration::Full => {
            wait.await;
            return Ok(());
        }
    }
    let r = wait_or_cancel(cx, out, wait, &cancel).await;
    lock(&cx.conn.pending).remove(&mid);
    r
}

/// The wait of a registered request: STATUS_PENDING past [`ASYNC_AFTER`]; dropping `wait`
/// on a cancel withdraws the request from the limiter.
async fn wait_or_cancel<F: Future>(cx: &mut Ctx<'_>, out: &mut Vec<u8>, mut wait: Pin<&mut F>, cancel: &Notify) -> Result<(), NtStatus> {
    if cx.conn.is_closed() {
        return Err(NtStatus::CANCELLED);
    }
    tokio::select! {
        _ = wait.as_mut() => return Ok(()),
        _ = cancel.notified() => return Err(NtStatus::CANCELLED),
        _ = tokio::time::sleep(ASYNC_AFTER) => {}
    }
    go_async(cx, out).await;
    tokio::select! {
        _ = wait => Ok(()),
        _ = cancel.notified() => Err(NtStatus::CANCELLED),
    }
}

/// The backend file id of the open a READ or WRITE names, the key of per-file limits.
fn file_key(cx: &Ctx<'_>, cmd: Command) -> Option<u64> {
    let id = cx.file_id(crate::commands::file_id(cmd, cx.msg())?);
    let open = cx.session.as_ref()?.open(id.volatile).filter(|o| o.id.persistent == id.persistent)?;
    match &open.kind {
        OpenKind::File { key, .. } => Some(key.1),
        OpenKind::Pipe(_) => None,
    }
}

/// Polls `f` once: its output if it is ready now. The waker stays registered, so a later
/// await of the same future is woken as usual.
async fn poll_once<F: Future>(mut f: Pin<&mut F>) -> Option<F::Output> {
    std::future::poll_fn(|c| {
        Poll::Ready(match f.as_mut().poll(c) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_counts() {
        let mut msg = vec![0u8; HEADER_LEN + 8];
        msg[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&(1u32 << 20).to_le_bytes());
        assert_eq!(cost(Command::Read, &msg), Some(Io::Read(1 << 20)));
        assert_eq!(cost(Command::Write, &msg), Some(Io::Write(1 << 20)));
        assert_eq!(cost(Command::Write, &msg[..HEADER_LEN]), Some(Io::Write(0)));
        for c in [Command::Create, Command::Close, Command::QueryDirectory, Command::ChangeNotify, Command::Ioctl, Command::Lock] {
            assert_eq!(cost(c, &msg), Some(Io::Meta), "{c:?}");
        }
        for c in [Command::TreeConnect, Command::TreeDisconnect, Command::Echo, Command::Cancel, Command::OplockBreak, Command::Negotiate] {
            assert_eq!(cost(c, &msg), None, "{c:?}");
        }
    }

    #[test]
    fn a_server_side_copy_costs_the_bytes_it_writes() {
        use smb_wire::msg::copychunk::{Chunk, CopyRequest};
        use smb_wire::msg::ioctl::{fsctl, IoctlRequest, FLAG_IS_FSCTL};
        let chunk = Chunk { source_offset: 0, target_offset: 0, length: 1 << 20 };
        let mut input = Vec::new();
        CopyRequest { source_key: [0; 24], chunks: vec![chunk; 3] }.encode(&mut input);
        let ioctl = |ctl_code| {
            let mut msg = vec![0u8; HEADER_LEN];
            let file_id = smb_wire::FileId { persistent: 1, volatile: 2 };
            IoctlRequest { ctl_code, file_id, input: &input, max_input_response: 0, max_output_response: 12, flags: FLAG_IS_FSCTL }.encode(&mut msg);
            msg
        };
        assert_eq!(cost(Command::Ioctl, &ioctl(fsctl::SRV_COPYCHUNK)), Some(Io::Write(3 << 20)));
        assert_eq!(cost(Command::Ioctl, &ioctl(fsctl::SRV_COPYCHUNK_WRITE)), Some(Io::Write(3 << 20)));
        assert_eq!(cost(Command::Ioctl, &ioctl(fsctl::SET_SPARSE)), Some(Io::Meta));
    }
}
