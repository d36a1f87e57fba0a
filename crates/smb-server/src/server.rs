//! State shared by every connection: configuration, shares, users, sessions, open files.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use braid_vfs::{Backend, LocalBackend, MemoryBackend};
use smb_wire::SessionId;

use crate::config::{ServerConfig, ShareConfig};
use crate::locks::FileTable;
use crate::session::Session;
use crate::sync::{lock, Sharded};

/// One configured disk share with its storage.
#[derive(Debug)]
pub struct Share {
    pub config: ShareConfig,
    pub backend: Arc<dyn Backend>,
    /// The share's number, part of the key of the file table: its place in the startup
    /// configuration, or a fresh number for a share a reload added (never reused).
    pub index: usize,
    /// Its provisioned limits and use, shared with the other protocols serving it.
    pub qos: Arc<braid_qos::ShareLimiter>,
    /// The bound on its storage calls (threads at once, time to answer).
    pub storage: Arc<crate::storage::StorageGate>,
}

/// Everything connections share.
#[derive(Debug)]
pub struct ServerState {
    /// The configuration the server started with. Its `shares` and `users` are not updated
    /// by a reload: use [`ServerState::shares`] and [`ServerState::users`].
    pub config: ServerConfig,
    /// The shares, swapped whole by a reload (`reload.rs`); read on tree connect, never on
    /// the READ/WRITE path (a tree holds its share).
    pub shares: crate::reload::Shares,
    /// NT hashes by lower-case user name, swapped whole by a reload.
    pub users: arc_swap::ArcSwap<HashMap<String, [u8; 16]>>,
    /// The index the next share added by a reload gets (indices are never reused: they key
    /// the file table, where a removed share's files may linger until closed).
    pub(crate) next_share_index: std::sync::atomic::AtomicUsize,
    /// Set to true when the server stops: readers take no new requests (`listener.rs`,
    /// "graceful stop"); each connection's reader holds a receiver.
    pub(crate) stop: tokio::sync::watch::Sender<bool>,
    /// How the admin endpoint's `POST /reload` reloads (set by the binary).
    pub reload_hook: crate::reload::ReloadHook,
    pub sessions: Sharded<SessionId, Arc<Session>>,
    pub files: FileTable,
    /// Durable opens, connected or waiting for a reconnect (see `durable.rs`).
    pub durable: crate::durable::DurableOpens,
    /// Persistent opens' records and their crash-safe store (see `persistent.rs`).
    pub persistent: crate::persistent::PersistentOpens,
    /// CreateGuids of CREATEs a client may replay (see `replay.rs`).
    pub replay: crate::replay::ReplayCache,
    pub server_guid: [u8; 16],
    /// Random per start: the part of a server-side copy's resume key that a client cannot
    /// make up (see `handlers/ioctl/copy.rs`).
    pub(crate) resume_key_tag: u64,
    /// Server start as FILETIME.
    pub start_time: u64,
    next_session: AtomicU64,
    next_file: AtomicU64,
    next_async: AtomicU64,
    pub next_conn: AtomicU64,
    /// Live connections, for the admin endpoint (weak: a connection's lifetime is its own).
    pub connections: Sharded<u64, std::sync::Weak<crate::connection::Connection>>,
    /// Large I/O buffers shared by all connections.
    pub buffers: crate::buffers::BufferPool,
    /// CHANGE_NOTIFY watches of open directories.
    pub notify: crate::notify::Watches,
    /// Directory opens holding a lease (their breaks when an entry changes).
    pub dir_leases: crate::dir_leases::DirLeases,
    /// Pipes for zero-copy WRITE receive (see `splice.rs`).
    pub pipes: Arc<crate::splice::PipePool>,
    /// Counts and latencies per SMB command, for the admin endpoint.
    pub ops: crate::op_metrics::OpTable,
    /// Other protocols' tables (NFS), shown beside SMB's by the admin endpoint.
    pub other_ops: Vec<Arc<crate::op_metrics::OpTable>>,
    /// Other protocols' clients (NFS), shown beside SMB's sessions.
    pub other_peers: Vec<Arc<braid_opmetrics::PeerTable>>,
    /// Who may connect: connections in all and per client, the pool of connections not
    /// yet logged on, and the limits hit (`braid-admission`).
    pub admission: Arc<braid_admission::Admission>,
    /// Other protocols' admissions (NFS), shown beside SMB's.
    pub other_admissions: Vec<Arc<braid_admission::Admission>>,
    /// The admin endpoint's connections and refusals.
    pub admin_admission: Arc<braid_admission::Admission>,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

/// SMB's connection limits. Calls per client are not limited here: each connection has its
/// own bound on requests in flight (`connection::MAX_IN_FLIGHT`).
fn admission_limits(c: &ServerConfig) -> braid_admission::Limits {
    braid_admission::Limits {
        max_connections: c.max_connections,
        max_per_client: c.max_connections_per_client,
        max_unauthenticated: c.max_unauthenticated,
        max_calls_per_client: tokio::sync::Semaphore::MAX_PERMITS,
    }
}

/// `local` behind the metadata cache when the share asks for it.
fn cached(local: Arc<dyn Backend>, path: &std::path::Path, m: &crate::config::MetadataCache) -> Arc<dyn Backend> {
    if !m.enabled {
        return local;
    }
    let cfg = braid_vfs::CacheConfig {
        ttl: m.ttl,
        max_entries: m.max_entries,
        max_bytes: usize::try_from(m.max_bytes).unwrap_or(usize::MAX),
        ..Default::default()
    };
    Arc::new(braid_vfs::CachedBackend::new(local, Some(path), cfg))
}

impl Share {
    /// Opens the storage of share `s` and gives it `index`.
    pub(crate) fn open(s: &ShareConfig, index: usize, server: &ServerConfig) -> std::io::Result<Share> {
        let backend: Arc<dyn Backend> = match &s.storage {
            crate::config::ShareStorage::Directory(path) => {
                let local: Arc<dyn Backend> = Arc::new(
                    LocalBackend::new(path, s.read_only)
                        .map_err(|e| std::io::Error::other(format!("share {}: cannot open {}: {e}", s.name, path.display())))?,
                );
                cached(local, path, &s.metadata_cache)
            }
            crate::config::ShareStorage::Memory { capacity } => Arc::new(MemoryBackend::new(*capacity, s.read_only)),
        };
        let qos = braid_qos::ShareLimiter::new(&s.name, s.limits.clone());
        let storage = crate::storage::StorageGate::new(&s.name, server.storage_threads_per_share, server.storage_timeout);
        Ok(Share { config: s.clone(), backend, index, qos, storage })
    }

    /// Whether `user` may connect to the share (its `users` list, or `guest_ok`).
    pub fn admits(&self, user: &crate::session::User) -> bool {
        use crate::session::User;
        match user {
            User::Named(n) => self.config.users.is_empty() || self.config.users.iter().any(|u| u.eq_ignore_ascii_case(n)),
            User::Guest | User::Anonymous => self.config.guest_ok,
        }
    }
}

impl ServerState {
    /// The outbox of connection `id`, if it is still up (break notifications use it).
    pub fn outbox(&self, id: u64) -> Option<Arc<dyn crate::outbox::Outbox>> {
        let conn: Arc<crate::connection::Connection> = self.connections.get(&id)?.upgrade()?;
        Some(conn)
    }

    pub fn new(config: ServerConfig) -> std::io::Result<Self> {
        Self::with_files(config, Arc::default())
    }

    /// The state over a file table shared with other protocols (the binary builds it).
    pub fn with_files(config: ServerConfig, files: Arc<crate::locks::SharedFiles>) -> std::io::Result<Self> {
        let mut shares = Vec::new();
        for (index, s) in config.shares.iter().enumerate() {
            shares.push(Arc::new(Share::open(s, index, &config)?));
        }
        let users = crate::reload::user_table(&config.users);
        let persistent = crate::persistent::PersistentOpens::open(&config)?;
        let server_guid: [u8; 16] = rand::random();
        let pipes = Arc::new(if config.splice_writes {
            crate::splice::PipePool::new(config.max_io_size as usize)
        } else {
            crate::splice::PipePool::disabled()
        });
        let start_time = smb_fscc::system_time_to_filetime(std::time::SystemTime::now());
        // Session ids start at a random point so they are not guessable across restarts.
        let first_session = (rand::random::<u64>() & 0x0000_ffff_ffff_0000) | 1;
        let admission = braid_admission::Admission::new("smb", admission_limits(&config));
        Ok(ServerState {
            config,
            next_share_index: std::sync::atomic::AtomicUsize::new(shares.len()),
            shares: crate::reload::Shares::new(shares),
            users: arc_swap::ArcSwap::from_pointee(users),
            stop: tokio::sync::watch::Sender::new(false),
            reload_hook: Default::default(),
            sessions: Sharded::new(16),
            files: FileTable::over(files),
            durable: Default::default(),
            persistent,
            replay: Default::default(),
            server_guid,
            resume_key_tag: rand::random(),
            start_time,
            next_session: AtomicU64::new(first_session),
            next_file: AtomicU64::new(1),
            next_async: AtomicU64::new(1),
            next_conn: AtomicU64::new(1),
            connections: Sharded::new(16),
            buffers: crate::buffers::BufferPool::default(),
            notify: Default::default(),
            dir_leases: Default::default(),
            pipes,
            ops: smb_ops(),
            other_ops: Vec::new(),
            other_peers: Vec::new(),
            admission,
            other_admissions: Vec::new(),
            admin_admission: crate::admin::admission(),
            failures: Mutex::new(HashMap::new()),
        })
    }

    pub fn new_session_id(&self) -> SessionId {
        SessionId(self.next_session.fetch_add(1, Ordering::Relaxed))
    }

    pub fn new_file_id(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::Relaxed)
    }

    /// FileIds from now on are above `highest` (persistent opens restored at startup).
    pub fn reserve_file_ids(&self, highest: u64) {
        self.next_file.fetch_max(highest.saturating_add(1), Ordering::Relaxed);
    }

    pub fn new_async_id(&self) -> u64 {
        self.next_async.fetch_add(1, Ordering::Relaxed)
    }

    /// Finds a disk share by name, case-insensitively.
    pub fn share(&self, name: &str) -> Option<Arc<Share>> {
        self.shares.iter().find(|s| s.config.name.eq_ignore_ascii_case(name))
    }

    /// Whether any share admits guests (then unknown users are mapped to guest).
    pub fn guest_enabled(&self) -> bool {
        self.shares.iter().any(|s| s.config.guest_ok)
    }

    /// How long to hold back the answer to a failed logon from `ip`: nothing for the first
    /// few failures, then growing, so password guessing is slowed without locking anyone out.
    pub fn record_failure(&self, ip: IpAddr) -> Duration {
        let mut f = lock(&self.failures);
        let now = Instant::now();
        if f.len() > 10_000 {
            f.retain(|_, (_, t)| now.duration_since(*t) < Duration::from_secs(600));
        }
        let e = f.entry(ip).or_insert((0, now));
        if now.duration_since(e.1) > Duration::from_secs(600) {
            *e = (0, now);
        }
        e.0 += 1;
        e.1 = now;
        let n = e.0;
        if n <= 3 {
            Duration::ZERO
        } else {
            Duration::from_millis((200 * u64::from(n - 3)).min(5000))
        }
    }

    pub fn clear_failures(&self, ip: IpAddr) {
        lock(&self.failures).remove(&ip);
    }
}

/// The metrics table of SMB commands, indexed by command code.
fn smb_ops() -> crate::op_metrics::OpTable {
    let names = (0u16..).map_while(smb_wire::Command::from_u16).map(smb_wire::Command::name).collect();
    crate::op_metrics::OpTable::new("smb", names)
}

/// Lets smb-auth look users up without seeing the configuration.
impl smb_auth::UserDb for ServerState {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.users.load().get(&user.to_lowercase()).copied()
    }
}
