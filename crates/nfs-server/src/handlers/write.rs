//! WRITE and COMMIT. Stability is honoured: DATA_SYNC and FILE_SYNC writes reach stable
//! storage before the reply; UNSTABLE ones are synced by COMMIT. The verifier changes with
//! every server start, so clients resend unstable writes a restart may have lost.

use std::sync::Arc;

use braid_vfs::{what, ChangeKind, FileAttrs, FileKind, OpenOptions, SharePath};
use nfs_wire::nfs3::*;
use nfs_wire::record::Record;

use super::{put, META_ONLY};
use crate::coordinator::Intent;
use crate::request::{Ctx, HResult};

/// Largest WRITE accepted (FSINFO's wtmax).
pub const MAX_WRITE: u32 = 1 << 20;

/// WRITE; `a.data` lies inside `record`, which goes to the blocking thread as it is.
pub async fn write(ctx: &Ctx, a: WriteArgs<'_>, record: &Arc<Record>, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.file).await {
        Err(s) => WriteRes::Fail(s, WccData::default()),
        Ok((path, before)) => {
            let start = a.data.as_ptr() as usize - record.as_ptr() as usize;
            match store(ctx, &a, path.clone(), &before, record.clone(), start).await {
                Ok((count, after)) => {
                    ctx.changed(&path, ChangeKind::Modified, false, what::SIZE | what::LAST_WRITE);
                    let committed = a.stable;
                    WriteRes::Ok(WriteResOk { file_wcc: ctx.wcc(Some(&before), Some(&after)), count, committed, verf: ctx.state.write_verf })
                }
                Err(s) => WriteRes::Fail(s, ctx.wcc(Some(&before), None)),
            }
        }
    };
    put(out, &res);
    res.status()
}

async fn store(ctx: &Ctx, a: &WriteArgs<'_>, path: SharePath, before: &FileAttrs, record: Arc<Record>, start: usize) -> HResult<(u32, FileAttrs)> {
    ctx.writable()?;
    match before.posix.kind {
        FileKind::File => {}
        FileKind::Dir => return Err(Nfsstat3::Isdir),
        _ => return Err(Nfsstat3::Inval),
    }
    let len = a.count as usize;
    if len > a.data.len() || a.count > MAX_WRITE {
        return Err(Nfsstat3::Inval);
    }
    if !ctx.owns(before) {
        ctx.check(before, ACCESS3_MODIFY)?;
    }
    ctx.prepare(before.file_id, Intent::Write, Nfsstat3::Jukebox).await?;
    let (offset, stable) = (a.offset, a.stable);
    ctx.as_caller(move |b| {
        let data = &record[start..start + len];
        let (h, _) = b.open_exact(&path, OpenOptions { write: true, non_directory: true, ..META_ONLY })?;
        let mut done = 0;
        while done < data.len() {
            match h.write_at(&data[done..], offset + done as u64)? {
                0 => return Err(braid_vfs::VfsError::NoSpace),
                n => done += n,
            }
        }
        if stable != StableHow::Unstable {
            h.sync()?;
        }
        Ok((len as u32, h.attrs()?))
    })
    .await
}

pub async fn commit(ctx: &Ctx, a: CommitArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.file).await {
        Err(s) => CommitRes::Fail(s, WccData::default()),
        Ok((path, before)) => {
            let r = match before.posix.kind {
                FileKind::File => {
                    // Syncing what is written needs no permission of its own: run as the server.
                    ctx.as_server(move |b| {
                        let (h, _) = b.open_exact(&path, OpenOptions { non_directory: true, ..META_ONLY })?;
                        h.sync()?;
                        h.attrs()
                    })
                    .await
                }
                FileKind::Dir => Err(Nfsstat3::Isdir),
                _ => Err(Nfsstat3::Inval),
            };
            match r {
                Ok(after) => CommitRes::Ok(CommitResOk { file_wcc: ctx.wcc(Some(&before), Some(&after)), verf: ctx.state.write_verf }),
                Err(s) => CommitRes::Fail(s, ctx.wcc(Some(&before), None)),
            }
        }
    };
    put(out, &res);
    res.status()
}
