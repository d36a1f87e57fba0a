//! The cache's sharded, bounded map: keys are case-folded share paths, each holding a few
//! exact spellings; every shard evicts with CLOCK when it passes its share of the entry and
//! byte bounds. Lookups from many connections take different shard locks, never one.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Shards per table: enough that 2..64 threads rarely meet on one lock.
pub(crate) const SHARDS: usize = 32;

/// Most spellings of one folded name kept (clients nearly always use one).
const MAX_SPELLINGS: usize = 4;

/// What a table key names: a path's own entry (a final symlink followed), a directory's
/// listing, or their POSIX forms: the object at an exact name itself
/// (`Backend::stat_exact`, not followed) and a listing of every entry as itself
/// (`Backend::read_dir_exact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Name,
    Listing,
    Entry,
    EntryListing,
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
    /// The byte bound is the table's, not a shard's: one large listing may take much of it.
    max_bytes: usize,
    bytes: AtomicUsize,
    /// Where the next pass over the byte bound starts.
    hand: AtomicUsize,
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
    /// A table bounded by `entries` (split evenly over the shards) and `bytes` in total.
    pub(crate) fn new(entries: usize, bytes: usize) -> Self {
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard { map: HashMap::new(), ring: VecDeque::new(), bytes: 0, epoch: 0 })).collect();
        Table {
            shards,
            max_entries: (entries / SHARDS).max(1),
            max_bytes: bytes.max(1024),
            bytes: AtomicUsize::new(0),
            hand: AtomicUsize::new(0),
            evictions: AtomicU64::new(0),
        }
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
            self.remove_locked(&mut s, k);
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
            // Referenced: a new slot survives one pass of the hand.
            Slot { born: t.born, epoch, watched, referenced: true, bytes: 0, spellings: Vec::new() }
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
        self.account(slot.bytes, w);
        slot.bytes = w;
        self.evict(&mut s);
        drop(s);
        self.trim();
        true
    }

    /// Moves the table's byte count from `old` to `new` for one slot.
    fn account(&self, old: usize, new: usize) {
        if new >= old {
            self.bytes.fetch_add(new - old, Ordering::Relaxed);
        } else {
            self.bytes.fetch_sub(old - new, Ordering::Relaxed);
        }
    }

    /// Evicts across shards, one at a time (never two locks at once), until the table is
    /// within its byte bound.
    fn trim(&self) {
        let mut visits = 2 * SHARDS;
        while self.bytes.load(Ordering::Relaxed) > self.max_bytes && visits > 0 {
            visits -= 1;
            let i = self.hand.fetch_add(1, Ordering::Relaxed) % SHARDS;
            let mut s = lock(&self.shards[i]);
            let mut spins = 2 * s.ring.len() + 2;
            while self.bytes.load(Ordering::Relaxed) > self.max_bytes && spins > 0 && !s.map.is_empty() {
                spins -= 1;
                self.step(&mut s);
            }
        }
    }

    /// One move of the CLOCK hand in `s`: a referenced slot loses its mark, a cold one goes.
    fn step(&self, s: &mut Shard<V>) {
        let Some(k) = s.ring.pop_front() else { return };
        let Some(slot) = s.map.get_mut(&k) else { return };
        if slot.referenced {
            slot.referenced = false;
            s.ring.push_back(k);
            return;
        }
        if let Some(slot) = s.map.remove(&k) {
            s.bytes -= slot.bytes;
            self.account(slot.bytes, 0);
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
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
        self.account(old, new);
        slot.bytes = slot.bytes + new - old;
        self.evict(&mut s);
        drop(s);
        self.trim();
    }

    fn remove_locked(&self, s: &mut Shard<V>, k: &Key) -> bool {
        s.epoch += 1;
        match s.map.remove(k) {
            Some(slot) => {
                s.bytes -= slot.bytes;
                self.account(slot.bytes, 0);
                true
            }
            None => false,
        }
    }

    /// Drops `k` (every spelling); whether something was held.
    pub(crate) fn invalidate(&self, k: &Key) -> bool {
        self.remove_locked(&mut lock(self.shard(k)), k)
    }

    /// Drops everything (an event queue overflow).
    pub(crate) fn clear(&self) -> usize {
        let mut n = 0;
        for sh in &self.shards {
            let mut s = lock(sh);
            n += s.map.len();
            s.map.clear();
            s.ring.clear();
            self.account(s.bytes, 0);
            s.bytes = 0;
            s.epoch += 1;
        }
        n
    }

    /// CLOCK within one shard until it holds no more than its share of entries.
    fn evict(&self, s: &mut Shard<V>) {
        let mut spins = 2 * s.ring.len() + 2;
        while s.map.len() > self.max_entries && spins > 0 {
            spins -= 1;
            self.step(s);
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
