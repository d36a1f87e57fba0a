//! Reloading the configuration of a running `braid serve`: on SIGHUP, and when
//! `braid reload` asks through the admin endpoint (`POST /reload`). The server re-reads
//! its own configuration file; a file with an error is refused with the error `braid
//! check` gives, and the running configuration stays. SMB shares, users and limits change
//! in place (`smb_server::reload`), then the NFS exports are rebuilt from the shares now
//! served (`nfs_server::exports`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use smb_server::{ServerConfig, ServerHandle, ShareInfo};

use crate::config::{self, NfsSettings};

/// What `braid serve` needs to reload itself.
pub struct Reloader {
    pub path: PathBuf,
    /// `--listen` given to `braid serve`, which wins over the file's `listen`.
    pub listen: Vec<SocketAddr>,
    pub smb: ServerHandle,
    pub nfs: Option<Arc<nfs_server::state::NfsState>>,
    /// The NFS settings the server started with (listeners cannot change live).
    pub nfs_config: nfs_server::NfsConfig,
    /// One reload at a time (SIGHUP and `braid reload` may meet).
    pub busy: tokio::sync::Mutex<()>,
}

impl Reloader {
    /// Reloads on every SIGHUP (what `systemctl reload` sends) and on the admin endpoint's
    /// `POST /reload` from now on.
    pub fn install(self) {
        let me = Arc::new(self);
        let hook = me.clone();
        me.smb.set_reload(Arc::new(move || {
            let r = hook.clone();
            Box::pin(async move { r.reload().await })
        }));
        #[cfg(unix)]
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(hup) => drop(tokio::spawn(reload_on_sighup(hup, me))),
            Err(e) => tracing::warn!(error = %e, "cannot watch SIGHUP: reload with `braid reload` only"),
        }
    }

    /// Re-reads the file and applies it; the answer is one line for the operator (logged
    /// too), or the reason the file was refused.
    pub async fn reload(&self) -> Result<String, String> {
        let _one = self.busy.lock().await;
        let path = self.path.clone();
        let loaded = tokio::task::spawn_blocking(move || config::load(&path))
            .await
            .map_err(|e| format!("reload failed: {e}"))
            .and_then(|r| r.map_err(|e| format!("{e:#}").replace('\n', " ")));
        let loaded = match loaded {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("reload refused, configuration unchanged: {e}");
                return Err(format!("configuration unchanged: {e}"));
            }
        };
        let mut cfg = loaded.server;
        if !self.listen.is_empty() {
            cfg.listen = self.listen.clone();
        }
        let report = match self.smb.reload(&cfg).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("reload refused, configuration unchanged: {e}");
                return Err(format!("configuration unchanged: {}: {e}", self.path.display()));
            }
        };
        let mut line = format!("reloaded {}: {report}", self.path.display());
        if let Some(nfs_line) = self.reload_nfs(&cfg, &loaded.nfs) {
            line.push_str("; ");
            line.push_str(&nfs_line);
        }
        if report.needs_restart.is_empty() {
            tracing::info!("{line}");
        } else {
            tracing::warn!("{line}");
        }
        Ok(line)
    }

    /// Rebuilds the NFS exports; returns what changed, if anything.
    fn reload_nfs(&self, cfg: &ServerConfig, nfs: &NfsSettings) -> Option<String> {
        let mut parts = Vec::new();
        if format!("{:?}", nfs.config) != format!("{:?}", self.nfs_config) {
            parts.push("NFS listeners or state directory: needs a restart (ignored for now)".to_string());
        }
        if let Some(state) = &self.nfs {
            match state.exports.replace(exports(cfg, nfs, &self.smb.shares())) {
                Ok(r) => {
                    let lists = [("NFS exports added", &r.added), ("NFS exports removed", &r.removed), ("NFS exports changed", &r.changed)];
                    parts.extend(lists.iter().filter(|(_, v)| !v.is_empty()).map(|(what, v)| format!("{what}: {}", v.join(", "))));
                }
                Err(e) => parts.push(format!("NFS exports unchanged: {e}")),
            }
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

#[cfg(unix)]
async fn reload_on_sighup(mut hup: tokio::signal::unix::Signal, reloader: Arc<Reloader>) {
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading {}", reloader.path.display());
        crate::systemd::notify("RELOADING=1");
        // The outcome is logged by the reload itself.
        let _ = reloader.reload().await;
        crate::systemd::notify("READY=1");
    }
}

/// The shares exported over NFS, each with the backend and limiter SMB serves it with (so
/// both protocols go through one metadata cache and one limit). `nfs.exports` names
/// shares by their place in `cfg.shares`; `shares` are those being served.
pub fn exports(cfg: &ServerConfig, nfs: &NfsSettings, shares: &[ShareInfo]) -> Vec<nfs_server::Export> {
    nfs.exports
        .iter()
        .filter_map(|(i, rules)| {
            let name = &cfg.shares.get(*i)?.name;
            let s = shares.iter().find(|s| s.name.eq_ignore_ascii_case(name))?;
            Some(nfs_server::Export {
                share: s.index,
                name: name.clone(),
                backend: s.backend.clone(),
                rules: rules.clone(),
                qos: s.qos.clone(),
                storage: s.storage.clone(),
            })
        })
        .collect()
}

/// `braid reload --config FILE`: checks the file here (the errors of `braid check`), then
/// asks the server running with it to reload and prints its answer.
pub fn run(path: &std::path::Path, admin: Option<SocketAddr>) -> anyhow::Result<String> {
    let loaded = config::load(path)?;
    let addr = match admin {
        Some(a) => a,
        None => loaded
            .server
            .admin
            .ok_or_else(|| anyhow!("{}: the admin endpoint is off ([server] admin = \"off\"); send SIGHUP instead", path.display()))?,
    };
    post(addr, "/reload")
}

/// One HTTP/1.0 POST against the admin endpoint; the body on 200, else an error with it.
fn post(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .with_context(|| format!("cannot reach the admin endpoint at {addr} (is `braid serve` running with this config?)"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n")?;
    let mut resp = String::new();
    s.take(1 << 20).read_to_string(&mut resp).context("reading the admin endpoint's answer")?;
    let Some((head, body)) = resp.split_once("\r\n\r\n") else { bail!("admin endpoint sent no HTTP answer") };
    let body = body.trim_end();
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        let status = head.lines().next().unwrap_or("");
        bail!("the server {}: {body}", if status.contains("409") { "refused the reload" } else { status });
    }
    Ok(body.to_string())
}
