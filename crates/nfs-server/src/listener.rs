//! Accepting connections on every NFS address: [`serve`], the crate's entry point.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::config::{Export, NfsConfig};
use crate::connection;
use crate::handle::HandleKey;
use crate::state::NfsState;

/// Serves NFSv3 and MOUNT v3 on every `cfg.listen` address until `shutdown` completes.
/// Reads (or creates) the handle key in `cfg.state_dir` and binds every address first, so
/// a bad state directory or a taken port is an error before anything is served.
pub async fn serve(
    cfg: NfsConfig,
    exports: Vec<Export>,
    files: Arc<dyn braid_filestate::Files>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let seen = (Arc::new(crate::state::op_table()), Arc::new(crate::state::peer_table()));
    serve_with_metrics(cfg, exports, files, seen, shutdown).await
}

/// [`serve`], counting into `ops` and `peers` (tables from [`crate::op_table`] and
/// [`crate::peer_table`] that an admin endpoint shows).
pub async fn serve_with_metrics(
    cfg: NfsConfig,
    exports: Vec<Export>,
    files: Arc<dyn braid_filestate::Files>,
    (ops, peers): (Arc<braid_opmetrics::OpTable>, Arc<braid_opmetrics::PeerTable>),
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let key = HandleKey::load_or_create(&cfg.state_dir)?;
    let mut state = NfsState::new(cfg, exports, key, files, ops)?;
    state.peers = peers;
    let state = Arc::new(state);
    serve_state(state, shutdown).await
}

/// [`serve`] with the state built (tests build it with their own key).
pub async fn serve_state(state: Arc<NfsState>, shutdown: impl Future<Output = ()> + Send) -> std::io::Result<()> {
    let mut listeners = Vec::new();
    for addr in &state.config.listen {
        let l = TcpListener::bind(addr).await.map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen for NFS on {addr}: {e}")))?;
        tracing::info!(%addr, exports = state.exports.len(), "listening for NFS");
        listeners.push(l);
    }
    let mut tasks = tokio::task::JoinSet::new();
    // The lock service's TCP ports take the NFS connection path too.
    listeners.extend(crate::nlm::start(&state, &mut tasks).await?);
    for l in listeners {
        tasks.spawn(accept_loop(l, state.clone()));
    }
    // After the NFS ports are bound, so that what the portmapper names answers.
    let portmapper = crate::portmap::start(&state.config).await?;
    let sweeper = tokio::spawn(sweep_open_files(Arc::downgrade(&state)));
    let _stop_sweeper = AbortOnDrop(sweeper);
    tokio::select! {
        _ = shutdown => {}
        Some(r) = tasks.join_next() => {
            portmapper.stop().await;
            return match r {
                Ok(r) => r,
                Err(e) => Err(std::io::Error::other(format!("NFS listener failed: {e}"))),
            };
        }
    }
    portmapper.stop().await;
    // Dropping the accept loops closes the listening sockets.
    drop(tasks);
    stop(&state, STOP_BOUND).await;
    Ok(())
}

/// How long a stop waits for calls in flight.
pub const STOP_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// Graceful stop: connections read no new calls, answer those in flight (at most `bound`),
/// then close; files kept open are closed.
async fn stop(state: &Arc<NfsState>, bound: std::time::Duration) {
    tracing::info!("stopping NFS: {} connections", state.stop.receiver_count());
    state.stop.send_replace(true);
    let deadline = tokio::time::Instant::now() + bound;
    while state.stop.receiver_count() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    if state.stop.receiver_count() > 0 {
        tracing::warn!(connections = state.stop.receiver_count(), "NFS calls still running after {bound:?}; stopping anyway");
    }
    let s = state.clone();
    let _ = tokio::task::spawn_blocking(move || s.exports.iter().for_each(|e| e.open_files.close_all())).await;
    tracing::info!("NFS stopped");
}

/// Closes files kept open past their idle time, once a second, on the blocking pool (a
/// close may unmap).
async fn sweep_open_files(state: std::sync::Weak<NfsState>) {
    let mut tick = tokio::time::interval(crate::open_files::IDLE / 2);
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        if state.exports.iter().all(|e| e.open_files.is_empty()) {
            continue;
        }
        let _ = tokio::task::spawn_blocking(move || state.exports.iter().for_each(|e| e.open_files.sweep())).await;
    }
}

/// Aborts a task when the server stops.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn accept_loop(l: TcpListener, state: Arc<NfsState>) -> std::io::Result<()> {
    loop {
        let (sock, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends are transient: log, back off, keep serving.
                tracing::warn!(error = %e, "NFS accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Refused connections are closed at once (admission logs and counts them).
        let Ok(ticket) = state.admission.admit(peer.ip()) else { continue };
        tokio::spawn(connection::serve(state.clone(), sock, peer, ticket));
    }
}
