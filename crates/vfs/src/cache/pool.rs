//! Deferred close: handles dropped by a CLOSE linger briefly, so an OPEN of the same file
//! right after reuses the kernel's open file instead of opening it again. Braid keeps share
//! modes and byte-range locks in braid-filestate, never as fcntl locks on the fd, so an fd
//! carries nothing of the open that used it before. A lingering handle is dropped on any
//! invalidation of its path (and reused only while the cache still maps the path to the
//! same file id), and after `linger` at most.

use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::FileHandle;

const SHARDS: usize = 16;

/// A handle waiting for reuse.
pub(crate) struct Pooled {
    pub(crate) handle: Box<dyn FileHandle>,
    pub(crate) file_id: u64,
    pub(crate) read: bool,
    pub(crate) write: bool,
    until: Instant,
}

type Row = (Box<str>, Pooled);

pub(crate) struct Pool {
    shards: Vec<Mutex<Vec<Row>>>,
    per_shard: usize,
    linger: Duration,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// A pool of at most `max` handles, each kept for `linger` at most.
    pub(crate) fn new(max: usize, linger: Duration) -> Self {
        Pool { shards: (0..SHARDS).map(|_| Mutex::new(Vec::new())).collect(), per_shard: max.div_ceil(SHARDS), linger }
    }

    fn shard(&self, k: &str) -> &Mutex<Vec<Row>> {
        let h = std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(k);
        &self.shards[(h as usize) % SHARDS]
    }

    /// Keeps `handle` of the file at folded path `k` for reuse.
    pub(crate) fn put(&self, k: &str, handle: Box<dyn FileHandle>, file_id: u64, read: bool, write: bool) {
        if self.per_shard == 0 || self.linger.is_zero() {
            return;
        }
        let until = Instant::now() + self.linger;
        let mut gone = Vec::new();
        {
            let mut v = lock(self.shard(k));
            if v.len() >= self.per_shard {
                gone.push(v.remove(0));
            }
            v.push((k.into(), Pooled { handle, file_id, read, write, until }));
        }
        // Closing fds (which may block on some file systems) outside the lock.
        drop(gone);
    }

    /// A lingering handle of file `file_id` at `k` opened with the same access.
    pub(crate) fn take(&self, k: &str, file_id: u64, read: bool, write: bool) -> Option<Box<dyn FileHandle>> {
        let now = Instant::now();
        let mut v = lock(self.shard(k));
        let i = v.iter().rposition(|(pk, p)| &**pk == k && p.file_id == file_id && p.read == read && p.write == write && p.until > now)?;
        Some(v.swap_remove(i).1.handle)
    }

    /// Drops every lingering handle of `k`.
    pub(crate) fn invalidate(&self, k: &str) {
        let gone: Vec<Row> = {
            let mut v = lock(self.shard(k));
            if !v.iter().any(|(pk, _)| &**pk == k) {
                return;
            }
            let (out, keep): (Vec<Row>, Vec<Row>) = v.drain(..).partition(|(pk, _)| &**pk == k);
            *v = keep;
            out
        };
        drop(gone);
    }

    /// Drops handles whose time is up (`all`: every handle).
    pub(crate) fn purge(&self, all: bool) {
        let now = Instant::now();
        for s in &self.shards {
            let gone: Vec<Row> = {
                let mut v = lock(s);
                if !v.iter().any(|(_, p)| all || p.until <= now) {
                    continue;
                }
                let (out, keep): (Vec<Row>, Vec<Row>) = v.drain(..).partition(|(_, p)| all || p.until <= now);
                *v = keep;
                out
            };
            drop(gone);
        }
    }

    /// Handles held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }
}
