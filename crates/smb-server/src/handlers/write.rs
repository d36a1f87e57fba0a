//! WRITE (MS-SMB2 3.3.5.13): the payload goes from the received frame (or, for a large
//! plain WRITE, from the pipe it was spliced into, see `splice.rs`) to the file with no
//! intermediate copy; pipe writes on IPC$ feed the RPC server.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use smb_wire::msg::create::access;
use smb_wire::msg::write::{encode_response, WriteFixed, WriteRequest};
use smb_wire::NtStatus;

use super::{find_open, rpc_context};
use crate::open::OpenKind;
use crate::request::{Ctx, HResult, Reply};
use crate::server::ServerState;
use crate::splice::Payload;
use crate::sync::lock;

/// Where a WRITE's bytes are.
enum Data {
    Frame(Arc<Vec<u8>>, Range<usize>),
    Pipe(Payload),
}

impl Data {
    fn len(&self) -> usize {
        match self {
            Data::Frame(_, r) => r.len(),
            Data::Pipe(p) => p.len(),
        }
    }

    /// Writes everything at `off`, returning the bytes written.
    fn write_to(self, handle: &dyn braid_vfs::FileHandle, off: u64) -> braid_vfs::Result<usize> {
        match self {
            Data::Frame(frame, r) => handle.write_at(&frame[r], off),
            Data::Pipe(mut p) => match handle.fast_paths().filter(|f| f.can_splice_from()) {
                Some(f) => {
                    let mut at = off;
                    p.drain(|fd, n| {
                        let done = f.splice_from(fd, at, n)?;
                        at += done as u64;
                        Ok(done)
                    })
                }
                None => handle.write_at(&p.read_all().map_err(braid_vfs::VfsError::Io)?, off),
            },
        }
    }
}

/// Largest WRITE done on the async worker (to a memory file system only, from a received
/// frame). On this kind of VM a hand-off wakes a sleeping pool thread, whose idle vCPU has
/// halted: that wake-up, not the copy, bounded one connection's 1 MiB writes (4 x QD 4:
/// 6452 vs 4339 MiB/s inline; 8 x QD 8 5391 vs 5021; signed 4421 vs 3909; QD 1 even).
/// Spliced payloads stay on the pool: several channels splicing at once keep both cores
/// copying, and there the async workers must stay free to receive (4 channels, 10 files:
/// 4537 inline vs 5527 MiB/s).
const INLINE_WRITE_MAX: usize = 2 << 20;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let msg = &frame[cx.range.clone()];
    let (offset, file_id, data) = match cx.payload.take() {
        // The reader checked that the payload is the rest of the frame.
        Some(p) => {
            let req = WriteFixed::decode(msg).map_err(super::bad("WRITE"))?;
            if req.length as usize != p.len() {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            (req.offset, req.file_id, Data::Pipe(p))
        }
        None => {
            let req = WriteRequest::decode(msg).map_err(super::bad("WRITE"))?;
            // An empty payload is a static empty slice, not a part of the frame.
            let start = if req.data.is_empty() { 0 } else { req.data.as_ptr() as usize - frame.as_ptr() as usize };
            (req.offset, req.file_id, Data::Frame(frame.clone(), start..start + req.data.len()))
        }
    };
    let open = find_open(cx, file_id)?;
    let _seq = super::channel_sequence(cx, &open)?;
    let len = data.len();
    if len > cx.conn.server.config.max_io_size as usize {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (handle, node) = match &open.kind {
        OpenKind::Pipe(p) => return write_pipe(&cx.conn.server, p, data, out),
        OpenKind::File { is_dir: true, .. } => return Err(NtStatus::INVALID_DEVICE_REQUEST),
        OpenKind::File { handle, node, .. } => (handle.clone(), node.clone()),
    };
    if !open.has(access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if open.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    crate::breaks::break_level2(&open).send(&cx.conn.server).await;
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
    let queue = &node.writes;
    let inline = len <= INLINE_WRITE_MAX && matches!(data, Data::Frame(..)) && handle.fast_paths().is_some_and(|f| f.in_memory());
    let job = move || -> braid_vfs::Result<(usize, u64)> {
        let off = if append { handle.attrs()?.size } else { offset };
        Ok((data.write_to(handle.as_ref(), off)?, off))
    };
    // A write to a memory file system is a copy: done here when the file is not being
    // written, saving the hand-off to the blocking pool and back.
    let done = if inline { queue.run_here(job) } else { Err(job) };
    let (n, off) = match done {
        Ok(r) => r.map_err(super::storage_status)?,
        Err(job) => super::write_or_pending(cx, out, queue, job).await?,
    };
    // A relaxed flag store: the close that reads it comes after this request.
    if n > 0 {
        open.written.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // FilePositionInformation follows the last synchronous transfer on the open.
    open.position.store(off.saturating_add(n as u64), std::sync::atomic::Ordering::Relaxed);
    encode_response(out, u32::try_from(n).unwrap_or(0));
    Ok(Reply::success())
}

/// A pipe WRITE on IPC$: the bytes go to the RPC server behind the pipe.
fn write_pipe(server: &ServerState, pipe: &Mutex<dcerpc::Pipe>, data: Data, out: &mut Vec<u8>) -> HResult {
    let len = data.len();
    let rpc = rpc_context(server);
    let spliced;
    let bytes = match data {
        Data::Frame(ref f, ref r) => &f[r.clone()],
        Data::Pipe(mut p) => {
            spliced = p.read_all().map_err(|_| NtStatus::INVALID_PARAMETER)?;
            &spliced[..]
        }
    };
    lock(pipe).write(bytes, &rpc.ctx()).map_err(|e| {
        tracing::debug!(error = %e, "RPC pipe error");
        NtStatus::INVALID_PARAMETER
    })?;
    encode_response(out, u32::try_from(len).unwrap_or(0));
    Ok(Reply::success())
}
