//! SMB's hooks on the shared file table (`braid_filestate::CachingHooks`): before another
//! protocol (NFSv3, which holds no opens) reads or changes a file, the caching SMB clients
//! hold that conflicts is broken and acknowledged, as an SMB open would wait; after it
//! changed something, SMB's watchers and directory leases are told. The file table itself
//! checks share modes and byte-range locks.

use std::sync::{Arc, Weak};
use std::time::Duration;

use braid_filestate::{BoxFut, CachingHooks, FileKey, Intent, Refusal, Settle};
use braid_vfs::Change;
use tokio::time::Instant;

use crate::changes::Origin;
use crate::locks::FileNode;
use crate::oplocks::{Event, BREAK_TIMEOUT};
use crate::server::ServerState;

/// Registers SMB's hooks on its file table (when the server binds). Weak: the table lives
/// in the server state.
pub fn register(state: &Arc<ServerState>) {
    state.files.shared().set_caching(Arc::new(SmbCaching(Arc::downgrade(state))));
}

#[derive(Debug)]
struct SmbCaching(Weak<ServerState>);

impl CachingHooks for SmbCaching {
    fn settle<'a>(&'a self, key: FileKey, why: Settle) -> BoxFut<'a, Result<(), Refusal>> {
        Box::pin(async move {
            let Some(server) = self.0.upgrade() else { return Ok(()) };
            let Some(node) = server.files.existing(key) else { return Ok(()) };
            make_way(&server, &node, why).await
        })
    }

    fn changed<'a>(&'a self, share: usize, change: &'a Change) -> BoxFut<'a, ()> {
        Box::pin(async move {
            if let Some(server) = self.0.upgrade() {
                crate::changes::changed(&server, share, change, Origin::OUTSIDE).send(&server).await;
            }
        })
    }
}

/// The breaks `why` calls for, each waited for until acknowledged (bounded).
async fn make_way(server: &Arc<ServerState>, node: &Arc<FileNode>, why: Settle) -> Result<(), Refusal> {
    let open = |truncate| Event::Open { truncate, spare_leases: false, share_conflict: false, retry: false };
    match why {
        Settle::SharingViolation => settle(server, node, Event::SharingViolation).await,
        Settle::Intent(Intent::Read) => settle(server, node, open(false)).await,
        // A write by a protocol without opens changes the data under every cache at once:
        // everything goes in one break (as for a truncating open), waited for only where
        // W must be flushed first.
        Settle::Intent(Intent::Write | Intent::Truncate) => {
            settle(server, node, open(true)).await?;
            settle(server, node, Event::Write).await
        }
        Settle::Intent(Intent::Remove | Intent::Rename) => settle(server, node, Event::Namespace).await,
    }
}

/// Starts the breaks `event` calls for and waits until none is pending (acknowledged,
/// closed or timed out). The break timer bounds the wait; past it (plus a margin) the
/// caller is told to come back later.
async fn settle(server: &Arc<ServerState>, node: &Arc<FileNode>, event: Event) -> Result<(), Refusal> {
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
            return Err(Refusal::Busy);
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
    use braid_filestate::{Access, Files, ShareMode};
    use smb_wire::msg::oplock::{lease_state as ls, LeaseContext};
    use smb_wire::{FileId, NtStatus, SessionId};

    /// SMB's state over a table with its hooks registered, and the table as NFS sees it.
    fn state() -> (Arc<ServerState>, Arc<dyn Files>) {
        let share = ShareConfig::new("data", ShareStorage::Memory { capacity: 1 << 20 });
        let s = Arc::new(ServerState::new(ServerConfig { shares: vec![share], ..ServerConfig::default() }).expect("state"));
        register(&s);
        let files: Arc<dyn Files> = s.files.shared().clone();
        (s, files)
    }

    /// An SMB open of file 9 with share mode `share` and, when `lease`, an RWH lease
    /// (its break notices go nowhere: no such session).
    fn smb_open(s: &ServerState, share: ShareMode, lease: bool) -> Arc<FileNode> {
        let node = s.files.node((0, 9));
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
        let (_s, files) = state();
        assert_eq!(files.prepare((0, 9), Intent::Remove, None).await, Ok(()));
    }

    #[tokio::test]
    async fn share_modes_that_deny_writing_or_deleting_refuse() {
        let (s, files) = state();
        smb_open(&s, ShareMode::READ, false);
        assert_eq!(files.prepare((0, 9), Intent::Read, None).await, Ok(()));
        assert_eq!(files.prepare((0, 9), Intent::Write, None).await, Err(Refusal::ShareMode));
        assert_eq!(files.prepare((0, 9), Intent::Remove, None).await, Err(Refusal::ShareMode));
        let (s, files) = state();
        smb_open(&s, ShareMode::ALL, false);
        assert_eq!(files.prepare((0, 9), Intent::Rename, None).await, Ok(()));
    }

    #[tokio::test]
    async fn an_smb_exclusive_lock_refuses_reads_and_writes_in_its_range() {
        let (s, files) = state();
        let node = smb_open(&s, ShareMode::ALL, false);
        node.try_lock(braid_filestate::ByteLock { open: 1, offset: 100, length: 10, exclusive: true }).expect("lock");
        assert_eq!(files.prepare((0, 9), Intent::Write, Some((105, 1))).await, Err(Refusal::Locked));
        assert_eq!(files.prepare((0, 9), Intent::Read, Some((95, 10))).await, Err(Refusal::Locked));
        assert_eq!(files.prepare((0, 9), Intent::Write, Some((110, 10))).await, Ok(()), "past the range");
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_waits_for_the_lease_break_to_be_acknowledged() {
        let (s, files) = state();
        let node = smb_open(&s, ShareMode::ALL, true);
        let waiting = tokio::spawn({
            let files = files.clone();
            async move { files.prepare((0, 9), Intent::Write, None).await }
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
        let (s, files) = state();
        let node = smb_open(&s, ShareMode::ALL, true);
        assert_eq!(files.prepare((0, 9), Intent::Truncate, None).await, Ok(()));
        assert_eq!(node.oplocks.lease_state(([1; 16], [5; 16])), Some(0));
    }
}
