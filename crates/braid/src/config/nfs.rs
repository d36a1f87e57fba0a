//! The NFS keys: `[server] nfs_listen`, `state_dir`, `nfs_max_connections_per_client`,
//! `nfs_max_calls_per_client`, `nfs_portmapper`, the lock service's `nlm_port`, `nsm_port`,
//! `nfs_grace` and `nfs_lock_probe`, and per share `nfs`, `nfs_clients`,
//! `nfs_root_squash`, `nfs_all_squash`, `nfs_anonuid`, `nfs_anongid`, `nfs_auth_none`.

use std::net::SocketAddr;
use std::path::Path;

use nfs_server::{ClientNet, ExportRules, NfsConfig, PortmapperMode};
use toml::Spanned;

use super::{ConfigError, Ctx, RawShare};

/// NFS settings of a configuration: off unless `nfs_listen` names an address.
#[derive(Debug, Clone, Default)]
pub struct NfsSettings {
    /// Listen addresses (empty: no NFS) and the state directory.
    pub config: NfsConfig,
    /// Each exported share: its index in the SMB configuration's shares, and its rules.
    pub exports: Vec<(usize, ExportRules)>,
}

impl NfsSettings {
    /// Whether NFS is served at all.
    pub fn enabled(&self) -> bool {
        !self.config.listen.is_empty()
    }
}

/// The `[server]` keys NFS reads.
pub(super) struct RawNfsServer {
    pub listen: Option<Spanned<Vec<Spanned<String>>>>,
    pub state_dir: Option<Spanned<String>>,
    pub max_connections_per_client: Option<Spanned<i64>>,
    pub max_calls_per_client: Option<Spanned<i64>>,
    pub portmapper: Option<Spanned<String>>,
    pub nlm_port: Option<Spanned<i64>>,
    pub nsm_port: Option<Spanned<i64>>,
    pub grace: Option<Spanned<toml::Value>>,
    pub lock_probe: Option<Spanned<toml::Value>>,
}

impl Ctx<'_> {
    /// `server.nfs_listen` (IP:PORT addresses, none twice, none an SMB address),
    /// `server.state_dir` (relative to the file's directory; created when missing), and
    /// `nfs_max_connections_per_client`, `nfs_max_calls_per_client`.
    pub(super) fn apply_nfs_server(&self, raw: RawNfsServer, smb: &[SocketAddr], base_dir: &Path, nfs: &mut NfsSettings) -> Result<(), ConfigError> {
        let RawNfsServer { listen, state_dir, max_connections_per_client, max_calls_per_client, portmapper, nlm_port, nsm_port, grace, lock_probe } =
            raw;
        self.apply_lock_service(nlm_port, nsm_port, grace, nfs)?;
        if let Some(p) = lock_probe {
            nfs.config.lock_probe = self.timeout(&p, "server.nfs_lock_probe")?;
        }
        // "auto" unless said otherwise; it matters only when NFS is served.
        nfs.config.portmapper = match portmapper {
            None => PortmapperMode::Auto,
            Some(p) => PortmapperMode::parse(p.get_ref().trim()).ok_or_else(|| {
                self.err(p.span(), format!("server.nfs_portmapper: {:?} is not one of \"auto\", \"register\", \"serve\", \"off\"", p.get_ref()))
            })?,
        };
        if let Some(n) = max_connections_per_client {
            nfs.config.max_connections_per_client = self.bounded_count(&n, "server.nfs_max_connections_per_client", 1_000_000)?;
        }
        if let Some(n) = max_calls_per_client {
            nfs.config.max_calls_per_client = self.bounded_count(&n, "server.nfs_max_calls_per_client", 1_000_000)?;
        }
        for addr in listen.map(Spanned::into_inner).unwrap_or_default() {
            let parsed: SocketAddr = addr.get_ref().trim().parse().map_err(|_| {
                self.err(addr.span(), format!("server.nfs_listen: {:?} is not an IP:PORT address (e.g. \"0.0.0.0:2049\")", addr.get_ref()))
            })?;
            if nfs.config.listen.contains(&parsed) {
                return Err(self.err(addr.span(), format!("server.nfs_listen: {parsed} is listed twice")));
            }
            if smb.contains(&parsed) {
                return Err(self.err(addr.span(), format!("server.nfs_listen: {parsed} is also an SMB listen address")));
            }
            nfs.config.listen.push(parsed);
        }
        if let Some(dir) = state_dir {
            if dir.get_ref().is_empty() {
                return Err(self.err(dir.span(), "server.state_dir: the path is empty"));
            }
            let full = base_dir.join(dir.get_ref());
            if full.exists() && !full.is_dir() {
                return Err(self.err(dir.span(), format!("server.state_dir: {:?} is not a directory", dir.get_ref())));
            }
            nfs.config.state_dir = full;
        }
        Ok(())
    }

    /// `server.nlm_port` (default 4045; 0: no lock service), `server.nsm_port` (4046) and
    /// `server.nfs_grace` (90s; 0 for none).
    fn apply_lock_service(
        &self,
        nlm: Option<Spanned<i64>>,
        nsm: Option<Spanned<i64>>,
        grace: Option<Spanned<toml::Value>>,
        nfs: &mut NfsSettings,
    ) -> Result<(), ConfigError> {
        let port = |v: &Spanned<i64>, key: &str| -> Result<u16, ConfigError> {
            u16::try_from(*v.get_ref()).map_err(|_| self.err(v.span(), format!("server.{key}: {} is not a port (0 to 65535)", v.get_ref())))
        };
        nfs.config.nlm_port = nlm.as_ref().map_or(Ok(nfs_server::config::DEFAULT_NLM_PORT), |v| port(v, "nlm_port"))?;
        nfs.config.nsm_port = nsm.as_ref().map_or(Ok(nfs_server::config::DEFAULT_NSM_PORT), |v| port(v, "nsm_port"))?;
        if nfs.config.nlm_port != 0 && nfs.config.nlm_port == nfs.config.nsm_port {
            let span = nsm.or(nlm).map(|v| v.span()).unwrap_or_default();
            return Err(self.err(span, format!("server.nsm_port: {} is also the NLM port", nfs.config.nsm_port)));
        }
        if nfs.config.nlm_port != 0 && nfs.config.nsm_port == 0 {
            let span = nsm.map(|v| v.span()).unwrap_or_default();
            return Err(self.err(span, "server.nsm_port: 0 while the lock service is on (set nlm_port = 0 to turn both off)"));
        }
        if let Some(g) = grace {
            nfs.config.grace = super::metadata_ttl(g.get_ref()).map_err(|e| self.err(g.span(), format!("server.nfs_grace: {e}")))?;
        }
        Ok(())
    }

    /// A share's NFS rules: `None` unless `nfs = true`; the other `nfs_*` keys need it.
    pub(super) fn share_nfs(&self, s: &RawShare, what: &str, nfs: &NfsSettings) -> Result<Option<ExportRules>, ConfigError> {
        let on = s.nfs.as_ref().is_some_and(|v| *v.get_ref());
        if !on {
            let spans = [
                s.nfs_clients.as_ref().map(Spanned::span),
                s.nfs_root_squash.as_ref().map(Spanned::span),
                s.nfs_all_squash.as_ref().map(Spanned::span),
                s.nfs_anonuid.as_ref().map(Spanned::span),
                s.nfs_anongid.as_ref().map(Spanned::span),
                s.nfs_auth_none.as_ref().map(Spanned::span),
            ];
            return match spans.into_iter().flatten().min_by_key(|r| r.start) {
                Some(span) => Err(self.err(span, format!("{what}: the nfs_* keys apply only to a share with nfs = true"))),
                None => Ok(None),
            };
        }
        if !nfs.enabled() {
            let span = s.nfs.as_ref().map(Spanned::span).unwrap_or_default();
            return Err(self.err(span, format!("{what}: nfs = true needs [server] nfs_listen (e.g. nfs_listen = [\"0.0.0.0:2049\"])")));
        }
        let mut rules = ExportRules { read_only: s.read_only, ..ExportRules::default() };
        if let Some(list) = &s.nfs_clients {
            if list.get_ref().is_empty() {
                return Err(self.err(list.span(), format!("{what}: nfs_clients is empty (leave it out to allow every client)")));
            }
            for c in list.get_ref() {
                let net = ClientNet::parse(c.get_ref()).map_err(|m| self.err(c.span(), format!("{what}: nfs_clients: {m}")))?;
                rules.clients.push(net);
            }
        }
        let flag = |v: &Option<Spanned<bool>>, default: bool| v.as_ref().map_or(default, |b| *b.get_ref());
        rules.root_squash = flag(&s.nfs_root_squash, rules.root_squash);
        rules.all_squash = flag(&s.nfs_all_squash, rules.all_squash);
        rules.auth_none = flag(&s.nfs_auth_none, rules.auth_none);
        rules.anonuid = self.id_value(&s.nfs_anonuid, rules.anonuid, what, "nfs_anonuid")?;
        rules.anongid = self.id_value(&s.nfs_anongid, rules.anongid, what, "nfs_anongid")?;
        Ok(Some(rules))
    }

    /// A uid or gid: 0 ..= 4294967294 (u32::MAX is "no id" to the kernel).
    fn id_value(&self, v: &Option<Spanned<i64>>, default: u32, what: &str, key: &str) -> Result<u32, ConfigError> {
        let Some(v) = v else { return Ok(default) };
        let n = *v.get_ref();
        match u32::try_from(n) {
            Ok(id) if id != u32::MAX => Ok(id),
            _ => Err(self.err(v.span(), format!("{what}: {key}: {n} is out of range (0..4294967294)"))),
        }
    }
}
