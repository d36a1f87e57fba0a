//! The seam between NFS and the other protocols serving the same files: before NFS reads,
//! writes, truncates, removes or renames a file, the other protocols' caching (SMB oplocks
//! and leases) must be broken and their share modes respected; after NFS changed
//! something, their watchers (change notify, directory leases) must hear of it. The SMB
//! server implements this; a server with NFS alone passes [`Alone`].

pub type BoxFut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What NFS must do to a file other protocols may hold open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Read,
    Write,
    Truncate,
    Remove,
    Rename,
}

/// Why another protocol's state refuses an operation for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    ShareMode,
    Busy,
}

pub trait Coordinator: Send + Sync + std::fmt::Debug {
    /// Before `intent` on the file with `file_id` in share `share` (the share's index in the
    /// config): breaks the caching other protocols hold that conflicts (waiting, bounded, for
    /// acknowledgments) and checks their share modes.
    fn prepare<'a>(&'a self, share: usize, file_id: u64, intent: Intent) -> BoxFut<'a, Result<(), Refusal>>;
    /// After NFS changed something: tell the other protocols (change notify, directory
    /// leases). Resolves once what they send about it (lease breaks) is written, so the
    /// NFS reply comes after it.
    fn changed<'a>(&'a self, share: usize, change: &'a braid_vfs::Change) -> BoxFut<'a, ()>;
}

/// For a server with no other protocol.
#[derive(Debug)]
pub struct Alone;

impl Coordinator for Alone {
    fn prepare<'a>(&'a self, _share: usize, _file_id: u64, _intent: Intent) -> BoxFut<'a, Result<(), Refusal>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn changed<'a>(&'a self, _share: usize, _change: &'a braid_vfs::Change) -> BoxFut<'a, ()> {
        Box::pin(std::future::ready(()))
    }
}
