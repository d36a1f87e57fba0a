//! NFS settings, already validated by the caller (the CLI parses and checks TOML).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

/// Where the handle key lives when the configuration names no `state_dir`.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/braid";

/// Server-wide NFS settings.
#[derive(Debug, Clone)]
pub struct NfsConfig {
    /// Addresses to listen on; NFS, MOUNT and the NULL procedure share each port.
    pub listen: Vec<SocketAddr>,
    /// Directory holding `nfs-handle.key` (created 0700 when missing).
    pub state_dir: PathBuf,
    /// Cap on simultaneous TCP connections.
    pub max_connections: usize,
    /// Cap on simultaneous connections from one client address (Linux's `nconnect` opens
    /// up to 16).
    pub max_connections_per_client: usize,
    /// Calls of one client address running at once, over all its connections.
    pub max_calls_per_client: usize,
    /// How long an RPC record may take to arrive whole once its first bytes have.
    pub record_timeout: std::time::Duration,
    /// How clients learn the port: Braid's own portmapper, the system's rpcbind, or neither.
    pub portmapper: PortmapperMode,
    /// The port Braid's own portmapper listens on (111; tests use another).
    pub portmapper_port: u16,
    /// The port NLM v4 (locks) listens on, TCP and UDP, at every NFS address; fixed so
    /// firewalls can be written for it. 0: no lock service.
    pub nlm_port: u16,
    /// The port NSM v1 (status monitor: clients' reboot notices) listens on, TCP and UDP.
    pub nsm_port: u16,
    /// How long after a restart only reclaims of the previous run's locks are taken.
    pub grace: std::time::Duration,
    /// How long a lock-holding client host may be silent before it is probed; three
    /// missed probes in a row release its locks.
    pub lock_probe: std::time::Duration,
}

/// NLM's port by default (Solaris' lockd port, which firewall guides name).
pub const DEFAULT_NLM_PORT: u16 = 4045;
/// NSM's port by default: the one after NLM's.
pub const DEFAULT_NSM_PORT: u16 = 4046;
/// How often silent lock holders are probed by default: a vanished host's locks go after
/// about four times this.
pub const DEFAULT_LOCK_PROBE: std::time::Duration = std::time::Duration::from_secs(60);
/// The grace period by default (as Linux's lockd and nfs-ganesha).
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(90);

/// `[server] nfs_portmapper`: how clients that ask a portmapper (port 111) first find
/// NFS and MOUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PortmapperMode {
    /// `register` when an rpcbind answers on this host, otherwise `serve`; a port 111 that
    /// cannot be had is a warning, not an error.
    Auto,
    /// Register NFS and MOUNT with the system's rpcbind at start, unregister at stop.
    Register,
    /// Answer portmapper v2 and rpcbind v3/v4 queries on port 111 (TCP and UDP) for
    /// Braid's own programs.
    Serve,
    /// Nothing: clients name the port (`port=2049,mountport=2049`).
    #[default]
    Off,
}

impl PortmapperMode {
    /// The configuration word.
    pub fn word(self) -> &'static str {
        match self {
            PortmapperMode::Auto => "auto",
            PortmapperMode::Register => "register",
            PortmapperMode::Serve => "serve",
            PortmapperMode::Off => "off",
        }
    }

    /// The configuration word: "auto", "register", "serve", "off".
    pub fn parse(s: &str) -> Option<PortmapperMode> {
        Some(match s {
            "auto" => PortmapperMode::Auto,
            "register" => PortmapperMode::Register,
            "serve" => PortmapperMode::Serve,
            "off" => PortmapperMode::Off,
            _ => return None,
        })
    }
}

impl Default for NfsConfig {
    fn default() -> Self {
        NfsConfig {
            listen: Vec::new(),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            max_connections: 1024,
            max_connections_per_client: 64,
            max_calls_per_client: 1024,
            record_timeout: std::time::Duration::from_secs(30),
            // Off unless the configuration asks: a library user or a test binds no
            // privileged port and touches no system rpcbind by accident.
            portmapper: PortmapperMode::Off,
            portmapper_port: nfs_wire::portmap::PMAP_PORT,
            // Off for a library user or a test, as the portmapper; the binary's
            // configuration turns it on with NFS.
            nlm_port: 0,
            nsm_port: 0,
            grace: DEFAULT_GRACE,
            lock_probe: DEFAULT_LOCK_PROBE,
        }
    }
}

/// An address or a network in CIDR notation (`10.0.0.0/8`, `::1`, `fd00::/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientNet {
    addr: IpAddr,
    prefix: u8,
}

impl ClientNet {
    /// The network's address and prefix length.
    pub fn parts(&self) -> (IpAddr, u8) {
        (self.addr, self.prefix)
    }

    /// Parses `a.b.c.d`, `a.b.c.d/n`, an IPv6 address or `v6/n`.
    pub fn parse(s: &str) -> Result<ClientNet, String> {
        let s = s.trim();
        let (ip, prefix) = match s.split_once('/') {
            Some((ip, p)) => (ip, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = ip.parse().map_err(|_| format!("{s:?} is not an address or a network such as \"10.0.0.0/8\""))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("{s:?}: the prefix length must be 0..{max}")),
            },
        };
        Ok(ClientNet { addr, prefix })
    }

    /// Whether `ip` lies in this network (IPv4-mapped IPv6 peers count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => masked(u128::from(u32::from(net)), u128::from(u32::from(ip)), self.prefix, 32),
            (IpAddr::V6(net), IpAddr::V6(ip)) => masked(u128::from(net), u128::from(ip), self.prefix, 128),
            _ => false,
        }
    }
}

/// Whether the top `prefix` bits of `width`-bit numbers `a` and `b` agree.
fn masked(a: u128, b: u128, prefix: u8, width: u32) -> bool {
    let host_bits = width - u32::from(prefix);
    if host_bits >= width {
        return true;
    }
    (a >> host_bits) == (b >> host_bits)
}

impl fmt::Display for ClientNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let max = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.prefix == max {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

/// Who may use an export and as whom (the `nfs_*` keys of a share).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportRules {
    /// Client addresses allowed; empty: every address.
    pub clients: Vec<ClientNet>,
    /// Callers with uid 0 (or gid 0) act as `anonuid`/`anongid`.
    pub root_squash: bool,
    /// Every caller acts as `anonuid`/`anongid`.
    pub all_squash: bool,
    pub anonuid: u32,
    pub anongid: u32,
    /// AUTH_NONE calls are served (as the anonymous user); otherwise AUTH_TOOWEAK.
    pub auth_none: bool,
    /// The share's `read_only`: changes fail with NFS3ERR_ROFS.
    pub read_only: bool,
}

impl Default for ExportRules {
    fn default() -> Self {
        ExportRules { clients: Vec::new(), root_squash: true, all_squash: false, anonuid: 65534, anongid: 65534, auth_none: false, read_only: false }
    }
}

impl ExportRules {
    /// Whether a client at `ip` may mount and use the export.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.clients.is_empty() || self.clients.iter().any(|n| n.contains(ip))
    }
}

impl fmt::Display for ExportRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.clients.is_empty() {
            write!(f, "every client")?;
        } else {
            let list: Vec<String> = self.clients.iter().map(ToString::to_string).collect();
            write!(f, "clients {}", list.join(", "))?;
        }
        let squash = match (self.all_squash, self.root_squash) {
            (true, _) => "all squashed",
            (false, true) => "root squashed",
            (false, false) => "no squash",
        };
        write!(f, "; {squash} to {}:{}", self.anonuid, self.anongid)?;
        if self.auth_none {
            write!(f, "; AUTH_NONE allowed")?;
        }
        Ok(())
    }
}

/// One share served over NFS, at export path `/<name>`.
#[derive(Debug, Clone)]
pub struct Export {
    /// The share's index in the configuration (with the file id, the key of the shared file table).
    pub share: usize,
    pub name: String,
    /// The same backend the other protocols use, so they share its metadata cache.
    pub backend: Arc<dyn braid_vfs::Backend>,
    pub rules: ExportRules,
    /// The share's limiter, the same one SMB uses, so the limits hold across protocols.
    pub qos: Arc<braid_qos::ShareLimiter>,
    /// The bound on the share's storage calls, the same one SMB uses: a hung backend holds
    /// a bounded number of threads, and calls give up after its time limit (JUKEBOX).
    pub storage: Arc<braid_qos::StorageGate>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_match_by_prefix() {
        let n = ClientNet::parse("10.0.0.0/8").unwrap();
        assert!(n.contains(ip("10.200.1.2")));
        assert!(!n.contains(ip("11.0.0.1")));
        assert!(n.contains(ip("::ffff:10.1.2.3")), "IPv4-mapped peers are IPv4");
        assert!(!n.contains(ip("::1")));
        let one = ClientNet::parse("127.0.0.1").unwrap();
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let all = ClientNet::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("192.168.1.1")));
        let v6 = ClientNet::parse("fd00::/8").unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        assert_eq!(n.to_string(), "10.0.0.0/8");
        assert_eq!(one.to_string(), "127.0.0.1");
    }

    #[test]
    fn bad_networks_are_refused() {
        for bad in ["", "10.0.0.0/33", "::/129", "host.example", "10.0.0.0/x", "10.0.0/8"] {
            assert!(ClientNet::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn empty_client_list_allows_everyone() {
        let mut r = ExportRules::default();
        assert!(r.allows(ip("192.0.2.1")));
        r.clients = vec![ClientNet::parse("127.0.0.1").unwrap()];
        assert!(r.allows(ip("127.0.0.1")) && !r.allows(ip("192.0.2.1")));
    }
}
