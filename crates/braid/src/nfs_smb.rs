//! SMB's side of NFS's [`nfs_server::Coordinator`]: an NFS operation on a file meets SMB's
//! opens, oplocks and leases (`smb_server::SmbState::prepare_foreign`), and NFS changes
//! reach SMB's change notify and directory leases. The two server crates do not know each
//! other; this binary, which links both, joins them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use braid_vfs::{what, Change, ChangeKind, SharePath};
use nfs_server::{BoxFut, Coordinator, Intent, Refusal};
use smb_server::{ForeignIntent, ForeignRefusal, SmbState};

/// How often one file's data changes by NFS WRITEs are announced. SMB announces size and
/// write-time changes when the writer closes; NFS never closes, so a stream of WRITEs is
/// told at most this often per file rather than once per WRITE.
const WRITE_ANNOUNCE_EVERY: Duration = Duration::from_secs(1);
/// Files whose last announcement is remembered; past it the memory starts afresh.
const MAX_REMEMBERED: usize = 4096;

#[derive(Debug)]
pub struct SmbCoordinator {
    smb: SmbState,
    announced: Mutex<HashMap<(usize, SharePath), Instant>>,
}

impl SmbCoordinator {
    pub fn new(smb: SmbState) -> Self {
        SmbCoordinator { smb, announced: Mutex::new(HashMap::new()) }
    }

    /// Whether a data change of `path` was announced too recently to announce again.
    fn recently_announced(&self, share: usize, path: &SharePath) -> bool {
        let now = Instant::now();
        let mut seen = self.announced.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        match seen.get_mut(&(share, path.clone())) {
            Some(at) if now.duration_since(*at) < WRITE_ANNOUNCE_EVERY => true,
            Some(at) => {
                *at = now;
                false
            }
            None => {
                seen.insert((share, path.clone()), now);
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

    fn changed(&self, share: usize, change: &Change) {
        let data_only = change.kind == ChangeKind::Modified && change.what & !(what::SIZE | what::LAST_WRITE) == 0;
        if data_only && self.recently_announced(share, &change.path) {
            return;
        }
        self.smb.foreign_changed(share, change);
    }
}
