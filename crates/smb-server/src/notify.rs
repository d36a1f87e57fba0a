//! CHANGE_NOTIFY watches (MS-SMB2 3.3.5.19). A directory open that asked for change
//! notifications has a [`Watch`]; the handlers that create, delete and rename names report
//! those changes here. Matching and queueing are `braid_filestate`'s watchers; this module
//! adds the wake-up of the waiting request and the FILE_NOTIFY_INFORMATION encoding.
//! Only changes made through this server are seen (no inotify of the local directory).

use std::sync::Arc;

use braid_filestate::{ChangeAction, ChangeEvent, ChangeFilter, Taken, Watchers};
use braid_vfs::SharePath;
use smb_wire::msg::notify::{action, encode_changes};
use smb_wire::NtStatus;
use tokio::sync::Notify;

/// What SMB adds to a watcher.
#[derive(Debug, Default)]
pub struct Wake {
    /// Woken when a change is queued or the open closes.
    pub changed: Notify,
}

/// One directory open's notification state.
pub type Watch = braid_filestate::Watcher<Wake>;

/// What a waiting CHANGE_NOTIFY answers now, if anything: the queued changes (at most
/// `max` bytes of FILE_NOTIFY_INFORMATION), NOTIFY_ENUM_DIR when they overflowed or do not
/// fit, NOTIFY_CLEANUP once the open is closed.
pub fn take(w: &Watch, max: usize) -> Option<Result<Vec<u8>, NtStatus>> {
    match w.take()? {
        Taken::Closed => Some(Err(NtStatus::NOTIFY_CLEANUP)),
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
    }
}

/// The change of a FILE_NOTIFY_INFORMATION Action.
fn change_of(code: u32) -> ChangeAction {
    match code {
        action::ADDED => ChangeAction::Added,
        action::REMOVED => ChangeAction::Removed,
        action::RENAMED_OLD_NAME => ChangeAction::RenamedOldName,
        action::RENAMED_NEW_NAME => ChangeAction::RenamedNewName,
        _ => ChangeAction::Modified,
    }
}

/// Every watch of the server, by the volatile id of its open. Names match whatever their
/// case, as on Windows.
#[derive(Debug)]
pub struct Watches {
    watchers: Watchers<Wake>,
}

impl Default for Watches {
    fn default() -> Self {
        Watches { watchers: Watchers::new(true) }
    }
}

impl Watches {
    /// The watch of open `open` (created on its first CHANGE_NOTIFY), with the filter and
    /// subtree flag of the latest request.
    pub fn watch(&self, open: u64, share: usize, dir: &SharePath, completion_filter: u32, recursive: bool) -> Arc<Watch> {
        self.watchers.watch(open, share, dir.components(), ChangeFilter(completion_filter), recursive)
    }

    /// The open closed: a waiting CHANGE_NOTIFY answers NOTIFY_CLEANUP.
    pub fn closed(&self, open: u64) {
        if let Some(w) = self.watchers.closed(open) {
            w.changed.notify_waiters();
        }
    }

    /// A name was added, removed or renamed (`action`, MS-FSCC 2.7.1) in share `share`.
    pub fn report(&self, share: usize, path: &SharePath, action: u32, is_dir: bool) {
        let e = ChangeEvent { volume: share, path: path.components(), action: change_of(action), is_dir };
        for w in self.watchers.report(&e) {
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

    #[test]
    fn reports_reach_matching_watches_only() {
        let ws = Watches::default();
        let root = ws.watch(1, 0, &p(""), filter::FILE_NAME, false);
        let sub = ws.watch(2, 0, &p("Dir"), filter::FILE_NAME | filter::DIR_NAME, true);
        ws.report(0, &p("dir\\a\\x.txt"), action::ADDED, false);
        ws.report(1, &p("y.txt"), action::ADDED, false); // other share
        ws.report(0, &p("z"), action::ADDED, true); // a directory: root watches files only
        assert_eq!(take(&root, 1000), None);
        let buf = take(&sub, 1000).unwrap().unwrap();
        assert_eq!(u32::from_le_bytes(buf[4..8].try_into().unwrap()), action::ADDED);
        let name: Vec<u16> = "a\\x.txt".encode_utf16().collect();
        assert_eq!(u32::from_le_bytes(buf[8..12].try_into().unwrap()) as usize, name.len() * 2);
        ws.report(0, &p("w.txt"), action::REMOVED, false);
        assert!(take(&root, 1000).unwrap().is_ok());
        ws.closed(1);
        assert_eq!(take(&root, 1000), Some(Err(NtStatus::NOTIFY_CLEANUP)));
    }

    #[test]
    fn overflow_and_small_buffers_ask_for_a_rescan() {
        let ws = Watches::default();
        let w = ws.watch(1, 0, &p(""), filter::FILE_NAME, false);
        for i in 0..=MAX_QUEUED {
            ws.report(0, &p(&format!("f{i}")), action::ADDED, false);
        }
        assert_eq!(take(&w, 1 << 20), Some(Err(NtStatus::NOTIFY_ENUM_DIR)));
        assert_eq!(take(&w, 1 << 20), None);
        ws.report(0, &p("a-long-name.txt"), action::ADDED, false);
        assert_eq!(take(&w, 8), Some(Err(NtStatus::NOTIFY_ENUM_DIR)));
    }
}
