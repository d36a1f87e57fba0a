//! Subtree invalidation in O(1): a directory renamed or removed (or a watch lost) drops
//! everything cached beneath it by recording the folded prefix with a new epoch. A slot
//! remembers the epoch it was read under; a lookup of a slot from an older epoch checks
//! the prefixes killed since (few, and rare) and drops the slot if one covers it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// Kills remembered; a slot older than all of them is dropped on its next lookup.
const KEEP: usize = 512;

pub(crate) struct Kills {
    epoch: AtomicU64,
    list: RwLock<VecDeque<(u64, Box<str>)>>,
}

/// Whether `prefix` (a folded path; empty: the root) covers `key`.
fn covers(prefix: &str, key: &str) -> bool {
    prefix.is_empty() || (key.starts_with(prefix) && (key.len() == prefix.len() || key.as_bytes()[prefix.len()] == b'/'))
}

impl Kills {
    pub(crate) fn new() -> Self {
        Kills { epoch: AtomicU64::new(0), list: RwLock::new(VecDeque::new()) }
    }

    /// The epoch to record with data read from now on.
    pub(crate) fn current(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Everything at or beneath folded path `prefix` is stale.
    pub(crate) fn kill(&self, prefix: &str) {
        let mut l = self.list.write().unwrap_or_else(|p| p.into_inner());
        let e = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        l.push_back((e, prefix.into()));
        if l.len() > KEEP {
            l.pop_front();
        }
    }

    /// Whether data for `key` read under epoch `since` is still good; `Some(now)` (the
    /// epoch to record instead) if so.
    pub(crate) fn check(&self, key: &str, since: u64) -> Option<u64> {
        let now = self.current();
        if since == now {
            return Some(now);
        }
        let l = self.list.read().unwrap_or_else(|p| p.into_inner());
        // History older than the list is lost: the slot may have been killed.
        if l.front().is_none_or(|f| f.0 > since + 1) {
            return None;
        }
        let killed = l.iter().any(|(e, p)| *e > since && covers(p, key));
        (!killed).then(|| l.back().map_or(now, |b| b.0.max(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_cover_their_subtree_only() {
        let k = Kills::new();
        let e0 = k.current();
        k.kill("a/b");
        assert!(k.check("a/b", e0).is_none());
        assert!(k.check("a/b/c", e0).is_none());
        assert!(k.check("a/bc", e0).is_some());
        assert!(k.check("a", e0).is_some());
        let e1 = k.current();
        assert_eq!(k.check("a/b/c", e1), Some(e1));
        k.kill("");
        assert!(k.check("x", e1).is_none());
        for _ in 0..KEEP + 1 {
            k.kill("zzz");
        }
        // The kills since e1 are no longer all known.
        assert!(k.check("x", e1).is_none());
    }
}
