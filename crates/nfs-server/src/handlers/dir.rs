//! READDIR and READDIRPLUS. Entries come sorted by name; cookie 1 is `.`, 2 is `..`, and
//! an entry's cookie is a hash of its name (`cookies.rs`), so removals between pages shift
//! nothing. The listing and, for READDIRPLUS, each entry's
//! handle are made in one trip to the blocking pool, entry by entry until the reply is full.

use std::sync::Arc;

use braid_vfs::{Backend, DirEntry, FileAttrs, SharePath};
use nfs_wire::nfs3::*;

use super::put;
use crate::attrs::{self, nfs_time};
use crate::cookies::{self, FIRST_NAME_COOKIE};
use crate::request::{need_dir, Ctx, HResult};
use crate::state::{ExportState, NfsState};

/// What one listing call asks for.
#[derive(Debug, Clone, Copy)]
struct Want {
    cookie: u64,
    /// READDIR's count or READDIRPLUS's maxcount.
    max: u32,
    /// READDIRPLUS's dircount; None for READDIR.
    plus: Option<u32>,
}

pub async fn readdir(ctx: &Ctx, a: ReaddirArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    list(ctx, &a.dir, Want { cookie: a.cookie, max: a.count, plus: None }, out).await
}

pub async fn readdirplus(ctx: &Ctx, a: ReaddirplusArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    list(ctx, &a.dir, Want { cookie: a.cookie, max: a.maxcount, plus: Some(a.dircount) }, out).await
}

async fn list(ctx: &Ctx, dir: &NfsFh3, want: Want, out: &mut Vec<u8>) -> Nfsstat3 {
    let (path, dattrs) = match ctx.resolve(dir).await {
        Ok(x) => x,
        Err(s) => {
            put(out, &ReaddirRes::Fail(s, PostOpAttr(None)));
            return s;
        }
    };
    let saved = out.clone();
    match listing(ctx, path, &dattrs, want, std::mem::take(out)).await {
        Ok(buf) => {
            *out = buf;
            Nfsstat3::Ok
        }
        Err((s, buf)) => {
            *out = if buf.is_empty() { saved } else { buf };
            put(out, &ReaddirRes::Fail(s, ctx.post_op(Some(&dattrs))));
            s
        }
    }
}

async fn listing(ctx: &Ctx, path: SharePath, dattrs: &FileAttrs, want: Want, out: Vec<u8>) -> Result<Vec<u8>, (Nfsstat3, Vec<u8>)> {
    let check = || -> HResult<Arc<ExportState>> {
        need_dir(dattrs)?;
        ctx.check(dattrs, ACCESS3_READ)?;
        Ok(ctx.export()?.clone())
    };
    let export = match check() {
        Ok(e) => e,
        Err(s) => return Err((s, out)),
    };
    let (state, dattrs) = (ctx.state.clone(), dattrs.clone());
    let r = ctx
        .as_server(move |b| {
            let mut out = out;
            let entries = match b.read_dir_exact(&path) {
                Ok(e) => e,
                Err(e) => return Ok(Err((e, out))),
            };
            let parent = path.parent().and_then(|p| b.stat_exact(&p).ok()).unwrap_or_else(|| dattrs.clone());
            let l = Listing { b, state: &state, export: &export, dir: &path, dattrs: &dattrs, parent: &parent, entries: &entries };
            let written = l.write(want, &mut out);
            Ok(Ok((out, written)))
        })
        .await;
    match r {
        Ok(Ok((buf, Ok(())))) => Ok(buf),
        Ok(Ok((buf, Err(s)))) => Err((s, buf)),
        Ok(Err((e, buf))) => Err((crate::status::nfs_status(&e), buf)),
        Err(s) => Err((s, Vec::new())),
    }
}

/// One directory's listing being written.
struct Listing<'a> {
    b: &'a dyn Backend,
    state: &'a NfsState,
    export: &'a ExportState,
    dir: &'a SharePath,
    dattrs: &'a FileAttrs,
    parent: &'a FileAttrs,
    entries: &'a [DirEntry],
}

impl Listing<'_> {
    /// Where the listing goes on after `cookie`, as an index into `.`, `..`, entries...;
    /// None for a cookie this directory never gave out (NFS3ERR_BAD_COOKIE).
    fn start(&self, cookie: u64) -> Option<usize> {
        if cookie < FIRST_NAME_COOKIE {
            return Some(cookie as usize);
        }
        if let Some(i) = self.entries.iter().position(|e| cookies::cookie(&e.name) == cookie) {
            return Some(3 + i);
        }
        // The entry went away since: go on after where its name was.
        let name = self.export.cookies.name(self.dattrs.file_id, cookie)?;
        Some(2 + self.entries.partition_point(|e| e.name <= name))
    }

    /// The entries from index `start` on: `(cookie, name, attributes, path)`.
    fn from(&self, start: usize) -> impl Iterator<Item = (u64, &[u8], &FileAttrs, Option<SharePath>)> + '_ {
        let dots =
            [(1u64, &b"."[..], self.dattrs, Some(self.dir.clone())), (2, &b".."[..], self.parent, self.dir.parent().or(Some(SharePath::root())))];
        let rest = self.entries.iter().map(|e| (cookies::cookie(&e.name), e.name.as_bytes(), &e.attrs, self.dir.join(&e.name).ok()));
        dots.into_iter().chain(rest).skip(start)
    }

    /// Remembers the name behind the cookie that ends a page.
    fn ends_page(&self, name: &[u8]) {
        if let Ok(name) = std::str::from_utf8(name) {
            if name != "." && name != ".." {
                self.export.cookies.remember(self.dattrs.file_id, name);
            }
        }
    }

    /// The entry's handle; its path is remembered for the calls that follow a listing.
    fn handle(&self, path: &Option<SharePath>, a: &FileAttrs) -> PostOpFh3 {
        let Some(path) = path else { return PostOpFh3(None) };
        let Ok(token) = self.b.file_token(path) else { return PostOpFh3(None) };
        self.export.paths.remember(&token, path, a);
        PostOpFh3(self.state.key.make(self.export.id, &token).and_then(|h| NfsFh3::new(&h)))
    }

    /// Writes the result, or says why not.
    fn write(&self, want: Want, out: &mut Vec<u8>) -> Result<(), Nfsstat3> {
        let start = self.start(want.cookie).ok_or(Nfsstat3::BadCookie)?;
        let fsid = u64::from(self.export.id);
        let dir_attributes = attrs::post_op(Some(self.dattrs), fsid);
        let m = nfs_time(self.dattrs.modified);
        let verf = [m.seconds.to_be_bytes(), m.nseconds.to_be_bytes()].concat().try_into().unwrap_or([0; 8]);
        let (mut more, mut last) = (false, &b""[..]);
        match want.plus {
            None => {
                let mut w = DirWriter::new(out, &dir_attributes, verf, want.max);
                for (cookie, name, a, _) in self.from(start) {
                    if !w.push(&Entry3 { fileid: a.file_id, name, cookie }) {
                        more = true;
                        break;
                    }
                    last = name;
                }
                if more && w.entries() == 0 {
                    w.cancel();
                    return Err(Nfsstat3::Toosmall);
                }
                w.finish(!more);
            }
            Some(dircount) => {
                let mut w = DirPlusWriter::new(out, &dir_attributes, verf, dircount, want.max);
                for (cookie, name, a, path) in self.from(start) {
                    let name_attributes = attrs::post_op(Some(a), fsid);
                    let e = EntryPlus3 { fileid: a.file_id, name, cookie, name_attributes, name_handle: self.handle(&path, a) };
                    if !w.push(&e) {
                        more = true;
                        break;
                    }
                    last = name;
                }
                if more && w.entries() == 0 {
                    w.cancel();
                    return Err(Nfsstat3::Toosmall);
                }
                w.finish(!more);
            }
        }
        if more {
            self.ends_page(last);
        }
        Ok(())
    }
}
