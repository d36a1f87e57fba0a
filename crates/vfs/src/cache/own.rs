//! What tells Braid's own changes from outside ones: the files open for writing through
//! the cache (their data and attributes change without notice, so they are not cached
//! while open, and the events their writes cause are Braid's), and expectations: before
//! a change through Braid, the event it will cause is recorded with a short expiry, and
//! the watcher consumes it instead of reporting the change.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Kinds of expected events (bits).
pub(crate) mod bits {
    pub(crate) const CREATE: u8 = 1;
    pub(crate) const DELETE: u8 = 2;
    pub(crate) const MOVED_FROM: u8 = 4;
    pub(crate) const MOVED_TO: u8 = 8;
    /// Attribute or data changes (IN_ATTRIB, IN_MODIFY): not consumed by the first event,
    /// since one change may cause several; they last until the expiry.
    pub(crate) const ATTRS: u8 = 16;
}

/// How long an expectation waits for its event. Events arrive within milliseconds; an
/// outside change of the same kind to the same name inside this window is taken for ours.
const EXPECT_FOR: Duration = Duration::from_secs(2);

const SHARDS: usize = 16;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn shard_of(k: &str) -> usize {
    (std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(k) as usize) % SHARDS
}

/// A sharded multiset of folded paths (open writers per file, per directory).
pub(crate) struct Counts {
    shards: Vec<Mutex<HashMap<Box<str>, u32>>>,
}

impl Counts {
    pub(crate) fn new() -> Self {
        Counts { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect() }
    }

    pub(crate) fn add(&self, k: &str) {
        *lock(&self.shards[shard_of(k)]).entry(k.into()).or_insert(0) += 1;
    }

    pub(crate) fn sub(&self, k: &str) {
        let mut m = lock(&self.shards[shard_of(k)]);
        if let Some(n) = m.get_mut(k) {
            *n -= 1;
            if *n == 0 {
                m.remove(k);
            }
        }
    }

    pub(crate) fn contains(&self, k: &str) -> bool {
        lock(&self.shards[shard_of(k)]).contains_key(k)
    }
}

/// How many events of each kind (by bit position of [`bits`]) are expected at a folded path,
/// with the expiry of the latest. Counts, not flags: a name created and removed several times
/// in a row (smbtorture smb2.notify.dir does) causes as many events as there were changes.
#[derive(Clone, Copy)]
struct Expect {
    counts: [u16; 5],
    until: Instant,
}

impl Expect {
    fn is_empty(&self) -> bool {
        self.counts.iter().all(|&n| n == 0)
    }
}

/// The positions of the bits set in `b`.
fn kinds(b: u8) -> impl Iterator<Item = usize> {
    (0..5).filter(move |i| b & (1 << i) != 0)
}

/// Expected events at folded paths.
type Expected = HashMap<Box<str>, Expect>;

/// A shard of expectations and when its expired ones are next swept.
struct Shard {
    map: Expected,
    sweep: Instant,
}

/// Expected events by folded path.
pub(crate) struct Expectations {
    shards: Vec<Mutex<Shard>>,
}

impl Expectations {
    pub(crate) fn new() -> Self {
        let sweep = Instant::now() + EXPECT_FOR;
        Expectations { shards: (0..SHARDS).map(|_| Mutex::new(Shard { map: HashMap::new(), sweep })).collect() }
    }

    /// Records that Braid is about to cause `bits` events at `k` (one more of each).
    pub(crate) fn expect(&self, k: &str, b: u8) {
        let now = Instant::now();
        let mut s = lock(&self.shards[shard_of(k)]);
        // Attribute expectations are never consumed, and a create-and-delete churn leaves one
        // per name: sweep the expired every EXPECT_FOR (amortised O(1)), so a shard holds
        // about EXPECT_FOR's worth of names rather than growing to thousands of stale ones.
        if now >= s.sweep || s.map.len() >= 4096 {
            s.map.retain(|_, e| e.until > now);
            s.sweep = now + EXPECT_FOR;
        }
        let e = s.map.entry(k.into()).or_insert(Expect { counts: [0; 5], until: now });
        for i in kinds(b) {
            e.counts[i] = e.counts[i].saturating_add(1);
        }
        e.until = now + EXPECT_FOR;
    }

    /// Withdraws one expected event of each kind in `b` that did not happen (an open that
    /// found the file existing).
    pub(crate) fn withdraw(&self, k: &str, b: u8) {
        let mut s = lock(&self.shards[shard_of(k)]);
        let m = &mut s.map;
        if let Some(e) = m.get_mut(k) {
            for i in kinds(b) {
                e.counts[i] = e.counts[i].saturating_sub(1);
            }
            if e.is_empty() {
                m.remove(k);
            }
        }
    }

    /// Whether an event of kind `b` (one bit) at `k` is Braid's own; consumes one expected
    /// name event (attribute expectations last until they expire).
    pub(crate) fn consume(&self, k: &str, b: u8) -> bool {
        let now = Instant::now();
        let mut s = lock(&self.shards[shard_of(k)]);
        let m = &mut s.map;
        let Some(e) = m.get_mut(k) else { return false };
        if e.until <= now {
            m.remove(k);
            return false;
        }
        let Some(i) = kinds(b).next() else { return false };
        if e.counts[i] == 0 {
            return false;
        }
        if b != bits::ATTRS {
            e.counts[i] -= 1;
            if e.is_empty() {
                m.remove(k);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_expectations_are_consumed_once_attributes_last() {
        let x = Expectations::new();
        x.expect("a/b", bits::CREATE | bits::ATTRS);
        assert!(x.consume("a/b", bits::CREATE));
        assert!(!x.consume("a/b", bits::CREATE));
        assert!(x.consume("a/b", bits::ATTRS));
        assert!(x.consume("a/b", bits::ATTRS));
        assert!(!x.consume("a/b", bits::DELETE));
        x.withdraw("a/b", bits::ATTRS);
        assert!(!x.consume("a/b", bits::ATTRS));
        // A name created and removed twice in a row: two of each, consumed one by one.
        x.expect("a/c", bits::CREATE);
        x.expect("a/c", bits::DELETE);
        x.expect("a/c", bits::CREATE);
        x.expect("a/c", bits::DELETE);
        for _ in 0..2 {
            assert!(x.consume("a/c", bits::CREATE));
            assert!(x.consume("a/c", bits::DELETE));
        }
        assert!(!x.consume("a/c", bits::CREATE));
        let c = Counts::new();
        c.add("f");
        c.add("f");
        c.sub("f");
        assert!(c.contains("f"));
        c.sub("f");
        assert!(!c.contains("f"));
    }
}
