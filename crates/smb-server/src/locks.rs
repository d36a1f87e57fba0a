//! Per-file state shared by every open of the same file: share modes, delete-pending and
//! byte-range locks (MS-FSA 2.1.5.1.2, 2.1.5.7).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use smb_wire::msg::create::{access, share};
use smb_wire::NtStatus;
use tokio::sync::Notify;

use crate::server::{lock, Sharded};

/// Identifies a file across opens: share index and the backend's file id.
pub type FileKey = (usize, u64);

/// One open's claim on a file, for share-mode checks.
#[derive(Debug, Clone, Copy)]
struct OpenClaim {
    open: u64,
    access: u32,
    share: u32,
}

/// One granted byte-range lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteLock {
    pub open: u64,
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
}

impl ByteLock {
    fn overlaps(&self, offset: u64, length: u64) -> bool {
        // Zero-length ranges conflict with nothing (MS-FSA 2.1.5.7).
        if self.length == 0 || length == 0 {
            return false;
        }
        let a_end = self.offset.saturating_add(self.length);
        let b_end = offset.saturating_add(length);
        self.offset < b_end && offset < a_end
    }
}

/// Shared state of one file.
#[derive(Debug, Default)]
pub struct FileNode {
    claims: Mutex<Vec<OpenClaim>>,
    locks: Mutex<Vec<ByteLock>>,
    /// Fast path: READ/WRITE skip the lock list while this is false.
    has_locks: AtomicBool,
    pub delete_pending: AtomicBool,
    /// Woken whenever a lock is released, for blocked LOCK requests.
    pub unlocked: Notify,
}

const DATA_ACCESS: u32 = access::FILE_READ_DATA
    | access::FILE_WRITE_DATA
    | access::FILE_APPEND_DATA
    | access::FILE_EXECUTE
    | access::DELETE;

impl FileNode {
    /// Checks share modes against the other opens and records this one (MS-FSA 2.1.5.1.2).
    pub fn claim(&self, open: u64, acc: u32, shr: u32) -> Result<(), NtStatus> {
        let mut claims = lock(&self.claims);
        if acc & DATA_ACCESS != 0 {
            for c in claims.iter().filter(|c| c.access & DATA_ACCESS != 0) {
                let conflict = (acc & (access::FILE_READ_DATA | access::FILE_EXECUTE) != 0 && c.share & share::READ == 0)
                    || (acc & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0 && c.share & share::WRITE == 0)
                    || (acc & access::DELETE != 0 && c.share & share::DELETE == 0)
                    || (c.access & (access::FILE_READ_DATA | access::FILE_EXECUTE) != 0 && shr & share::READ == 0)
                    || (c.access & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0 && shr & share::WRITE == 0)
                    || (c.access & access::DELETE != 0 && shr & share::DELETE == 0);
                if conflict {
                    return Err(NtStatus::SHARING_VIOLATION);
                }
            }
        }
        claims.push(OpenClaim { open, access: acc, share: shr });
        Ok(())
    }

    /// Whether any open other than `open` exists.
    pub fn others_open(&self, open: u64) -> bool {
        lock(&self.claims).iter().any(|c| c.open != open)
    }

    /// Drops an open's claim and locks; returns true when it was the last open.
    pub fn release(&self, open: u64) -> bool {
        let last = {
            let mut claims = lock(&self.claims);
            claims.retain(|c| c.open != open);
            claims.is_empty()
        };
        let mut locks = lock(&self.locks);
        let before = locks.len();
        locks.retain(|l| l.open != open);
        if locks.len() != before {
            self.has_locks.store(!locks.is_empty(), Ordering::Release);
            self.unlocked.notify_waiters();
        }
        last
    }

    /// Tries to take a lock; `LOCK_NOT_GRANTED` (or FILE_LOCK_CONFLICT per caller) on
    /// conflict.
    pub fn try_lock(&self, l: ByteLock) -> Result<(), NtStatus> {
        if l.length > 0 && l.offset.checked_add(l.length - 1).is_none() {
            return Err(NtStatus(0xC000_01A1)); // STATUS_INVALID_LOCK_RANGE
        }
        let mut locks = lock(&self.locks);
        let conflict = locks
            .iter()
            .any(|e| e.overlaps(l.offset, l.length) && (l.exclusive || (e.exclusive && e.open != l.open)));
        if conflict {
            return Err(NtStatus::LOCK_NOT_GRANTED);
        }
        locks.push(l);
        self.has_locks.store(true, Ordering::Release);
        Ok(())
    }

    /// Removes exactly the lock `open` holds at `offset`/`length`.
    pub fn unlock(&self, open: u64, offset: u64, length: u64) -> Result<(), NtStatus> {
        let mut locks = lock(&self.locks);
        // The most recent matching lock goes first, so stacked locks unwind in order.
        let pos = locks.iter().rposition(|e| e.open == open && e.offset == offset && e.length == length);
        match pos {
            Some(i) => {
                locks.remove(i);
                self.has_locks.store(!locks.is_empty(), Ordering::Release);
                drop(locks);
                self.unlocked.notify_waiters();
                Ok(())
            }
            None => Err(NtStatus::RANGE_NOT_LOCKED),
        }
    }

    /// Whether `open` may read (`write == false`) or write the range given others' locks.
    pub fn io_allowed(&self, open: u64, offset: u64, length: u64, write: bool) -> bool {
        if !self.has_locks.load(Ordering::Acquire) {
            return true;
        }
        let locks = lock(&self.locks);
        !locks.iter().any(|e| e.overlaps(offset, length) && e.open != open && (write || e.exclusive))
            && !(write && locks.iter().any(|e| e.overlaps(offset, length) && e.open == open && !e.exclusive))
    }
}

/// All files currently open, keyed by [`FileKey`].
#[derive(Debug)]
pub struct FileTable {
    nodes: Sharded<FileKey, Arc<FileNode>>,
}

impl FileTable {
    pub fn new() -> Self {
        FileTable { nodes: Sharded::new(32) }
    }

    /// The node for `key`, created if absent.
    pub fn node(&self, key: FileKey) -> Arc<FileNode> {
        self.nodes.with(&key, |m| m.entry(key).or_default().clone())
    }

    /// The node for `key` if some open holds it.
    pub fn existing(&self, key: FileKey) -> Option<Arc<FileNode>> {
        self.nodes.get(&key)
    }

    /// Releases `open`; drops the node when no open remains. Returns whether it was last and
    /// whether delete was pending.
    pub fn release(&self, key: FileKey, open: u64) -> (bool, bool) {
        self.nodes.with(&key, |m| {
            let Some(n) = m.get(&key).cloned() else { return (true, false) };
            let last = n.release(open);
            let pending = n.delete_pending.load(Ordering::Acquire);
            if last {
                m.remove(&key);
            }
            (last, pending)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_modes() {
        let n = FileNode::default();
        n.claim(1, access::FILE_READ_DATA, share::READ).unwrap();
        assert_eq!(n.claim(2, access::FILE_WRITE_DATA, share::READ | share::WRITE), Err(NtStatus::SHARING_VIOLATION));
        n.claim(3, access::FILE_READ_DATA, share::READ).unwrap();
        // Attribute-only opens never conflict.
        n.claim(4, access::FILE_READ_ATTRIBUTES, 0).unwrap();
    }

    #[test]
    fn byte_locks() {
        let n = FileNode::default();
        let l = |open, offset, length, exclusive| ByteLock { open, offset, length, exclusive };
        n.try_lock(l(1, 0, 100, true)).unwrap();
        assert_eq!(n.try_lock(l(2, 50, 10, false)), Err(NtStatus::LOCK_NOT_GRANTED));
        n.try_lock(l(2, 100, 10, true)).unwrap();
        assert!(!n.io_allowed(2, 10, 1, false));
        assert!(n.io_allowed(1, 10, 1, true));
        assert_eq!(n.unlock(2, 0, 100), Err(NtStatus::RANGE_NOT_LOCKED));
        n.unlock(1, 0, 100).unwrap();
        n.try_lock(l(2, 50, 10, false)).unwrap();
        n.try_lock(l(3, 50, 10, false)).unwrap();
        assert!(n.io_allowed(3, 50, 5, false));
        assert!(!n.io_allowed(3, 50, 5, true));
        assert!(n.try_lock(l(4, u64::MAX, 2, true)).is_err());
    }
}
