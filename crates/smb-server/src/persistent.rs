//! Persistent handles (MS-SMB2 3.3.1.10 Open.IsPersistent, 3.3.5.9.10, 3.3.5.9.12): a
//! durable v2 open granted with SMB2_DHANDLE_FLAG_PERSISTENT on a continuously available
//! share also survives the server. Its state (path, access and share mode, lease or oplock,
//! byte-range locks, owner, CreateGuid) is a `braid_handlestore::HandleRecord`, committed
//! durably to the handle store before the response that changed it goes out; a restarted
//! server rebuilds the opens from the records (`restore.rs`) as disconnected durable opens
//! that their owner may reclaim.
//!
//! Opens on other shares never reach the store: every hook first reads the share's
//! `continuous_availability` switch (a field of the open's tree), so ordinary opens pay one
//! load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use braid_handlestore::{Change, HandleRecord, HandleStore, LeaseRecord, LockRecord, RedbStore};
use smb_wire::NtStatus;

use crate::config::ServerConfig;
use crate::open::Open;
use crate::oplocks::{LeaseId, Notice};
use crate::server::ServerState;
use crate::sync::lock;

mod restore;

pub use restore::restore;

/// The persistent opens' records and the store that keeps them.
#[derive(Debug, Default)]
pub struct PersistentOpens {
    /// None when no share is continuously available: nothing is ever persistent.
    store: Option<Arc<dyn HandleStore>>,
    /// The committed state of each persistent open, by persistent FileId.
    records: Mutex<HashMap<u64, HandleRecord>>,
    /// Changes waiting for their commit, in the order they were made.
    queue: Mutex<Queue>,
    /// One commit at a time: its holder commits every change queued so far in one
    /// transaction (group commit), so concurrent changes share one durable write.
    writing: tokio::sync::Mutex<()>,
    /// The sequence number of the last change known durable.
    committed: AtomicU64,
    /// Sequence ranges of batches whose commit failed (the most recent few).
    failed: Mutex<Vec<(u64, u64)>>,
    /// Records loaded at startup, until `restore` takes them.
    loaded: Mutex<Vec<HandleRecord>>,
    /// Set when the server stops gracefully: closing its opens then must not drop their
    /// records (a planned restart keeps persistent handles too).
    frozen: AtomicBool,
}

/// Changes queued for the next commit; `seq` numbers the last one.
#[derive(Debug, Default)]
struct Queue {
    changes: Vec<Change>,
    seq: u64,
}

impl PersistentOpens {
    /// Opens the store in `state_dir` when some share is continuously available (creating
    /// the directory), and loads its records; an error names the key to fix.
    pub fn open(config: &ServerConfig) -> std::io::Result<Self> {
        let Some(share) = config.shares.iter().find(|s| s.continuous_availability) else { return Ok(Self::default()) };
        let dir = &config.state_dir;
        let unusable = |e: &dyn std::fmt::Display| {
            std::io::Error::other(format!(
                "server.state_dir: {} is not usable for the persistent handles of continuously available share {:?}: {e}",
                dir.display(),
                share.name
            ))
        };
        // 0700 as NFS creates it: the records name users and paths.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700).create(dir).map_err(|e| unusable(&e))?;
        let store = RedbStore::open(&dir.join(braid_handlestore::FILE_NAME)).map_err(|e| unusable(&e))?;
        let loaded = store.load_all().map_err(|e| unusable(&e))?;
        tracing::info!(path = %dir.join(braid_handlestore::FILE_NAME).display(), records = loaded.len(), "persistent handle store open");
        Ok(PersistentOpens { store: Some(Arc::new(store)), loaded: Mutex::new(loaded), ..Default::default() })
    }

    /// Whether persistent handles may be granted (a store is open).
    pub fn enabled(&self) -> bool {
        self.store.is_some()
    }

    /// Stops changing the store: the server is going down and its opens are closing.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::Release);
    }

    /// Records a new persistent open.
    pub async fn insert(&self, rec: HandleRecord) -> Result<(), NtStatus> {
        let id = rec.persistent_id;
        self.commit(id, move |m| {
            m.insert(id, rec);
            true
        })
        .await
    }

    /// Applies `f` to the record of open `id`, if it is persistent, and commits it.
    pub async fn change(&self, id: u64, f: impl FnOnce(&mut HandleRecord)) -> Result<(), NtStatus> {
        self.commit(id, |m| m.get_mut(&id).map(f).is_some()).await
    }

    /// The open `id` is closed: its record goes.
    pub async fn remove(&self, id: u64) {
        let _ = self.commit(id, |m| m.remove(&id).is_some()).await;
    }

    /// Runs `edit` on the records; if it says something changed, queues record `id` as it
    /// now stands (or its removal) and waits until that is durable: committed by this call
    /// or, with the changes of other opens, by the call ahead of it.
    async fn commit(&self, id: u64, edit: impl FnOnce(&mut HashMap<u64, HandleRecord>) -> bool) -> Result<(), NtStatus> {
        let Some(store) = self.store.clone() else { return Ok(()) };
        if self.frozen.load(Ordering::Acquire) {
            return Ok(());
        }
        let mine = {
            let mut m = lock(&self.records);
            if !edit(&mut m) {
                return Ok(());
            }
            let change = m.get(&id).map_or(Change::Remove(id), |r| Change::Put(Box::new(r.clone())));
            // Queued under the records' lock: the queue's order is the changes' order.
            let mut q = lock(&self.queue);
            q.changes.push(change);
            q.seq += 1;
            q.seq
        };
        let _turn = self.writing.lock().await;
        if self.committed.load(Ordering::Acquire) < mine {
            let (batch, upto) = {
                let mut q = lock(&self.queue);
                (std::mem::take(&mut q.changes), q.seq)
            };
            let first = upto + 1 - batch.len() as u64;
            match tokio::task::spawn_blocking(move || store.apply(&batch)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(open = id, error = %e, "persistent handle state not committed");
                    let mut f = lock(&self.failed);
                    f.push((first, upto));
                    if f.len() > 64 {
                        f.remove(0);
                    }
                }
                Err(_) => lock(&self.failed).push((first, upto)),
            }
            self.committed.store(upto, Ordering::Release);
        }
        if lock(&self.failed).iter().any(|(a, b)| (*a..=*b).contains(&mine)) {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        Ok(())
    }

    /// Records `rec` as committed already (a restored open).
    fn adopt(&self, rec: HandleRecord) {
        lock(&self.records).insert(rec.persistent_id, rec);
    }

    /// The persistent opens whose lease has key `key`.
    fn with_lease_key(&self, key: [u8; 16]) -> Vec<u64> {
        let m = lock(&self.records);
        m.values().filter(|r| r.lease.as_ref().is_some_and(|l| l.key == key)).map(|r| r.persistent_id).collect()
    }

    /// The persistent opens under lease `id`.
    fn under_lease(&self, id: LeaseId) -> Vec<u64> {
        let m = lock(&self.records);
        m.values().filter(|r| r.lease.as_ref().is_some_and(|l| (l.client_guid, l.key) == id)).map(|r| r.persistent_id).collect()
    }
}

/// Whether `open` is on a continuously available share (only such opens can be
/// persistent: the one check ordinary opens pay).
pub fn on_ca_share(open: &Open) -> bool {
    open.tree.share().is_some_and(|s| s.config.continuous_availability)
}

/// The lease `open` holds as a record: state and epoch as they stand now.
fn lease_record(open: &Open) -> Option<LeaseRecord> {
    let (id, node) = open.lease.zip(open.node())?;
    let l = node.oplocks.lease_answer(id)?;
    Some(LeaseRecord {
        client_guid: id.0,
        key: id.1,
        state: l.state,
        epoch: l.v2.map_or(0, |v| v.1),
        v2: l.v2.is_some(),
        parent: l.v2.map(|v| v.0).filter(|p| *p != [0; 16]),
    })
}

/// Brings the parts of `rec` that follow the open (name, delete on close, lease, oplock)
/// up to date.
fn refresh_record(rec: &mut HandleRecord, open: &Open) {
    rec.path = lock(&open.path).to_smb_string();
    rec.delete_on_close = open.delete_on_close.load(Ordering::Acquire) || open.node().is_some_and(|n| n.is_delete_pending());
    rec.lease = lease_record(open);
    rec.oplock_level = open.node().map_or(0, |n| n.oplocks.level(open.id.volatile));
}

/// A new persistent open: its record, committed before the CREATE is answered.
pub async fn granted(server: &ServerState, open: &Arc<Open>, grant: &crate::durable::Grant, share_access: u32) -> Result<(), NtStatus> {
    let (Some(share), Some(key)) = (open.tree.share(), open.node().and(file_key(open))) else { return Ok(()) };
    let (backend, path) = (share.backend.clone(), lock(&open.path).clone());
    // The kernel's handle of the file carries the inode's generation: a file replaced
    // under the same name (and even the same inode number) is told apart at restart.
    let token = crate::storage::blocking(move || Ok(backend.file_token(&path).ok())).await.unwrap_or(None);
    let crate::session::User::Named(user) = &grant.user else { return Err(NtStatus::ACCESS_DENIED) };
    let mut rec = HandleRecord {
        persistent_id: open.id.persistent,
        volatile_id: open.id.volatile,
        share: share.config.name.clone(),
        path: String::new(),
        file_id: key.1,
        token,
        desired_access: open.access,
        share_access,
        lease: None,
        oplock_level: 0,
        locks: Vec::new(),
        create_guid: grant.create_guid.unwrap_or([0; 16]),
        app_instance: grant.app_instance,
        user: user.clone(),
        timeout_ms: u64::try_from(grant.timeout.as_millis()).unwrap_or(u64::MAX),
        delete_on_close: false,
        create_action: grant.create_action,
        mode: open.mode.load(Ordering::Relaxed),
    };
    refresh_record(&mut rec, open);
    server.persistent.insert(rec).await
}

fn file_key(open: &Open) -> Option<crate::locks::FileKey> {
    match &open.kind {
        crate::open::OpenKind::File { key, .. } => Some(*key),
        crate::open::OpenKind::Pipe(_) => None,
    }
}

/// `open` changed (renamed, delete on close set or cleared, oplock acknowledged): if it
/// is persistent, its record is brought up to date and committed.
pub async fn changed(server: &ServerState, open: &Open) -> Result<(), NtStatus> {
    if !on_ca_share(open) {
        return Ok(());
    }
    server.persistent.change(open.id.persistent, |r| refresh_record(r, open)).await
}

/// A LOCK request of `open` succeeded: its byte-range locks as the record keeps them.
pub async fn locked(server: &ServerState, open: &Open, taken: &[LockRecord], unlocked: &[(u64, u64)]) -> Result<(), NtStatus> {
    if !on_ca_share(open) {
        return Ok(());
    }
    server
        .persistent
        .change(open.id.persistent, |r| {
            for (offset, length) in unlocked {
                if let Some(i) = r.locks.iter().position(|l| l.offset == *offset && l.length == *length) {
                    r.locks.remove(i);
                }
            }
            r.locks.extend_from_slice(taken);
        })
        .await
}

/// Lease `id` changed state (a break acknowledged): the records of the persistent opens
/// under it follow. `share` is the index of the share the lease's file is on.
pub async fn lease_changed(server: &ServerState, share: usize, id: LeaseId) -> Result<(), NtStatus> {
    if !server.persistent.enabled() || !server.shares.iter().any(|s| s.index == share && s.config.continuous_availability) {
        return Ok(());
    }
    let node = server.files.lease_file(id).and_then(|k| server.files.existing(k));
    let Some(l) = node.and_then(|n| n.oplocks.lease_answer(id)) else { return Ok(()) };
    for open in server.persistent.under_lease(id) {
        server
            .persistent
            .change(open, |r| {
                if let Some(rec) = r.lease.as_mut() {
                    rec.state = l.state;
                    rec.epoch = l.v2.map_or(rec.epoch, |v| v.1);
                }
            })
            .await?;
    }
    Ok(())
}

/// A break is being sent: a persistent open's record takes the state it breaks to at once
/// (acknowledged or not), so that a restart never hands back caching the client was told
/// to give up. Nothing when no share is continuously available.
pub async fn breaking(server: &ServerState, n: &Notice) {
    if !server.persistent.enabled() {
        return;
    }
    match n {
        Notice::Lease { body, .. } => {
            for id in server.persistent.with_lease_key(body.lease_key) {
                let _ = server
                    .persistent
                    .change(id, |r| {
                        if let Some(l) = r.lease.as_mut() {
                            l.state &= body.new_state;
                            if body.new_epoch != 0 {
                                l.epoch = body.new_epoch;
                            }
                        }
                    })
                    .await;
            }
        }
        Notice::Oplock { body, .. } => {
            let to = body.oplock_level;
            let _ = server.persistent.change(body.file_id.persistent, |r| r.oplock_level = r.oplock_level.min(to)).await;
        }
    }
}

/// A break reached persistent opens that are disconnected (their client is away, or the
/// server restarted): they cannot acknowledge, but unlike other durable opens they are not
/// closed (their share mode and locks are what continuous availability keeps). The break
/// is acknowledged for them at once, to the state it offers, and their records follow.
/// Returns the breaks that acknowledgment lets go next.
pub fn acknowledge_for(server: &Arc<ServerState>, n: &Notice, opens: &[Arc<Open>]) -> Vec<Notice> {
    let mut next = Vec::new();
    for open in opens {
        let Some(node) = open.node() else { continue };
        match n {
            Notice::Lease { body, .. } if body.flags & smb_wire::msg::oplock::LEASE_BREAK_ACK_REQUIRED != 0 => {
                if let Some(id) = open.lease {
                    if let Ok((_, more)) = node.oplocks.ack_lease(id.0, id.1, body.new_state) {
                        next.extend(more);
                    }
                }
            }
            Notice::Oplock { body, ack: true, .. } => {
                let _ = node.oplocks.ack_oplock(open.id.volatile, body.oplock_level);
            }
            _ => {}
        }
        tracing::debug!(open = open.id.persistent, "break to a disconnected persistent open: acknowledged for it");
        let (server, open) = (server.clone(), open.clone());
        tokio::spawn(async move {
            let _ = changed(&server, &open).await;
        });
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_handlestore::StoreError;

    /// A store that records each batch, and fails while `fail` is set.
    #[derive(Debug, Default)]
    struct Recording {
        batches: Mutex<Vec<Vec<Change>>>,
        fail: AtomicBool,
    }

    impl HandleStore for Recording {
        fn apply(&self, changes: &[Change]) -> Result<(), StoreError> {
            if self.fail.load(Ordering::Acquire) {
                return Err(StoreError::Storage { path: "test".into(), message: "disk gone".into() });
            }
            lock(&self.batches).push(changes.to_vec());
            Ok(())
        }
        fn put(&self, _: &HandleRecord) -> Result<(), StoreError> {
            unreachable!("changes go through apply")
        }
        fn remove(&self, _: u64) -> Result<(), StoreError> {
            unreachable!("changes go through apply")
        }
        fn load_all(&self) -> Result<Vec<HandleRecord>, StoreError> {
            Ok(Vec::new())
        }
    }

    fn record(id: u64) -> HandleRecord {
        HandleRecord {
            persistent_id: id,
            volatile_id: id,
            share: "ca".into(),
            path: "f".into(),
            file_id: 1,
            token: None,
            desired_access: 0,
            share_access: 0,
            lease: None,
            oplock_level: 0,
            locks: Vec::new(),
            create_guid: [0; 16],
            app_instance: None,
            user: "alice".into(),
            timeout_ms: 1000,
            delete_on_close: false,
            create_action: 1,
            mode: 0,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_commit_in_order_and_failures_are_reported() {
        let store = Arc::new(Recording::default());
        let p = PersistentOpens { store: Some(store.clone()), ..Default::default() };
        p.insert(record(1)).await.unwrap();
        p.change(1, |r| r.oplock_level = 9).await.unwrap();
        // Not persistent: nothing is written.
        p.change(2, |r| r.oplock_level = 9).await.unwrap();
        p.remove(2).await;
        let mut expect = record(1);
        expect.oplock_level = 9;
        let all: Vec<Change> = lock(&store.batches).concat();
        assert_eq!(all, vec![Change::Put(Box::new(record(1))), Change::Put(Box::new(expect))]);
        store.fail.store(true, Ordering::Release);
        assert_eq!(p.change(1, |r| r.oplock_level = 1).await, Err(NtStatus::INSUFFICIENT_RESOURCES));
        store.fail.store(false, Ordering::Release);
        p.remove(1).await;
        assert_eq!(lock(&store.batches).last(), Some(&vec![Change::Remove(1)]));
        // A stopping server leaves the store as it is.
        p.insert(record(3)).await.unwrap();
        p.freeze();
        p.remove(3).await;
        assert_eq!(lock(&store.batches).last(), Some(&vec![Change::Put(Box::new(record(3)))]));
    }
}
