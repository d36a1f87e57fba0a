//! WRITE and COMMIT. Stability is honoured: DATA_SYNC and FILE_SYNC writes reach stable
//! storage before the reply; UNSTABLE ones are synced by COMMIT. The verifier changes with
//! every server start, so clients resend unstable writes a restart may have lost.

use std::sync::Arc;

use braid_vfs::{what, ChangeKind, FileAttrs, FileKind, OpenOptions, SharePath};
use nfs_wire::nfs3::*;
use nfs_wire::record::Record;

use super::{put, META_ONLY};
use crate::auth;
use crate::request::{Ctx, HResult};
use braid_filestate::Intent;

/// Largest WRITE accepted (FSINFO's wtmax).
pub const MAX_WRITE: u32 = 1 << 20;

/// WRITE; `a.data` lies inside `record`, which goes to the blocking thread as it is.
pub async fn write(ctx: &Ctx, a: WriteArgs<'_>, record: &Arc<Record>, out: &mut Vec<u8>) -> Nfsstat3 {
    let start = a.data.as_ptr() as usize - record.as_ptr() as usize;
    let res = match write_known(ctx, &a, record, start).await {
        Some((path, before, after)) => ok(ctx, &a, &path, &before, &after).await,
        None => match ctx.resolve(&a.file).await {
            Err(s) => WriteRes::Fail(s, WccData::default()),
            Ok((path, before)) => match store(ctx, &a, path.clone(), &before, record.clone(), start).await {
                Ok(after) => ok(ctx, &a, &path, &before, &after).await,
                Err(s) => WriteRes::Fail(s, ctx.wcc(Some(&before), None)),
            },
        },
    };
    put(out, &res);
    res.status()
}

async fn ok(ctx: &Ctx, a: &WriteArgs<'_>, path: &SharePath, before: &FileAttrs, after: &FileAttrs) -> WriteRes {
    ctx.changed(path, ChangeKind::Modified, false, what::SIZE | what::LAST_WRITE).await;
    WriteRes::Ok(WriteResOk { file_wcc: ctx.wcc(Some(before), Some(after)), count: a.count, committed: a.stable, verf: ctx.state.write_verf })
}

/// A WRITE to a handle whose path is known in one trip to the blocking pool, as
/// `read::read_known` does for READ: None when anything is not as expected (the long
/// way then runs and answers any error). Returns the path and the attributes before and after.
async fn write_known(ctx: &Ctx, a: &WriteArgs<'_>, record: &Arc<Record>, start: usize) -> Option<(SharePath, FileAttrs, FileAttrs)> {
    let token = ctx.token(&a.file).ok()?;
    let export = ctx.export.clone()?;
    let (path, file_id, created) = export.paths.guess(&token)?;
    let len = a.count as usize;
    if export.export.rules.read_only || len > a.data.len() || a.count > MAX_WRITE {
        return None;
    }
    ctx.prepare(file_id, Intent::Write, Some((a.offset, u64::from(a.count))), Nfsstat3::Jukebox).await.ok()?;
    let (offset, stable, id, record) = (a.offset, a.stable, ctx.id.clone(), record.clone());
    let r = ctx
        .as_server(move |b| {
            let same = b.stat_exact(&path).ok().filter(|a| a.file_id == file_id && a.created == created && a.posix.kind == FileKind::File);
            let Some(before) = same else { return Ok(None) };
            let owner = id.uid == 0 || id.uid == before.posix.uid;
            if !owner && auth::allowed(&id, &crate::attrs::owner(&before), ACCESS3_MODIFY, false) == 0 {
                return Ok(None);
            }
            let data = &record[start..start + len];
            let opts = OpenOptions { write: true, non_directory: true, ..META_ONLY };
            let open = || crate::request::run_as(&id, || b.open_exact(&path, opts).map(|(h, _)| h))?;
            let after = export.open_files.get(file_id, &path, true, open).and_then(|h| write_to(&**h, data, offset, stable));
            Ok(after.ok().map(|after| (path, before, after)))
        })
        .await;
    r.ok().flatten()
}

/// Writes all of `data` at `offset` to the file at `path`, synced unless UNSTABLE; the
/// attributes after.
fn write_file(b: &dyn braid_vfs::Backend, path: &SharePath, data: &[u8], offset: u64, stable: StableHow) -> braid_vfs::Result<FileAttrs> {
    let (h, _) = b.open_exact(path, OpenOptions { write: true, non_directory: true, ..META_ONLY })?;
    write_to(&*h, data, offset, stable)
}

/// Writes all of `data` at `offset` through `h`, synced unless UNSTABLE; the attributes
/// after.
fn write_to(h: &dyn braid_vfs::FileHandle, data: &[u8], offset: u64, stable: StableHow) -> braid_vfs::Result<FileAttrs> {
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
    h.attrs()
}

async fn store(ctx: &Ctx, a: &WriteArgs<'_>, path: SharePath, before: &FileAttrs, record: Arc<Record>, start: usize) -> HResult<FileAttrs> {
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
    ctx.prepare(before.file_id, Intent::Write, Some((a.offset, u64::from(a.count))), Nfsstat3::Jukebox).await?;
    let (offset, stable) = (a.offset, a.stable);
    ctx.as_caller(move |b| write_file(b, &path, &record[start..start + len], offset, stable)).await
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
