//! LOGOFF (MS-SMB2 3.3.5.6).

use smb_wire::msg::simple::{decode_empty, encode_empty};
use smb_wire::NtStatus;

use crate::pipeline::{Ctx, HResult};
use crate::server::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    decode_empty(cx.msg()).map_err(super::bad("LOGOFF"))?;
    let Some(s) = cx.session.clone() else { return Err(NtStatus::USER_SESSION_DELETED) };
    for o in s.take_opens(None) {
        super::close::close_open(&cx.conn.server, &o).await;
    }
    s.take_trees();
    cx.conn.server.sessions.remove(&s.id);
    lock(&cx.conn.sessions).retain(|id| *id != s.id);
    encode_empty(out);
    Ok(NtStatus::SUCCESS)
}
