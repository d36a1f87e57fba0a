//! Oplocks and leases of one file (MS-SMB2 3.3.1.4, 3.3.4.6, 3.3.4.7, 3.3.5.9.8,
//! 3.3.5.9.11; MS-FSA 2.1.4.12 for what breaks what).
//!
//! The state sits in the file's [`FileNode`](crate::locks::FileNode), behind its own mutex
//! that only CREATE, CLOSE, break acknowledgments and the break checks take. READ never
//! looks at it; WRITE, set-size and LOCK first read one atomic flag (`shared`), set only
//! while some open holds a level II oplock or a read-caching lease, so with no such holder
//! the data path takes no lock.
//!
//! A holder is either one open's oplock or a lease (ClientGuid + LeaseKey) that any number
//! of opens of the same client share. Breaks that need an acknowledgment (from EXCLUSIVE,
//! BATCH, or a lease state with W or H) put the holder in a breaking state; the CREATE that
//! caused them waits (asynchronously) until every such holder acknowledged, closed, or
//! timed out ([`BREAK_TIMEOUT`]). Breaks from level II and from R-only leases are
//! notifications only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use smb_wire::msg::create::oplock;
use smb_wire::msg::oplock::{lease_state as ls, LeaseBreak, OplockBreak, LEASE_BREAK_ACK_REQUIRED};
use smb_wire::{FileId, SessionId};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::sync::lock;

/// How long a break waits for its acknowledgment (MS-SMB2 3.3.2.1 oplock break
/// acknowledgment timer: 35 s, what Windows uses and smbtorture checks).
pub const BREAK_TIMEOUT: Duration = Duration::from_secs(35);

/// Where a holder's break notifications go: the channel its open arrived on, else any live
/// channel of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub session: SessionId,
    pub conn: u64,
    /// The open's tree requires encryption (its breaks are encrypted even if the session
    /// does not encrypt everything).
    pub encrypt: bool,
}

/// One open's oplock.
#[derive(Debug, Clone)]
struct Grant {
    open: u64,
    file_id: FileId,
    level: u8,
    /// A break waits for an acknowledgment of at most this level.
    breaking_to: Option<u8>,
    deadline: Option<Instant>,
    owner: Owner,
}

/// One lease on this file (MS-SMB2 3.3.1.13).
#[derive(Debug, Clone)]
pub struct Lease {
    pub client: [u8; 16],
    pub key: [u8; 16],
    pub state: u32,
    pub breaking_to: Option<u32>,
    deadline: Option<Instant>,
    pub epoch: u16,
    /// Granted through a v2 context: breaks carry the epoch, responses echo the parent.
    pub v2: bool,
    pub parent: Option<[u8; 16]>,
    /// The opens using this lease, with where to reach them.
    opens: Vec<(u64, Owner)>,
}

#[derive(Debug, Default)]
struct State {
    grants: Vec<Grant>,
    leases: Vec<Lease>,
}

impl State {
    /// Whether a level II oplock or a read-caching lease exists (the WRITE path's flag).
    fn shared(&self) -> bool {
        self.grants.iter().any(|g| g.level == oplock::II) || self.leases.iter().any(|l| l.state & ls::READ != 0)
    }
}

/// The oplock and lease state of one file.
#[derive(Debug, Default)]
pub struct NodeOplocks {
    state: Mutex<State>,
    shared: AtomicBool,
    /// Woken whenever a holder's level drops (acknowledgment, close, timeout).
    pub changed: Notify,
}

/// Who is asking: an open, possibly under a lease. Holders of the same open or lease never
/// break themselves.
#[derive(Debug, Clone, Copy)]
pub struct Requester {
    pub open: u64,
    pub lease: Option<LeaseId>,
}

/// A lease's identity: ClientGuid and LeaseKey.
pub type LeaseId = ([u8; 16], [u8; 16]);

impl Requester {
    fn owns_lease(&self, l: &Lease) -> bool {
        self.lease == Some((l.client, l.key))
    }
}

/// What a conflicting operation takes away from the other holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A CREATE that reads or writes data: exclusive oplocks go to level II (or none when
    /// `truncate`), leases lose W (and R when `truncate`).
    ///
    /// `share_conflict`: the open would meet a sharing violation; exclusive oplocks are then
    /// left alone (the open fails anyway), batch oplocks still break so their holders can
    /// close. `spare_leases`: a stat open for lease purposes (READ_CONTROL counts).
    Open { truncate: bool, spare_leases: bool, share_conflict: bool },
    /// A CREATE about to fail with a sharing violation: batch oplocks and handle caching
    /// go, so the holder can close the handles it keeps open.
    SharingViolation,
    /// WRITE, truncation, set end-of-file or allocation, byte-range lock: level II and
    /// read caching end (no acknowledgment).
    Write,
}

/// A notification to send once the state lock is released.
#[derive(Debug, Clone)]
pub enum Notice {
    Oplock { owner: Owner, body: OplockBreak, ack: bool },
    Lease { owners: Vec<Owner>, body: LeaseBreak },
}

/// Result of starting the breaks an operation needs.
#[derive(Debug, Default)]
pub struct Breaks {
    pub notices: Vec<Notice>,
    /// The earliest deadline of a break the operation must wait for; None: nothing to
    /// wait for.
    pub wait_until: Option<Instant>,
}

impl NodeOplocks {
    fn refresh(&self, st: &State) {
        self.shared.store(st.shared(), Ordering::Release);
    }

    /// The cheap check of the WRITE path: is anything cached that a write must break?
    pub fn any_shared(&self) -> bool {
        self.shared.load(Ordering::Acquire)
    }

    /// Starts the breaks `event` by `who` calls for, expires breaks past their deadline,
    /// and says whether (and until when) the caller must wait.
    pub fn start_breaks(&self, who: Requester, event: Event, now: Instant) -> Breaks {
        let mut st = lock(&self.state);
        let mut out = Breaks::default();
        let mut changed = self.expire(&mut st, now);
        // A write breaks even the writer's own level II oplock (as Windows does).
        for g in st.grants.iter_mut().filter(|g| g.open != who.open || (event == Event::Write && g.level == oplock::II)) {
            let target = match (event, g.level) {
                (Event::Write, oplock::II) => Some(oplock::NONE),
                (Event::Write, _) => None,
                (Event::Open { truncate: true, .. }, l) if l != oplock::NONE => Some(oplock::NONE),
                (Event::Open { share_conflict: false, .. }, oplock::EXCLUSIVE) => Some(oplock::II),
                (Event::Open { .. } | Event::SharingViolation, oplock::BATCH) => Some(oplock::II),
                _ => None,
            };
            let Some(target) = target else { continue };
            if g.breaking_to.is_some() {
                // A break is already under way: wait for its acknowledgment; a further
                // break follows it if still needed (the waiter looks again).
                out.wait_until = earliest(out.wait_until, g.deadline);
                continue;
            }
            out.notices.push(Notice::Oplock {
                owner: g.owner,
                body: OplockBreak { oplock_level: target, file_id: g.file_id },
                ack: g.level != oplock::II,
            });
            if g.level == oplock::II {
                // Level II to none needs no acknowledgment (MS-SMB2 2.2.24.1).
                g.level = oplock::NONE;
                changed = true;
            } else {
                let deadline = now + BREAK_TIMEOUT;
                g.breaking_to = Some(target);
                g.deadline = Some(deadline);
                out.wait_until = earliest(out.wait_until, Some(deadline));
            }
        }
        for l in st.leases.iter_mut().filter(|l| !who.owns_lease(l)) {
            let keep = match event {
                Event::Open { spare_leases: true, .. } => ls::ALL,
                // Meeting a sharing violation, only handle caching is broken (W stays).
                Event::Open { share_conflict: true, truncate: false, .. } => !ls::HANDLE,
                Event::Open { truncate: false, .. } => !ls::WRITE,
                Event::Open { truncate: true, .. } => ls::NONE,
                Event::SharingViolation => !ls::HANDLE,
                Event::Write => !ls::READ,
            };
            let mut target = l.state & keep;
            // Every cache state includes R; what is left without it is none.
            if target & ls::READ == 0 {
                target = ls::NONE;
            }
            // Truncation waits only for holders of write caching (their data must be
            // flushed first); other holders are told, and the open goes ahead.
            let waits = match event {
                Event::Write => false,
                Event::Open { truncate: true, .. } => l.state & ls::WRITE != 0,
                _ => keep != ls::ALL,
            };
            if l.breaking_to.is_some() {
                // A conflicting open waits for the break in progress, whoever caused it;
                // its own break is sent once that one is acknowledged, from the state the
                // client then holds (as Windows does).
                if waits {
                    out.wait_until = earliest(out.wait_until, l.deadline);
                }
                continue;
            }
            if target == l.state {
                continue;
            }
            let ack = l.state & (ls::WRITE | ls::HANDLE) != 0;
            l.epoch = l.epoch.wrapping_add(1);
            let body = LeaseBreak {
                new_epoch: if l.v2 { l.epoch } else { 0 },
                flags: if ack { LEASE_BREAK_ACK_REQUIRED } else { 0 },
                lease_key: l.key,
                current_state: l.state,
                new_state: target,
            };
            out.notices.push(Notice::Lease { owners: l.opens.iter().map(|(_, o)| *o).collect(), body });
            if ack {
                let deadline = now + BREAK_TIMEOUT;
                l.breaking_to = Some(target);
                l.deadline = Some(deadline);
                if waits {
                    out.wait_until = earliest(out.wait_until, Some(deadline));
                }
            } else {
                l.state = target;
                changed = true;
            }
        }
        self.refresh(&st);
        drop(st);
        if changed {
            self.changed.notify_waiters();
        }
        out
    }

    /// Breaks whose acknowledgment did not come in time complete as if acknowledged at the
    /// level offered (MS-SMB2 3.3.2.1). Returns whether anything changed.
    fn expire(&self, st: &mut State, now: Instant) -> bool {
        let mut changed = false;
        for g in st.grants.iter_mut() {
            if let (Some(to), Some(d)) = (g.breaking_to, g.deadline) {
                if d <= now {
                    g.level = to;
                    g.breaking_to = None;
                    g.deadline = None;
                    changed = true;
                }
            }
        }
        for l in st.leases.iter_mut() {
            if let (Some(to), Some(d)) = (l.breaking_to, l.deadline) {
                if d <= now {
                    l.state = to;
                    l.breaking_to = None;
                    l.deadline = None;
                    changed = true;
                }
            }
        }
        changed
    }

    /// Runs the break timers: called when a waiter's deadline passes.
    pub fn expire_now(&self) {
        let mut st = lock(&self.state);
        let changed = self.expire(&mut st, Instant::now());
        self.refresh(&st);
        drop(st);
        if changed {
            self.changed.notify_waiters();
        }
    }

    /// The oplock level a new open gets (MS-SMB2 3.3.5.9.8, MS-FSA 2.1.5.17): what it asks
    /// for when it is alone; at most level II when other opens exist and none holds an
    /// exclusive oplock or a write-caching lease; none otherwise. `others` counts the other
    /// opens of the file.
    pub fn grant_oplock(&self, open: u64, file_id: FileId, requested: u8, others: usize, owner: Owner) -> u8 {
        let mut st = lock(&self.state);
        let exclusive_elsewhere = st.grants.iter().any(|g| g.open != open && matches!(g.level, oplock::EXCLUSIVE | oplock::BATCH))
            || st.leases.iter().any(|l| l.state & ls::WRITE != 0);
        // Beside a handle-caching lease an oplock is not granted at all.
        let handle_lease = st.leases.iter().any(|l| l.state & ls::HANDLE != 0);
        let level = match requested {
            _ if handle_lease => oplock::NONE,
            oplock::EXCLUSIVE | oplock::BATCH if others == 0 => requested,
            oplock::II | oplock::EXCLUSIVE | oplock::BATCH if !exclusive_elsewhere => oplock::II,
            _ => oplock::NONE,
        };
        if level != oplock::NONE {
            st.grants.push(Grant { open, file_id, level, breaking_to: None, deadline: None, owner });
            self.refresh(&st);
        }
        level
    }

    /// Grants or joins the lease `client`/`key` for `open` (MS-SMB2 3.3.5.9.11). Returns the
    /// lease as it stands (state, epoch, breaking). `others` counts opens of the file that
    /// are not under this lease.
    #[allow(clippy::too_many_arguments)]
    pub fn grant_lease(
        &self,
        open: u64,
        owner: Owner,
        client: [u8; 16],
        key: [u8; 16],
        requested: u32,
        v2: Option<([u8; 16], u16)>,
        others: usize,
    ) -> Lease {
        let mut st = lock(&self.state);
        // R is the base of every cache state (R, RH, RW, RWH); anything else is refused.
        let requested = if requested & ls::READ == 0 { ls::NONE } else { requested & ls::ALL };
        let exclusive_elsewhere = st.grants.iter().any(|g| g.open != open && matches!(g.level, oplock::EXCLUSIVE | oplock::BATCH))
            || st.leases.iter().any(|l| (l.client, l.key) != (client, key) && l.state & ls::WRITE != 0);
        let mut allowed = ls::ALL;
        if others > 0 {
            allowed &= !ls::WRITE;
        }
        if exclusive_elsewhere {
            allowed = ls::NONE;
        }
        // Beside an oplock of another open a lease gets no handle caching.
        if st.grants.iter().any(|g| g.open != open && g.level != oplock::NONE) {
            allowed &= !ls::HANDLE;
        }
        let pos = st.leases.iter().position(|l| (l.client, l.key) == (client, key));
        let lease = match pos {
            Some(i) => {
                let l = &mut st.leases[i];
                l.opens.push((open, owner));
                // An upgrade asks for a superset of what is held; nothing changes while a
                // break is in progress.
                // Only an upgrade that can be granted whole happens.
                if l.breaking_to.is_none() && requested & !allowed == 0 && requested & l.state == l.state && requested != l.state {
                    l.state = requested;
                    l.epoch = l.epoch.wrapping_add(1);
                }
                l.clone()
            }
            None => {
                let state = requested & allowed;
                let (parent, epoch) = match v2 {
                    Some((p, e)) => (Some(p).filter(|p| *p != [0; 16]), e),
                    None => (None, 0),
                };
                let l = Lease {
                    client,
                    key,
                    state,
                    breaking_to: None,
                    deadline: None,
                    epoch: if state != ls::NONE { epoch.wrapping_add(1) } else { epoch },
                    v2: v2.is_some(),
                    parent,
                    opens: vec![(open, owner)],
                };
                st.leases.push(l.clone());
                l
            }
        };
        self.refresh(&st);
        lease
    }

    /// An open is gone: its oplock ends, and its lease when it was the lease's last open.
    /// Returns the lease key freed, if any.
    pub fn release(&self, open: u64) -> Option<LeaseId> {
        let mut st = lock(&self.state);
        st.grants.retain(|g| g.open != open);
        let mut freed = None;
        for l in st.leases.iter_mut() {
            l.opens.retain(|(o, _)| *o != open);
        }
        st.leases.retain(|l| {
            if l.opens.is_empty() {
                freed = Some((l.client, l.key));
                false
            } else {
                true
            }
        });
        self.refresh(&st);
        drop(st);
        self.changed.notify_waiters();
        freed
    }

    /// OPLOCK_BREAK acknowledgment of an oplock (MS-SMB2 3.3.5.22.1): the level now held,
    /// or the status to answer.
    pub fn ack_oplock(&self, open: u64, level: u8) -> Result<u8, smb_wire::NtStatus> {
        use smb_wire::NtStatus;
        let mut st = lock(&self.state);
        let Some(g) = st.grants.iter_mut().find(|g| g.open == open) else {
            return Err(NtStatus::INVALID_OPLOCK_PROTOCOL);
        };
        let Some(to) = g.breaking_to else { return Err(NtStatus::INVALID_OPLOCK_PROTOCOL) };
        g.breaking_to = None;
        g.deadline = None;
        let result = if level == oplock::LEASE {
            g.level = oplock::NONE;
            Err(NtStatus::INVALID_PARAMETER)
        } else if level > to || !matches!(level, oplock::NONE | oplock::II) {
            // Acknowledged a higher level than offered: the oplock is gone.
            g.level = oplock::NONE;
            Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
        } else {
            g.level = level;
            Ok(level)
        };
        st.grants.retain(|g| g.level != oplock::NONE);
        self.refresh(&st);
        drop(st);
        self.changed.notify_waiters();
        result
    }

    /// Lease break acknowledgment (MS-SMB2 3.3.5.22.2) for a lease known to be on this
    /// file.
    pub fn ack_lease(&self, client: [u8; 16], key: [u8; 16], state: u32) -> Result<u32, smb_wire::NtStatus> {
        use smb_wire::NtStatus;
        let mut st = lock(&self.state);
        let Some(l) = st.leases.iter_mut().find(|l| (l.client, l.key) == (client, key)) else {
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        };
        let Some(to) = l.breaking_to else { return Err(NtStatus::UNSUCCESSFUL) };
        if state & !to != 0 {
            return Err(smb_wire::NtStatus::REQUEST_NOT_ACCEPTED);
        }
        l.state = state;
        l.breaking_to = None;
        l.deadline = None;
        self.refresh(&st);
        drop(st);
        self.changed.notify_waiters();
        Ok(state)
    }

    /// The lease `open` is under, if any.
    pub fn lease_of(&self, open: u64) -> Option<LeaseId> {
        lock(&self.state).leases.iter().find(|l| l.opens.iter().any(|(o, _)| *o == open)).map(|l| (l.client, l.key))
    }

    /// The opens under lease `id` (they do not count against its caching).
    pub fn lease_opens(&self, id: LeaseId) -> Vec<u64> {
        lock(&self.state).leases.iter().filter(|l| (l.client, l.key) == id).flat_map(|l| l.opens.iter().map(|(o, _)| *o)).collect()
    }

    /// The oplock level `open` holds now (for tests and status).
    #[cfg(test)]
    fn level(&self, open: u64) -> u8 {
        lock(&self.state).grants.iter().find(|g| g.open == open).map_or(oplock::NONE, |g| g.level)
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Notice {
    /// Whether the break waits for an acknowledgment.
    pub fn needs_ack(&self) -> bool {
        match self {
            Notice::Oplock { ack, .. } => *ack,
            Notice::Lease { body, .. } => body.flags & LEASE_BREAK_ACK_REQUIRED != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: Owner = Owner { session: SessionId(1), conn: 1, encrypt: false };
    const FID: FileId = FileId { persistent: 1, volatile: 1 };

    #[test]
    fn sole_opener_gets_batch_and_second_open_breaks_it() {
        let n = NodeOplocks::default();
        assert_eq!(n.grant_oplock(1, FID, oplock::BATCH, 0, OWNER), oplock::BATCH);
        assert!(!n.any_shared(), "no level II yet: writes stay lock-free");
        let now = Instant::now();
        let b = n.start_breaks(Requester { open: 2, lease: None }, Event::Open { truncate: false, spare_leases: false, share_conflict: false }, now);
        assert_eq!(b.notices.len(), 1);
        assert!(b.wait_until.is_some());
        // The holder itself never breaks its own oplock.
        assert!(n.start_breaks(Requester { open: 1, lease: None }, Event::Write, now).notices.is_empty());
        // Acknowledging a level above the offer is a protocol error; the right one works.
        assert_eq!(n.ack_oplock(1, oplock::II), Ok(oplock::II));
        assert_eq!(n.ack_oplock(1, oplock::II), Err(smb_wire::NtStatus::INVALID_OPLOCK_PROTOCOL), "no break in progress");
        assert_eq!(n.grant_oplock(2, FID, oplock::BATCH, 1, OWNER), oplock::II);
        assert!(n.any_shared());
        // A write breaks every level II to none, with no acknowledgment to wait for.
        let b = n.start_breaks(Requester { open: 2, lease: None }, Event::Write, now);
        assert_eq!(b.notices.len(), 2);
        assert!(b.wait_until.is_none());
        assert!(!n.any_shared());
        assert_eq!(n.level(1), oplock::NONE);
    }

    #[test]
    fn break_times_out_and_close_releases() {
        let n = NodeOplocks::default();
        n.grant_oplock(1, FID, oplock::EXCLUSIVE, 0, OWNER);
        let now = Instant::now();
        n.start_breaks(Requester { open: 2, lease: None }, Event::Open { truncate: true, spare_leases: false, share_conflict: false }, now);
        assert_eq!(n.level(1), oplock::EXCLUSIVE);
        let later = now + BREAK_TIMEOUT + Duration::from_secs(1);
        let b = n.start_breaks(Requester { open: 2, lease: None }, Event::Open { truncate: true, spare_leases: false, share_conflict: false }, later);
        assert!(b.wait_until.is_none());
        assert_eq!(n.level(1), oplock::NONE);
        n.grant_oplock(3, FID, oplock::BATCH, 0, OWNER);
        n.release(3);
        assert_eq!(n.level(3), oplock::NONE);
    }

    #[test]
    fn lease_break_and_ack() {
        let n = NodeOplocks::default();
        let (c, k1, k2) = ([1; 16], [2; 16], [3; 16]);
        let l = n.grant_lease(1, OWNER, c, k1, ls::ALL, Some(([0; 16], 0)), 0);
        assert_eq!((l.state, l.epoch), (ls::ALL, 1));
        // Invalid states (no R) are granted nothing.
        assert_eq!(n.grant_lease(9, OWNER, c, [9; 16], ls::HANDLE, None, 1).state, ls::NONE);
        n.release(9);
        let now = Instant::now();
        let b = n.start_breaks(
            Requester { open: 2, lease: Some((c, k2)) },
            Event::Open { truncate: false, spare_leases: false, share_conflict: false },
            now,
        );
        let Notice::Lease { body, .. } = &b.notices[0] else { panic!("lease notice expected") };
        assert_eq!((body.current_state, body.new_state, body.new_epoch), (ls::ALL, ls::READ | ls::HANDLE, 2));
        assert_eq!(body.flags, LEASE_BREAK_ACK_REQUIRED);
        assert_eq!(n.ack_lease(c, k1, ls::ALL), Err(smb_wire::NtStatus::REQUEST_NOT_ACCEPTED));
        assert_eq!(n.ack_lease(c, k2, ls::READ), Err(smb_wire::NtStatus::OBJECT_NAME_NOT_FOUND));
        assert_eq!(n.ack_lease(c, k1, ls::READ | ls::HANDLE), Ok(ls::READ | ls::HANDLE));
        assert_eq!(n.ack_lease(c, k1, ls::READ), Err(smb_wire::NtStatus::UNSUCCESSFUL));
        let l2 = n.grant_lease(2, OWNER, c, k2, ls::ALL, None, 1);
        assert_eq!(l2.state, ls::READ | ls::HANDLE, "W only for a sole opener");
        // A write takes R from the other lease; R-only breaks need no acknowledgment.
        let b = n.start_breaks(Requester { open: 2, lease: Some((c, k2)) }, Event::Write, now);
        assert_eq!(b.notices.len(), 1);
        let Notice::Lease { body, .. } = &b.notices[0] else { panic!("lease notice expected") };
        assert_eq!((body.new_state, body.flags), (ls::NONE, LEASE_BREAK_ACK_REQUIRED), "H needs an acknowledgment");
        assert!(b.wait_until.is_none(), "a write never waits for it");
    }
}
