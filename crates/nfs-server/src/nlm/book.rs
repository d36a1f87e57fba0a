//! Who holds NLM locks: lock owners (a client host's caller name, its owner handle `oh`
//! and process id `svid`) with the ids their locks carry in the shared file table, the
//! files each owner holds something on, the hosts with their addresses (for callbacks and
//! for releasing everything a rebooted host held), blocked requests waiting for a lock,
//! and GRANTED_MSG callbacks awaiting their GRANTED_RES. Bounded: a client cannot grow it
//! without limit.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::Instant;

use braid_filestate::{FileKey, OpenId, POSIX_OWNER};

/// Lock owners at most, over every host.
pub const MAX_OWNERS: usize = 65_536;
/// Blocked requests waiting at most, over every host, and per host.
pub const MAX_BLOCKED: usize = 4096;
pub const MAX_BLOCKED_PER_HOST: usize = 256;
/// Granted callbacks remembered until their GRANTED_RES.
const MAX_GRANTING: usize = 4096;
/// The id a share reservation of an owner is claimed under: the owner's with this bit.
pub const SHARE_CLAIM: OpenId = 1 << 60;

/// A lock owner as the client names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerKey {
    pub host: Vec<u8>,
    pub oh: Vec<u8>,
    pub svid: i32,
}

/// An owner's id and what it holds.
#[derive(Debug)]
struct Owner {
    key: OwnerKey,
    files: HashSet<FileKey>,
    shares: HashSet<FileKey>,
}

/// A client host.
#[derive(Debug)]
pub struct Host {
    pub addr: IpAddr,
    owners: HashSet<OpenId>,
    blocked: usize,
    /// When the host last called, or last answered a probe.
    seen: Instant,
    /// Probes in a row it did not answer.
    misses: u32,
    /// Whether it ever answered a probe: a host Braid cannot reach at all (behind NAT, a
    /// firewall) is never taken for gone, only one that stopped answering.
    answered: bool,
}

/// A blocked request: owner, file, offset, length, exclusive.
pub type BlockKey = (OpenId, FileKey, u64, u64, bool);

/// A blocked request's waiting task and when it gives up unless the client asks again.
#[derive(Debug)]
pub struct Blocked {
    pub task: tokio::task::AbortHandle,
    pub until: Instant,
    host: Vec<u8>,
}

/// What one rebooted or freed host held, to be released in the file table.
#[derive(Debug, Default)]
pub struct Holdings {
    /// (owner, file) pairs with byte-range locks.
    pub locks: Vec<(OpenId, FileKey)>,
    /// (claim id, file) pairs of share reservations.
    pub shares: Vec<(OpenId, FileKey)>,
}

#[derive(Debug, Default)]
pub struct Book {
    owners: HashMap<OpenId, Owner>,
    ids: HashMap<OwnerKey, OpenId>,
    hosts: HashMap<Vec<u8>, Host>,
    blocked: HashMap<BlockKey, Blocked>,
    /// GRANTED_MSG cookies -> the lock granted.
    granting: HashMap<u64, (OpenId, FileKey, u64, u64)>,
    next: u64,
}

impl Book {
    /// The id of `key`'s owner, made if new; None when too many owners exist.
    pub fn owner(&mut self, key: &OwnerKey, addr: IpAddr) -> Option<OpenId> {
        if let Some(id) = self.ids.get(key) {
            if let Some(h) = self.hosts.get_mut(&key.host) {
                (h.addr, h.seen, h.misses) = (addr, Instant::now(), 0);
            }
            return Some(*id);
        }
        if self.owners.len() >= MAX_OWNERS {
            return None;
        }
        self.next += 1;
        let id = POSIX_OWNER | self.next;
        self.ids.insert(key.clone(), id);
        self.owners.insert(id, Owner { key: key.clone(), files: HashSet::new(), shares: HashSet::new() });
        let host = self.hosts.entry(key.host.clone()).or_insert_with(|| Host {
            addr,
            owners: HashSet::new(),
            blocked: 0,
            seen: Instant::now(),
            misses: 0,
            answered: false,
        });
        (host.addr, host.seen, host.misses) = (addr, Instant::now(), 0);
        host.owners.insert(id);
        Some(id)
    }

    /// The id of `key`'s owner if it exists.
    pub fn find(&self, key: &OwnerKey) -> Option<OpenId> {
        self.ids.get(key).copied()
    }

    /// Who owner `id` is (for TEST's holder).
    pub fn who(&self, id: OpenId) -> Option<&OwnerKey> {
        self.owners.get(&id).map(|o| &o.key)
    }

    /// Records that owner `id` holds a lock on `key`.
    pub fn took(&mut self, id: OpenId, key: FileKey) {
        if let Some(o) = self.owners.get_mut(&id) {
            o.files.insert(key);
        }
    }

    /// Records a share reservation of owner `id` on `key`.
    pub fn shared(&mut self, id: OpenId, key: FileKey) {
        if let Some(o) = self.owners.get_mut(&id) {
            o.shares.insert(key);
        }
    }

    /// Records that owner `id` no longer holds locks (`locks`) or its share reservation on
    /// `key`; an owner holding nothing and waiting for nothing is forgotten.
    pub fn let_go(&mut self, id: OpenId, key: FileKey, locks: bool, share: bool) {
        let Some(o) = self.owners.get_mut(&id) else { return };
        if locks {
            o.files.remove(&key);
        }
        if share {
            o.shares.remove(&key);
        }
        if o.files.is_empty() && o.shares.is_empty() && !self.blocked.keys().any(|b| b.0 == id) {
            self.forget_owner(id);
        }
    }

    fn forget_owner(&mut self, id: OpenId) {
        let Some(o) = self.owners.remove(&id) else { return };
        self.ids.remove(&o.key);
        if let Some(h) = self.hosts.get_mut(&o.key.host) {
            h.owners.remove(&id);
            if h.owners.is_empty() && h.blocked == 0 {
                self.hosts.remove(&o.key.host);
            }
        }
    }

    /// Registers a blocked request; false when the host or the server waits for too many.
    pub fn block(&mut self, b: BlockKey, host: &[u8], task: tokio::task::AbortHandle, until: Instant) -> bool {
        let Some(h) = self.hosts.get_mut(host) else { return false };
        if self.blocked.len() >= MAX_BLOCKED || h.blocked >= MAX_BLOCKED_PER_HOST {
            return false;
        }
        h.blocked += 1;
        self.blocked.insert(b, Blocked { task, until, host: host.to_vec() });
        true
    }

    /// The blocked request `b`, if waiting: the client asked again, so it waits on until
    /// `until`. True when it was waiting.
    pub fn still_blocked(&mut self, b: &BlockKey, until: Instant) -> bool {
        match self.blocked.get_mut(b) {
            Some(w) => {
                w.until = until;
                true
            }
            None => false,
        }
    }

    /// When the blocked request `b` gives up.
    pub fn blocked_until(&self, b: &BlockKey) -> Option<Instant> {
        self.blocked.get(b).map(|w| w.until)
    }

    /// Ends the blocked request `b`; returns its task (to abort, when cancelled).
    pub fn unblock(&mut self, b: &BlockKey) -> Option<tokio::task::AbortHandle> {
        let w = self.blocked.remove(b)?;
        if let Some(h) = self.hosts.get_mut(&w.host) {
            h.blocked -= 1;
        }
        Some(w.task)
    }

    /// Remembers a GRANTED_MSG's cookie; returns it.
    pub fn granting(&mut self, lock: (OpenId, FileKey, u64, u64)) -> u64 {
        if self.granting.len() >= MAX_GRANTING {
            self.granting.clear();
        }
        self.next += 1;
        self.granting.insert(self.next, lock);
        self.next
    }

    /// The lock a GRANTED_RES's cookie names (forgotten).
    pub fn granted(&mut self, cookie: u64) -> Option<(OpenId, FileKey, u64, u64)> {
        self.granting.remove(&cookie)
    }

    /// Removes every host named `name` or at `addr` with everything it held and waited
    /// for; returns what to release in the file table and the waits to abort.
    pub fn drop_hosts(&mut self, name: Option<&[u8]>, addr: Option<IpAddr>) -> (Holdings, Vec<tokio::task::AbortHandle>) {
        let gone: Vec<Vec<u8>> =
            self.hosts.iter().filter(|(n, h)| Some(n.as_slice()) == name || Some(h.addr) == addr).map(|(n, _)| n.clone()).collect();
        let mut held = Holdings::default();
        let mut waits = Vec::new();
        for n in gone {
            let Some(h) = self.hosts.remove(&n) else { continue };
            for id in h.owners {
                if let Some(o) = self.owners.remove(&id) {
                    self.ids.remove(&o.key);
                    held.locks.extend(o.files.into_iter().map(|f| (id, f)));
                    held.shares.extend(o.shares.into_iter().map(|f| (id | SHARE_CLAIM, f)));
                }
            }
            let blocked: Vec<BlockKey> = self.blocked.iter().filter(|(_, w)| w.host == n).map(|(k, _)| *k).collect();
            waits.extend(blocked.iter().filter_map(|b| self.blocked.remove(b)).map(|w| w.task));
        }
        (held, waits)
    }

    /// Hosts not heard from since `before`: their names and addresses, to be probed.
    pub fn quiet_hosts(&self, before: Instant) -> Vec<(Vec<u8>, IpAddr)> {
        self.hosts.iter().filter(|(_, h)| h.seen < before).map(|(n, h)| (n.clone(), h.addr)).collect()
    }

    /// Records a probe of host `name`: answered, or one more miss (counted only once it
    /// has answered one). Returns how many probes in a row it has missed.
    pub fn probed(&mut self, name: &[u8], answered: bool) -> u32 {
        let Some(h) = self.hosts.get_mut(name) else { return 0 };
        if answered {
            (h.seen, h.misses, h.answered) = (Instant::now(), 0, true);
        } else if h.answered {
            h.misses += 1;
        }
        h.misses
    }

    /// Hosts with an address (for `braid status` and tests): how many.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: &str, svid: i32) -> OwnerKey {
        OwnerKey { host: host.into(), oh: b"oh".to_vec(), svid }
    }

    #[test]
    fn owners_come_and_go_with_what_they_hold() {
        let mut b = Book::default();
        let addr: IpAddr = "10.0.0.1".parse().unwrap();
        let a = b.owner(&key("a", 1), addr).unwrap();
        assert_eq!(b.owner(&key("a", 1), addr), Some(a));
        let a2 = b.owner(&key("a", 2), addr).unwrap();
        assert_ne!(a, a2);
        assert!(a & POSIX_OWNER != 0);
        b.took(a, (0, 5));
        b.let_go(a2, (0, 5), true, false);
        assert_eq!(b.find(&key("a", 2)), None, "held nothing: forgotten");
        assert_eq!(b.who(a), Some(&key("a", 1)));
        b.let_go(a, (0, 5), true, false);
        assert_eq!(b.hosts(), 0);
    }

    #[test]
    fn dropping_a_host_returns_what_it_held() {
        let mut b = Book::default();
        let a = b.owner(&key("a", 1), "10.0.0.1".parse().unwrap()).unwrap();
        let c = b.owner(&key("c", 1), "10.0.0.2".parse().unwrap()).unwrap();
        b.took(a, (0, 5));
        b.shared(a, (0, 6));
        b.took(c, (0, 5));
        let (held, waits) = b.drop_hosts(None, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(held.locks, vec![(a, (0, 5))]);
        assert_eq!(held.shares, vec![(a | SHARE_CLAIM, (0, 6))]);
        assert!(waits.is_empty());
        assert_eq!(b.hosts(), 1);
        let (held, _) = b.drop_hosts(Some(b"c"), None);
        assert_eq!(held.locks, vec![(c, (0, 5))]);
        assert_eq!(b.hosts(), 0);
    }

    #[test]
    fn quiet_hosts_are_probed_and_counted() {
        let mut b = Book::default();
        b.owner(&key("a", 1), "10.0.0.1".parse().unwrap()).unwrap();
        assert!(b.quiet_hosts(Instant::now() - std::time::Duration::from_secs(1)).is_empty(), "just heard from");
        let later = Instant::now() + std::time::Duration::from_secs(1);
        assert_eq!(b.quiet_hosts(later), vec![(b"a".to_vec(), "10.0.0.1".parse().unwrap())]);
        assert_eq!(b.probed(b"a", false), 0, "never reached: never counted");
        assert_eq!(b.probed(b"a", true), 0);
        assert_eq!((b.probed(b"a", false), b.probed(b"a", false)), (1, 2));
        assert_eq!(b.probed(b"a", true), 0, "an answer starts the count again");
        assert_eq!(b.probed(b"nobody", false), 0);
    }

    #[test]
    fn owners_are_bounded() {
        let mut b = Book::default();
        for i in 0..MAX_OWNERS {
            assert!(b.owner(&key("h", i as i32), "10.0.0.1".parse().unwrap()).is_some());
        }
        assert_eq!(b.owner(&key("h", -1), "10.0.0.1".parse().unwrap()), None);
    }
}
