//! LOGOFF (MS-SMB2 3.3.5.6); ending the session is `session::logoff`.

use smb_wire::msg::simple::{decode_empty, encode_empty};
use smb_wire::NtStatus;

use crate::request::{Ctx, HResult, Reply};
use crate::sync::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    decode_empty(cx.msg()).map_err(super::bad("LOGOFF"))?;
    let Some(s) = cx.session.clone() else { return Err(NtStatus::USER_SESSION_DELETED) };
    crate::session::logoff(&cx.conn.server, &s).await;
    lock(&cx.conn.sessions).retain(|id| *id != s.id);
    encode_empty(out);
    Ok(Reply::success())
}
