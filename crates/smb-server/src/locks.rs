//! SMB's per-file state. Share modes, byte-range locks, delete-pending and the table of
//! open files are protocol-neutral and live in `braid_filestate`; this module adds what
//! SMB keeps beside them for each file (oplocks and leases, the write queue, wake-ups for
//! blocked LOCK requests, lock sequence replay buckets) and the lease table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use braid_filestate::{Access, OpenId};
use smb_wire::NtStatus;

use crate::status_map::state_status;
use crate::sync::{lock, Sharded};

pub use braid_filestate::{ByteLock, FileKey};

/// The shared state of one file: `braid_filestate`'s, with [`SmbFile`] beside it (the node
/// derefs to it).
pub type FileNode = braid_filestate::FileNode<SmbFile>;

/// What SMB keeps per file beside the protocol-neutral state.
#[derive(Debug, Default)]
pub struct SmbFile {
    /// Opens whose LOCK requests are checked for replays (resilient or durable opens),
    /// keyed by open id; dropped with the open.
    sequences: Mutex<HashMap<OpenId, LockSequences>>,
    /// Oplocks and leases (see `oplocks.rs`).
    pub oplocks: crate::oplocks::NodeOplocks,
    /// WRITEs to this file, one at a time (see `write_queue.rs`).
    pub writes: crate::write_queue::WriteQueue,
}

/// Lock sequence replay state of one open (MS-SMB2 3.3.1.10 Open.LockSequenceArray).
#[derive(Debug, Clone, Copy)]
struct LockSequences {
    /// The last sequence number that succeeded in each of the 64 buckets; None = not valid.
    buckets: [Option<u8>; 64],
}

/// Splits a LOCK request's LockSequence into a bucket index (0..64) and the sequence number,
/// or None when the bucket is outside 1..=64 and no replay detection applies.
pub fn lock_sequence_bucket(lock_sequence: u32) -> Option<(usize, u8)> {
    let index = (lock_sequence >> 4) as usize;
    let number = (lock_sequence & 0xF) as u8;
    (1..=64).contains(&index).then(|| (index - 1, number))
}

/// An open asking only for attributes and SYNCHRONIZE: it breaks no oplock and gets none
/// (what Windows calls a stat open).
pub fn is_stat_open(acc: u32) -> bool {
    braid_filestate::is_stat_open(Access(acc))
}

/// Removes one byte-range lock of `open` and wakes blocked lock requests (SMB's and NLM's).
pub fn unlock(node: &FileNode, open: OpenId, offset: u64, length: u64) -> Result<(), NtStatus> {
    node.unlock(open, offset, length).map_err(state_status)
}

impl SmbFile {
    /// Turns on lock sequence verification for `open` (MS-SMB2 3.3.5.14: resilient,
    /// durable and persistent opens). Idempotent; the state goes away with the open.
    pub fn enable_lock_sequences(&self, open: OpenId) {
        lock(&self.sequences).entry(open).or_insert(LockSequences { buckets: [None; 64] });
    }

    /// Lock sequence verification for one LOCK request of `open`: true if the request
    /// replays the last successful one of its bucket (the caller then answers success
    /// without doing anything). Otherwise the bucket is invalidated until the request
    /// succeeds and [`SmbFile::lock_sequence_done`] records it.
    pub fn lock_sequence_replayed(&self, open: OpenId, lock_sequence: u32) -> bool {
        let Some((index, number)) = lock_sequence_bucket(lock_sequence) else { return false };
        let mut seqs = lock(&self.sequences);
        let Some(s) = seqs.get_mut(&open) else { return false };
        if s.buckets[index] == Some(number) {
            return true;
        }
        s.buckets[index] = None;
        false
    }

    /// Records a successful LOCK request's sequence number for replay detection.
    pub fn lock_sequence_done(&self, open: OpenId, lock_sequence: u32) {
        let Some((index, number)) = lock_sequence_bucket(lock_sequence) else { return };
        if let Some(s) = lock(&self.sequences).get_mut(&open) {
            s.buckets[index] = Some(number);
        }
    }

    /// The SMB side of an open going away: its lock sequences, oplock or lease (the
    /// file-state release before it woke blocked lock requests, so a pending lock of this
    /// very open notices that its handle is gone). Returns the lease freed, if this was
    /// its last open.
    fn release(&self, open: OpenId) -> Option<crate::oplocks::LeaseId> {
        lock(&self.sequences).remove(&open);
        self.oplocks.release(open)
    }
}

/// The id a stream open's hold on its file's node is claimed under (its own id with this
/// bit set): open ids count up from 1 and never reach it.
pub const STREAM_HOLD: OpenId = 1 << 63;

/// The key id of stream `name` of the file with id `file_id`: the file id mixed with a hash
/// of the case-folded name with its top bit set, so a stream's key is neither its file's
/// nor (inode numbers being far below 2^63) any other file's. Mixing is an XOR, so
/// [`stream_file_key`] undoes it.
pub fn stream_key_id(file_id: u64, name: &str) -> u64 {
    // FNV-1a over the lower-cased name: stable across restarts and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.to_lowercase().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    file_id ^ (h | 1 << 63)
}

/// The key of the file that stream `name`, keyed `key`, belongs to.
pub fn stream_file_key(key: FileKey, name: &str) -> FileKey {
    (key.0, stream_key_id(key.1, name))
}

/// The shared file table with SMB's state in its nodes (built by the binary and handed to
/// every protocol server; see `braid_filestate::Files`).
pub type SharedFiles = braid_filestate::FileTable<SmbFile>;

/// All files currently open, and the lease table.
#[derive(Debug)]
pub struct FileTable {
    nodes: Arc<SharedFiles>,
    /// Lease table (MS-SMB2 3.3.1.4): which file each ClientGuid + LeaseKey is on; a key
    /// belongs to one file while any open uses it.
    leases: Sharded<crate::oplocks::LeaseId, FileKey>,
    /// How many stream opens hold their files: while none do, a file's opens need not
    /// look at its streams.
    stream_holds: std::sync::atomic::AtomicUsize,
}

impl FileTable {
    pub fn new() -> Self {
        Self::over(Arc::default())
    }

    /// SMB's view of a file table shared with other protocols.
    pub fn over(nodes: Arc<SharedFiles>) -> Self {
        FileTable { nodes, leases: Sharded::new(16), stream_holds: Default::default() }
    }

    /// The shared table (other protocols' view, and the grace period).
    pub fn shared(&self) -> &Arc<SharedFiles> {
        &self.nodes
    }

    /// Records that stream open `open` holds the file `file`: a claim without access (it
    /// conflicts with nothing) that keeps the file's node, and so its delete-pending state,
    /// alive while the stream is open; the file is removed when the last open of the file
    /// or of any of its streams closes (MS-FSA 2.1.5.4). DELETE_PENDING when the file's
    /// deletion is pending (nothing is held then).
    pub fn hold_for_stream(&self, file: FileKey, open: OpenId) -> Result<(), NtStatus> {
        use braid_filestate::ShareMode;
        let node = self.node(file);
        node.claim(open | STREAM_HOLD, Access(0), ShareMode::ALL).map_err(state_status)?;
        self.stream_holds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if node.is_delete_pending() {
            self.release_stream_hold(file, open);
            return Err(NtStatus::DELETE_PENDING);
        }
        Ok(())
    }

    /// Ends stream open `open`'s hold on `file`: (last open of the file, delete pending),
    /// as [`FileTable::release`].
    pub fn release_stream_hold(&self, file: FileKey, open: OpenId) -> (bool, bool) {
        self.stream_holds.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.release(file, open | STREAM_HOLD)
    }

    /// Whether any stream open holds a file now.
    pub fn streams_open(&self) -> bool {
        self.stream_holds.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    /// How many files are open, lease keys bound, and stream holds taken: all zero once
    /// every open has closed (stateful fuzzing checks it).
    pub fn census(&self) -> (usize, usize, usize) {
        (self.nodes.len(), self.leases.len(), self.stream_holds.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The node for `key`, created if absent.
    pub fn node(&self, key: FileKey) -> Arc<FileNode> {
        self.nodes.node(key)
    }

    /// The node for `key` if some open holds it.
    pub fn existing(&self, key: FileKey) -> Option<Arc<FileNode>> {
        self.nodes.existing(key)
    }

    /// Binds lease `id` to file `key`; refused when the key is already on another file.
    pub fn bind_lease(&self, id: crate::oplocks::LeaseId, key: FileKey) -> Result<(), NtStatus> {
        self.leases.with(&id, |m| match m.get(&id) {
            Some(k) if *k != key => Err(NtStatus::INVALID_PARAMETER),
            _ => {
                m.insert(id, key);
                Ok(())
            }
        })
    }

    /// The file lease `id` is on, if any.
    pub fn lease_file(&self, id: crate::oplocks::LeaseId) -> Option<FileKey> {
        self.leases.get(&id)
    }

    /// Releases `open`; drops the node when no open remains. Returns whether it was last and
    /// whether delete was pending.
    pub fn release(&self, key: FileKey, open: OpenId) -> (bool, bool) {
        let r = self.nodes.release(key, open, |n| {
            if let Some(id) = n.ext.release(open) {
                self.leases.remove(&id);
            }
        });
        (r.last, r.delete_pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_keys_differ_from_the_file_ignore_case_and_lead_back() {
        let k = stream_key_id(42, "Zone.Identifier");
        assert_ne!(k, 42);
        assert!(k >= STREAM_HOLD);
        assert_eq!(k, stream_key_id(42, "zone.IDENTIFIER"));
        assert_ne!(k, stream_key_id(42, "other"));
        assert_ne!(k, stream_key_id(43, "Zone.Identifier"));
        assert_eq!(stream_file_key((3, k), "ZONE.identifier"), (3, 42));
    }

    #[test]
    fn lock_sequences() {
        let t = FileTable::new();
        let n = t.node((0, 1));
        assert!(!n.lock_sequence_replayed(1, 0x11), "off until enabled");
        n.enable_lock_sequences(1);
        assert!(!n.lock_sequence_replayed(1, 0x11));
        n.lock_sequence_done(1, 0x11);
        assert!(n.lock_sequence_replayed(1, 0x11));
        assert!(!n.lock_sequence_replayed(1, 0x12));
        assert!(!n.lock_sequence_replayed(1, 0x11), "a different number invalidates the bucket");
        // Buckets 0 and 65 are never checked.
        n.lock_sequence_done(1, 0x001);
        assert!(!n.lock_sequence_replayed(1, 0x001));
        n.lock_sequence_done(1, 0x411);
        assert!(!n.lock_sequence_replayed(1, 0x411));
        n.lock_sequence_done(1, 0x402);
        assert!(n.lock_sequence_replayed(1, 0x402));
        t.release((0, 1), 1);
        assert!(!n.lock_sequence_replayed(1, 0x402));
    }

    #[test]
    fn unlock_maps_status() {
        let n = FileNode::default();
        n.try_lock(ByteLock { open: 1, offset: 0, length: 10, exclusive: true }).unwrap();
        assert_eq!(unlock(&n, 1, 0, 5), Err(NtStatus::RANGE_NOT_LOCKED));
        assert_eq!(unlock(&n, 1, 0, 10), Ok(()));
    }
}
