//! Byte-range locks (MS-FSA 2.1.5.7 lock/unlock, 2.1.4.10 whether I/O may proceed).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::shards::lock;
use crate::{OpenId, StateError};

/// Lock owners with POSIX semantics (NLM's, for NFS clients' `fcntl` locks) carry this bit
/// in their id; SMB's open ids count up from 1 and never reach it. A POSIX owner's own locks
/// never refuse its new one (the new one replaces them where they overlap, as `fcntl`
/// does), an unlock may cover any part of what it holds, and its locks are advisory: they
/// refuse other locks, of either protocol, but not reads or writes.
pub const POSIX_OWNER: OpenId = 1 << 62;

/// Locks one file may hold: POSIX owners can split their locks into many pieces, and a
/// client must not grow the list without bound.
pub const MAX_LOCKS_PER_FILE: usize = 16_384;

/// Whether `open` is a POSIX lock owner.
pub fn is_posix(open: OpenId) -> bool {
    open & POSIX_OWNER != 0
}

/// One granted byte-range lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteLock {
    pub open: OpenId,
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

    /// Whether this existing lock refuses the new lock `new`: an exclusive request
    /// conflicts with every contending lock, even its own open's; a shared one only with
    /// another open's exclusive lock.
    fn blocks(&self, new: &ByteLock) -> bool {
        if is_posix(new.open) && self.open == new.open {
            return false;
        }
        self.contends(new) && (new.exclusive || (self.exclusive && self.open != new.open))
    }

    /// Whether this lock stops `open` from reading (`write == false`) or writing the
    /// range `offset..offset+length`. Zero-length locks guard no bytes.
    fn blocks_io(&self, open: OpenId, offset: u64, length: u64, write: bool) -> bool {
        let (Some(last), Some(io_last)) = (self.last(), length.checked_sub(1).map(|l| offset.saturating_add(l))) else {
            return false;
        };
        if is_posix(self.open) {
            return false;
        }
        let overlap = self.offset <= io_last && offset <= last;
        // Any shared lock, even the writer's own, makes the range read-only.
        overlap && if self.exclusive { self.open != open } else { write }
    }
}

/// The byte-range locks on one file.
#[derive(Debug, Default)]
pub struct ByteRangeLocks {
    locks: Mutex<Vec<ByteLock>>,
    /// Fast path: I/O checks skip the list (and its mutex) while this is false.
    any: AtomicBool,
}

impl ByteRangeLocks {
    /// Takes a lock, or says why not: [`StateError::LockConflict`] when another lock holds
    /// part of the range, [`StateError::InvalidLockRange`] when it passes the end of the
    /// 64-bit offset space.
    pub fn try_lock(&self, l: ByteLock) -> Result<(), StateError> {
        if l.length > 0 && l.offset.checked_add(l.length - 1).is_none() {
            return Err(StateError::InvalidLockRange);
        }
        let mut locks = lock(&self.locks);
        if locks.iter().any(|e| e.blocks(&l)) {
            return Err(StateError::LockConflict);
        }
        locks.push(l);
        self.any.store(true, Ordering::Release);
        Ok(())
    }

    /// The first lock that refuses `l` (what NLM's TEST reports), if any.
    pub fn conflict(&self, l: &ByteLock) -> Option<ByteLock> {
        lock(&self.locks).iter().find(|e| e.blocks(l)).copied()
    }

    /// Takes a POSIX owner's lock (`l.open` has [`POSIX_OWNER`]): refused with the holder
    /// when another owner's lock conflicts; otherwise it replaces whatever the owner held
    /// in its range, so an upgrade or downgrade is one call, as with `fcntl`.
    pub fn lock_posix(&self, l: ByteLock) -> Result<(), PosixRefusal> {
        if l.length == 0 || l.offset.checked_add(l.length - 1).is_none() {
            return Err(PosixRefusal::Invalid(StateError::InvalidLockRange));
        }
        let mut locks = lock(&self.locks);
        if let Some(holder) = locks.iter().find(|e| e.blocks(&l)) {
            return Err(PosixRefusal::Held(*holder));
        }
        if locks.len() + 2 > MAX_LOCKS_PER_FILE {
            return Err(PosixRefusal::Invalid(StateError::TooManyLocks));
        }
        cut_out(&mut locks, l.open, l.offset, l.length);
        locks.push(l);
        self.any.store(true, Ordering::Release);
        Ok(())
    }

    /// Removes whatever POSIX owner `open` holds in `offset..offset+length`, splitting
    /// locks that reach past it. Unlocking a range not held is not an error (`fcntl`).
    pub fn unlock_posix(&self, open: OpenId, offset: u64, length: u64) {
        let mut locks = lock(&self.locks);
        cut_out(&mut locks, open, offset, length);
        self.any.store(!locks.is_empty(), Ordering::Release);
    }

    /// Whether `open` holds any lock.
    pub fn holds(&self, open: OpenId) -> bool {
        self.any.load(Ordering::Acquire) && lock(&self.locks).iter().any(|l| l.open == open)
    }

    /// Whether no lock is held.
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    /// Removes one lock `open` holds at exactly `offset`/`length`. When an exclusive and a
    /// shared lock are stacked on the same range the exclusive one goes first, so the range
    /// becomes readable by others after one unlock (as on Windows).
    pub fn unlock(&self, open: OpenId, offset: u64, length: u64) -> Result<(), StateError> {
        let mut locks = lock(&self.locks);
        let matches = |e: &ByteLock| e.open == open && e.offset == offset && e.length == length;
        let pos = locks.iter().rposition(|e| matches(e) && e.exclusive).or_else(|| locks.iter().rposition(matches));
        let i = pos.ok_or(StateError::RangeNotLocked)?;
        locks.remove(i);
        self.any.store(!locks.is_empty(), Ordering::Release);
        Ok(())
    }

    /// Whether `open` may read (`write == false`) or write the range given the locks held.
    pub fn io_allowed(&self, open: OpenId, offset: u64, length: u64, write: bool) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return true;
        }
        !lock(&self.locks).iter().any(|e| e.blocks_io(open, offset, length, write))
    }

    /// Drops every lock of `open` (its handle closed).
    pub fn release(&self, open: OpenId) {
        let mut locks = lock(&self.locks);
        locks.retain(|l| l.open != open);
        self.any.store(!locks.is_empty(), Ordering::Release);
    }
}

/// Why a POSIX lock was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PosixRefusal {
    /// Another owner's lock conflicts (NLM reports it to TEST).
    Held(ByteLock),
    /// The range is invalid or the file holds too many locks.
    Invalid(StateError),
}

/// Removes the part of `open`'s locks inside `offset..offset+length` (length 0: nothing),
/// keeping the pieces of each lock before and after it.
fn cut_out(locks: &mut Vec<ByteLock>, open: OpenId, offset: u64, length: u64) {
    let Some(last) = length.checked_sub(1).map(|l| offset.saturating_add(l)) else { return };
    let mut i = 0;
    while i < locks.len() {
        let e = locks[i];
        let Some(e_last) = e.last() else {
            i += 1;
            continue;
        };
        if e.open != open || e_last < offset || e.offset > last {
            i += 1;
            continue;
        }
        locks.swap_remove(i);
        if e.offset < offset {
            locks.push(ByteLock { length: offset - e.offset, ..e });
        }
        if e_last > last {
            locks.push(ByteLock { offset: last + 1, length: e_last - last, ..e });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(open: OpenId, offset: u64, length: u64, exclusive: bool) -> ByteLock {
        ByteLock { open, offset, length, exclusive }
    }

    fn ex(open: OpenId, offset: u64, length: u64) -> ByteLock {
        l(open, offset, length, true)
    }

    #[test]
    fn shared_and_exclusive() {
        let n = ByteRangeLocks::default();
        n.try_lock(ex(1, 0, 100)).unwrap();
        assert_eq!(n.try_lock(l(2, 50, 10, false)), Err(StateError::LockConflict));
        assert_eq!(n.try_lock(l(1, 50, 10, false)), Ok(()), "a shared lock inside the open's own exclusive one");
        n.try_lock(ex(2, 100, 10)).unwrap();
        assert!(!n.io_allowed(2, 10, 1, false));
        assert!(n.io_allowed(1, 10, 1, true));
        assert_eq!(n.unlock(2, 0, 100), Err(StateError::RangeNotLocked));
        n.unlock(1, 0, 100).unwrap();
        n.unlock(1, 50, 10).unwrap();
        n.try_lock(l(2, 50, 10, false)).unwrap();
        n.try_lock(l(3, 50, 10, false)).unwrap();
        assert!(n.io_allowed(3, 50, 5, false));
        assert!(!n.io_allowed(3, 50, 5, true));
        assert_eq!(n.try_lock(ex(4, 55, 1)), Err(StateError::LockConflict));
    }

    #[test]
    fn unlock_must_match_exactly() {
        let n = ByteRangeLocks::default();
        n.try_lock(ex(1, 10, 10)).unwrap();
        assert_eq!(n.unlock(1, 10, 5), Err(StateError::RangeNotLocked));
        assert_eq!(n.unlock(1, 11, 9), Err(StateError::RangeNotLocked));
        assert_eq!(n.unlock(2, 10, 10), Err(StateError::RangeNotLocked), "another open's lock");
        n.unlock(1, 10, 10).unwrap();
        assert_eq!(n.unlock(1, 10, 10), Err(StateError::RangeNotLocked));
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
                let n = ByteRangeLocks::default();
                n.try_lock(ex(1, o1, l1)).unwrap();
                let r = n.try_lock(ex(second_open, o2, l2));
                assert_eq!(r.is_err(), conflict, "{o1}/{l1} + {o2}/{l2} open {second_open}");
            }
        }
        let n = ByteRangeLocks::default();
        n.try_lock(ex(1, 10, 0)).unwrap();
        assert!(n.io_allowed(2, 0, 100, true), "a zero-length lock guards no bytes");
    }

    #[test]
    fn ranges_at_the_top() {
        let n = ByteRangeLocks::default();
        n.try_lock(ex(1, u64::MAX, 1)).unwrap();
        assert_eq!(n.try_lock(ex(2, u64::MAX, 1)), Err(StateError::LockConflict));
        assert_eq!(n.try_lock(ex(2, u64::MAX, 2)), Err(StateError::InvalidLockRange));
        n.try_lock(ex(2, u64::MAX, 0)).unwrap();
        assert!(!n.io_allowed(2, u64::MAX, 1, false));
    }

    #[test]
    fn unlock_removes_exclusive_before_shared() {
        let n = ByteRangeLocks::default();
        n.try_lock(ex(1, 10, 10)).unwrap();
        n.try_lock(l(1, 10, 10, false)).unwrap();
        // The same open may not stack a second exclusive lock.
        assert_eq!(n.try_lock(ex(1, 10, 10)), Err(StateError::LockConflict));
        n.unlock(1, 10, 10).unwrap();
        n.try_lock(l(2, 5, 10, false)).unwrap();
        assert!(!n.io_allowed(1, 10, 1, true), "a shared lock stops even its owner writing");
    }

    #[test]
    fn io_against_other_holders() {
        // (lock exclusive?, I/O by the owner?, write?, allowed)
        let cases = [
            (true, true, false, true),
            (true, true, true, true),
            (true, false, false, false),
            (true, false, true, false),
            (false, true, false, true),
            (false, true, true, false),
            (false, false, false, true),
            (false, false, true, false),
        ];
        for (exclusive, own, write, allowed) in cases {
            let n = ByteRangeLocks::default();
            n.try_lock(l(1, 100, 10, exclusive)).unwrap();
            let who = if own { 1 } else { 2 };
            assert_eq!(n.io_allowed(who, 105, 10, write), allowed, "excl {exclusive} own {own} write {write}");
            assert!(n.io_allowed(who, 110, 10, write), "past the range");
            assert!(n.io_allowed(who, 90, 10, write), "before the range");
        }
    }

    fn posix(owner: u64, offset: u64, length: u64, exclusive: bool) -> ByteLock {
        l(POSIX_OWNER | owner, offset, length, exclusive)
    }

    #[test]
    fn a_posix_owner_replaces_and_splits_its_own_locks() {
        let n = ByteRangeLocks::default();
        n.lock_posix(posix(1, 0, 100, false)).unwrap();
        n.lock_posix(posix(1, 40, 20, true)).expect("an upgrade of part of its own lock");
        assert_eq!(n.lock_posix(posix(2, 0, 10, false)), Ok(()), "shared beside shared");
        assert_eq!(n.lock_posix(posix(2, 50, 1, false)), Err(PosixRefusal::Held(posix(1, 40, 20, true))));
        assert!(n.lock_posix(posix(2, 45, 5, true)).is_err());
        n.unlock_posix(POSIX_OWNER | 1, 45, 5);
        n.lock_posix(posix(2, 45, 5, true)).expect("the hole owner 1's unlock left");
        assert!(n.lock_posix(posix(2, 44, 2, true)).is_err(), "owner 1 still holds 44");
        n.unlock_posix(POSIX_OWNER | 1, 0, u64::MAX);
        assert!(n.conflict(&posix(3, 10, 35, true)).is_none(), "owner 1 holds nothing now");
        assert_eq!(n.conflict(&posix(3, 10, 90, true)), Some(posix(2, 45, 5, true)));
    }

    #[test]
    fn posix_and_smb_locks_refuse_each_other_but_posix_locks_are_advisory() {
        let n = ByteRangeLocks::default();
        n.lock_posix(posix(1, 0, 100, true)).unwrap();
        assert_eq!(n.try_lock(ex(7, 50, 10)), Err(StateError::LockConflict));
        assert_eq!(n.try_lock(l(7, 50, 10, false)), Err(StateError::LockConflict));
        assert!(n.io_allowed(7, 0, 100, true), "NLM locks do not stop I/O");
        n.try_lock(ex(7, 200, 10)).unwrap();
        assert_eq!(n.lock_posix(posix(1, 205, 1, false)), Err(PosixRefusal::Held(ex(7, 200, 10))));
        assert!(!n.io_allowed(POSIX_OWNER | 1, 205, 1, false), "an SMB exclusive lock stops everyone else's reads");
        assert_eq!(n.lock_posix(posix(1, 0, 0, true)), Err(PosixRefusal::Invalid(StateError::InvalidLockRange)));
    }

    #[test]
    fn release_drops_an_opens_locks() {
        let n = ByteRangeLocks::default();
        n.try_lock(ex(1, 0, 10)).unwrap();
        n.try_lock(ex(2, 20, 10)).unwrap();
        n.release(1);
        n.try_lock(ex(3, 0, 10)).unwrap();
        assert_eq!(n.try_lock(ex(3, 20, 10)), Err(StateError::LockConflict));
    }
}
