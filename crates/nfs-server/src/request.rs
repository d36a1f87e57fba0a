//! What a handler sees of its call (`Ctx`: the export and the caller's identity) and the
//! services handlers share: storage on the blocking pool (as the caller or as the server),
//! handle checks, permission checks from attributes, and the shared file state.

use std::sync::Arc;

use braid_vfs::creds::with_creds;
use braid_vfs::{Backend, Change, ChangeKind, FileAttrs, SharePath};
use nfs_wire::nfs3::{NfsFh3, Nfsstat3, PostOpAttr, WccData};

use crate::attrs;
use crate::auth::{self, Identity};
use crate::state::{ExportState, NfsState};
use crate::status::nfs_status;
use braid_filestate::{Intent, Refusal};

/// A handler's outcome: its value, or the status of its failure.
pub type HResult<T> = Result<T, Nfsstat3>;

/// One call's context.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub state: Arc<NfsState>,
    /// The export the call's (first) handle names; None when that handle is bad.
    pub export: Option<Arc<ExportState>>,
    /// The caller after the export's squash rules.
    pub id: Identity,
}

impl Ctx {
    /// The call's export, or NFS3ERR_BADHANDLE.
    pub fn export(&self) -> HResult<&Arc<ExportState>> {
        self.export.as_ref().ok_or(Nfsstat3::Badhandle)
    }

    /// The fsid every file of the export reports (0 without an export: nothing is reported then).
    pub fn fsid(&self) -> u64 {
        self.export.as_ref().map_or(0, |e| u64::from(e.id))
    }

    /// NFS3ERR_ROFS on a read-only export.
    pub fn writable(&self) -> HResult<()> {
        match self.export()?.export.rules.read_only {
            true => Err(Nfsstat3::Rofs),
            false => Ok(()),
        }
    }

    /// Runs storage work on the blocking pool as the caller (the kernel checks permissions
    /// and new files are the caller's).
    pub async fn as_caller<T: Send + 'static>(&self, f: impl FnOnce(&dyn Backend) -> braid_vfs::Result<T> + Send + 'static) -> HResult<T> {
        let export = &self.export()?.export;
        let (backend, id) = (export.backend.clone(), self.id.clone());
        finish(export.storage.run(move || run_as(&id, || f(&*backend)).and_then(|r| r)).await)
    }

    /// Runs storage work on the blocking pool as the server itself: resolving handles
    /// (`open_by_handle_at` needs privileges the caller's identity drops) and reading
    /// attributes the server then checks itself.
    pub async fn as_server<T: Send + 'static>(&self, f: impl FnOnce(&dyn Backend) -> braid_vfs::Result<T> + Send + 'static) -> HResult<T> {
        let export = &self.export()?.export;
        let backend = export.backend.clone();
        finish(export.storage.run(move || f(&*backend)).await)
    }

    /// The backend token inside a handle of this call's export (NFS3ERR_BADHANDLE if the
    /// MAC is wrong or the handle belongs to another export).
    pub fn token(&self, fh: &NfsFh3) -> HResult<Vec<u8>> {
        let e = self.export()?;
        let d = self.state.key.check(fh.as_bytes()).map_err(|_| Nfsstat3::Badhandle)?;
        if d.export_id != e.id {
            return Err(Nfsstat3::Xdev);
        }
        Ok(d.token.to_vec())
    }

    /// The path and attributes of the file `fh` names; NFS3ERR_STALE when it is gone.
    pub async fn resolve(&self, fh: &NfsFh3) -> HResult<(SharePath, FileAttrs)> {
        let token = self.token(fh)?;
        let export = self.export()?.clone();
        let r = self
            .as_server(move |b| {
                if let Some((path, file_id, created)) = export.paths.guess(&token) {
                    match b.stat_exact(&path) {
                        Ok(a) if a.file_id == file_id && a.created == created => return Ok((path, a)),
                        _ => export.paths.forget(&token),
                    }
                }
                let p = b.resolve_token(&token)?;
                let a = b.stat_exact(&p)?;
                export.paths.remember(&token, &p, &a);
                Ok((p, a))
            })
            .await;
        r.map_err(|s| match s {
            Nfsstat3::Noent => Nfsstat3::Stale,
            Nfsstat3::Inval => Nfsstat3::Badhandle,
            s => s,
        })
    }

    /// The handle of the file with backend token `token`.
    pub fn handle(&self, token: &[u8]) -> HResult<NfsFh3> {
        let e = self.export()?;
        let h = self.state.key.make(e.id, token).ok_or(Nfsstat3::Serverfault)?;
        NfsFh3::new(&h).ok_or(Nfsstat3::Serverfault)
    }

    /// Attributes and handle of `path`, read as the server (after a create or a lookup).
    pub async fn stat_with_handle(&self, path: SharePath) -> HResult<(NfsFh3, FileAttrs)> {
        let export = self.export()?.clone();
        let (token, a) = self
            .as_server(move |b| {
                let (token, a) = (b.file_token(&path)?, b.stat_exact(&path)?);
                export.paths.remember(&token, &path, &a);
                Ok((token, a))
            })
            .await?;
        Ok((self.handle(&token)?, a))
    }

    /// Attributes of `path` read as the server, or None (for post-operation attributes).
    pub async fn stat_opt(&self, path: &SharePath) -> Option<FileAttrs> {
        let path = path.clone();
        self.as_server(move |b| b.stat_exact(&path)).await.ok()
    }

    /// NFS3ERR_ACCES unless the caller has every ACCESS bit of `wanted` on `a` by its mode.
    pub fn check(&self, a: &FileAttrs, wanted: u32) -> HResult<()> {
        match auth::allowed(&self.id, &attrs::owner(a), wanted, false) == wanted {
            true => Ok(()),
            false => Err(Nfsstat3::Acces),
        }
    }

    /// Whether the caller owns `a` (owners may read and write their files whatever the mode
    /// says, as on a local file system where they opened it before a chmod).
    pub fn owns(&self, a: &FileAttrs) -> bool {
        self.id.uid == 0 || self.id.uid == a.posix.uid
    }

    pub fn post_op(&self, a: Option<&FileAttrs>) -> PostOpAttr {
        attrs::post_op(a, self.fsid())
    }

    pub fn wcc(&self, before: Option<&FileAttrs>, after: Option<&FileAttrs>) -> WccData {
        WccData { before: attrs::pre_op(before), after: self.post_op(after) }
    }

    /// Asks the file state to make way for `intent` on the file `file_id` (for reads and
    /// writes, of the range `io`): share modes, other protocols' caching, byte-range locks.
    /// A share mode conflict becomes `on_share_mode`; another holder's byte-range lock over
    /// the range NFS3ERR_ACCES (it fails at once, as I/O under a Windows lock does; JUKEBOX
    /// would make a hard mount retry for as long as the lock is held); breaks that did not
    /// complete NFS3ERR_JUKEBOX (try again later).
    pub async fn prepare(&self, file_id: u64, intent: Intent, io: Option<(u64, u64)>, on_share_mode: Nfsstat3) -> HResult<()> {
        let share = self.export()?.export.share;
        match self.state.files.prepare((share, file_id), intent, io).await {
            Ok(()) => Ok(()),
            Err(Refusal::ShareMode) => Err(on_share_mode),
            Err(Refusal::Locked) => Err(Nfsstat3::Acces),
            Err(Refusal::Busy) => Err(Nfsstat3::Jukebox),
        }
    }

    /// Tells the other protocols about a change NFS made; returns once what they send
    /// about it (SMB lease breaks) is written, so the reply follows it. Data changes of one
    /// file are told at most once a second (`announce.rs`).
    pub async fn changed(&self, path: &SharePath, kind: ChangeKind, is_dir: bool, what: u32) {
        if let Some(e) = &self.export {
            let change = Change { path: path.clone(), kind, is_dir, what };
            if self.state.announced.skip(e.export.share, &change) {
                return;
            }
            self.state.files.changed(e.export.share, &change).await;
        }
    }
}

/// The child `name` of `dir`: a valid name or NFS3ERR_NAMETOOLONG / NFS3ERR_INVAL
/// (`.` and `..` are not names a create, remove or rename can take).
pub fn child(dir: &SharePath, name: &[u8]) -> HResult<SharePath> {
    if name.len() > braid_vfs::MAX_COMPONENT_LEN {
        return Err(Nfsstat3::Nametoolong);
    }
    let name = std::str::from_utf8(name).map_err(|_| Nfsstat3::Inval)?;
    if name == "." || name == ".." {
        return Err(Nfsstat3::Exist);
    }
    dir.join(name).map_err(|_| Nfsstat3::Inval)
}

/// NFS3ERR_NOTDIR unless `a` is a directory.
pub fn need_dir(a: &FileAttrs) -> HResult<()> {
    match a.posix.kind == braid_vfs::FileKind::Dir {
        true => Ok(()),
        false => Err(Nfsstat3::Notdir),
    }
}

/// Runs `f` as `id`: with the thread's credentials switched, unless `id` is root's (uid and
/// gid 0) and the server runs as root, whose threads already act as that identity (a
/// switch and its restore cost about 10 µs, a sizeable part of a small READ).
pub fn run_as<T>(id: &Identity, f: impl FnOnce() -> T) -> braid_vfs::Result<T> {
    if id.uid == 0 && id.gid == 0 && braid_vfs::creds::can_switch() {
        return Ok(f());
    }
    with_creds(id, f)
}

fn finish<T>(r: Result<braid_vfs::Result<T>, braid_qos::Stalled>) -> HResult<T> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(nfs_status(&e)),
        // The share's storage did not answer in time: the client retries later.
        Err(braid_qos::Stalled::TimedOut) => Err(Nfsstat3::Jukebox),
        Err(braid_qos::Stalled::Died) => Err(Nfsstat3::Serverfault),
    }
}
