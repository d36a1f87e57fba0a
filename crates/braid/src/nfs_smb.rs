//! SMB's side of NFS's [`nfs_server::Coordinator`]: an NFS operation on a file meets SMB's
//! opens, oplocks and leases (`smb_server::SmbState::prepare_foreign`), and NFS changes
//! reach SMB's change notify and directory leases. The two server crates do not know each
//! other; this binary, which links both, joins them.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use braid_vfs::{what, Change, ChangeKind, SharePath};
use nfs_server::{BoxFut, Coordinator, Intent, Refusal};
use smb_server::{ForeignIntent, ForeignRefusal, SmbState};

/// How often one file's data changes by NFS WRITEs are announced. SMB announces size and
/// write-time changes when the writer closes; NFS never closes, so a stream of WRITEs is
/// told at most this often per file rather than once per WRITE.
const WRITE_ANNOUNCE_EVERY: Duration = Duration::from_secs(1);
/// Files whose last announcement is remembered, per shard; past it the shard starts afresh.
const MAX_REMEMBERED: usize = 256;
/// Shards of that memory, so WRITEs to different files do not meet on one lock.
const SHARDS: usize = 16;

#[derive(Debug)]
pub struct SmbCoordinator {
    smb: SmbState,
    /// When a file's data change was last announced, by a hash of (share, path): a
    /// collision only delays another file's announcement by at most a second.
    announced: Vec<Mutex<HashMap<u64, Instant>>>,
    hasher: RandomState,
}

impl SmbCoordinator {
    pub fn new(smb: SmbState) -> Self {
        let announced = (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect();
        SmbCoordinator { smb, announced, hasher: RandomState::new() }
    }

    /// Whether a data change of `path` was announced too recently to announce again.
    fn recently_announced(&self, share: usize, path: &SharePath) -> bool {
        let now = Instant::now();
        let key = self.hasher.hash_one((share, path));
        let mut seen = self.announced[key as usize % SHARDS].lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        match seen.get_mut(&key) {
            Some(at) if now.duration_since(*at) < WRITE_ANNOUNCE_EVERY => true,
            Some(at) => {
                *at = now;
                false
            }
            None => {
                seen.insert(key, now);
                false
            }
        }
    }
}

fn foreign(intent: Intent) -> ForeignIntent {
    match intent {
        Intent::Read => ForeignIntent::Read,
        Intent::Write => ForeignIntent::Write,
        Intent::Truncate => ForeignIntent::Truncate,
        Intent::Remove => ForeignIntent::Remove,
        Intent::Rename => ForeignIntent::Rename,
    }
}

impl Coordinator for SmbCoordinator {
    fn prepare<'a>(&'a self, share: usize, file_id: u64, intent: Intent) -> BoxFut<'a, Result<(), Refusal>> {
        Box::pin(async move {
            self.smb.prepare_foreign(share, file_id, foreign(intent)).await.map_err(|r| match r {
                ForeignRefusal::ShareMode => Refusal::ShareMode,
                ForeignRefusal::Busy => Refusal::Busy,
            })
        })
    }

    fn changed<'a>(&'a self, share: usize, change: &'a Change) -> BoxFut<'a, ()> {
        let data_only = change.kind == ChangeKind::Modified && change.what & !(what::SIZE | what::LAST_WRITE) == 0;
        if data_only && self.recently_announced(share, &change.path) {
            return Box::pin(std::future::ready(()));
        }
        Box::pin(self.smb.foreign_changed(share, change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb_server::{ServerConfig, ShareConfig, ShareStorage};

    fn coordinator() -> SmbCoordinator {
        let share = ShareConfig::new("data", ShareStorage::Memory { capacity: 1 << 20 });
        let server = smb_server::Server::new(ServerConfig { shares: vec![share], ..ServerConfig::default() }).expect("server");
        SmbCoordinator::new(server.foreign())
    }

    #[test]
    fn a_file_s_data_changes_are_announced_at_most_once_a_second() {
        let c = coordinator();
        let (a, b) = (SharePath::from_smb("a").unwrap(), SharePath::from_smb("b").unwrap());
        assert!(!c.recently_announced(0, &a));
        assert!(c.recently_announced(0, &a), "again within the second");
        assert!(!c.recently_announced(0, &b), "another file");
        assert!(!c.recently_announced(1, &a), "the same name on another share");
    }
}
