//! FLUSH (MS-SMB2 3.3.5.11): a real fsync, off the reactor.

use smb_wire::msg::create::access;
use smb_wire::msg::simple::{encode_empty, FlushRequest};
use smb_wire::NtStatus;

use super::{find_open, storage_or_pending};
use crate::request::{Ctx, HResult, Reply};

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = FlushRequest::decode(cx.msg()).map_err(super::bad("FLUSH"))?;
    let open = find_open(cx, req.file_id)?;
    if !open.has(access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if let Some(h) = open.handle().cloned() {
        storage_or_pending(cx, out, move || h.sync()).await?;
    }
    encode_empty(out);
    Ok(Reply::success())
}
