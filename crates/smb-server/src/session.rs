//! Authenticated sessions (MS-SMB2 3.3.1.8).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use smb_crypto::{PreauthHash, Sealer, Signer};
use smb_wire::SessionId;

use crate::open::Open;
use crate::server::lock;
use crate::tree::Tree;

/// Who a session belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    Named(String),
    Guest,
    Anonymous,
}

/// Keys and policy fixed when authentication completes.
#[derive(Debug)]
pub struct SessionSecurity {
    pub user: User,
    /// None for guest and anonymous sessions, which have no key.
    pub signer: Option<Signer>,
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

/// One session.
#[derive(Debug)]
pub struct Session {
    pub id: SessionId,
    /// Connection that created it (multichannel binding comes later).
    pub conn_id: u64,
    pub pending: Mutex<Option<Pending>>,
    pub security: OnceLock<SessionSecurity>,
    trees: Mutex<HashMap<u32, Arc<Tree>>>,
    next_tree: AtomicU32,
    opens: Mutex<HashMap<u64, Arc<Open>>>,
    /// Set once a request of this session arrived encrypted (for `braid status`).
    pub encrypted_seen: std::sync::atomic::AtomicBool,
}

impl Session {
    pub fn new(id: SessionId, conn_id: u64, pending: Pending) -> Self {
        Session {
            id,
            conn_id,
            pending: Mutex::new(Some(pending)),
            security: OnceLock::new(),
            trees: Mutex::new(HashMap::new()),
            next_tree: AtomicU32::new(1),
            opens: Mutex::new(HashMap::new()),
            encrypted_seen: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Authenticated and usable.
    pub fn is_valid(&self) -> bool {
        self.security.get().is_some()
    }

    pub fn signer(&self) -> Option<&Signer> {
        self.security.get().and_then(|s| s.signer.as_ref())
    }

    /// Whether this session can encrypt (has keys for a negotiated cipher).
    pub fn can_encrypt(&self) -> bool {
        self.security.get().is_some_and(|s| s.encryptor.is_some())
    }

    pub fn user(&self) -> Option<&User> {
        self.security.get().map(|s| &s.user)
    }

    pub fn add_tree(&self, make: impl FnOnce(u32) -> Tree) -> Arc<Tree> {
        let id = self.next_tree.fetch_add(1, Ordering::Relaxed);
        let t = Arc::new(make(id));
        lock(&self.trees).insert(id, t.clone());
        t
    }

    pub fn tree(&self, id: u32) -> Option<Arc<Tree>> {
        lock(&self.trees).get(&id).cloned()
    }

    pub fn remove_tree(&self, id: u32) -> Option<Arc<Tree>> {
        lock(&self.trees).remove(&id)
    }

    pub fn open_count(&self) -> usize {
        lock(&self.opens).len()
    }

    pub fn add_open(&self, o: Arc<Open>) {
        lock(&self.opens).insert(o.id.volatile, o);
    }

    pub fn open(&self, volatile: u64) -> Option<Arc<Open>> {
        lock(&self.opens).get(&volatile).cloned()
    }

    /// A snapshot of the session's opens.
    pub fn opens(&self) -> Vec<Arc<Open>> {
        lock(&self.opens).values().cloned().collect()
    }

    pub fn remove_open(&self, volatile: u64) -> Option<Arc<Open>> {
        lock(&self.opens).remove(&volatile)
    }

    /// Removes every open (of one tree, or all) for closing.
    pub fn take_opens(&self, tree: Option<u32>) -> Vec<Arc<Open>> {
        let mut opens = lock(&self.opens);
        let ids: Vec<u64> = opens.iter().filter(|(_, o)| tree.is_none_or(|t| o.tree.id == t)).map(|(k, _)| *k).collect();
        ids.into_iter().filter_map(|k| opens.remove(&k)).collect()
    }

    pub fn take_trees(&self) -> Vec<Arc<Tree>> {
        lock(&self.trees).drain().map(|(_, t)| t).collect()
    }
}
