//! What a protocol that holds no opens (NFSv3 is stateless) asks of the file state before
//! it acts on a file, why the state may refuse, and the hook through which the protocol
//! that caches (SMB's oplocks and leases) makes way and hears of changes.

use crate::{Access, FileKey};

pub type BoxFut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What is about to be done to a file by a protocol without opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// Read data: write caching elsewhere must be flushed first.
    Read,
    /// Write data: write caching is flushed, read and handle caching end.
    Write,
    /// Cut the file's size: everything cached ends.
    Truncate,
    /// Remove or rename the name: cached handles must be closed first.
    Remove,
    Rename,
}

impl Intent {
    /// The access an open doing this would need (what share modes are checked against).
    pub fn access(self) -> Access {
        match self {
            Intent::Read => Access::READ_DATA,
            Intent::Write | Intent::Truncate => Access::WRITE_DATA,
            Intent::Remove | Intent::Rename => Access::DELETE,
        }
    }
}

/// Why the file state refuses an operation for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// An open's share mode denies it.
    ShareMode,
    /// Breaks did not complete in time.
    Busy,
    /// Another holder's byte-range lock covers the range read or written.
    Locked,
}

/// What the caching protocol is asked to settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// A share mode refuses the operation: grants that keep handles open only for caching
    /// are broken, so their holders may close them.
    SharingViolation,
    /// The grants that conflict with this operation are broken (waiting for
    /// acknowledgments where cached writes must be flushed first).
    Intent(Intent),
}

/// How a protocol that caches file state (SMB) makes way for another protocol's
/// operation, and hears of the changes that protocol made. Registered on the file table
/// with [`crate::FileTable::set_caching`].
pub trait CachingHooks: Send + Sync + std::fmt::Debug {
    /// Breaks what `why` calls for on `key` and waits, bounded, until no break is pending;
    /// [`Refusal::Busy`] when the breaks did not complete in time.
    fn settle<'a>(&'a self, key: FileKey, why: Settle) -> BoxFut<'a, Result<(), Refusal>>;
    /// After another protocol changed something: change notify and directory leases hear
    /// of it. Resolves once what they send is written, so the other protocol answers after.
    fn changed<'a>(&'a self, share: usize, change: &'a braid_vfs::Change) -> BoxFut<'a, ()>;
}
