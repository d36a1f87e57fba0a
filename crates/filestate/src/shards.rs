//! A hash map split into independently locked shards, so opens of different files never
//! contend on one mutex.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash};
use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, recovering from poisoning: a panicking caller must not wedge every other
/// user of the file.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug)]
pub(crate) struct Sharded<K, V> {
    shards: Vec<Mutex<HashMap<K, V>>>,
}

impl<K: Hash + Eq, V> Sharded<K, V> {
    pub(crate) fn new(n: usize) -> Self {
        Sharded { shards: (0..n.max(1)).map(|_| Mutex::new(HashMap::new())).collect() }
    }

    /// Runs `f` with the shard holding `k` locked.
    pub(crate) fn with<R>(&self, k: &K, f: impl FnOnce(&mut HashMap<K, V>) -> R) -> R {
        let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(k);
        f(&mut lock(&self.shards[(h as usize) % self.shards.len()]))
    }

    /// Entries in all shards (each shard locked in turn: a census, not a snapshot).
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }
}
