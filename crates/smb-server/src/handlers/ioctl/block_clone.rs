//! Block cloning (MS-SMB2 3.3.5.15.17 FSCTL_DUPLICATE_EXTENTS_TO_FILE, 3.3.5.15.18 its _EX
//! form; MS-FSA 2.1.5.10.4, MS-FSCC 2.3.8): a range of the target (the open the IOCTL
//! names) comes to share the blocks of a range of the source (an open of the session named
//! by its FileId); no byte is copied. The kernel does it (`braid_vfs::clone_range`:
//! FICLONERANGE), so only shares whose file system can clone (xfs with reflink, btrfs)
//! report FILE_SUPPORTS_BLOCK_REFCOUNTING and accept it; elsewhere it answers
//! STATUS_INVALID_DEVICE_REQUEST, as a Windows volume without block refcounting does.
//!
//! The checks and answers follow Windows as smbtorture's `dup_extents_*` tests and Samba
//! see it: a source range past the source's allocation is STATUS_NOT_SUPPORTED, a target
//! range past the target's end of file is cut at it (the target never grows), byte-range
//! locks do not apply (as on ReFS), ranges overlapping within one file and a sparse
//! source with a non-sparse target are STATUS_NOT_SUPPORTED.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use braid_vfs::{dos, Backend, FileHandle, VfsError};
use smb_wire::msg::create::access;
use smb_wire::msg::dup_extents::DuplicateExtents;
use smb_wire::msg::ioctl::{encode_response, fsctl, IoctlRequest};
use smb_wire::{FileId, NtStatus};

use super::super::{blocking, write_or_pending};
use crate::locks::FileNode;
use crate::open::{Open, OpenKind};
use crate::request::{Ctx, HResult, Reply};

/// FSCTL_DUPLICATE_EXTENTS_TO_FILE(_EX) with `target` the open the IOCTL names.
pub(super) async fn duplicate_extents(cx: &mut Ctx<'_>, req: &IoctlRequest<'_>, target: Arc<Open>, out: &mut Vec<u8>) -> HResult {
    let Some(share) = target.tree.share().cloned() else { return Err(NtStatus::INVALID_DEVICE_REQUEST) };
    // The file system first: one that cannot clone refuses every request, as Samba does.
    let backend = share.backend.clone();
    if !blocking(move || Ok(backend.block_cloning())).await? {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let dup = match req.ctl_code {
        fsctl::DUPLICATE_EXTENTS_TO_FILE_EX => DuplicateExtents::decode_ex(req.input),
        _ => DuplicateExtents::decode(req.input),
    }
    .map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let src = source(cx, dup.source).ok_or(NtStatus::INVALID_HANDLE)?;
    let (to, to_node) = file_of(&target)?;
    let (from, from_node) = file_of(&src)?;
    if target.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    if !target.has(access::FILE_WRITE_DATA) || !src.has(access::FILE_READ_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (Ok(src_off), Ok(dst_off), Ok(count)) = (u64::try_from(dup.source_offset), u64::try_from(dup.target_offset), u64::try_from(dup.byte_count))
    else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if src_off.checked_add(count).is_none() || dst_off.checked_add(count).is_none() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    crate::breaks::break_level2(&target).send(&cx.conn.server).await;
    let job = CloneJob {
        backend: share.backend.clone(),
        from: from.clone(),
        to: to.clone(),
        one_file: Arc::ptr_eq(from_node, to_node),
        range: Range { src: src_off, dst: dst_off, len: count },
    };
    let cloned = write_or_pending(cx, out, &to_node.writes, move || job.run()).await??;
    if cloned {
        target.written.store(true, Ordering::Relaxed);
    }
    encode_response(out, req.ctl_code, target.id, &[]);
    Ok(Reply::success())
}

/// The source a FileId names: an open of this session (MS-SMB2 3.3.5.15.17 looks in
/// Session.OpenTable), on any of its trees.
fn source(cx: &Ctx<'_>, id: FileId) -> Option<Arc<Open>> {
    let open = cx.session.as_ref()?.open(id.volatile)?;
    (open.id.persistent == id.persistent).then_some(open)
}

/// The handle and file state of a file open; a directory (or a pipe) has no extents.
fn file_of(open: &Open) -> Result<(&Arc<dyn FileHandle>, &Arc<FileNode>), NtStatus> {
    match &open.kind {
        OpenKind::File { handle, node, is_dir: false, .. } => Ok((handle, node)),
        _ => Err(NtStatus::INVALID_PARAMETER),
    }
}

/// Byte ranges: `len` bytes at `src` of the source and at `dst` of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    src: u64,
    dst: u64,
    len: u64,
}

/// What the kernel is asked to do for a range, once checked against both files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    /// Bytes cloned from the start of the range.
    clone: u64,
    /// Bytes after those copied instead: the part of a cluster that ends the source's
    /// data but not the target (the kernel clones a partial block only from end of file
    /// to end of file).
    copy: u64,
    /// Bytes after those set to zero: the range past the source's end of file, inside its
    /// last cluster (which reads as zeros).
    zero: u64,
}

/// Sizes the checks need: both files' ends and sparse marks, the cluster size.
#[derive(Debug, Clone, Copy)]
struct Files {
    src_size: u64,
    dst_size: u64,
    src_sparse: bool,
    dst_sparse: bool,
    cluster: u64,
    one_file: bool,
}

impl Files {
    /// The plan for `r` (`None`: nothing to do), or the status refusing it.
    fn plan(&self, r: Range) -> Result<Option<Plan>, NtStatus> {
        let c = self.cluster;
        let ends_source = r.src.checked_add(r.len) == Some(self.src_size);
        if r.src % c != 0 || r.dst % c != 0 || (r.len % c != 0 && !ends_source) {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if r.src + r.len > self.src_size.div_ceil(c) * c {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        // Past the target's end the range is cut, as Windows does: the target never grows.
        let len = match self.dst_size.checked_sub(r.dst) {
            None => return Err(NtStatus::INVALID_PARAMETER),
            Some(room) => r.len.min(room),
        };
        if len == 0 {
            return Ok(None);
        }
        let span = len.div_ceil(c) * c;
        if self.one_file && r.dst < r.src + span && r.src < r.dst + span {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        if self.src_sparse && !self.dst_sparse {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        let data = len.min(self.src_size.saturating_sub(r.src));
        let whole = data % c == 0 || (r.src + data == self.src_size && r.dst + data == self.dst_size);
        let clone = if whole { data } else { data - data % c };
        Ok(Some(Plan { clone, copy: data - clone, zero: len - data }))
    }
}

/// One clone, run after the target's earlier writes (its write queue).
struct CloneJob {
    backend: Arc<dyn Backend>,
    from: Arc<dyn FileHandle>,
    to: Arc<dyn FileHandle>,
    one_file: bool,
    range: Range,
}

impl CloneJob {
    /// Whether anything was cloned, or the status refusing it.
    fn run(self) -> braid_vfs::Result<Result<bool, NtStatus>> {
        let sparse = |h: &dyn FileHandle| -> braid_vfs::Result<bool> { Ok(h.attrs()?.dos_attributes & dos::SPARSE_FILE != 0) };
        let files = Files {
            src_size: self.from.size()?,
            dst_size: self.to.size()?,
            src_sparse: sparse(self.from.as_ref())?,
            dst_sparse: sparse(self.to.as_ref())?,
            cluster: u64::from(self.backend.statfs()?.block_size.max(1)),
            one_file: self.one_file,
        };
        let plan = match files.plan(self.range) {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(Ok(false)),
            Err(status) => return Ok(Err(status)),
        };
        let Range { src, dst, .. } = self.range;
        if plan.clone > 0 {
            match braid_vfs::clone_range(self.from.as_ref(), self.to.as_ref(), src, dst, plan.clone) {
                Ok(()) => {}
                // A source on another file system or backend, or a named stream.
                Err(VfsError::Io(e)) if e.kind() == std::io::ErrorKind::Unsupported => return Ok(Err(NtStatus::NOT_SUPPORTED)),
                Err(VfsError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidInput => return Ok(Err(NtStatus::INVALID_PARAMETER)),
                Err(e) => return Err(e),
            }
        }
        if plan.copy > 0 {
            braid_vfs::copy_range(self.from.as_ref(), self.to.as_ref(), src + plan.clone, dst + plan.clone, plan.copy)?;
        }
        if plan.zero > 0 {
            self.to.zero_range(dst + plan.clone + plan.copy, plan.zero, files.dst_sparse)?;
        }
        Ok(Ok(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: u64 = 4096;

    fn files(src_size: u64, dst_size: u64) -> Files {
        Files { src_size, dst_size, src_sparse: false, dst_sparse: false, cluster: C, one_file: false }
    }

    fn r(src: u64, dst: u64, len: u64) -> Range {
        Range { src, dst, len }
    }

    #[test]
    fn aligned_ranges_inside_both_files_are_cloned_whole() {
        assert_eq!(files(32768, 32768).plan(r(0, 0, 32768)), Ok(Some(Plan { clone: 32768, copy: 0, zero: 0 })));
        assert_eq!(files(64 << 20, 64 << 20).plan(r(C, 2 * C, 8 * C)), Ok(Some(Plan { clone: 8 * C, copy: 0, zero: 0 })));
        assert_eq!(files(32768, 0).plan(r(0, 0, 0)), Ok(None), "a zero count does nothing");
    }

    #[test]
    fn the_target_is_never_extended() {
        // smbtorture dup_extents_len_beyond_dest: an empty target stays empty.
        assert_eq!(files(32768, 0).plan(r(0, 0, 32768)), Ok(None));
        assert_eq!(files(32768, 16384).plan(r(0, 0, 32768)), Ok(Some(Plan { clone: 16384, copy: 0, zero: 0 })));
        assert_eq!(files(32768, 16384).plan(r(0, 20480, C)), Err(NtStatus::INVALID_PARAMETER), "a target offset past its end");
        // Cut at an unaligned target end: whole clusters are cloned, the rest copied.
        assert_eq!(files(32768, 5000).plan(r(0, 0, 8192)), Ok(Some(Plan { clone: C, copy: 5000 - C, zero: 0 })));
    }

    #[test]
    fn the_source_range_must_lie_within_its_allocation() {
        assert_eq!(files(32768, 0).plan(r(0, 0, 65536)), Err(NtStatus::NOT_SUPPORTED), "dup_extents_len_beyond_src");
        // The last cluster of an unaligned file: up to its end cloned, the rest zeroed.
        assert_eq!(files(5000, 8192).plan(r(0, 0, 8192)), Ok(Some(Plan { clone: C, copy: 5000 - C, zero: 8192 - 5000 })));
        assert_eq!(files(5000, 8192).plan(r(0, 0, 12288)), Err(NtStatus::NOT_SUPPORTED));
        // End of file to end of file: the kernel clones the partial block itself.
        assert_eq!(files(5000, 5000).plan(r(0, 0, 5000)), Ok(Some(Plan { clone: 5000, copy: 0, zero: 0 })));
    }

    #[test]
    fn unaligned_offsets_and_counts_are_refused() {
        assert_eq!(files(32768, 32768).plan(r(512, 0, C)), Err(NtStatus::INVALID_PARAMETER));
        assert_eq!(files(32768, 32768).plan(r(0, 100, C)), Err(NtStatus::INVALID_PARAMETER));
        assert_eq!(files(32768, 32768).plan(r(0, 0, 1000)), Err(NtStatus::INVALID_PARAMETER));
    }

    #[test]
    fn overlap_within_one_file_and_a_sparse_source_are_not_supported() {
        let one = Files { one_file: true, ..files(32768, 32768) };
        assert_eq!(one.plan(r(0, 8192, 16384)), Err(NtStatus::NOT_SUPPORTED), "dup_extents_src_is_dest_overlap");
        assert_eq!(one.plan(r(0, 16384, 16384)), Ok(Some(Plan { clone: 16384, copy: 0, zero: 0 })), "dup_extents_src_is_dest");
        let sparse_src = Files { src_sparse: true, ..files(C, C) };
        assert_eq!(sparse_src.plan(r(0, 0, C)), Err(NtStatus::NOT_SUPPORTED));
        let sparse_dst = Files { dst_sparse: true, ..files(C, C) };
        assert!(sparse_dst.plan(r(0, 0, C)).is_ok(), "a sparse target is fine, as on Windows");
        let both = Files { src_sparse: true, dst_sparse: true, ..files(C, C) };
        assert!(both.plan(r(0, 0, C)).is_ok());
    }
}
