//! The cache's shared state (`Core`): the table of names and listings, the subtree kills,
//! Braid's own writers and expected events, the deferred-close pool and the watcher, with
//! the rules that keep them consistent (what a change invalidates).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::kills::Kills;
use super::own::{bits, Counts, Expectations};
use super::places::Places;
use super::pool::Pool;
use super::table::{Key, Kind, Slot, Table, Ticket, Weigh};
use super::watch::Watcher;
use crate::{Backend, CacheStats, ChangeSink, DirEntry, FileAttrs, SharePath};

/// Why a name is known to be missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// The final component (`VfsError::NotFound`).
    Name,
    /// A parent (`VfsError::PathNotFound`).
    Path,
}

/// Extended attributes as `FileHandle::extended_attributes` returns them.
pub(crate) type Eas = Vec<(String, Vec<u8>)>;

/// What is known of an existing name.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// Its on-disk spelling, when it was learnt by opening it.
    pub(crate) disk: Option<SharePath>,
    pub(crate) attrs: FileAttrs,
    /// The stored security descriptor, once read.
    pub(crate) sd: Option<Option<Arc<[u8]>>>,
    /// The extended attributes, once read.
    pub(crate) eas: Option<Arc<Eas>>,
}

/// A table value.
#[derive(Debug, Clone)]
pub(crate) enum Data {
    Found(Arc<Found>),
    Missing(Missing),
    Listing(Arc<Vec<DirEntry>>),
}

/// Bytes a `FileAttrs` and its bookkeeping take.
const ATTRS_BYTES: usize = std::mem::size_of::<FileAttrs>() + 16;

impl Weigh for Data {
    fn weight(&self) -> usize {
        match self {
            Data::Found(f) => {
                let disk = f.disk.as_ref().map_or(0, |d| d.components().iter().map(|c| c.len() + 24).sum());
                let sd = f.sd.as_ref().and_then(|s| s.as_ref()).map_or(0, |s| s.len());
                let eas = f.eas.as_ref().map_or(0, |e| e.iter().map(|(n, v)| n.len() + v.len() + 48).sum());
                ATTRS_BYTES + disk + sd + eas + 64
            }
            Data::Missing(_) => 8,
            Data::Listing(l) => l.iter().map(|e| e.name.len() + ATTRS_BYTES + 24).sum::<usize>() + 32,
        }
    }
}

/// `path`'s components case-folded and `/`-joined: the key every spelling shares.
pub(crate) fn fold(path: &SharePath) -> String {
    let mut s = String::new();
    for (i, c) in path.components().iter().enumerate() {
        if i > 0 {
            s.push('/');
        }
        s.extend(c.chars().map(crate::local::case::fold_char));
    }
    s
}

/// `path` `/`-joined as spelled: the spelling a slot is looked up by.
pub(crate) fn exact(path: &SharePath) -> String {
    path.components().join("/")
}

/// The folded path of `folded`'s parent directory ("" for the root and its children).
pub(crate) fn parent_of(folded: &str) -> &str {
    folded.rfind('/').map_or("", |i| &folded[..i])
}

pub(crate) fn name_key(folded: &str) -> Key {
    Key { kind: Kind::Name, folded: folded.into() }
}

pub(crate) fn entry_key(folded: &str) -> Key {
    Key { kind: Kind::Entry, folded: folded.into() }
}

pub(crate) fn entry_listing_key(folded: &str) -> Key {
    Key { kind: Kind::EntryListing, folded: folded.into() }
}

pub(crate) fn listing_key(folded: &str) -> Key {
    Key { kind: Kind::Listing, folded: folded.into() }
}

/// Whether `attrs` may be cached: a file with other hard links can change through a name
/// whose directory is not watched.
pub(crate) fn cacheable(attrs: &FileAttrs) -> bool {
    attrs.is_dir || attrs.nlink <= 1
}

/// Whether `attrs` are the same whether a final symlink is followed or not: a file or a
/// directory (not a symlink, nor a special file SMB never serves).
pub(crate) fn followed_alike(attrs: &FileAttrs) -> bool {
    matches!(attrs.posix.kind, crate::FileKind::File | crate::FileKind::Dir)
}

/// The shared state of one cached share.
pub(crate) struct Core {
    pub(crate) inner: Arc<dyn Backend>,
    /// How long data not kept true by events may be served.
    pub(crate) ttl: Duration,
    pub(crate) table: Table<Data>,
    pub(crate) kills: Kills,
    /// Files (folded paths) open for writing through the cache, and their directories.
    pub(crate) writers: Counts,
    pub(crate) dir_writers: Counts,
    pub(crate) expected: Expectations,
    pub(crate) pool: Pool,
    pub(crate) places: Places,
    pub(crate) watcher: Option<Watcher>,
    pub(crate) sink: RwLock<Option<ChangeSink>>,
    hits: AtomicU64,
    misses: AtomicU64,
    invalidations: AtomicU64,
}

/// A fill in progress: the ticket and epoch taken before reading the backend, and whether
/// events keep the result true.
pub(crate) struct Fill {
    pub(crate) ticket: Ticket,
    pub(crate) epoch: u64,
    pub(crate) watched: bool,
}

impl Core {
    pub(crate) fn new(inner: Arc<dyn Backend>, ttl: Duration, entries: usize, bytes: usize, pool: Pool, watcher: Option<Watcher>) -> Self {
        Core {
            inner,
            ttl,
            table: Table::new(entries, bytes),
            kills: Kills::new(),
            writers: Counts::new(),
            dir_writers: Counts::new(),
            expected: Expectations::new(),
            pool,
            places: Places::new(),
            watcher,
            sink: RwLock::new(None),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
        }
    }

    /// Whether `slot` of key `k` may still be served; refreshes its epoch if so.
    fn fresh(&self, k: &Key, slot: &mut Slot<Data>) -> bool {
        if !slot.watched && slot.born.elapsed() >= self.ttl {
            return false;
        }
        match self.kills.check(&k.folded, slot.epoch) {
            Some(now) => {
                slot.epoch = now;
                true
            }
            None => false,
        }
    }

    /// The data cached for spelling `exact` under `k`, if fresh.
    pub(crate) fn get(&self, k: &Key, exact: &str) -> Option<Data> {
        let r = self.table.lookup(k, |slot| {
            if !self.fresh(k, slot) {
                return (None, true);
            }
            (slot.spellings.iter().find(|(e, _)| &**e == exact).map(|(_, v)| v.clone()), false)
        });
        // Files open for writing through Braid change without notice: never served.
        let r = match r {
            Some(Data::Found(_)) if self.writers.contains(&k.folded) => None,
            Some(Data::Listing(_)) if self.dir_writers.contains(&k.folded) => None,
            r => r,
        };
        let c = if r.is_some() { &self.hits } else { &self.misses };
        c.fetch_add(1, Ordering::Relaxed);
        r
    }

    /// Starts a fill of `k`, whose parent directory (the directory itself for a listing) is
    /// `dir` (folded) spelled `dir_disk`: watches it first, so no change after the read can
    /// go unseen.
    pub(crate) fn begin(&self, k: &Key, dir: &str, dir_disk: Option<&SharePath>) -> Fill {
        let watched = match (&self.watcher, dir_disk) {
            (Some(w), Some(d)) => w.ensure(self, dir, d),
            _ => false,
        };
        Fill { ticket: self.table.ticket(k), epoch: self.kills.current(), watched }
    }

    /// Stores what a fill read.
    pub(crate) fn finish(&self, k: Key, exact: &str, v: Data, f: Fill) {
        if self.writers.contains(&k.folded) {
            return;
        }
        self.table.insert(k, exact, v, f.ticket, f.epoch, f.watched);
    }

    /// Updates a `Found` (adding a descriptor or EAs read meanwhile), if still current.
    pub(crate) fn amend(&self, k: &Key, exact: &str, t: Ticket, f: impl FnOnce(&Found) -> Found) {
        self.table.update(k, exact, t, |v| match v {
            Data::Found(old) => Some(Data::Found(Arc::new(f(old)))),
            _ => None,
        });
    }

    fn count(&self, dropped: bool) {
        if dropped {
            self.invalidations.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The attributes (or data) of `folded` changed: its entry and its parent's listing go.
    pub(crate) fn changed_attrs(&self, folded: &str) {
        self.count(self.table.invalidate(&name_key(folded)));
        self.count(self.table.invalidate(&entry_key(folded)));
        self.count(self.table.invalidate(&listing_key(parent_of(folded))));
        self.count(self.table.invalidate(&entry_listing_key(parent_of(folded))));
    }

    /// The name `folded` appeared, went or moved: also its lingering handles, its parent's
    /// own attributes (times, and the link count when a directory comes or goes: NFS
    /// clients compare them to decide whether their cached listing is still good) and, if
    /// it may be a directory, everything beneath it.
    pub(crate) fn changed_name(&self, folded: &str, maybe_dir: bool) {
        self.changed_attrs(folded);
        if !folded.is_empty() {
            self.changed_attrs(parent_of(folded));
        }
        self.pool.invalidate(folded);
        if maybe_dir {
            self.kills.kill(folded);
            self.count(self.table.invalidate(&listing_key(folded)));
            self.count(self.table.invalidate(&entry_listing_key(folded)));
        }
    }

    /// Drops everything (the event queue overflowed).
    pub(crate) fn drop_all(&self) {
        let n = self.table.clear();
        self.invalidations.fetch_add(n as u64, Ordering::Relaxed);
        self.kills.kill("");
        self.pool.purge(true);
    }

    /// Records that Braid is about to cause `b` events at `folded` (only while watching).
    pub(crate) fn expect(&self, folded: &str, b: u8) {
        if self.watcher.is_some() {
            self.expected.expect(folded, b);
        }
    }

    /// Withdraws an expectation that did not come true.
    pub(crate) fn withdraw(&self, folded: &str, b: u8) {
        if self.watcher.is_some() {
            self.expected.withdraw(folded, b);
        }
    }

    /// Whether the entry of `folded` is known to be a file (so removing it kills no subtree).
    pub(crate) fn known_file(&self, folded: &str, exact: &str) -> bool {
        let k = name_key(folded);
        self.table.lookup(&k, |slot| {
            let f = slot.spellings.iter().find(|(e, _)| &**e == exact).map(|(_, v)| matches!(v, Data::Found(f) if !f.attrs.is_dir));
            (f, false)
        }) == Some(true)
    }

    /// A rename through the cache moved `from` (folded) to `to`: the open handles there
    /// follow, and so do the marks of files open for writing.
    pub(crate) fn moved(&self, from: &str, to: &SharePath, file: bool) {
        self.places.rename(from, to, file, |old, new| {
            if old.writer {
                self.writers.add(&new.folded);
                self.dir_writers.add(parent_of(&new.folded));
                self.writers.sub(&old.folded);
                self.dir_writers.sub(parent_of(&old.folded));
                self.changed_attrs(&new.folded);
            }
        });
    }

    pub(crate) fn writer_opened(&self, folded: &str) {
        self.writers.add(folded);
        self.dir_writers.add(parent_of(folded));
        self.changed_attrs(folded);
    }

    pub(crate) fn writer_closed(&self, folded: &str) {
        // Events of its last writes may still be queued: they are Braid's.
        self.expect(folded, bits::ATTRS);
        self.writers.sub(folded);
        self.dir_writers.sub(parent_of(folded));
        self.changed_attrs(folded);
    }

    pub(crate) fn stats(&self) -> CacheStats {
        let (entries, bytes) = self.table.size();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
            entries,
            bytes,
        }
    }
}
