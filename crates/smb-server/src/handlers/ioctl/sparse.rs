//! Sparse files (MS-FSCC 2.3.64 FSCTL_SET_SPARSE, 2.3.67 FSCTL_SET_ZERO_DATA, 2.3.51
//! FSCTL_QUERY_ALLOCATED_RANGES; checks and errors as MS-FSA 2.1.5.9 and Windows answer
//! them). The sparse mark is a stored attribute (`braid_vfs::dos::SPARSE_FILE`); zeroing a
//! sparse file punches a hole, zeroing any other file writes zeros that stay allocated, and
//! only a sparse file reports its holes: another reports the range asked about, up to the
//! end of file, as one allocated range, as NTFS does.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use braid_vfs::{dos, what, FileHandle};
use smb_wire::msg::create::access;
use smb_wire::msg::ioctl::{encode_response, IoctlRequest};
use smb_wire::msg::sparse::{decode_set_sparse, AllocatedRange, ZeroData, RANGE_LEN};
use smb_wire::NtStatus;

use super::super::{blocking, write_or_pending};
use crate::locks::FileNode;
use crate::open::{Open, OpenKind};
use crate::request::{Ctx, HResult, Reply};

/// Most ranges one answer carries, whatever the client allows (1 MiB of output).
const MAX_RANGES: usize = 65_536;

/// The handle and file state of a file (not directory) open; INVALID_PARAMETER for a
/// directory, as Windows answers these controls there.
fn file_of(open: &Open) -> Result<(&Arc<dyn FileHandle>, &Arc<FileNode>), NtStatus> {
    match &open.kind {
        OpenKind::File { is_dir: true, .. } => Err(NtStatus::INVALID_PARAMETER),
        OpenKind::File { handle, node, .. } => Ok((handle, node)),
        OpenKind::Pipe(_) => Err(NtStatus::INVALID_DEVICE_REQUEST),
    }
}

/// FSCTL_SET_SPARSE: sets the mark (no buffer, or a first byte other than 0) or clears it.
/// Any of write data, append data or write attributes access allows it.
pub(super) async fn set_sparse(cx: &Ctx<'_>, req: &IoctlRequest<'_>, open: &Open, out: &mut Vec<u8>) -> HResult {
    if !open.has(access::FILE_WRITE_DATA | access::FILE_APPEND_DATA | access::FILE_WRITE_ATTRIBUTES) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (handle, _) = file_of(open)?;
    if open.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    let sparse = decode_set_sparse(req.input);
    let h = handle.clone();
    let changed = blocking(move || {
        let was = h.attrs()?.dos_attributes & dos::SPARSE_FILE != 0;
        if was != sparse {
            h.set_sparse(sparse)?;
        }
        Ok(was != sparse)
    })
    .await?;
    if changed {
        super::super::announce(cx, open, what::ATTRIBUTES).await;
    }
    encode_response(out, req.ctl_code, open.id, &[]);
    Ok(Reply::success())
}

/// FSCTL_SET_ZERO_DATA: zeros FileOffset..BeyondFinalZero up to the end of file (never
/// moving it), after the file's earlier writes, refused where another open's byte-range
/// lock covers it.
pub(super) async fn set_zero_data(cx: &mut Ctx<'_>, req: &IoctlRequest<'_>, open: Arc<Open>, out: &mut Vec<u8>) -> HResult {
    let z = ZeroData::decode(req.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let (Ok(offset), Ok(beyond)) = (u64::try_from(z.file_offset), u64::try_from(z.beyond_final_zero)) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if offset > beyond {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (handle, node) = file_of(&open)?;
    if !open.has(access::FILE_WRITE_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if open.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    crate::breaks::break_level2(&open).send(&cx.conn.server).await;
    let job = ZeroJob { handle: handle.clone(), node: node.clone(), open: open.id.volatile, offset, beyond };
    let (status, zeroed) = write_or_pending(cx, out, &node.writes, move || job.run()).await?;
    if zeroed {
        open.written.store(true, Ordering::Relaxed);
    }
    if status != NtStatus::SUCCESS {
        return Err(status);
    }
    encode_response(out, req.ctl_code, open.id, &[]);
    Ok(Reply::success())
}

/// One FSCTL_SET_ZERO_DATA, run on the file's write queue.
struct ZeroJob {
    handle: Arc<dyn FileHandle>,
    node: Arc<FileNode>,
    open: u64,
    offset: u64,
    beyond: u64,
}

impl ZeroJob {
    /// The answer's status, and whether any byte was zeroed.
    fn run(self) -> braid_vfs::Result<(NtStatus, bool)> {
        let a = self.handle.attrs()?;
        let end = self.beyond.min(a.size);
        if end <= self.offset {
            return Ok((NtStatus::SUCCESS, false));
        }
        let len = end - self.offset;
        if !self.node.io_allowed(self.open, self.offset, len, true) {
            return Ok((NtStatus::FILE_LOCK_CONFLICT, false));
        }
        let sparse = a.dos_attributes & dos::SPARSE_FILE != 0;
        self.handle.zero_range(self.offset, len, sparse)?;
        Ok((NtStatus::SUCCESS, true))
    }
}

/// FSCTL_QUERY_ALLOCATED_RANGES: the allocated ranges of the range asked about, as many as
/// the output holds (STATUS_BUFFER_OVERFLOW when more exist, BUFFER_TOO_SMALL when not one
/// fits). Byte-range locks do not matter: nothing is read.
pub(super) async fn query_allocated_ranges(req: &IoctlRequest<'_>, open: &Open, max_out: usize, out: &mut Vec<u8>) -> HResult {
    let q = AllocatedRange::decode(req.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let (Ok(offset), Ok(len)) = (u64::try_from(q.file_offset), u64::try_from(q.length)) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if q.file_offset.checked_add(q.length).is_none() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (handle, _) = file_of(open)?;
    if !open.has(access::FILE_READ_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let room = (max_out / RANGE_LEN).min(MAX_RANGES);
    let h = handle.clone();
    // One more than fits, to learn whether the answer is cut short.
    let ranges = blocking(move || {
        if h.attrs()?.dos_attributes & dos::SPARSE_FILE == 0 {
            let end = offset.saturating_add(len).min(h.size()?);
            return Ok(if end > offset { vec![(offset, end - offset)] } else { Vec::new() });
        }
        h.allocated_ranges(offset, len, room + 1)
    })
    .await?;
    if ranges.is_empty() {
        encode_response(out, req.ctl_code, open.id, &[]);
        return Ok(Reply::success());
    }
    if room == 0 {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let status = if ranges.len() > room { NtStatus::BUFFER_OVERFLOW } else { NtStatus::SUCCESS };
    let mut data = Vec::with_capacity(ranges.len().min(room) * RANGE_LEN);
    for &(o, l) in ranges.iter().take(room) {
        // Both below i64::MAX: the file's offsets are.
        AllocatedRange { file_offset: o as i64, length: l as i64 }.encode(&mut data);
    }
    encode_response(out, req.ctl_code, open.id, &data);
    Ok(Reply::new(status))
}
