//! CLOSE (MS-SMB2 3.3.5.10); the release of the open is `open::close_open`, shared with
//! logoff, tree disconnect and connection teardown.

use smb_wire::msg::close::{CloseRequest, CloseResponse, FLAG_POSTQUERY_ATTRIB};
use smb_wire::NtStatus;

use super::{blocking, file_info, find_open};
use crate::open::Open;
use crate::request::{Ctx, HResult, Reply};
use crate::sync::lock;
use std::time::{Duration, Instant};

/// Turns a CLOSE yields to the connection's other frames before it looks.
const SETTLE_YIELDS: usize = 16;

/// Longest a CLOSE waits for the requests in progress on its open.
const SETTLE_BOUND: Duration = Duration::from_secs(60);

/// Waits until the requests that change the open (WRITE, SET_INFO, IOCTL: those counted by
/// `channel_sequence`, in 3.x) have been answered, as Windows and Samba complete them
/// before the close (Samba bug 14769), so none of them fails with FILE_CLOSED. Polled:
/// such a request is rarely in progress, and the check is one lock.
async fn settle(cx: &Ctx<'_>, open: &Open) {
    // A request sent just before this CLOSE may still be on its way to counting itself
    // (frames run as tasks of their own): give the connection's other frames a few turns.
    for _ in 0..SETTLE_YIELDS {
        if cx.conn.requests_in_progress() <= 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    let busy = || {
        let g = lock(&open.channel_seq);
        g.outstanding + g.pre_outstanding > 0
    };
    let start = Instant::now();
    while busy() && start.elapsed() < SETTLE_BOUND {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = CloseRequest::decode(cx.msg()).map_err(super::bad("CLOSE"))?;
    let open = find_open(cx, req.file_id)?;
    let session = cx.session.clone().ok_or(NtStatus::USER_SESSION_DELETED)?;
    settle(cx, &open).await;
    cx.conn.note_closed(open.id.volatile, cx.hdr.message_id.0);
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
    crate::open::close_open(&cx.conn.server, &open).await;
    resp.encode(out);
    Ok(Reply::success())
}
