//! The cache's sharded, bounded map: keys are case-folded share paths, each holding a few
//! exact spellings; every shard evicts with CLOCK when it passes its share of the entry and
//! byte bounds. Lookups from many connections take different shard locks, never one.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Shards per table: enough that 2..64 threads rarely meet on one lock.
pub(crate) const SHARDS: usize = 32;

/// Most spellings of one folded name kept (clients nearly always use one).
const MAX_SPELLINGS: usize = 4;

/// What a table key names: a path's own entry, or a directory's listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Name,
    Listing,
}

/// A table key: the kind and the case-folded path (`/`-joined components).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) kind: Kind,
    pub(crate) folded: Box<str>,
}

/// One key's cached data, with what ages it.
#[derive(Debug)]
pub(crate) struct Slot<V> {
    /// When the data was read from the backend (before the read began).
    pub(crate) born: Instant,
    /// The subtree-invalidation epoch the data was read under (see `Kills`).
    pub(crate) epoch: u64,
    /// The parent directory was watched when the data was read, so events keep it true;
    /// otherwise it expires after the bound.
    pub(crate) watched: bool,
    referenced: bool,
    bytes: usize,
    /// Exact spelling -> value.
    pub(crate) spellings: Vec<(Box<str>, V)>,
}

/// A value's approximate footprint, for the byte bound.
pub(crate) trait Weigh {
    fn weight(&self) -> usize;
}

struct Shard<V> {
    map: HashMap<Key, Slot<V>>,
    /// CLOCK ring of keys; may hold keys already removed (skipped when met).
    ring: VecDeque<Key>,
    bytes: usize,
    /// Bumped by every invalidation in this shard: a fill that began before one is dropped.
    epoch: u64,
}

/// A sharded CLOCK map.
pub(crate) struct Table<V> {
    shards: Vec<Mutex<Shard<V>>>,
    max_entries: usize,
    max_bytes: usize,
    pub(crate) evictions: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fill ticket: the shard epoch seen before reading the backend.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    shard_epoch: u64,
    pub(crate) born: Instant,
}

impl<V: Clone + Weigh> Table<V> {
    /// A table bounded by `entries` and `bytes` in total (split evenly over the shards).
    pub(crate) fn new(entries: usize, bytes: usize) -> Self {
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard { map: HashMap::new(), ring: VecDeque::new(), bytes: 0, epoch: 0 })).collect();
        Table { shards, max_entries: (entries / SHARDS).max(1), max_bytes: (bytes / SHARDS).max(1024), evictions: AtomicU64::new(0) }
    }

    fn shard(&self, k: &Key) -> &Mutex<Shard<V>> {
        let h = std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(k);
        &self.shards[(h as usize) % SHARDS]
    }

    /// Runs `f` on the slot of `k` (marking it referenced); `f` returns the answer and
    /// whether the slot must go (expired or invalid).
    pub(crate) fn lookup<R>(&self, k: &Key, f: impl FnOnce(&mut Slot<V>) -> (Option<R>, bool)) -> Option<R> {
        let mut s = lock(self.shard(k));
        let slot = s.map.get_mut(k)?;
        slot.referenced = true;
        let (r, drop_it) = f(slot);
        if drop_it {
            Self::remove_locked(&mut s, k);
        }
        r
    }

    /// A ticket to take before reading what will be inserted under `k`.
    pub(crate) fn ticket(&self, k: &Key) -> Ticket {
        Ticket { shard_epoch: lock(self.shard(k)).epoch, born: Instant::now() }
    }

    /// Stores `v` for spelling `exact` under `k`, unless `k`'s shard saw an invalidation
    /// since `t` was taken (the value may predate it).
    pub(crate) fn insert(&self, k: Key, exact: &str, v: V, t: Ticket, epoch: u64, watched: bool) -> bool {
        let mut s = lock(self.shard(&k));
        if s.epoch != t.shard_epoch {
            return false;
        }
        let Shard { map, ring, bytes, .. } = &mut *s;
        let slot = map.entry(k.clone()).or_insert_with(|| {
            ring.push_back(k.clone());
            Slot { born: t.born, epoch, watched, referenced: false, bytes: 0, spellings: Vec::new() }
        });
        // All spellings share one age: the oldest, so none outlives its own bound.
        slot.born = slot.born.min(t.born);
        slot.epoch = slot.epoch.min(epoch);
        slot.watched &= watched;
        slot.spellings.retain(|(e, _)| &**e != exact);
        if slot.spellings.len() >= MAX_SPELLINGS {
            slot.spellings.remove(0);
        }
        slot.spellings.push((exact.into(), v));
        let w = slot.spellings.iter().map(|(e, v)| e.len() + v.weight()).sum::<usize>() + k.folded.len() + 96;
        *bytes = *bytes - slot.bytes + w;
        slot.bytes = w;
        self.evict(&mut s);
        true
    }

    /// Replaces the value of spelling `exact` under `k` by `f`'s, if the slot is still the
    /// one `t` was taken against (no invalidation in the shard since).
    pub(crate) fn update(&self, k: &Key, exact: &str, t: Ticket, f: impl FnOnce(&V) -> Option<V>) {
        let mut s = lock(self.shard(k));
        if s.epoch != t.shard_epoch {
            return;
        }
        let Shard { map, bytes, .. } = &mut *s;
        let Some(slot) = map.get_mut(k) else { return };
        let Some(i) = slot.spellings.iter().position(|(e, _)| &**e == exact) else { return };
        let Some(nv) = f(&slot.spellings[i].1) else { return };
        let (old, new) = (slot.spellings[i].1.weight(), nv.weight());
        slot.spellings[i].1 = nv;
        *bytes = *bytes + new - old;
        slot.bytes = slot.bytes + new - old;
        self.evict(&mut s);
    }

    fn remove_locked(s: &mut Shard<V>, k: &Key) -> bool {
        s.epoch += 1;
        match s.map.remove(k) {
            Some(slot) => {
                s.bytes -= slot.bytes;
                true
            }
            None => false,
        }
    }

    /// Drops `k` (every spelling); whether something was held.
    pub(crate) fn invalidate(&self, k: &Key) -> bool {
        Self::remove_locked(&mut lock(self.shard(k)), k)
    }

    /// Drops everything (an event queue overflow).
    pub(crate) fn clear(&self) -> usize {
        let mut n = 0;
        for sh in &self.shards {
            let mut s = lock(sh);
            n += s.map.len();
            s.map.clear();
            s.ring.clear();
            s.bytes = 0;
            s.epoch += 1;
        }
        n
    }

    /// CLOCK: passes over referenced slots (clearing the bit) and evicts the first cold one
    /// until the shard is within bounds.
    fn evict(&self, s: &mut Shard<V>) {
        let mut spins = 2 * s.ring.len() + 2;
        while (s.map.len() > self.max_entries || s.bytes > self.max_bytes) && spins > 0 {
            spins -= 1;
            let Some(k) = s.ring.pop_front() else { break };
            let Some(slot) = s.map.get_mut(&k) else { continue };
            if slot.referenced {
                slot.referenced = false;
                s.ring.push_back(k);
                continue;
            }
            if let Some(slot) = s.map.remove(&k) {
                s.bytes -= slot.bytes;
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Keys of removed slots pile up in the ring: rebuild it once they dominate.
        if s.ring.len() > 2 * s.map.len() + 64 {
            s.ring = s.map.keys().cloned().collect();
        }
    }

    /// Entries and bytes held now.
    pub(crate) fn size(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(e, b), sh| {
            let s = lock(sh);
            (e + s.map.len() as u64, b + s.bytes as u64)
        })
    }
}
