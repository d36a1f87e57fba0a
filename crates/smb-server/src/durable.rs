//! Durable opens (MS-SMB2 3.3.5.9.6, 3.3.5.9.7, 3.3.5.9.10, 3.3.5.9.12, 3.3.7.1): an open
//! granted durability outlives its session. When the session ends without closing it
//! (connection lost, LOGOFF, a reconnecting client's PreviousSessionId), the open stays in
//! the file table, keeping its share mode, byte-range locks and oplock or lease, and moves
//! here as *disconnected* until the same user reconnects it (DHnC / DH2C), a break it
//! cannot acknowledge reaches it, or its timeout passes; the last two close it as a CLOSE
//! would (delete on close honoured).
//!
//! One table keyed by the open's persistent FileId holds every durable open, connected or
//! not, so a reconnect finds it and a teardown racing a reconnect is visible: a reconnect
//! that finds the open still connected to a session whose connections are all gone waits
//! (briefly) for the teardown to move it here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smb_wire::{NtStatus, SessionId};

use crate::open::Open;
use crate::oplocks::{LeaseId, Notice};
use crate::server::ServerState;
use crate::session::{Session, User};
use crate::sync::lock;

/// How long a v1 durable open is kept disconnected (Windows and Samba: 16 minutes).
pub const V1_TIMEOUT: Duration = Duration::from_secs(16 * 60);
/// A v2 request for timeout 0 gets this (Windows 2012 and Samba: one minute).
pub const V2_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest v2 timeout granted (Windows and Samba: five minutes).
pub const V2_MAX_TIMEOUT: Duration = Duration::from_secs(300);

/// The timeout granted for a v2 request's Timeout (milliseconds).
pub fn v2_timeout(requested_ms: u32) -> Duration {
    match requested_ms {
        0 => V2_DEFAULT_TIMEOUT,
        ms => Duration::from_millis(u64::from(ms)).min(V2_MAX_TIMEOUT),
    }
}

/// What an open was made durable with, and whose it is (Open.DurableOwner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The CreateGuid of a v2 request; None for v1.
    pub create_guid: Option<[u8; 16]>,
    pub timeout: Duration,
    pub user: User,
    /// Index of the share the open is on.
    pub share: usize,
    pub lease: Option<LeaseId>,
    /// The CreateAction of the CREATE that opened it (a replay answers it again).
    pub create_action: u32,
    /// A persistent handle (DH2Q with the persistent flag on a continuously available
    /// share): its state is also in the crash-safe handle store.
    pub persistent: bool,
    /// SMB2_CREATE_APP_INSTANCE_ID: a later open with the same id from another client
    /// closes this one (MS-SMB2 3.3.5.9.13).
    pub app_instance: Option<[u8; 16]>,
}

#[derive(Debug)]
enum State {
    /// In use by this session.
    Connected(SessionId),
    /// Its session is gone: the open waits here for a reconnect. `generation` tells this
    /// disconnection's timer from a later one's.
    Disconnected { open: Arc<Open>, session: SessionId, generation: u64 },
}

#[derive(Debug)]
struct Entry {
    grant: Grant,
    state: State,
    /// Whose app instance the open is (see [`AppOwner`]); set by `set_app_instance`.
    app: Option<AppOwner>,
    /// Open.IsDurable: registered by `register` (a resilient open may be in the table
    /// without being durable).
    durable: bool,
    /// Open.IsResilient with Open.ResiliencyTimeout (FSCTL_LMR_REQUEST_RESILIENCY): kept
    /// through the loss of its connection for that long, durable or not.
    resilient: Option<Duration>,
}

/// With `Grant::app_instance`, what MS-SMB2 3.3.5.9.13 compares: the ClientGuid of the
/// client that opened it (a disconnected open has no session to ask), and the version
/// of a 3.1.1 SMB2_CREATE_APP_INSTANCE_VERSION.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppOwner {
    pub client_guid: [u8; 16],
    pub version: Option<smb_wire::msg::app_instance::AppInstanceVersion>,
}

/// A durable open of an application instance, as [`DurableOpens::app_instance_opens`]
/// finds it.
#[derive(Debug, Clone)]
pub struct AppInstanceOpen {
    pub persistent: u64,
    /// The session it is connected to; None: disconnected.
    pub session: Option<SessionId>,
    pub version: Option<smb_wire::msg::app_instance::AppInstanceVersion>,
}

/// What a reconnect presents.
#[derive(Debug, Clone)]
pub struct Claim {
    pub persistent: u64,
    /// DH2C's CreateGuid; None for DHnC (a v1 reconnect may reclaim a v2 open).
    pub create_guid: Option<[u8; 16]>,
    pub user: Option<User>,
    pub share: usize,
    /// The lease the reconnect asks for (ClientGuid of its connection, LeaseKey).
    pub lease: Option<LeaseId>,
    /// The name the reconnect gives, lowercased: with a lease, it must be the open's.
    pub name: String,
}

/// Every durable open of the server.
#[derive(Debug, Default)]
pub struct DurableOpens {
    entries: Mutex<HashMap<u64, Entry>>,
    next_generation: AtomicU64,
    /// How many entries are disconnected: with none, a break notification (the common
    /// case) costs one load here, not a walk of the table.
    disconnected: AtomicUsize,
}

/// How often, and how many times, a reconnect looks again while the old connection's
/// teardown is still under way.
const TEARDOWN_POLL: Duration = Duration::from_millis(20);
const TEARDOWN_POLLS: u32 = 100;

impl DurableOpens {
    /// Records that open `persistent` of `session` is durable.
    pub fn register(&self, persistent: u64, grant: Grant, session: SessionId) {
        let mut entries = lock(&self.entries);
        let resilient = entries.get(&persistent).and_then(|e| e.resilient);
        entries.insert(persistent, Entry { grant, state: State::Connected(session), app: None, durable: true, resilient });
    }

    /// Entries, connected or not (stateful fuzzing checks that the table empties).
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The persistent ids of the disconnected opens (their timeouts are what ends them;
    /// stateful fuzzing ends them at once instead).
    pub fn disconnected_ids(&self) -> Vec<u64> {
        lock(&self.entries).iter().filter(|(_, e)| matches!(e.state, State::Disconnected { .. })).map(|(id, _)| *id).collect()
    }

    /// The open is closed (CLOSE, or a disconnected open ending): nothing to reconnect.
    pub fn forget(&self, persistent: u64) {
        if let Some(Entry { state: State::Disconnected { .. }, .. }) = lock(&self.entries).remove(&persistent) {
            self.disconnected.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The durable v2 open with `create_guid`: its persistent id, and the session it is
    /// connected to (None: disconnected).
    pub fn find_by_create_guid(&self, create_guid: [u8; 16]) -> Option<(u64, Option<SessionId>)> {
        let entries = lock(&self.entries);
        let (id, e) = entries.iter().find(|(_, e)| e.grant.create_guid == Some(create_guid))?;
        Some((*id, if let State::Connected(s) = e.state { Some(s) } else { None }))
    }

    /// What `persistent` was made durable with, if it is (a resilient open that is not
    /// durable has none).
    pub fn grant(&self, persistent: u64) -> Option<Grant> {
        lock(&self.entries).get(&persistent).filter(|e| e.durable).map(|e| e.grant.clone())
    }

    /// Moves `open` of `session`, which is ending, to the disconnected opens if it is
    /// durable and still may be (it caches its handle and is not to be deleted on close:
    /// what Samba requires too; and no break of it is waiting for an acknowledgment, which
    /// could never come: a CREATE may be waiting for it). Returns whether it was kept; if
    /// not, the caller closes it.
    pub fn disconnect(&self, server: &Arc<ServerState>, session: &Session, open: &Arc<Open>) -> bool {
        self.disconnect_keeping(server, session, open, false)
    }

    /// [`disconnect`](Self::disconnect), and with `resilient` (the connection was lost,
    /// not logged off: MS-SMB2 3.3.7.1) a resilient open is kept too, for its
    /// ResiliencyTimeout, whether or not it caches its handle.
    pub fn disconnect_keeping(&self, server: &Arc<ServerState>, session: &Session, open: &Arc<Open>, resilient: bool) -> bool {
        let id = open.id.persistent;
        let v = open.id.volatile;
        let breaking = open.node().is_some_and(|n| n.oplocks.breaking(v));
        let caches = open.node().is_some_and(|n| n.oplocks.caches_handle(v));
        let plain = !open.is_dir() && !open.delete_on_close.load(Ordering::Acquire);
        let mut entries = lock(&self.entries);
        let Some(entry) = entries.get_mut(&id).filter(|e| matches!(e.state, State::Connected(s) if s == session.id)) else {
            return false;
        };
        let resilient = entry.resilient.filter(|_| resilient);
        // A persistent open needs no handle caching (continuous availability keeps it), and
        // stays through a break (acknowledged on its behalf, `persistent::acknowledge_for`).
        let keep = plain && (entry.grant.persistent || !breaking && (resilient.is_some() || entry.durable && caches));
        if !keep {
            entries.remove(&id);
            return false;
        }
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        entry.state = State::Disconnected { open: open.clone(), session: session.id, generation };
        self.disconnected.fetch_add(1, Ordering::AcqRel);
        let timeout = resilient.unwrap_or(entry.grant.timeout);
        drop(entries);
        tracing::debug!(open = id, ?timeout, "durable open disconnected");
        expire_after(server, id, generation, timeout);
        true
    }

    /// Makes open `persistent` of `session` resilient for `timeout` (MS-SMB2 3.3.5.15.9:
    /// it is then no longer durable, so a LOGOFF closes it); an open that was not durable
    /// enters the table with the grant `grant` makes.
    pub fn make_resilient(&self, persistent: u64, timeout: Duration, session: SessionId, grant: impl FnOnce() -> Grant) {
        let mut entries = lock(&self.entries);
        let entry = entries.entry(persistent).or_insert_with(|| Entry {
            grant: grant(),
            state: State::Connected(session),
            app: None,
            durable: false,
            resilient: None,
        });
        entry.resilient = Some(timeout);
        entry.durable = false;
    }

    /// Records that the durable open `persistent` belongs to application instance `id`.
    pub fn set_app_instance(&self, persistent: u64, id: [u8; 16], owner: AppOwner) {
        if let Some(e) = lock(&self.entries).get_mut(&persistent) {
            e.grant.app_instance = Some(id);
            e.app = Some(owner);
        }
    }

    /// The durable opens of application instance `id` on `share` opened by a client other
    /// than `client_guid` (MS-SMB2 3.3.5.9.13; the caller compares the names).
    pub fn app_instance_opens(&self, id: [u8; 16], share: usize, client_guid: [u8; 16]) -> Vec<AppInstanceOpen> {
        lock(&self.entries)
            .iter()
            .filter(|(_, e)| e.grant.app_instance == Some(id) && e.grant.share == share)
            .filter_map(|(p, e)| {
                let app = e.app.filter(|a| a.client_guid != client_guid)?;
                let session = if let State::Connected(s) = e.state { Some(s) } else { None };
                Some(AppInstanceOpen { persistent: *p, session, version: app.version })
            })
            .collect()
    }

    /// Takes a persistent open rebuilt at startup as disconnected from `session` (a
    /// session id no live session has); its timeout runs from now.
    pub fn adopt(&self, server: &Arc<ServerState>, grant: Grant, open: Arc<Open>, session: SessionId) {
        let (id, timeout) = (open.id.persistent, grant.timeout);
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let state = State::Disconnected { open, session, generation };
        lock(&self.entries).insert(id, Entry { grant, state, app: None, durable: true, resilient: None });
        self.disconnected.fetch_add(1, Ordering::AcqRel);
        expire_after(server, id, generation, timeout);
    }

    /// Disconnected persistent opens a break notification is for. Unlike other durable
    /// opens they stay (see `persistent::acknowledge_for`); returns them.
    pub fn persistent_break_targets(&self, notice: &Notice) -> Vec<Arc<Open>> {
        if self.disconnected.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let entries = lock(&self.entries);
        entries
            .values()
            .filter(|e| e.grant.persistent)
            .filter_map(|e| match &e.state {
                State::Disconnected { open, session, .. } if hits(notice, e, open, *session) => Some(open.clone()),
                _ => None,
            })
            .collect()
    }

    /// Takes the disconnected open `persistent` out of the table (the caller closes it).
    pub fn take_disconnected(&self, persistent: u64) -> Option<Arc<Open>> {
        self.take_if(persistent, |_| true)
    }

    /// The disconnected open `persistent`, left in place.
    pub fn disconnected_open(&self, persistent: u64) -> Option<Arc<Open>> {
        match &lock(&self.entries).get(&persistent)?.state {
            State::Disconnected { open, .. } => Some(open.clone()),
            State::Connected(_) => None,
        }
    }

    /// Removes the disconnected open `persistent` if `which` accepts its generation.
    fn take_if(&self, persistent: u64, which: impl Fn(u64) -> bool) -> Option<Arc<Open>> {
        let mut entries = lock(&self.entries);
        match entries.get(&persistent).map(|e| &e.state) {
            Some(State::Disconnected { generation, .. }) if which(*generation) => match entries.remove(&persistent)?.state {
                State::Disconnected { open, .. } => {
                    self.disconnected.fetch_sub(1, Ordering::AcqRel);
                    Some(open)
                }
                State::Connected(_) => None,
            },
            _ => None,
        }
    }

    /// A reconnect (MS-SMB2 3.3.5.9.7, 3.3.5.9.12): hands the disconnected open over to
    /// `session`, or says why not. An open still connected to a session whose connections
    /// are all gone is being torn down: the reconnect waits for that.
    pub async fn reconnect(&self, server: &ServerState, claim: &Claim, session: SessionId) -> Result<(Arc<Open>, Grant), NtStatus> {
        for _ in 0..TEARDOWN_POLLS {
            match self.try_reconnect(claim, session) {
                Err(Some(old)) if tearing_down(server, old) => tokio::time::sleep(TEARDOWN_POLL).await,
                Err(_) => return Err(NtStatus::OBJECT_NAME_NOT_FOUND),
                Ok(r) => return r,
            }
        }
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    }

    /// One look: Ok(the answer), or Err(the session the open is still connected to).
    #[allow(clippy::type_complexity)]
    fn try_reconnect(&self, claim: &Claim, session: SessionId) -> Result<Result<(Arc<Open>, Grant), NtStatus>, Option<SessionId>> {
        let mut entries = lock(&self.entries);
        let Some(entry) = entries.get_mut(&claim.persistent) else { return Err(None) };
        let State::Disconnected { open, .. } = &entry.state else {
            let State::Connected(s) = entry.state else { return Err(None) };
            return Err(Some(s));
        };
        let g = &entry.grant;
        // A v2 reconnect names the CreateGuid; a lease must be the open's, from the same
        // client; the open is on this share.
        // A v1 open's CreateGuid is all zeros: a DH2C naming zeros reclaims it (as Samba).
        let guid_ok = claim.create_guid.is_none_or(|c| g.create_guid.unwrap_or([0; 16]) == c);
        if !guid_ok || claim.lease != g.lease || claim.share != g.share {
            return Ok(Err(NtStatus::OBJECT_NAME_NOT_FOUND));
        }
        // With a lease, another name is a wrong parameter (what Windows and Samba answer).
        if g.lease.is_some() && lock(&open.path).to_smb_string().to_lowercase() != claim.name {
            return Ok(Err(NtStatus::INVALID_PARAMETER));
        }
        // Only its owner may have it back (ksmbd CVE-2026-31717 was the lack of this).
        if claim.user.as_ref() != Some(&g.user) || g.user == User::Anonymous {
            return Ok(Err(NtStatus::ACCESS_DENIED));
        }
        let open = open.clone();
        entry.state = State::Connected(session);
        self.disconnected.fetch_sub(1, Ordering::AcqRel);
        Ok(Ok((open, g.clone())))
    }

    /// Disconnected opens a break notification is for. Such an open cannot acknowledge a
    /// break: it is closed instead, which frees its share mode and caching at once
    /// (MS-SMB2 3.3.4.6 and 3.3.4.7; Samba purges them the same way). Returns the opens
    /// removed; the caller closes them and sends nothing.
    pub fn take_break_targets(&self, notice: &Notice) -> Vec<Arc<Open>> {
        if self.disconnected.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut entries = lock(&self.entries);
        let ids: Vec<u64> = entries
            .iter()
            .filter_map(|(id, e)| {
                let State::Disconnected { open, session, .. } = &e.state else { return None };
                (!e.grant.persistent && hits(notice, e, open, *session)).then_some(*id)
            })
            .collect();
        ids.into_iter()
            .filter_map(|id| match entries.remove(&id)?.state {
                State::Disconnected { open, .. } => {
                    self.disconnected.fetch_sub(1, Ordering::AcqRel);
                    Some(open)
                }
                State::Connected(_) => None,
            })
            .collect()
    }
}

/// Whether `notice` is for the disconnected open `open` of `session`.
fn hits(notice: &Notice, e: &Entry, open: &Open, session: SessionId) -> bool {
    match notice {
        Notice::Oplock { owner, body, .. } => owner.session == session && body.file_id.volatile == open.id.volatile,
        Notice::Lease { owners, body } => e.grant.lease.is_some_and(|l| l.1 == body.lease_key) && owners.iter().any(|o| o.session == session),
    }
}

/// Closes the disconnected open `id` when `timeout` passes, unless it was reconnected (or
/// disconnected again: another `generation`) meanwhile.
fn expire_after(server: &Arc<ServerState>, id: u64, generation: u64, timeout: Duration) {
    let server = server.clone();
    tokio::spawn(async move {
        tokio::time::sleep(timeout).await;
        if let Some(open) = server.durable.take_if(id, |g| g == generation) {
            tracing::debug!(open = id, "disconnected durable open timed out");
            crate::open::close_open(&server, &open).await;
        }
    });
}

/// Whether session `id` is going away: gone from the session table (its opens are being
/// moved), or every connection serving it has closed or been left by its peer (a client
/// reconnects as soon as it has dropped the old connection; the old reader may not have
/// read the end of its stream yet).
fn tearing_down(server: &ServerState, id: SessionId) -> bool {
    let Some(s) = server.sessions.get(&id) else { return true };
    s.channel_ids().iter().all(|c| server.connections.get(c).and_then(|w| w.upgrade()).is_none_or(|conn| conn.is_ending()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_timeouts_are_defaulted_and_capped() {
        assert_eq!(v2_timeout(0), V2_DEFAULT_TIMEOUT);
        assert_eq!(v2_timeout(u32::MAX), V2_MAX_TIMEOUT);
        assert_eq!(v2_timeout(5000), Duration::from_secs(5));
    }

    fn grant() -> Grant {
        let user = User::Named("a".into());
        Grant {
            create_guid: Some([1; 16]),
            timeout: V1_TIMEOUT,
            user,
            share: 0,
            lease: None,
            create_action: 2,
            persistent: false,
            app_instance: None,
        }
    }

    #[test]
    fn a_connected_open_is_not_reconnected() {
        let t = DurableOpens::default();
        t.register(7, grant(), SessionId(1));
        let user = Some(User::Named("a".into()));
        let claim = Claim { persistent: 7, create_guid: None, user, share: 0, lease: None, name: String::new() };
        assert_eq!(t.try_reconnect(&claim, SessionId(2)).err(), Some(Some(SessionId(1))));
        t.forget(7);
        assert_eq!(t.try_reconnect(&claim, SessionId(2)).err(), Some(None));
    }

    #[test]
    fn app_instance_opens_are_other_clients_opens_on_the_share() {
        let t = DurableOpens::default();
        t.register(7, grant(), SessionId(1));
        t.set_app_instance(7, [5; 16], AppOwner { client_guid: [1; 16], version: None });
        t.register(8, grant(), SessionId(2));
        let found = t.app_instance_opens([5; 16], 0, [2; 16]);
        assert_eq!(found.iter().map(|f| (f.persistent, f.session)).collect::<Vec<_>>(), vec![(7, Some(SessionId(1)))]);
        assert!(t.app_instance_opens([5; 16], 0, [1; 16]).is_empty(), "the same client's open");
        assert!(t.app_instance_opens([5; 16], 1, [2; 16]).is_empty(), "another share");
        assert!(t.app_instance_opens([6; 16], 0, [2; 16]).is_empty(), "another instance");
    }

    #[test]
    fn a_resilient_open_is_no_longer_durable() {
        let t = DurableOpens::default();
        t.make_resilient(9, Duration::from_secs(5), SessionId(1), grant);
        assert_eq!(t.grant(9), None, "a resilient open that was not durable");
        t.register(7, grant(), SessionId(1));
        assert!(t.grant(7).is_some());
        t.make_resilient(7, Duration::from_secs(5), SessionId(1), || unreachable!("the open is in the table"));
        assert_eq!(t.grant(7), None, "MS-SMB2 3.3.5.15.9: Open.IsDurable becomes FALSE");
        let user = Some(User::Named("a".into()));
        let claim = Claim { persistent: 9, create_guid: None, user, share: 0, lease: None, name: String::new() };
        assert_eq!(t.try_reconnect(&claim, SessionId(2)).err(), Some(Some(SessionId(1))), "still connected");
    }
}
