//! The admin endpoint: an HTTP server (hyper), off the SMB port, that `braid status` and
//! monitoring read. `GET /status` returns sessions and their channels as JSON (the shape
//! `Get-SmbMultichannelConnection` users expect) and each share's limits and use;
//! `GET /metrics` returns Prometheus text; `GET /` is the live view (`page`); `POST /reload`
//! reloads the configuration. This module serves and routes; `http` holds the answers and
//! who may ask for what.

pub(crate) mod http;
mod page;
mod share_metrics;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use braid_admission::Limit;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};

use self::http::{Access, AdminAuth, Response};

use crate::server::ServerState;
use crate::session::User;

/// One channel (TCP connection) of a session.
#[derive(Debug, Serialize)]
pub struct ChannelStatus {
    pub id: u64,
    pub client: String,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// One session.
#[derive(Debug, Serialize)]
pub struct SessionStatus {
    pub id: String,
    pub user: String,
    pub client: String,
    pub dialect: String,
    pub signing: bool,
    pub encryption: bool,
    pub current_channels: usize,
    pub max_channels: usize,
    pub channels: Vec<ChannelStatus>,
}

/// Counts and latency percentiles of one operation since the server started.
#[derive(Debug, Serialize)]
pub struct OpStatus {
    pub protocol: &'static str,
    pub op: &'static str,
    pub count: u64,
    pub errors: u64,
    /// Mean, median and 99th percentile latency in microseconds (percentiles interpolated
    /// inside the histogram's buckets).
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// A share's metadata cache, for shares whose backend caches metadata.
#[derive(Debug, Serialize)]
pub struct CacheStatus {
    pub share: String,
    pub hits: u64,
    pub misses: u64,
    pub invalidations: u64,
    pub entries: u64,
    pub bytes: u64,
}

/// Everything `GET /status` returns.
#[derive(Debug, Serialize)]
pub struct Status {
    pub connections: usize,
    pub sessions: Vec<SessionStatus>,
    pub ops: Vec<OpStatus>,
    pub caches: Vec<CacheStatus>,
    /// Clients of the other protocols (NFS), with their connections.
    pub peers: Vec<braid_opmetrics::PeerStatus>,
    /// Each share's provisioned limits and use, in configuration order.
    pub shares: Vec<braid_qos::ShareQosStatus>,
    /// Each protocol's connection limits, what they hold and how often they were hit.
    pub admission: Vec<braid_admission::AdmissionStatus>,
}

/// Connections the admin endpoint holds at once, in all and from one address: a flood
/// costs the file service at most this many small tasks.
pub(crate) const MAX_CONNECTIONS: usize = 64;
const MAX_PER_CLIENT: usize = 16;
/// Time for a request head to arrive, and for a connection in all.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The admin endpoint's own admission (shown beside SMB's and NFS's as `protocol="admin"`).
pub(crate) fn admission() -> Arc<braid_admission::Admission> {
    let limits = braid_admission::Limits {
        max_connections: MAX_CONNECTIONS,
        max_per_client: MAX_PER_CLIENT,
        max_unauthenticated: usize::MAX,
        max_calls_per_client: tokio::sync::Semaphore::MAX_PERMITS,
    };
    braid_admission::Admission::new("admin", limits)
}

/// Binds the admin endpoint. A bind failure is logged, not fatal: the file service matters
/// more than its dashboard. Bound before the file service listens, so a client that can
/// connect to the server can also ask it how it is.
pub async fn bind(addr: SocketAddr) -> Option<TcpListener> {
    let l = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(%addr, error = %e, "admin endpoint unavailable");
            return None;
        }
    };
    tracing::info!(%addr, "admin endpoint listening");
    Some(l)
}

/// Serves the admin endpoint on `l` until the process ends.
pub async fn serve(state: Arc<ServerState>, l: TcpListener) {
    let auth = Arc::new(AdminAuth {
        trusted: state.config.admin_trusted.clone(),
        token: state.config.admin_token.clone(),
        open_metrics: state.config.admin_open_metrics,
    });
    if auth.token.is_none() && l.local_addr().is_ok_and(|a| !a.ip().is_loopback()) {
        tracing::warn!("admin endpoint is not on loopback and has no admin_token: only admin_trusted addresses are answered");
    }
    loop {
        let Ok((sock, peer)) = l.accept().await else { continue };
        // Refused connections are closed at once (admission logs and counts them).
        let Ok(ticket) = state.admin_admission.admit(peer.ip()) else { continue };
        let (state, auth) = (state.clone(), auth.clone());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection(&state, &auth, sock, peer)).await;
            drop(ticket);
        });
    }
}

/// One connection: HTTP/1.1 with keep-alive (or 1.0), heads at most [`http::MAX_HEAD`]
/// bytes and [`HEAD_TIMEOUT`] away.
async fn connection(state: &Arc<ServerState>, auth: &Arc<AdminAuth>, sock: TcpStream, peer: SocketAddr) {
    let service = hyper::service::service_fn(|req: hyper::Request<Incoming>| {
        let (state, auth) = (state.clone(), auth.clone());
        async move { Ok::<_, std::convert::Infallible>(answer(&state, &auth, peer, &req).await.into_hyper()) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(http::MAX_HEAD)
        .serve_connection(TokioIo::new(sock), service);
    if let Err(e) = conn.await {
        tracing::debug!(%peer, error = %e, "admin connection ended");
    }
}

async fn answer(state: &ServerState, auth: &AdminAuth, peer: SocketAddr, req: &hyper::Request<Incoming>) -> Response {
    let (method, path) = (req.method().as_str(), req.uri().path());
    let authorization = req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let granted = http::access(auth, peer.ip(), http::token_of(authorization, req.uri().query()));
    match granted {
        Access::Full => {}
        Access::Metrics if path == "/metrics" => {}
        Access::Metrics | Access::Refused => {
            state.admin_admission.hit(Limit::Unauthorized, peer.ip());
            return http::refusal(auth);
        }
    }
    match (method, path) {
        ("POST", "/reload") => crate::reload::answer_post(state).await,
        ("GET" | "HEAD", "/status") => Response::ok("application/json", serde_json::to_vec_pretty(&status(state)).unwrap_or_default()),
        ("GET" | "HEAD", "/metrics") => Response::ok("text/plain; version=0.0.4", metrics(state).into_bytes()),
        (_, "/status" | "/metrics") => Response::method_not_allowed("GET, HEAD"),
        (_, "/reload") => Response::method_not_allowed("POST"),
        (method, path) => page::answer(method, path),
    }
}

pub fn status(state: &ServerState) -> Status {
    let conns: Vec<_> = state.connections.values().into_iter().filter_map(|w| w.upgrade()).collect();
    let mut sessions: Vec<SessionStatus> = Vec::new();
    for s in state.sessions.values() {
        let Some(sec) = s.security.get() else { continue };
        let channel_ids = s.channel_ids();
        let channels: Vec<ChannelStatus> = channel_ids
            .iter()
            .filter_map(|id| conns.iter().find(|c| c.id == *id))
            .map(|c| ChannelStatus {
                id: c.id,
                client: c.peer.to_string(),
                bytes_in: c.bytes_in.load(Ordering::Relaxed),
                bytes_out: c.bytes_out.load(Ordering::Relaxed),
            })
            .collect();
        let dialect = s.dialect;
        sessions.push(SessionStatus {
            id: format!("{:#018x}", s.id.0),
            user: match &sec.user {
                User::Named(n) => n.clone(),
                User::Guest => "(guest)".into(),
                User::Anonymous => "(anonymous)".into(),
            },
            client: channels.first().map_or_else(String::new, |c| c.client.clone()),
            dialect: format!("{}.{}.{}", dialect >> 8, (dialect >> 4) & 0xf, dialect & 0xf),
            signing: sec.signer.is_some() && sec.signing_required,
            encryption: sec.encrypt_data || s.encrypted_seen.load(Ordering::Relaxed),
            current_channels: channels.len(),
            max_channels: s.max_channels,
            channels,
        });
    }
    sessions.sort_by(|a, b| a.id.cmp(&b.id));
    let peers = state.other_peers.iter().flat_map(|t| t.snapshot()).collect();
    let shares = state.shares.iter().map(|sh| sh.qos.status()).collect();
    let admission =
        std::iter::once(&state.admission).chain(&state.other_admissions).chain(std::iter::once(&state.admin_admission)).map(|a| a.status()).collect();
    Status { connections: conns.len(), sessions, ops: ops(state), caches: caches(state), peers, shares, admission }
}

fn ops(state: &ServerState) -> Vec<OpStatus> {
    let us = |ns: Option<u64>| ns.unwrap_or(0) as f64 / 1000.0;
    let tables = std::iter::once(&state.ops).chain(state.other_ops.iter().map(|t| &**t));
    tables
        .flat_map(|t| t.snapshot().into_iter().map(move |s| (t.protocol(), s)))
        .map(|(protocol, s)| OpStatus {
            protocol,
            op: s.op,
            count: s.count(),
            errors: s.errors,
            mean_us: s.sum_ns as f64 / 1000.0 / s.count().max(1) as f64,
            p50_us: us(s.quantile_ns(0.5)),
            p99_us: us(s.quantile_ns(0.99)),
        })
        .collect()
}

fn caches(state: &ServerState) -> Vec<CacheStatus> {
    state
        .shares
        .iter()
        .filter_map(|sh| {
            let c = sh.backend.cache_stats()?;
            Some(CacheStatus {
                share: sh.config.name.clone(),
                hits: c.hits,
                misses: c.misses,
                invalidations: c.invalidations,
                entries: c.entries,
                bytes: c.bytes,
            })
        })
        .collect()
}

/// A Prometheus label value: backslash, double quote and newline escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The `braid_metadata_cache_*` families, one series per share whose backend caches.
fn write_cache_metrics(caches: &[CacheStatus], out: &mut String) {
    use std::fmt::Write as _;
    if caches.is_empty() {
        return;
    }
    type Field = fn(&CacheStatus) -> u64;
    let families: [(&str, &str, &str, Field); 5] = [
        ("hits_total", "counter", "Metadata lookups answered from the cache.", |c| c.hits),
        ("misses_total", "counter", "Metadata lookups that went to the file system.", |c| c.misses),
        ("invalidations_total", "counter", "Cache entries dropped because something changed.", |c| c.invalidations),
        ("entries", "gauge", "Entries in the metadata cache.", |c| c.entries),
        ("bytes", "gauge", "Approximate bytes held by the metadata cache.", |c| c.bytes),
    ];
    for (name, kind, help, field) in families {
        let _ = writeln!(out, "# HELP braid_metadata_cache_{name} {help}\n# TYPE braid_metadata_cache_{name} {kind}");
        for c in caches {
            let _ = writeln!(out, "braid_metadata_cache_{name}{{share=\"{}\"}} {}", label(&c.share), field(c));
        }
    }
}

/// Prometheus text exposition of the same facts.
fn metrics(state: &ServerState) -> String {
    let st = status(state);
    let (bin, bout) = st.sessions.iter().flat_map(|s| &s.channels).fold((0u64, 0u64), |a, c| (a.0 + c.bytes_in, a.1 + c.bytes_out));
    let mut out = format!(
        "# HELP braid_connections Open TCP connections.\n# TYPE braid_connections gauge\nbraid_connections {}\n\
         # HELP braid_sessions Authenticated sessions.\n# TYPE braid_sessions gauge\nbraid_sessions {}\n\
         # HELP braid_channels Channels of all sessions.\n# TYPE braid_channels gauge\nbraid_channels {}\n\
         # HELP braid_session_bytes_received Bytes received on channels of live sessions.\n# TYPE braid_session_bytes_received gauge\nbraid_session_bytes_received {bin}\n\
         # HELP braid_session_bytes_sent Bytes sent on channels of live sessions.\n# TYPE braid_session_bytes_sent gauge\nbraid_session_bytes_sent {bout}\n",
        st.connections,
        st.sessions.len(),
        st.sessions.iter().map(|s| s.current_channels).sum::<usize>(),
    );
    let tables: Vec<&crate::op_metrics::OpTable> = std::iter::once(&state.ops).chain(state.other_ops.iter().map(|t| &**t)).collect();
    crate::op_metrics::write_prometheus(&tables, &mut out);
    write_cache_metrics(&st.caches, &mut out);
    share_metrics::write(&st.shares, &mut out);
    braid_admission::write_metrics(&st.admission, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_families_name_each_caching_share() {
        let mut out = String::new();
        write_cache_metrics(&[], &mut out);
        assert!(out.is_empty(), "no caching share, no families");
        let c = CacheStatus { share: "a\"b".into(), hits: 7, misses: 3, invalidations: 1, entries: 5, bytes: 640 };
        write_cache_metrics(&[c], &mut out);
        assert!(out.contains("# TYPE braid_metadata_cache_hits_total counter\n"), "{out}");
        assert!(out.contains("braid_metadata_cache_hits_total{share=\"a\\\"b\"} 7\n"), "{out}");
        assert!(out.contains("braid_metadata_cache_misses_total{share=\"a\\\"b\"} 3\n"));
        assert!(out.contains("braid_metadata_cache_invalidations_total{share=\"a\\\"b\"} 1\n"));
        assert!(out.contains("# TYPE braid_metadata_cache_entries gauge\nbraid_metadata_cache_entries{share=\"a\\\"b\"} 5\n"));
        assert!(out.contains("braid_metadata_cache_bytes{share=\"a\\\"b\"} 640\n"));
    }
}
