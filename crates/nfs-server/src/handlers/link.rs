//! LINK and READLINK.

use braid_vfs::{what, ChangeKind, FileKind};
use nfs_wire::nfs3::*;

use super::put;
use crate::request::{child, need_dir, Ctx};

pub async fn readlink(ctx: &Ctx, a: ReadlinkArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.symlink).await {
        Err(s) => ReadlinkRes::Fail(s, PostOpAttr(None)),
        Ok((_, attrs)) if attrs.posix.kind != FileKind::Symlink => ReadlinkRes::Fail(Nfsstat3::Inval, ctx.post_op(Some(&attrs))),
        Ok((path, attrs)) => match ctx.as_caller(move |b| b.readlink(&path)).await {
            Ok(target) => ReadlinkRes::Ok(ReadlinkResOk { symlink_attributes: ctx.post_op(Some(&attrs)), data: target.into_bytes() }),
            Err(s) => ReadlinkRes::Fail(s, ctx.post_op(Some(&attrs))),
        },
    };
    put(out, &res);
    res.status()
}

pub async fn link(ctx: &Ctx, a: LinkArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let file = ctx.resolve(&a.file).await;
    let dir = match &file {
        Ok(_) => ctx.resolve(&a.link.dir).await,
        Err(s) => Err(*s),
    };
    let res = match (file, dir) {
        (Ok((fpath, fattrs)), Ok((dpath, dattrs))) => {
            let r = async {
                need_dir(&dattrs)?;
                ctx.writable()?;
                if fattrs.posix.kind == FileKind::Dir {
                    return Err(Nfsstat3::Isdir);
                }
                let new = child(&dpath, &a.link.name)?;
                ctx.check(&dattrs, ACCESS3_MODIFY | ACCESS3_LOOKUP)?;
                let n = new.clone();
                ctx.as_caller(move |b| b.link(&fpath, &n)).await?;
                ctx.changed(&new, ChangeKind::Added, false, what::NAME).await;
                Ok(new)
            }
            .await;
            let fafter = match &r {
                Ok(new) => ctx.stat_opt(new).await,
                Err(_) => Some(fattrs.clone()),
            };
            let dafter = ctx.stat_opt(&dpath).await;
            let body = LinkResOk { file_attributes: ctx.post_op(fafter.as_ref()), linkdir_wcc: ctx.wcc(Some(&dattrs), dafter.as_ref()) };
            match r {
                Ok(_) => LinkRes::Ok(body),
                Err(s) => LinkRes::Fail(s, body),
            }
        }
        (Err(s), _) | (_, Err(s)) => LinkRes::Fail(s, LinkResOk { file_attributes: PostOpAttr(None), linkdir_wcc: WccData::default() }),
    };
    put(out, &res);
    res.status()
}
