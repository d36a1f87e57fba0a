//! The one place every change to a share's names and files is announced, whoever made it:
//! an SMB handler (with the lease keys of the open that made it), another protocol server,
//! or the backend reporting a change made outside Braid. From here a change reaches the
//! CHANGE_NOTIFY watches (`notify.rs`) and the directory leases of the parent (`oplocks.rs`).
//! The lease breaks a change causes come back to the announcer as [`Notices`], to be written
//! before the answer to the request that made the change (`Notices::send`).
//! The backend's metadata cache needs nothing from here: changes through Braid pass through
//! it, and it learns of outside changes before it reports them.

use std::sync::{Arc, Weak};

use braid_vfs::{what, Change, ChangeKind, Delivery, SharePath};

use crate::breaks::Notices;
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

/// Announces `change` on share `share` (its index); returns the directory-lease breaks it
/// causes.
pub fn changed(server: &ServerState, share: usize, change: &Change, origin: Origin) -> Notices {
    let breaks = crate::dir_leases::break_parent(server, share, change, origin);
    server.notify.report(share, change);
    breaks
}

/// A name added, removed or renamed through Braid.
pub fn name(server: &ServerState, share: usize, path: &SharePath, kind: ChangeKind, is_dir: bool, origin: Origin) -> Notices {
    let change = Change { path: path.clone(), kind, is_dir, what: what::NAME };
    changed(server, share, &change, origin)
}

/// Properties of the file or directory at `path` changed through Braid (`what` bits).
pub fn modified(server: &ServerState, share: usize, path: &SharePath, is_dir: bool, bits: u32, origin: Origin) -> Notices {
    if bits == 0 {
        return Notices::default();
    }
    let change = Change { path: path.clone(), kind: ChangeKind::Modified, is_dir, what: bits };
    changed(server, share, &change, origin)
}

/// `from` was renamed to `to` through Braid. Within one directory that is an old and a new
/// name; across directories the name goes from one and comes to the other (removed, added),
/// as Windows and Samba report it. A file also reports its attributes and creation time as
/// modified under the new name (Windows Server 2003 does, and clients expect it).
pub fn renamed(server: &ServerState, share: usize, from: &SharePath, to: &SharePath, is_dir: bool, origin: Origin) -> Notices {
    let (a, b) = (from.components(), to.components());
    let same_dir = a.len() == b.len() && a.iter().zip(b).take(a.len().saturating_sub(1)).all(|(x, y)| x.to_lowercase() == y.to_lowercase());
    let (gone, came) = if same_dir { (ChangeKind::RenamedFrom, ChangeKind::RenamedTo) } else { (ChangeKind::Removed, ChangeKind::Added) };
    let mut breaks = name(server, share, from, gone, is_dir, origin);
    breaks.add(name(server, share, to, came, is_dir, origin));
    if !is_dir {
        breaks.add(modified(server, share, to, false, what::ATTRIBUTES | what::CREATION, origin));
    }
    breaks
}

/// Subscribes to every share's outside changes; returns how each share learns of them.
/// Holds the server weakly, so a stopped server's backends stop delivering into it.
pub fn subscribe_all(server: &Arc<ServerState>) -> Vec<Delivery> {
    server.shares.iter().map(|share| subscribe(server, &share)).collect()
}

/// Subscribes to one share's outside changes (at start, or when a reload adds it).
pub fn subscribe(server: &Arc<ServerState>, share: &crate::server::Share) -> Delivery {
    let weak: Weak<ServerState> = Arc::downgrade(server);
    let index = share.index;
    share.backend.subscribe(Arc::new(move |c: &Change| {
        if let Some(s) = weak.upgrade() {
            // Nothing answers a change made outside Braid: its breaks go when they can.
            let breaks = changed(&s, index, c, Origin::OUTSIDE);
            s.dir_leases.send_from_any_thread(breaks);
        }
    }))
}
