//! READ (MS-SMB2 3.3.5.12): positional reads straight into the response buffer, and pipe
//! reads on IPC$.

use smb_wire::msg::create::access;
use smb_wire::msg::read::{encode_response_prefix, ReadRequest};
use smb_wire::NtStatus;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use braid_vfs::FileHandle;

use super::find_open;
use crate::locks::FileNode;
use crate::open::{Open, OpenKind};
use crate::request::{Ctx, FileTail, HResult, Reply, Tail};
use crate::sync::lock;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = ReadRequest::decode(cx.msg()).map_err(super::bad("READ"))?;
    let open = find_open(cx, req.file_id)?;
    if req.length > cx.conn.server.config.max_io_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (handle, node) = match &open.kind {
        OpenKind::Pipe(p) => return read_pipe(p, &req, out),
        OpenKind::File { is_dir: true, .. } => return Err(NtStatus::INVALID_DEVICE_REQUEST),
        OpenKind::File { handle, node, .. } => (handle, node),
    };
    check_file_read(&open, node, &req)?;
    if cx.conn.read_body_padding.load(Ordering::Relaxed) {
        return read_padded(cx, out, &req, &open, handle).await;
    }
    // Large reads of memory-backed files, and of files on disk whose range is in the page
    // cache (`FastPaths::map_range` checks), outside compounds and without signing are
    // written to the socket from a mapping of the file: one copy, where pread and send make
    // two, and no hand-off to the blocking pool (medium ones only while the writer is free).
    // Encrypted ones are sealed straight out of the mapping (`pipeline::seal_with_mapped`):
    // the cipher's pass replaces the pread copy.
    let sealed = req.length as usize >= MAP_MIN && cx.may_seal_tail();
    // Whether the response may carry file bytes it does not hold (a mapped or sendfile tail).
    let tail_ok = cx.may_send_tail();
    if sealed || len_ok_for_mapping(req.length, || cx.conn.writer_busy()) && tail_ok {
        if let Some(done) = send_mapped(out, &req, &open, handle) {
            return done;
        }
    }
    // Large reads outside compounds and without signing go from the file to the socket with
    // sendfile: the data never enters user space.
    if len_ok_for_sendfile(req.length) && handle.fast_paths().is_some_and(|f| f.can_send_to()) && tail_ok {
        return send_file(cx, out, &req, &open, handle).await;
    }
    read_into_response(cx, out, &req, &open, handle, tail_ok).await
}

/// A pipe READ on IPC$: what the pipe holds, up to the length asked for.
fn read_pipe(pipe: &std::sync::Mutex<dcerpc::Pipe>, req: &ReadRequest, out: &mut Vec<u8>) -> HResult {
    let (data, more) = lock(pipe).read(req.length as usize);
    if data.is_empty() {
        return Err(NtStatus::END_OF_FILE);
    }
    encode_response_prefix(out, u32::try_from(data.len()).unwrap_or(0));
    out.extend_from_slice(&data);
    Ok(Reply::new(if more { NtStatus::BUFFER_OVERFLOW } else { NtStatus::SUCCESS }))
}

/// A READ on a connection that asked for padded READ responses (smbtorture's
/// FSCTL_SMBTORTURE_GLOBAL_READ_RESPONSE_BODY_PADDING8, `ioctl.rs`): 8 zero bytes between
/// the fixed part and the data, through a plain buffer (a test path, kept off the fast ones).
async fn read_padded(cx: &mut Ctx<'_>, out: &mut Vec<u8>, req: &ReadRequest, open: &Open, handle: &Arc<dyn FileHandle>) -> HResult {
    let (h, offset, len) = (handle.clone(), req.offset, req.length as usize);
    let data = super::storage_or_pending(cx, out, move || {
        let mut buf = vec![0u8; len];
        let n = h.read_at(&mut buf, offset)?;
        buf.truncate(n);
        Ok(buf)
    })
    .await?;
    if data.is_empty() && len > 0 || data.len() < req.minimum_count as usize {
        return Err(NtStatus::END_OF_FILE);
    }
    smb_wire::msg::read::encode_response_prefix_padded(out, u32::try_from(data.len()).unwrap_or(0), 8);
    out.extend_from_slice(&data);
    open.position.store(req.offset.saturating_add(data.len() as u64), Ordering::Relaxed);
    Ok(Reply::success())
}

/// Access, offset range and byte-range locks allow this READ of a file.
fn check_file_read(open: &Open, node: &FileNode, req: &ReadRequest) -> Result<(), NtStatus> {
    if !open.has(access::FILE_READ_DATA | access::FILE_EXECUTE) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if req.offset > i64::MAX as u64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !node.io_allowed(open.id.volatile, req.offset, u64::from(req.length), false) {
        return Err(NtStatus::FILE_LOCK_CONFLICT);
    }
    Ok(())
}

/// Answers from a mapping of the file's range when the file offers one (in memory, or in
/// the page cache); `None` sends the READ down the other paths.
fn send_mapped(out: &mut Vec<u8>, req: &ReadRequest, open: &Open, handle: &Arc<dyn FileHandle>) -> Option<HResult> {
    let r = handle.fast_paths().and_then(|f| f.map_range(req.offset, req.length as usize))?;
    let m = match r {
        Ok(m) => m,
        Err(e) => return Some(Err(super::storage_status(e))),
    };
    if m.is_empty() || m.len() < req.minimum_count as usize {
        return Some(Err(NtStatus::END_OF_FILE));
    }
    encode_response_prefix(out, u32::try_from(m.len()).unwrap_or(0));
    open.position.store(req.offset.saturating_add(m.len() as u64), Ordering::Relaxed);
    Some(Ok(Reply { tail: Some(Tail::Mapped(m, handle.clone())), ..Reply::success() }))
}

/// Answers with a sendfile tail: the response carries the prefix, the writer sends the range.
async fn send_file(cx: &mut Ctx<'_>, out: &mut Vec<u8>, req: &ReadRequest, open: &Open, handle: &Arc<dyn FileHandle>) -> HResult {
    let h = handle.clone();
    let size = super::storage_or_pending(cx, out, move || h.size()).await?;
    let avail = size.saturating_sub(req.offset).min(u64::from(req.length));
    if avail == 0 || avail < u64::from(req.minimum_count) {
        return Err(NtStatus::END_OF_FILE);
    }
    let n = usize::try_from(avail).unwrap_or(0);
    encode_response_prefix(out, u32::try_from(n).unwrap_or(0));
    open.position.store(req.offset.saturating_add(avail), Ordering::Relaxed);
    Ok(Reply { tail: Some(Tail::File(FileTail { handle: handle.clone(), offset: req.offset, len: n })), ..Reply::success() })
}

/// Reads directly after the response prefix: the buffer travels to the blocking thread and
/// back, so the data is never copied.
async fn read_into_response(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    req: &ReadRequest,
    open: &Open,
    handle: &Arc<dyn FileHandle>,
    tail_ok: bool,
) -> HResult {
    let prefix_at = out.len();
    encode_response_prefix(out, 0);
    let data_at = out.len();
    let len = req.length as usize;
    let mut buf = cx.conn.take_buffer(data_at + len);
    let offset = req.offset;
    // Data already in memory is copied right here: a hand-off to the blocking pool and back
    // costs two thread switches, more than a copy of up to INLINE_READ_MAX bytes. Larger
    // copies overlap better on a pool thread, unless this READ is all the connection has
    // in progress: then nothing overlaps, and the hand-off (waking an idle thread) is pure
    // latency.
    // A READ of a memory file whose response is signed (or otherwise not sent from the
    // mapping) is copied out of the mapping here too: one memcpy, after which the signature
    // and the send read the bytes from this core's cache.
    let copy_here = handle.fast_paths().is_some_and(|f| f.in_memory()) && !tail_ok;
    let inline_max = if copy_here || cx.conn.requests_in_progress() <= 1 { LONE_INLINE_READ_MAX } else { INLINE_READ_MAX };
    let inline = if len <= inline_max { handle.fast_paths().and_then(|f| f.read_at_nowait(&mut buf[data_at..data_at + len], offset)) } else { None };
    let (buf, n) = match inline {
        Some(n) => (buf, n),
        None => {
            let handle = handle.clone();
            super::blocking_or_pending(cx, out, move || {
                let n = handle.read_at(&mut buf[data_at..data_at + len], offset);
                (buf, n)
            })
            .await?
        }
    };
    let n = n.map_err(super::storage_status)?;
    let prefix_at = join_prefix_and_data(out, buf, prefix_at, data_at, n);
    if n == 0 && len > 0 || n < req.minimum_count as usize {
        return Err(NtStatus::END_OF_FILE);
    }
    out[prefix_at + 4..prefix_at + 8].copy_from_slice(&u32::try_from(n).unwrap_or(0).to_le_bytes());
    // FilePositionInformation follows the last synchronous transfer on the open.
    open.position.store(req.offset.saturating_add(n as u64), Ordering::Relaxed);
    Ok(Reply::success())
}

/// Makes `buf` (the data read at `data_at`) the response: what `out` holds goes in front of
/// the data, and `out` becomes `buf`. Returns where the response prefix now starts. Going
/// async may have sent earlier compound responses, shortening what precedes the data; then
/// the data moves down (rare: only a slow READ inside a compound).
fn join_prefix_and_data(out: &mut Vec<u8>, mut buf: Vec<u8>, prefix_at: usize, data_at: usize, n: usize) -> usize {
    let prefix = out.len();
    if prefix < data_at {
        buf.copy_within(data_at..data_at + n, prefix);
    }
    buf[..prefix].copy_from_slice(out);
    buf.truncate(prefix + n);
    *out = buf;
    prefix_at - (data_at - prefix)
}

/// Largest READ copied on the async worker when the data is in memory. Measured against
/// always using the pool: 4 KiB random reads +45-65% IOPS, 64 KiB +35-40%, but 1 MiB reads
/// -7%: there the copy is long enough that doing it on the other core in parallel wins.
const INLINE_READ_MAX: usize = 256 << 10;

/// Largest READ copied on the async worker when it is the connection's only request in
/// progress. QD 1 1 MiB reads from tmpfs: +22% against the pool (median of 4 rounds each);
/// the cap bounds how long one copy keeps the worker from other connections (~0.3 ms).
const LONE_INLINE_READ_MAX: usize = 2 << 20;

/// sendfile holds the connection's writer while the file is read, so responses queue behind
/// it; pread into a pooled buffer lets reads of many requests overlap with sending. Measured
/// (BENCHMARKS.md), pread+send is faster up to 2 MiB reads, so sendfile only serves larger
/// ones, where saving the copy outweighs the lost overlap. (For a lone READ from tmpfs,
/// sendfile lowered the median latency of 1 MiB reads but doubled p90, and reading in
/// 32-512 KiB chunks while sending was slower than one read: an inline copy won.)
fn len_ok_for_sendfile(len: u32) -> bool {
    len >= 4 << 20
}

/// READs longer than `INLINE_READ_MAX` are always sent from a mapping when the file is in
/// memory; from `MAP_MIN` up, only when no other response is being written on the
/// connection. A mapped send copies under the writer lock, so with the writer busy an inline
/// copy that overlaps the other send wins (one connection, 64 KiB, 4 threads x QD 8, always
/// mapping: 2462 vs 2976 MiB/s); with it free, the mapping saves one of the two copies (same
/// workload, mapping only when free: 2535 vs 2116 MiB/s; 4 channels 2958 vs 2736; QD 1 941
/// vs 897; BENCHMARKS.md, eighth session).
fn len_ok_for_mapping(len: u32, writer_busy: impl FnOnce() -> bool) -> bool {
    let len = len as usize;
    len > INLINE_READ_MAX || len >= MAP_MIN && !writer_busy()
}

/// Smallest READ sent from a mapping (see `len_ok_for_mapping`).
const MAP_MIN: usize = 64 << 10;
