//! State every connection shares: the exports, the handle key, the duplicate request cache,
//! the shared file table, the write verifier and the metrics.

use std::sync::Arc;

use crate::config::{Export, NfsConfig};
use crate::drc::Drc;
use crate::handle::HandleKey;
use braid_opmetrics::OpTable;

/// One export with its id (the handle's export field).
#[derive(Debug)]
pub struct ExportState {
    pub export: Export,
    pub id: u32,
    /// Where this export's handles were last seen to point.
    pub paths: crate::paths::Paths,
    /// Names behind the READDIR cookies that ended pages.
    pub cookies: crate::cookies::Cookies,
    /// Files kept open between READs and WRITEs.
    pub open_files: crate::open_files::OpenFiles,
}

/// Everything connections share.
#[derive(Debug)]
pub struct NfsState {
    pub config: NfsConfig,
    /// Replaced whole on a reload ([`crate::exports`]).
    pub exports: crate::exports::Exports,
    pub key: HandleKey,
    pub drc: Drc,
    /// The file table every protocol shares (share modes, byte-range locks, other
    /// protocols' caching): READ, WRITE and namespace changes check it; NLM's locks live in it.
    pub files: Arc<dyn braid_filestate::Files>,
    /// When each file's data change was last told to the other protocols.
    pub announced: crate::announce::Announced,
    /// The lock service (NLM and NSM): lock owners, client hosts, blocked requests.
    pub nlm: crate::nlm::Nlm,
    /// Counts and latencies per NFS procedure (MOUNT procedures count as MNT, UMNT, ...).
    pub ops: Arc<OpTable>,
    /// Client addresses with their live connections and traffic (`braid status`).
    pub peers: Arc<braid_opmetrics::PeerTable>,
    /// WRITE and COMMIT verifier: random per server start, so clients resend unstable
    /// writes a restart may have lost.
    pub write_verf: [u8; 8],
    /// Set to true when the server stops: connections take no new calls; each
    /// connection holds a receiver until its calls have been answered.
    pub stop: tokio::sync::watch::Sender<bool>,
    /// Who may connect: connections in all and per client, calls per client, and the
    /// limits hit (`braid-admission`; NFS has no logon, so no pool of unauthenticated
    /// connections).
    pub admission: Arc<braid_admission::Admission>,
}

/// Names of MOUNT's procedures in the metric table, after the 22 NFSv3 procedures.
const MOUNT_OP_NAMES: [&str; 6] = ["MOUNT_NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"];

/// Names of the lock service's procedures in the metric table, after MOUNT's. The `_MSG`
/// forms count as their synchronous procedure; NM_LOCK counts as LOCK.
const LOCK_OP_NAMES: [&str; 10] =
    ["NLM_NULL", "NLM_TEST", "NLM_LOCK", "NLM_CANCEL", "NLM_UNLOCK", "NLM_GRANTED_RES", "NLM_SHARE", "NLM_UNSHARE", "NLM_FREE_ALL", "SM_NOTIFY"];

/// A metrics table for the NFS procedures (`protocol="nfs"`).
pub fn op_table() -> OpTable {
    OpTable::new("nfs", nfs_wire::nfs3::PROC3_NAMES.iter().chain(&MOUNT_OP_NAMES).chain(&LOCK_OP_NAMES).copied().collect())
}

/// Index of the lock service's first procedure in the metric table.
const LOCK_OPS: usize = MOUNT_OPS + MOUNT_OP_NAMES.len();

/// The metric of an NLM procedure.
pub fn nlm_op(p: nfs_wire::nlm4::Nlm4Proc) -> usize {
    use nfs_wire::nlm4::Nlm4Proc as P;
    LOCK_OPS
        + match p {
            P::Null => 0,
            P::Test | P::TestMsg | P::TestRes => 1,
            P::Lock | P::LockMsg | P::NmLock | P::LockRes => 2,
            P::Cancel | P::CancelMsg | P::CancelRes => 3,
            P::Unlock | P::UnlockMsg | P::UnlockRes => 4,
            P::Granted | P::GrantedMsg | P::GrantedRes => 5,
            P::Share => 6,
            P::Unshare => 7,
            P::FreeAll => 8,
        }
}

/// The metric of an NSM procedure: SM_NOTIFY has its own; the others count as NLM_NULL.
pub fn nsm_op(p: nfs_wire::nsm1::SmProc) -> usize {
    LOCK_OPS + if p == nfs_wire::nsm1::SmProc::Notify { 9 } else { 0 }
}

/// NFS's admission: `config`'s connection limits, calls per client, no logon pool.
pub fn admission(config: &NfsConfig) -> Arc<braid_admission::Admission> {
    let limits = braid_admission::Limits {
        max_connections: config.max_connections,
        max_per_client: config.max_connections_per_client,
        max_unauthenticated: usize::MAX,
        max_calls_per_client: config.max_calls_per_client,
    };
    braid_admission::Admission::new("nfs", limits)
}

/// A table of NFS clients and their connections, for an admin endpoint to show.
pub fn peer_table() -> braid_opmetrics::PeerTable {
    braid_opmetrics::PeerTable::new("nfs")
}

/// Index of MOUNT procedure 0 in the metric table.
pub const MOUNT_OPS: usize = nfs_wire::nfs3::PROC3_NAMES.len();

impl NfsState {
    /// Builds the state; fails when two exports' names hash to the same id (rename one).
    pub fn new(
        config: NfsConfig,
        exports: Vec<Export>,
        key: HandleKey,
        files: Arc<dyn braid_filestate::Files>,
        ops: Arc<OpTable>,
    ) -> std::io::Result<Self> {
        let exports = crate::exports::Exports::new(exports)?;
        let stop = tokio::sync::watch::Sender::new(false);
        let admission = admission(&config);
        let peers = Arc::new(peer_table());
        let announced = crate::announce::Announced::default();
        Ok(NfsState {
            config,
            exports,
            key,
            drc: Drc::default(),
            files,
            announced,
            nlm: Default::default(),
            ops,
            peers,
            write_verf: rand::random(),
            stop,
            admission,
        })
    }

    /// The export with handle id `id`.
    pub fn export_by_id(&self, id: u32) -> Option<Arc<ExportState>> {
        self.exports.by_id(id)
    }

    /// The export a mount path lies in and the directory inside it: `/name` is the share
    /// root, `/name/a/b` its directory `a/b` (clients such as libnfs mount the directory of
    /// the file they want). Extra, leading and trailing slashes are ignored.
    pub fn export_by_path(&self, path: &str) -> Option<(Arc<ExportState>, braid_vfs::SharePath)> {
        let mut parts = path.split('/').filter(|c| !c.is_empty());
        let name = parts.next()?;
        let export = self.exports.by_name(name)?;
        let mut dir = braid_vfs::SharePath::root();
        for c in parts {
            dir = dir.join(c).ok()?;
        }
        Some((export, dir))
    }
}
