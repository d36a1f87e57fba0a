//! Starting the lock service: the NSM state number, the grace period and the restart
//! notices (from the previous run's log), and the NLM and NSM ports, TCP and UDP, at each
//! NFS address. Over TCP the calls take the NFS connection path (admission, records);
//! over UDP each datagram is one call.

use std::net::SocketAddr;
use std::sync::Arc;

use nfs_wire::record::Record;
use tokio::net::{TcpListener, UdpSocket};

use crate::state::NfsState;

/// Datagrams in progress per UDP socket; more wait in the socket's buffer.
const UDP_IN_FLIGHT: usize = 64;
/// The largest datagram read (an NLM call is well under 4 KiB).
const MAX_DATAGRAM: usize = 8192;

/// Starts the lock service if `nlm_port` is set: returns its TCP listeners (served like
/// the NFS port's) and spawns its UDP loops into `tasks`.
pub async fn start(state: &Arc<NfsState>, tasks: &mut tokio::task::JoinSet<std::io::Result<()>>) -> std::io::Result<Vec<TcpListener>> {
    let cfg = &state.config;
    if cfg.nlm_port == 0 {
        return Ok(Vec::new());
    }
    let number = super::record::next_state(&cfg.state_dir)?;
    state.nlm.state.store(number, std::sync::atomic::Ordering::Relaxed);
    let (record, previous) = super::record::open(&cfg.state_dir)?;
    let _ = state.nlm.record.set(record);
    let mut tcp = Vec::new();
    for listen in &cfg.listen {
        for port in [cfg.nlm_port, cfg.nsm_port] {
            let addr = SocketAddr::new(listen.ip(), port);
            let cannot = |what: &str, e: std::io::Error| std::io::Error::new(e.kind(), format!("cannot listen for {what} on {addr}: {e}"));
            let what = if port == cfg.nlm_port { "NLM" } else { "NSM" };
            tcp.push(TcpListener::bind(addr).await.map_err(|e| cannot(what, e))?);
            let udp = UdpSocket::bind(addr).await.map_err(|e| cannot(what, e))?;
            tasks.spawn(udp_loop(udp, state.clone()));
            tracing::info!(%addr, what, "listening for locks (TCP and UDP)");
        }
    }
    tasks.spawn({
        let (weak, every) = (Arc::downgrade(state), cfg.lock_probe);
        async move {
            super::nsm::watch_hosts(weak, every).await;
            Ok(())
        }
    });
    if !previous.hosts.is_empty() {
        let until = std::time::Instant::now() + cfg.grace;
        state.files.begin_grace(until, previous.files.clone());
        tracing::info!(hosts = previous.hosts.len(), files = previous.files.len(), grace = ?cfg.grace, state = number, "lock grace period: only reclaims until it ends");
        super::nsm::notify_restart(state, previous.hosts);
    }
    Ok(tcp)
}

/// Answers the calls arriving on a UDP socket, up to [`UDP_IN_FLIGHT`] at once.
async fn udp_loop(sock: UdpSocket, state: Arc<NfsState>) -> std::io::Result<()> {
    let sock = Arc::new(sock);
    let places = Arc::new(tokio::sync::Semaphore::new(UDP_IN_FLIGHT));
    loop {
        let mut buf = vec![0; MAX_DATAGRAM];
        let (n, peer) = match sock.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                // ICMP errors of earlier replies show up here; they concern no one else.
                tracing::debug!(error = %e, "NLM receive failed");
                continue;
            }
        };
        buf.truncate(n);
        let Ok(place) = places.clone().acquire_owned().await else { return Ok(()) };
        let (sock, state) = (sock.clone(), state.clone());
        tokio::spawn(async move {
            let slots = crate::qos::Slots::new(peer.ip());
            if let Some(reply) = crate::dispatch::call(&state, peer.ip(), &slots, Record::from(buf)).await {
                // The reply starts with room for a TCP record mark, which UDP does not use.
                let _ = sock.send_to(&reply[4..], peer).await;
            }
            drop(place);
        });
    }
}
