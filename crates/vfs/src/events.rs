//! Changes a backend sees happen to its share from outside Braid (another process on the
//! server, a program writing under the share's directory), delivered to the protocol
//! servers so that change notifications, directory lease breaks and caches stay true.
//!
//! Changes made through Braid never come through here: the protocol server that makes them
//! reports them itself, with who made them (a lease key may exempt its own holder).

use std::sync::Arc;
use std::time::Duration;

use crate::SharePath;

/// What happened to a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// The name appeared.
    Added,
    /// The name went away.
    Removed,
    /// The file or directory at the name changed (see [`Change::what`]).
    Modified,
    /// Rename: the old name (the matching `RenamedTo` follows when the new name is inside
    /// the share; a rename out of the share is a `Removed`).
    RenamedFrom,
    /// Rename: the new name.
    RenamedTo,
}

/// Which properties changed, as bits (several at once).
pub mod what {
    /// The name itself (added, removed, renamed).
    pub const NAME: u32 = 1 << 0;
    /// DOS attributes, mode or ownership.
    pub const ATTRIBUTES: u32 = 1 << 1;
    /// End of file or allocation size.
    pub const SIZE: u32 = 1 << 2;
    /// Last write time (data changed).
    pub const LAST_WRITE: u32 = 1 << 3;
    /// Last access time.
    pub const LAST_ACCESS: u32 = 1 << 4;
    /// Creation time.
    pub const CREATION: u32 = 1 << 5;
    /// Extended attributes.
    pub const EA: u32 = 1 << 6;
    /// Security descriptor.
    pub const SECURITY: u32 = 1 << 7;
    /// Named streams (names, sizes or data).
    pub const STREAMS: u32 = 1 << 8;
    /// Changes were lost (the backend's event queue overflowed): anything at or beneath
    /// the change's path may have changed; watchers must rescan (SMB answers
    /// STATUS_NOTIFY_ENUM_DIR).
    pub const LOST: u32 = 1 << 31;
}

/// One change seen by a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The name that changed, relative to the share root (on-disk spelling).
    pub path: SharePath,
    /// What happened to it.
    pub kind: ChangeKind,
    /// Whether the name is (or was) a directory.
    pub is_dir: bool,
    /// [`what`] bits: which properties changed (`NAME` for added, removed, renamed).
    pub what: u32,
}

/// Receives a backend's outside changes; called from the backend's own thread, so it must
/// not block (queue the work).
pub type ChangeSink = Arc<dyn Fn(&Change) + Send + Sync>;

/// How a backend learns of changes made outside Braid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// It does not (and caches nothing that could go stale): the memory backend.
    None,
    /// The file system reports them as they happen (inotify); the sink gets each one.
    Events,
    /// The file system cannot report them (FUSE, network file systems): cached metadata
    /// is trusted for at most this long, and no sink events come.
    Bounded(Duration),
}

/// Hits and misses of a backend's metadata cache, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that went to the file system.
    pub misses: u64,
    /// Entries dropped because something changed.
    pub invalidations: u64,
    /// Entries held now.
    pub entries: u64,
    /// Bytes held now (approximate).
    pub bytes: u64,
}
