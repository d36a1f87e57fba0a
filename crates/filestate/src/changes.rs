//! Change events for directory watchers: the names added, removed or renamed through any
//! protocol server reach every watcher of the directory (or of an ancestor, for a
//! recursive watch), queued until the watcher's protocol takes them.

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
}

/// Which kinds of names a watcher wants (MS-FSCC FILE_NOTIFY_CHANGE_FILE_NAME and
/// _DIR_NAME bit values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChangeFilter(pub u32);

impl ChangeFilter {
    pub const FILE_NAME: ChangeFilter = ChangeFilter(1);
    pub const DIR_NAME: ChangeFilter = ChangeFilter(2);
}

/// One change: on export (share) `volume`, the name at `path` (components from the root).
#[derive(Debug, Clone, Copy)]
pub struct ChangeEvent<'a> {
    pub volume: usize,
    pub path: &'a [String],
    pub action: ChangeAction,
    pub is_dir: bool,
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
}

#[derive(Debug, Default)]
struct WatchState {
    filter: ChangeFilter,
    recursive: bool,
    changes: VecDeque<(ChangeAction, Vec<String>)>,
    overflow: bool,
    closed: bool,
}

/// One watching open. `X` is the protocol's own part (SMB: the wake-up of a waiting
/// CHANGE_NOTIFY); the watcher derefs to it.
#[derive(Debug)]
pub struct Watcher<X> {
    volume: usize,
    dir: Vec<String>,
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
    /// The queued changes, an overflow, or the close, if any; takes them.
    pub fn take(&self) -> Option<Taken> {
        let mut st = lock(&self.state);
        if st.closed {
            return Some(Taken::Closed);
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

    /// The name of `path` relative to the watched directory, if this watcher covers it.
    fn relative(&self, volume: usize, path: &[String], recursive: bool) -> Option<Vec<String>> {
        if volume != self.volume || path.len() <= self.dir.len() || (!recursive && path.len() != self.dir.len() + 1) {
            return None;
        }
        let same = |a: &String, b: &String| if self.case_insensitive { a.to_lowercase() == b.to_lowercase() } else { a == b };
        self.dir.iter().zip(path).all(|(a, b)| same(a, b)).then(|| path[self.dir.len()..].to_vec())
    }

    /// Queues `e` if the watcher wants it; returns whether it did.
    fn offer(&self, e: &ChangeEvent<'_>) -> bool {
        let mut st = lock(&self.state);
        let want = if e.is_dir { ChangeFilter::DIR_NAME } else { ChangeFilter::FILE_NAME };
        if st.filter.0 & want.0 == 0 {
            return false;
        }
        let Some(name) = self.relative(e.volume, e.path, st.recursive) else { return false };
        if st.changes.len() >= MAX_QUEUED {
            st.overflow = true;
        } else {
            st.changes.push_back((e.action, name));
        }
        true
    }
}

/// Every watcher, by the id of its open.
#[derive(Debug)]
pub struct Watchers<X> {
    by_open: Mutex<HashMap<u64, Arc<Watcher<X>>>>,
    /// Number of watchers, so that reporting costs one load when nobody watches.
    count: AtomicUsize,
    case_insensitive: bool,
}

impl<X: Default> Watchers<X> {
    /// An empty table; `case_insensitive`: names match whatever their case (SMB).
    pub fn new(case_insensitive: bool) -> Self {
        Watchers { by_open: Mutex::default(), count: AtomicUsize::new(0), case_insensitive }
    }

    /// The watcher of `open` on directory `dir` of `volume` (created on first use), with
    /// the filter and subtree flag of the latest request.
    pub fn watch(&self, open: u64, volume: usize, dir: &[String], filter: ChangeFilter, recursive: bool) -> Arc<Watcher<X>> {
        let w = lock(&self.by_open)
            .entry(open)
            .or_insert_with(|| {
                self.count.fetch_add(1, Ordering::Relaxed);
                let state = Mutex::default();
                Arc::new(Watcher { volume, dir: dir.to_vec(), case_insensitive: self.case_insensitive, state, ext: X::default() })
            })
            .clone();
        let mut st = lock(&w.state);
        st.filter = filter;
        st.recursive = recursive;
        drop(st);
        w
    }
}

impl<X> Watchers<X> {
    /// The open closed: its watcher's next take is [`Taken::Closed`]. Returns the watcher
    /// (to wake its waiter), if it had one.
    pub fn closed(&self, open: u64) -> Option<Arc<Watcher<X>>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let w = lock(&self.by_open).remove(&open)?;
        self.count.fetch_sub(1, Ordering::Relaxed);
        lock(&w.state).closed = true;
        Some(w)
    }

    /// Queues `e` on every watcher that covers it; returns those watchers (to wake their
    /// waiters).
    pub fn report(&self, e: &ChangeEvent<'_>) -> Vec<Arc<Watcher<X>>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let all: Vec<Arc<Watcher<X>>> = lock(&self.by_open).values().cloned().collect();
        all.into_iter().filter(|w| w.offer(e)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('/').filter(|c| !c.is_empty()).map(str::to_string).collect()
    }

    fn ev(volume: usize, path: &[String], action: ChangeAction, is_dir: bool) -> ChangeEvent<'_> {
        ChangeEvent { volume, path, action, is_dir }
    }

    const BOTH: ChangeFilter = ChangeFilter(3);

    #[test]
    fn reports_reach_matching_watchers_only() {
        let ws = Watchers::<()>::new(true);
        let root = ws.watch(1, 0, &p(""), ChangeFilter::FILE_NAME, false);
        let sub = ws.watch(2, 0, &p("Dir"), BOTH, true);
        assert_eq!(ws.report(&ev(0, &p("dir/a/x.txt"), ChangeAction::Added, false)).len(), 1, "recursive, any case");
        assert!(ws.report(&ev(1, &p("y.txt"), ChangeAction::Added, false)).is_empty(), "another volume");
        assert!(ws.report(&ev(0, &p("z"), ChangeAction::Added, true)).is_empty(), "root watches files only");
        assert!(ws.report(&ev(0, &p("q/r.txt"), ChangeAction::Added, false)).is_empty(), "root is not recursive");
        assert_eq!(root.take(), None);
        assert_eq!(sub.take(), Some(Taken::Changes(vec![(ChangeAction::Added, p("a/x.txt"))])));
        assert_eq!(sub.take(), None, "taken once");
        ws.report(&ev(0, &p("w.txt"), ChangeAction::Removed, false));
        assert_eq!(root.take(), Some(Taken::Changes(vec![(ChangeAction::Removed, p("w.txt"))])));
        assert!(ws.closed(1).is_some());
        assert_eq!(root.take(), Some(Taken::Closed));
        assert!(ws.closed(1).is_none());
    }

    #[test]
    fn case_sensitive_watchers() {
        let ws = Watchers::<()>::new(false);
        ws.watch(1, 0, &p("Dir"), BOTH, false);
        assert!(ws.report(&ev(0, &p("dir/x"), ChangeAction::Added, false)).is_empty());
        assert_eq!(ws.report(&ev(0, &p("Dir/x"), ChangeAction::Added, false)).len(), 1);
    }

    #[test]
    fn overflow_asks_for_a_rescan() {
        let ws = Watchers::<()>::new(true);
        let w = ws.watch(1, 0, &p(""), ChangeFilter::FILE_NAME, false);
        for i in 0..=MAX_QUEUED {
            ws.report(&ev(0, &p(&format!("f{i}")), ChangeAction::Added, false));
        }
        assert_eq!(w.take(), Some(Taken::Overflow));
        assert_eq!(w.take(), None);
    }

    #[test]
    fn the_latest_request_sets_the_filter() {
        let ws = Watchers::<()>::new(true);
        let w = ws.watch(1, 0, &p(""), ChangeFilter::FILE_NAME, false);
        ws.watch(1, 0, &p(""), ChangeFilter::DIR_NAME, false);
        ws.report(&ev(0, &p("f"), ChangeAction::Added, false));
        ws.report(&ev(0, &p("d"), ChangeAction::Added, true));
        assert_eq!(w.take(), Some(Taken::Changes(vec![(ChangeAction::Added, p("d"))])));
    }
}
