//! Small locking utilities every state module uses: a poison-tolerant [`lock`] and a
//! [`Sharded`] map.

use std::collections::HashMap;
use std::sync::Mutex;

/// A sharded map, so lookups from many connections never queue on one lock.
#[derive(Debug)]
pub struct Sharded<K, V> {
    shards: Vec<Mutex<HashMap<K, V>>>,
}

impl<K: std::hash::Hash + Eq, V: Clone> Sharded<K, V> {
    pub fn new(n: usize) -> Self {
        Sharded { shards: (0..n).map(|_| Mutex::new(HashMap::new())).collect() }
    }

    fn shard(&self, k: &K) -> &Mutex<HashMap<K, V>> {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(k);
        &self.shards[(h as usize) % self.shards.len()]
    }

    pub fn get(&self, k: &K) -> Option<V> {
        lock(self.shard(k)).get(k).cloned()
    }

    pub fn insert(&self, k: K, v: V) {
        lock(self.shard(&k)).insert(k, v);
    }

    pub fn remove(&self, k: &K) -> Option<V> {
        lock(self.shard(k)).remove(k)
    }

    /// Runs `f` with the shard holding `k` locked.
    pub fn with<R>(&self, k: &K, f: impl FnOnce(&mut HashMap<K, V>) -> R) -> R {
        f(&mut lock(self.shard(k)))
    }

    /// A snapshot of every value (for rare whole-table scans).
    /// Entries in all shards (each locked in turn).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn values(&self) -> Vec<V> {
        self.shards.iter().flat_map(|s| lock(s).values().cloned().collect::<Vec<_>>()).collect()
    }
}

/// Locks a std mutex, recovering from poisoning (a panicking task must not wedge the server).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharded_map_spreads_and_finds_keys() {
        let m: Sharded<u64, u64> = Sharded::new(4);
        for k in 0..64 {
            m.insert(k, k * 2);
        }
        assert_eq!(m.get(&10), Some(20));
        assert_eq!(m.remove(&10), Some(20));
        assert_eq!(m.get(&10), None);
        assert_eq!(m.values().len(), 63);
        assert!(m.shards.iter().all(|s| !lock(s).is_empty()), "every shard holds some of 64 keys");
    }

    #[test]
    fn lock_recovers_from_poisoning() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
