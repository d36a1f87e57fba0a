//! Protocol-neutral state of open files, shared by every protocol server that opens files
//! (SMB's opens, NFSv3's reads and writes, NLM's locks): the table of open files by file identity, share-mode checks
//! (MS-FSA 2.1.5.1.2), byte-range locks (MS-FSA 2.1.5.7, 2.1.4.10), delete-pending,
//! caching grants with their break rules (MS-FSA 2.1.4.12), onto which SMB oplocks and
//! leases map, and change events for directory watchers.
//!
//! Nothing here does I/O or waits: operations answer what must happen ("proceed", a
//! [`StateError`], or "these holders must be broken to these levels, then retry") and the
//! protocol server turns that into its own status codes and messages and, where a request
//! must wait, does the waiting itself.

mod access;
mod byte_locks;
mod changes;
mod error;
mod grants;
mod intent;
mod shards;
mod share;
mod table;

pub use access::{is_stat_open, Access, ShareMode};
pub use byte_locks::{is_posix, ByteLock, ByteRangeLocks, PosixRefusal, MAX_LOCKS_PER_FILE, POSIX_OWNER};
pub use changes::{ChangeAction, ChangeEvent, ChangeFilter, Taken, TooManyWatchers, Watcher, Watchers, MAX_QUEUED};
pub use error::StateError;
pub use grants::{BreakPlan, Caching, GrantEvent, GrantTypes, Grants, Lease, LeaseRequest, Notice, Requester};
pub use intent::{BoxFut, CachingHooks, Intent, Refusal, Settle};
pub use share::ShareClaims;
pub use table::{FileCore, FileKey, FileNode, FileTable, Files, OpenId, Released, STATELESS_IO};
