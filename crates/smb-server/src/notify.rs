//! CHANGE_NOTIFY watches (MS-SMB2 3.3.5.19). A directory open that asked for change
//! notifications has a [`Watch`]; every change announced through `changes.rs` (by the SMB
//! handlers, or reported by the backend for changes made outside Braid) reaches it here.
//! Matching and queueing are `braid_filestate`'s watchers; this module maps a
//! `braid_vfs::Change` onto the FILE_NOTIFY_CHANGE_* kinds, orders the requests waiting on
//! one open, and encodes FILE_NOTIFY_INFORMATION.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use braid_filestate::{ChangeAction, ChangeEvent, ChangeFilter, Taken, TooManyWatchers, Watchers};
use braid_vfs::{what, Change, ChangeKind, SharePath};
use smb_wire::msg::notify::{action, encode_changes};
use smb_wire::NtStatus;
use tokio::sync::Notify;

use crate::sync::lock;

/// A waiting CHANGE_NOTIFY: its MessageId and its connection's id (a session's channels
/// number their messages apart).
pub type Waiter = (u64, u64);

/// What SMB adds to a watcher: the CHANGE_NOTIFY requests waiting on the open.
#[derive(Debug, Default)]
pub struct Wake {
    /// Woken when a change is queued, the open closes, or the first waiting request leaves.
    pub changed: Notify,
    /// The requests waiting, oldest first, as (MessageId, connection id): changes go to
    /// the oldest, as a client that sent two expects the first answered first.
    waiting: Mutex<BTreeSet<Waiter>>,
    /// Woken when the last waiting request has answered.
    drained: Notify,
}

impl Wake {
    /// Request `who` starts waiting.
    pub fn enqueue(&self, who: Waiter) {
        lock(&self.waiting).insert(who);
    }

    /// Whether request `who` is the oldest waiting, the one that takes the changes.
    pub fn is_first(&self, who: Waiter) -> bool {
        lock(&self.waiting).first() == Some(&who)
    }

    /// Request `who` answered (or was cancelled): the next one may take.
    pub fn leave(&self, who: Waiter) {
        let empty = {
            let mut w = lock(&self.waiting);
            w.remove(&who);
            w.is_empty()
        };
        self.changed.notify_waiters();
        if empty {
            self.drained.notify_waiters();
        }
    }

    /// Waits (at most `limit`) until no request waits any more: a CLOSE lets the requests
    /// it ended send NOTIFY_CLEANUP before its own response, as Windows does.
    pub async fn drain(&self, limit: Duration) {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if lock(&self.waiting).is_empty() {
                return;
            }
            if tokio::time::timeout_at(until, drained).await.is_err() {
                return;
            }
        }
    }
}

/// One directory open's notification state.
pub type Watch = braid_filestate::Watcher<Wake>;

/// What a waiting CHANGE_NOTIFY answers now, if anything: the queued changes (at most
/// `max` bytes of FILE_NOTIFY_INFORMATION), NOTIFY_ENUM_DIR when they overflowed or do not
/// fit, NOTIFY_CLEANUP once the open is closed, DELETE_PENDING once the directory is to go.
pub fn take(w: &Watch, max: usize) -> Option<Result<Vec<u8>, NtStatus>> {
    match w.take()? {
        Taken::Closed => Some(Err(NtStatus::NOTIFY_CLEANUP)),
        Taken::DeletePending => Some(Err(NtStatus::DELETE_PENDING)),
        Taken::Overflow => Some(Err(NtStatus::NOTIFY_ENUM_DIR)),
        Taken::Changes(changes) => {
            let named: Vec<(u32, String)> = changes.into_iter().map(|(a, name)| (action_code(a), name.join("\\"))).collect();
            Some(encode_changes(named.iter().map(|(a, n)| (*a, n.as_str())), max).ok_or(NtStatus::NOTIFY_ENUM_DIR))
        }
    }
}

/// The FILE_NOTIFY_INFORMATION Action of a change (MS-FSCC 2.7.1).
fn action_code(a: ChangeAction) -> u32 {
    match a {
        ChangeAction::Added => action::ADDED,
        ChangeAction::Removed => action::REMOVED,
        ChangeAction::Modified => action::MODIFIED,
        ChangeAction::RenamedOldName => action::RENAMED_OLD_NAME,
        ChangeAction::RenamedNewName => action::RENAMED_NEW_NAME,
        ChangeAction::AddedStream => action::ADDED_STREAM,
        ChangeAction::RemovedStream => action::REMOVED_STREAM,
        ChangeAction::ModifiedStream => action::MODIFIED_STREAM,
    }
}

/// The FILE_NOTIFY_CHANGE_* kinds of the properties in `bits` ([`braid_vfs::what`]), other
/// than the name and the streams.
fn property_kinds(bits: u32) -> ChangeFilter {
    const MAP: [(u32, ChangeFilter); 7] = [
        (what::ATTRIBUTES, ChangeFilter::ATTRIBUTES),
        (what::SIZE, ChangeFilter::SIZE),
        (what::LAST_WRITE, ChangeFilter::LAST_WRITE),
        (what::LAST_ACCESS, ChangeFilter::LAST_ACCESS),
        (what::CREATION, ChangeFilter::CREATION),
        (what::EA, ChangeFilter::EA),
        (what::SECURITY, ChangeFilter::SECURITY),
    ];
    MAP.iter().filter(|(w, _)| bits & w != 0).fold(ChangeFilter(0), |acc, (_, k)| acc | *k)
}

/// The action and the FILE_NOTIFY_CHANGE_* kinds of a change, or None when no filter
/// could want it. A name change is FILE_NAME or DIR_NAME; a change of a file's properties
/// is MODIFIED under the kinds of the properties; a change of its named streams alone is a
/// stream action.
pub fn event_of(c: &Change) -> Option<(ChangeAction, ChangeFilter)> {
    let name_kind = if c.is_dir { ChangeFilter::DIR_NAME } else { ChangeFilter::FILE_NAME };
    let only_streams = c.what & !what::STREAMS == 0 && c.what & what::STREAMS != 0;
    let (act, kinds) = match c.kind {
        ChangeKind::Added if only_streams => (ChangeAction::AddedStream, ChangeFilter::STREAM_NAME),
        ChangeKind::Removed if only_streams => (ChangeAction::RemovedStream, ChangeFilter::STREAM_NAME),
        ChangeKind::Modified if only_streams => (ChangeAction::ModifiedStream, ChangeFilter::STREAM_SIZE | ChangeFilter::STREAM_WRITE),
        ChangeKind::Added => (ChangeAction::Added, name_kind),
        ChangeKind::Removed => (ChangeAction::Removed, name_kind),
        ChangeKind::RenamedFrom => (ChangeAction::RenamedOldName, name_kind),
        ChangeKind::RenamedTo => (ChangeAction::RenamedNewName, name_kind),
        ChangeKind::Modified => (ChangeAction::Modified, property_kinds(c.what)),
    };
    (kinds.0 != 0).then_some((act, kinds))
}

/// Every watch of the server, by the volatile id of its open. Names match whatever their
/// case, as on Windows.
#[derive(Debug)]
pub struct Watches {
    watchers: Watchers<Wake>,
    /// When the watch limit of a share was last logged, so that a client hammering it
    /// does not flood the log.
    limit_logged: Mutex<Option<Instant>>,
}

impl Default for Watches {
    fn default() -> Self {
        Watches { watchers: Watchers::new(true), limit_logged: Mutex::new(None) }
    }
}

impl Watches {
    /// The watch of open `open`: created on its first CHANGE_NOTIFY with that request's
    /// filter and subtree flag, which stay until the open closes. A share with `limit`
    /// watches already (0: no limit) refuses a new one: INSUFFICIENT_RESOURCES.
    pub fn watch(
        &self,
        open: u64,
        share: (usize, &str),
        dir: &SharePath,
        filter: u32,
        recursive: bool,
        limit: usize,
    ) -> Result<Arc<Watch>, NtStatus> {
        self.watchers.watch(open, share.0, dir.components(), ChangeFilter(filter), recursive, limit).map_err(|TooManyWatchers { limit }| {
            let mut last = lock(&self.limit_logged);
            if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                *last = Some(Instant::now());
                tracing::warn!(share = share.1, limit, "CHANGE_NOTIFY refused: the share has max_watches watches already");
            }
            NtStatus::INSUFFICIENT_RESOURCES
        })
    }

    /// Watches now (one per watched open).
    pub fn len(&self) -> usize {
        self.watchers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open closed: its waiting CHANGE_NOTIFY requests answer NOTIFY_CLEANUP. Returns
    /// the watch, if it had one (its requests may still be sending their answers).
    pub fn closed(&self, open: u64) -> Option<Arc<Watch>> {
        let w = self.watchers.closed(open)?;
        w.changed.notify_waiters();
        Some(w)
    }

    /// Reports `change` on share `share` to the watches that want it. A watched directory
    /// that went away (outside Braid: through Braid it cannot while a handle on it is open)
    /// ends its watches as a pending delete would.
    pub fn report(&self, share: usize, change: &Change) {
        if change.what & braid_vfs::what::LOST != 0 {
            for w in self.watchers.lost(share) {
                w.changed.notify_waiters();
            }
            return;
        }
        if change.is_dir && change.kind == ChangeKind::Removed {
            self.delete_pending(share, &change.path);
        }
        let Some((action, changed)) = event_of(change) else { return };
        let e = ChangeEvent { volume: share, path: change.path.components(), action, changed };
        for w in self.watchers.report(&e) {
            w.changed.notify_waiters();
        }
    }

    /// Directory `dir` of share `share` is to be deleted when its last open closes: the
    /// CHANGE_NOTIFY requests on it answer DELETE_PENDING.
    pub fn delete_pending(&self, share: usize, dir: &SharePath) {
        for w in self.watchers.delete_pending(share, dir.components()) {
            w.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_filestate::MAX_QUEUED;
    use smb_wire::msg::notify::filter;

    fn p(s: &str) -> SharePath {
        SharePath::from_smb(s).unwrap()
    }

    fn change(path: &str, kind: ChangeKind, is_dir: bool, what: u32) -> Change {
        Change { path: p(path), kind, is_dir, what }
    }

    fn name(path: &str, kind: ChangeKind, is_dir: bool) -> Change {
        change(path, kind, is_dir, what::NAME)
    }

    fn watch(ws: &Watches, open: u64, dir: &str, filter: u32, recursive: bool) -> Arc<Watch> {
        ws.watch(open, (0, "s"), &p(dir), filter, recursive, 0).unwrap()
    }

    /// The (action, name) entries of a FILE_NOTIFY_INFORMATION buffer.
    fn entries(buf: &[u8]) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            let le = |o: usize| u32::from_le_bytes(buf[at + o..at + o + 4].try_into().unwrap());
            let (next, act, len) = (le(0) as usize, le(4), le(8) as usize);
            let units: Vec<u16> = buf[at + 12..at + 12 + len].chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            out.push((act, String::from_utf16(&units).unwrap()));
            if next == 0 {
                return out;
            }
            assert_eq!(next % 4, 0, "entries are 4-byte aligned");
            at += next;
        }
    }

    #[test]
    fn reports_reach_matching_watches_only() {
        let ws = Watches::default();
        let root = watch(&ws, 1, "", filter::FILE_NAME, false);
        let sub = watch(&ws, 2, "Dir", filter::FILE_NAME | filter::DIR_NAME, true);
        ws.report(0, &name("dir\\a\\x.txt", ChangeKind::Added, false));
        ws.report(1, &name("y.txt", ChangeKind::Added, false)); // other share
        ws.report(0, &name("z", ChangeKind::Added, true)); // a directory: root watches files only
        assert_eq!(take(&root, 1000), None);
        let buf = take(&sub, 1000).unwrap().unwrap();
        assert_eq!(entries(&buf), vec![(action::ADDED, "a\\x.txt".to_string())]);
        ws.report(0, &name("w.txt", ChangeKind::Removed, false));
        assert!(take(&root, 1000).unwrap().is_ok());
        assert!(ws.closed(1).is_some());
        assert_eq!(take(&root, 1000), Some(Err(NtStatus::NOTIFY_CLEANUP)));
    }

    #[test]
    fn properties_map_to_their_filters() {
        let ws = Watches::default();
        let kinds = [
            (filter::ATTRIBUTES, what::ATTRIBUTES),
            (filter::SIZE, what::SIZE),
            (filter::LAST_WRITE, what::LAST_WRITE),
            (filter::LAST_ACCESS, what::LAST_ACCESS),
            (filter::CREATION, what::CREATION),
            (filter::EA, what::EA),
            (filter::SECURITY, what::SECURITY),
        ];
        for (i, (f, w)) in kinds.iter().enumerate() {
            let watch = watch(&ws, i as u64 + 1, "d", *f, false);
            // Every other property, then this one.
            for (_, other) in kinds.iter().filter(|(g, _)| g != f) {
                ws.report(0, &change("d\\f", ChangeKind::Modified, false, *other));
            }
            ws.report(0, &name("d\\f", ChangeKind::Added, false));
            assert_eq!(take(&watch, 1000), None, "filter {f:#x}");
            ws.report(0, &change("d\\f", ChangeKind::Modified, false, *w | what::SIZE));
            let buf = take(&watch, 1000).unwrap().unwrap();
            assert_eq!(entries(&buf), vec![(action::MODIFIED, "f".to_string())], "filter {f:#x}");
            ws.closed(i as u64 + 1);
        }
    }

    #[test]
    fn names_and_streams_have_their_actions() {
        let dir = |kind| event_of(&name("a\\b", kind, true));
        assert_eq!(dir(ChangeKind::Added), Some((ChangeAction::Added, ChangeFilter::DIR_NAME)));
        assert_eq!(dir(ChangeKind::RenamedFrom), Some((ChangeAction::RenamedOldName, ChangeFilter::DIR_NAME)));
        assert_eq!(dir(ChangeKind::RenamedTo), Some((ChangeAction::RenamedNewName, ChangeFilter::DIR_NAME)));
        let file = event_of(&name("a\\b", ChangeKind::Removed, false));
        assert_eq!(file, Some((ChangeAction::Removed, ChangeFilter::FILE_NAME)));
        let stream = event_of(&change("f", ChangeKind::Added, false, what::STREAMS));
        assert_eq!(stream, Some((ChangeAction::AddedStream, ChangeFilter::STREAM_NAME)));
        let written = event_of(&change("f", ChangeKind::Modified, false, what::STREAMS));
        assert_eq!(written, Some((ChangeAction::ModifiedStream, ChangeFilter::STREAM_SIZE | ChangeFilter::STREAM_WRITE)));
        assert_eq!(event_of(&change("f", ChangeKind::Modified, false, 0)), None);
        assert_eq!(action_code(ChangeAction::ModifiedStream), action::MODIFIED_STREAM);
    }

    #[test]
    fn overflow_and_small_buffers_ask_for_a_rescan() {
        let ws = Watches::default();
        let w = watch(&ws, 1, "", filter::FILE_NAME, false);
        for i in 0..=MAX_QUEUED {
            ws.report(0, &name(&format!("f{i}"), ChangeKind::Added, false));
        }
        assert_eq!(take(&w, 1 << 20), Some(Err(NtStatus::NOTIFY_ENUM_DIR)));
        assert_eq!(take(&w, 1 << 20), None);
        ws.report(0, &name("a-long-name.txt", ChangeKind::Added, false));
        assert_eq!(take(&w, 8), Some(Err(NtStatus::NOTIFY_ENUM_DIR)));
    }

    #[test]
    fn the_watch_limit_and_the_deleted_directory() {
        let ws = Watches::default();
        assert!(ws.watch(1, (0, "s"), &p("a"), filter::FILE_NAME, false, 1).is_ok());
        assert_eq!(ws.watch(2, (0, "s"), &p("b"), filter::FILE_NAME, false, 1).err(), Some(NtStatus::INSUFFICIENT_RESOURCES));
        ws.delete_pending(0, &p("A"));
        let w = ws.watch(1, (0, "s"), &p("a"), filter::FILE_NAME, false, 1).unwrap();
        assert_eq!(take(&w, 100), Some(Err(NtStatus::DELETE_PENDING)));
        let gone = watch(&ws, 3, "x\\y", filter::FILE_NAME, false);
        ws.report(0, &name("X\\y", ChangeKind::Removed, true));
        assert_eq!(take(&gone, 100), Some(Err(NtStatus::DELETE_PENDING)), "removed outside Braid");
    }

    #[test]
    fn the_oldest_waiting_request_goes_first() {
        let wake = Wake::default();
        wake.enqueue((7, 1));
        wake.enqueue((5, 2));
        wake.enqueue((5, 1));
        assert!(wake.is_first((5, 1)) && !wake.is_first((5, 2)) && !wake.is_first((7, 1)));
        wake.leave((5, 1));
        assert!(wake.is_first((5, 2)), "the same MessageId on another channel is another request");
        wake.leave((5, 2));
        assert!(wake.is_first((7, 1)));
    }
}
