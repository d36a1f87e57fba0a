//! The state of persistent handles (MS-SMB2 3.3.1.10 Open.IsPersistent, on continuously
//! available shares), kept where a crash of the server cannot lose it: every change is
//! committed durably before the client hears of it, and a restarted server loads the
//! records and rebuilds the opens from them.
//!
//! The records are protocol-neutral (a path inside a share, access and share bits, a lease
//! or oplock level, byte-range locks, the owner's name); the server maps them onto its own
//! state. [`HandleStore`] is the seam: [`RedbStore`] keeps them in one local redb file
//! (docs/decisions.md, "Persistent handles: redb"); a replicated engine could stand in.

use std::fmt::Debug;

use serde::{Deserialize, Serialize};

mod redb_store;

pub use redb_store::RedbStore;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("handle store {path}: {message}")]
    Storage { path: String, message: String },
    #[error("handle record {0}: cannot encode: {1}")]
    Encode(u64, String),
}

/// A lease as held by a persistent open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub client_guid: [u8; 16],
    pub key: [u8; 16],
    /// Caching bits (R = 1, H = 2, W = 4).
    pub state: u32,
    pub epoch: u16,
    /// Granted through a v2 context (breaks carry the epoch).
    pub v2: bool,
    pub parent: Option<[u8; 16]>,
}

/// One byte-range lock of a persistent open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
}

/// Everything needed to rebuild one persistent open after a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandleRecord {
    /// FileId.Persistent, the record's key.
    pub persistent_id: u64,
    pub volatile_id: u64,
    pub share: String,
    /// The path inside the share, '\\'-separated as SMB names it.
    pub path: String,
    /// The file's id within the share (inode number on a local file system).
    pub file_id: u64,
    /// The backend's persistent token of the file (a kernel file handle, which carries the
    /// inode's generation), if it offers one: tells a replaced file from the same one.
    pub token: Option<Vec<u8>>,
    pub desired_access: u32,
    pub share_access: u32,
    pub lease: Option<LeaseRecord>,
    /// The oplock level held when there is no lease (SMB2_OPLOCK_LEVEL_*).
    pub oplock_level: u8,
    pub locks: Vec<LockRecord>,
    pub create_guid: [u8; 16],
    pub app_instance: Option<[u8; 16]>,
    /// The owner's user name (only the same user may reclaim the open).
    pub user: String,
    pub timeout_ms: u64,
    pub delete_on_close: bool,
    /// The CreateAction of the CREATE that opened it.
    pub create_action: u32,
    /// Create options kept with the open (FileModeInformation bits).
    pub mode: u64,
}

/// One change to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Put(Box<HandleRecord>),
    Remove(u64),
}

/// Where persistent handle records live. Each call returns once the change is durable.
pub trait HandleStore: Send + Sync + Debug {
    /// Applies `changes` in order, all or nothing: several opens' changes share one durable
    /// commit (group commit). The default applies them one by one.
    fn apply(&self, changes: &[Change]) -> Result<(), StoreError> {
        for c in changes {
            match c {
                Change::Put(r) => self.put(r)?,
                Change::Remove(id) => self.remove(*id)?,
            }
        }
        Ok(())
    }
    /// Adds (or replaces) a record.
    fn put(&self, rec: &HandleRecord) -> Result<(), StoreError>;
    /// Replaces a record whose open changed (same as `put` unless a store tells them apart).
    fn update(&self, rec: &HandleRecord) -> Result<(), StoreError> {
        self.put(rec)
    }
    /// Drops the record of a closed open (nothing if there is none).
    fn remove(&self, persistent_id: u64) -> Result<(), StoreError>;
    /// Every record; one that cannot be read is left out (and logged).
    fn load_all(&self) -> Result<Vec<HandleRecord>, StoreError>;
}

/// The store file's name inside the state directory.
pub const FILE_NAME: &str = "handles.redb";
