//! The clients of a protocol server that has no sessions of its own to show (NFSv3): per
//! client address, its live connections and what they carried, for the admin endpoint and
//! `braid status`. A connection counts into its own cells; only connecting, disconnecting
//! and a snapshot take the table's lock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// One client address as a snapshot shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PeerStatus {
    pub protocol: &'static str,
    pub client: String,
    pub connections: usize,
    pub calls: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// What one connection has carried.
#[derive(Debug, Default)]
pub struct PeerConn {
    calls: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl PeerConn {
    /// A call of `bytes_in` bytes answered with `bytes_out` bytes.
    pub fn record(&self, bytes_in: usize, bytes_out: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes_in as u64, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out as u64, Ordering::Relaxed);
    }
}

/// Counts of connections gone, kept so a client's totals do not drop when one closes.
#[derive(Debug, Default, Clone, Copy)]
struct Past {
    calls: u64,
    bytes_in: u64,
    bytes_out: u64,
}

#[derive(Debug, Default)]
struct Client {
    live: Vec<Weak<PeerConn>>,
    past: Past,
}

/// The clients of one protocol.
#[derive(Debug)]
pub struct PeerTable {
    protocol: &'static str,
    clients: Mutex<HashMap<IpAddr, Client>>,
}

/// Most client addresses remembered with no live connection.
const MAX_IDLE_CLIENTS: usize = 1024;

impl PeerTable {
    pub fn new(protocol: &'static str) -> Self {
        PeerTable { protocol, clients: Mutex::new(HashMap::new()) }
    }

    /// A new connection from `ip`: it counts into the returned cells while it lives.
    pub fn connect(&self, ip: IpAddr) -> Arc<PeerConn> {
        let conn = Arc::new(PeerConn::default());
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        Self::settle(&mut clients);
        clients.entry(ip).or_default().live.push(Arc::downgrade(&conn));
        conn
    }

    /// A connection ended (its cells are dropped right after): its counts join the past.
    pub fn disconnect(&self, ip: IpAddr, conn: &Arc<PeerConn>) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get_mut(&ip) {
            c.past.calls += conn.calls.load(Ordering::Relaxed);
            c.past.bytes_in += conn.bytes_in.load(Ordering::Relaxed);
            c.past.bytes_out += conn.bytes_out.load(Ordering::Relaxed);
            c.live.retain(|w| w.upgrade().is_some_and(|l| !Arc::ptr_eq(&l, conn)));
        }
    }

    /// Forgets dead connections, and idle clients beyond the bound.
    fn settle(clients: &mut HashMap<IpAddr, Client>) {
        for c in clients.values_mut() {
            c.live.retain(|w| w.strong_count() > 0);
        }
        if clients.len() > MAX_IDLE_CLIENTS {
            clients.retain(|_, c| !c.live.is_empty());
        }
    }

    /// Every client with its live connections and totals, by address.
    pub fn snapshot(&self) -> Vec<PeerStatus> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        Self::settle(&mut clients);
        let mut out: Vec<PeerStatus> = clients
            .iter()
            .map(|(ip, c)| {
                let live: Vec<Arc<PeerConn>> = c.live.iter().filter_map(Weak::upgrade).collect();
                let sum = |f: fn(&PeerConn) -> &AtomicU64| live.iter().map(|l| f(l).load(Ordering::Relaxed)).sum::<u64>();
                PeerStatus {
                    protocol: self.protocol,
                    client: ip.to_string(),
                    connections: live.len(),
                    calls: c.past.calls + sum(|l| &l.calls),
                    bytes_in: c.past.bytes_in + sum(|l| &l.bytes_in),
                    bytes_out: c.past.bytes_out + sum(|l| &l.bytes_out),
                }
            })
            .collect();
        out.sort_by(|a, b| a.client.cmp(&b.client));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_counted_per_client_and_totals_outlive_them() {
        let t = PeerTable::new("nfs");
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let a = t.connect(ip);
        let b = t.connect(ip);
        a.record(100, 10);
        b.record(200, 20);
        let s = t.snapshot();
        assert_eq!((s.len(), s[0].connections, s[0].calls, s[0].bytes_in, s[0].bytes_out), (1, 2, 2, 300, 30));
        t.disconnect(ip, &a);
        drop(a);
        let s = t.snapshot();
        assert_eq!((s[0].connections, s[0].calls, s[0].bytes_in), (1, 2, 300));
        drop(b);
        assert_eq!(t.snapshot()[0].connections, 0, "a connection dropped without disconnect is not live");
    }
}
