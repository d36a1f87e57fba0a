//! Server settings, already validated by the caller (the CLI parses and checks TOML).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// Everything the SMB server needs to run.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Addresses to listen on (IPv4 and IPv6).
    pub listen: Vec<SocketAddr>,
    /// NetBIOS-style server name shown to clients (e.g. "BRAID").
    pub server_name: String,
    /// Domain/workgroup name used in NTLM challenges.
    pub domain: String,
    pub users: Vec<UserConfig>,
    pub shares: Vec<ShareConfig>,
    /// Largest READ/WRITE/TRANSACT payload offered to clients (1 MiB .. 8 MiB).
    pub max_io_size: u32,
    /// Cap on simultaneous TCP connections.
    pub max_connections: usize,
    /// Cap on simultaneous connections from one client address.
    pub max_connections_per_client: usize,
    /// Connections that have not logged on as a named user, held at once: a new one
    /// beyond this closes the oldest of them (never a logged-on connection).
    pub max_unauthenticated: usize,
    /// How long a connection may take to complete its first SESSION_SETUP.
    pub logon_timeout: std::time::Duration,
    /// How long a frame may take to arrive whole once its transport header has.
    pub frame_timeout: std::time::Duration,
    /// How long a request waits for its share's storage before it answers IO_TIMEOUT.
    pub storage_timeout: std::time::Duration,
    /// Storage calls of one share running at once (a hung backend holds this many threads
    /// at most).
    pub storage_threads_per_share: usize,
    /// Cap on open handles per session.
    pub max_opens_per_session: usize,
    /// Every session (but guest and anonymous ones) must sign its requests.
    pub signing_required: bool,
    pub encryption: EncryptionMode,
    /// Ciphers allowed for 3.1.1 clients, most preferred first: this order, not the
    /// client's, picks among the ciphers both sides support.
    pub ciphers: Vec<smb_crypto::Cipher>,
    /// Refuse clients that cannot encrypt where encryption is required (Windows'
    /// RejectUnencryptedAccess); when false they are served unencrypted.
    pub reject_unencrypted: bool,
    /// Loopback address of the admin endpoint (`braid status`, metrics); None = off.
    pub admin: Option<SocketAddr>,
    /// Networks (address, prefix length) whose peers the admin endpoint answers without a
    /// token; loopback by default.
    pub admin_trusted: Vec<(IpAddr, u8)>,
    /// The token other peers must present (`Authorization: Bearer`, or `?token=`).
    pub admin_token: Option<String>,
    /// `/metrics` answers any peer (a Prometheus scraper on another host).
    pub admin_open_metrics: bool,
    /// SMB 3 multichannel: advertise SMB2_GLOBAL_CAP_MULTI_CHANNEL (to clients that offer
    /// it) and accept session binding.
    pub multichannel: bool,
    /// Samba's smbtorture test controls (FSCTL_SMBTORTURE_*): for conformance runs only.
    pub smbtorture_hooks: bool,
    /// The model string answered to macOS clients in the `AAPL` create context: Finder
    /// picks the server's icon by it (Samba's `fruit:model`).
    pub apple_model: String,
    /// Receive large plain WRITE payloads with splice(2) (`splice.rs`) instead of into
    /// buffers (docs/decisions.md has the measurements either way).
    pub splice_writes: bool,
    /// Splice a WRITE only while at least this many large frames are being received at
    /// once, over all connections (1 = whenever splicing is on, the default). A buffered
    /// WRITE to a memory file is copied twice on the receiving worker (socket, then file);
    /// a spliced one is copied once, on the pool, beside the next receive.
    pub splice_min_concurrent: usize,
    /// Channels (connections) one session may have, the first included (1..=256).
    pub max_channels: usize,
    /// Interfaces reported by FSCTL_QUERY_NETWORK_INTERFACE_INFO; empty = the listen
    /// addresses (wildcard listeners report the host's addresses).
    pub interfaces: Vec<InterfaceConfig>,
    /// `server.state_dir`: where state that outlives the process is kept. SMB keeps the
    /// persistent handles of continuously available shares there (`handles.redb`).
    pub state_dir: PathBuf,
}

/// One network interface as reported to multichannel clients (MS-SMB2 2.2.32.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    pub address: IpAddr,
    /// Link speed in bits per second.
    pub speed: u64,
    pub rss: bool,
    pub rdma: bool,
}

/// Server-wide SMB3 encryption policy (MS-SMB2 3.3.1.5 EncryptData).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncryptionMode {
    /// No cipher is negotiated.
    Off,
    /// Clients that ask for encryption get it; nothing requires it.
    Offered,
    /// Every 3.x session must encrypt.
    Required,
}

/// A user account: name and NT hash (MD4 of the UTF-16LE password).
#[derive(Debug, Clone)]
pub struct UserConfig {
    pub name: String,
    pub nt_hash: [u8; 16],
}

/// One exported share.
#[derive(Debug, Clone)]
pub struct ShareConfig {
    pub name: String,
    /// Where its files live.
    pub storage: ShareStorage,
    pub read_only: bool,
    /// Users allowed to connect; empty means every user.
    pub users: Vec<String>,
    /// Guest sessions may connect to this share.
    pub guest_ok: bool,
    /// Requests to this share must be encrypted (MS-SMB2 Share.EncryptData).
    pub encrypt: bool,
    /// Directory opens on this share may get a lease (SMB 3.x directory leasing).
    pub directory_leases: bool,
    pub comment: String,
    /// Most directory handles of this share that watch for changes (CHANGE_NOTIFY) at
    /// once; 0: no limit. Each watch queues up to `braid_filestate::MAX_QUEUED` changes.
    pub max_watches: usize,
    /// The metadata cache in front of a directory share (`braid_vfs::CachedBackend`).
    pub metadata_cache: MetadataCache,
    /// Provisioned performance: IOPS, burst, throughput and per-file limits (`braid_qos`).
    pub limits: braid_qos::Limits,
    /// Continuously available (MS-SMB2 Share.IsCA): persistent handles are granted, and
    /// their state is committed to the handle store before each answer.
    pub continuous_availability: bool,
}

impl ShareConfig {
    /// A read-write share open to every user, with the defaults a `[[share]]` without
    /// other keys gets (directory leases and the metadata cache on, no limits).
    pub fn new(name: &str, storage: ShareStorage) -> Self {
        ShareConfig {
            name: name.into(),
            storage,
            read_only: false,
            users: Vec::new(),
            guest_ok: false,
            encrypt: false,
            directory_leases: true,
            comment: String::new(),
            metadata_cache: MetadataCache::default(),
            max_watches: 0,
            limits: braid_qos::Limits::default(),
            continuous_availability: false,
        }
    }
}

/// A share's `metadata_cache*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataCache {
    /// Whether a directory share's metadata is cached (memory shares never need it).
    pub enabled: bool,
    /// How long cached metadata may be served where outside changes cannot be learnt.
    pub ttl: std::time::Duration,
    /// Most names and listings held.
    pub max_entries: usize,
    /// Most bytes held.
    pub max_bytes: u64,
}

impl Default for MetadataCache {
    fn default() -> Self {
        // On by default: the decision and its measurements are in docs/decisions.md.
        MetadataCache { enabled: true, ttl: std::time::Duration::from_secs(1), max_entries: 100_000, max_bytes: 64 << 20 }
    }
}

impl std::fmt::Display for MetadataCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.enabled {
            return write!(f, "metadata cache off");
        }
        write!(f, "metadata cache {} entries, {} MiB, ttl {} ms", self.max_entries, self.max_bytes >> 20, self.ttl.as_millis())
    }
}

/// The default of [`ServerConfig::state_dir`] (NFS's too).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/braid";

/// The default of [`ShareConfig::max_watches`].
pub const DEFAULT_MAX_WATCHES: usize = 1024;

/// Where a share's files live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareStorage {
    /// A directory of the local file system (`braid_vfs::LocalBackend`), by absolute path.
    Directory(PathBuf),
    /// In memory (`braid_vfs::MemoryBackend`), holding at most `capacity` bytes: the share
    /// starts empty and its contents go when the server stops. For tests and benchmarks
    /// that must not depend on a disk.
    Memory {
        /// Most bytes the share holds; writes beyond fail with STATUS_DISK_FULL.
        capacity: u64,
    },
}

impl std::fmt::Display for ShareStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShareStorage::Directory(p) => write!(f, "{}", p.display()),
            ShareStorage::Memory { capacity } => write!(f, "memory, {capacity} bytes"),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 4455))],
            server_name: "BRAID".into(),
            domain: "WORKGROUP".into(),
            users: Vec::new(),
            shares: Vec::new(),
            max_io_size: 2 << 20,
            max_connections: 1024,
            max_connections_per_client: 256,
            max_unauthenticated: 256,
            logon_timeout: std::time::Duration::from_secs(20),
            frame_timeout: std::time::Duration::from_secs(30),
            storage_timeout: std::time::Duration::from_secs(45),
            storage_threads_per_share: 64,
            max_opens_per_session: 16384,
            signing_required: false,
            encryption: EncryptionMode::Offered,
            // Windows' order: AES-128-GCM first.
            ciphers: vec![smb_crypto::Cipher::Aes128Gcm, smb_crypto::Cipher::Aes128Ccm, smb_crypto::Cipher::Aes256Gcm, smb_crypto::Cipher::Aes256Ccm],
            reject_unencrypted: true,
            admin: None,
            admin_trusted: crate::admin::http::loopback(),
            admin_token: None,
            admin_open_metrics: false,
            multichannel: true,
            smbtorture_hooks: false,
            apple_model: "Braid".into(),
            splice_writes: true,
            splice_min_concurrent: 1,
            max_channels: 32,
            interfaces: Vec::new(),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
        }
    }
}
