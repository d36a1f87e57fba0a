//! CHANGE_NOTIFY watches (MS-SMB2 3.3.5.19). A directory open that asked for change
//! notifications has a [`Watch`]; the handlers that create, delete and rename names report
//! those changes here, and the watch queues them until a CHANGE_NOTIFY request takes them.
//! Only changes made through this server are seen (no inotify of the local directory).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use braid_vfs::SharePath;
use smb_wire::msg::notify::{encode_changes, filter};
use smb_wire::NtStatus;
use tokio::sync::Notify;

use crate::sync::lock;

/// Changes a watch keeps while no request takes them; beyond this the next request gets
/// STATUS_NOTIFY_ENUM_DIR ("too many changes, list the directory again").
const MAX_QUEUED: usize = 1024;

/// One directory open's notification state.
#[derive(Debug)]
pub struct Watch {
    share: usize,
    dir: Vec<String>,
    state: Mutex<WatchState>,
    /// Woken when a change is queued or the open closes.
    pub changed: Notify,
}

#[derive(Debug, Default)]
struct WatchState {
    filter: u32,
    recursive: bool,
    changes: VecDeque<(u32, String)>,
    overflow: bool,
    closed: bool,
}

impl Watch {
    /// What a waiting CHANGE_NOTIFY answers now, if anything: the queued changes (at most
    /// `max` bytes of FILE_NOTIFY_INFORMATION), NOTIFY_ENUM_DIR when they overflowed or do
    /// not fit, NOTIFY_CLEANUP once the open is closed.
    pub fn take(&self, max: usize) -> Option<Result<Vec<u8>, NtStatus>> {
        let mut st = lock(&self.state);
        if st.closed {
            return Some(Err(NtStatus::NOTIFY_CLEANUP));
        }
        if st.overflow {
            st.overflow = false;
            st.changes.clear();
            return Some(Err(NtStatus::NOTIFY_ENUM_DIR));
        }
        if st.changes.is_empty() {
            return None;
        }
        let info = encode_changes(st.changes.iter().map(|(a, n)| (*a, n.as_str())), max);
        st.changes.clear();
        Some(info.ok_or(NtStatus::NOTIFY_ENUM_DIR))
    }

    /// The relative name of `path` if this watch covers it.
    fn relative(&self, share: usize, path: &[String], recursive: bool) -> Option<String> {
        if share != self.share || path.len() <= self.dir.len() || (!recursive && path.len() != self.dir.len() + 1) {
            return None;
        }
        // Names are case-insensitive.
        let inside = self.dir.iter().zip(path).all(|(a, b)| a.to_lowercase() == b.to_lowercase());
        inside.then(|| path[self.dir.len()..].join("\\"))
    }
}

/// Every watch of the server, by the volatile id of its open.
#[derive(Debug, Default)]
pub struct Watches {
    by_open: Mutex<HashMap<u64, Arc<Watch>>>,
    /// Number of watches, so that reporting costs one load when nobody watches.
    count: AtomicUsize,
}

impl Watches {
    /// The watch of open `open` (created on its first CHANGE_NOTIFY), with the filter and
    /// subtree flag of the latest request.
    pub fn watch(&self, open: u64, share: usize, dir: &SharePath, completion_filter: u32, recursive: bool) -> Arc<Watch> {
        let mut all = lock(&self.by_open);
        let w = all
            .entry(open)
            .or_insert_with(|| {
                self.count.fetch_add(1, Ordering::Relaxed);
                Arc::new(Watch { share, dir: dir.components().to_vec(), state: Mutex::default(), changed: Notify::new() })
            })
            .clone();
        drop(all);
        let mut st = lock(&w.state);
        st.filter = completion_filter;
        st.recursive = recursive;
        drop(st);
        w
    }

    /// The open closed: a waiting CHANGE_NOTIFY answers NOTIFY_CLEANUP.
    pub fn closed(&self, open: u64) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(w) = lock(&self.by_open).remove(&open) else { return };
        self.count.fetch_sub(1, Ordering::Relaxed);
        lock(&w.state).closed = true;
        w.changed.notify_waiters();
    }

    /// A name was added, removed or renamed (`action`, MS-FSCC 2.7.1) in share `share`.
    pub fn report(&self, share: usize, path: &SharePath, action: u32, is_dir: bool) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let bit = if is_dir { filter::DIR_NAME } else { filter::FILE_NAME };
        let watches: Vec<Arc<Watch>> = lock(&self.by_open).values().cloned().collect();
        for w in watches {
            let mut st = lock(&w.state);
            if st.filter & bit == 0 {
                continue;
            }
            let Some(name) = w.relative(share, path.components(), st.recursive) else { continue };
            if st.changes.len() >= MAX_QUEUED {
                st.overflow = true;
            } else {
                st.changes.push_back((action, name));
            }
            drop(st);
            w.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb_wire::msg::notify::action;

    fn p(s: &str) -> SharePath {
        SharePath::from_smb(s).unwrap()
    }

    #[test]
    fn reports_reach_matching_watches_only() {
        let ws = Watches::default();
        let root = ws.watch(1, 0, &p(""), filter::FILE_NAME, false);
        let sub = ws.watch(2, 0, &p("Dir"), filter::FILE_NAME | filter::DIR_NAME, true);
        ws.report(0, &p("dir\\a\\x.txt"), action::ADDED, false);
        ws.report(1, &p("y.txt"), action::ADDED, false); // other share
        ws.report(0, &p("z"), action::ADDED, true); // a directory: root watches files only
        assert_eq!(root.take(1000), None);
        let buf = sub.take(1000).unwrap().unwrap();
        assert_eq!(u32::from_le_bytes(buf[4..8].try_into().unwrap()), action::ADDED);
        let name: Vec<u16> = "a\\x.txt".encode_utf16().collect();
        assert_eq!(u32::from_le_bytes(buf[8..12].try_into().unwrap()) as usize, name.len() * 2);
        ws.report(0, &p("w.txt"), action::REMOVED, false);
        assert!(root.take(1000).unwrap().is_ok());
        ws.closed(1);
        assert_eq!(root.take(1000), Some(Err(NtStatus::NOTIFY_CLEANUP)));
    }

    #[test]
    fn overflow_and_small_buffers_ask_for_a_rescan() {
        let ws = Watches::default();
        let w = ws.watch(1, 0, &p(""), filter::FILE_NAME, false);
        for i in 0..=MAX_QUEUED {
            ws.report(0, &p(&format!("f{i}")), action::ADDED, false);
        }
        assert_eq!(w.take(1 << 20), Some(Err(NtStatus::NOTIFY_ENUM_DIR)));
        assert_eq!(w.take(1 << 20), None);
        ws.report(0, &p("a-long-name.txt"), action::ADDED, false);
        assert_eq!(w.take(8), Some(Err(NtStatus::NOTIFY_ENUM_DIR)));
    }
}
