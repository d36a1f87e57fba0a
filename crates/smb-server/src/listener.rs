//! Accepting connections on every configured address.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;

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
    /// [`Server::run`] and [`Server::foreign`].
    pub fn add_peer_table(&mut self, table: Arc<braid_opmetrics::PeerTable>) {
        if let Some(state) = Arc::get_mut(&mut self.state) {
            state.other_peers.push(table);
        }
    }

    /// The seam for other protocols serving the same shares (their operations meet SMB's
    /// opens, leases and watchers). Take it after [`Server::add_op_table`].
    pub fn foreign(&self) -> crate::SmbState {
        crate::SmbState(self.state.clone())
    }

    /// Listens and serves until the process is stopped (see [`run`]).
    pub async fn run(self) -> std::io::Result<()> {
        serve(self.state).await
    }
}

async fn serve(state: Arc<ServerState>) -> std::io::Result<()> {
    crate::changes::subscribe_all(&state);
    let mut listeners = Vec::new();
    for addr in &state.config.listen {
        let l = TcpListener::bind(addr).await.map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
        tracing::info!(%addr, "listening");
        listeners.push(l);
    }
    if let Some(addr) = state.config.admin {
        tokio::spawn(crate::admin::serve(state.clone(), addr));
    }
    let limit = Arc::new(Semaphore::new(state.config.max_connections));
    let mut tasks = tokio::task::JoinSet::new();
    for l in listeners {
        let state = state.clone();
        let limit = limit.clone();
        tasks.spawn(accept_loop(l, state, limit));
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(Err(e)) = r {
            return Err(e);
        }
    }
    Ok(())
}

async fn accept_loop(l: TcpListener, state: Arc<ServerState>, limit: Arc<Semaphore>) -> std::io::Result<()> {
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
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "connection limit reached; refusing");
            drop(sock);
            continue;
        };
        let _ = sock.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            reader::serve(state, sock, peer).await;
            drop(permit);
        });
    }
}
