//! Who may connect to a protocol server, and for how long a connection may stay without
//! logging on: protocol-neutral admission of TCP connections, shared by SMB and NFS.
//!
//! - A connection is admitted while the server holds fewer than `max_connections` and its
//!   client address fewer than `max_per_client`; otherwise it is refused at once.
//! - Connections that have not authenticated are a bounded pool (`max_unauthenticated`):
//!   when a new connection would overflow it, the oldest connection still in the pool is
//!   evicted (its server closes it). An authenticated connection is never evicted, so a
//!   host that opens connections and never logs on cannot shut anyone else out; it only
//!   displaces its own oldest.
//! - Every limit hit ([`Limit`]) is counted, and logged at most once per client and limit
//!   per minute, so an attack cannot flood the log.
//!
//! The protocol servers enforce the time limits themselves (they own the sockets) and report
//! them here with [`Admission::hit`].

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore};

/// How often one client's hits of one limit are logged at most.
const LOG_EVERY: Duration = Duration::from_secs(60);
/// Clients remembered for rate-limited logging; past this, old entries are pruned and, if
/// none is old enough, the hit is counted but not logged.
const LOG_MEMORY: usize = 65_536;

/// The connection limits of one protocol server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections held at once, in all.
    pub max_connections: usize,
    /// Connections held at once from one client address.
    pub max_per_client: usize,
    /// Connections not yet authenticated held at once; the oldest goes when a new one
    /// would pass it. `usize::MAX` where the protocol has no logon (NFS).
    pub max_unauthenticated: usize,
    /// Requests (calls) of one client address running at once, over all its connections.
    pub max_calls_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_connections: 1024, max_per_client: 256, max_unauthenticated: 256, max_calls_per_client: 1024 }
    }
}

/// A limit that was hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Limit {
    /// Refused: the server held `max_connections`.
    Connections,
    /// Refused: the client address held `max_per_client`.
    PerClient,
    /// Closed: the oldest connection not yet authenticated, to make room for a new one.
    Unauthenticated,
    /// Closed: no logon within the logon timeout.
    LogonTimeout,
    /// Closed: a frame (record) did not arrive whole in time once its header had.
    FrameTimeout,
    /// Closed: a frame larger than allowed (before logon, frames are small).
    FrameTooLarge,
    /// Waited: the client address had `max_calls_per_client` calls running.
    CallsPerClient,
    /// Refused: a request without the credentials its service asks for (the admin
    /// endpoint's token).
    Unauthorized,
    /// Refused: a connection already has its maximum of sessions (SMB).
    SessionsPerConnection,
    /// Refused: a session already has its maximum of tree connects (SMB).
    TreesPerSession,
    /// Refused: a session already has its maximum of open files (SMB).
    OpensPerSession,
    /// Refused (INSUFFICIENT_RESOURCES): a connection already has its maximum of requests
    /// waiting asynchronously (SMB: notifications, blocking locks, creates waiting on breaks).
    AsyncPerConnection,
}

impl Limit {
    pub const ALL: [Limit; 12] = [
        Limit::Connections,
        Limit::PerClient,
        Limit::Unauthenticated,
        Limit::LogonTimeout,
        Limit::FrameTimeout,
        Limit::FrameTooLarge,
        Limit::CallsPerClient,
        Limit::Unauthorized,
        Limit::SessionsPerConnection,
        Limit::TreesPerSession,
        Limit::OpensPerSession,
        Limit::AsyncPerConnection,
    ];

    /// The name used in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Limit::Connections => "connections",
            Limit::PerClient => "connections_per_client",
            Limit::Unauthenticated => "unauthenticated",
            Limit::LogonTimeout => "logon_timeout",
            Limit::FrameTimeout => "frame_timeout",
            Limit::FrameTooLarge => "frame_too_large",
            Limit::CallsPerClient => "calls_per_client",
            Limit::Unauthorized => "unauthorized",
            Limit::SessionsPerConnection => "sessions_per_connection",
            Limit::TreesPerSession => "trees_per_session",
            Limit::OpensPerSession => "opens_per_session",
            Limit::AsyncPerConnection => "async_per_connection",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Limit::Connections => "connection refused: the server holds its maximum of connections",
            Limit::PerClient => "connection refused: this client holds its maximum of connections",
            Limit::Unauthenticated => "oldest connection not logged on closed to make room",
            Limit::LogonTimeout => "connection closed: no logon in time",
            Limit::FrameTimeout => "connection closed: a frame did not arrive whole in time",
            Limit::FrameTooLarge => "connection closed: frame larger than allowed",
            Limit::CallsPerClient => "calls held back: this client has its maximum running",
            Limit::Unauthorized => "request refused: not from a trusted address and without a valid token",
            Limit::SessionsPerConnection => "session refused: the connection holds its maximum of sessions",
            Limit::TreesPerSession => "tree connect refused: the session holds its maximum of tree connects",
            Limit::OpensPerSession => "open refused: the session holds its maximum of open files",
            Limit::AsyncPerConnection => "request refused: the connection holds its maximum of requests waiting asynchronously",
        }
    }
}

/// What an admission looks like now (the admin endpoint shows it).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AdmissionStatus {
    pub protocol: &'static str,
    pub connections: usize,
    pub unauthenticated: usize,
    pub clients: usize,
    pub max_connections: usize,
    pub max_per_client: usize,
    pub max_unauthenticated: Option<usize>,
    /// Hits of each limit since start, by [`Limit::name`].
    pub limit_hits: BTreeMap<&'static str, u64>,
}

/// The admission state of one protocol server.
#[derive(Debug)]
pub struct Admission {
    protocol: &'static str,
    limits: Limits,
    held: Mutex<Held>,
    hits: [AtomicU64; Limit::ALL.len()],
    logged: Mutex<HashMap<(IpAddr, Limit), Instant>>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    clients: HashMap<IpAddr, Client>,
    /// Connections not yet authenticated, by admission order (oldest first).
    waiting: BTreeMap<u64, (IpAddr, Arc<Eviction>)>,
    next: u64,
}

#[derive(Debug)]
struct Client {
    connections: usize,
    calls: Arc<Semaphore>,
}

/// How an admitted connection learns that it was evicted.
#[derive(Debug, Default)]
struct Eviction {
    evicted: AtomicBool,
    notify: Notify,
}

impl Admission {
    /// `protocol` names the server in logs and metrics ("smb", "nfs").
    pub fn new(protocol: &'static str, limits: Limits) -> Arc<Admission> {
        Arc::new(Admission { protocol, limits, held: Mutex::default(), hits: Default::default(), logged: Mutex::default() })
    }

    /// Admits a connection from `peer`, evicting the oldest unauthenticated connection if
    /// the pool is full; or says which limit refuses it (counted and logged here).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Ticket, Limit> {
        let (ticket, evicted) = {
            let mut held = self.lock();
            let refused = if held.total >= self.limits.max_connections {
                Some(Limit::Connections)
            } else if held.clients.get(&peer).is_some_and(|c| c.connections >= self.limits.max_per_client) {
                Some(Limit::PerClient)
            } else {
                None
            };
            if let Some(limit) = refused {
                drop(held);
                self.hit(limit, peer);
                return Err(limit);
            }
            held.total += 1;
            let calls = self.limits.max_calls_per_client;
            let client = held.clients.entry(peer).or_insert_with(|| Client { connections: 0, calls: Arc::new(Semaphore::new(calls)) });
            client.connections += 1;
            let calls = client.calls.clone();
            let evicted = (held.waiting.len() >= self.limits.max_unauthenticated).then(|| held.waiting.pop_first()).flatten();
            let seq = held.next;
            held.next += 1;
            let eviction = Arc::new(Eviction::default());
            if self.limits.max_unauthenticated != usize::MAX {
                held.waiting.insert(seq, (peer, eviction.clone()));
            }
            (Ticket { admission: self.clone(), peer, seq, eviction, calls }, evicted)
        };
        if let Some((_, (old_peer, e))) = evicted {
            e.evicted.store(true, Ordering::Release);
            e.notify.notify_one();
            self.hit(Limit::Unauthenticated, old_peer);
        }
        Ok(ticket)
    }

    /// Counts a hit of `limit` by `peer` and logs it, at most once per client and limit
    /// per minute.
    pub fn hit(&self, limit: Limit, peer: IpAddr) {
        self.hits[limit as usize].fetch_add(1, Ordering::Relaxed);
        if self.should_log(limit, peer, Instant::now()) {
            tracing::warn!(protocol = self.protocol, %peer, limit = limit.name(), "{} (logged once a minute per client)", limit.what());
        }
    }

    fn should_log(&self, limit: Limit, peer: IpAddr, now: Instant) -> bool {
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = logged.get_mut(&(peer, limit)) {
            if now.duration_since(*at) < LOG_EVERY {
                return false;
            }
            *at = now;
            return true;
        }
        if logged.len() >= LOG_MEMORY {
            logged.retain(|_, at| now.duration_since(*at) < LOG_EVERY);
            if logged.len() >= LOG_MEMORY {
                return false;
            }
        }
        logged.insert((peer, limit), now);
        true
    }

    /// Hits of each limit since start.
    pub fn hits(&self) -> Vec<(Limit, u64)> {
        Limit::ALL.iter().map(|&l| (l, self.hits[l as usize].load(Ordering::Relaxed))).collect()
    }

    pub fn status(&self) -> AdmissionStatus {
        let held = self.lock();
        AdmissionStatus {
            protocol: self.protocol,
            connections: held.total,
            unauthenticated: held.waiting.len(),
            clients: held.clients.len(),
            max_connections: self.limits.max_connections,
            max_per_client: self.limits.max_per_client,
            max_unauthenticated: (self.limits.max_unauthenticated != usize::MAX).then_some(self.limits.max_unauthenticated),
            limit_hits: self.hits().into_iter().map(|(l, n)| (l.name(), n)).collect(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn authenticated(&self, seq: u64) {
        self.lock().waiting.remove(&seq);
    }

    fn release(&self, peer: IpAddr, seq: u64) {
        let mut held = self.lock();
        held.total -= 1;
        held.waiting.remove(&seq);
        if let Some(c) = held.clients.get_mut(&peer) {
            c.connections -= 1;
            if c.connections == 0 {
                held.clients.remove(&peer);
            }
        }
    }
}

/// A gauge family: its name, its help text, and its value in an admission's status.
type Gauge = (&'static str, &'static str, fn(&AdmissionStatus) -> usize);

/// Prometheus text for `admissions`: `braid_limit_hits_total{protocol,limit}` and gauges of
/// what each holds now.
pub fn write_metrics(admissions: &[AdmissionStatus], out: &mut String) {
    use std::fmt::Write;
    out.push_str("# HELP braid_limit_hits_total Connections refused or closed, and calls held back, by the limit hit.\n# TYPE braid_limit_hits_total counter\n");
    for a in admissions {
        for (limit, n) in &a.limit_hits {
            let _ = writeln!(out, "braid_limit_hits_total{{protocol=\"{}\",limit=\"{limit}\"}} {n}", a.protocol);
        }
    }
    let gauges: [Gauge; 3] = [
        ("braid_admitted_connections", "Connections admitted and held now.", |a| a.connections),
        ("braid_unauthenticated_connections", "Connections not logged on as a named user.", |a| a.unauthenticated),
        ("braid_connected_clients", "Client addresses with a connection.", |a| a.clients),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for a in admissions {
            let _ = writeln!(out, "{name}{{protocol=\"{}\"}} {}", a.protocol, value(a));
        }
    }
}

/// An admitted connection. Dropping it gives its place back.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    peer: IpAddr,
    seq: u64,
    eviction: Arc<Eviction>,
    calls: Arc<Semaphore>,
}

impl Ticket {
    /// The connection authenticated: it leaves the pool of unauthenticated connections and
    /// is never evicted.
    pub fn authenticated(&self) {
        self.admission.authenticated(self.seq);
    }

    /// Resolves once the connection has been evicted to make room (never, once it
    /// authenticated).
    pub async fn evicted(&self) {
        loop {
            let notified = self.eviction.notify.notified();
            if self.eviction.evicted.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    pub fn is_evicted(&self) -> bool {
        self.eviction.evicted.load(Ordering::Acquire)
    }

    /// The client's calls running at once, over all its connections: acquire one permit
    /// per call (a wait counts as a hit of [`Limit::CallsPerClient`]).
    pub async fn call_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if let Ok(p) = self.calls.clone().try_acquire_owned() {
            return Some(p);
        }
        self.admission.hit(Limit::CallsPerClient, self.peer);
        self.calls.clone().acquire_owned().await.ok()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.release(self.peer, self.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn limits(total: usize, per_client: usize, unauth: usize) -> Limits {
        Limits { max_connections: total, max_per_client: per_client, max_unauthenticated: unauth, max_calls_per_client: 4 }
    }

    #[test]
    fn a_client_at_its_limit_is_refused_and_others_are_not() {
        let a = Admission::new("smb", limits(10, 2, 10));
        let t1 = a.admit(ip(1)).unwrap();
        let _t2 = a.admit(ip(1)).unwrap();
        assert_eq!(a.admit(ip(1)).unwrap_err(), Limit::PerClient);
        let _t3 = a.admit(ip(2)).unwrap();
        drop(t1);
        let _t4 = a.admit(ip(1)).unwrap();
        assert_eq!(a.status().connections, 3);
        assert_eq!(a.hits()[Limit::PerClient as usize].1, 1);
    }

    #[test]
    fn the_total_is_a_hard_limit() {
        let a = Admission::new("nfs", limits(2, 5, usize::MAX));
        let _t = (a.admit(ip(1)).unwrap(), a.admit(ip(2)).unwrap());
        assert_eq!(a.admit(ip(3)).unwrap_err(), Limit::Connections);
        assert_eq!(a.status().unauthenticated, 0, "no pool where nothing logs on");
    }

    #[test]
    fn the_oldest_unauthenticated_connection_makes_room_and_an_authenticated_one_never_does() {
        let a = Admission::new("smb", limits(100, 100, 2));
        let honest = a.admit(ip(2)).unwrap();
        honest.authenticated();
        let old = a.admit(ip(1)).unwrap();
        let newer = a.admit(ip(1)).unwrap();
        let newest = a.admit(ip(1)).unwrap();
        assert!(old.is_evicted(), "the oldest waiting connection goes");
        assert!(!honest.is_evicted() && !newer.is_evicted() && !newest.is_evicted());
        assert_eq!(a.status().unauthenticated, 2);
        // The evicted one still counts until its server closes it.
        assert_eq!(a.status().connections, 4);
        drop(old);
        assert_eq!(a.status().connections, 3);
        assert_eq!(a.hits()[Limit::Unauthenticated as usize].1, 1);
    }

    #[tokio::test]
    async fn eviction_wakes_the_connection() {
        let a = Admission::new("smb", limits(100, 100, 1));
        let first = a.admit(ip(1)).unwrap();
        let waiter = tokio::spawn(async move {
            first.evicted().await;
            first
        });
        tokio::task::yield_now().await;
        let _second = a.admit(ip(1)).unwrap();
        let first = tokio::time::timeout(Duration::from_secs(2), waiter).await.unwrap().unwrap();
        assert!(first.is_evicted());
    }

    #[tokio::test]
    async fn calls_of_a_client_are_bounded_over_its_connections() {
        let a = Admission::new("nfs", limits(100, 100, usize::MAX));
        let (c1, c2) = (a.admit(ip(1)).unwrap(), a.admit(ip(1)).unwrap());
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(c1.call_permit().await.unwrap());
            held.push(c2.call_permit().await.unwrap());
        }
        let blocked = tokio::time::timeout(Duration::from_millis(50), c1.call_permit()).await;
        assert!(blocked.is_err(), "the fifth call of the client waits");
        let other = a.admit(ip(2)).unwrap();
        assert!(other.call_permit().await.is_some(), "another client is not held back");
        held.pop();
        assert!(tokio::time::timeout(Duration::from_secs(1), c2.call_permit()).await.unwrap().is_some());
    }

    #[test]
    fn a_client_is_logged_once_a_minute_per_limit() {
        let a = Admission::new("smb", Limits::default());
        let now = Instant::now();
        assert!(a.should_log(Limit::PerClient, ip(1), now));
        assert!(!a.should_log(Limit::PerClient, ip(1), now + Duration::from_secs(59)));
        assert!(a.should_log(Limit::FrameTimeout, ip(1), now));
        assert!(a.should_log(Limit::PerClient, ip(2), now));
        assert!(a.should_log(Limit::PerClient, ip(1), now + Duration::from_secs(61)));
    }

    #[test]
    fn metrics_name_each_protocol_and_limit() {
        let a = Admission::new("smb", limits(1, 1, 1));
        let _t = a.admit(ip(1)).unwrap();
        assert!(a.admit(ip(2)).is_err());
        let mut out = String::new();
        write_metrics(&[a.status()], &mut out);
        assert!(out.contains("braid_limit_hits_total{protocol=\"smb\",limit=\"connections\"} 1"), "{out}");
        assert!(out.contains("braid_unauthenticated_connections{protocol=\"smb\"} 1"), "{out}");
        assert_eq!(out.matches("# TYPE braid_limit_hits_total counter").count(), 1);
    }
}
