//! How often NFS tells the other protocols that a file's data changed. SMB announces size
//! and write-time changes when the writer closes; NFS never closes, so a stream of WRITEs
//! is told at most once a second per file rather than once per WRITE.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use braid_vfs::{what, Change, ChangeKind};

/// How often one file's data changes are announced.
const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);
/// Files whose last announcement is remembered, per shard; past it the shard starts afresh.
const MAX_REMEMBERED: usize = 256;
/// Shards of that memory, so WRITEs to different files do not meet on one lock.
const SHARDS: usize = 16;

/// When each file's data change was last announced, by a hash of (share, path): a
/// collision only delays another file's announcement by at most a second.
#[derive(Debug)]
pub struct Announced {
    shards: Vec<Mutex<HashMap<u64, Instant>>>,
    hasher: RandomState,
}

impl Default for Announced {
    fn default() -> Self {
        Announced { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(), hasher: RandomState::new() }
    }
}

impl Announced {
    /// Whether `change` need not be told now: a change of data only (size, write time)
    /// of a file whose data change was told less than a second ago.
    pub fn skip(&self, share: usize, change: &Change) -> bool {
        let data_only = change.kind == ChangeKind::Modified && change.what & !(what::SIZE | what::LAST_WRITE) == 0;
        data_only && self.recently(share, change, Instant::now())
    }

    fn recently(&self, share: usize, change: &Change, now: Instant) -> bool {
        let key = self.hasher.hash_one((share, &change.path));
        let mut seen = self.shards[key as usize % SHARDS].lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        match seen.get_mut(&key) {
            Some(at) if now.duration_since(*at) < ANNOUNCE_EVERY => true,
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

#[cfg(test)]
mod tests {
    use super::*;
    use braid_vfs::SharePath;

    fn write_to(name: &str) -> Change {
        Change { path: SharePath::from_smb(name).unwrap(), kind: ChangeKind::Modified, is_dir: false, what: what::SIZE }
    }

    #[test]
    fn a_file_s_data_changes_are_announced_at_most_once_a_second() {
        let a = Announced::default();
        assert!(!a.skip(0, &write_to("a")));
        assert!(a.skip(0, &write_to("a")), "again within the second");
        assert!(!a.skip(0, &write_to("b")), "another file");
        assert!(!a.skip(1, &write_to("a")), "the same name on another share");
        let renamed = Change { kind: ChangeKind::Removed, ..write_to("a") };
        assert!(!a.skip(0, &renamed), "not a data change");
    }
}
