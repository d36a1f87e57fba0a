//! LOOKUP.

use nfs_wire::nfs3::*;

use super::put;
use crate::request::{child, need_dir, Ctx, HResult};

pub async fn lookup(ctx: &Ctx, a: LookupArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.what.dir).await {
        Err(s) => LookupRes::Fail(s, PostOpAttr(None)),
        Ok((dir, dattrs)) => match find(ctx, &dir, &dattrs, &a.what.name).await {
            Ok((object, attrs)) => {
                LookupRes::Ok(LookupResOk { object, obj_attributes: ctx.post_op(Some(&attrs)), dir_attributes: ctx.post_op(Some(&dattrs)) })
            }
            Err(s) => LookupRes::Fail(s, ctx.post_op(Some(&dattrs))),
        },
    };
    put(out, &res);
    res.status()
}

async fn find(ctx: &Ctx, dir: &braid_vfs::SharePath, dattrs: &braid_vfs::FileAttrs, name: &[u8]) -> HResult<(NfsFh3, braid_vfs::FileAttrs)> {
    need_dir(dattrs)?;
    ctx.check(dattrs, ACCESS3_LOOKUP)?;
    let path = match name {
        b"." => dir.clone(),
        b".." => dir.parent().unwrap_or_default(),
        _ => child(dir, name)?,
    };
    ctx.stat_with_handle(path).await
}
