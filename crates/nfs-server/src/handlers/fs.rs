//! FSSTAT, FSINFO and PATHCONF.

use nfs_wire::nfs3::*;

use super::put;
use super::read::MAX_READ;
use super::write::MAX_WRITE;
use crate::request::Ctx;

/// File counts reported where the file system does not count inodes (it says 0).
const FILES: u64 = 1 << 32;

fn files(n: u64, total: u64) -> u64 {
    if total == 0 {
        FILES
    } else {
        n
    }
}

pub async fn fsstat(ctx: &Ctx, a: FsstatArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.fsroot).await {
        Err(s) => FsstatRes::Fail(s, PostOpAttr(None)),
        Ok((_, attrs)) => match ctx.as_server(|b| b.statfs()).await {
            Ok(st) => FsstatRes::Ok(FsstatResOk {
                obj_attributes: ctx.post_op(Some(&attrs)),
                tbytes: st.total_bytes,
                fbytes: st.free_bytes,
                abytes: st.avail_bytes,
                tfiles: files(st.total_files, st.total_files),
                ffiles: files(st.free_files, st.total_files),
                afiles: files(st.avail_files, st.total_files),
                invarsec: 0,
            }),
            Err(s) => FsstatRes::Fail(s, ctx.post_op(Some(&attrs))),
        },
    };
    put(out, &res);
    res.status()
}

pub async fn fsinfo(ctx: &Ctx, a: FsinfoArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.fsroot).await {
        Err(s) => FsinfoRes::Fail(s, PostOpAttr(None)),
        Ok((_, attrs)) => FsinfoRes::Ok(FsinfoResOk {
            obj_attributes: ctx.post_op(Some(&attrs)),
            rtmax: MAX_READ,
            rtpref: MAX_READ,
            rtmult: 4096,
            wtmax: MAX_WRITE,
            wtpref: MAX_WRITE,
            wtmult: 4096,
            dtpref: 64 * 1024,
            maxfilesize: i64::MAX as u64,
            time_delta: NfsTime3 { seconds: 0, nseconds: 1 },
            properties: FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME,
        }),
    };
    put(out, &res);
    res.status()
}

pub async fn pathconf(ctx: &Ctx, a: PathconfArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.object).await {
        Err(s) => PathconfRes::Fail(s, PostOpAttr(None)),
        Ok((_, attrs)) => PathconfRes::Ok(PathconfResOk {
            obj_attributes: ctx.post_op(Some(&attrs)),
            linkmax: 65_000,
            name_max: braid_vfs::MAX_COMPONENT_LEN as u32,
            no_trunc: true,
            chown_restricted: true,
            case_insensitive: false,
            case_preserving: true,
        }),
    };
    put(out, &res);
    res.status()
}
