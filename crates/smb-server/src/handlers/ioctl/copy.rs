//! Server-side copy (MS-SMB2 3.3.5.15.5 FSCTL_SRV_REQUEST_RESUME_KEY, 3.3.5.15.6
//! FSCTL_SRV_COPYCHUNK and FSCTL_SRV_COPYCHUNK_WRITE): a client names a source open by
//! its resume key and lists chunks; the bytes move from file to file inside the server
//! (`braid_vfs::copy_range`: the kernel's copy_file_range, a reflink where the file system
//! shares extents), never over the network.
//!
//! A connection that negotiated Apple's kAAPL_SUPPORTS_OSX_COPYFILE (`create/aapl.rs`)
//! may send a request with no chunks to copy a whole file, named streams included, as
//! macOS's copyfile(3) does (Samba's vfs_fruit `fruit_offload_write_send`): the source's
//! bytes go to the start of the target, whose bytes beyond them stay (the target is not
//! truncated), and each named stream of the source is created on the target; a stream the
//! target already has fails the copy (OBJECT_NAME_COLLISION), checked before anything moves.

use std::sync::Arc;

use smb_wire::msg::aapl;
use smb_wire::msg::copychunk::{self as cc, CopyRequest, CopyResponse, RESUME_KEY_LEN};
use smb_wire::msg::create::access;
use smb_wire::msg::ioctl::{encode_response, fsctl, IoctlRequest};
use smb_wire::NtStatus;

use crate::open::{Open, OpenKind};
use crate::request::{Ctx, HResult, Reply};

/// The server's limits (MS-SMB2 3.3.3: ServerSideCopyMaxNumberofChunks,
/// ServerSideCopyMaxChunkSize, ServerSideCopyMaxDataSize; the values Windows uses).
pub const MAX_CHUNKS: u32 = 256;
pub const MAX_CHUNK_LEN: u32 = 1 << 20;
pub const MAX_TOTAL_LEN: u32 = 16 << 20;

/// The resume key of `open`: its FileId and the server's per-start tag, so a key is
/// good for one open of this server run and cannot be guessed from FileIds alone.
fn resume_key(tag: u64, open: &Open) -> [u8; RESUME_KEY_LEN] {
    let mut k = [0u8; RESUME_KEY_LEN];
    k[..8].copy_from_slice(&open.id.persistent.to_le_bytes());
    k[8..16].copy_from_slice(&open.id.volatile.to_le_bytes());
    k[16..].copy_from_slice(&tag.to_le_bytes());
    k
}

/// FSCTL_SRV_REQUEST_RESUME_KEY on a file open.
pub(super) fn request_resume_key(cx: &Ctx<'_>, req: &IoctlRequest<'_>, open: &Open, out: &mut Vec<u8>) -> HResult {
    if (req.max_output_response as usize) < RESUME_KEY_LEN + 8 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let key = resume_key(cx.conn.server.resume_key_tag, open);
    encode_response(out, req.ctl_code, open.id, &cc::encode_resume_key(&key));
    Ok(Reply::success())
}

/// The source a resume key names: an open of this session (on any of its trees).
fn source(cx: &Ctx<'_>, key: &[u8; RESUME_KEY_LEN]) -> Option<Arc<Open>> {
    let field = |r: std::ops::Range<usize>| key.get(r).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    let (persistent, volatile, tag) = (field(0..8)?, field(8..16)?, field(16..24)?);
    if tag != cx.conn.server.resume_key_tag {
        return None;
    }
    let open = cx.session.as_ref()?.open(volatile)?;
    (open.id.persistent == persistent).then_some(open)
}

/// Why a request is refused before any byte moves, with the limits when they were
/// exceeded (their answer carries them, MS-SMB2 3.3.5.15.6).
fn check_limits(req: &CopyRequest) -> bool {
    let total: u64 = req.chunks.iter().map(|c| u64::from(c.length)).sum();
    req.chunks.len() <= MAX_CHUNKS as usize
        && req.chunks.iter().all(|c| c.length > 0 && c.length <= MAX_CHUNK_LEN)
        && total <= u64::from(MAX_TOTAL_LEN)
}

/// FSCTL_SRV_COPYCHUNK(_WRITE) with `target` the open the IOCTL names.
pub(super) async fn copy_chunks(cx: &mut Ctx<'_>, req: &IoctlRequest<'_>, target: Arc<Open>, out: &mut Vec<u8>) -> HResult {
    if (req.max_output_response as usize) < cc::RESPONSE_LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let copy = CopyRequest::decode(req.input).map_err(super::super::bad("COPYCHUNK"))?;
    // COPYCHUNK reads the target too (it may be used to verify); COPYCHUNK_WRITE only writes.
    let needs = if req.ctl_code == fsctl::SRV_COPYCHUNK { access::FILE_READ_DATA } else { 0 };
    if !target.has(access::FILE_WRITE_DATA) || (needs != 0 && !target.has(needs)) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if !check_limits(&copy) {
        let limits = CopyResponse { chunks_written: MAX_CHUNKS, chunk_bytes_written: MAX_CHUNK_LEN, total_bytes_written: MAX_TOTAL_LEN };
        encode_response(out, req.ctl_code, target.id, &limits.encode());
        return Ok(Reply::new(NtStatus::INVALID_PARAMETER));
    }
    let src = source(cx, &copy.source_key).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    if !src.has(access::FILE_READ_DATA | access::FILE_EXECUTE) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if target.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    let (OpenKind::File { handle: from, node: from_node, is_dir: false, .. }, OpenKind::File { handle: to, node: to_node, is_dir: false, .. }) =
        (&src.kind, &target.kind)
    else {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    };
    crate::breaks::break_level2(&target).send(&cx.conn.server).await;
    let whole_file = copy.chunks.is_empty() && cx.conn.apple.get().is_some_and(|caps| caps & aapl::SUPPORTS_OSX_COPYFILE != 0);
    let job = Job {
        from: from.clone(),
        from_node: from_node.clone(),
        to: to.clone(),
        to_node: to_node.clone(),
        src: src.id.volatile,
        dst: target.id.volatile,
        copy,
    };
    let run = move || if whole_file { job.run_whole_file() } else { job.run() };
    let (done, status) = super::super::storage_or_pending(cx, out, run).await?;
    if done.total_bytes_written > 0 {
        target.written.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    encode_response(out, req.ctl_code, target.id, &done.encode());
    Ok(Reply::new(status))
}

/// The copy, run after the target file's earlier writes (its write queue).
struct Job {
    from: Arc<dyn braid_vfs::FileHandle>,
    from_node: Arc<crate::locks::FileNode>,
    to: Arc<dyn braid_vfs::FileHandle>,
    to_node: Arc<crate::locks::FileNode>,
    src: u64,
    dst: u64,
    copy: CopyRequest,
}

/// Chunks that follow one another in both files, copied with one call: a reflinking file
/// system then clones 16 MiB at once instead of 16 times 1 MiB.
struct Run {
    src: u64,
    dst: u64,
    len: u64,
    /// Index of its first chunk, and how many it holds.
    first: usize,
    count: usize,
}

impl Job {
    /// Copies chunk after chunk; the first that cannot be copied whole ends the copy, and
    /// the answer counts the chunks before it (ChunkBytesWritten stays 0: a chunk is
    /// checked before it is copied, so none is left half done). Within one file, chunks are
    /// copied one at a time: a later chunk may read what an earlier one wrote.
    fn run(self) -> braid_vfs::Result<(CopyResponse, NtStatus)> {
        let mut done = CopyResponse { chunks_written: 0, chunk_bytes_written: 0, total_bytes_written: 0 };
        let one_file = Arc::ptr_eq(&self.from_node, &self.to_node);
        let mut run: Option<Run> = None;
        for (i, c) in self.copy.chunks.iter().enumerate() {
            let len = u64::from(c.length);
            if let Some(refused) = self.check(c)? {
                let short = self.flush(run.take(), &mut done)?;
                return Ok((done, short.unwrap_or(refused)));
            }
            match &mut run {
                Some(r) if !one_file && r.src + r.len == c.source_offset && r.dst + r.len == c.target_offset => {
                    r.len += len;
                    r.count += 1;
                }
                _ => {
                    if let Some(short) = self.flush(run.take(), &mut done)? {
                        return Ok((done, short));
                    }
                    run = Some(Run { src: c.source_offset, dst: c.target_offset, len, first: i, count: 1 });
                }
            }
        }
        let short = self.flush(run, &mut done)?;
        Ok((done, short.unwrap_or(NtStatus::SUCCESS)))
    }

    /// The Apple copyfile request: the whole source to offset 0 of the target, then the
    /// source's named streams (a stream's open has none of its own to copy). The answer
    /// counts no chunks and the file's bytes (saturated to 32 bits), as Samba answers.
    fn run_whole_file(self) -> braid_vfs::Result<(CopyResponse, NtStatus)> {
        let mut done = CopyResponse { chunks_written: 0, chunk_bytes_written: 0, total_bytes_written: 0 };
        let size = self.from.size()?;
        if !self.from_node.io_allowed(self.src, 0, size, false) || !self.to_node.io_allowed(self.dst, 0, size, true) {
            return Ok((done, NtStatus::FILE_LOCK_CONFLICT));
        }
        let with_streams = self.from.stream_name().is_none() && self.to.stream_name().is_none();
        let streams = if with_streams { self.from.streams()? } else { Vec::new() };
        for (name, _) in &streams {
            if self.to.read_stream(name)?.is_some() {
                return Ok((done, NtStatus::OBJECT_NAME_COLLISION));
            }
        }
        let n = braid_vfs::copy_range(self.from.as_ref(), self.to.as_ref(), 0, 0, size)?;
        done.total_bytes_written = u32::try_from(n).unwrap_or(u32::MAX);
        if n < size {
            return Ok((done, NtStatus::INVALID_VIEW_SIZE));
        }
        for (name, _) in streams {
            // A stream removed since it was listed is not copied.
            if let Some((stored, data)) = self.from.read_stream(&name)? {
                self.to.write_stream(&stored, Some(&data))?;
            }
        }
        Ok((done, NtStatus::SUCCESS))
    }

    /// Why chunk `c` cannot be copied, if it cannot: offsets that overflow, a byte-range
    /// lock of another open on either side, a source range beyond the end of file.
    fn check(&self, c: &cc::Chunk) -> braid_vfs::Result<Option<NtStatus>> {
        let len = u64::from(c.length);
        let (Some(src_end), Some(_)) = (c.source_offset.checked_add(len), c.target_offset.checked_add(len)) else {
            return Ok(Some(NtStatus::INVALID_PARAMETER));
        };
        if !self.from_node.io_allowed(self.src, c.source_offset, len, false) || !self.to_node.io_allowed(self.dst, c.target_offset, len, true) {
            return Ok(Some(NtStatus::FILE_LOCK_CONFLICT));
        }
        Ok((src_end > self.from.size()?).then_some(NtStatus::INVALID_VIEW_SIZE))
    }

    /// Copies `run`, counting its chunks into `done`; Some(status) if the source ended
    /// early (a truncate racing the copy), after counting the chunks copied whole.
    fn flush(&self, run: Option<Run>, done: &mut CopyResponse) -> braid_vfs::Result<Option<NtStatus>> {
        let Some(r) = run else { return Ok(None) };
        let n = braid_vfs::copy_range(self.from.as_ref(), self.to.as_ref(), r.src, r.dst, r.len)?;
        done.total_bytes_written += n as u32;
        let mut left = n;
        for c in &self.copy.chunks[r.first..r.first + r.count] {
            if left < u64::from(c.length) {
                return Ok(Some(NtStatus::INVALID_VIEW_SIZE));
            }
            left -= u64::from(c.length);
            done.chunks_written += 1;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb_wire::msg::copychunk::Chunk;

    fn req(lengths: &[u32]) -> CopyRequest {
        CopyRequest { source_key: [0; 24], chunks: lengths.iter().map(|&length| Chunk { source_offset: 0, target_offset: 0, length }).collect() }
    }

    #[test]
    fn limits_are_windows_values() {
        assert!(check_limits(&req(&[4096, 4096])));
        assert!(check_limits(&req(&[MAX_CHUNK_LEN; 16])));
        assert!(!check_limits(&req(&[MAX_CHUNK_LEN; 17])), "more than 16 MiB in all");
        assert!(!check_limits(&req(&[MAX_CHUNK_LEN + 1])));
        assert!(!check_limits(&req(&[0])), "a zero-length chunk");
        assert!(!check_limits(&req(&[1; 257])), "more than 256 chunks");
        assert!(check_limits(&req(&[1; 256])));
    }
}
