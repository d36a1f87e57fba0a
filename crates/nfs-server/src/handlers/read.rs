//! READ: file data straight into the reply buffer (no intermediate copy).

use braid_vfs::{Backend, FileAttrs, FileKind, OpenOptions, SharePath, VfsError};
use nfs_wire::nfs3::*;
use nfs_wire::xdr::pad_len;
use nfs_wire::XdrWriter;

use super::{put, META_ONLY};
use crate::auth;
use crate::request::{Ctx, HResult};
use braid_filestate::Intent;

/// Largest READ served (FSINFO's rtmax).
pub const MAX_READ: u32 = 1 << 20;
/// Bytes of a successful READ3res before the data when attributes are present: status,
/// post_op_attr (flag and fattr3), count, eof, data length.
const OK_HEAD: usize = 4 + 4 + Fattr3::XDR_LEN + 4 + 4 + 4;

pub async fn read(ctx: &Ctx, a: ReadArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    // The reply so far (record mark and RPC header) is small: kept in case the buffer is
    // lost with a failed storage task.
    let saved = out.clone();
    match read_known(ctx, &a, std::mem::take(out)).await {
        Ok(buf) => {
            *out = buf;
            return Nfsstat3::Ok;
        }
        Err(buf) => *out = if buf.is_empty() { saved.clone() } else { buf },
    }
    let (path, attrs) = match ctx.resolve(&a.file).await {
        Ok(x) => x,
        Err(s) => {
            put(out, &ReadRes::Fail(s, PostOpAttr(None)));
            return s;
        }
    };
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
    if let Err(s) = allowed(ctx, attrs, (a.offset, u64::from(a.count.min(MAX_READ)))).await {
        return Err((s, out));
    }
    let (offset, count, fsid) = (a.offset, a.count.min(MAX_READ), ctx.fsid());
    let r = ctx.as_caller(move |b| Ok(read_file(b, &path, offset, count, fsid, out))).await;
    match r {
        Ok(Ok(buf)) => Ok(buf),
        Ok(Err((e, buf))) => Err((crate::status::nfs_status(&e), buf)),
        // The buffer went with the failed task.
        Err(s) => Err((s, Vec::new())),
    }
}

/// Opens the file at `path` and reads up to `count` bytes at `offset` into `out`, behind
/// room for the result head, then writes the head: the whole success result is appended.
fn read_file(b: &dyn Backend, path: &SharePath, offset: u64, count: u32, fsid: u64, out: Vec<u8>) -> Result<Vec<u8>, (VfsError, Vec<u8>)> {
    match b.open_exact(path, READING) {
        Ok((h, _)) => read_from(&*h, offset, count, fsid, out),
        Err(e) => Err((e, out)),
    }
}

const READING: OpenOptions = OpenOptions { read: true, non_directory: true, ..META_ONLY };

/// Reads up to `count` bytes at `offset` through `h` into `out`, as [`read_file`].
fn read_from(h: &dyn braid_vfs::FileHandle, offset: u64, count: u32, fsid: u64, mut out: Vec<u8>) -> Result<Vec<u8>, (VfsError, Vec<u8>)> {
    let head_at = out.len();
    out.resize(head_at + OK_HEAD + count as usize, 0);
    let mut got = 0usize;
    while got < count as usize {
        match h.read_at(&mut out[head_at + OK_HEAD + got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => {
                out.truncate(head_at);
                return Err((e, out));
            }
        }
    }
    out.truncate(head_at + OK_HEAD + got);
    let after = h.attrs().ok();
    let eof = after.as_ref().is_some_and(|a| offset + got as u64 >= a.size);
    let ok = ReadResOk { file_attributes: crate::attrs::post_op(after.as_ref(), fsid), count: got as u32, eof };
    finish_head(&mut out, head_at, &ok);
    Ok(out)
}

/// A READ of a handle whose path is known in one trip to the blocking pool (the usual
/// case: resolving, checking and reading otherwise take two). The other protocols are
/// asked to make way for the file id the path had; the trip confirms the path still holds
/// that file. `Err(out)` when anything is not as expected: the caller takes the long way,
/// which also produces the right error.
async fn read_known(ctx: &Ctx, a: &ReadArgs, out: Vec<u8>) -> Result<Vec<u8>, Vec<u8>> {
    let Ok(token) = ctx.token(&a.file) else { return Err(out) };
    let Some(export) = ctx.export.clone() else { return Err(out) };
    let Some((path, file_id, created)) = export.paths.guess(&token) else { return Err(out) };
    if ctx.prepare(file_id, Intent::Read, Some((a.offset, u64::from(a.count.min(MAX_READ)))), Nfsstat3::Jukebox).await.is_err() {
        return Err(out);
    }
    let (offset, count, fsid, id) = (a.offset, a.count.min(MAX_READ), ctx.fsid(), ctx.id.clone());
    let saved = out.clone();
    let r = ctx
        .as_server(move |b| {
            let same = b.stat_exact(&path).ok().filter(|a| a.file_id == file_id && a.created == created && a.posix.kind == FileKind::File);
            let Some(attrs) = same else { return Ok(Err(out)) };
            let owner = id.uid == 0 || id.uid == attrs.posix.uid;
            if !owner && auth::allowed(&id, &crate::attrs::owner(&attrs), ACCESS3_READ, false) == 0 {
                return Ok(Err(out));
            }
            let open = || crate::request::run_as(&id, || b.open_exact(&path, READING).map(|(h, _)| h))?;
            match export.open_files.get(file_id, &path, false, open) {
                Ok(h) => Ok(read_from(&**h, offset, count, fsid, out).map_err(|(_, buf)| buf)),
                Err(_) => Ok(Err(out)),
            }
        })
        .await;
    match r {
        Ok(r) => r,
        Err(_) => Err(saved),
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
async fn allowed(ctx: &Ctx, attrs: &FileAttrs, io: (u64, u64)) -> HResult<()> {
    match attrs.posix.kind {
        FileKind::Dir => return Err(Nfsstat3::Isdir),
        FileKind::File => {}
        _ => return Err(Nfsstat3::Inval),
    }
    if !ctx.owns(attrs) {
        ctx.check(attrs, ACCESS3_READ)?;
    }
    ctx.prepare(attrs.file_id, Intent::Read, Some(io), Nfsstat3::Jukebox).await
}
