//! LOGOFF (MS-SMB2 3.3.5.6), and ending a session for the other reasons MS-SMB2 gives.

use std::sync::Arc;

use smb_wire::msg::simple::{decode_empty, encode_empty};
use smb_wire::NtStatus;

use crate::pipeline::{Ctx, HResult};
use crate::server::ServerState;
use crate::session::Session;
use crate::sync::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    decode_empty(cx.msg()).map_err(super::bad("LOGOFF"))?;
    let Some(s) = cx.session.clone() else { return Err(NtStatus::USER_SESSION_DELETED) };
    end_session(&cx.conn.server, &s).await;
    lock(&cx.conn.sessions).retain(|id| *id != s.id);
    encode_empty(out);
    Ok(NtStatus::SUCCESS)
}

/// Deregisters a session and closes everything opened through it: LOGOFF (on any channel),
/// a failed re-authentication, a reconnecting client naming it as its PreviousSessionId
/// (MS-SMB2 3.3.5.5.3), or the loss of its last channel. Every channel stops serving it.
pub async fn end_session(server: &ServerState, s: &Arc<Session>) {
    // Removed first, so no new request finds the session while its opens close.
    server.sessions.remove(&s.id);
    crate::channel::end_all(server, s);
    for o in s.take_opens(None) {
        super::close::close_open(server, &o).await;
    }
    s.take_trees();
}
