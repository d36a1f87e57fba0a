//! Authenticated sessions (MS-SMB2 3.3.1.8).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use smb_crypto::{Cipher, PreauthHash, Sealer, Signer, SigningAlgorithm};
use smb_wire::SessionId;

use crate::channel::ChannelList;
use crate::connection::Connection;

use crate::open::Open;
use crate::sync::lock;
use crate::tree::Tree;

/// Who a session belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    Named(String),
    Guest,
    Anonymous,
}

/// Tree connects one session may hold: a client connects each share once or a few times;
/// a loop of TREE_CONNECTs must not grow the server without bound.
pub const MAX_TREES: usize = 1024;

/// Keys and policy fixed when authentication completes.
#[derive(Debug)]
pub struct SessionSecurity {
    pub user: User,
    /// Session.SigningKey; None for guest and anonymous sessions, which have no key. It is
    /// also the first channel's key; bound channels have their own (see `channel`).
    pub signer: Option<Arc<Signer>>,
    /// The bytes of Session.SigningKey, to check a binding request signed with the binding
    /// connection's algorithm rather than the session's.
    pub signing_key: Option<Vec<u8>>,
    /// Every request must be signed (server or client required it).
    pub signing_required: bool,
    /// SMB3 encryption keys (server-to-client and client-to-server), when a cipher was
    /// negotiated and the session has a key.
    pub encryptor: Option<Sealer>,
    pub decryptor: Option<Sealer>,
    /// Every request of this session must arrive encrypted (Session.EncryptData).
    pub encrypt_data: bool,
}

/// Authentication in progress.
#[derive(Debug)]
pub struct Pending {
    pub ntlm: smb_auth::NtlmServer,
    /// 3.1.1 session preauth hash, seeded from the connection's.
    pub preauth: PreauthHash,
}

/// What [`Session::describe`] reports.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub id: u64,
    /// None while authentication is in progress.
    pub user: Option<User>,
    pub dialect: u16,
    /// The signing algorithm when every request is signed.
    pub signing: Option<SigningAlgorithm>,
    /// The session's cipher when it has encryption keys.
    pub encryption: Option<Cipher>,
    /// Every request must be encrypted.
    pub encrypt_data: bool,
    /// Connection ids of the channels.
    pub channels: Vec<u64>,
    pub max_channels: usize,
}

/// One session.
#[derive(Debug)]
pub struct Session {
    pub id: SessionId,
    /// Connection that created it (the first channel).
    pub conn_id: u64,
    /// What the first connection negotiated; a channel must match (MS-SMB2 3.3.5.5.2).
    pub dialect: u16,
    pub client_guid: [u8; 16],
    pub signing_algorithm: SigningAlgorithm,
    pub cipher: Option<Cipher>,
    /// Channels this session may have (config `max_channels`; 1 without multichannel).
    pub max_channels: usize,
    /// The connections serving this session (never locked on the data path).
    pub channels: Mutex<ChannelList>,
    pub pending: Mutex<Option<Pending>>,
    pub security: OnceLock<SessionSecurity>,
    // Read-mostly (every request looks its tree and open up, from any channel): RwLock.
    trees: RwLock<HashMap<u32, Arc<Tree>>>,
    next_tree: AtomicU32,
    opens: RwLock<HashMap<u64, Arc<Open>>>,
    /// The session has ended and its opens were taken for closing ([`Session::end_opens`]):
    /// no open may be added. Read and written with `opens` write-locked.
    opens_ended: std::sync::atomic::AtomicBool,
    /// Set once a request of this session arrived encrypted (for `braid status`).
    pub encrypted_seen: std::sync::atomic::AtomicBool,
    /// The last re-authentication was anonymous: the session acts as anonymous (new tree
    /// connects and opens) until its user re-authenticates; keys and opens are unchanged.
    pub anonymous_reauth: std::sync::atomic::AtomicBool,
}

impl Session {
    pub fn new(id: SessionId, conn: &Connection, pending: Pending) -> Self {
        let neg = conn.negotiated.get();
        let config = &conn.server.config;
        Session {
            id,
            conn_id: conn.id,
            dialect: conn.dialect(),
            client_guid: neg.map_or([0; 16], |n| n.client_guid),
            signing_algorithm: neg.map_or(SigningAlgorithm::HmacSha256, |n| n.signing_algorithm),
            cipher: neg.and_then(|n| n.cipher),
            max_channels: if config.multichannel { config.max_channels.max(1) } else { 1 },
            channels: Mutex::new(ChannelList::default()),
            pending: Mutex::new(Some(pending)),
            security: OnceLock::new(),
            trees: RwLock::new(HashMap::new()),
            next_tree: AtomicU32::new(1),
            opens: RwLock::new(HashMap::new()),
            opens_ended: std::sync::atomic::AtomicBool::new(false),
            encrypted_seen: std::sync::atomic::AtomicBool::new(false),
            anonymous_reauth: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Authenticated and usable.
    pub fn is_valid(&self) -> bool {
        self.security.get().is_some()
    }

    pub fn signer(&self) -> Option<&Arc<Signer>> {
        self.security.get().and_then(|s| s.signer.as_ref())
    }

    /// Ids of the connections that are channels of this session, the first one first.
    pub fn channel_ids(&self) -> Vec<u64> {
        lock(&self.channels).ids()
    }

    /// A summary for status displays.
    pub fn describe(&self) -> SessionInfo {
        let sec = self.security.get();
        SessionInfo {
            id: self.id.0,
            user: sec.map(|s| s.user.clone()),
            dialect: self.dialect,
            signing: sec.and_then(|s| s.signer.as_ref().filter(|_| s.signing_required).map(|g| g.algorithm())),
            encryption: sec.and_then(|s| s.encryptor.as_ref().map(|e| e.cipher())),
            encrypt_data: sec.is_some_and(|s| s.encrypt_data),
            channels: self.channel_ids(),
            max_channels: self.max_channels,
        }
    }

    /// Whether this session can encrypt (has keys for a negotiated cipher).
    pub fn can_encrypt(&self) -> bool {
        self.security.get().is_some_and(|s| s.encryptor.is_some())
    }

    /// Who the session acts as: its authenticated user, or anonymous after an anonymous
    /// re-authentication.
    pub fn user(&self) -> Option<&User> {
        static ANONYMOUS: User = User::Anonymous;
        let sec = self.security.get()?;
        Some(if self.anonymous_reauth.load(Ordering::Acquire) { &ANONYMOUS } else { &sec.user })
    }

    /// Adds a tree connect; None when the session holds [`MAX_TREES`] already.
    pub fn add_tree(&self, make: impl FnOnce(u32) -> Tree) -> Option<Arc<Tree>> {
        let mut trees = write(&self.trees);
        if trees.len() >= MAX_TREES {
            return None;
        }
        let id = self.next_tree.fetch_add(1, Ordering::Relaxed);
        let t = Arc::new(make(id));
        trees.insert(id, t.clone());
        Some(t)
    }

    pub fn tree(&self, id: u32) -> Option<Arc<Tree>> {
        read(&self.trees).get(&id).cloned()
    }

    pub fn remove_tree(&self, id: u32) -> Option<Arc<Tree>> {
        write(&self.trees).remove(&id)
    }

    pub fn open_count(&self) -> usize {
        read(&self.opens).len()
    }

    /// Adds an open; false once the session has ended. A CREATE may finish after that (it
    /// waited for a break or for storage while a LOGOFF or the loss of the last channel
    /// ended the session): its caller must close the open, which nothing else would.
    #[must_use]
    pub fn add_open(&self, o: Arc<Open>) -> bool {
        let mut opens = write(&self.opens);
        if self.opens_ended.load(Ordering::Relaxed) {
            return false;
        }
        opens.insert(o.id.volatile, o);
        true
    }

    pub fn open(&self, volatile: u64) -> Option<Arc<Open>> {
        read(&self.opens).get(&volatile).cloned()
    }

    /// A snapshot of the session's opens.
    pub fn opens(&self) -> Vec<Arc<Open>> {
        read(&self.opens).values().cloned().collect()
    }

    pub fn remove_open(&self, volatile: u64) -> Option<Arc<Open>> {
        write(&self.opens).remove(&volatile)
    }

    /// Removes every open (of one tree, or all) for closing.
    pub fn take_opens(&self, tree: Option<u32>) -> Vec<Arc<Open>> {
        let mut opens = write(&self.opens);
        let ids: Vec<u64> = opens.iter().filter(|(_, o)| tree.is_none_or(|t| o.tree.id == t)).map(|(k, _)| *k).collect();
        ids.into_iter().filter_map(|k| opens.remove(&k)).collect()
    }

    /// The session ends: removes every open for closing, and refuses new ones.
    pub fn end_opens(&self) -> Vec<Arc<Open>> {
        let mut opens = write(&self.opens);
        self.opens_ended.store(true, Ordering::Relaxed);
        opens.drain().map(|(_, o)| o).collect()
    }

    /// The tree connects as they are now.
    pub fn trees(&self) -> Vec<Arc<Tree>> {
        read(&self.trees).values().cloned().collect()
    }

    pub fn take_trees(&self) -> Vec<Arc<Tree>> {
        write(&self.trees).drain().map(|(_, t)| t).collect()
    }
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

/// Deregisters a session and closes everything opened through it, durable opens too (a
/// failed re-authentication). Every channel stops serving it.
pub async fn end_session(server: &Arc<crate::server::ServerState>, s: &Arc<Session>) {
    end(server, s, None).await;
}

/// Ends a session the client may come back for: LOGOFF (on any channel), a reconnecting
/// client naming it as its PreviousSessionId (MS-SMB2 3.3.5.5.3), or the loss of its last
/// channel. Durable opens are not closed but disconnected (see `durable.rs`): Windows and
/// Samba keep them through all of these, LOGOFF included (smbtorture's
/// durable-open.reopen4); resilient opens are kept too but for LOGOFF (`logoff`); the rest
/// close as in [`end_session`].
pub async fn end_session_keeping_durable(server: &Arc<crate::server::ServerState>, s: &Arc<Session>) {
    end(server, s, Some(true)).await;
}

/// LOGOFF: as [`end_session_keeping_durable`], but resilient opens that are not durable
/// close (MS-SMB2 3.3.5.6 keeps only what may be reconnected after a logoff).
pub async fn logoff(server: &Arc<crate::server::ServerState>, s: &Arc<Session>) {
    end(server, s, Some(false)).await;
}

/// `keep`: whether durable opens are kept, and resilient ones with them.
async fn end(server: &Arc<crate::server::ServerState>, s: &Arc<Session>, keep: Option<bool>) {
    // Removed first, so no new request finds the session while its opens close.
    server.sessions.remove(&s.id);
    crate::channel::end_all(server, s);
    for o in s.end_opens() {
        if !keep.is_some_and(|resilient| server.durable.disconnect_keeping(server, s, &o, resilient)) {
            crate::open::close_open(server, &o).await;
        }
    }
    s.take_trees();
}
