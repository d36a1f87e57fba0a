//! GETATTR, SETATTR and ACCESS.

use std::time::SystemTime;

use braid_vfs::{what, ChangeKind, FileAttrs, FileKind, OpenOptions, SetTimes};
use nfs_wire::nfs3::*;

use super::{put, META_ONLY};
use crate::attrs::{self, nfs_time, system_time};
use crate::auth;
use crate::request::{Ctx, HResult};
use braid_filestate::Intent;

pub async fn getattr(ctx: &Ctx, a: GetattrArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.object).await {
        Ok((_, attrs)) => GetattrRes::Ok(GetattrResOk { obj_attributes: attrs::fattr(&attrs, ctx.fsid()) }),
        Err(s) => GetattrRes::Fail(s),
    };
    put(out, &res);
    res.status()
}

pub async fn access(ctx: &Ctx, a: AccessArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.object).await {
        Ok((_, attrs)) => {
            let read_only = ctx.export.as_ref().is_some_and(|e| e.export.rules.read_only);
            let access = auth::allowed(&ctx.id, &attrs::owner(&attrs), a.access, read_only);
            AccessRes::Ok(AccessResOk { obj_attributes: ctx.post_op(Some(&attrs)), access })
        }
        Err(s) => AccessRes::Fail(s, PostOpAttr(None)),
    };
    put(out, &res);
    res.status()
}

pub async fn setattr(ctx: &Ctx, a: SetattrArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    let res = match ctx.resolve(&a.object).await {
        Err(s) => SetattrRes::Fail(s, WccData::default()),
        Ok((path, before)) => match set(ctx, &a, &path, &before).await {
            Ok(after) => {
                let what = changed_bits(&a.new_attributes);
                ctx.changed(&path, ChangeKind::Modified, before.posix.kind == FileKind::Dir, what).await;
                SetattrRes::Ok(SetattrResOk { obj_wcc: ctx.wcc(Some(&before), Some(&after)) })
            }
            Err(s) => SetattrRes::Fail(s, ctx.wcc(Some(&before), ctx.stat_opt(&path).await.as_ref())),
        },
    };
    put(out, &res);
    res.status()
}

/// Applies `a` to the file at `path` whose attributes are `before`; the attributes after.
async fn set(ctx: &Ctx, a: &SetattrArgs, path: &braid_vfs::SharePath, before: &FileAttrs) -> HResult<FileAttrs> {
    if let Some(ctime) = a.guard {
        if ctime != nfs_time(before.changed) {
            return Err(Nfsstat3::NotSync);
        }
    }
    let s = a.new_attributes;
    if s == Sattr3::default() {
        return Ok(before.clone());
    }
    ctx.writable()?;
    may_change(ctx, before, &s)?;
    if s.size.is_some() {
        match before.posix.kind {
            FileKind::Dir => return Err(Nfsstat3::Isdir),
            FileKind::File => {}
            _ => return Err(Nfsstat3::Inval),
        }
        ctx.prepare(before.file_id, Intent::Truncate, None, Nfsstat3::Jukebox).await?;
    }
    let path = path.clone();
    ctx.as_caller(move |b| {
        let opts = OpenOptions { write: s.size.is_some(), ..META_ONLY };
        let (h, _) = b.open_exact(&path, opts)?;
        if let Some(size) = s.size {
            h.set_len(size)?;
        }
        if let Some(mode) = s.mode {
            h.set_mode(mode & 0o7777)?;
        }
        if s.uid.is_some() || s.gid.is_some() {
            h.set_owner(s.uid, s.gid)?;
        }
        let now = SystemTime::now();
        let time = |t: SetTime| match t {
            SetTime::DontChange => None,
            SetTime::ServerTime => Some(now),
            SetTime::Client(t) => Some(system_time(t)),
        };
        let times = SetTimes { accessed: time(s.atime), modified: time(s.mtime), ..SetTimes::default() };
        if times != SetTimes::default() {
            h.set_times(times)?;
        }
        h.attrs()
    })
    .await
}

/// What only the owner (or root) may change, as chmod, chown, chgrp and utimes decide:
/// NFS3ERR_PERM ("not owner"); what needs write permission (size, times set to the server's
/// clock): NFS3ERR_ACCES. Checked here because a memory share has no kernel to check it.
fn may_change(ctx: &Ctx, before: &FileAttrs, s: &Sattr3) -> HResult<()> {
    let root = ctx.id.uid == 0;
    let owner = root || ctx.id.uid == before.posix.uid;
    let member = |g: u32| ctx.id.gid == g || ctx.id.groups.contains(&g);
    let client_time = matches!(s.atime, SetTime::Client(_)) || matches!(s.mtime, SetTime::Client(_));
    let perm = (s.mode.is_some() && !owner)
        || s.uid.is_some_and(|u| !root && u != before.posix.uid)
        || s.gid.is_some_and(|g| !root && g != before.posix.gid && !(owner && member(g)))
        || (client_time && !owner);
    if perm {
        return Err(Nfsstat3::Perm);
    }
    let server_time = s.atime == SetTime::ServerTime || s.mtime == SetTime::ServerTime;
    if (s.size.is_some() || server_time) && !owner {
        ctx.check(before, ACCESS3_MODIFY)?;
    }
    Ok(())
}

/// The change-notify bits of what a SETATTR sets.
fn changed_bits(s: &Sattr3) -> u32 {
    let mut bits = 0;
    if s.mode.is_some() || s.uid.is_some() || s.gid.is_some() {
        bits |= what::ATTRIBUTES | what::SECURITY;
    }
    if s.size.is_some() {
        bits |= what::SIZE | what::LAST_WRITE;
    }
    if s.mtime != SetTime::DontChange {
        bits |= what::LAST_WRITE;
    }
    if s.atime != SetTime::DontChange {
        bits |= what::LAST_ACCESS;
    }
    bits
}
