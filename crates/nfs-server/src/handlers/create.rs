//! CREATE, MKDIR, SYMLINK and MKNOD: a new name in a directory, owned by the caller.

use std::time::{Duration, UNIX_EPOCH};

use braid_vfs::{what, ChangeKind, CreateMode, FileAttrs, FileKind, OpenOptions, OpenOutcome, SetTimes, SharePath, VfsError};
use nfs_wire::nfs3::*;

use super::{put, META_ONLY};
use crate::request::{child, need_dir, Ctx, HResult};

/// Mode of a new file or directory whose creator sent none.
const DEFAULT_FILE_MODE: u32 = 0o644;
const DEFAULT_DIR_MODE: u32 = 0o755;

/// What every creating procedure does first: the directory, checked, and the new path.
async fn prepare(ctx: &Ctx, dir: &DirOpArgs3) -> Result<(SharePath, FileAttrs, SharePath), (Nfsstat3, Option<FileAttrs>)> {
    let (dpath, dattrs) = ctx.resolve(&dir.dir).await.map_err(|s| (s, None))?;
    let check = || -> HResult<SharePath> {
        need_dir(&dattrs)?;
        ctx.writable()?;
        ctx.check(&dattrs, ACCESS3_MODIFY | ACCESS3_LOOKUP)?;
        child(&dpath, &dir.name)
    };
    match check() {
        Ok(path) => Ok((dpath, dattrs, path)),
        Err(s) => Err((s, Some(dattrs))),
    }
}

/// The success body of a creating procedure, and the change announced.
async fn created(ctx: &Ctx, dpath: &SharePath, dattrs: &FileAttrs, path: SharePath, is_dir: bool) -> CreateResOk {
    let after_dir = ctx.stat_opt(dpath).await;
    ctx.changed(&path, ChangeKind::Added, is_dir, what::NAME).await;
    let (obj, attrs) = match ctx.stat_with_handle(path).await {
        Ok((h, a)) => (PostOpFh3(Some(h)), Some(a)),
        Err(_) => (PostOpFh3(None), None),
    };
    CreateResOk { obj, obj_attributes: ctx.post_op(attrs.as_ref()), dir_wcc: ctx.wcc(Some(dattrs), after_dir.as_ref()) }
}

/// Runs one creating procedure: `make` does the storage work as the caller.
async fn create_with<F>(ctx: &Ctx, dir: &DirOpArgs3, is_dir: bool, make: F) -> Result<CreateResOk, (Nfsstat3, WccData)>
where
    F: FnOnce(&dyn braid_vfs::Backend, &SharePath) -> braid_vfs::Result<()> + Send + 'static,
{
    let (dpath, dattrs, path) = match prepare(ctx, dir).await {
        Ok(x) => x,
        Err((s, d)) => return Err((s, ctx.wcc(d.as_ref(), d.as_ref()))),
    };
    let p = path.clone();
    match ctx.as_caller(move |b| make(b, &p)).await {
        Ok(()) => Ok(created(ctx, &dpath, &dattrs, path, is_dir).await),
        Err(s) => Err((s, ctx.wcc(Some(&dattrs), ctx.stat_opt(&dpath).await.as_ref()))),
    }
}

pub async fn create(ctx: &Ctx, a: CreateArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let how = a.how;
    let r = create_with(ctx, &a.where_, false, move |b, p| create_file(b, p, how)).await;
    let res = match r {
        Ok(ok) => CreateRes::Ok(ok),
        Err((s, wcc)) => CreateRes::Fail(s, wcc),
    };
    put(out, &res);
    res.status()
}

/// The verifier of an exclusive create, kept in the new file's times until the client's
/// SETATTR replaces them (as knfsd does): a retransmitted create finds it and succeeds.
fn verifier_times(v: CreateVerf3) -> SetTimes {
    let t = |b: [u8; 4]| Some(UNIX_EPOCH + Duration::from_secs(u64::from(u32::from_be_bytes(b)) & 0x7fff_ffff));
    SetTimes { accessed: t([v[0], v[1], v[2], v[3]]), modified: t([v[4], v[5], v[6], v[7]]), ..SetTimes::default() }
}

fn create_file(b: &dyn braid_vfs::Backend, p: &SharePath, how: CreateHow3) -> braid_vfs::Result<()> {
    let mode = match how {
        CreateHow3::Unchecked(_) => CreateMode::OpenOrCreate,
        CreateHow3::Guarded(_) | CreateHow3::Exclusive(_) => CreateMode::CreateNew,
    };
    let opts = OpenOptions { create: mode, non_directory: true, truncate: false, ..META_ONLY };
    let (h, outcome) = match b.open_exact(p, opts) {
        Err(VfsError::Exists) => {
            let CreateHow3::Exclusive(v) = how else { return Err(VfsError::Exists) };
            // A retransmission of our own exclusive create: the times hold its verifier.
            let a = b.stat_exact(p)?;
            let want = verifier_times(v);
            return match (Some(a.accessed), Some(a.modified)) == (want.accessed, want.modified) {
                true => Ok(()),
                false => Err(VfsError::Exists),
            };
        }
        r => r?,
    };
    match how {
        CreateHow3::Exclusive(v) => h.set_times(verifier_times(v)),
        CreateHow3::Unchecked(s) | CreateHow3::Guarded(s) => {
            if let Some(size) = s.size {
                h.set_len(size)?;
            }
            // An existing file (UNCHECKED) keeps its mode unless one is sent.
            match (s.mode, outcome) {
                (Some(m), _) => h.set_mode(m & 0o7777)?,
                (None, OpenOutcome::Created) => h.set_mode(DEFAULT_FILE_MODE)?,
                (None, OpenOutcome::Opened) => {}
            }
            if s.uid.is_some() || s.gid.is_some() {
                h.set_owner(s.uid, s.gid)?;
            }
            Ok(())
        }
    }
}

/// Gives the new object at `p` the owner `s` asks for (root may; others get an error from
/// the kernel unless it is their own).
fn give_owner(b: &dyn braid_vfs::Backend, p: &SharePath, s: &Sattr3, directory: bool) -> braid_vfs::Result<()> {
    if s.uid.is_none() && s.gid.is_none() {
        return Ok(());
    }
    let (h, _) = b.open_exact(p, OpenOptions { directory, ..META_ONLY })?;
    h.set_owner(s.uid, s.gid)
}

pub async fn mkdir(ctx: &Ctx, a: MkdirArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let (mode, s) = (a.attributes.mode.unwrap_or(DEFAULT_DIR_MODE) & 0o7777, a.attributes);
    let r = create_with(ctx, &a.where_, true, move |b, p| b.mkdir(p, mode).and_then(|()| give_owner(b, p, &s, true))).await;
    let res = match r {
        Ok(ok) => MkdirRes::Ok(ok),
        Err((s, wcc)) => MkdirRes::Fail(s, wcc),
    };
    put(out, &res);
    res.status()
}

pub async fn symlink(ctx: &Ctx, a: SymlinkArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let r = match String::from_utf8(a.symlink.symlink_data) {
        Ok(target) if !target.is_empty() && target.len() <= 4096 && !target.contains('\0') => {
            create_with(ctx, &a.where_, false, move |b, p| b.symlink(&target, p)).await
        }
        _ => Err((Nfsstat3::Inval, WccData::default())),
    };
    let res = match r {
        Ok(ok) => SymlinkRes::Ok(ok),
        Err((s, wcc)) => SymlinkRes::Fail(s, wcc),
    };
    put(out, &res);
    res.status()
}

pub async fn mknod(ctx: &Ctx, a: MknodArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let (kind, sattr, rdev) = match a.what {
        MknodData3::Fifo(s) => (FileKind::Fifo, s, (0, 0)),
        MknodData3::Sock(s) => (FileKind::Socket, s, (0, 0)),
        MknodData3::Chr { dev_attributes, spec } => (FileKind::Char, dev_attributes, (spec.specdata1, spec.specdata2)),
        MknodData3::Blk { dev_attributes, spec } => (FileKind::Block, dev_attributes, (spec.specdata1, spec.specdata2)),
        MknodData3::Other(_) => {
            put(out, &MknodRes::Fail(Nfsstat3::Badtype, WccData::default()));
            return Nfsstat3::Badtype;
        }
    };
    let mode = sattr.mode.unwrap_or(DEFAULT_FILE_MODE) & 0o7777;
    let r = create_with(ctx, &a.where_, false, move |b, p| b.mknod(p, kind, mode, rdev).and_then(|()| give_owner(b, p, &sattr, false))).await;
    let res = match r {
        Ok(ok) => MknodRes::Ok(ok),
        Err((s, wcc)) => MknodRes::Fail(s, wcc),
    };
    put(out, &res);
    res.status()
}
