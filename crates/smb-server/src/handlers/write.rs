//! WRITE (MS-SMB2 3.3.5.13): the payload goes from the received frame to the file with no
//! intermediate copy; pipe writes on IPC$ feed the RPC server.

use smb_wire::msg::create::access;
use smb_wire::msg::write::{encode_response, WriteRequest};
use smb_wire::NtStatus;

use super::{find_open, rpc_context};
use crate::open::OpenKind;
use crate::pipeline::{Ctx, HResult};
use crate::server::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let range = cx.range.clone();
    let (offset, file_id, data_range) = {
        let msg = &frame[range.clone()];
        let req = WriteRequest::decode(msg).map_err(super::bad("WRITE"))?;
        let start = req.data.as_ptr() as usize - frame.as_ptr() as usize;
        (req.offset, req.file_id, start..start + req.data.len())
    };
    let open = find_open(cx, file_id)?;
    let _seq = super::channel_sequence(cx, &open)?;
    let len = data_range.len();
    if len > cx.conn.server.config.max_io_size as usize {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (handle, node) = match &open.kind {
        OpenKind::Pipe(p) => {
            let server = &cx.conn.server;
            let rpc = rpc_context(server);
            lock(p).write(&frame[data_range], &rpc.ctx()).map_err(|e| {
                tracing::debug!(error = %e, "RPC pipe error");
                NtStatus::INVALID_PARAMETER
            })?;
            encode_response(out, u32::try_from(len).unwrap_or(0));
            return Ok(NtStatus::SUCCESS);
        }
        OpenKind::File { is_dir: true, .. } => return Err(NtStatus::INVALID_DEVICE_REQUEST),
        OpenKind::File { handle, node, .. } => (handle.clone(), node.clone()),
    };
    if !open.has(access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if open.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    // Offset 0xFFFFFFFF_FFFFFFFF means "append" only with FILE_APPEND_DATA; otherwise the end
    // of the write must stay within the largest file offset.
    let append = offset == u64::MAX;
    if !append && offset.checked_add(len as u64).is_none_or(|e| e > i64::MAX as u64) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !append && !node.io_allowed(open.id.volatile, offset, len as u64, true) {
        return Err(NtStatus::FILE_LOCK_CONFLICT);
    }
    drop(frame);
    let frame = cx.frame.clone();
    let (n, off) = super::storage_or_pending(cx, out, move || {
        let off = if append { handle.attrs()?.size } else { offset };
        Ok((handle.write_at(&frame[data_range], off)?, off))
    })
    .await?;
    // FilePositionInformation follows the last synchronous transfer on the open.
    open.position.store(off.saturating_add(n as u64), std::sync::atomic::Ordering::Relaxed);
    encode_response(out, u32::try_from(n).unwrap_or(0));
    Ok(NtStatus::SUCCESS)
}
