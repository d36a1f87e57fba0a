//! The table of open files by identity, and the state each file's opens share.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::shards::{lock, Sharded};
use crate::{Access, ByteLock, ByteRangeLocks, ShareClaims, ShareMode, StateError};

/// Identifies a file across opens: the export (share) index and the backend's file id.
pub type FileKey = (usize, u64);

/// Identifies one open of a file; the protocol server assigns them, unique server-wide.
pub type OpenId = u64;

/// State of one file shared by all its opens. `X` is what the protocol server keeps per
/// file beside it (SMB: oplocks, its write queue, lock wake-ups); the node derefs to it.
#[derive(Debug, Default)]
pub struct FileNode<X> {
    claims: Mutex<ShareClaims>,
    locks: ByteRangeLocks,
    /// Delete-pending (MS-FSA 2.1.5.14.3): the file goes when its last open closes, and
    /// no new open may reach it meanwhile.
    pub delete_pending: AtomicBool,
    /// The protocol server's own per-file state.
    pub ext: X,
}

impl<X> Deref for FileNode<X> {
    type Target = X;
    fn deref(&self) -> &X {
        &self.ext
    }
}

impl<X> FileNode<X> {
    /// Checks share modes against the other opens and records this one.
    pub fn claim(&self, open: OpenId, access: Access, share: ShareMode) -> Result<(), StateError> {
        lock(&self.claims).claim(open, access, share)
    }

    /// Whether an open with this access and share mode would be refused, without recording
    /// it (a conflicting open first breaks caching grants that keep handles open).
    pub fn check_share(&self, access: Access, share: ShareMode) -> Result<(), StateError> {
        lock(&self.claims).check(access, share)
    }

    /// Opens of this file, leaving out those `skip` (open id, access) names.
    pub fn other_opens(&self, skip: impl Fn(OpenId, Access) -> bool) -> usize {
        lock(&self.claims).count_except(skip)
    }

    /// Drops an open's claim and byte-range locks; returns whether it was the last open.
    pub fn release(&self, open: OpenId) -> bool {
        let last = lock(&self.claims).release(open);
        self.locks.release(open);
        last
    }

    /// Takes a byte-range lock (see [`ByteRangeLocks::try_lock`]).
    pub fn try_lock(&self, l: ByteLock) -> Result<(), StateError> {
        self.locks.try_lock(l)
    }

    /// Removes a byte-range lock (see [`ByteRangeLocks::unlock`]).
    pub fn unlock(&self, open: OpenId, offset: u64, length: u64) -> Result<(), StateError> {
        self.locks.unlock(open, offset, length)
    }

    /// Whether `open` may read (`write == false`) or write the range given the locks held.
    pub fn io_allowed(&self, open: OpenId, offset: u64, length: u64, write: bool) -> bool {
        self.locks.io_allowed(open, offset, length, write)
    }

    /// Whether delete is pending.
    pub fn is_delete_pending(&self) -> bool {
        self.delete_pending.load(Ordering::Acquire)
    }

    /// Sets or clears delete-pending.
    pub fn set_delete_pending(&self, pending: bool) {
        self.delete_pending.store(pending, Ordering::Release);
    }
}

/// What releasing an open left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// No open of the file remains; its node has left the table.
    pub last: bool,
    /// Delete was pending when the open went (with `last`: the file must be removed now).
    pub delete_pending: bool,
}

/// All files currently open, keyed by [`FileKey`], sharded so opens of different files do
/// not contend.
#[derive(Debug)]
pub struct FileTable<X> {
    nodes: Sharded<FileKey, Arc<FileNode<X>>>,
}

impl<X: Default> Default for FileTable<X> {
    fn default() -> Self {
        FileTable { nodes: Sharded::new(32) }
    }
}

impl<X: Default> FileTable<X> {
    /// The node for `key`, created if absent.
    pub fn node(&self, key: FileKey) -> Arc<FileNode<X>> {
        self.nodes.with(&key, |m| m.entry(key).or_default().clone())
    }
}

impl<X> FileTable<X> {
    /// The node for `key` if some open holds it.
    pub fn existing(&self, key: FileKey) -> Option<Arc<FileNode<X>>> {
        self.nodes.with(&key, |m| m.get(&key).cloned())
    }

    /// Files held open now (stateful fuzzing checks that the table empties).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Releases `open` of file `key`: drops its claim and locks, runs `after` (the protocol
    /// server's own release of the open) while no other open of the file can come or go,
    /// and drops the node when no open remains.
    pub fn release(&self, key: FileKey, open: OpenId, after: impl FnOnce(&FileNode<X>)) -> Released {
        self.nodes.with(&key, |m| {
            let Some(n) = m.get(&key).cloned() else { return Released { last: true, delete_pending: false } };
            let last = n.release(open);
            after(&n);
            if last {
                m.remove(&key);
            }
            Released { last, delete_pending: n.is_delete_pending() }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_live_while_opened() {
        let t = FileTable::<()>::default();
        let n = t.node((0, 7));
        n.claim(1, Access::READ_DATA, ShareMode::READ).unwrap();
        n.claim(2, Access::READ_DATA, ShareMode::READ).unwrap();
        assert!(Arc::ptr_eq(&n, &t.existing((0, 7)).unwrap()));
        assert!(t.existing((1, 7)).is_none(), "the share index is part of the identity");
        let mut ran = false;
        assert_eq!(t.release((0, 7), 1, |_| ran = true), Released { last: false, delete_pending: false });
        assert!(ran);
        n.set_delete_pending(true);
        assert_eq!(t.release((0, 7), 2, |_| ()), Released { last: true, delete_pending: true });
        assert!(t.existing((0, 7)).is_none());
    }

    #[test]
    fn release_drops_locks_and_claims() {
        let n = FileNode::<()>::default();
        n.claim(1, Access::WRITE_DATA, ShareMode(0)).unwrap();
        n.try_lock(ByteLock { open: 1, offset: 0, length: 10, exclusive: true }).unwrap();
        assert_eq!(n.check_share(Access::READ_DATA, ShareMode::ALL), Err(StateError::SharingViolation));
        assert!(!n.io_allowed(2, 0, 1, false));
        assert!(n.release(1));
        n.check_share(Access::READ_DATA, ShareMode::ALL).unwrap();
        assert!(n.io_allowed(2, 0, 1, false));
    }

    #[test]
    fn delete_pending() {
        let n = FileNode::<()>::default();
        assert!(!n.is_delete_pending());
        n.set_delete_pending(true);
        assert!(n.is_delete_pending());
        n.set_delete_pending(false);
        assert!(!n.is_delete_pending());
    }
}
