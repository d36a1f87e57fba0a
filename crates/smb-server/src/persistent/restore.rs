//! Restart: the records loaded from the handle store become disconnected durable opens
//! again, each reopened through its share's backend and put back in the file table with
//! its share mode, lease or oplock and byte-range locks, waiting for its owner's DH2C (or
//! its timeout, counted from the restart).

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_filestate::{Access, ShareMode};
use braid_handlestore::HandleRecord;
use braid_vfs::{CreateMode, OpenOptions, SharePath};
use smb_wire::msg::create::access;
use smb_wire::msg::oplock::LeaseContext;
use smb_wire::FileId;

use crate::durable::Grant;
use crate::locks::ByteLock;
use crate::open::{DirCursor, Open, OpenKind};
use crate::oplocks::{Owner, Reach};
use crate::server::{ServerState, Share};
use crate::tree::{Tree, TreeKind};

/// Rebuilds every persistent open the store held; a record whose share, file or state
/// cannot be had back is dropped (logged). FileIds handed out from now on are above
/// every restored one.
pub async fn restore(server: &Arc<ServerState>) {
    let records = std::mem::take(&mut *crate::sync::lock(&server.persistent.loaded));
    if records.is_empty() {
        return;
    }
    let highest = records.iter().map(|r| r.persistent_id.max(r.volatile_id)).max().unwrap_or(0);
    server.reserve_file_ids(highest);
    let mut kept = 0;
    for rec in records {
        let id = rec.persistent_id;
        match restore_one(server, &rec).await {
            Ok(()) => kept += 1,
            Err(why) => {
                tracing::warn!(open = id, share = %rec.share, path = %rec.path, "persistent handle dropped at restart: {why}");
                // Adopted first so that the removal reaches the store.
                server.persistent.adopt(rec);
                server.persistent.remove(id).await;
            }
        }
    }
    tracing::info!(restored = kept, "persistent handles restored");
}

/// One record back as a disconnected durable open.
async fn restore_one(server: &Arc<ServerState>, rec: &HandleRecord) -> Result<(), String> {
    let share =
        server.share(&rec.share).filter(|s| s.config.continuous_availability).ok_or("the share is gone or no longer continuously available")?;
    let (handle, file_id) = reopen(&share, rec).await?;
    let key = (share.index, file_id);
    let node = server.files.node(key);
    let volatile = rec.volatile_id;
    node.claim(volatile, Access(rec.desired_access), ShareMode(rec.share_access)).map_err(|e| format!("share mode: {e:?}"))?;
    // A session id no live session has: breaks for this open find it disconnected.
    let session = server.new_session_id();
    let id = FileId { persistent: rec.persistent_id, volatile };
    let reach = Reach { owner: Owner { session, conn: 0, encrypt: share.config.encrypt }, file_id: id };
    let lease = rec.lease.as_ref().map(|l| (l.client_guid, l.key));
    if let (Some(l), Some(lid)) = (&rec.lease, lease) {
        // The grant adds one to the epoch it is given for a lease that caches anything.
        let epoch = if l.state != 0 { l.epoch.wrapping_sub(1) } else { l.epoch };
        let asked = LeaseContext { key: l.key, state: l.state, flags: 0, v2: l.v2.then(|| (l.parent.unwrap_or([0; 16]), epoch)) };
        let others = node.other_opens(|o, _| o == volatile);
        node.oplocks.grant_lease(volatile, reach, lid, &asked, others, false);
        if server.files.bind_lease(lid, key).is_err() {
            tracing::warn!(open = id.persistent, "restored lease key is on another file");
        }
    } else if rec.oplock_level != 0 {
        let others = node.other_opens(|o, _| o == volatile);
        node.oplocks.grant_oplock(volatile, reach, rec.oplock_level, others);
    }
    for l in &rec.locks {
        if let Err(e) = node.try_lock(ByteLock { open: volatile, offset: l.offset, length: l.length, exclusive: l.exclusive }) {
            tracing::warn!(open = id.persistent, offset = l.offset, length = l.length, "restored byte-range lock conflicts: {e:?}");
        }
    }
    node.enable_lock_sequences(volatile);
    let open = Arc::new(Open {
        id,
        tree: Arc::new(Tree {
            id: 0,
            kind: TreeKind::Disk(share.clone()),
            maximal_access: rec.desired_access,
            read_only: share.config.read_only,
            encrypt: share.config.encrypt,
            qos: None,
        }),
        path: Mutex::new(SharePath::from_smb(&rec.path).map_err(|e| e.to_string())?),
        kind: OpenKind::File { handle, is_dir: false, key, node },
        access: rec.desired_access,
        delete_on_close: AtomicBool::new(rec.delete_on_close),
        dir: tokio::sync::Mutex::new(DirCursor::default()),
        position: AtomicU64::new(0),
        mode: AtomicU64::new(rec.mode),
        channel_seq: Default::default(),
        lease,
        written: AtomicBool::new(false),
    });
    let grant = Grant {
        create_guid: Some(rec.create_guid),
        timeout: Duration::from_millis(rec.timeout_ms),
        user: crate::session::User::Named(rec.user.clone()),
        share: share.index,
        lease,
        create_action: rec.create_action,
        persistent: true,
        app_instance: rec.app_instance,
    };
    server.persistent.adopt(rec.clone());
    server.durable.adopt(server, grant, open, session);
    tracing::debug!(open = id.persistent, path = %rec.path, "persistent handle restored");
    Ok(())
}

/// Opens the record's file again with the access it had; refuses a file that is gone or
/// is not the one the record names (another file id, or another kernel file handle).
async fn reopen(share: &Share, rec: &HandleRecord) -> Result<(Arc<dyn braid_vfs::FileHandle>, u64), String> {
    let path = SharePath::from_smb(&rec.path).map_err(|e| format!("bad path: {e}"))?;
    let a = rec.desired_access;
    let opts = OpenOptions {
        read: a & (access::FILE_READ_DATA | access::FILE_EXECUTE) != 0,
        write: a & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0,
        create: CreateMode::OpenExisting,
        truncate: false,
        directory: false,
        non_directory: true,
    };
    let backend = share.backend.clone();
    let (handle, attrs, token) = crate::storage::blocking(move || {
        let (h, _) = backend.open(&path, opts)?;
        let attrs = h.attrs()?;
        let token = backend.file_token(&path).ok();
        Ok((Arc::<dyn braid_vfs::FileHandle>::from(h), attrs, token))
    })
    .await
    .map_err(|st| format!("cannot reopen the file: {st:?}"))?;
    if attrs.file_id != rec.file_id || (rec.token.is_some() && token != rec.token) {
        return Err("the file was replaced".into());
    }
    Ok((handle, attrs.file_id))
}
