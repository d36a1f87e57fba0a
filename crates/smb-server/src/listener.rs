//! Accepting connections on every configured address.

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::config::ServerConfig;
use crate::reader;
use crate::server::ServerState;

/// Runs the server until the process is stopped. Binds every `listen` address first and
/// returns an error if any bind fails or a share cannot be opened.
pub async fn run(config: ServerConfig) -> std::io::Result<()> {
    Server::new(config)?.run().await
}

/// A server whose shares are open but which does not listen yet, so that another protocol
/// (NFS) can serve the same storage through the same backends and metadata caches.
#[derive(Debug)]
pub struct Server {
    state: Arc<ServerState>,
}

impl Server {
    /// Opens every share; fails if one cannot be opened.
    pub fn new(config: ServerConfig) -> std::io::Result<Self> {
        Ok(Server { state: Arc::new(ServerState::new(config)?) })
    }

    /// Opens every share over `files`, the file table the binary shares with other
    /// protocols (NFS and NLM reach it directly; SMB's breaks are registered on it when the
    /// server binds).
    pub fn with_files(config: ServerConfig, files: Arc<crate::SharedFiles>) -> std::io::Result<Self> {
        Ok(Server { state: Arc::new(ServerState::with_files(config, files)?) })
    }

    /// Each share's storage, in configuration order.
    pub fn backends(&self) -> Vec<Arc<dyn braid_vfs::Backend>> {
        self.state.shares.iter().map(|s| s.backend.clone()).collect()
    }

    /// Each share's limiter, in configuration order (other protocols charge the same one).
    pub fn limiters(&self) -> Vec<Arc<braid_qos::ShareLimiter>> {
        self.state.shares.iter().map(|s| s.qos.clone()).collect()
    }

    /// Shows another protocol's per-operation metrics beside SMB's (admin endpoint,
    /// `braid status`). Only before [`Server::run`].
    pub fn add_op_table(&mut self, table: Arc<crate::op_metrics::OpTable>) {
        if let Some(state) = Arc::get_mut(&mut self.state) {
            state.other_ops.push(table);
        }
    }

    /// Shows another protocol's clients beside SMB's sessions. Only before
    /// [`Server::bind`].
    pub fn add_peer_table(&mut self, table: Arc<braid_opmetrics::PeerTable>) {
        if let Some(state) = Arc::get_mut(&mut self.state) {
            state.other_peers.push(table);
        }
    }

    /// Shows another protocol's connection limits beside SMB's. Only before
    /// [`Server::bind`].
    pub fn add_admission(&mut self, admission: Arc<braid_admission::Admission>) {
        if let Some(state) = Arc::get_mut(&mut self.state) {
            state.other_admissions.push(admission);
        }
    }

    /// What reloads and stops the server while it runs (take it before [`Server::run`]).
    pub fn handle(&self) -> ServerHandle {
        ServerHandle { state: self.state.clone() }
    }

    /// Listens and serves until the process is stopped (see [`run`]).
    pub async fn run(self) -> std::io::Result<()> {
        self.bind().await?.serve_until(std::future::pending()).await
    }

    /// Binds every `listen` address (and starts the admin endpoint); an error names the
    /// address that could not be bound.
    pub async fn bind(self) -> std::io::Result<Bound> {
        let state = self.state;
        crate::foreign::register(&state);
        crate::changes::subscribe_all(&state);
        crate::persistent::restore(&state).await;
        if let Some(addr) = state.config.admin {
            if let Some(l) = crate::admin::bind(addr).await {
                tokio::spawn(crate::admin::serve(state.clone(), l));
            }
        }
        let mut listeners = Vec::new();
        for addr in &state.config.listen {
            let l = TcpListener::bind(addr).await.map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
            tracing::info!(%addr, "listening");
            listeners.push(l);
        }
        Ok(Bound { state, listeners })
    }
}

/// A server listening on its addresses, not yet accepting.
#[derive(Debug)]
pub struct Bound {
    state: Arc<ServerState>,
    listeners: Vec<TcpListener>,
}

impl Bound {
    /// Accepts and serves until `shutdown` completes, then stops gracefully: no new
    /// connections nor requests, requests in flight finish (at most [`STOP_BOUND`]), open
    /// files are closed.
    pub async fn serve_until(self, shutdown: impl std::future::Future<Output = ()>) -> std::io::Result<()> {
        let state = self.state;
        let mut tasks = tokio::task::JoinSet::new();
        for l in self.listeners {
            tasks.spawn(accept_loop(l, state.clone()));
        }
        let accepting = async {
            while let Some(r) = tasks.join_next().await {
                if let Ok(Err(e)) = r {
                    return Err(e);
                }
            }
            std::future::pending().await
        };
        tokio::select! {
            r = accepting => return r,
            () = shutdown => {}
        }
        // Dropping the accept loops closes the listening sockets.
        drop(tasks);
        ServerHandle { state }.stop(STOP_BOUND).await;
        Ok(())
    }
}

/// How long a stop waits for requests in flight before it closes what is left.
pub const STOP_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// One share as the other protocols need it.
#[derive(Debug, Clone)]
pub struct ShareInfo {
    /// Its index (part of the shared file table's key).
    pub index: usize,
    pub name: String,
    pub backend: Arc<dyn braid_vfs::Backend>,
    pub qos: Arc<braid_qos::ShareLimiter>,
    /// The bound on its storage calls, shared with the other protocols.
    pub storage: Arc<braid_qos::StorageGate>,
}

/// Reloads and stops a running server.
#[derive(Debug, Clone)]
pub struct ServerHandle {
    state: Arc<ServerState>,
}

impl ServerHandle {
    /// Applies a new configuration's shares, users and limits (see `reload.rs`).
    pub async fn reload(&self, config: &ServerConfig) -> std::io::Result<crate::ReloadReport> {
        crate::reload::apply(&self.state, config).await
    }

    /// The shares served now, in configuration order.
    pub fn shares(&self) -> Vec<ShareInfo> {
        let info = |s: Arc<crate::server::Share>| ShareInfo {
            index: s.index,
            name: s.config.name.clone(),
            backend: s.backend.clone(),
            qos: s.qos.clone(),
            storage: s.storage.clone(),
        };
        self.state.shares.iter().map(info).collect()
    }

    /// What the admin endpoint's `POST /reload` runs.
    pub fn set_reload(&self, f: crate::reload::ReloadFn) {
        self.state.reload_hook.set(f);
    }

    /// Graceful stop: every reader stops taking requests, requests in flight finish
    /// (waiting at most `bound`, then the rest is cut off), and each connection's sessions
    /// end, closing their open files (writes queued on a file have run by then).
    pub async fn stop(&self, bound: std::time::Duration) {
        let state = &self.state;
        let conns: Vec<_> = state.connections.values().into_iter().filter_map(|w| w.upgrade()).collect();
        let requests: usize = conns.iter().map(|c| c.requests_in_progress()).sum();
        let opens: usize = state.sessions.values().iter().map(|s| s.open_count()).sum();
        tracing::info!("stopping: {} connections, {requests} requests in flight, {opens} open files", conns.len());
        drop(conns);
        state.stop.send_replace(true);
        // Those registered from now on look at the flag themselves.
        for c in state.connections.values().into_iter().filter_map(|w| w.upgrade()) {
            c.drain.notify_one();
        }
        let deadline = tokio::time::Instant::now() + bound;
        let mut cut = false;
        while state.stop.receiver_count() > 0 {
            if !cut && tokio::time::Instant::now() >= deadline {
                let left: Vec<_> = state.connections.values().into_iter().filter_map(|w| w.upgrade()).collect();
                tracing::warn!(connections = left.len(), "requests still running after {bound:?}: closing their connections");
                left.iter().for_each(|c| c.close());
                cut = true;
            } else if cut && tokio::time::Instant::now() >= deadline + std::time::Duration::from_secs(2) {
                tracing::warn!("connections still closing; stopping anyway");
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // Persistent handles outlive a planned stop as they do a crash.
        state.persistent.freeze();
        for s in state.sessions.values() {
            crate::session::end_session(state, &s).await;
        }
        tracing::info!("SMB stopped");
    }
}

async fn accept_loop(l: TcpListener, state: Arc<ServerState>) -> std::io::Result<()> {
    loop {
        let (sock, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends are transient: log, back off, keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Refused connections are closed at once (admission logs and counts them).
        let Ok(ticket) = state.admission.admit(peer.ip()) else { continue };
        let _ = sock.set_nodelay(true);
        tokio::spawn(reader::serve(state.clone(), sock, peer, ticket));
    }
}
