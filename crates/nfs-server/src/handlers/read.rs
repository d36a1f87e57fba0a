//! READ: file data straight into the reply buffer (no intermediate copy).

use braid_vfs::{FileAttrs, FileKind, OpenOptions};
use nfs_wire::nfs3::*;
use nfs_wire::xdr::pad_len;
use nfs_wire::XdrWriter;

use super::{put, META_ONLY};
use crate::coordinator::Intent;
use crate::request::{Ctx, HResult};

/// Largest READ served (FSINFO's rtmax).
pub const MAX_READ: u32 = 1 << 20;
/// Bytes of a successful READ3res before the data when attributes are present: status,
/// post_op_attr (flag and fattr3), count, eof, data length.
const OK_HEAD: usize = 4 + 4 + Fattr3::XDR_LEN + 4 + 4 + 4;

pub async fn read(ctx: &Ctx, a: ReadArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let (path, attrs) = match ctx.resolve(&a.file).await {
        Ok(x) => x,
        Err(s) => {
            put(out, &ReadRes::Fail(s, PostOpAttr(None)));
            return s;
        }
    };
    // The reply so far (record mark and RPC header) is small: kept in case the buffer is
    // lost with a failed storage task.
    let saved = out.clone();
    match read_into(ctx, &a, path, &attrs, std::mem::take(out)).await {
        Ok(buf) => {
            *out = buf;
            Nfsstat3::Ok
        }
        Err((s, buf)) => {
            *out = if buf.is_empty() { saved } else { buf };
            put(out, &ReadRes::Fail(s, ctx.post_op(Some(&attrs))));
            s
        }
    }
}

/// Checks, then reads into `out` (returned whole on success, unchanged on failure).
async fn read_into(ctx: &Ctx, a: &ReadArgs, path: braid_vfs::SharePath, attrs: &FileAttrs, out: Vec<u8>) -> Result<Vec<u8>, (Nfsstat3, Vec<u8>)> {
    if let Err(s) = allowed(ctx, attrs).await {
        return Err((s, out));
    }
    let (offset, count, fsid) = (a.offset, a.count.min(MAX_READ), ctx.fsid());
    let r = ctx
        .as_caller(move |b| {
            let mut out = out;
            let (h, _) = match b.open_exact(&path, OpenOptions { read: true, non_directory: true, ..META_ONLY }) {
                Ok(h) => h,
                Err(e) => return Ok(Err((e, out))),
            };
            let head_at = out.len();
            out.resize(head_at + OK_HEAD + count as usize, 0);
            let mut got = 0usize;
            while got < count as usize {
                match h.read_at(&mut out[head_at + OK_HEAD + got..], offset + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) => {
                        out.truncate(head_at);
                        return Ok(Err((e, out)));
                    }
                }
            }
            out.truncate(head_at + OK_HEAD + got);
            let after = h.attrs().ok();
            let eof = after.as_ref().is_some_and(|a| offset + got as u64 >= a.size);
            let ok = ReadResOk { file_attributes: crate::attrs::post_op(after.as_ref(), fsid), count: got as u32, eof };
            finish_head(&mut out, head_at, &ok);
            Ok(Ok(out))
        })
        .await;
    match r {
        Ok(Ok(buf)) => Ok(buf),
        Ok(Err((e, buf))) => Err((crate::status::nfs_status(&e), buf)),
        // The buffer went with the failed task.
        Err(s) => Err((s, Vec::new())),
    }
}

/// Writes the result head into the room left before the data, and pads the data.
fn finish_head(out: &mut Vec<u8>, head_at: usize, ok: &ReadResOk) {
    let mut head = Vec::with_capacity(OK_HEAD);
    ReadRes::encode_ok_head(ok, &mut XdrWriter::new(&mut head));
    // Without attributes the head is shorter: close the gap.
    let gap = OK_HEAD - head.len();
    out[head_at + gap..head_at + OK_HEAD].copy_from_slice(&head);
    if gap > 0 {
        out.drain(head_at..head_at + gap);
    }
    let pad = pad_len(ok.count as usize);
    out.extend_from_slice(&[0u8; 3][..pad]);
}

/// Whether the caller may read the file (owners always may), after the other protocols
/// made way.
async fn allowed(ctx: &Ctx, attrs: &FileAttrs) -> HResult<()> {
    match attrs.posix.kind {
        FileKind::Dir => return Err(Nfsstat3::Isdir),
        FileKind::File => {}
        _ => return Err(Nfsstat3::Inval),
    }
    if !ctx.owns(attrs) {
        ctx.check(attrs, ACCESS3_READ)?;
    }
    ctx.prepare(attrs.file_id, Intent::Read, Nfsstat3::Jukebox).await
}
