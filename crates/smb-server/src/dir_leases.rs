//! Directory leases (SMB 3.x, MS-SMB2 3.3.1.4): which directory opens hold a lease, and the
//! break of a directory's lease when one of its entries changes (MS-FSA 2.1.4.12 with
//! PARENT_OBJECT, MS-SMB2 3.3.4.7), whoever made the change: an SMB open, another protocol,
//! or a program outside Braid. The lease itself lives on the directory's node like a file's
//! (`oplocks.rs`, `braid_filestate::Grants`); this module finds the node from the name of
//! the entry that changed.
//!
//! A change knows only its path, and a directory's node is reached through its opens (the
//! node is keyed by file id, which a path cannot give without a lookup in the backend, and
//! the announcement of a change must not do I/O). So the directory opens granted a lease
//! are registered here, each with the share it is on; an announcement compares the parent
//! of the changed name with the current path of each registered open of that share. With
//! no directory lease held, that is one atomic load.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use braid_vfs::{what, Change, ChangeKind, SharePath};

use crate::breaks::Notices;
use crate::changes::Origin;
use crate::open::Open;
use crate::server::ServerState;
use crate::sync::lock;

/// Registered directory opens holding a lease, and how breaks are sent from threads that
/// are not the server's (the backend reports outside changes on its own thread).
#[derive(Debug, Default)]
pub struct DirLeases {
    held: Mutex<Vec<(usize, Weak<Open>)>>,
    /// `held.len()`, read without the lock.
    count: AtomicUsize,
    /// The server (weakly) and its runtime, recorded with the first registration.
    sender: OnceLock<(Weak<ServerState>, tokio::runtime::Handle)>,
}

impl DirLeases {
    /// Registers directory open `open` on share `share`, just granted a lease. Called on
    /// the server's runtime.
    pub fn register(&self, server: &Arc<ServerState>, share: usize, open: &Arc<Open>) {
        self.sender.get_or_init(|| (Arc::downgrade(server), tokio::runtime::Handle::current()));
        let mut held = lock(&self.held);
        Self::prune(&mut held);
        held.push((share, Arc::downgrade(open)));
        self.count.store(held.len(), Ordering::Release);
    }

    /// Leased directory opens still alive.
    pub fn len(&self) -> usize {
        let mut held = lock(&self.held);
        Self::prune(&mut held);
        self.count.store(held.len(), Ordering::Release);
        held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the opens that are gone, so the list is as long as the leased opens are many.
    fn prune(held: &mut Vec<(usize, Weak<Open>)>) {
        held.retain(|(_, o)| o.strong_count() > 0);
    }

    /// The distinct nodes of the leased directory opens of `share` at path `dir`.
    fn nodes_at(&self, share: usize, dir: &SharePath) -> Vec<Arc<crate::locks::FileNode>> {
        let opens: Vec<Arc<Open>> = {
            let mut held = lock(&self.held);
            Self::prune(&mut held);
            self.count.store(held.len(), Ordering::Release);
            held.iter().filter(|(s, _)| *s == share).filter_map(|(_, o)| o.upgrade()).collect()
        };
        let mut nodes: Vec<Arc<crate::locks::FileNode>> = Vec::new();
        for open in opens {
            let Some(node) = open.node() else { continue };
            if nodes.iter().any(|n| Arc::ptr_eq(n, node)) || !same_path(&lock(&open.path), dir) {
                continue;
            }
            nodes.push(node.clone());
        }
        nodes
    }

    /// Sends `notices` from a thread that is not the server's (the backend reports outside
    /// changes on its own), in a task of the server's runtime: nothing answers such a
    /// change, so nothing waits for them.
    pub fn send_from_any_thread(&self, notices: Notices) {
        if notices.is_empty() {
            return;
        }
        let Some((server, runtime)) = self.sender.get() else { return };
        let Some(server) = server.upgrade() else { return };
        let notices = notices.into_vec();
        runtime.spawn(async move { crate::breaks::deliver(&server, notices).await });
    }
}

/// Names compare whatever their case, as SMB opens them.
fn same_path(a: &SharePath, b: &SharePath) -> bool {
    let (a, b) = (a.components(), b.components());
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_lowercase() == y.to_lowercase())
}

/// Whether `change` is one that breaks the lease of the directory holding the name: a name
/// added, removed or renamed, or a change to the entry's attributes, size or times (what a
/// directory listing shows). EAs, security and streams are not in a listing.
fn breaks_parent(change: &Change) -> bool {
    let listed = what::NAME | what::ATTRIBUTES | what::SIZE | what::LAST_WRITE | what::LAST_ACCESS | what::CREATION;
    change.kind != ChangeKind::Modified || change.what & listed != 0
}

/// Breaks the leases of the directory holding `change.path` on share `share` (both
/// directories of a rename: each half of it is announced), except the lease `origin`
/// names as its parent (MS-SMB2 3.3.4.7: the client that made the change through that
/// directory's lease knows of it). Returns the notifications, which the caller writes
/// before it answers; nothing waits for their acknowledgment. The caller holds no open's
/// `path` lock (the leased directory opens' paths are read).
pub fn break_parent(server: &ServerState, share: usize, change: &Change, origin: Origin) -> Notices {
    let leases = &server.dir_leases;
    if leases.count.load(Ordering::Acquire) == 0 || !breaks_parent(change) {
        return Notices::default();
    }
    let Some(dir) = change.path.parent() else { return Notices::default() };
    let now = tokio::time::Instant::now();
    Notices::new(leases.nodes_at(share, &dir).iter().flat_map(|n| n.oplocks.break_parent(origin.parent_lease_key, now)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> SharePath {
        SharePath::from_smb(s).unwrap()
    }

    fn change(path: &str, kind: ChangeKind, what: u32) -> Change {
        Change { path: p(path), kind, is_dir: false, what }
    }

    #[test]
    fn listed_changes_break_the_parent_and_others_do_not() {
        assert!(breaks_parent(&change("d\\f", ChangeKind::Added, what::NAME)));
        assert!(breaks_parent(&change("d\\f", ChangeKind::RenamedTo, what::NAME)));
        assert!(breaks_parent(&change("d\\f", ChangeKind::Modified, what::SIZE | what::LAST_WRITE)));
        assert!(breaks_parent(&change("d\\f", ChangeKind::Modified, what::ATTRIBUTES)));
        assert!(!breaks_parent(&change("d\\f", ChangeKind::Modified, what::SECURITY | what::EA)));
    }

    #[test]
    fn paths_match_whatever_their_case() {
        assert!(same_path(&p("Dir\\Sub"), &p("dir\\SUB")));
        assert!(!same_path(&p("dir\\sub"), &p("dir")));
        assert!(!same_path(&p("dir\\sub"), &p("dir\\sob")));
        assert!(same_path(&p(""), &SharePath::root()));
    }
}
