//! [`CachedBackend`]: a metadata cache in front of any [`Backend`], so every protocol server
//! shares it. It keeps, per share and bounded by entries and bytes (CLOCK eviction over
//! sharded maps):
//!
//! - names, as the client spelled them, with the on-disk spelling, file id and attributes
//!   they resolve to (case-insensitive resolution included), and the security descriptor
//!   and EAs once read;
//! - names known to be missing (dropped when that name is created);
//! - directory listings with their entries' attributes.
//!
//! Changes through Braid invalidate what they touch (see `state.rs` and `handle.rs`);
//! changes made outside are learnt from inotify where the file system reports them
//! (`watch.rs`), and otherwise cached data is served for at most `ttl`. Opens that only
//! read attributes cost nothing while those are cached, and a file closed and opened again
//! soon reuses its kernel handle (`pool.rs`).

mod handle;
mod kills;
mod own;
mod places;
mod pool;
mod posix;
mod state;
mod table;
mod watch;

pub use handle::CachedHandle;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use own::bits;
use state::{exact, fold, name_key, parent_of, Core, Data, Found, Missing};

use crate::{
    Backend, CacheStats, ChangeSink, CreateMode, Delivery, DirEntry, FileAttrs, FileHandle, FileKind, FsStats, OpenOptions, OpenOutcome, Result,
    SharePath, VfsError,
};

/// Bounds and timing of a share's metadata cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// How long cached metadata may be served where changes made outside Braid cannot be
    /// learnt (FUSE, network file systems, a directory the watcher could not watch).
    pub ttl: Duration,
    /// Most names and listings held.
    pub max_entries: usize,
    /// Most bytes held (approximate).
    pub max_bytes: usize,
    /// Most closed handles kept for reuse.
    pub max_pooled: usize,
    /// Most directories watched.
    pub max_watches: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { ttl: Duration::from_secs(1), max_entries: 100_000, max_bytes: 64 << 20, max_pooled: 256, max_watches: 8192 }
    }
}

/// How long a closed handle waits for reuse at most.
const LINGER: Duration = Duration::from_secs(1);

/// A [`Backend`] with a metadata cache in front (see the module documentation).
#[derive(Clone)]
pub struct CachedBackend {
    core: Arc<Core>,
    delivery: Delivery,
}

impl std::fmt::Debug for CachedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedBackend").field("inner", &self.core.inner).field("delivery", &self.delivery).finish()
    }
}

impl CachedBackend {
    /// Caches `inner`. `root` is the local directory it serves, if any: on a file system
    /// that reports changes (tmpfs, ext4, xfs, btrfs, …) they are watched there; otherwise
    /// cached data lives at most `cfg.ttl`.
    pub fn new(inner: Arc<dyn Backend>, root: Option<&Path>, cfg: CacheConfig) -> CachedBackend {
        let watcher = root.filter(|r| watch::reports_events(r)).and_then(|r| match watch::Watcher::new(r, cfg.max_watches) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "inotify unavailable: metadata is cached for the ttl only");
                None
            }
        });
        let delivery = if watcher.is_some() { Delivery::Events } else { Delivery::Bounded(cfg.ttl) };
        let pool = pool::Pool::new(cfg.max_pooled, LINGER.min(cfg.ttl));
        let core = Arc::new(Core::new(inner, cfg.ttl, cfg.max_entries, cfg.max_bytes, pool, watcher));
        let fd = core.watcher.as_ref().and_then(watch::reader_fd);
        let weak = Arc::downgrade(&core);
        let spawned = std::thread::Builder::new().name("braid-vfs-watch".into()).spawn(move || watch::run(weak, fd));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the metadata cache's thread");
        }
        if let Some(w) = &core.watcher {
            w.ensure(&core, "", &SharePath::root());
        }
        CachedBackend { core, delivery }
    }

    /// How this cache learns of outside changes.
    pub fn delivery(&self) -> Delivery {
        self.delivery
    }

    /// A handle around `inner` (or one to open late when `inner` is `None`).
    /// `folded` is `disk` case-folded.
    fn handle(
        &self,
        inner: Option<Box<dyn FileHandle>>,
        at: (SharePath, String),
        file_id: Option<u64>,
        is_dir: bool,
        opts: OpenOptions,
    ) -> CachedHandle {
        // A directory's data is its entries, which change through names, not writes.
        let writer = opts.write && !is_dir;
        let place = Arc::new(std::sync::RwLock::new(places::Place::folded(at.0, at.1, writer)));
        if writer {
            self.core.writer_opened(&places::read(&place).folded);
        }
        self.core.places.add(&place);
        let cell = OnceLock::new();
        if let Some(h) = inner {
            let _ = cell.set(h);
        }
        CachedHandle {
            core: self.core.clone(),
            inner: cell,
            opening: Mutex::new(()),
            place,
            file_id,
            is_dir,
            opts,
            writer,
            poolable: AtomicBool::new(true),
        }
    }

    /// Opens what the cache knows exists (`exact`: names are exact, see
    /// [`Backend::open_exact`]).
    fn open_found(
        &self,
        path: &SharePath,
        f: &Found,
        disk: &SharePath,
        opts: OpenOptions,
        exact: bool,
    ) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        let a = &f.attrs;
        if a.is_dir && opts.non_directory {
            return Err(VfsError::IsADirectory);
        }
        if !a.is_dir && opts.directory {
            return Err(VfsError::NotADirectory);
        }
        if opts.create == CreateMode::CreateNew {
            return Err(VfsError::Exists);
        }
        let id = Some(a.file_id);
        let folded = fold(disk);
        if !opts.read && !opts.write && !opts.truncate {
            // Attributes only: the inner handle is opened if something else is asked.
            return Ok((Box::new(self.handle(None, (disk.clone(), folded), id, a.is_dir, opts)), OpenOutcome::Opened));
        }
        if !opts.write && !opts.truncate {
            if let Some(h) = self.core.pool.take(&folded, a.file_id, opts.read, opts.write) {
                return Ok((Box::new(self.handle(Some(h), (disk.clone(), folded), id, a.is_dir, opts)), OpenOutcome::Opened));
            }
        }
        let exist = OpenOptions { create: CreateMode::OpenExisting, ..opts };
        match self.core.inner.open_spelled(disk, exist) {
            Ok((h, _)) => {
                if opts.truncate {
                    self.core.changed_attrs(&folded);
                }
                let id = if opts.write && !a.is_dir { None } else { id };
                Ok((Box::new(self.handle(Some(h), (disk.clone(), folded), id, a.is_dir, opts)), OpenOutcome::Opened))
            }
            // Gone meanwhile: forget it and ask the backend the slow way.
            Err(VfsError::NotFound | VfsError::PathNotFound) => {
                self.core.changed_name(&folded, a.is_dir);
                self.open_slow(path, opts, exact)
            }
            Err(e) => Err(e),
        }
    }

    /// Opens through the backend, learning what it finds. With `exact`, names are exact
    /// and a miss is not remembered (another spelling may exist).
    fn open_slow(&self, path: &SharePath, opts: OpenOptions, exact_names: bool) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        let folded = fold(path);
        let k = name_key(&folded);
        let parent = path.parent();
        let fill = self.core.begin(&k, parent_of(&folded), parent.as_ref().or(Some(path)));
        let creating = opts.create != CreateMode::OpenExisting;
        if creating {
            self.core.expect(&folded, bits::CREATE);
        }
        let r = if exact_names { self.core.inner.open_exact(path, opts) } else { self.core.inner.open(path, opts) };
        let (h, outcome) = match r {
            Ok(r) => r,
            Err(e @ (VfsError::NotFound | VfsError::PathNotFound)) => {
                if creating {
                    self.core.withdraw(&folded, bits::CREATE);
                }
                if exact_names {
                    return Err(e);
                }
                let m = if matches!(e, VfsError::NotFound) { Missing::Name } else { Missing::Path };
                self.core.finish(k, &exact(path), Data::Missing(m), fill);
                return Err(e);
            }
            Err(e) => {
                if creating {
                    self.core.withdraw(&folded, bits::CREATE);
                }
                return Err(e);
            }
        };
        self.opened(path, h, outcome, opts, fill)
    }

    /// Wraps a handle the backend opened, caching its attributes unless it writes.
    fn opened(
        &self,
        path: &SharePath,
        h: Box<dyn FileHandle>,
        outcome: OpenOutcome,
        opts: OpenOptions,
        fill: state::Fill,
    ) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        let disk = h.opened_path().unwrap_or_else(|| path.clone());
        let folded = fold(&disk);
        if outcome == OpenOutcome::Created {
            self.core.changed_name(&folded, opts.directory);
        } else if opts.create != CreateMode::OpenExisting {
            // This open expected to create the name, and found it instead.
            self.core.withdraw(&folded, bits::CREATE);
        }
        if opts.truncate {
            self.core.changed_attrs(&folded);
        }
        if opts.write {
            let is_dir = opts.directory;
            return Ok((Box::new(self.handle(Some(h), (disk, folded), None, is_dir, opts)), outcome));
        }
        let a = h.attrs()?;
        // A symlink opened itself (`open_exact`) never stands for what SMB's name follows to.
        if state::cacheable(&a) && state::followed_alike(&a) && outcome == OpenOutcome::Opened {
            let found = Found { disk: Some(disk.clone()), attrs: a.clone(), sd: None, eas: None };
            self.core.finish(name_key(&folded), &exact(path), Data::Found(Arc::new(found)), fill);
        }
        Ok((Box::new(self.handle(Some(h), (disk, folded), Some(a.file_id), a.is_dir, opts)), outcome))
    }
}

impl Backend for CachedBackend {
    fn open(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        if opts.directory && opts.non_directory {
            return self.core.inner.open(path, opts);
        }
        let folded = fold(path);
        match self.core.get(&name_key(&folded), &exact(path)) {
            Some(Data::Found(f)) => match &f.disk {
                Some(disk) => self.open_found(path, &f, disk, opts, false),
                None => self.open_slow(path, opts, false),
            },
            Some(Data::Missing(m)) if opts.create == CreateMode::OpenExisting => {
                Err(if m == Missing::Name { VfsError::NotFound } else { VfsError::PathNotFound })
            }
            Some(Data::Missing(Missing::Name)) => {
                // No spelling of the name exists: create it as spelled, without a scan.
                let fill = self.core.begin(&name_key(&folded), parent_of(&folded), None);
                self.core.expect(&folded, bits::CREATE);
                match self.core.inner.open_spelled(path, opts) {
                    Ok((h, outcome)) => self.opened(path, h, outcome, opts, fill),
                    // The parent is spelled otherwise on disk, or someone created the name
                    // meanwhile: the backend's own resolution decides.
                    Err(VfsError::PathNotFound | VfsError::Exists) => {
                        self.core.withdraw(&folded, bits::CREATE);
                        self.core.changed_name(&folded, false);
                        self.open_slow(path, opts, false)
                    }
                    Err(e) => {
                        self.core.withdraw(&folded, bits::CREATE);
                        self.core.changed_name(&folded, false);
                        Err(e)
                    }
                }
            }
            _ => self.open_slow(path, opts, false),
        }
    }

    fn open_exact(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        if opts.directory && opts.non_directory {
            return self.core.inner.open_exact(path, opts);
        }
        // Only a file or directory known under exactly this on-disk spelling, and not a
        // symlink to one, is opened from what the cache knows.
        let folded = fold(path);
        let spelled = exact(path);
        let plain = matches!(self.core.get(&state::entry_key(&folded), &spelled), Some(Data::Found(e)) if state::followed_alike(&e.attrs));
        match self.core.get(&name_key(&folded), &spelled) {
            Some(Data::Found(f)) if plain && f.disk.as_ref() == Some(path) => self.open_found(path, &f, path, opts, true),
            _ => self.open_slow(path, opts, true),
        }
    }

    fn stat(&self, path: &SharePath) -> Result<FileAttrs> {
        let folded = fold(path);
        let k = name_key(&folded);
        let spelled = exact(path);
        match self.core.get(&k, &spelled) {
            Some(Data::Found(f)) => return Ok(f.attrs.clone()),
            Some(Data::Missing(Missing::Name)) => return Err(VfsError::NotFound),
            Some(Data::Missing(Missing::Path)) => return Err(VfsError::PathNotFound),
            _ => {}
        }
        let parent = path.parent();
        let fill = self.core.begin(&k, parent_of(&folded), parent.as_ref().or(Some(path)));
        match self.core.inner.stat(path) {
            Ok(a) => {
                if state::cacheable(&a) {
                    let found = Found { disk: None, attrs: a.clone(), sd: None, eas: None };
                    self.core.finish(k, &spelled, Data::Found(Arc::new(found)), fill);
                }
                Ok(a)
            }
            Err(e @ (VfsError::NotFound | VfsError::PathNotFound)) => {
                let m = if matches!(e, VfsError::NotFound) { Missing::Name } else { Missing::Path };
                self.core.finish(k, &spelled, Data::Missing(m), fill);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn remove(&self, path: &SharePath) -> Result<()> {
        let folded = fold(path);
        let file = self.core.known_file(&folded, &exact(path));
        self.core.expect(&folded, bits::DELETE);
        let r = self.core.inner.remove(path);
        if r.is_err() {
            self.core.withdraw(&folded, bits::DELETE);
        }
        self.core.changed_name(&folded, !file);
        r
    }

    fn rename(&self, from: &SharePath, to: &SharePath, replace: bool) -> Result<()> {
        let (ff, tf) = (fold(from), fold(to));
        let file = self.core.known_file(&ff, &exact(from));
        self.core.expect(&ff, bits::MOVED_FROM);
        self.core.expect(&tf, bits::MOVED_TO);
        let r = self.core.inner.rename(from, to, replace);
        if r.is_err() {
            self.core.withdraw(&ff, bits::MOVED_FROM);
            self.core.withdraw(&tf, bits::MOVED_TO);
        }
        self.core.changed_name(&ff, !file);
        self.core.changed_name(&tf, !file);
        if r.is_ok() {
            self.core.moved(&ff, to, file);
        }
        r
    }

    fn statfs(&self) -> Result<FsStats> {
        self.core.inner.statfs()
    }

    fn stat_exact(&self, path: &SharePath) -> Result<FileAttrs> {
        self.posix_stat(path)
    }

    fn read_dir_exact(&self, dir: &SharePath) -> Result<Vec<DirEntry>> {
        self.posix_read_dir(dir)
    }

    fn remove_exact(&self, path: &SharePath) -> Result<()> {
        self.posix_remove(path)
    }

    fn rename_exact(&self, from: &SharePath, to: &SharePath) -> Result<()> {
        self.posix_rename(from, to)
    }

    fn readlink(&self, path: &SharePath) -> Result<String> {
        self.core.inner.readlink(path)
    }

    fn symlink(&self, target: &str, at: &SharePath) -> Result<()> {
        self.creating(at, false, |b| b.symlink(target, at))
    }

    fn link(&self, existing: &SharePath, new: &SharePath) -> Result<()> {
        self.posix_link(existing, new)
    }

    fn mknod(&self, at: &SharePath, kind: FileKind, mode: u32, rdev: (u32, u32)) -> Result<()> {
        self.creating(at, false, |b| b.mknod(at, kind, mode, rdev))
    }

    fn mkdir(&self, at: &SharePath, mode: u32) -> Result<()> {
        self.creating(at, true, |b| b.mkdir(at, mode))
    }

    fn file_token(&self, path: &SharePath) -> Result<Vec<u8>> {
        self.core.inner.file_token(path)
    }

    fn resolve_token(&self, token: &[u8]) -> Result<SharePath> {
        self.core.inner.resolve_token(token)
    }

    fn subscribe(&self, sink: ChangeSink) -> Delivery {
        *self.core.sink.write().unwrap_or_else(|p| p.into_inner()) = Some(sink);
        self.delivery
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        Some(self.core.stats())
    }

    fn block_cloning(&self) -> bool {
        self.core.inner.block_cloning()
    }

    fn may_have_security_descriptors(&self) -> bool {
        self.core.inner.may_have_security_descriptors()
    }

    fn watch_dir(&self, path: &SharePath) {
        let Some(w) = &self.core.watcher else { return };
        // The on-disk spelling, through the cache.
        let opts =
            OpenOptions { read: false, write: false, create: CreateMode::OpenExisting, truncate: false, directory: true, non_directory: false };
        if let Ok((h, _)) = self.open(path, opts) {
            let disk = h.opened_path().unwrap_or_else(|| path.clone());
            w.ensure(&self.core, &fold(&disk), &disk);
        }
    }
}

#[cfg(test)]
mod tests;
