//! The table of open and locked files by identity, the state each file's opens and lock
//! owners share, and how a protocol without opens reaches it ([`Files`]).

use std::collections::HashSet;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tokio::sync::Notify;

use crate::byte_locks::PosixRefusal;
use crate::intent::{BoxFut, CachingHooks, Intent, Refusal, Settle};
use crate::shards::{lock, Sharded};
use crate::{Access, ByteLock, ByteRangeLocks, ShareClaims, ShareMode, StateError};

/// Identifies a file across opens: the export (share) index and the backend's file id.
pub type FileKey = (usize, u64);

/// Identifies one open of a file; the protocol server assigns them, unique server-wide.
pub type OpenId = u64;

/// The protocol-neutral state of one file, which every protocol reaches: share-mode
/// claims, byte-range locks, delete-pending, and the wake-up for blocked lock requests.
#[derive(Debug, Default)]
pub struct FileCore {
    claims: Mutex<ShareClaims>,
    locks: ByteRangeLocks,
    /// Delete-pending (MS-FSA 2.1.5.14.3): the file goes when its last open closes, and
    /// no new open may reach it meanwhile.
    delete_pending: AtomicBool,
    /// Woken whenever a lock or an open is released: blocked lock requests of every
    /// protocol (SMB's pending LOCKs, NLM's blocked LOCKs) wait on it.
    pub unlocked: Notify,
}

impl FileCore {
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

    /// Drops an open's claim and byte-range locks and wakes blocked lock requests; returns
    /// whether it was the last open.
    pub fn release(&self, open: OpenId) -> bool {
        let last = lock(&self.claims).release(open);
        self.locks.release(open);
        self.unlocked.notify_waiters();
        last
    }

    /// Takes a byte-range lock (see [`ByteRangeLocks::try_lock`]).
    pub fn try_lock(&self, l: ByteLock) -> Result<(), StateError> {
        self.locks.try_lock(l)
    }

    /// Removes a byte-range lock (see [`ByteRangeLocks::unlock`]) and wakes blocked lock
    /// requests.
    pub fn unlock(&self, open: OpenId, offset: u64, length: u64) -> Result<(), StateError> {
        self.locks.unlock(open, offset, length)?;
        self.unlocked.notify_waiters();
        Ok(())
    }

    /// Takes a POSIX owner's lock (see [`ByteRangeLocks::lock_posix`]).
    pub fn lock_posix(&self, l: ByteLock) -> Result<(), PosixRefusal> {
        self.locks.lock_posix(l)
    }

    /// Removes part of a POSIX owner's locks and wakes blocked lock requests.
    pub fn unlock_posix(&self, open: OpenId, offset: u64, length: u64) {
        self.locks.unlock_posix(open, offset, length);
        self.unlocked.notify_waiters();
    }

    /// The first lock that refuses `l`, if any.
    pub fn conflict(&self, l: &ByteLock) -> Option<ByteLock> {
        self.locks.conflict(l)
    }

    /// Whether `open` holds any byte-range lock.
    pub fn holds(&self, open: OpenId) -> bool {
        self.locks.holds(open)
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

    /// Whether nothing holds the file: no open and no lock.
    fn unused(&self) -> bool {
        lock(&self.claims).count_except(|_, _| false) == 0 && self.locks.is_empty()
    }
}

/// State of one file shared by all its opens: the protocol-neutral [`FileCore`], and `X`,
/// what the protocol that opens files keeps per file beside it (SMB: oplocks, its write
/// queue, lock sequences); the node derefs to `X`.
#[derive(Debug, Default)]
pub struct FileNode<X> {
    core: Arc<FileCore>,
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
    /// The protocol-neutral state.
    pub fn core(&self) -> &Arc<FileCore> {
        &self.core
    }

    pub fn claim(&self, open: OpenId, access: Access, share: ShareMode) -> Result<(), StateError> {
        self.core.claim(open, access, share)
    }

    pub fn check_share(&self, access: Access, share: ShareMode) -> Result<(), StateError> {
        self.core.check_share(access, share)
    }

    pub fn other_opens(&self, skip: impl Fn(OpenId, Access) -> bool) -> usize {
        self.core.other_opens(skip)
    }

    pub fn release(&self, open: OpenId) -> bool {
        self.core.release(open)
    }

    pub fn try_lock(&self, l: ByteLock) -> Result<(), StateError> {
        self.core.try_lock(l)
    }

    pub fn unlock(&self, open: OpenId, offset: u64, length: u64) -> Result<(), StateError> {
        self.core.unlock(open, offset, length)
    }

    pub fn io_allowed(&self, open: OpenId, offset: u64, length: u64, write: bool) -> bool {
        self.core.io_allowed(open, offset, length, write)
    }

    pub fn is_delete_pending(&self) -> bool {
        self.core.is_delete_pending()
    }

    pub fn set_delete_pending(&self, pending: bool) {
        self.core.set_delete_pending(pending)
    }
}

/// What releasing an open left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// No open of the file remains (its node leaves the table unless locks remain).
    pub last: bool,
    /// Delete was pending when the open went (with `last`: the file must be removed now).
    pub delete_pending: bool,
}

/// The grace period after a restart: lock holders of the previous run reclaim their locks,
/// and nobody else may take new ones on the files they held.
#[derive(Debug, Default)]
struct Grace {
    until: Option<Instant>,
    files: HashSet<FileKey>,
}

/// All files currently open or locked, keyed by [`FileKey`], sharded so opens of different
/// files do not contend. The binary builds one and hands it to every protocol server; a
/// protocol that caches (SMB) registers how its grants are broken ([`CachingHooks`]).
#[derive(Debug)]
pub struct FileTable<X> {
    nodes: Sharded<FileKey, Arc<FileNode<X>>>,
    caching: OnceLock<Arc<dyn CachingHooks>>,
    grace: Mutex<Grace>,
    /// Whether a grace period may be running: lock requests look at `grace` (a mutex
    /// every file shares) only while it is.
    in_grace: AtomicBool,
}

impl<X: Default> Default for FileTable<X> {
    fn default() -> Self {
        FileTable { nodes: Sharded::new(32), caching: OnceLock::new(), grace: Mutex::default(), in_grace: AtomicBool::new(false) }
    }
}

impl<X: Default> FileTable<X> {
    /// The node for `key`, created if absent.
    pub fn node(&self, key: FileKey) -> Arc<FileNode<X>> {
        self.nodes.with(&key, |m| m.entry(key).or_default().clone())
    }
}

impl<X> FileTable<X> {
    /// The node for `key` if some open or lock holds it.
    pub fn existing(&self, key: FileKey) -> Option<Arc<FileNode<X>>> {
        self.nodes.with(&key, |m| m.get(&key).cloned())
    }

    /// Files held open or locked now (stateful fuzzing checks that the table empties).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Releases `open` of file `key`: drops its claim and locks, runs `after` (the protocol
    /// server's own release of the open) while no other open of the file can come or go,
    /// and drops the node when no open or lock remains.
    pub fn release(&self, key: FileKey, open: OpenId, after: impl FnOnce(&FileNode<X>)) -> Released {
        self.nodes.with(&key, |m| {
            let Some(n) = m.get(&key).cloned() else { return Released { last: true, delete_pending: false } };
            let last = n.release(open);
            after(&n);
            if last && n.core.locks.is_empty() {
                m.remove(&key);
            }
            Released { last, delete_pending: n.is_delete_pending() }
        })
    }

    /// Drops the node of `key` if no open or lock holds it any more (after a lock owner
    /// that holds no open unlocked).
    pub fn forget_if_unused(&self, key: FileKey) {
        self.nodes.with(&key, |m| {
            if m.get(&key).is_some_and(|n| n.core.unused()) {
                // A request waiting on this node looks again, at the table's new one.
                if let Some(n) = m.remove(&key) {
                    n.core.unlocked.notify_waiters();
                }
            }
        })
    }

    /// Registers how the caching protocol's grants are broken; once, at start.
    pub fn set_caching(&self, c: Arc<dyn CachingHooks>) {
        if self.caching.set(c).is_err() {
            tracing::warn!("a second caching protocol registered with the file table; ignored");
        }
    }

    fn caching(&self) -> Option<&Arc<dyn CachingHooks>> {
        self.caching.get()
    }

    /// Starts the grace period: until `until`, new locks on `files` (those locked before the
    /// restart) are refused to all but reclaims.
    pub fn begin_grace(&self, until: Instant, files: impl IntoIterator<Item = FileKey>) {
        *lock(&self.grace) = Grace { until: Some(until), files: files.into_iter().collect() };
        self.in_grace.store(true, Ordering::Release);
    }

    /// When the grace period protecting `key` ends, if it protects `key` now.
    pub fn grace_for(&self, key: FileKey) -> Option<Instant> {
        if !self.in_grace.load(Ordering::Acquire) {
            return None;
        }
        let mut g = lock(&self.grace);
        let until = g.until?;
        if Instant::now() >= until {
            *g = Grace::default();
            self.in_grace.store(false, Ordering::Release);
            return None;
        }
        g.files.contains(&key).then_some(until)
    }

    /// When the grace period ends, if one is running.
    pub fn grace_until(&self) -> Option<Instant> {
        if !self.in_grace.load(Ordering::Acquire) {
            return None;
        }
        let g = lock(&self.grace);
        g.until.filter(|u| Instant::now() < *u)
    }
}

/// The file table as a protocol that holds no opens of its own (NFSv3 with NLM) reaches it,
/// whatever the opening protocol keeps per file.
pub trait Files: Send + Sync + std::fmt::Debug {
    /// The protocol-neutral state of `key`, created if absent.
    fn core(&self, key: FileKey) -> Arc<FileCore>;
    /// The protocol-neutral state of `key` if some open or lock holds it.
    fn existing_core(&self, key: FileKey) -> Option<Arc<FileCore>>;
    /// Drops the node of `key` if nothing holds it.
    fn forget_if_unused(&self, key: FileKey);
    /// Before `intent` on `key` (and, for reads and writes, the range `io`): checks share
    /// modes, breaks the caching grants that conflict through the registered
    /// [`CachingHooks`], and checks byte-range locks.
    fn prepare<'a>(&'a self, key: FileKey, intent: Intent, io: Option<(u64, u64)>) -> BoxFut<'a, Result<(), Refusal>>;
    /// After a change: the caching protocol's watchers and directory leases hear of it.
    fn changed<'a>(&'a self, share: usize, change: &'a braid_vfs::Change) -> BoxFut<'a, ()>;
    /// See [`FileTable::begin_grace`].
    fn begin_grace(&self, until: Instant, files: Vec<FileKey>);
    /// See [`FileTable::grace_until`].
    fn grace_until(&self) -> Option<Instant>;
}

impl<X: Default + Send + Sync + std::fmt::Debug + 'static> Files for FileTable<X> {
    fn core(&self, key: FileKey) -> Arc<FileCore> {
        self.node(key).core.clone()
    }

    fn existing_core(&self, key: FileKey) -> Option<Arc<FileCore>> {
        self.existing(key).map(|n| n.core.clone())
    }

    fn forget_if_unused(&self, key: FileKey) {
        FileTable::forget_if_unused(self, key)
    }

    fn prepare<'a>(&'a self, key: FileKey, intent: Intent, io: Option<(u64, u64)>) -> BoxFut<'a, Result<(), Refusal>> {
        Box::pin(prepare(self, key, intent, io))
    }

    fn changed<'a>(&'a self, share: usize, change: &'a braid_vfs::Change) -> BoxFut<'a, ()> {
        match self.caching() {
            Some(c) => c.changed(share, change),
            None => Box::pin(std::future::ready(())),
        }
    }

    fn begin_grace(&self, until: Instant, files: Vec<FileKey>) {
        FileTable::begin_grace(self, until, files)
    }

    fn grace_until(&self) -> Option<Instant> {
        FileTable::grace_until(self)
    }
}

/// The lock owner NFS reads and writes are checked as: no open or lock owner has it, so
/// every other holder's exclusive lock (and shared lock, for writes) stops them.
pub const STATELESS_IO: OpenId = 1 << 61;

async fn prepare<X>(t: &FileTable<X>, key: FileKey, intent: Intent, io: Option<(u64, u64)>) -> Result<(), Refusal> {
    let Some(node) = t.existing(key) else { return Ok(()) };
    let needs = intent.access();
    if node.check_share(needs, ShareMode::ALL).is_err() {
        // Clients may keep handles open only because they cache them: ask them to close
        // (as SMB does before failing an open), then look again.
        if let Some(c) = t.caching() {
            c.settle(key, Settle::SharingViolation).await?;
        }
        if t.existing(key).is_some_and(|n| n.check_share(needs, ShareMode::ALL).is_err()) {
            return Err(Refusal::ShareMode);
        }
    }
    if let Some(c) = t.caching() {
        c.settle(key, Settle::Intent(intent)).await?;
    }
    match io {
        Some((offset, length)) if !node.io_allowed(STATELESS_IO, offset, length, intent != Intent::Read) => Err(Refusal::Locked),
        _ => Ok(()),
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
    fn a_node_with_locks_outlives_its_last_open() {
        let t = FileTable::<()>::default();
        let n = t.node((0, 7));
        n.claim(1, Access::READ_DATA, ShareMode::ALL).unwrap();
        let owner = crate::POSIX_OWNER | 5;
        n.core().lock_posix(ByteLock { open: owner, offset: 0, length: 10, exclusive: true }).unwrap();
        assert_eq!(t.release((0, 7), 1, |_| ()), Released { last: true, delete_pending: false });
        let kept = t.existing((0, 7)).expect("the NLM lock keeps the node");
        assert!(kept.core().conflict(&ByteLock { open: 2, offset: 5, length: 1, exclusive: false }).is_some());
        t.forget_if_unused((0, 7));
        assert!(t.existing((0, 7)).is_some(), "still locked");
        kept.core().unlock_posix(owner, 0, u64::MAX);
        t.forget_if_unused((0, 7));
        assert!(t.existing((0, 7)).is_none());
    }

    #[test]
    fn grace_protects_the_files_named_until_it_ends() {
        let t = FileTable::<()>::default();
        assert_eq!(t.grace_for((0, 1)), None);
        let until = Instant::now() + std::time::Duration::from_secs(60);
        t.begin_grace(until, [(0, 1)]);
        assert_eq!(t.grace_for((0, 1)), Some(until));
        assert_eq!(t.grace_for((0, 2)), None, "a file nobody held a lock on");
        assert_eq!(t.grace_until(), Some(until));
        t.begin_grace(Instant::now(), [(0, 1)]);
        assert_eq!(t.grace_for((0, 1)), None, "over");
        assert_eq!(t.grace_until(), None);
    }

    #[tokio::test]
    async fn prepare_without_a_caching_protocol_checks_share_modes_and_locks() {
        let t: Arc<dyn Files> = Arc::new(FileTable::<()>::default());
        assert_eq!(t.prepare((0, 3), Intent::Write, Some((0, 10))).await, Ok(()));
        let c = t.core((0, 3));
        c.claim(1, Access::WRITE_DATA, ShareMode::READ).unwrap();
        assert_eq!(t.prepare((0, 3), Intent::Read, Some((0, 10))).await, Ok(()));
        assert_eq!(t.prepare((0, 3), Intent::Write, None).await, Err(Refusal::ShareMode));
        c.try_lock(ByteLock { open: 1, offset: 0, length: 10, exclusive: false }).unwrap();
        assert_eq!(t.prepare((0, 3), Intent::Read, Some((5, 10))).await, Ok(()), "a shared lock lets others read");
        c.release(1);
        c.claim(2, Access::WRITE_DATA, ShareMode::ALL).unwrap();
        c.try_lock(ByteLock { open: 2, offset: 0, length: 10, exclusive: true }).unwrap();
        assert_eq!(t.prepare((0, 3), Intent::Read, Some((5, 10))).await, Err(Refusal::Locked));
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
