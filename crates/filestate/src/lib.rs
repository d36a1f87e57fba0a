//! Protocol-neutral state of open files, shared by every protocol server that opens files
//! (SMB now, NFSv3 next): the table of open files by file identity, share-mode checks
//! (MS-FSA 2.1.5.1.2), byte-range locks (MS-FSA 2.1.5.7, 2.1.4.10) and delete-pending.
//!
//! Nothing here does I/O or waits: operations answer what must happen ("proceed", or a
//! [`StateError`]) and the protocol server turns that into its own status codes and, where
//! a request must wait (a blocking lock), does the waiting itself.

mod access;
mod byte_locks;
mod error;
mod shards;
mod share;
mod table;

pub use access::{is_stat_open, Access, ShareMode};
pub use byte_locks::{ByteLock, ByteRangeLocks};
pub use error::StateError;
pub use share::ShareClaims;
pub use table::{FileKey, FileNode, FileTable, OpenId, Released};
