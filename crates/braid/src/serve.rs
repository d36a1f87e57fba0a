//! `braid serve`: load (or create) the config, then run the server until a signal.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use smb_server::ServerConfig;

use crate::cli::ServeArgs;
use crate::config::NfsSettings;
use crate::{config, first_run, logging, reload};

/// Runs `braid serve`.
pub fn run(args: ServeArgs, verbose: u8) -> anyhow::Result<()> {
    let (config_path, new_password) = match args.config {
        Some(path) => (path, None),
        None => {
            let p = first_run::prepare(Path::new("."))?;
            (p.config_path, p.new_password)
        }
    };
    let loaded = config::load(&config_path)?;
    let mut cfg = loaded.server;
    if !args.listen.is_empty() {
        cfg.listen = args.listen.clone();
    }
    logging::init(verbose, loaded.log.as_deref());

    if let Some(pw) = &new_password {
        println!(
            "braid: first start: wrote {} (share \"{}\" is {})",
            config_path.display(),
            first_run::FIRST_SHARE,
            Path::new(".").join(first_run::DATA_DIR).display()
        );
        println!("braid: user \"{}\" has password {pw}  (shown only this once; only its hash is stored)", first_run::FIRST_USER);
    }
    if let Some(line) = smbclient_hint(&cfg, new_password.as_deref()) {
        println!("braid: connect with: {line}");
    }
    if cfg.shares.is_empty() {
        tracing::warn!("no [[share]] configured: clients can connect but see nothing");
    }
    if cfg.users.is_empty() && !cfg.shares.iter().any(|s| s.guest_ok) {
        tracing::warn!("no [[user]] configured and no guest_ok share: nobody can connect over SMB");
    }

    if !loaded.nfs.enabled() {
        println!("braid: NFS is off (to serve NFSv3, set [server] nfs_listen = [\"0.0.0.0:2049\"] and nfs = true on a share)");
    }

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("braid").build().context("cannot start the async runtime")?;
    let result = runtime.block_on(serve_until_signal(cfg, loaded.nfs, config_path, args.listen));
    // Do not hang on stuck blocking I/O at exit.
    runtime.shutdown_timeout(Duration::from_secs(5));
    result
}

async fn serve_until_signal(cfg: ServerConfig, nfs: NfsSettings, path: std::path::PathBuf, listen: Vec<SocketAddr>) -> anyhow::Result<()> {
    // One file table for every protocol: SMB's opens, NFS's reads and writes and NLM's
    // locks all meet in it.
    let files = Arc::new(smb_server::SharedFiles::default());
    let mut smb = smb_server::Server::with_files(cfg.clone(), files.clone())?;
    let nfs_ops = Arc::new(nfs_server::op_table());
    let nfs_peers = Arc::new(nfs_server::peer_table());
    let nfs_admission = nfs_server::state::admission(&nfs.config);
    if nfs.enabled() {
        smb.add_op_table(nfs_ops.clone());
        smb.add_peer_table(nfs_peers.clone());
        smb.add_admission(nfs_admission.clone());
    }
    let handle = smb.handle();
    let nfs_state = if nfs.enabled() {
        let key = nfs_server::handle::HandleKey::load_or_create(&nfs.config.state_dir)?;
        let exports = reload::exports(&cfg, &nfs, &handle.shares());
        let mut state = nfs_server::state::NfsState::new(nfs.config.clone(), exports, key, files, nfs_ops)?;
        state.peers = nfs_peers;
        state.admission = nfs_admission;
        Some(Arc::new(state))
    } else {
        None
    };
    let mut stop_signals = StopSignals::watch()?;
    reload::Reloader { path, listen, smb: handle.clone(), nfs: nfs_state.clone(), nfs_config: nfs.config.clone(), busy: tokio::sync::Mutex::new(()) }
        .install();
    let bound = smb.bind().await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let smb_served = async { bound.serve_until(until_stopped(stopped.clone())).await.context("server stopped") };
    let nfs_served = async {
        match nfs_state {
            Some(state) => nfs_server::serve_state(state, until_stopped(stopped.clone())).await.context("NFS server stopped"),
            None => Ok(()),
        }
    };
    let served = async { tokio::try_join!(smb_served, nfs_served).map(|_| ()) };
    tokio::pin!(served);
    crate::systemd::notify("READY=1");
    tokio::select! {
        r = &mut served => return r,
        () = stop_signals.recv() => {}
    }
    crate::systemd::notify("STOPPING=1");
    stop.send_replace(true);
    tokio::select! {
        r = &mut served => r?,
        // Whoever asks twice does not want to wait (the runtime still gets 5 s, below).
        () = stop_signals.recv() => tracing::warn!("second stop signal: not waiting for requests in flight"),
    }
    tracing::info!("stopped");
    Ok(())
}

/// The signals that stop the server: Ctrl-C (SIGINT), and SIGTERM on Unix (what service
/// managers send). Watched from the start, so one that comes early is not fatal.
struct StopSignals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn watch() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
            let int = signal(SignalKind::interrupt()).context("cannot watch Ctrl-C")?;
            Ok(StopSignals { term, int })
        }
        #[cfg(not(unix))]
        Ok(StopSignals {})
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// An `smbclient` command line reaching the first share, e.g.
/// `smbclient //127.0.0.1/data -p 4455 -U braid%PASSWORD`.
pub fn smbclient_hint(cfg: &ServerConfig, password: Option<&str>) -> Option<String> {
    let share = cfg.shares.first()?;
    let addr = *cfg.listen.first()?;
    // A wildcard address is not something to connect to; loopback of the same family is.
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let target = SocketAddr::new(ip, addr.port());
    let mut line = match target {
        SocketAddr::V4(a) => format!("smbclient //{}/{}", a.ip(), share.name),
        // smbclient wants IPv6 addresses through -I, not inside the UNC name.
        SocketAddr::V6(a) => format!("smbclient //{}/{} -I {}", cfg.server_name, share.name, a.ip()),
    };
    if target.port() != 445 {
        line.push_str(&format!(" -p {}", target.port()));
    }
    let user = share.users.first().or_else(|| cfg.users.first().map(|u| &u.name));
    match (user, password) {
        (Some(u), Some(pw)) => line.push_str(&format!(" -U {u}%{pw}")),
        (Some(u), None) => line.push_str(&format!(" -U {u}")),
        (None, _) if share.guest_ok => line.push_str(" -N"),
        (None, _) => {}
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb_server::{ShareConfig, UserConfig};

    fn cfg(listen: &str) -> ServerConfig {
        ServerConfig {
            listen: vec![listen.parse().unwrap()],
            users: vec![UserConfig { name: "braid".into(), nt_hash: [0; 16] }],
            shares: vec![ShareConfig {
                name: "data".into(),
                storage: smb_server::ShareStorage::Directory("/tmp".into()),
                read_only: false,
                users: vec![],
                guest_ok: false,
                encrypt: false,
                directory_leases: true,
                comment: String::new(),
                metadata_cache: Default::default(),
                max_watches: 0,
                limits: Default::default(),
                continuous_availability: false,
            }],
            ..ServerConfig::default()
        }
    }

    #[test]
    fn hints() {
        let c = cfg("127.0.0.1:4455");
        assert_eq!(smbclient_hint(&c, Some("PW")).unwrap(), "smbclient //127.0.0.1/data -p 4455 -U braid%PW");
        assert_eq!(smbclient_hint(&c, None).unwrap(), "smbclient //127.0.0.1/data -p 4455 -U braid");
        assert_eq!(smbclient_hint(&cfg("0.0.0.0:445"), None).unwrap(), "smbclient //127.0.0.1/data -U braid");
        assert_eq!(smbclient_hint(&cfg("[::]:4455"), None).unwrap(), "smbclient //BRAID/data -I ::1 -p 4455 -U braid");
    }
}
