//! RENAME (within one export: across exports is NFS3ERR_XDEV).

use braid_vfs::{what, ChangeKind, FileAttrs, FileKind, SharePath};
use nfs_wire::nfs3::*;

use super::put;
use super::remove::sticky_check;
use crate::request::{child, need_dir, Ctx, HResult};
use braid_filestate::Intent;

pub async fn rename(ctx: &Ctx, a: RenameArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let from = ctx.resolve(&a.from.dir).await;
    let to = match &from {
        Ok(_) => ctx.resolve(&a.to.dir).await,
        Err(s) => Err(*s),
    };
    let res = match (from, to) {
        (Ok((fpath, fattrs)), Ok((tpath, tattrs))) => {
            let r = move_name(ctx, (&fpath, &fattrs, &a.from.name), (&tpath, &tattrs, &a.to.name)).await;
            let fafter = ctx.stat_opt(&fpath).await;
            let tafter = ctx.stat_opt(&tpath).await;
            let body = RenameResOk { fromdir_wcc: ctx.wcc(Some(&fattrs), fafter.as_ref()), todir_wcc: ctx.wcc(Some(&tattrs), tafter.as_ref()) };
            match r {
                Ok(()) => RenameRes::Ok(body),
                Err(s) => RenameRes::Fail(s, body),
            }
        }
        (Err(s), _) | (_, Err(s)) => RenameRes::Fail(s, RenameResOk { fromdir_wcc: WccData::default(), todir_wcc: WccData::default() }),
    };
    put(out, &res);
    res.status()
}

type Side<'a> = (&'a SharePath, &'a FileAttrs, &'a [u8]);

async fn move_name(ctx: &Ctx, (fdir, fattrs, fname): Side<'_>, (tdir, tattrs, tname): Side<'_>) -> HResult<()> {
    need_dir(fattrs)?;
    need_dir(tattrs)?;
    ctx.writable()?;
    let dots = |n: &[u8]| n == b"." || n == b"..";
    if dots(fname) || dots(tname) {
        return Err(Nfsstat3::Inval);
    }
    let (from, to) = (child(fdir, fname)?, child(tdir, tname)?);
    ctx.check(fattrs, ACCESS3_MODIFY | ACCESS3_LOOKUP)?;
    ctx.check(tattrs, ACCESS3_MODIFY | ACCESS3_LOOKUP)?;
    if from == to {
        return Ok(());
    }
    let (f, t) = (from.clone(), to.clone());
    let (source, target) = ctx.as_server(move |b| Ok((b.stat_exact(&f)?, b.stat_exact(&t).ok()))).await?;
    let is_dir = source.posix.kind == FileKind::Dir;
    if is_dir && to.components().starts_with(from.components()) {
        return Err(Nfsstat3::Inval);
    }
    sticky_check(ctx, fattrs, &source)?;
    ctx.prepare(source.file_id, Intent::Rename, None, Nfsstat3::Acces).await?;
    if let Some(t) = &target {
        sticky_check(ctx, tattrs, t)?;
        ctx.prepare(t.file_id, Intent::Remove, None, Nfsstat3::Acces).await?;
    }
    let (f, t, export, replaced) = (from.clone(), to.clone(), ctx.export()?.clone(), target.map(|t| t.file_id));
    ctx.as_caller(move |b| {
        b.rename_exact(&f, &t)?;
        // The file the rename replaced is gone: its kept handle would hold its space.
        if let Some(id) = replaced {
            export.open_files.forget(id);
        }
        Ok(())
    })
    .await?;
    ctx.changed(&from, ChangeKind::RenamedFrom, is_dir, what::NAME).await;
    ctx.changed(&to, ChangeKind::RenamedTo, is_dir, what::NAME).await;
    Ok(())
}
