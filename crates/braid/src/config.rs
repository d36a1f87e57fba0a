//! Reading and validating `braid.toml`, and turning it into a [`ServerConfig`].
//!
//! Every error names the file, the line and the key at fault, e.g.
//! `braid.toml:12: share "data": path "/nope" does not exist`.

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use smb_server::{EncryptionMode, InterfaceConfig, MetadataCache, ServerConfig, ShareConfig, ShareStorage, UserConfig, DEFAULT_MAX_WATCHES};
use toml::Spanned;

use crate::names;

/// Smallest and largest accepted `max_io_size`.
const MIN_IO: u64 = 1 << 20;
const MAX_IO: u64 = 8 << 20;
/// Longest `apple_model`, in characters (the string travels in every AAPL answer).
const MAX_APPLE_MODEL: usize = 64;

/// A validated configuration file.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Settings for the SMB server.
    pub server: ServerConfig,
    /// The `log` tracing filter, if the file sets one.
    pub log: Option<String>,
    /// NFS listeners and exported shares (`config/nfs.rs`).
    pub nfs: NfsSettings,
}

/// A configuration problem, located in the file where possible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// File name as shown to the user.
    pub file: String,
    /// 1-based line number, when the problem has a place in the file.
    pub line: Option<usize>,
    /// What is wrong, naming the key.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file, line, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Reads and validates the file at `path`. Relative share paths are taken relative to the
/// file's directory, so a config works the same from any working directory.
pub fn load(path: &Path) -> anyhow::Result<Loaded> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let base = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok(parse(&text, &path.display().to_string(), &base)?)
}

/// Parses and validates config `text`; `file` is used in messages and relative share paths
/// are resolved against `base_dir`.
pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<Loaded, ConfigError> {
    let ctx = Ctx { text, file };
    let raw: RawConfig = toml::from_str(text).map_err(|e| ctx.toml_error(&e))?;
    ctx.validate(raw, base_dir)
}

// ---- file schema -------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    server: Option<RawServer>,
    #[serde(default)]
    user: Vec<Spanned<RawUser>>,
    #[serde(default)]
    share: Vec<Spanned<RawShare>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<Spanned<Vec<Spanned<String>>>>,
    server_name: Option<Spanned<String>>,
    domain: Option<Spanned<String>>,
    // Integer bytes or a string like "4M": checked by hand for a better message.
    max_io_size: Option<Spanned<toml::Value>>,
    max_connections: Option<Spanned<i64>>,
    max_connections_per_client: Option<Spanned<i64>>,
    max_unauthenticated: Option<Spanned<i64>>,
    // Durations: "20s", "500ms", or seconds.
    logon_timeout: Option<Spanned<toml::Value>>,
    frame_timeout: Option<Spanned<toml::Value>>,
    storage_timeout: Option<Spanned<toml::Value>>,
    storage_threads_per_share: Option<Spanned<i64>>,
    log: Option<Spanned<String>>,
    signing: Option<Spanned<String>>,
    encryption: Option<Spanned<String>>,
    ciphers: Option<Spanned<Vec<Spanned<String>>>>,
    reject_unencrypted: Option<bool>,
    admin: Option<Spanned<String>>,
    admin_trusted: Option<Spanned<Vec<Spanned<String>>>>,
    admin_token: Option<Spanned<String>>,
    admin_open_metrics: Option<bool>,
    multichannel: Option<bool>,
    smbtorture_hooks: Option<bool>,
    apple_model: Option<Spanned<String>>,
    splice_writes: Option<bool>,
    splice_min_concurrent: Option<Spanned<i64>>,
    max_channels: Option<Spanned<i64>>,
    interface: Option<Vec<Spanned<RawInterface>>>,
    nfs_listen: Option<Spanned<Vec<Spanned<String>>>>,
    state_dir: Option<Spanned<String>>,
    nfs_max_connections_per_client: Option<Spanned<i64>>,
    nfs_max_calls_per_client: Option<Spanned<i64>>,
    nfs_portmapper: Option<Spanned<String>>,
    nlm_port: Option<Spanned<i64>>,
    nsm_port: Option<Spanned<i64>>,
    nfs_grace: Option<Spanned<toml::Value>>,
    nfs_lock_probe: Option<Spanned<toml::Value>>,
}

/// `[[server.interface]]`: one interface reported to multichannel clients.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterface {
    address: Option<Spanned<String>>,
    speed: Option<Spanned<i64>>,
    rss: Option<bool>,
    rdma: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUser {
    name: Spanned<String>,
    // Optional here so that a `password` key gets its own, clearer message.
    nt_hash: Option<Spanned<String>>,
    password: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShare {
    name: Spanned<String>,
    // Required unless `backend = "memory"`: checked by hand.
    path: Option<Spanned<String>>,
    backend: Option<Spanned<String>>,
    // Integer bytes or a string like "1G"; memory shares only.
    capacity: Option<Spanned<toml::Value>>,
    #[serde(default)]
    read_only: bool,
    users: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    guest_ok: bool,
    #[serde(default)]
    encrypt: bool,
    directory_leases: Option<bool>,
    #[serde(default)]
    comment: String,
    metadata_cache: Option<Spanned<bool>>,
    // A duration such as "1s" or "500ms".
    metadata_ttl: Option<Spanned<toml::Value>>,
    metadata_cache_entries: Option<Spanned<i64>>,
    // Integer bytes or a string like "64MiB".
    metadata_cache_bytes: Option<Spanned<toml::Value>>,
    max_watches: Option<Spanned<i64>>,
    continuous_availability: Option<Spanned<bool>>,
    nfs: Option<Spanned<bool>>,
    nfs_clients: Option<Spanned<Vec<Spanned<String>>>>,
    nfs_root_squash: Option<Spanned<bool>>,
    nfs_all_squash: Option<Spanned<bool>>,
    nfs_anonuid: Option<Spanned<i64>>,
    nfs_anongid: Option<Spanned<i64>>,
    nfs_auth_none: Option<Spanned<bool>>,
    // Provisioned performance (`config/limits.rs`): integers, or sizes per second.
    iops: Option<Spanned<i64>>,
    burst_iops: Option<Spanned<i64>>,
    burst_seconds: Option<Spanned<i64>>,
    burst_credits: Option<Spanned<i64>>,
    throughput: Option<Spanned<toml::Value>>,
    ingress: Option<Spanned<toml::Value>>,
    egress: Option<Spanned<toml::Value>>,
    max_file_iops: Option<Spanned<i64>>,
    max_file_throughput: Option<Spanned<toml::Value>>,
    provisioned: Option<Spanned<limits::RawProvisioned>>,
}

// ---- validation --------------------------------------------------------------------------

struct Ctx<'a> {
    text: &'a str,
    file: &'a str,
}

impl Ctx<'_> {
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        1 + self.text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count()
    }

    fn err(&self, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        ConfigError { file: self.file.to_string(), line: Some(self.line_of(span.start)), message: message.into() }
    }

    /// Turns a TOML/serde error into a located one, adding the key it concerns when the
    /// message itself does not say (e.g. "invalid type: string, expected a boolean").
    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let message = e.message().trim().to_string();
        let Some(span) = e.span() else {
            return ConfigError { file: self.file.to_string(), line: None, message };
        };
        let message = match locate::key_at(self.text, span.start) {
            // "unknown field `x`" already names the key: only say whose it is.
            Some(mut place) if place.key.as_ref().is_some_and(|k| message.contains(&format!("`{k}`"))) => {
                place.key = None;
                match place.describe() {
                    owner if owner.is_empty() => message,
                    owner => format!("{owner}: {message}"),
                }
            }
            Some(place) => format!("{}: {message}", place.describe()),
            None => message,
        };
        self.err(span, message)
    }

    fn validate(&self, raw: RawConfig, base_dir: &Path) -> Result<Loaded, ConfigError> {
        let mut server = ServerConfig::default();
        let mut log = None;
        let mut admin_set = false;
        let mut nfs = NfsSettings::default();
        if let Some(mut s) = raw.server {
            admin_set = s.admin.is_some();
            let nfs_keys = nfs::RawNfsServer {
                listen: s.nfs_listen.take(),
                state_dir: s.state_dir.take(),
                max_connections_per_client: s.nfs_max_connections_per_client.take(),
                max_calls_per_client: s.nfs_max_calls_per_client.take(),
                portmapper: s.nfs_portmapper.take(),
                nlm_port: s.nlm_port.take(),
                nsm_port: s.nsm_port.take(),
                grace: s.nfs_grace.take(),
                lock_probe: s.nfs_lock_probe.take(),
            };
            self.apply_server(s, &mut server, &mut log)?;
            self.apply_nfs_server(nfs_keys, &server.listen, base_dir, &mut nfs)?;
            server.state_dir = nfs.config.state_dir.clone();
            // One frame timeout for both protocols: an RPC record is NFS's frame.
            nfs.config.record_timeout = server.frame_timeout;
        }
        if !admin_set {
            server.admin = default_admin(&server.listen);
        }
        let user_names = self.users(&raw.user, &mut server)?;

        let mut share_names = HashSet::new();
        for share in raw.share {
            let span = share.span();
            let s = share.into_inner();
            let name = s.name.get_ref();
            let what = format!("share {name:?}");
            names::check_share_name(name).map_err(|m| self.err(s.name.span(), format!("{what}: name {m}")))?;
            if !share_names.insert(name.to_lowercase()) {
                return Err(self.err(s.name.span(), format!("{what}: duplicate share name")));
            }
            let storage = self.share_storage(&s, span, base_dir, &what)?;
            let metadata_cache = self.share_metadata_cache(&s, &what)?;
            let max_watches = self.max_watches(&s, &what)?;
            let limits = self.share_limits(&s, &what)?;
            let continuous_availability = self.continuous_availability(&s, &storage, &what)?;
            if let Some(rules) = self.share_nfs(&s, &what, &nfs)? {
                nfs.exports.push((server.shares.len(), rules));
            }
            let mut users = Vec::new();
            for u in s.users.unwrap_or_default() {
                if !user_names.contains(&u.get_ref().to_lowercase()) {
                    return Err(self.err(u.span(), format!("{what}: users: unknown user {:?}", u.get_ref())));
                }
                users.push(u.into_inner());
            }
            server.shares.push(ShareConfig {
                name: name.clone(),
                storage,
                read_only: s.read_only,
                users,
                guest_ok: s.guest_ok,
                encrypt: s.encrypt,
                directory_leases: s.directory_leases.unwrap_or(true),
                comment: s.comment,
                metadata_cache,
                max_watches,
                limits,
                continuous_availability,
            });
        }
        Ok(Loaded { server, log, nfs })
    }

    /// The `[[user]]` entries; returns their lowercased names (Windows treats user and
    /// share names case-insensitively, so duplicates do too).
    fn users(&self, raw: &[Spanned<RawUser>], server: &mut ServerConfig) -> Result<HashSet<String>, ConfigError> {
        let mut user_names = HashSet::new();
        for user in raw {
            let span = user.span();
            let u = user.get_ref();
            let name = u.name.get_ref();
            let who = format!("user {name:?}");
            names::check_user_name(name).map_err(|m| self.err(u.name.span(), format!("{who}: name {m}")))?;
            if !user_names.insert(name.to_lowercase()) {
                return Err(self.err(u.name.span(), format!("{who}: duplicate user name")));
            }
            if let Some(pw) = &u.password {
                return Err(self.err(
                    pw.span(),
                    format!(
                        "{who}: key `password` is not allowed: plaintext passwords are never \
                         stored; set `nt_hash`, e.g. with `braid user add {name}`"
                    ),
                ));
            }
            let Some(hash) = &u.nt_hash else {
                return Err(self.err(span, format!("{who}: missing key `nt_hash`")));
            };
            let nt_hash =
                parse_nt_hash(hash.get_ref()).ok_or_else(|| self.err(hash.span(), format!("{who}: nt_hash must be exactly 32 hex digits")))?;
            server.users.push(UserConfig { name: name.clone(), nt_hash });
        }
        Ok(user_names)
    }

    /// A share's `continuous_availability`: persistent handles, kept in the state
    /// directory; a memory share loses its files with the process, so it cannot be.
    fn continuous_availability(&self, s: &RawShare, storage: &ShareStorage, what: &str) -> Result<bool, ConfigError> {
        let Some(ca) = &s.continuous_availability else { return Ok(false) };
        if *ca.get_ref() && matches!(storage, ShareStorage::Memory { .. }) {
            return Err(self.err(
                ca.span(),
                format!("{what}: continuous_availability needs a directory share (backend = \"memory\" loses its files on restart)"),
            ));
        }
        Ok(*ca.get_ref())
    }

    /// A share's `max_watches`: how many directory handles may watch for changes at once,
    /// 0 for no limit; [`DEFAULT_MAX_WATCHES`] when absent.
    fn max_watches(&self, s: &RawShare, what: &str) -> Result<usize, ConfigError> {
        let Some(n) = &s.max_watches else { return Ok(DEFAULT_MAX_WATCHES) };
        let value = *n.get_ref();
        if !(0..=1_000_000).contains(&value) {
            return Err(self.err(n.span(), format!("{what}: max_watches: {value} is out of range (0..1000000; 0 means no limit)")));
        }
        Ok(value as usize)
    }

    /// `admin_trusted` (networks answered without a token), `admin_token` (at least 16
    /// characters), `admin_open_metrics`.
    fn apply_admin_access(
        &self,
        trusted: Option<Spanned<Vec<Spanned<String>>>>,
        token: Option<Spanned<String>>,
        open_metrics: Option<bool>,
        server: &mut ServerConfig,
    ) -> Result<(), ConfigError> {
        if let Some(list) = trusted {
            server.admin_trusted = Vec::new();
            for net in list.into_inner() {
                let parsed = nfs_server::ClientNet::parse(net.get_ref()).map_err(|m| self.err(net.span(), format!("server.admin_trusted: {m}")))?;
                server.admin_trusted.push(parsed.parts());
            }
        }
        if let Some(t) = token {
            let text = t.get_ref();
            if text.chars().count() < 16 || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(self.err(t.span(), "server.admin_token: at least 16 characters, no spaces"));
            }
            server.admin_token = Some(t.into_inner());
        }
        if let Some(m) = open_metrics {
            server.admin_open_metrics = m;
        }
        Ok(())
    }

    /// The limits that protect the server: connections per client and not logged on, the
    /// logon, frame and storage time limits, storage calls per share.
    fn apply_limits(&self, s: &RawServer, server: &mut ServerConfig) -> Result<(), ConfigError> {
        if let Some(n) = &s.max_connections_per_client {
            server.max_connections_per_client = self.bounded_count(n, "server.max_connections_per_client", 1_000_000)?;
        }
        if let Some(n) = &s.max_unauthenticated {
            server.max_unauthenticated = self.bounded_count(n, "server.max_unauthenticated", 1_000_000)?;
        }
        if let Some(v) = &s.logon_timeout {
            server.logon_timeout = self.timeout(v, "server.logon_timeout")?;
        }
        if let Some(v) = &s.frame_timeout {
            server.frame_timeout = self.timeout(v, "server.frame_timeout")?;
        }
        if let Some(v) = &s.storage_timeout {
            server.storage_timeout = self.timeout(v, "server.storage_timeout")?;
        }
        if let Some(n) = &s.storage_threads_per_share {
            server.storage_threads_per_share = self.bounded_count(n, "server.storage_threads_per_share", 4096)?;
        }
        Ok(())
    }

    /// A count from 1 to `max`.
    pub(super) fn bounded_count(&self, n: &Spanned<i64>, key: &str, max: i64) -> Result<usize, ConfigError> {
        let value = *n.get_ref();
        if !(1..=max).contains(&value) {
            return Err(self.err(n.span(), format!("{key}: {value} is out of range (1..{max})")));
        }
        Ok(value as usize)
    }

    /// A time limit: "20s", "500ms", "2m" or seconds; 100 ms to 1 hour.
    fn timeout(&self, v: &Spanned<toml::Value>, key: &str) -> Result<std::time::Duration, ConfigError> {
        let d = metadata_ttl(v.get_ref()).map_err(|e| self.err(v.span(), format!("{key}: {e}")))?;
        if d < std::time::Duration::from_millis(100) {
            return Err(self.err(v.span(), format!("{key}: {} is too short (at least 100ms)", v.get_ref())));
        }
        Ok(d)
    }

    fn apply_server(&self, s: RawServer, server: &mut ServerConfig, log: &mut Option<String>) -> Result<(), ConfigError> {
        self.apply_limits(&s, server)?;
        if let Some(listen) = s.listen {
            self.apply_listen(listen, server)?;
        }
        if let Some(n) = s.server_name {
            names::check_netbios_name(n.get_ref()).map_err(|m| self.err(n.span(), format!("server.server_name: {m}")))?;
            server.server_name = n.into_inner();
        }
        if let Some(d) = s.domain {
            names::check_netbios_name(d.get_ref()).map_err(|m| self.err(d.span(), format!("server.domain: {m}")))?;
            server.domain = d.into_inner();
        }
        if let Some(v) = s.max_io_size {
            let size = io_size(v.get_ref()).map_err(|m| self.err(v.span(), format!("server.max_io_size: {m}")))?;
            server.max_io_size = size;
        }
        if let Some(n) = s.max_connections {
            let value = *n.get_ref();
            if !(1..=1_000_000).contains(&value) {
                return Err(self.err(n.span(), format!("server.max_connections: {value} is out of range (1..1000000)")));
            }
            server.max_connections = value as usize;
        }
        self.apply_security(s.signing, s.encryption, s.ciphers, server)?;
        if let Some(a) = s.admin {
            server.admin = match a.get_ref().as_str() {
                "off" => None,
                text => Some(text.parse().map_err(|_| {
                    self.err(a.span(), format!("server.admin: {text:?} is neither \"off\" nor an IP:PORT address (e.g. \"127.0.0.1:4456\")"))
                })?),
            };
        }
        self.apply_admin_access(s.admin_trusted, s.admin_token, s.admin_open_metrics, server)?;
        if let Some(r) = s.reject_unencrypted {
            server.reject_unencrypted = r;
        }
        if let Some(m) = s.multichannel {
            server.multichannel = m;
        }
        if let Some(h) = s.smbtorture_hooks {
            server.smbtorture_hooks = h;
        }
        if let Some(m) = s.apple_model {
            let len = m.get_ref().chars().count();
            if !(1..=MAX_APPLE_MODEL).contains(&len) || m.get_ref().chars().any(char::is_control) {
                return Err(self.err(m.span(), format!("server.apple_model: 1 to {MAX_APPLE_MODEL} printable characters")));
            }
            server.apple_model = m.into_inner();
        }
        if let Some(w) = s.splice_writes {
            server.splice_writes = w;
        }
        if let Some(n) = s.splice_min_concurrent {
            let value = *n.get_ref();
            if !(1..=1024).contains(&value) {
                return Err(self.err(n.span(), format!("server.splice_min_concurrent: {value} is out of range (1..1024)")));
            }
            server.splice_min_concurrent = value as usize;
        }
        if let Some(n) = s.max_channels {
            let value = *n.get_ref();
            if !(1..=256).contains(&value) {
                return Err(self.err(n.span(), format!("server.max_channels: {value} is out of range (1..256)")));
            }
            server.max_channels = value as usize;
        }
        for iface in s.interface.unwrap_or_default() {
            self.apply_interface(iface, server)?;
        }
        if let Some(l) = s.log {
            tracing_subscriber::EnvFilter::try_new(l.get_ref())
                .map_err(|e| self.err(l.span(), format!("server.log: {:?} is not a valid filter: {e}", l.get_ref())))?;
            *log = Some(l.into_inner());
        }
        Ok(())
    }

    /// Where a share's files live: `backend = "local"` (the default) needs `path`;
    /// `backend = "memory"` takes an optional `capacity` and no `path`.
    fn share_storage(&self, s: &RawShare, span: Range<usize>, base_dir: &Path, what: &str) -> Result<ShareStorage, ConfigError> {
        let memory = match &s.backend {
            None => false,
            Some(b) if b.get_ref() == "local" => false,
            Some(b) if b.get_ref() == "memory" => true,
            Some(b) => return Err(self.err(b.span(), format!("{what}: backend {:?} is unknown (use \"local\" or \"memory\")", b.get_ref()))),
        };
        if !memory {
            if let Some(c) = &s.capacity {
                return Err(self.err(c.span(), format!("{what}: capacity applies only to backend = \"memory\"")));
            }
            let path = s.path.as_ref().ok_or_else(|| self.err(span, format!("{what}: missing field `path`")))?;
            return self.share_path(path, base_dir, what).map(ShareStorage::Directory);
        }
        if let Some(p) = &s.path {
            return Err(self.err(p.span(), format!("{what}: a memory share has no path")));
        }
        let capacity = match &s.capacity {
            None => DEFAULT_MEMORY_CAPACITY,
            Some(c) => share_capacity(c.get_ref()).map_err(|m| self.err(c.span(), format!("{what}: capacity: {m}")))?,
        };
        Ok(ShareStorage::Memory { capacity })
    }

    /// `metadata_cache`, `metadata_ttl`, `metadata_cache_entries`, `metadata_cache_bytes`.
    fn share_metadata_cache(&self, s: &RawShare, what: &str) -> Result<MetadataCache, ConfigError> {
        let mut m = MetadataCache::default();
        let memory = s.backend.as_ref().is_some_and(|b| b.get_ref() == "memory");
        let spans = [
            s.metadata_cache.as_ref().map(|v| v.span()),
            s.metadata_ttl.as_ref().map(|v| v.span()),
            s.metadata_cache_entries.as_ref().map(|v| v.span()),
            s.metadata_cache_bytes.as_ref().map(|v| v.span()),
        ];
        if let (true, Some(span)) = (memory, spans.into_iter().flatten().min_by_key(|r| r.start)) {
            return Err(self.err(span, format!("{what}: the metadata cache applies only to directory shares (a memory share needs none)")));
        }
        if let Some(on) = &s.metadata_cache {
            m.enabled = *on.get_ref();
        }
        if let Some(t) = &s.metadata_ttl {
            m.ttl = metadata_ttl(t.get_ref()).map_err(|e| self.err(t.span(), format!("{what}: metadata_ttl: {e}")))?;
        }
        if let Some(n) = &s.metadata_cache_entries {
            let value = *n.get_ref();
            if !(64..=100_000_000).contains(&value) {
                return Err(self.err(n.span(), format!("{what}: metadata_cache_entries: {value} is out of range (64..100000000)")));
            }
            m.max_entries = value as usize;
        }
        if let Some(b) = &s.metadata_cache_bytes {
            m.max_bytes = cache_bytes(b.get_ref()).map_err(|e| self.err(b.span(), format!("{what}: metadata_cache_bytes: {e}")))?;
        }
        Ok(m)
    }

    /// `server.listen`: at least one IP:PORT address, none twice.
    fn apply_listen(&self, listen: Spanned<Vec<Spanned<String>>>, server: &mut ServerConfig) -> Result<(), ConfigError> {
        if listen.get_ref().is_empty() {
            return Err(self.err(listen.span(), "server.listen: needs at least one address"));
        }
        server.listen.clear();
        for addr in listen.into_inner() {
            let parsed: SocketAddr = addr.get_ref().trim().parse().map_err(|_| {
                self.err(
                    addr.span(),
                    format!(
                        "server.listen: {:?} is not an IP:PORT address \
                         (e.g. \"0.0.0.0:445\" or \"[::]:445\")",
                        addr.get_ref()
                    ),
                )
            })?;
            if server.listen.contains(&parsed) {
                return Err(self.err(addr.span(), format!("server.listen: {parsed} is listed twice")));
            }
            server.listen.push(parsed);
        }
        Ok(())
    }

    /// `server.signing`, `server.encryption` and `server.ciphers`.
    fn apply_security(
        &self,
        signing: Option<Spanned<String>>,
        encryption: Option<Spanned<String>>,
        ciphers: Option<Spanned<Vec<Spanned<String>>>>,
        server: &mut ServerConfig,
    ) -> Result<(), ConfigError> {
        if let Some(v) = signing {
            server.signing_required = match v.get_ref().as_str() {
                "enabled" => false,
                "required" => true,
                other => return Err(self.err(v.span(), format!("server.signing: {other:?} is not one of \"enabled\", \"required\""))),
            };
        }
        if let Some(v) = encryption {
            server.encryption = match v.get_ref().as_str() {
                "off" => EncryptionMode::Off,
                "offered" => EncryptionMode::Offered,
                "required" => EncryptionMode::Required,
                other => return Err(self.err(v.span(), format!("server.encryption: {other:?} is not one of \"off\", \"offered\", \"required\""))),
            };
        }
        if let Some(list) = ciphers {
            let mut ciphers = Vec::new();
            for c in list.get_ref() {
                let cipher = parse_cipher(c.get_ref()).ok_or_else(|| {
                    self.err(
                        c.span(),
                        format!("server.ciphers: {:?} is not one of \"aes-128-gcm\", \"aes-128-ccm\", \"aes-256-gcm\", \"aes-256-ccm\"", c.get_ref()),
                    )
                })?;
                if ciphers.contains(&cipher) {
                    return Err(self.err(c.span(), format!("server.ciphers: {:?} is listed twice", c.get_ref())));
                }
                ciphers.push(cipher);
            }
            if ciphers.is_empty() {
                return Err(self.err(list.span(), "server.ciphers: the list is empty (use encryption = \"off\" instead)".to_string()));
            }
            server.ciphers = ciphers;
        }
        Ok(())
    }

    /// One `[[server.interface]]`: a connectable address, listed once, with a positive speed.
    fn apply_interface(&self, iface: Spanned<RawInterface>, server: &mut ServerConfig) -> Result<(), ConfigError> {
        let span = iface.span();
        let i = iface.into_inner();
        let Some(addr) = i.address else {
            return Err(self.err(span, "server.interface: missing key `address`"));
        };
        let address: std::net::IpAddr = addr.get_ref().trim().parse().map_err(|_| {
            self.err(addr.span(), format!("server.interface: address {:?} is not an IP address (e.g. \"192.168.1.10\")", addr.get_ref()))
        })?;
        if address.is_unspecified() || address.is_multicast() {
            return Err(self.err(addr.span(), format!("server.interface: address {address} cannot be connected to")));
        }
        if server.interfaces.iter().any(|x| x.address == address) {
            return Err(self.err(addr.span(), format!("server.interface: address {address} is listed twice")));
        }
        let speed = match i.speed {
            None => 10_000_000_000,
            Some(v) if *v.get_ref() > 0 => *v.get_ref() as u64,
            Some(v) => {
                return Err(self.err(v.span(), format!("server.interface: speed {} must be a positive number of bits per second", v.get_ref())))
            }
        };
        server.interfaces.push(InterfaceConfig { address, speed, rss: i.rss.unwrap_or(true), rdma: i.rdma.unwrap_or(false) });
        Ok(())
    }

    fn share_path(&self, path: &Spanned<String>, base_dir: &Path, what: &str) -> Result<PathBuf, ConfigError> {
        let shown = path.get_ref();
        if shown.is_empty() {
            return Err(self.err(path.span(), format!("{what}: path is empty")));
        }
        let full = base_dir.join(shown);
        match std::fs::metadata(&full) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(self.err(path.span(), format!("{what}: path {shown:?} is not a directory"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(self.err(path.span(), format!("{what}: path {shown:?} does not exist"))),
            Err(e) => return Err(self.err(path.span(), format!("{what}: path {shown:?} cannot be accessed: {e}"))),
        }
        // The server gets an absolute path so its behaviour does not depend on the cwd.
        std::fs::canonicalize(&full).map_err(|e| self.err(path.span(), format!("{what}: path {shown:?} cannot be resolved: {e}")))
    }
}

/// The admin endpoint when the file does not name one: loopback, the first SMB port plus
/// 10000 (so several servers on one machine do not collide, and scripts that put servers on
/// neighbouring ports do not meet it): 4455 gives 14455.
pub fn default_admin(listen: &[SocketAddr]) -> Option<SocketAddr> {
    let smb = listen.first()?.port();
    let port = smb.checked_add(10_000).or_else(|| smb.checked_sub(10_000))?;
    Some(SocketAddr::from(([127, 0, 0, 1], port)))
}

/// Parses a cipher name as used in the configuration and by `braid bench`.
pub fn parse_cipher(s: &str) -> Option<smb_crypto::Cipher> {
    use smb_crypto::Cipher;
    Some(match s.to_ascii_lowercase().as_str() {
        "aes-128-gcm" => Cipher::Aes128Gcm,
        "aes-128-ccm" => Cipher::Aes128Ccm,
        "aes-256-gcm" => Cipher::Aes256Gcm,
        "aes-256-ccm" => Cipher::Aes256Ccm,
        _ => return None,
    })
}

/// Decodes a 32-hex-digit NT hash.
pub fn parse_nt_hash(s: &str) -> Option<[u8; 16]> {
    let bytes = hex::decode(s.trim()).ok()?;
    bytes.try_into().ok()
}

/// Checks a `max_io_size` value: integer bytes or "1M", "4MiB", "1024K", ...
fn io_size(v: &toml::Value) -> Result<u32, String> {
    let bytes = match v {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative"))?,
        toml::Value::String(s) => parse_size(s).ok_or_else(|| format!("{s:?} is not a size (use bytes, or e.g. \"1M\", \"4MiB\")"))?,
        other => return Err(format!("expected a size such as \"1M\" or 1048576, found a {}", other.type_str())),
    };
    if !(MIN_IO..=MAX_IO).contains(&bytes) {
        return Err(format!("{v} is out of range (must be 1M..8M)"));
    }
    // In range, so it fits.
    Ok(bytes as u32)
}

/// Capacity of a memory share whose file names none.
const DEFAULT_MEMORY_CAPACITY: u64 = 1 << 30;

/// Checks a memory share's `capacity`: integer bytes or "512M", "4G", ...; at least 1 MiB.
fn share_capacity(v: &toml::Value) -> Result<u64, String> {
    let bytes = match v {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative"))?,
        toml::Value::String(s) => parse_size(s).ok_or_else(|| format!("{s:?} is not a size (use bytes, or e.g. \"512M\", \"4G\")"))?,
        other => return Err(format!("expected a size such as \"1G\" or 1073741824, found a {}", other.type_str())),
    };
    if bytes < 1 << 20 {
        return Err(format!("{v} is too small (at least 1M)"));
    }
    Ok(bytes)
}

/// Checks a duration such as `metadata_ttl`: "1s", "500ms", "2m" or a number of seconds;
/// 0 to 1 hour.
fn metadata_ttl(v: &toml::Value) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let d = match v {
        toml::Value::Integer(n) => Duration::from_secs(u64::try_from(*n).map_err(|_| format!("{n} is negative"))?),
        toml::Value::String(s) => parse_duration(s).ok_or_else(|| format!("{s:?} is not a duration (e.g. \"1s\", \"500ms\")"))?,
        other => return Err(format!("expected a duration such as \"1s\", found a {}", other.type_str())),
    };
    if d > Duration::from_secs(3600) {
        return Err(format!("{v} is too long (at most 1h)"));
    }
    Ok(d)
}

/// Parses "250ms", "1s", "1.5s", "2m", "1h".
fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    let end = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let n: f64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (0.0..=1e7).contains(&secs).then(|| std::time::Duration::from_secs_f64(secs))
}

/// Checks a `metadata_cache_bytes` value: bytes or "64MiB", "1G", ...; 1 MiB to 64 GiB.
fn cache_bytes(v: &toml::Value) -> Result<u64, String> {
    let bytes = match v {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative"))?,
        toml::Value::String(s) => parse_size(s).ok_or_else(|| format!("{s:?} is not a size (use bytes, or e.g. \"64MiB\")"))?,
        other => return Err(format!("expected a size such as \"64MiB\", found a {}", other.type_str())),
    };
    if !(1 << 20..=64 << 30).contains(&bytes) {
        return Err(format!("{v} is out of range (1M..64G)"));
    }
    Ok(bytes)
}

/// Parses a byte count with an optional binary unit suffix (K, KiB, M, MiB, G, GiB, T, TiB; any case).
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(digits_end);
    let n: u64 = digits.parse().ok()?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

mod limits;
pub use limits::describe as describe_limits;
mod locate;
mod nfs;
pub use nfs::NfsSettings;

#[cfg(test)]
mod tests;
