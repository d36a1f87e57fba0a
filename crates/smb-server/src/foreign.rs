//! Operations of other protocols (NFSv3) on the files SMB serves: before one changes or
//! reads a file, the caching SMB clients hold that conflicts is broken (and acknowledged,
//! as an SMB open would wait), and SMB share modes that deny writing or deleting are
//! respected; after it changed something, SMB's watchers and directory leases are told.
//! The other protocol holds no opens of its own: it is stateless, like NFSv3.

use std::sync::Arc;
use std::time::Duration;

use braid_filestate::{Access, ShareMode};
use braid_vfs::Change;
use tokio::time::Instant;

use crate::changes::Origin;
use crate::locks::FileNode;
use crate::oplocks::{Event, BREAK_TIMEOUT};
use crate::server::ServerState;

/// What another protocol is about to do to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignIntent {
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

/// Why SMB's state refuses the operation for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignRefusal {
    /// An SMB open's share mode denies it.
    ShareMode,
    /// Breaks did not complete in time.
    Busy,
}

/// SMB's file state as another protocol serving the same shares meets it
/// ([`crate::Server::foreign`]).
#[derive(Debug, Clone)]
pub struct SmbState(pub(crate) Arc<ServerState>);

impl SmbState {
    /// Before `intent` on the file `file_id` of share `share`: breaks what SMB clients
    /// cache that conflicts, waiting for acknowledgments as an SMB open would (bounded by
    /// the break timeout), and checks SMB share modes.
    pub async fn prepare_foreign(&self, share: usize, file_id: u64, intent: ForeignIntent) -> Result<(), ForeignRefusal> {
        let Some(node) = self.0.files.existing((share, file_id)) else { return Ok(()) };
        let needs = match intent {
            ForeignIntent::Read => Access::READ_DATA,
            ForeignIntent::Write | ForeignIntent::Truncate => Access::WRITE_DATA,
            ForeignIntent::Remove | ForeignIntent::Rename => Access::DELETE,
        };
        if node.check_share(needs, ShareMode::ALL).is_err() {
            // Clients may keep handles open only because they cache them: ask them to
            // close (as SMB does before failing an open), then look again.
            settle(&self.0, &node, Event::SharingViolation).await?;
            let node = self.0.files.existing((share, file_id));
            if node.is_some_and(|n| n.check_share(needs, ShareMode::ALL).is_err()) {
                return Err(ForeignRefusal::ShareMode);
            }
        }
        let open = |truncate| Event::Open { truncate, spare_leases: false, share_conflict: false, retry: false };
        match intent {
            ForeignIntent::Read => settle(&self.0, &node, open(false)).await,
            // A write by a protocol without opens changes the data under every cache at
            // once: everything goes in one break (as for a truncating open), waited for
            // only where W must be flushed first.
            ForeignIntent::Write | ForeignIntent::Truncate => {
                settle(&self.0, &node, open(true)).await?;
                settle(&self.0, &node, Event::Write).await
            }
            ForeignIntent::Remove | ForeignIntent::Rename => settle(&self.0, &node, Event::Namespace).await,
        }
    }

    /// After another protocol changed something: SMB's change notify and directory leases
    /// hear of it (its own cache was kept true by the backend it went through). Returns
    /// once the lease breaks it causes are written, so the other protocol answers after
    /// them, as an SMB request does.
    pub async fn foreign_changed(&self, share: usize, change: &Change) {
        crate::changes::changed(&self.0, share, change, Origin::OUTSIDE).send(&self.0).await;
    }
}

/// Starts the breaks `event` calls for and waits until none is pending (acknowledged,
/// closed or timed out). The break timer bounds the wait; past it (plus a margin) the
/// caller is told to come back later.
async fn settle(server: &Arc<ServerState>, node: &Arc<FileNode>, event: Event) -> Result<(), ForeignRefusal> {
    let give_up = Instant::now() + BREAK_TIMEOUT + Duration::from_secs(5);
    let mut event = event;
    loop {
        // Subscribe before looking, so an acknowledgment between the two is not missed.
        let changed = node.oplocks.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let b = node.oplocks.start_foreign_breaks(event, Instant::now());
        crate::breaks::deliver(server, b.notices).await;
        let Some(until) = b.wait_until else { return Ok(()) };
        if Instant::now() >= give_up {
            return Err(ForeignRefusal::Busy);
        }
        tokio::select! {
            _ = &mut changed => {}
            _ = tokio::time::sleep_until(until.min(give_up)) => node.oplocks.expire_now(),
        }
        if let Event::Open { truncate, spare_leases, share_conflict, .. } = event {
            event = Event::Open { truncate, spare_leases, share_conflict, retry: true };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ServerConfig, ShareConfig, ShareStorage};
    use crate::oplocks::{Owner, Reach};
    use smb_wire::msg::oplock::{lease_state as ls, LeaseContext};
    use smb_wire::{FileId, NtStatus, SessionId};

    fn state() -> SmbState {
        SmbState(Arc::new(crate::server::ServerState::new(config()).expect("state")))
    }

    fn config() -> ServerConfig {
        let share = ShareConfig::new("data", ShareStorage::Memory { capacity: 1 << 20 });
        ServerConfig { shares: vec![share], ..ServerConfig::default() }
    }

    /// An SMB open of file 9 with share mode `share` and, when `lease`, an RWH lease
    /// (its break notices go nowhere: no such session).
    fn smb_open(s: &SmbState, share: ShareMode, lease: bool) -> Arc<FileNode> {
        let node = s.0.files.node((0, 9));
        node.claim(1, Access(Access::READ_DATA.0 | Access::WRITE_DATA.0), share).expect("claim");
        if lease {
            let reach = Reach { owner: Owner { session: SessionId(77), conn: 77, encrypt: false }, file_id: FileId { persistent: 1, volatile: 1 } };
            let ask = LeaseContext { key: [5; 16], state: ls::READ | ls::WRITE | ls::HANDLE, flags: 0, v2: None };
            assert_eq!(node.oplocks.grant_lease(1, reach, ([1; 16], [5; 16]), &ask, 0, false).state.0, 7);
        }
        node
    }

    #[tokio::test]
    async fn files_smb_does_not_hold_need_nothing() {
        let s = state();
        assert_eq!(s.prepare_foreign(0, 9, ForeignIntent::Remove).await, Ok(()));
    }

    #[tokio::test]
    async fn share_modes_that_deny_writing_or_deleting_refuse() {
        let s = state();
        smb_open(&s, ShareMode::READ, false);
        assert_eq!(s.prepare_foreign(0, 9, ForeignIntent::Read).await, Ok(()));
        assert_eq!(s.prepare_foreign(0, 9, ForeignIntent::Write).await, Err(ForeignRefusal::ShareMode));
        assert_eq!(s.prepare_foreign(0, 9, ForeignIntent::Remove).await, Err(ForeignRefusal::ShareMode));
        let s = state();
        smb_open(&s, ShareMode::ALL, false);
        assert_eq!(s.prepare_foreign(0, 9, ForeignIntent::Rename).await, Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_waits_for_the_lease_break_to_be_acknowledged() {
        let s = state();
        let node = smb_open(&s, ShareMode::ALL, true);
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.prepare_foreign(0, 9, ForeignIntent::Write).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "the write waits for the W break");
        assert_eq!(
            node.oplocks.ack_lease([1; 16], [5; 16], ls::READ | ls::HANDLE).map(|a| a.0),
            Err(NtStatus::REQUEST_NOT_ACCEPTED),
            "one break, to none"
        );
        assert_eq!(node.oplocks.ack_lease([1; 16], [5; 16], 0).map(|a| a.0), Ok(0));
        assert_eq!(waiting.await.expect("task"), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unacknowledged_break_ends_at_the_timer() {
        let s = state();
        let node = smb_open(&s, ShareMode::ALL, true);
        assert_eq!(s.prepare_foreign(0, 9, ForeignIntent::Truncate).await, Ok(()));
        assert_eq!(node.oplocks.lease_state(([1; 16], [5; 16])), Some(0));
    }
}
