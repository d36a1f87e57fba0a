//! The duplicate request cache: a client that lost a reply retransmits the call (often on
//! a new connection); a non-idempotent procedure (CREATE, REMOVE, RENAME, ...) must not run
//! twice, or the retransmission would fail with EXIST or NOENT although the first call
//! succeeded. Entries are keyed by client address (not connection), xid, procedure and a
//! checksum of the arguments, and hold the finished reply. A duplicate that arrives while
//! the first call still runs is dropped: the first reply answers it.
//!
//! Bounded: at most `capacity` entries over all clients, the oldest evicted first, and an
//! entry older than `ttl` is never used.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Argument bytes the checksum covers.
pub const CHECKSUM_BYTES: usize = 256;

/// What identifies one call of one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrcKey {
    pub client: IpAddr,
    pub xid: u32,
    pub prog: u32,
    pub proc_: u32,
    pub checksum: u64,
}

impl DrcKey {
    /// The key of a call; the checksum covers the arguments' length and first
    /// [`CHECKSUM_BYTES`] bytes (handles, names, offsets: what tells calls apart; hashing a
    /// whole 1 MiB WRITE would cost more than the write).
    pub fn new(client: IpAddr, xid: u32, prog: u32, proc_: u32, args: &[u8]) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        args.len().hash(&mut h);
        args[..args.len().min(CHECKSUM_BYTES)].hash(&mut h);
        DrcKey { client: client.to_canonical(), xid, prog, proc_, checksum: h.finish() }
    }
}

#[derive(Debug)]
enum Slot {
    InProgress,
    Done(Arc<Vec<u8>>),
}

#[derive(Debug)]
struct Entry {
    slot: Slot,
    at: Instant,
}

/// What a new call should do.
#[derive(Debug)]
pub enum Seen {
    /// First time: run it, then [`Drc::finish`] (or [`Drc::forget`]).
    New,
    /// The same call is running: drop this one.
    InProgress,
    /// Answered before: send these reply bytes again.
    Done(Arc<Vec<u8>>),
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<DrcKey, Entry>,
    /// Insertion order, for eviction (keys may already be gone from the map).
    order: VecDeque<(DrcKey, Instant)>,
}

/// The cache shared by every connection.
#[derive(Debug)]
pub struct Drc {
    inner: Mutex<Inner>,
    capacity: usize,
    ttl: Duration,
}

impl Default for Drc {
    fn default() -> Self {
        Drc::new(8192, Duration::from_secs(120))
    }
}

impl Drc {
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Drc { inner: Mutex::default(), capacity: capacity.max(1), ttl }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks `key` up and, when it is new, claims it as in progress.
    pub fn begin(&self, key: DrcKey) -> Seen {
        let now = Instant::now();
        let mut g = self.lock();
        if let Some(e) = g.map.get(&key) {
            if now.duration_since(e.at) < self.ttl {
                return match &e.slot {
                    Slot::InProgress => Seen::InProgress,
                    Slot::Done(r) => Seen::Done(r.clone()),
                };
            }
        }
        g.map.insert(key, Entry { slot: Slot::InProgress, at: now });
        g.order.push_back((key, now));
        self.evict(&mut g, now);
        Seen::New
    }

    /// Stores the reply of a call claimed by [`Drc::begin`].
    pub fn finish(&self, key: DrcKey, reply: Arc<Vec<u8>>) {
        let mut g = self.lock();
        if let Some(e) = g.map.get_mut(&key) {
            e.slot = Slot::Done(reply);
        }
    }

    /// Releases a claim whose call produced no reply (so a retransmission runs it).
    pub fn forget(&self, key: DrcKey) {
        let mut g = self.lock();
        if matches!(g.map.get(&key), Some(Entry { slot: Slot::InProgress, .. })) {
            g.map.remove(&key);
        }
    }

    fn evict(&self, g: &mut Inner, now: Instant) {
        while let Some(&(key, at)) = g.order.front() {
            let full = g.map.len() > self.capacity || g.order.len() > 2 * self.capacity;
            if !full && now.duration_since(at) < self.ttl {
                break;
            }
            g.order.pop_front();
            // Remove only the entry this order record was for, not a newer one of the key.
            if g.map.get(&key).is_some_and(|e| e.at == at) {
                g.map.remove(&key);
            }
        }
    }

    /// Calls claimed and not yet finished or forgotten (stateful fuzzing checks that none
    /// is left once every call has ended).
    pub fn in_progress(&self) -> usize {
        self.lock().map.values().filter(|e| matches!(e.slot, Slot::InProgress)).count()
    }

    /// Most entries kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Entries held (tests, metrics).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(xid: u32, args: &[u8]) -> DrcKey {
        DrcKey::new("10.0.0.1".parse().unwrap(), xid, 100003, 8, args)
    }

    #[test]
    fn duplicate_is_dropped_then_answered() {
        let d = Drc::default();
        assert!(matches!(d.begin(key(1, b"a")), Seen::New));
        assert!(matches!(d.begin(key(1, b"a")), Seen::InProgress));
        d.finish(key(1, b"a"), Arc::new(b"reply".to_vec()));
        match d.begin(key(1, b"a")) {
            Seen::Done(r) => assert_eq!(&r[..], b"reply"),
            other => panic!("{other:?}"),
        }
        // Same xid with other arguments, or another client: a different call.
        assert!(matches!(d.begin(key(1, b"b")), Seen::New));
        let other = DrcKey::new("10.0.0.2".parse().unwrap(), 1, 100003, 8, b"a");
        assert!(matches!(d.begin(other), Seen::New));
    }

    #[test]
    fn mapped_v4_is_the_same_client() {
        let a = DrcKey::new("10.0.0.1".parse().unwrap(), 5, 1, 2, b"x");
        let b = DrcKey::new("::ffff:10.0.0.1".parse().unwrap(), 5, 1, 2, b"x");
        assert_eq!(a, b);
    }

    #[test]
    fn forget_lets_a_retransmission_run() {
        let d = Drc::default();
        assert!(matches!(d.begin(key(2, b"")), Seen::New));
        d.forget(key(2, b""));
        assert!(matches!(d.begin(key(2, b"")), Seen::New));
    }

    #[test]
    fn bounded_by_capacity_and_ttl() {
        let d = Drc::new(4, Duration::from_secs(60));
        for xid in 0..100 {
            assert!(matches!(d.begin(key(xid, b"")), Seen::New));
            d.finish(key(xid, b""), Arc::new(Vec::new()));
        }
        assert!(d.len() <= 5, "{}", d.len());
        assert!(matches!(d.begin(key(0, b"")), Seen::New), "the oldest went first");
        let d = Drc::new(100, Duration::ZERO);
        assert!(matches!(d.begin(key(1, b"")), Seen::New));
        d.finish(key(1, b""), Arc::new(Vec::new()));
        assert!(matches!(d.begin(key(1, b"")), Seen::New), "expired");
        assert!(d.len() <= 1);
    }
}
