//! READ (MS-SMB2 3.3.5.12): positional reads straight into the response buffer, and pipe
//! reads on IPC$.

use smb_wire::msg::create::access;
use smb_wire::msg::read::{encode_response_prefix, ReadRequest};
use smb_wire::NtStatus;

use super::find_open;
use crate::open::OpenKind;
use crate::pipeline::{Ctx, HResult};
use crate::server::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = ReadRequest::decode(cx.msg()).map_err(super::bad("READ"))?;
    let open = find_open(cx, req.file_id)?;
    if req.length > cx.conn.server.config.max_io_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (handle, node) = match &open.kind {
        OpenKind::Pipe(p) => {
            let (data, more) = lock(p).read(req.length as usize);
            if data.is_empty() {
                return Err(NtStatus::END_OF_FILE);
            }
            encode_response_prefix(out, u32::try_from(data.len()).unwrap_or(0));
            out.extend_from_slice(&data);
            return Ok(if more { NtStatus::BUFFER_OVERFLOW } else { NtStatus::SUCCESS });
        }
        OpenKind::File { is_dir: true, .. } => return Err(NtStatus::INVALID_DEVICE_REQUEST),
        OpenKind::File { handle, node, .. } => (handle.clone(), node.clone()),
    };
    if !open.has(access::FILE_READ_DATA | access::FILE_EXECUTE) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if req.offset > i64::MAX as u64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !node.io_allowed(open.id.volatile, req.offset, u64::from(req.length), false) {
        return Err(NtStatus::FILE_LOCK_CONFLICT);
    }
    // Read directly after the response prefix: the buffer travels to the blocking thread and
    // back, so the data is never copied.
    let prefix_at = out.len();
    encode_response_prefix(out, 0);
    let data_at = out.len();
    let len = req.length as usize;
    let mut buf = cx.conn.take_buffer(data_at + len);
    buf[..data_at].copy_from_slice(out);
    let offset = req.offset;
    let r = tokio::task::spawn_blocking(move || {
        let n = handle.read_at(&mut buf[data_at..data_at + len], offset);
        (buf, n)
    })
    .await;
    let (mut buf, n) = r.map_err(|_| NtStatus::INTERNAL_ERROR)?;
    let n = n.map_err(|e| crate::status_map::vfs_status(&e))?;
    buf.truncate(data_at + n);
    *out = buf;
    if n == 0 && len > 0 || n < req.minimum_count as usize {
        return Err(NtStatus::END_OF_FILE);
    }
    out[prefix_at + 4..prefix_at + 8].copy_from_slice(&u32::try_from(n).unwrap_or(0).to_le_bytes());
    // FilePositionInformation follows the last synchronous transfer on the open.
    open.position.store(req.offset.saturating_add(n as u64), std::sync::atomic::Ordering::Relaxed);
    Ok(NtStatus::SUCCESS)
}
