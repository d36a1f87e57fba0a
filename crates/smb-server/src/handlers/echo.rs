//! ECHO and CANCEL (MS-SMB2 3.3.5.18, 3.3.5.16).

use smb_wire::msg::simple::{decode_empty, encode_empty};

use crate::request::{Ctx, HResult, Reply};
use crate::sync::lock;

pub fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    decode_empty(cx.msg()).map_err(super::bad("ECHO"))?;
    encode_empty(out);
    Ok(Reply::success())
}

/// Wakes the pending request the CANCEL names, by async id or by message id. A request
/// named by message id that is not registered yet (it may still be on its way to
/// registering) finds the CANCEL when it registers.
pub fn cancel(cx: &mut Ctx<'_>) -> HResult {
    let pending = lock(&cx.conn.pending);
    let target = if cx.hdr.is_async() { pending.values().find(|p| p.async_id == cx.hdr.async_id) } else { pending.get(&cx.hdr.message_id.0) };
    match target {
        Some(p) => p.cancel.notify_one(),
        None if !cx.hdr.is_async() => cx.conn.cancel_ahead(cx.hdr.message_id.0),
        None => {}
    }
    Ok(Reply::success())
}
