//! Oplocks and leases of one file (MS-SMB2 3.3.1.4, 3.3.4.6, 3.3.4.7, 3.3.5.9.8,
//! 3.3.5.9.11) and the delivery of their break notifications.
//!
//! The grant and break state machine is protocol-neutral and lives in
//! `braid_filestate::Grants` (MS-FSA 2.1.4.12: what breaks what, who waits for what).
//! This module maps SMB onto it: oplock levels onto caching states (level II = R,
//! exclusive = RW, batch = RWH; lease states are the same bits), its break notices onto
//! OPLOCK_BREAK and LEASE_BREAK bodies, its refusals onto NTSTATUS, and wakes the CREATEs
//! waiting for acknowledgments. READ never looks at the grants; WRITE, set-size and LOCK
//! first read one atomic flag (`any_shared`), set only while some open holds a level II
//! oplock or a read-caching lease, so with no such holder the data path takes no lock.

use std::time::Duration;

use braid_filestate::{Caching, GrantTypes, Grants, LeaseRequest};
use smb_wire::msg::create::oplock;
use smb_wire::msg::oplock::{LeaseBreak, LeaseContext, OplockBreak, LEASE_BREAK_ACK_REQUIRED};
use smb_wire::{FileId, NtStatus, SessionId};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::status_map::{lease_ack_status, oplock_ack_status};

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

/// How to reach the holder of one open's grant: its channel and its file id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    pub owner: Owner,
    pub file_id: FileId,
}

/// A lease's identity: ClientGuid and LeaseKey.
pub type LeaseId = ([u8; 16], [u8; 16]);

/// What SMB keeps with a lease for its answers: granted through a v2 context (breaks carry
/// the epoch, responses echo the parent), and the parent lease key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseInfo {
    pub v2: bool,
    pub parent: Option<[u8; 16]>,
}

/// SMB's types in `braid_filestate`'s grants.
#[derive(Debug, Clone)]
pub struct Smb;

impl GrantTypes for Smb {
    type Holder = Reach;
    type LeaseKey = LeaseId;
    type LeaseInfo = LeaseInfo;
}

/// A lease on a file, as `braid_filestate` holds it.
pub type Lease = braid_filestate::Lease<Smb>;

/// What a conflicting operation takes away from the other holders.
pub type Event = braid_filestate::GrantEvent;

/// Who is asking: an open, possibly under a lease. Holders of the same open or lease never
/// break themselves.
#[derive(Debug, Clone, Copy)]
pub struct Requester {
    pub open: u64,
    pub lease: Option<LeaseId>,
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

/// The caching state an oplock level stands for.
fn caching_of(level: u8) -> Caching {
    match level {
        oplock::II => Caching::READ,
        oplock::EXCLUSIVE => Caching::RW,
        oplock::BATCH => Caching::ALL,
        _ => Caching::NONE,
    }
}

/// The oplock level of a caching state an oplock can hold.
fn level_of(c: Caching) -> u8 {
    match c {
        Caching::READ => oplock::II,
        Caching::RW => oplock::EXCLUSIVE,
        Caching::ALL => oplock::BATCH,
        _ => oplock::NONE,
    }
}

/// The OPLOCK_BREAK or LEASE_BREAK notification of a break.
fn smb_notice(n: braid_filestate::Notice<Smb>) -> Notice {
    match n {
        braid_filestate::Notice::Oplock { holder, to, ack, .. } => {
            Notice::Oplock { owner: holder.owner, body: OplockBreak { oplock_level: level_of(to), file_id: holder.file_id }, ack }
        }
        braid_filestate::Notice::Lease { key, info, holders, from, to, epoch, ack } => Notice::Lease {
            owners: holders.iter().map(|h| h.owner).collect(),
            body: LeaseBreak {
                new_epoch: if info.v2 { epoch } else { 0 },
                flags: if ack { LEASE_BREAK_ACK_REQUIRED } else { 0 },
                lease_key: key.1,
                current_state: from.0,
                new_state: to.0,
            },
        },
    }
}

/// The oplock and lease state of one file.
#[derive(Debug, Default)]
pub struct NodeOplocks {
    grants: Grants<Smb>,
    /// Woken whenever a holder's level drops (acknowledgment, close, timeout).
    pub changed: Notify,
}

impl NodeOplocks {
    /// The cheap check of the WRITE path: is anything cached that a write must break?
    pub fn any_shared(&self) -> bool {
        self.grants.any_shared()
    }

    /// Starts the breaks `event` by `who` calls for, expires breaks past their deadline,
    /// and says whether (and until when) the caller must wait.
    pub fn start_breaks(&self, who: Requester, event: Event, now: Instant) -> Breaks {
        let who = braid_filestate::Requester { open: Some(who.open), lease: who.lease };
        let plan = self.grants.start_breaks(&who, event, now.into_std(), BREAK_TIMEOUT);
        if plan.changed {
            self.changed.notify_waiters();
        }
        Breaks { notices: plan.notices.into_iter().map(smb_notice).collect(), wait_until: plan.wait_until.map(Instant::from_std) }
    }

    /// Starts the breaks an operation of another protocol (no open, no lease) calls for.
    pub fn start_foreign_breaks(&self, event: Event, now: Instant) -> Breaks {
        let who = braid_filestate::Requester { open: None, lease: None };
        let plan = self.grants.start_breaks(&who, event, now.into_std(), BREAK_TIMEOUT);
        if plan.changed {
            self.changed.notify_waiters();
        }
        Breaks { notices: plan.notices.into_iter().map(smb_notice).collect(), wait_until: plan.wait_until.map(Instant::from_std) }
    }

    /// Runs the break timers: called when a waiter's deadline passes. Breaks not
    /// acknowledged in time end the holder's caching (MS-SMB2 3.3.2.1, 3.3.2.5).
    pub fn expire_now(&self) {
        if self.grants.expire(Instant::now().into_std()) {
            self.changed.notify_waiters();
        }
    }

    /// The oplock level a new open gets (MS-SMB2 3.3.5.9.8, MS-FSA 2.1.5.17); `others`
    /// counts the other opens of the file.
    pub fn grant_oplock(&self, open: u64, reach: Reach, requested: u8, others: usize) -> u8 {
        level_of(self.grants.grant_oplock(open, reach, caching_of(requested), others))
    }

    /// Grants or joins lease `id` for `open` (MS-SMB2 3.3.5.9.11) as `asked` (its state,
    /// and the parent key and epoch of a v2 context). Returns the lease as it stands.
    /// `others` counts opens of the file that are not under this lease; a directory gets R
    /// and H at most.
    pub fn grant_lease(&self, open: u64, reach: Reach, id: LeaseId, asked: &LeaseContext, others: usize, directory: bool) -> Lease {
        let (requested, v2) = (asked.state, asked.v2);
        let (parent, epoch) = match v2 {
            Some((p, e)) => (Some(p).filter(|p| *p != [0; 16]), e),
            None => (None, 0),
        };
        let info = LeaseInfo { v2: v2.is_some(), parent };
        self.grants.grant_lease(open, reach, LeaseRequest { key: id, state: Caching(requested), info, epoch, directory }, others)
    }

    /// Breaks this directory's leases because one of its entries changed (MS-FSA 2.1.4.12
    /// with PARENT_OBJECT), except a lease whose key is `parent_key`: the ParentLeaseKey of
    /// the open that made the change (MS-SMB2 3.3.4.7). The key alone decides, whatever the
    /// client (MS-FSA 2.1.4.12.2 compares oplock keys). Nothing waits for these breaks.
    pub fn break_parent(&self, parent_key: Option<[u8; 16]>, now: Instant) -> Vec<Notice> {
        let plan = self.grants.start_parent_breaks(&|id: &LeaseId| Some(id.1) == parent_key, now.into_std(), BREAK_TIMEOUT);
        if plan.changed {
            self.changed.notify_waiters();
        }
        plan.notices.into_iter().map(smb_notice).collect()
    }

    /// The ParentLeaseKey lease `id` was granted with, if any.
    pub fn lease_parent(&self, id: LeaseId) -> Option<[u8; 16]> {
        self.grants.lease_info(&id).and_then(|i| i.parent)
    }

    /// An open is gone: its oplock ends, and its lease when it was the lease's last open.
    /// Returns the lease key freed, if any.
    pub fn release(&self, open: u64) -> Option<LeaseId> {
        let freed = self.grants.release(open);
        self.changed.notify_waiters();
        freed
    }

    /// OPLOCK_BREAK acknowledgment of an oplock (MS-SMB2 3.3.5.22.1): the level now held,
    /// or the status to answer.
    pub fn ack_oplock(&self, open: u64, level: u8) -> Result<u8, NtStatus> {
        // A level an oplock cannot be acknowledged at counts as above the offer: the
        // oplock is gone.
        let acked = match level {
            oplock::NONE => Caching::NONE,
            oplock::II => Caching::READ,
            _ => Caching::ALL,
        };
        let result = self.grants.ack_oplock(open, acked).map(level_of).map_err(|e| oplock_ack_status(e, level == oplock::LEASE));
        self.changed.notify_waiters();
        result
    }

    /// Lease break acknowledgment (MS-SMB2 3.3.5.22.2) for a lease known to be on this
    /// file: the state now held, and the breaks to send next (what conflicting events
    /// required while the acknowledged break was in progress).
    pub fn ack_lease(&self, client: [u8; 16], key: [u8; 16], state: u32) -> Result<(u32, Vec<Notice>), NtStatus> {
        let (c, next) = self.grants.ack_lease(&(client, key), Caching(state), Instant::now().into_std(), BREAK_TIMEOUT).map_err(lease_ack_status)?;
        self.changed.notify_waiters();
        Ok((c.0, next.notices.into_iter().map(smb_notice).collect()))
    }

    /// The lease state lease `id` holds now, if it is on this file.
    pub fn lease_state(&self, id: LeaseId) -> Option<u32> {
        self.grants.lease_state(&id).map(|c| c.0)
    }

    /// The lease `open` is under, if any.
    pub fn lease_of(&self, open: u64) -> Option<LeaseId> {
        self.grants.lease_of(open)
    }

    /// The opens under lease `id` (they do not count against its caching).
    pub fn lease_opens(&self, id: LeaseId) -> Vec<u64> {
        self.grants.lease_opens(&id)
    }

    /// The oplock level `open` holds now.
    pub fn level(&self, open: u64) -> u8 {
        level_of(self.grants.oplock_level(open))
    }

    /// Whether `open` may cache its handle: a batch oplock, or a lease with H (what a
    /// durable open needs, MS-SMB2 3.3.5.9.6 and 3.3.5.9.10).
    pub fn caches_handle(&self, open: u64) -> bool {
        if self.grants.oplock_level(open) == Caching::ALL {
            return true;
        }
        self.grants.lease_of(open).and_then(|id| self.grants.lease_state(&id)).is_some_and(|c| c.0 & Caching::HANDLE.0 != 0)
    }

    /// Whether a break of `open`'s oplock or lease waits for an acknowledgment.
    pub fn breaking(&self, open: u64) -> bool {
        self.grants.breaking(open)
    }

    /// The lease context a reconnected open is answered with: lease `id` as it stands.
    pub fn lease_answer(&self, id: LeaseId) -> Option<LeaseContext> {
        let l = self.grants.lease(&id)?;
        let mut flags = 0;
        if l.breaking_to.is_some() {
            flags |= smb_wire::msg::oplock::lease_flags::BREAK_IN_PROGRESS;
        }
        if l.info.parent.is_some() {
            flags |= smb_wire::msg::oplock::lease_flags::PARENT_LEASE_KEY_SET;
        }
        let v2 = l.info.v2.then(|| (l.info.parent.unwrap_or([0; 16]), l.epoch));
        Some(LeaseContext { key: id.1, state: l.state.0, flags, v2 })
    }

    /// Where `open`'s breaks go from now on (a reconnected durable open).
    pub fn set_reach(&self, open: u64, reach: Reach) {
        self.grants.set_holder(open, reach);
    }
}

/// Sends break notifications (server-initiated: MessageId all ones, no credits, not
/// signed; encrypted when the session or the open's share encrypts).
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
    use smb_wire::msg::oplock::lease_state as ls;

    const OWNER: Owner = Owner { session: SessionId(1), conn: 1, encrypt: false };
    const FID: FileId = FileId { persistent: 1, volatile: 1 };
    const REACH: Reach = Reach { owner: OWNER, file_id: FID };

    fn ask(state: u32, v2: Option<([u8; 16], u16)>) -> LeaseContext {
        LeaseContext { key: [0; 16], state, flags: 0, v2 }
    }

    #[test]
    fn sole_opener_gets_batch_and_second_open_breaks_it() {
        let n = NodeOplocks::default();
        assert_eq!(n.grant_oplock(1, REACH, oplock::BATCH, 0), oplock::BATCH);
        assert!(!n.any_shared(), "no level II yet: writes stay lock-free");
        let now = Instant::now();
        let b = n.start_breaks(
            Requester { open: 2, lease: None },
            Event::Open { truncate: false, spare_leases: false, share_conflict: false, retry: false },
            now,
        );
        assert_eq!(b.notices.len(), 1);
        assert!(b.wait_until.is_some());
        // The holder itself never breaks its own oplock.
        assert!(n.start_breaks(Requester { open: 1, lease: None }, Event::Write, now).notices.is_empty());
        // Acknowledging a level above the offer is a protocol error; the right one works.
        assert_eq!(n.ack_oplock(1, oplock::II), Ok(oplock::II));
        assert_eq!(n.ack_oplock(1, oplock::II), Err(smb_wire::NtStatus::INVALID_OPLOCK_PROTOCOL), "no break in progress");
        assert_eq!(n.grant_oplock(2, REACH, oplock::BATCH, 1), oplock::II);
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
        n.grant_oplock(1, REACH, oplock::EXCLUSIVE, 0);
        let now = Instant::now();
        n.start_breaks(
            Requester { open: 2, lease: None },
            Event::Open { truncate: true, spare_leases: false, share_conflict: false, retry: false },
            now,
        );
        assert_eq!(n.level(1), oplock::EXCLUSIVE);
        let later = now + BREAK_TIMEOUT + Duration::from_secs(1);
        let b = n.start_breaks(
            Requester { open: 2, lease: None },
            Event::Open { truncate: true, spare_leases: false, share_conflict: false, retry: false },
            later,
        );
        assert!(b.wait_until.is_none());
        assert_eq!(n.level(1), oplock::NONE);
        n.grant_oplock(3, REACH, oplock::BATCH, 0);
        n.release(3);
        assert_eq!(n.level(3), oplock::NONE);
    }

    #[test]
    fn lease_break_and_ack() {
        let n = NodeOplocks::default();
        let (c, k1, k2) = ([1; 16], [2; 16], [3; 16]);
        let l = n.grant_lease(1, REACH, (c, k1), &ask(ls::ALL, Some(([0; 16], 0))), 0, false);
        assert_eq!((l.state.0, l.epoch), (ls::ALL, 1));
        // Invalid states (no R) are granted nothing.
        assert_eq!(n.grant_lease(9, REACH, (c, [9; 16]), &ask(ls::HANDLE, None), 1, false).state.0, ls::NONE);
        n.release(9);
        let now = Instant::now();
        let b = n.start_breaks(
            Requester { open: 2, lease: Some((c, k2)) },
            Event::Open { truncate: false, spare_leases: false, share_conflict: false, retry: false },
            now,
        );
        let Notice::Lease { body, .. } = &b.notices[0] else { panic!("lease notice expected") };
        assert_eq!((body.current_state, body.new_state, body.new_epoch), (ls::ALL, ls::READ | ls::HANDLE, 2));
        assert_eq!(body.flags, LEASE_BREAK_ACK_REQUIRED);
        assert_eq!(n.ack_lease(c, k1, ls::ALL).map(|a| a.0), Err(NtStatus::REQUEST_NOT_ACCEPTED));
        assert_eq!(n.ack_lease(c, k2, ls::READ).map(|a| a.0), Err(smb_wire::NtStatus::OBJECT_NAME_NOT_FOUND));
        assert_eq!(n.ack_lease(c, k1, ls::READ | ls::HANDLE).map(|a| a.0), Ok(ls::READ | ls::HANDLE));
        assert_eq!(n.ack_lease(c, k1, ls::READ).map(|a| a.0), Err(smb_wire::NtStatus::UNSUCCESSFUL));
        let l2 = n.grant_lease(2, REACH, (c, k2), &ask(ls::ALL, None), 1, false);
        assert_eq!(l2.state.0, ls::READ | ls::HANDLE, "W only for a sole opener");
        // A write takes R from the other lease; R-only breaks need no acknowledgment.
        let b = n.start_breaks(Requester { open: 2, lease: Some((c, k2)) }, Event::Write, now);
        assert_eq!(b.notices.len(), 1);
        let Notice::Lease { body, .. } = &b.notices[0] else { panic!("lease notice expected") };
        assert_eq!((body.new_state, body.flags), (ls::NONE, LEASE_BREAK_ACK_REQUIRED), "H needs an acknowledgment");
        assert!(b.wait_until.is_none(), "a write never waits for it");
    }

    #[test]
    fn directory_leases_lose_w_and_spare_the_parent_key_of_any_client() {
        let n = NodeOplocks::default();
        let (c1, c2, k1, k2) = ([1; 16], [2; 16], [3; 16], [4; 16]);
        let l = n.grant_lease(1, REACH, (c1, k1), &ask(ls::ALL, Some(([0; 16], 0))), 0, true);
        assert_eq!(l.state.0, ls::READ | ls::HANDLE);
        n.grant_lease(2, REACH, (c2, k2), &ask(ls::READ, None), 1, true);
        // A change made under parent key k1 (by any client) spares k1's lease only.
        let notices = n.break_parent(Some(k1), Instant::now());
        assert_eq!(notices.len(), 1);
        let Notice::Lease { body, .. } = &notices[0] else { panic!("lease notice expected") };
        assert_eq!((body.lease_key, body.current_state, body.new_state, body.flags), (k2, ls::READ, ls::NONE, 0));
        let notices = n.break_parent(None, Instant::now());
        let Notice::Lease { body, .. } = &notices[0] else { panic!("lease notice expected") };
        assert_eq!((body.lease_key, body.new_state, body.new_epoch), (k1, ls::NONE, 2));
        assert_eq!(body.flags, LEASE_BREAK_ACK_REQUIRED, "H was held");
    }
}
