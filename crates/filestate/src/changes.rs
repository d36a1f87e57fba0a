//! Change events for directory watchers: what happened to a name (added, removed, renamed,
//! or which of its properties changed), reported by any protocol server, reaches every
//! watcher of the directory (or of an ancestor, for a recursive watch) whose filter asks
//! for that kind of change, queued until the watcher's protocol takes them.

use std::collections::{HashMap, VecDeque};
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::shards::lock;

/// Changes a watcher keeps while nobody takes them; beyond this it only remembers that it
/// overflowed (the client must list the directory again).
pub const MAX_QUEUED: usize = 1024;

/// What happened to a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeAction {
    Added,
    Removed,
    Modified,
    RenamedOldName,
    RenamedNewName,
    /// A named stream of the file appeared, went away or changed.
    AddedStream,
    RemovedStream,
    ModifiedStream,
}

/// Kinds of change, as bits: what a watcher wants, and what a change is. The values are
/// MS-FSCC's FILE_NOTIFY_CHANGE_* bits, the richest set any protocol asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChangeFilter(pub u32);

impl ChangeFilter {
    /// A file's name was added, removed or renamed.
    pub const FILE_NAME: ChangeFilter = ChangeFilter(0x1);
    /// A directory's name was added, removed or renamed.
    pub const DIR_NAME: ChangeFilter = ChangeFilter(0x2);
    pub const ATTRIBUTES: ChangeFilter = ChangeFilter(0x4);
    pub const SIZE: ChangeFilter = ChangeFilter(0x8);
    pub const LAST_WRITE: ChangeFilter = ChangeFilter(0x10);
    pub const LAST_ACCESS: ChangeFilter = ChangeFilter(0x20);
    pub const CREATION: ChangeFilter = ChangeFilter(0x40);
    pub const EA: ChangeFilter = ChangeFilter(0x80);
    pub const SECURITY: ChangeFilter = ChangeFilter(0x100);
    pub const STREAM_NAME: ChangeFilter = ChangeFilter(0x200);
    pub const STREAM_SIZE: ChangeFilter = ChangeFilter(0x400);
    pub const STREAM_WRITE: ChangeFilter = ChangeFilter(0x800);

    /// Whether the two share a kind.
    pub fn intersects(self, other: ChangeFilter) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for ChangeFilter {
    type Output = ChangeFilter;
    fn bitor(self, rhs: ChangeFilter) -> ChangeFilter {
        ChangeFilter(self.0 | rhs.0)
    }
}

/// One change: on export (share) `volume`, the name at `path` (components from the root);
/// `changed` says which kinds of change it is (a watcher gets it if its filter shares one).
#[derive(Debug, Clone, Copy)]
pub struct ChangeEvent<'a> {
    pub volume: usize,
    pub path: &'a [String],
    pub action: ChangeAction,
    pub changed: ChangeFilter,
}

/// What a watcher has for its protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The changes since the last take: action and the name relative to the watched
    /// directory, as components.
    Changes(Vec<(ChangeAction, Vec<String>)>),
    /// More changes came than were kept: list the directory again.
    Overflow,
    /// The watching open closed.
    Closed,
    /// The watched directory is to be deleted (another open set delete on close and
    /// closed): no more changes will come.
    DeletePending,
}

/// A watcher was refused: its volume has `limit` watchers already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyWatchers {
    pub limit: usize,
}

#[derive(Debug, Default)]
struct WatchState {
    changes: VecDeque<(ChangeAction, Vec<String>)>,
    overflow: bool,
    closed: bool,
    delete_pending: bool,
}

/// One watching open. `X` is the protocol's own part (SMB: the wake-up of a waiting
/// CHANGE_NOTIFY); the watcher derefs to it. The filter and the subtree flag are those of
/// the open's first request and stay until it closes (as Windows and Samba do: a later
/// request with another filter gets the changes the first one asked for).
#[derive(Debug)]
pub struct Watcher<X> {
    volume: usize,
    dir: Vec<String>,
    filter: ChangeFilter,
    recursive: bool,
    case_insensitive: bool,
    state: Mutex<WatchState>,
    pub ext: X,
}

impl<X> Deref for Watcher<X> {
    type Target = X;
    fn deref(&self) -> &X {
        &self.ext
    }
}

impl<X> Watcher<X> {
    /// The queued changes, an overflow, the close or the pending delete, if any; takes the
    /// changes (the close and the delete stay, for every later request).
    pub fn take(&self) -> Option<Taken> {
        let mut st = lock(&self.state);
        if st.closed {
            return Some(Taken::Closed);
        }
        if st.delete_pending {
            return Some(Taken::DeletePending);
        }
        if st.overflow {
            st.overflow = false;
            st.changes.clear();
            return Some(Taken::Overflow);
        }
        if st.changes.is_empty() {
            return None;
        }
        Some(Taken::Changes(st.changes.drain(..).collect()))
    }

    /// Whether [`Watcher::take`] would return something now.
    pub fn ready(&self) -> bool {
        let st = lock(&self.state);
        st.closed || st.delete_pending || st.overflow || !st.changes.is_empty()
    }

    /// Whether the watcher is done for good (its open closed, or its directory is to be
    /// deleted): every waiting request answers that, whatever its order.
    pub fn ended(&self) -> bool {
        let st = lock(&self.state);
        st.closed || st.delete_pending
    }

    /// The volume watched.
    pub fn volume(&self) -> usize {
        self.volume
    }

    fn same(&self, a: &str, b: &str) -> bool {
        if self.case_insensitive {
            a.to_lowercase() == b.to_lowercase()
        } else {
            a == b
        }
    }

    /// The name of `path` relative to the watched directory, if this watcher covers it.
    fn relative(&self, volume: usize, path: &[String]) -> Option<Vec<String>> {
        if volume != self.volume || path.len() <= self.dir.len() || (!self.recursive && path.len() != self.dir.len() + 1) {
            return None;
        }
        self.dir.iter().zip(path).all(|(a, b)| self.same(a, b)).then(|| path[self.dir.len()..].to_vec())
    }

    /// Whether this watcher watches exactly `path` of `volume`.
    fn watches(&self, volume: usize, path: &[String]) -> bool {
        volume == self.volume && path.len() == self.dir.len() && self.dir.iter().zip(path).all(|(a, b)| self.same(a, b))
    }

    /// Queues `e` if the watcher wants it; returns whether it did.
    fn offer(&self, e: &ChangeEvent<'_>) -> bool {
        if !self.filter.intersects(e.changed) {
            return false;
        }
        let Some(name) = self.relative(e.volume, e.path) else { return false };
        let mut st = lock(&self.state);
        if st.closed || st.delete_pending {
            return false;
        }
        if st.changes.len() >= MAX_QUEUED {
            st.overflow = true;
        } else {
            st.changes.push_back((e.action, name));
        }
        true
    }
}

#[derive(Debug, Default)]
struct Table<X> {
    by_open: HashMap<u64, Arc<Watcher<X>>>,
    /// Watchers per volume, for the limit.
    per_volume: HashMap<usize, usize>,
}

/// Every watcher, by the id of its open.
#[derive(Debug)]
pub struct Watchers<X> {
    table: Mutex<Table<X>>,
    /// Number of watchers, so that reporting costs one load when nobody watches.
    count: AtomicUsize,
    case_insensitive: bool,
}

impl<X: Default> Watchers<X> {
    /// An empty table; `case_insensitive`: names match whatever their case (SMB).
    pub fn new(case_insensitive: bool) -> Self {
        Watchers { table: Mutex::new(Table { by_open: HashMap::new(), per_volume: HashMap::new() }), count: AtomicUsize::new(0), case_insensitive }
    }

    /// The watcher of `open`: the existing one (whatever `filter` and `recursive` say now),
    /// or a new one on directory `dir` of `volume`, unless `volume` has `limit` watchers
    /// already (0: no limit).
    pub fn watch(
        &self,
        open: u64,
        volume: usize,
        dir: &[String],
        filter: ChangeFilter,
        recursive: bool,
        limit: usize,
    ) -> Result<Arc<Watcher<X>>, TooManyWatchers> {
        let mut t = lock(&self.table);
        if let Some(w) = t.by_open.get(&open) {
            return Ok(w.clone());
        }
        let n = t.per_volume.entry(volume).or_default();
        if limit != 0 && *n >= limit {
            return Err(TooManyWatchers { limit });
        }
        *n += 1;
        self.count.fetch_add(1, Ordering::Relaxed);
        let state = Mutex::default();
        let w = Arc::new(Watcher { volume, dir: dir.to_vec(), filter, recursive, case_insensitive: self.case_insensitive, state, ext: X::default() });
        t.by_open.insert(open, w.clone());
        Ok(w)
    }
}

impl<X> Watchers<X> {
    /// The open closed: its watcher's next take is [`Taken::Closed`]. Returns the watcher
    /// (to wake its waiter), if it had one.
    pub fn closed(&self, open: u64) -> Option<Arc<Watcher<X>>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut t = lock(&self.table);
        let w = t.by_open.remove(&open)?;
        if let Some(n) = t.per_volume.get_mut(&w.volume) {
            *n = n.saturating_sub(1);
        }
        drop(t);
        self.count.fetch_sub(1, Ordering::Relaxed);
        lock(&w.state).closed = true;
        Some(w)
    }

    /// Watchers now, on every volume.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Watchers on `volume` now.
    pub fn on_volume(&self, volume: usize) -> usize {
        lock(&self.table).per_volume.get(&volume).copied().unwrap_or(0)
    }

    /// Queues `e` on every watcher that covers it; returns those watchers (to wake their
    /// waiters).
    pub fn report(&self, e: &ChangeEvent<'_>) -> Vec<Arc<Watcher<X>>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let all: Vec<Arc<Watcher<X>>> = lock(&self.table).by_open.values().cloned().collect();
        all.into_iter().filter(|w| w.offer(e)).collect()
    }

    /// Changes on `volume` were lost (its event source overflowed): every watcher of it
    /// answers [`Taken::Overflow`] next, so its client lists again. Returns them (to wake
    /// their waiters).
    pub fn lost(&self, volume: usize) -> Vec<Arc<Watcher<X>>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let all: Vec<Arc<Watcher<X>>> = lock(&self.table).by_open.values().filter(|w| w.volume == volume).cloned().collect();
        for w in &all {
            lock(&w.state).overflow = true;
        }
        all
    }

    /// Directory `dir` of `volume` is to be deleted once its last open closes: every
    /// watcher of it answers [`Taken::DeletePending`] from now on. Returns them (to wake
    /// their waiters).
    pub fn delete_pending(&self, volume: usize, dir: &[String]) -> Vec<Arc<Watcher<X>>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let all: Vec<Arc<Watcher<X>>> = lock(&self.table).by_open.values().filter(|w| w.watches(volume, dir)).cloned().collect();
        for w in &all {
            let mut st = lock(&w.state);
            st.delete_pending = true;
            st.changes.clear();
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_changes_overflow_the_volume_watchers_only() {
        let ws: Watchers<()> = Watchers::new(true);
        let a = ws.watch(1, 0, &[], ChangeFilter(1), false, 0).unwrap();
        let b = ws.watch(2, 1, &[], ChangeFilter(1), false, 0).unwrap();
        assert_eq!(ws.lost(0).len(), 1);
        assert_eq!(a.take(), Some(Taken::Overflow));
        assert_eq!(b.take(), None);
    }

    fn p(s: &str) -> Vec<String> {
        s.split('/').filter(|c| !c.is_empty()).map(str::to_string).collect()
    }

    fn ev(volume: usize, path: &[String], action: ChangeAction, changed: ChangeFilter) -> ChangeEvent<'_> {
        ChangeEvent { volume, path, action, changed }
    }

    const BOTH: ChangeFilter = ChangeFilter(3);
    const FILE: ChangeFilter = ChangeFilter::FILE_NAME;
    const DIR: ChangeFilter = ChangeFilter::DIR_NAME;

    fn watch<X: Default>(ws: &Watchers<X>, open: u64, dir: &str, filter: ChangeFilter, recursive: bool) -> Arc<Watcher<X>> {
        ws.watch(open, 0, &p(dir), filter, recursive, 0).unwrap()
    }

    #[test]
    fn reports_reach_matching_watchers_only() {
        let ws = Watchers::<()>::new(true);
        let root = watch(&ws, 1, "", FILE, false);
        let sub = watch(&ws, 2, "Dir", BOTH, true);
        assert_eq!(ws.report(&ev(0, &p("dir/a/x.txt"), ChangeAction::Added, FILE)).len(), 1, "recursive, any case");
        assert!(ws.report(&ev(1, &p("y.txt"), ChangeAction::Added, FILE)).is_empty(), "another volume");
        assert!(ws.report(&ev(0, &p("z"), ChangeAction::Added, DIR)).is_empty(), "root watches files only");
        assert!(ws.report(&ev(0, &p("q/r.txt"), ChangeAction::Added, FILE)).is_empty(), "root is not recursive");
        assert!(ws.report(&ev(0, &p("Dir"), ChangeAction::Modified, ChangeFilter::ATTRIBUTES)).is_empty(), "not the watched directory itself");
        assert_eq!(root.take(), None);
        assert_eq!(sub.take(), Some(Taken::Changes(vec![(ChangeAction::Added, p("a/x.txt"))])));
        assert_eq!(sub.take(), None, "taken once");
        ws.report(&ev(0, &p("w.txt"), ChangeAction::Removed, FILE));
        assert_eq!(root.take(), Some(Taken::Changes(vec![(ChangeAction::Removed, p("w.txt"))])));
        assert!(ws.closed(1).is_some());
        assert_eq!(root.take(), Some(Taken::Closed));
        assert_eq!(root.take(), Some(Taken::Closed), "a close stays");
        assert!(ws.closed(1).is_none());
    }

    #[test]
    fn filters_match_the_kinds_of_change() {
        let ws = Watchers::<()>::new(true);
        let attrs = watch(&ws, 1, "d", ChangeFilter::ATTRIBUTES, true);
        let size = watch(&ws, 2, "d", ChangeFilter::SIZE | ChangeFilter::LAST_WRITE, false);
        let sec = watch(&ws, 3, "d", ChangeFilter::SECURITY | ChangeFilter::EA, false);
        let m = ChangeAction::Modified;
        ws.report(&ev(0, &p("d/f"), m, ChangeFilter::ATTRIBUTES | ChangeFilter::CREATION));
        ws.report(&ev(0, &p("d/g"), m, ChangeFilter::SIZE));
        ws.report(&ev(0, &p("d/h"), m, ChangeFilter::EA));
        ws.report(&ev(0, &p("d/new"), ChangeAction::Added, FILE));
        assert_eq!(attrs.take(), Some(Taken::Changes(vec![(m, p("f"))])));
        assert_eq!(size.take(), Some(Taken::Changes(vec![(m, p("g"))])));
        assert_eq!(sec.take(), Some(Taken::Changes(vec![(m, p("h"))])));
        let none = watch(&ws, 4, "d", ChangeFilter(0), true);
        ws.report(&ev(0, &p("d/f"), m, ChangeFilter(0xFFF)));
        assert_eq!(none.take(), None, "an empty filter wants nothing");
    }

    #[test]
    fn case_sensitive_watchers() {
        let ws = Watchers::<()>::new(false);
        watch(&ws, 1, "Dir", BOTH, false);
        assert!(ws.report(&ev(0, &p("dir/x"), ChangeAction::Added, FILE)).is_empty());
        assert_eq!(ws.report(&ev(0, &p("Dir/x"), ChangeAction::Added, FILE)).len(), 1);
    }

    #[test]
    fn overflow_asks_for_a_rescan() {
        let ws = Watchers::<()>::new(true);
        let w = watch(&ws, 1, "", FILE, false);
        for i in 0..=MAX_QUEUED {
            ws.report(&ev(0, &p(&format!("f{i}")), ChangeAction::Added, FILE));
        }
        assert!(w.ready());
        assert_eq!(w.take(), Some(Taken::Overflow));
        assert_eq!(w.take(), None);
        assert!(!w.ready());
    }

    #[test]
    fn the_first_request_sets_the_filter() {
        let ws = Watchers::<()>::new(true);
        let w = watch(&ws, 1, "", FILE, false);
        watch(&ws, 1, "", DIR, true);
        ws.report(&ev(0, &p("f"), ChangeAction::Added, FILE));
        ws.report(&ev(0, &p("d"), ChangeAction::Added, DIR));
        ws.report(&ev(0, &p("d/g"), ChangeAction::Added, FILE));
        assert_eq!(w.take(), Some(Taken::Changes(vec![(ChangeAction::Added, p("f"))])));
    }

    #[test]
    fn a_volume_holds_at_most_limit_watchers() {
        let ws = Watchers::<()>::new(true);
        assert!(ws.watch(1, 0, &p("a"), FILE, false, 2).is_ok());
        assert!(ws.watch(2, 0, &p("b"), FILE, false, 2).is_ok());
        assert!(ws.watch(1, 0, &p("a"), FILE, false, 2).is_ok(), "the same open again is no new watcher");
        assert_eq!(ws.watch(3, 0, &p("c"), FILE, false, 2).err(), Some(TooManyWatchers { limit: 2 }));
        assert!(ws.watch(3, 1, &p("c"), FILE, false, 2).is_ok(), "another volume counts apart");
        assert_eq!(ws.on_volume(0), 2);
        ws.closed(2);
        assert_eq!(ws.on_volume(0), 1);
        assert!(ws.watch(3, 0, &p("c"), FILE, false, 2).is_ok());
        assert!(ws.watch(4, 0, &p("d"), FILE, false, 0).is_ok(), "0: no limit");
    }

    #[test]
    fn a_deleted_directory_ends_its_watchers() {
        let ws = Watchers::<()>::new(true);
        let w = watch(&ws, 1, "Gone", FILE, false);
        let parent = watch(&ws, 2, "", DIR, false);
        ws.report(&ev(0, &p("gone/x"), ChangeAction::Added, FILE));
        assert!(!w.ended());
        assert_eq!(ws.delete_pending(0, &p("GONE")).len(), 1);
        assert!(w.ended());
        assert_eq!(w.take(), Some(Taken::DeletePending));
        assert_eq!(w.take(), Some(Taken::DeletePending), "it stays");
        ws.report(&ev(0, &p("gone/y"), ChangeAction::Added, FILE));
        assert_eq!(parent.take(), None);
        assert_eq!(ws.closed(1).map(|w| w.take()), Some(Some(Taken::Closed)));
    }
}
