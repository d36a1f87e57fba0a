//! Caching grants of one file (MS-FSA 2.1.4.12 for what breaks what, as Windows and
//! smbtorture see it): read, handle and write caching held by one open (an oplock) or by a
//! lease that any number of opens of one client share.
//!
//! A protocol without caching (NFSv3) holds no grant, but its writes, truncations,
//! removals and renames still break the grants of others through [`Grants::start_breaks`].
//! Breaks that need an acknowledgment (from a state with W or H, or an exclusive/batch
//! oplock) leave the holder breaking until it acknowledges, closes, or its deadline passes;
//! the protocol server sends the [`Notice`]s and waits (or not) as the [`BreakPlan`] says.
//!
//! A directory is a file too: it may hold read and handle caching (never write caching,
//! which has nothing to hold back), and a change to any of its entries breaks what its
//! holders cache ([`GrantEvent::ChildChanged`]: MS-FSA 2.1.4.12 with PARENT_OBJECT), except
//! for the holder that made the change through an open naming it as the parent (MS-FSA
//! 2.1.4.12.2: the open's ParentOplockKey against the holder's key).

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::shards::lock;
use crate::{OpenId, StateError};

/// A set of caching rights. The bit values are SMB2's lease state bits, so an SMB lease
/// state converts without translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Caching(pub u32);

impl Caching {
    /// Nothing cached.
    pub const NONE: Caching = Caching(0);
    /// Read caching (a level II oplock).
    pub const READ: Caching = Caching(1);
    /// Handle caching: the client may keep a closed handle open.
    pub const HANDLE: Caching = Caching(2);
    /// Write caching: the client may hold writes back.
    pub const WRITE: Caching = Caching(4);
    /// Read, handle and write caching (a batch oplock).
    pub const ALL: Caching = Caching(7);
    /// An exclusive oplock: read and write caching.
    pub const RW: Caching = Caching(5);

    fn has(self, c: Caching) -> bool {
        self.0 & c.0 != 0
    }

    fn without(self, c: Caching) -> Caching {
        Caching(self.0 & !c.0)
    }
}

/// The protocol's types carried by grants (implemented by a marker type).
pub trait GrantTypes: Clone + Debug {
    /// How to reach the holder of an open's grant (SMB: session, connection, file id).
    type Holder: Clone + Debug + PartialEq;
    /// A lease's identity (SMB: ClientGuid + LeaseKey).
    type LeaseKey: Clone + Debug + PartialEq;
    /// What the protocol keeps with a lease for its own answers (SMB: version, parent key).
    type LeaseInfo: Clone + Debug;
}

/// One open's oplock: `level` is READ (level II), RW (exclusive) or ALL (batch).
#[derive(Debug, Clone)]
struct Oplock<H> {
    open: OpenId,
    holder: H,
    level: Caching,
    breaking_to: Option<Caching>,
    deadline: Option<Instant>,
}

/// One lease on the file.
#[derive(Debug, Clone)]
pub struct Lease<T: GrantTypes> {
    pub key: T::LeaseKey,
    pub state: Caching,
    /// A break waits for an acknowledgment of at most this state.
    pub breaking_to: Option<Caching>,
    deadline: Option<Instant>,
    /// Counts the lease's state changes (SMB2 v2 leases send it).
    pub epoch: u16,
    pub info: T::LeaseInfo,
    /// The opens using this lease, with where to reach them.
    opens: Vec<(OpenId, T::Holder)>,
    /// What a conflicting event asked for while a break was in progress, beyond that
    /// break: once it completes, the lease is broken further in steps
    /// ([`Grants::start_follow_up_breaks`]).
    required: Option<Caching>,
}

/// A lease asked for by an open.
#[derive(Debug, Clone)]
pub struct LeaseRequest<T: GrantTypes> {
    pub key: T::LeaseKey,
    pub state: Caching,
    pub info: T::LeaseInfo,
    /// The epoch a new lease starts from (SMB2 v2 contexts carry one).
    pub epoch: u16,
    /// The file is a directory: write caching is never granted.
    pub directory: bool,
}

/// Who causes a break: an open, possibly under a lease, or nobody's open at all (an NFS
/// write). Holders of the same open or lease never break themselves.
#[derive(Debug, Clone)]
pub struct Requester<K> {
    pub open: Option<OpenId>,
    pub lease: Option<K>,
}

/// What a conflicting operation takes away from the other holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantEvent {
    /// An open that reads or writes data: exclusive oplocks go to level II (or none when
    /// `truncate`), leases lose W (everything when `truncate`).
    ///
    /// `share_conflict`: the open would meet a sharing violation; exclusive oplocks are then
    /// left alone (the open fails anyway), batch oplocks still break so their holders can
    /// close. `spare_leases`: a stat open for lease purposes (SMB counts READ_CONTROL).
    /// `retry`: the open has waited for a break already; it now waits for any break in
    /// progress (on its first attempt, a truncating open waits only for write caching).
    Open { truncate: bool, spare_leases: bool, share_conflict: bool, retry: bool },
    /// An open about to fail with a sharing violation: batch oplocks and handle caching go,
    /// so the holder can close the handles it keeps open.
    SharingViolation,
    /// A write, truncation, size change or byte-range lock: level II and read caching end
    /// (no acknowledgment is waited for).
    Write,
    /// The name is removed or renamed (an NFS REMOVE or RENAME of an open file): as for a
    /// sharing violation, batch oplocks and handle caching go and are waited for, so the
    /// holder closes the handles it keeps open.
    Namespace,
    /// An entry of this directory was added, removed or renamed, or its attributes, size
    /// or times changed (MS-FSA 2.1.4.12 with PARENT_OBJECT, the break of the parent's
    /// oplock): read caching goes, and with it everything (the holder's listing and cached
    /// opens are stale). The change has happened already: nobody waits.
    ChildChanged,
}

/// A break notification the protocol server must send.
#[derive(Debug, Clone)]
pub enum Notice<T: GrantTypes> {
    Oplock { open: OpenId, holder: T::Holder, from: Caching, to: Caching, ack: bool },
    Lease { key: T::LeaseKey, info: T::LeaseInfo, holders: Vec<T::Holder>, from: Caching, to: Caching, epoch: u16, ack: bool },
}

impl<T: GrantTypes> Notice<T> {
    /// Whether the break waits for an acknowledgment.
    pub fn needs_ack(&self) -> bool {
        match self {
            Notice::Oplock { ack, .. } | Notice::Lease { ack, .. } => *ack,
        }
    }
}

/// The breaks an operation started.
#[derive(Debug)]
pub struct BreakPlan<T: GrantTypes> {
    pub notices: Vec<Notice<T>>,
    /// The earliest deadline of a break the operation must wait for (then retry); None:
    /// proceed.
    pub wait_until: Option<Instant>,
    /// Some holder's state dropped (waiters for acknowledgments should look again).
    pub changed: bool,
}

#[derive(Debug)]
struct State<T: GrantTypes> {
    oplocks: Vec<Oplock<T::Holder>>,
    leases: Vec<Lease<T>>,
}

/// The caching grants on one file.
pub struct Grants<T: GrantTypes> {
    state: Mutex<State<T>>,
    /// Set only while a level II oplock or a read-caching lease exists: the write path's
    /// one-load check.
    shared: AtomicBool,
}

impl<T: GrantTypes> Default for Grants<T> {
    fn default() -> Self {
        Grants { state: Mutex::new(State { oplocks: Vec::new(), leases: Vec::new() }), shared: AtomicBool::new(false) }
    }
}

impl<T: GrantTypes> Debug for Grants<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grants").field("state", &*lock(&self.state)).finish()
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The state an oplock breaks to on `event`, if it breaks.
fn oplock_target(event: GrantEvent, level: Caching) -> Option<Caching> {
    match (event, level) {
        (GrantEvent::Write, Caching::READ) => Some(Caching::NONE),
        (GrantEvent::Write | GrantEvent::ChildChanged, _) => None,
        (GrantEvent::Open { truncate: true, .. }, l) if l != Caching::NONE => Some(Caching::NONE),
        (GrantEvent::Open { share_conflict: false, .. }, Caching::RW) => Some(Caching::READ),
        (GrantEvent::Open { .. } | GrantEvent::SharingViolation | GrantEvent::Namespace, Caching::ALL) => Some(Caching::READ),
        _ => None,
    }
}

/// What a lease keeps on `event`, and whether the operation waits for the break.
fn lease_rule(event: GrantEvent, state: Caching) -> (Caching, bool) {
    let keep = match event {
        GrantEvent::Open { spare_leases: true, .. } => Caching::ALL,
        // Meeting a sharing violation, only handle caching is broken (W stays).
        GrantEvent::Open { share_conflict: true, truncate: false, .. } => Caching::ALL.without(Caching::HANDLE),
        GrantEvent::Open { truncate: false, .. } => Caching::ALL.without(Caching::WRITE),
        GrantEvent::Open { truncate: true, .. } => Caching::NONE,
        GrantEvent::SharingViolation | GrantEvent::Namespace => Caching::ALL.without(Caching::HANDLE),
        GrantEvent::Write => Caching::ALL.without(Caching::READ),
        GrantEvent::ChildChanged => Caching::NONE,
    };
    // Truncation waits only for holders of write caching (their data must be flushed
    // first); other holders are told, and the open goes ahead.
    let waits = match event {
        GrantEvent::Write | GrantEvent::ChildChanged => false,
        GrantEvent::Open { truncate: true, .. } => state.has(Caching::WRITE),
        _ => keep != Caching::ALL,
    };
    (keep, waits)
}

impl<T: GrantTypes> State<T> {
    /// Whether a level II oplock or a read-caching lease exists.
    fn shared(&self) -> bool {
        self.oplocks.iter().any(|g| g.level == Caching::READ) || self.leases.iter().any(|l| l.state.has(Caching::READ))
    }

    fn break_oplocks(&mut self, who: &Requester<T::LeaseKey>, event: GrantEvent, now: Instant, timeout: Duration, out: &mut BreakPlan<T>) {
        // A write breaks even the writer's own level II oplock (as Windows does).
        let own = |g: &Oplock<T::Holder>| Some(g.open) == who.open && !(event == GrantEvent::Write && g.level == Caching::READ);
        for g in self.oplocks.iter_mut().filter(|g| !own(g)) {
            let Some(target) = oplock_target(event, g.level) else { continue };
            if g.breaking_to.is_some() {
                // A break is already under way: wait for its acknowledgment; a further
                // break follows it if still needed (the waiter looks again).
                out.wait_until = earliest(out.wait_until, g.deadline);
                continue;
            }
            let ack = g.level != Caching::READ;
            out.notices.push(Notice::Oplock { open: g.open, holder: g.holder.clone(), from: g.level, to: target, ack });
            if ack {
                let deadline = now + timeout;
                g.breaking_to = Some(target);
                g.deadline = Some(deadline);
                out.wait_until = earliest(out.wait_until, Some(deadline));
            } else {
                // Level II to none needs no acknowledgment.
                g.level = Caching::NONE;
                out.changed = true;
            }
        }
    }

    /// Breaks the leases not `exempt` (the requester's own).
    fn break_leases(&mut self, exempt: &dyn Fn(&T::LeaseKey) -> bool, event: GrantEvent, now: Instant, timeout: Duration, out: &mut BreakPlan<T>) {
        for l in self.leases.iter_mut().filter(|l| !exempt(&l.key)) {
            let (keep, waits) = lease_rule(event, l.state);
            let mut target = Caching(l.state.0 & keep.0);
            // Every cache state includes R; what is left without it is none.
            if !target.has(Caching::READ) {
                target = Caching::NONE;
            }
            if let Some(breaking_to) = l.breaking_to {
                // An open that has waited once waits for any break in progress, whoever
                // caused it (as Windows does: smbtorture smb2.lease.breaking3 and 4); what
                // this event needs beyond that break is remembered and asked for once the
                // break completes, from the state the client then holds. A write or a
                // changed entry cannot wait.
                let retry = matches!(event, GrantEvent::Open { spare_leases: false, retry: true, .. });
                if waits || retry {
                    out.wait_until = earliest(out.wait_until, l.deadline);
                }
                let required = Caching(l.required.unwrap_or(breaking_to).0 & target.0);
                if required != breaking_to {
                    l.required = Some(required);
                }
                continue;
            }
            if target == l.state {
                continue;
            }
            let ack = l.state.has(Caching(Caching::WRITE.0 | Caching::HANDLE.0));
            l.epoch = l.epoch.wrapping_add(1);
            out.notices.push(Notice::Lease {
                key: l.key.clone(),
                info: l.info.clone(),
                holders: l.opens.iter().map(|(_, h)| h.clone()).collect(),
                from: l.state,
                to: target,
                epoch: l.epoch,
                ack,
            });
            if ack {
                let deadline = now + timeout;
                l.breaking_to = Some(target);
                l.deadline = Some(deadline);
                if waits {
                    out.wait_until = earliest(out.wait_until, Some(deadline));
                }
            } else {
                l.state = target;
                out.changed = true;
            }
        }
    }

    /// Breaks whose acknowledgment did not come in time end the oplock or lease's caching
    /// (MS-SMB2 3.3.2.1 and 3.3.2.5: the level or state becomes none). Returns whether
    /// anything changed.
    fn expire(&mut self, now: Instant) -> bool {
        let mut changed = false;
        for g in self.oplocks.iter_mut() {
            if let (Some(_), Some(d)) = (g.breaking_to, g.deadline) {
                if d <= now {
                    (g.level, g.breaking_to, g.deadline) = (Caching::NONE, None, None);
                    changed = true;
                }
            }
        }
        for l in self.leases.iter_mut() {
            if let (Some(_), Some(d)) = (l.breaking_to, l.deadline) {
                if d <= now {
                    (l.state, l.breaking_to, l.deadline, l.required) = (Caching::NONE, None, None, None);
                    changed = true;
                }
            }
        }
        changed
    }

    /// Lease `i`'s break has completed: what a later event required beyond it is broken
    /// now, in steps (as Windows does): a state with W or H goes to R plus what is
    /// required, acknowledged; R alone goes to none at once. The epoch stays: this is the
    /// same break, continued.
    fn follow_up(&mut self, i: usize, now: Instant, timeout: Duration, out: &mut BreakPlan<T>) {
        let l = &mut self.leases[i];
        let Some(required) = l.required else { return };
        if l.state.without(required) == Caching::NONE {
            l.required = None;
            return;
        }
        let ack = l.state.has(Caching(Caching::WRITE.0 | Caching::HANDLE.0));
        let to = if ack { Caching(required.0 | Caching::READ.0) } else { Caching::NONE };
        out.notices.push(Notice::Lease {
            key: l.key.clone(),
            info: l.info.clone(),
            holders: l.opens.iter().map(|(_, h)| h.clone()).collect(),
            from: l.state,
            to,
            epoch: l.epoch,
            ack,
        });
        if ack {
            (l.breaking_to, l.deadline) = (Some(to), Some(now + timeout));
            if to == required {
                l.required = None;
            }
        } else {
            (l.state, l.required) = (Caching::NONE, None);
            out.changed = true;
        }
    }

    /// Whether an exclusive oplock of another open, or a write-caching lease other than
    /// `lease`, exists.
    fn exclusive_elsewhere(&self, open: OpenId, lease: Option<&T::LeaseKey>) -> bool {
        self.oplocks.iter().any(|g| g.open != open && g.level.has(Caching::WRITE))
            || self.leases.iter().any(|l| Some(&l.key) != lease && l.state.has(Caching::WRITE))
    }
}

impl<T: GrantTypes> Grants<T> {
    fn refresh(&self, st: &State<T>) {
        self.shared.store(st.shared(), Ordering::Release);
    }

    /// The cheap check of the write path: is anything cached that a write must break?
    pub fn any_shared(&self) -> bool {
        self.shared.load(Ordering::Acquire)
    }

    /// Starts the breaks `event` by `who` calls for (a break gets `timeout` to be
    /// acknowledged), expires breaks past their deadline, and says whether (and until
    /// when) the caller must wait before it retries.
    pub fn start_breaks(&self, who: &Requester<T::LeaseKey>, event: GrantEvent, now: Instant, timeout: Duration) -> BreakPlan<T> {
        let mut st = lock(&self.state);
        let mut out = BreakPlan { notices: Vec::new(), wait_until: None, changed: false };
        out.changed = st.expire(now);
        st.break_oplocks(who, event, now, timeout, &mut out);
        st.break_leases(&|k| who.lease.as_ref() == Some(k), event, now, timeout, &mut out);
        self.refresh(&st);
        out
    }

    /// Breaks the leases of a directory one of whose entries changed
    /// ([`GrantEvent::ChildChanged`]), sparing those `exempt` says made the change (the
    /// protocol compares the lease with the parent lease key of the open that made it).
    /// Never waits: the plan's notices are to be sent, nothing more.
    pub fn start_parent_breaks(&self, exempt: &dyn Fn(&T::LeaseKey) -> bool, now: Instant, timeout: Duration) -> BreakPlan<T> {
        let mut st = lock(&self.state);
        let mut out = BreakPlan { notices: Vec::new(), wait_until: None, changed: false };
        out.changed = st.expire(now);
        st.break_leases(exempt, GrantEvent::ChildChanged, now, timeout, &mut out);
        self.refresh(&st);
        out
    }

    /// Runs the break timers; returns whether a holder's state dropped.
    pub fn expire(&self, now: Instant) -> bool {
        let mut st = lock(&self.state);
        let changed = st.expire(now);
        self.refresh(&st);
        changed
    }

    /// The oplock a new open gets (MS-FSA 2.1.5.17): what it asks for (RW exclusive, ALL
    /// batch) when alone; at most level II (READ) when other opens exist and none holds an
    /// exclusive oplock or a write-caching lease; none beside a handle-caching lease.
    /// `others` counts the other opens of the file.
    pub fn grant_oplock(&self, open: OpenId, holder: T::Holder, requested: Caching, others: usize) -> Caching {
        let mut st = lock(&self.state);
        let exclusive_elsewhere = st.exclusive_elsewhere(open, None);
        let handle_lease = st.leases.iter().any(|l| l.state.has(Caching::HANDLE));
        let level = match requested {
            _ if handle_lease => Caching::NONE,
            Caching::RW | Caching::ALL if others == 0 => requested,
            Caching::READ | Caching::RW | Caching::ALL if !exclusive_elsewhere => Caching::READ,
            _ => Caching::NONE,
        };
        if level != Caching::NONE {
            st.oplocks.push(Oplock { open, holder, level, breaking_to: None, deadline: None });
            self.refresh(&st);
        }
        level
    }

    /// Grants or joins lease `key` for `open`. A new lease gets what is asked as far as the
    /// other holders allow (no W beside other opens, nothing beside an exclusive holder,
    /// no H beside another open's oplock) and starts at the request's epoch (plus one when it caches
    /// anything); an existing one is upgraded only when the whole request can be granted
    /// and no break is in progress. `others` counts opens not under this lease. Returns
    /// the lease as it stands.
    pub fn grant_lease(&self, open: OpenId, holder: T::Holder, req: LeaseRequest<T>, others: usize) -> Lease<T> {
        let LeaseRequest { key, state: requested, info, epoch, directory } = req;
        let mut st = lock(&self.state);
        // R is the base of every cache state (R, RH, RW, RWH); anything else is refused.
        let mut requested = if requested.has(Caching::READ) { Caching(requested.0 & Caching::ALL.0) } else { Caching::NONE };
        if directory {
            // A directory caches its listing and handles, never writes.
            requested = requested.without(Caching::WRITE);
        }
        let mut allowed = Caching::ALL;
        if others > 0 {
            allowed = allowed.without(Caching::WRITE);
        }
        if st.exclusive_elsewhere(open, Some(&key)) {
            allowed = Caching::NONE;
        }
        if st.oplocks.iter().any(|g| g.open != open && g.level != Caching::NONE) {
            allowed = allowed.without(Caching::HANDLE);
        }
        let lease = match st.leases.iter_mut().find(|l| l.key == key) {
            Some(l) => {
                l.opens.push((open, holder));
                let upgrade = requested.without(allowed) == Caching::NONE && l.state.without(requested) == Caching::NONE;
                if l.breaking_to.is_none() && upgrade && requested != l.state {
                    l.state = requested;
                    l.epoch = l.epoch.wrapping_add(1);
                }
                l.clone()
            }
            None => {
                let state = Caching(requested.0 & allowed.0);
                let epoch = if state != Caching::NONE { epoch.wrapping_add(1) } else { epoch };
                let l = Lease { key, state, breaking_to: None, deadline: None, epoch, info, opens: vec![(open, holder)], required: None };
                st.leases.push(l.clone());
                l
            }
        };
        self.refresh(&st);
        lease
    }

    /// An open is gone: its oplock ends, and its lease when it was the lease's last open.
    /// Returns the lease freed, if any.
    pub fn release(&self, open: OpenId) -> Option<T::LeaseKey> {
        let mut st = lock(&self.state);
        st.oplocks.retain(|g| g.open != open);
        for l in st.leases.iter_mut() {
            l.opens.retain(|(o, _)| *o != open);
        }
        let freed = st.leases.iter().position(|l| l.opens.is_empty()).map(|i| st.leases.remove(i).key);
        self.refresh(&st);
        freed
    }
}

impl<T: GrantTypes> Grants<T> {
    /// Acknowledgment of an oplock break: the level now held. Refused when the open holds
    /// no oplock or none is breaking; an acknowledgment above the offered level ends the
    /// oplock ([`StateError::AckAboveOffered`]).
    pub fn ack_oplock(&self, open: OpenId, level: Caching) -> Result<Caching, StateError> {
        let mut st = lock(&self.state);
        let g = st.oplocks.iter_mut().find(|g| g.open == open).ok_or(StateError::NoSuchHolder)?;
        let to = g.breaking_to.ok_or(StateError::NoBreakInProgress)?;
        (g.breaking_to, g.deadline) = (None, None);
        let result = if level.without(to) != Caching::NONE {
            g.level = Caching::NONE;
            Err(StateError::AckAboveOffered)
        } else {
            g.level = level;
            Ok(level)
        };
        st.oplocks.retain(|g| g.level != Caching::NONE);
        self.refresh(&st);
        result
    }

    /// Acknowledgment of a lease break: the state now held, and the further break of
    /// what conflicting events required meanwhile, if any (to be sent). Refused when the
    /// lease is not on this file, is not breaking, or more than offered is acknowledged
    /// (the break then stays in progress).
    pub fn ack_lease(&self, key: &T::LeaseKey, state: Caching, now: Instant, timeout: Duration) -> Result<(Caching, BreakPlan<T>), StateError> {
        let mut st = lock(&self.state);
        let i = st.leases.iter().position(|l| l.key == *key).ok_or(StateError::NoSuchHolder)?;
        let l = &mut st.leases[i];
        let to = l.breaking_to.ok_or(StateError::NoBreakInProgress)?;
        if state.without(to) != Caching::NONE {
            return Err(StateError::AckAboveOffered);
        }
        (l.state, l.breaking_to, l.deadline) = (state, None, None);
        let mut out = BreakPlan { notices: Vec::new(), wait_until: None, changed: true };
        st.follow_up(i, now, timeout, &mut out);
        self.refresh(&st);
        Ok((state, out))
    }

    /// The lease `open` is under, if any.
    pub fn lease_of(&self, open: OpenId) -> Option<T::LeaseKey> {
        lock(&self.state).leases.iter().find(|l| l.opens.iter().any(|(o, _)| *o == open)).map(|l| l.key.clone())
    }

    /// The state lease `key` holds now, if it is on this file.
    pub fn lease_state(&self, key: &T::LeaseKey) -> Option<Caching> {
        lock(&self.state).leases.iter().find(|l| l.key == *key).map(|l| l.state)
    }

    /// What the protocol keeps with lease `key`, if it is on this file.
    pub fn lease_info(&self, key: &T::LeaseKey) -> Option<T::LeaseInfo> {
        lock(&self.state).leases.iter().find(|l| l.key == *key).map(|l| l.info.clone())
    }

    /// The opens under lease `key` (they do not count against its caching).
    pub fn lease_opens(&self, key: &T::LeaseKey) -> Vec<OpenId> {
        lock(&self.state).leases.iter().filter(|l| l.key == *key).flat_map(|l| l.opens.iter().map(|(o, _)| *o)).collect()
    }

    /// The oplock `open` holds now.
    pub fn oplock_level(&self, open: OpenId) -> Caching {
        lock(&self.state).oplocks.iter().find(|g| g.open == open).map_or(Caching::NONE, |g| g.level)
    }

    /// Whether a break of `open`'s oplock or lease waits for an acknowledgment.
    pub fn breaking(&self, open: OpenId) -> bool {
        let st = lock(&self.state);
        st.oplocks.iter().any(|g| g.open == open && g.breaking_to.is_some())
            || st.leases.iter().any(|l| l.breaking_to.is_some() && l.opens.iter().any(|(o, _)| *o == open))
    }

    /// Lease `key` as it stands, if it is on this file.
    pub fn lease(&self, key: &T::LeaseKey) -> Option<Lease<T>> {
        lock(&self.state).leases.iter().find(|l| l.key == *key).cloned()
    }

    /// Where `open`'s breaks go from now on: a durable open reconnected on another
    /// connection keeps its oplock or lease, reached through its new channel.
    pub fn set_holder(&self, open: OpenId, holder: T::Holder) {
        let mut st = lock(&self.state);
        for g in st.oplocks.iter_mut().filter(|g| g.open == open) {
            g.holder = holder.clone();
        }
        for l in st.leases.iter_mut() {
            for h in l.opens.iter_mut().filter(|(o, _)| *o == open) {
                h.1 = holder.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone)]
    struct Test;
    impl GrantTypes for Test {
        type Holder = u32;
        type LeaseKey = u8;
        type LeaseInfo = ();
    }

    const T: Duration = Duration::from_secs(35);
    const R: Caching = Caching::READ;
    const RH: Caching = Caching(3);
    const RW: Caching = Caching::RW;
    const RWH: Caching = Caching::ALL;
    const OPEN: GrantEvent = GrantEvent::Open { truncate: false, spare_leases: false, share_conflict: false, retry: false };
    const TRUNCATE: GrantEvent = GrantEvent::Open { truncate: true, spare_leases: false, share_conflict: false, retry: false };
    const TRUNCATE_AGAIN: GrantEvent = GrantEvent::Open { truncate: true, spare_leases: false, share_conflict: false, retry: true };
    const CONFLICTING: GrantEvent = GrantEvent::Open { truncate: false, spare_leases: false, share_conflict: true, retry: false };

    fn lr(key: u8, state: Caching, epoch: u16) -> LeaseRequest<Test> {
        LeaseRequest { key, state, info: (), epoch, directory: false }
    }

    fn dir_lr(key: u8, state: Caching, epoch: u16) -> LeaseRequest<Test> {
        LeaseRequest { directory: true, ..lr(key, state, epoch) }
    }

    fn by(open: OpenId) -> Requester<u8> {
        Requester { open: Some(open), lease: None }
    }

    fn lease_by(open: OpenId, key: u8) -> Requester<u8> {
        Requester { open: Some(open), lease: Some(key) }
    }

    /// (from, to, ack) of a notice.
    type Step = (Caching, Caching, bool);

    #[test]
    fn a_moved_holder_gets_the_breaks() {
        // A durable open reconnected elsewhere: its grants stay, its breaks go to the new place.
        let (oplocked, leased) = (Grants::<Test>::default(), Grants::<Test>::default());
        assert_eq!(oplocked.grant_oplock(1, 10, RWH, 0), RWH);
        assert_eq!(leased.grant_lease(2, 20, lr(7, RWH, 0), 0).state, RWH);
        oplocked.set_holder(1, 11);
        leased.set_holder(2, 21);
        assert_eq!(leased.lease(&7).map(|l| l.opens), Some(vec![(2, 21)]));
        let holders = |g: &Grants<Test>| -> Vec<u32> {
            let plan = g.start_breaks(&by(3), TRUNCATE, Instant::now(), T);
            plan.notices
                .iter()
                .flat_map(|n| match n {
                    Notice::Oplock { holder, .. } => vec![*holder],
                    Notice::Lease { holders, .. } => holders.clone(),
                })
                .collect()
        };
        assert!(!oplocked.breaking(1));
        assert_eq!(holders(&oplocked), vec![11]);
        assert_eq!(holders(&leased), vec![21]);
        assert!(oplocked.breaking(1) && leased.breaking(2));
    }

    /// (from, to, ack) of every notice.
    fn summary(p: &BreakPlan<Test>) -> Vec<Step> {
        p.notices
            .iter()
            .map(|n| match n {
                Notice::Oplock { from, to, ack, .. } | Notice::Lease { from, to, ack, .. } => (*from, *to, *ack),
            })
            .collect()
    }

    #[test]
    fn sole_opener_gets_batch_and_second_open_breaks_it_to_level_ii() {
        let g = Grants::<Test>::default();
        assert_eq!(g.grant_oplock(1, 10, RWH, 0), RWH);
        assert!(!g.any_shared(), "no level II yet: writes stay lock-free");
        let now = Instant::now();
        let p = g.start_breaks(&by(2), OPEN, now, T);
        assert_eq!(summary(&p), [(RWH, R, true)]);
        assert_eq!(p.wait_until, Some(now + T));
        // The holder never breaks its own oplock.
        assert!(g.start_breaks(&by(1), GrantEvent::Write, now, T).notices.is_empty());
        assert_eq!(g.ack_oplock(1, R), Ok(R));
        assert_eq!(g.ack_oplock(1, R), Err(StateError::NoBreakInProgress));
        assert_eq!(g.grant_oplock(2, 20, RWH, 1), R, "a second open gets level II at most");
        assert!(g.any_shared());
    }

    #[test]
    fn write_breaks_level_ii_and_read_leases_to_none_without_waiting() {
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, R, 1);
        g.grant_oplock(2, 20, R, 1);
        g.grant_lease(3, 30, lr(7, R, 0), 2);
        let p = g.start_breaks(&by(2), GrantEvent::Write, Instant::now(), T);
        // The writer's own level II goes too (as Windows does).
        assert_eq!(summary(&p), [(R, Caching::NONE, false), (R, Caching::NONE, false), (R, Caching::NONE, false)]);
        assert!(p.wait_until.is_none() && p.changed);
        assert!(!g.any_shared());
        assert_eq!(g.oplock_level(1), Caching::NONE);
    }

    #[test]
    fn write_without_an_open_breaks_every_read_holder() {
        // An NFS write: no open, no lease of its own.
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, R, 1);
        g.grant_lease(2, 20, lr(7, R, 0), 1);
        let p = g.start_breaks(&Requester { open: None, lease: None }, GrantEvent::Write, Instant::now(), T);
        assert_eq!(summary(&p), [(R, Caching::NONE, false), (R, Caching::NONE, false)]);
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RH, 0), 1);
        let p = g.start_breaks(&Requester { open: None, lease: None }, GrantEvent::Write, Instant::now(), T);
        assert_eq!(summary(&p), [(RH, Caching::NONE, true)]);
        assert!(p.wait_until.is_none(), "a write never waits, even for H");
    }

    #[test]
    fn conflicting_open_takes_w_from_leases_and_waits() {
        let g = Grants::<Test>::default();
        let l = g.grant_lease(1, 10, lr(7, RWH, 0), 0);
        assert_eq!((l.state, l.epoch), (RWH, 1));
        let now = Instant::now();
        let p = g.start_breaks(&lease_by(2, 8), OPEN, now, T);
        assert_eq!(summary(&p), [(RWH, RH, true)]);
        let Notice::Lease { epoch, holders, .. } = &p.notices[0] else { panic!("a lease notice") };
        assert_eq!((*epoch, holders.as_slice()), (2, &[10][..]));
        assert_eq!(p.wait_until, Some(now + T));
        // Opens under the same lease break nothing.
        assert!(g.start_breaks(&lease_by(3, 7), TRUNCATE, now, T).notices.is_empty());
    }

    #[test]
    fn sharing_conflict_keeps_exclusive_and_takes_batch_and_handle() {
        let now = Instant::now();
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RW, 0);
        assert!(g.start_breaks(&by(2), CONFLICTING, now, T).notices.is_empty(), "exclusive stays: the open fails");
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RWH, 0);
        assert_eq!(summary(&g.start_breaks(&by(2), CONFLICTING, now, T)), [(RWH, R, true)]);
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RWH, 0);
        assert_eq!(summary(&g.start_breaks(&by(2), GrantEvent::SharingViolation, now, T)), [(RWH, R, true)]);
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RWH, 0), 0);
        assert_eq!(summary(&g.start_breaks(&by(2), CONFLICTING, now, T)), [(RWH, RW, true)], "only H goes");
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RH, 0), 1);
        assert_eq!(summary(&g.start_breaks(&by(2), GrantEvent::SharingViolation, now, T)), [(RH, R, true)]);
    }

    #[test]
    fn truncating_open_takes_everything() {
        let now = Instant::now();
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(6, R, 0), 1);
        g.grant_lease(2, 20, lr(7, RH, 0), 1);
        let p = g.start_breaks(&by(3), TRUNCATE, now, T);
        assert_eq!(summary(&p), [(R, Caching::NONE, false), (RH, Caching::NONE, true)]);
        assert!(p.wait_until.is_none(), "only write caching is waited for on truncation");
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RWH, 0), 0);
        let p = g.start_breaks(&by(3), TRUNCATE, now, T);
        assert_eq!(summary(&p), [(RWH, Caching::NONE, true)]);
        assert!(p.wait_until.is_some());
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RW, 0);
        assert_eq!(summary(&g.start_breaks(&by(3), TRUNCATE, now, T)), [(RW, Caching::NONE, true)]);
    }

    #[test]
    fn removal_or_rename_takes_handle_caching_and_waits() {
        let now = Instant::now();
        let nobody = Requester { open: None, lease: None };
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RH, 0), 1);
        let p = g.start_breaks(&nobody, GrantEvent::Namespace, now, T);
        assert_eq!(summary(&p), [(RH, R, true)]);
        assert_eq!(p.wait_until, Some(now + T));
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RWH, 0);
        assert_eq!(summary(&g.start_breaks(&nobody, GrantEvent::Namespace, now, T)), [(RWH, R, true)]);
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RW, 0);
        g.grant_lease(2, 20, lr(8, R, 0), 1);
        assert!(g.start_breaks(&nobody, GrantEvent::Namespace, now, T).notices.is_empty(), "no handle caching to take");
    }

    #[test]
    fn stat_opens_for_leases_break_no_lease() {
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RWH, 0), 0);
        let spare = GrantEvent::Open { truncate: false, spare_leases: true, share_conflict: false, retry: false };
        assert!(g.start_breaks(&by(2), spare, Instant::now(), T).notices.is_empty());
    }

    /// The state an acknowledgment left, with the breaks it started.
    fn ack(g: &Grants<Test>, key: u8, state: Caching) -> Result<(Caching, Vec<Step>), StateError> {
        g.ack_lease(&key, state, Instant::now(), T).map(|(c, p)| (c, summary(&p)))
    }

    #[test]
    fn a_break_in_progress_is_waited_for_then_continued_in_steps() {
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RWH, 0), 0);
        let now = Instant::now();
        let first = g.start_breaks(&by(2), OPEN, now, T);
        assert_eq!(summary(&first), [(RWH, RH, true)]);
        // A truncating open meanwhile sends nothing new and waits for the same deadline.
        let later = now + Duration::from_secs(1);
        let second = g.start_breaks(&by(3), TRUNCATE, later, T);
        assert!(second.notices.is_empty());
        assert_eq!(second.wait_until, first.wait_until);
        // Once acknowledged, what the truncation needs follows in steps: H (to R, awaited,
        // same epoch), then R (at once).
        let (c, next) = g.ack_lease(&7, RH, later, T).unwrap();
        assert_eq!((c, summary(&next)), (RH, vec![(RH, R, true)]));
        let Notice::Lease { epoch, .. } = &next.notices[0] else { panic!("a lease notice") };
        assert_eq!(*epoch, 2, "the continued break keeps the epoch");
        let retry = g.start_breaks(&by(3), TRUNCATE_AGAIN, later, T);
        assert!(retry.notices.is_empty() && retry.wait_until.is_some(), "the opens wait for the step too");
        assert!(g.start_breaks(&by(2), OPEN, later, T).wait_until.is_some());
        assert_eq!(ack(&g, 7, R), Ok((R, vec![(R, Caching::NONE, false)])));
        assert!(g.start_breaks(&by(3), TRUNCATE_AGAIN, later, T).wait_until.is_none());
        assert!(g.start_breaks(&by(2), OPEN, later, T).notices.is_empty());
    }

    #[test]
    fn a_truncating_open_waits_for_a_break_in_progress_only_once_it_has_waited() {
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RH, 0), 1);
        let now = Instant::now();
        let p = g.start_breaks(&by(2), TRUNCATE, now, T);
        assert_eq!((summary(&p), p.wait_until), (vec![(RH, Caching::NONE, true)], None));
        let p = g.start_breaks(&by(3), TRUNCATE, now, T);
        assert!(p.notices.is_empty() && p.wait_until.is_none(), "no W: a first attempt goes ahead");
        assert!(g.start_breaks(&by(3), TRUNCATE_AGAIN, now, T).wait_until.is_some());
    }

    #[test]
    fn a_break_that_asks_no_more_is_not_continued() {
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RWH, 0), 0);
        let now = Instant::now();
        g.start_breaks(&by(2), OPEN, now, T);
        // A second plain open needs no more than the break in progress takes.
        assert!(g.start_breaks(&by(3), OPEN, now, T).wait_until.is_some());
        assert_eq!(ack(&g, 7, RH), Ok((RH, vec![])));
    }

    #[test]
    fn unacknowledged_breaks_end_the_caching() {
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RWH, 0);
        let now = Instant::now();
        g.start_breaks(&by(2), OPEN, now, T);
        assert_eq!(g.oplock_level(1), RWH);
        assert!(!g.expire(now + Duration::from_secs(1)));
        let p = g.start_breaks(&by(2), OPEN, now + T, T);
        assert!(p.wait_until.is_none() && p.changed);
        assert_eq!(g.oplock_level(1), Caching::NONE, "not level II: MS-SMB2 3.3.2.1");
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RWH, 0), 0);
        g.start_breaks(&by(2), OPEN, now, T);
        assert!(g.expire(now + T));
        assert_eq!(ack(&g, 7, RH), Err(StateError::NoBreakInProgress), "too late");
        let l = g.grant_lease(3, 10, lr(7, Caching::NONE, 0), 1);
        assert_eq!(l.state, Caching::NONE, "MS-SMB2 3.3.2.5");
    }

    #[test]
    fn acknowledgment_rules() {
        let g = Grants::<Test>::default();
        assert_eq!(g.ack_oplock(1, Caching::NONE), Err(StateError::NoSuchHolder));
        g.grant_oplock(1, 10, RWH, 0);
        assert_eq!(g.ack_oplock(1, Caching::NONE), Err(StateError::NoBreakInProgress));
        g.start_breaks(&by(2), OPEN, Instant::now(), T);
        // Above the offer: the oplock is gone.
        assert_eq!(g.ack_oplock(1, RW), Err(StateError::AckAboveOffered));
        assert_eq!(g.oplock_level(1), Caching::NONE);
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, lr(7, RWH, 0), 0);
        assert_eq!(ack(&g, 7, RH), Err(StateError::NoBreakInProgress));
        g.start_breaks(&by(2), OPEN, Instant::now(), T);
        assert_eq!(ack(&g, 8, R), Err(StateError::NoSuchHolder));
        // Above the offer: refused, the break stays in progress.
        assert_eq!(ack(&g, 7, RWH), Err(StateError::AckAboveOffered));
        assert_eq!(ack(&g, 7, R), Ok((R, vec![])), "less than offered is fine");
        assert_eq!(ack(&g, 7, R), Err(StateError::NoBreakInProgress));
    }

    #[test]
    fn grant_rules() {
        let g = Grants::<Test>::default();
        assert_eq!(g.grant_lease(9, 90, lr(9, Caching::HANDLE, 0), 0).state, Caching::NONE, "no state without R");
        g.release(9);
        assert_eq!(g.grant_lease(1, 10, lr(7, RWH, 0), 1).state, RH, "W only for a sole opener");
        assert_eq!(g.grant_oplock(2, 20, RWH, 1), Caching::NONE, "no oplock beside a handle lease");
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, R, 0);
        assert_eq!(g.grant_lease(2, 20, lr(7, RWH, 0), 1).state, R, "no H beside another open's oplock");
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RW, 0);
        assert_eq!(g.grant_lease(2, 20, lr(7, RWH, 0), 1).state, Caching::NONE, "nothing beside an exclusive holder");
        assert_eq!(g.grant_oplock(3, 30, R, 2), Caching::NONE);
    }

    #[test]
    fn directories_get_read_and_handle_caching_never_write() {
        let g = Grants::<Test>::default();
        let l = g.grant_lease(1, 10, dir_lr(7, RWH, 0), 0);
        assert_eq!((l.state, l.epoch), (RH, 1), "no W on a directory, even for a sole opener");
        assert_eq!(g.grant_lease(2, 20, dir_lr(8, R, 0), 1).state, R);
        // Another open of the directory breaks nothing (there is no W to take).
        assert!(g.start_breaks(&by(3), OPEN, Instant::now(), T).notices.is_empty());
    }

    #[test]
    fn a_changed_entry_breaks_the_directory_to_none_without_waiting_except_the_exempt() {
        let now = Instant::now();
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, dir_lr(7, RH, 0), 0);
        g.grant_lease(2, 20, dir_lr(8, R, 0), 1);
        g.grant_lease(3, 30, dir_lr(9, RH, 0), 2);
        // The change came from an open naming lease 9 as its parent.
        let p = g.start_parent_breaks(&|k| *k == 9, now, T);
        assert_eq!(summary(&p), [(RH, Caching::NONE, true), (R, Caching::NONE, false)]);
        assert!(p.wait_until.is_none(), "the change is done: nobody waits");
        let Notice::Lease { epoch, .. } = &p.notices[0] else { panic!("a lease notice") };
        assert_eq!(*epoch, 2);
        // While the first break is unacknowledged, further changes send nothing new.
        let again = g.start_parent_breaks(&|k| *k == 9, now, T);
        assert!(again.notices.is_empty() && again.wait_until.is_none());
        assert_eq!(ack(&g, 7, Caching::NONE), Ok((Caching::NONE, vec![])));
        // Opened again, the directory's lease comes back (an upgrade from none).
        let l = g.grant_lease(4, 10, dir_lr(7, RWH, 0), 3);
        assert_eq!((l.state, l.epoch), (RH, 3));
    }

    #[test]
    fn a_change_during_another_break_breaks_to_none_once_that_completes() {
        let now = Instant::now();
        let g = Grants::<Test>::default();
        g.grant_lease(1, 10, dir_lr(7, RH, 0), 0);
        // The directory itself is renamed: H goes first, awaited.
        assert_eq!(summary(&g.start_breaks(&by(2), GrantEvent::Namespace, now, T)), [(RH, R, true)]);
        assert!(g.start_parent_breaks(&|_| false, now, T).notices.is_empty(), "one break at a time");
        assert_eq!(ack(&g, 7, R), Ok((R, vec![(R, Caching::NONE, false)])), "once the first completes");
        assert!(g.start_parent_breaks(&|_| false, now, T).notices.is_empty(), "nothing left to break");
    }

    #[test]
    fn a_changed_entry_takes_no_oplock() {
        // Directories hold no oplocks; the event must not touch a file's.
        let g = Grants::<Test>::default();
        g.grant_oplock(1, 10, RWH, 0);
        assert!(g.start_breaks(&by(2), GrantEvent::ChildChanged, Instant::now(), T).notices.is_empty());
    }

    #[test]
    fn leases_are_shared_upgraded_and_freed_with_their_last_open() {
        let g = Grants::<Test>::default();
        assert_eq!(g.grant_lease(1, 10, lr(7, R, 5), 0).epoch, 6);
        let l = g.grant_lease(2, 11, lr(7, RWH, 0), 0);
        assert_eq!((l.state, l.epoch), (RWH, 7), "an upgrade that can be granted whole");
        assert_eq!(g.lease_of(2), Some(7));
        assert_eq!(g.lease_opens(&7), [1, 2]);
        assert_eq!(g.release(1), None);
        assert_eq!(g.release(2), Some(7));
        assert_eq!(g.lease_of(2), None);
    }
}
