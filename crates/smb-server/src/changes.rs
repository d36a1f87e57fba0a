//! The one place every change to a share's names and files is announced, whoever made it:
//! an SMB handler (with the lease keys of the open that made it), another protocol server,
//! or the backend reporting a change made outside Braid. From here a change reaches the
//! CHANGE_NOTIFY watches (`notify.rs`) and the directory leases of the parent (`oplocks.rs`).
//! The backend's metadata cache needs nothing from here: changes through Braid pass through
//! it, and it learns of outside changes before it reports them.

use std::sync::{Arc, Weak};

use braid_vfs::{what, Change, ChangeKind, Delivery, SharePath};

use crate::server::ServerState;

/// Who made a change, so that its own leases are not broken by it (MS-SMB2 3.3.4.7: a
/// change by the holder of a directory's lease key, given as the ParentLeaseKey of the
/// open that made it, does not break that directory lease).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Origin {
    /// The lease key of the open that made the change.
    pub lease_key: Option<[u8; 16]>,
    /// The ParentLeaseKey that open gave (lease v2).
    pub parent_lease_key: Option<[u8; 16]>,
}

impl Origin {
    /// A change made outside Braid, or through a protocol without leases.
    pub const OUTSIDE: Origin = Origin { lease_key: None, parent_lease_key: None };
}

/// Announces `change` on share `share` (its index).
pub fn changed(server: &ServerState, share: usize, change: &Change, origin: Origin) {
    crate::dir_leases::break_parent(server, share, change, origin);
    if change.what & what::NAME != 0 {
        use smb_wire::msg::notify::action;
        let code = match change.kind {
            ChangeKind::Added => action::ADDED,
            ChangeKind::Removed => action::REMOVED,
            ChangeKind::Modified => action::MODIFIED,
            ChangeKind::RenamedFrom => action::RENAMED_OLD_NAME,
            ChangeKind::RenamedTo => action::RENAMED_NEW_NAME,
        };
        server.notify.report(share, &change.path, code, change.is_dir);
    }
}

/// A name added, removed or renamed through Braid.
pub fn name(server: &ServerState, share: usize, path: &SharePath, kind: ChangeKind, is_dir: bool, origin: Origin) {
    let change = Change { path: path.clone(), kind, is_dir, what: what::NAME };
    changed(server, share, &change, origin);
}

/// Subscribes to every share's outside changes; returns how each share learns of them.
/// Holds the server weakly, so a stopped server's backends stop delivering into it.
pub fn subscribe_all(server: &Arc<ServerState>) -> Vec<Delivery> {
    server
        .shares
        .iter()
        .map(|share| {
            let weak: Weak<ServerState> = Arc::downgrade(server);
            let index = share.index;
            share.backend.subscribe(Arc::new(move |c: &Change| {
                if let Some(s) = weak.upgrade() {
                    changed(&s, index, c, Origin::OUTSIDE);
                }
            }))
        })
        .collect()
}
