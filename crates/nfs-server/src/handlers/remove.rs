//! REMOVE and RMDIR.

use braid_vfs::{what, ChangeKind, FileAttrs, FileKind, SharePath};
use nfs_wire::nfs3::*;

use super::put;
use crate::request::{child, need_dir, Ctx, HResult};
use braid_filestate::Intent;

pub async fn remove(ctx: &Ctx, a: RemoveArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match unlink(ctx, &a.object, false).await {
        Ok(dir_wcc) => RemoveRes::Ok(RemoveResOk { dir_wcc }),
        Err((s, wcc)) => RemoveRes::Fail(s, wcc),
    };
    put(out, &res);
    res.status()
}

pub async fn rmdir(ctx: &Ctx, a: RmdirArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match unlink(ctx, &a.object, true).await {
        Ok(dir_wcc) => RmdirRes::Ok(RemoveResOk { dir_wcc }),
        Err((s, wcc)) => RmdirRes::Fail(s, wcc),
    };
    put(out, &res);
    res.status()
}

/// Removes a name (a directory when `dir`); the directory's WCC data either way.
async fn unlink(ctx: &Ctx, obj: &DirOpArgs3, dir: bool) -> Result<WccData, (Nfsstat3, WccData)> {
    let (dpath, dattrs) = ctx.resolve(&obj.dir).await.map_err(|s| (s, WccData::default()))?;
    let r = unlink_in(ctx, &dpath, &dattrs, &obj.name, dir).await;
    let after = ctx.stat_opt(&dpath).await;
    let wcc = ctx.wcc(Some(&dattrs), after.as_ref());
    match r {
        Ok(()) => Ok(wcc),
        Err(s) => Err((s, wcc)),
    }
}

async fn unlink_in(ctx: &Ctx, dpath: &SharePath, dattrs: &FileAttrs, name: &[u8], dir: bool) -> HResult<()> {
    need_dir(dattrs)?;
    ctx.writable()?;
    if name == b"." || name == b".." {
        return Err(if dir { Nfsstat3::Inval } else { Nfsstat3::Acces });
    }
    let path = child(dpath, name)?;
    ctx.check(dattrs, ACCESS3_MODIFY | ACCESS3_LOOKUP)?;
    let p = path.clone();
    let target = ctx.as_server(move |b| b.stat_exact(&p)).await?;
    let is_dir = target.posix.kind == FileKind::Dir;
    match (dir, is_dir) {
        (false, true) => return Err(Nfsstat3::Isdir),
        (true, false) => return Err(Nfsstat3::Notdir),
        _ => {}
    }
    sticky_check(ctx, dattrs, &target)?;
    ctx.prepare(target.file_id, Intent::Remove, None, Nfsstat3::Acces).await?;
    let (p, export, id) = (path.clone(), ctx.export()?.clone(), target.file_id);
    ctx.as_caller(move |b| {
        b.remove_exact(&p)?;
        // A handle kept open would hold the removed file's space until it went idle.
        export.open_files.forget(id);
        Ok(())
    })
    .await?;
    ctx.changed(&path, ChangeKind::Removed, is_dir, what::NAME).await;
    Ok(())
}

/// In a sticky directory only the owner of the entry or of the directory (or root) may
/// remove or rename it.
pub fn sticky_check(ctx: &Ctx, dattrs: &FileAttrs, target: &FileAttrs) -> HResult<()> {
    let sticky = dattrs.posix.mode & 0o1000 != 0;
    if sticky && ctx.id.uid != 0 && ctx.id.uid != dattrs.posix.uid && ctx.id.uid != target.posix.uid {
        return Err(Nfsstat3::Acces);
    }
    Ok(())
}
