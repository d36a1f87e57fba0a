//! The create replay cache (MS-SMB2 3.3.5.9.10, Open.CreateGuid; Samba's replay cache):
//! a CREATE with a durable v2 request names a CreateGuid, and until the client has shown
//! that it saw the answer (by naming the new open's FileId in a later request), a CREATE
//! replayed with that CreateGuid (SMB2_FLAGS_REPLAY_OPERATION) gets the same open back,
//! a replay while the first CREATE is still pending (waiting for a break) gets
//! STATUS_FILE_NOT_AVAILABLE (the client retries), and a CREATE that is not a replay but
//! reuses the CreateGuid gets STATUS_DUPLICATE_OBJECTID. Kept per client (ClientGuid), as
//! the CreateGuid is the client's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use smb_wire::{NtStatus, SessionId};

use crate::sync::lock;

/// (ClientGuid, CreateGuid).
pub type Key = ([u8; 16], [u8; 16]);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The first CREATE is still being processed; `token` tells it from a later one.
    Pending { token: u64 },
    /// It opened `volatile` in `session`, with this CreateAction.
    Opened { session: SessionId, volatile: u64, action: u32 },
}

/// What a CREATE with a CreateGuid finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Nothing known: this CREATE holds the reservation until it finishes.
    Reserved(Reservation),
    /// A replay of a CREATE that opened `volatile` of this session (with this CreateAction).
    Replay(u64, u32),
}

/// A CREATE's claim on a CreateGuid: [`ReplayCache::opened`] or [`ReplayCache::release`]
/// ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    key: Key,
    token: u64,
}

#[derive(Debug, Default)]
pub struct ReplayCache {
    entries: Mutex<Entries>,
    /// Entries naming an open: with none, a request naming a FileId costs one load here.
    opened: AtomicUsize,
}

#[derive(Debug, Default)]
struct Entries {
    by_key: HashMap<Key, State>,
    /// Volatile id of an open → its key.
    by_open: HashMap<u64, Key>,
    next_token: u64,
}

/// Entries kept at most (a client could otherwise grow the table without bound).
const MAX_ENTRIES: usize = 1 << 16;

impl ReplayCache {
    /// Looks up `key` for a CREATE of `session` (`replay`: the request carries
    /// SMB2_FLAGS_REPLAY_OPERATION).
    pub fn lookup(&self, key: Key, session: SessionId, replay: bool) -> Result<Lookup, NtStatus> {
        let mut e = lock(&self.entries);
        match e.by_key.get(&key).copied() {
            Some(State::Pending { .. }) => return Err(NtStatus::FILE_NOT_AVAILABLE),
            Some(State::Opened { session: s, volatile, action }) if s == session => {
                return if replay { Ok(Lookup::Replay(volatile, action)) } else { Err(NtStatus::DUPLICATE_OBJECTID) };
            }
            Some(State::Opened { volatile, .. }) => {
                // Another session's open: this CREATE takes the CreateGuid over.
                e.by_open.remove(&volatile);
                self.opened.fetch_sub(1, Ordering::AcqRel);
            }
            None if e.by_key.len() >= MAX_ENTRIES => return Err(NtStatus::INSUFFICIENT_RESOURCES),
            None => {}
        }
        e.next_token += 1;
        let token = e.next_token;
        e.by_key.insert(key, State::Pending { token });
        Ok(Lookup::Reserved(Reservation { key, token }))
    }

    /// The reserving CREATE succeeded with open `volatile`, answering CreateAction `action`.
    pub fn opened(&self, r: Reservation, session: SessionId, volatile: u64, action: u32) {
        let mut e = lock(&self.entries);
        if e.by_key.get(&r.key) == Some(&State::Pending { token: r.token }) {
            e.by_key.insert(r.key, State::Opened { session, volatile, action });
            e.by_open.insert(volatile, r.key);
            self.opened.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// CreateGuids remembered (pending or naming an open).
    pub fn len(&self) -> usize {
        lock(&self.entries).by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The reserving CREATE failed: the CreateGuid is free again.
    pub fn release(&self, r: Reservation) {
        let mut e = lock(&self.entries);
        if e.by_key.get(&r.key) == Some(&State::Pending { token: r.token }) {
            e.by_key.remove(&r.key);
        }
    }

    /// Open `volatile` was named by a request (the client saw its CREATE's answer) or
    /// closed: its CreateGuid no longer replays.
    pub fn forget_open(&self, volatile: u64) {
        if self.opened.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut e = lock(&self.entries);
        if let Some(key) = e.by_open.remove(&volatile) {
            e.by_key.remove(&key);
            self.opened.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_duplicate_replay_and_forget() {
        let c = ReplayCache::default();
        let key = ([1; 16], [2; 16]);
        let s = SessionId(5);
        let Ok(Lookup::Reserved(r)) = c.lookup(key, s, false) else { panic!("reserved") };
        assert_eq!(c.lookup(key, s, true), Err(NtStatus::FILE_NOT_AVAILABLE));
        c.opened(r, s, 9, 2);
        assert_eq!(c.lookup(key, s, false), Err(NtStatus::DUPLICATE_OBJECTID));
        assert_eq!(c.lookup(key, s, true), Ok(Lookup::Replay(9, 2)));
        c.forget_open(9);
        let Ok(Lookup::Reserved(r2)) = c.lookup(key, s, true) else { panic!("free again") };
        c.release(r2);
        assert!(matches!(c.lookup(key, s, false), Ok(Lookup::Reserved(_))));
    }
}
