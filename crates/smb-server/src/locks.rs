//! Per-file state shared by every open of the same file: share modes, delete-pending and
//! byte-range locks (MS-FSA 2.1.5.1.2, 2.1.5.7).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use smb_wire::msg::create::{access, share};
use smb_wire::NtStatus;
use tokio::sync::Notify;

use crate::sync::{lock, Sharded};

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
    /// Last byte covered, or None for a zero-length lock. Ranges whose end would pass
    /// 2^64 - 1 are refused before they get here.
    fn last(&self) -> Option<u64> {
        self.length.checked_sub(1).map(|l| self.offset.saturating_add(l))
    }

    /// Whether two ranges contend, whatever their types. A zero-length range at `o`
    /// contends only with a range that holds `o` beyond its first byte (Windows: a
    /// zero-length lock at 10 conflicts with 9..=10 but not with 10..=11); two zero-length
    /// ranges never contend.
    fn contends(&self, other: &ByteLock) -> bool {
        match (self.last(), other.last()) {
            (None, None) => false,
            (None, Some(last)) => other.offset < self.offset && self.offset <= last,
            (Some(last), None) => self.offset < other.offset && other.offset <= last,
            (Some(a), Some(b)) => self.offset <= b && other.offset <= a,
        }
    }

    /// Whether this existing lock refuses the new lock `new` (MS-FSA 2.1.5.7): an exclusive
    /// request conflicts with every contending lock, even its own open's; a shared one only
    /// with another open's exclusive lock.
    fn blocks(&self, new: &ByteLock) -> bool {
        self.contends(new) && (new.exclusive || (self.exclusive && self.open != new.open))
    }

    /// Whether this lock stops `open` from reading (`write == false`) or writing the
    /// non-empty range `offset..offset+length` (MS-FSA 2.1.4.10). Zero-length locks guard
    /// no bytes.
    fn blocks_io(&self, open: u64, offset: u64, length: u64, write: bool) -> bool {
        let (Some(last), Some(io_last)) = (self.last(), length.checked_sub(1).map(|l| offset.saturating_add(l))) else {
            return false;
        };
        let overlap = self.offset <= io_last && offset <= last;
        // Any shared lock, even the writer's own, makes the range read-only.
        overlap && if self.exclusive { self.open != open } else { write }
    }
}

/// Lock sequence replay state of one open (MS-SMB2 3.3.1.10 Open.LockSequenceArray).
#[derive(Debug, Clone, Copy)]
struct LockSequences {
    /// The last sequence number that succeeded in each of the 64 buckets; None = not valid.
    buckets: [Option<u8>; 64],
}

/// Splits a LOCK request's LockSequence into a bucket index (0..64) and the sequence number,
/// or None when the bucket is outside 1..=64 and no replay detection applies.
pub fn lock_sequence_bucket(lock_sequence: u32) -> Option<(usize, u8)> {
    let index = (lock_sequence >> 4) as usize;
    let number = (lock_sequence & 0xF) as u8;
    (1..=64).contains(&index).then(|| (index - 1, number))
}

/// Shared state of one file.
#[derive(Debug, Default)]
pub struct FileNode {
    claims: Mutex<Vec<OpenClaim>>,
    locks: Mutex<Vec<ByteLock>>,
    /// Fast path: READ/WRITE skip the lock list while this is false.
    has_locks: AtomicBool,
    pub delete_pending: AtomicBool,
    /// Woken whenever a lock or an open is released, for blocked LOCK requests.
    pub unlocked: Notify,
    /// Opens whose LOCK requests are checked for replays (resilient or durable opens),
    /// keyed by open id; dropped with the open.
    sequences: Mutex<HashMap<u64, LockSequences>>,
    /// Oplocks and leases (see `oplocks.rs`).
    pub oplocks: crate::oplocks::NodeOplocks,
    /// WRITEs to this file, one at a time (see `write_queue.rs`).
    pub writes: crate::write_queue::WriteQueue,
}

/// An open asking only for attributes and SYNCHRONIZE: it breaks no oplock and gets none
/// (what Windows calls a stat open).
pub fn is_stat_open(acc: u32) -> bool {
    acc & !(access::FILE_READ_ATTRIBUTES | access::FILE_WRITE_ATTRIBUTES | access::SYNCHRONIZE) == 0
}

const DATA_ACCESS: u32 = access::FILE_READ_DATA | access::FILE_WRITE_DATA | access::FILE_APPEND_DATA | access::FILE_EXECUTE | access::DELETE;

impl FileNode {
    /// Checks share modes against the other opens and records this one (MS-FSA 2.1.5.1.2).
    pub fn claim(&self, open: u64, acc: u32, shr: u32) -> Result<(), NtStatus> {
        let mut claims = lock(&self.claims);
        Self::share_check(&claims, acc, shr)?;
        claims.push(OpenClaim { open, access: acc, share: shr });
        Ok(())
    }

    /// Whether an open with these access and share modes would be refused, without
    /// recording it (a conflicting CREATE first breaks batch oplocks and handle caching).
    pub fn would_conflict(&self, acc: u32, shr: u32) -> bool {
        Self::share_check(&lock(&self.claims), acc, shr).is_err()
    }

    fn share_check(claims: &[OpenClaim], acc: u32, shr: u32) -> Result<(), NtStatus> {
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
        Ok(())
    }

    /// Opens of this file, leaving out those `skip` (open id, access) names: whether a new open is alone for
    /// oplock and lease purposes (stat opens count: they hold oplocks too).
    pub fn other_opens(&self, skip: impl Fn(u64, u32) -> bool) -> usize {
        lock(&self.claims).iter().filter(|c| !skip(c.open, c.access)).count()
    }

    /// Drops an open's claim and locks; returns true when it was the last open.
    pub fn release(&self, open: u64) -> bool {
        let last = {
            let mut claims = lock(&self.claims);
            claims.retain(|c| c.open != open);
            claims.is_empty()
        };
        lock(&self.sequences).remove(&open);
        self.oplocks.release(open);
        {
            let mut locks = lock(&self.locks);
            locks.retain(|l| l.open != open);
            self.has_locks.store(!locks.is_empty(), Ordering::Release);
        }
        // Wake blocked requests even when no lock went away: a pending lock of this very
        // open must notice that its handle is gone.
        self.unlocked.notify_waiters();
        last
    }

    /// Tries to take a lock: STATUS_LOCK_NOT_GRANTED on conflict (SMB2 never uses
    /// FILE_LOCK_CONFLICT for locks), STATUS_INVALID_LOCK_RANGE when the range passes the
    /// end of the 64-bit offset space.
    pub fn try_lock(&self, l: ByteLock) -> Result<(), NtStatus> {
        if l.length > 0 && l.offset.checked_add(l.length - 1).is_none() {
            return Err(NtStatus::INVALID_LOCK_RANGE);
        }
        let mut locks = lock(&self.locks);
        if locks.iter().any(|e| e.blocks(&l)) {
            return Err(NtStatus::LOCK_NOT_GRANTED);
        }
        locks.push(l);
        self.has_locks.store(true, Ordering::Release);
        Ok(())
    }

    /// Removes one lock `open` holds at exactly `offset`/`length`. When an exclusive and a
    /// shared lock are stacked on the same range the exclusive one goes first, so the
    /// range becomes readable by others after one unlock (as on Windows).
    pub fn unlock(&self, open: u64, offset: u64, length: u64) -> Result<(), NtStatus> {
        let mut locks = lock(&self.locks);
        let matches = |e: &ByteLock| e.open == open && e.offset == offset && e.length == length;
        let pos = locks.iter().rposition(|e| matches(e) && e.exclusive).or_else(|| locks.iter().rposition(matches));
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

    /// Whether `open` may read (`write == false`) or write the range given the locks held.
    pub fn io_allowed(&self, open: u64, offset: u64, length: u64, write: bool) -> bool {
        if !self.has_locks.load(Ordering::Acquire) {
            return true;
        }
        !lock(&self.locks).iter().any(|e| e.blocks_io(open, offset, length, write))
    }

    /// Turns on lock sequence verification for `open` (MS-SMB2 3.3.5.14: resilient,
    /// durable and persistent opens). Idempotent; the state goes away with the open.
    pub fn enable_lock_sequences(&self, open: u64) {
        lock(&self.sequences).entry(open).or_insert(LockSequences { buckets: [None; 64] });
    }

    /// Lock sequence verification for one LOCK request of `open`: true if the request
    /// replays the last successful one of its bucket (the caller then answers success
    /// without doing anything). Otherwise the bucket is invalidated until the request
    /// succeeds and [`FileNode::lock_sequence_done`] records it.
    pub fn lock_sequence_replayed(&self, open: u64, lock_sequence: u32) -> bool {
        let Some((index, number)) = lock_sequence_bucket(lock_sequence) else { return false };
        let mut seqs = lock(&self.sequences);
        let Some(s) = seqs.get_mut(&open) else { return false };
        if s.buckets[index] == Some(number) {
            return true;
        }
        s.buckets[index] = None;
        false
    }

    /// Records a successful LOCK request's sequence number for replay detection.
    pub fn lock_sequence_done(&self, open: u64, lock_sequence: u32) {
        let Some((index, number)) = lock_sequence_bucket(lock_sequence) else { return };
        if let Some(s) = lock(&self.sequences).get_mut(&open) {
            s.buckets[index] = Some(number);
        }
    }
}

/// All files currently open, keyed by [`FileKey`].
#[derive(Debug)]
pub struct FileTable {
    nodes: Sharded<FileKey, Arc<FileNode>>,
    /// Lease table (MS-SMB2 3.3.1.4): which file each ClientGuid + LeaseKey is on; a key
    /// belongs to one file while any open uses it.
    leases: Sharded<crate::oplocks::LeaseId, FileKey>,
}

impl FileTable {
    pub fn new() -> Self {
        FileTable { nodes: Sharded::new(32), leases: Sharded::new(16) }
    }

    /// The node for `key`, created if absent.
    pub fn node(&self, key: FileKey) -> Arc<FileNode> {
        self.nodes.with(&key, |m| m.entry(key).or_default().clone())
    }

    /// The node for `key` if some open holds it.
    pub fn existing(&self, key: FileKey) -> Option<Arc<FileNode>> {
        self.nodes.get(&key)
    }

    /// Binds lease `id` to file `key`; refused when the key is already on another file.
    pub fn bind_lease(&self, id: crate::oplocks::LeaseId, key: FileKey) -> Result<(), NtStatus> {
        self.leases.with(&id, |m| match m.get(&id) {
            Some(k) if *k != key => Err(NtStatus::INVALID_PARAMETER),
            _ => {
                m.insert(id, key);
                Ok(())
            }
        })
    }

    /// The file lease `id` is on, if any.
    pub fn lease_file(&self, id: crate::oplocks::LeaseId) -> Option<FileKey> {
        self.leases.get(&id)
    }

    /// Releases `open`; drops the node when no open remains. Returns whether it was last and
    /// whether delete was pending.
    pub fn release(&self, key: FileKey, open: u64) -> (bool, bool) {
        self.nodes.with(&key, |m| {
            let Some(n) = m.get(&key).cloned() else { return (true, false) };
            let freed = n.oplocks.lease_of(open).filter(|id| n.oplocks.lease_opens(*id).len() == 1);
            let last = n.release(open);
            if let Some(id) = freed {
                self.leases.remove(&id);
            }
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

    fn ex(open: u64, offset: u64, length: u64) -> ByteLock {
        ByteLock { open, offset, length, exclusive: true }
    }

    #[test]
    fn zero_length_locks() {
        // (first lock, second lock, conflicts) - the same for one open and for two.
        let cases = [
            ((10, 0), (10, 0), false),
            ((10, 0), (9, 1), false),
            ((10, 0), (10, 1), false),
            ((10, 0), (11, 1), false),
            ((10, 0), (9, 2), true),
            ((10, 0), (10, 2), false),
            ((10, 0), (9, 3), true),
            ((9, 2), (10, 0), true),
            ((10, 2), (10, 0), false),
            ((0, 0), (0, 0), false),
        ];
        for second_open in [1, 2] {
            for ((o1, l1), (o2, l2), conflict) in cases {
                let n = FileNode::default();
                n.try_lock(ex(1, o1, l1)).unwrap();
                let r = n.try_lock(ex(second_open, o2, l2));
                assert_eq!(r.is_err(), conflict, "{o1}/{l1} + {o2}/{l2} open {second_open}");
            }
        }
    }

    #[test]
    fn ranges_at_the_top() {
        let n = FileNode::default();
        n.try_lock(ex(1, u64::MAX, 1)).unwrap();
        assert_eq!(n.try_lock(ex(2, u64::MAX, 1)), Err(NtStatus::LOCK_NOT_GRANTED));
        assert_eq!(n.try_lock(ex(2, u64::MAX, 2)), Err(NtStatus::INVALID_LOCK_RANGE));
        n.try_lock(ex(2, u64::MAX, 0)).unwrap();
        assert!(!n.io_allowed(2, u64::MAX, 1, false));
    }

    #[test]
    fn unlock_removes_exclusive_before_shared() {
        let n = FileNode::default();
        n.try_lock(ex(1, 10, 10)).unwrap();
        n.try_lock(ByteLock { open: 1, offset: 10, length: 10, exclusive: false }).unwrap();
        // The same open may not stack a second exclusive lock.
        assert_eq!(n.try_lock(ex(1, 10, 10)), Err(NtStatus::LOCK_NOT_GRANTED));
        n.unlock(1, 10, 10).unwrap();
        n.try_lock(ByteLock { open: 2, offset: 5, length: 10, exclusive: false }).unwrap();
        assert!(!n.io_allowed(1, 10, 1, true), "a shared lock stops even its owner writing");
    }

    #[test]
    fn lock_sequences() {
        let n = FileNode::default();
        assert!(!n.lock_sequence_replayed(1, 0x11), "off until enabled");
        n.enable_lock_sequences(1);
        assert!(!n.lock_sequence_replayed(1, 0x11));
        n.lock_sequence_done(1, 0x11);
        assert!(n.lock_sequence_replayed(1, 0x11));
        assert!(!n.lock_sequence_replayed(1, 0x12));
        assert!(!n.lock_sequence_replayed(1, 0x11), "a different number invalidates the bucket");
        // Buckets 0 and 65 are never checked.
        n.lock_sequence_done(1, 0x001);
        assert!(!n.lock_sequence_replayed(1, 0x001));
        n.lock_sequence_done(1, 0x411);
        assert!(!n.lock_sequence_replayed(1, 0x411));
        n.lock_sequence_done(1, 0x402);
        assert!(n.lock_sequence_replayed(1, 0x402));
        n.release(1);
        assert!(!n.lock_sequence_replayed(1, 0x402));
    }
}
