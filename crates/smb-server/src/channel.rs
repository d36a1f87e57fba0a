//! SMB 3 multichannel (MS-SMB2 3.3.1.14 Channel, 3.3.5.5.2 session binding): which
//! connections serve which session, each channel with its own signing key.
//!
//! The fact "connection C is a channel of session S" is kept twice, each copy behind its own
//! lock, so that the data path never takes a lock shared by the channels of a session:
//! - per connection, [`ConnChannels`]: session id → the channel's signer, read by every
//!   request of that connection only; plus the bindings in progress on the connection (their
//!   NTLM state and preauth hash never touch the session);
//! - per session, [`ChannelList`]: the connection ids, used only when a channel is added or
//!   lost, at LOGOFF and for status.
//!
//! Lock order: `Session::channels`, then a connection's `ConnChannels` maps, then
//! `Connection::sessions`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use smb_auth::NtlmServer;
use smb_crypto::{PreauthHash, Signer};
use smb_wire::{NtStatus, SessionId};

use crate::connection::Connection;
use crate::server::ServerState;
use crate::session::Session;
use crate::sync::lock;

/// A binding in progress on one connection (MS-SMB2 Session.BindingInProgress, per channel).
#[derive(Debug)]
pub struct Binding {
    pub ntlm: NtlmServer,
    /// 3.1.1 channel preauth hash (Channel.PreauthIntegrityHashValue), seeded from the
    /// binding connection's.
    pub preauth: PreauthHash,
}

/// The sessions a connection is a channel of, and the bindings in progress on it.
#[derive(Debug, Default)]
pub struct ConnChannels {
    /// Session → Channel.SigningKey as a signer (None for sessions without a key).
    bound: Mutex<HashMap<SessionId, Option<Arc<Signer>>>>,
    binding: Mutex<HashMap<SessionId, Binding>>,
}

impl ConnChannels {
    /// `Some(signer)` when this connection is a channel of `sid`.
    pub fn get(&self, sid: SessionId) -> Option<Option<Arc<Signer>>> {
        lock(&self.bound).get(&sid).cloned()
    }

    pub fn is_bound(&self, sid: SessionId) -> bool {
        lock(&self.bound).contains_key(&sid)
    }

    /// The bindings in progress on this connection (at most a few: one per session).
    pub fn bindings(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Binding>> {
        lock(&self.binding)
    }

    fn remove(&self, sid: SessionId) {
        lock(&self.bound).remove(&sid);
        lock(&self.binding).remove(&sid);
    }
}

/// The channels of one session.
#[derive(Debug, Default)]
pub struct ChannelList {
    /// Connection ids, the first channel first.
    conns: Vec<u64>,
    /// The session has ended (LOGOFF, last channel lost): no channel may be added.
    ended: bool,
}

impl ChannelList {
    pub fn ids(&self) -> Vec<u64> {
        self.conns.clone()
    }
}

/// Makes `conn` a channel of `session` with `signer` as its Channel.SigningKey: the first
/// channel when authentication completes, or a bound one.
pub fn attach(conn: &Connection, session: &Session, signer: Option<Arc<Signer>>) -> Result<(), NtStatus> {
    let mut list = lock(&session.channels);
    if list.ended {
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    if !list.conns.contains(&conn.id) {
        if list.conns.len() >= session.max_channels {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        list.conns.push(conn.id);
    }
    // A signing key means a named user (guest and anonymous sessions have none): such a
    // connection leaves the pool of connections that may be closed to make room.
    let named = signer.is_some();
    lock(&conn.channels.bound).insert(session.id, signer);
    let mut ids = lock(&conn.sessions);
    if !ids.contains(&session.id) {
        ids.push(session.id);
    }
    conn.logged_on(named);
    Ok(())
}

/// Whether another channel may still be added (checked before a binding starts).
pub fn has_room(session: &Session) -> Result<(), NtStatus> {
    let list = lock(&session.channels);
    if list.ended {
        Err(NtStatus::USER_SESSION_DELETED)
    } else if list.conns.len() >= session.max_channels {
        Err(NtStatus::INSUFFICIENT_RESOURCES)
    } else {
        Ok(())
    }
}

/// A connection is gone: it stops being a channel of every session it served. A session
/// whose last channel this was ends (its opens close); the others live on.
pub async fn connection_lost(conn: &Connection) {
    let ids: Vec<SessionId> = lock(&conn.sessions).drain(..).collect();
    lock(&conn.channels.binding).clear();
    for sid in ids {
        lock(&conn.channels.bound).remove(&sid);
        let Some(s) = conn.server.sessions.get(&sid) else { continue };
        let last = {
            let mut list = lock(&s.channels);
            list.conns.retain(|c| *c != conn.id);
            // A session still authenticating on this connection has no channel yet.
            let last = list.conns.is_empty() && !list.ended;
            if last {
                list.ended = true;
            }
            last
        };
        if last {
            crate::session::end_session_keeping_durable(&conn.server, &s).await;
        } else {
            tracing::info!(conn = conn.id, session = format!("{:#x}", sid.0), "channel lost; the session lives on its other channels");
        }
    }
}

/// Marks a session ended and removes it from every connection that served it (LOGOFF on
/// any channel ends it on all of them).
pub fn end_all(server: &ServerState, session: &Session) {
    let ids = {
        let mut list = lock(&session.channels);
        list.ended = true;
        std::mem::take(&mut list.conns)
    };
    for id in ids {
        if let Some(c) = server.connections.get(&id).and_then(|w| w.upgrade()) {
            c.channels.remove(session.id);
            lock(&c.sessions).retain(|s| *s != session.id);
        }
    }
}
