//! Reloading shares, users and limits while the server runs (`braid serve` on SIGHUP or
//! `braid reload`). Shares are matched by name: a kept share keeps its index (the file
//! table's key), its backend (while its storage, `read_only` and metadata cache settings
//! are the same) and its limiter, whose limits change in place; a share whose storage
//! changed is removed and added again. Added shares get fresh indices, never a removed
//! one's. Trees of a removed share, or of a user the share no longer admits (`users`,
//! `guest_ok`), are disconnected (their next request gets STATUS_NETWORK_NAME_DELETED) and
//! sessions of a removed user end (their next request gets STATUS_USER_SESSION_DELETED);
//! everything else keeps working. Trees of a changed share keep the settings they
//! connected with (`read_only`, `encrypt`, ...) until they reconnect. Settings that cannot
//! change while listening are reported as needing a restart.
//!
//! The share list and the user table are swapped whole (`arc-swap`): tree connects and
//! session setups read them, the READ/WRITE path never does (a tree holds its share).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use crate::config::{ServerConfig, ShareConfig, UserConfig};
use crate::server::{ServerState, Share};
use crate::session::User;

/// The current shares, replaced whole by a reload.
#[derive(Debug)]
pub struct Shares(ArcSwap<Vec<Arc<Share>>>);

impl Shares {
    pub fn new(shares: Vec<Arc<Share>>) -> Self {
        Shares(ArcSwap::from_pointee(shares))
    }

    /// The list as it is now (a later reload does not change it).
    pub fn load(&self) -> Arc<Vec<Arc<Share>>> {
        self.0.load_full()
    }

    /// The shares as they are now, in configuration order.
    pub fn iter(&self) -> std::vec::IntoIter<Arc<Share>> {
        self.0.load().to_vec().into_iter()
    }

    pub fn len(&self) -> usize {
        self.0.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.load().is_empty()
    }

    /// The share at place `i` of the list (not its index).
    pub fn get(&self, i: usize) -> Option<Arc<Share>> {
        self.0.load().get(i).cloned()
    }

    fn store(&self, shares: Vec<Arc<Share>>) {
        self.0.store(Arc::new(shares));
    }
}

impl IntoIterator for &Shares {
    type Item = Arc<Share>;
    type IntoIter = std::vec::IntoIter<Arc<Share>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// NT hashes by lower-case user name.
pub fn user_table(users: &[UserConfig]) -> HashMap<String, [u8; 16]> {
    users.iter().map(|u| (u.name.to_lowercase(), u.nt_hash)).collect()
}

/// What a reload changed, for the log and `braid reload`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    pub shares_added: Vec<String>,
    pub shares_removed: Vec<String>,
    /// Kept shares whose settings changed (apart from their limits).
    pub shares_changed: Vec<String>,
    /// Kept shares whose limits changed (applied at once, also to waiting requests).
    pub limits_changed: Vec<String>,
    pub users_added: Vec<String>,
    pub users_changed: Vec<String>,
    pub users_removed: Vec<String>,
    /// Trees disconnected because their share went away or no longer admits their user.
    pub trees_closed: usize,
    /// Sessions ended because their user went away.
    pub sessions_ended: usize,
    /// Settings that changed in the file but only take effect after a restart.
    pub needs_restart: Vec<String>,
}

impl ReloadReport {
    pub fn changed_nothing(&self) -> bool {
        *self == ReloadReport { needs_restart: self.needs_restart.clone(), ..Default::default() }
    }
}

impl fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lists = [
            ("shares added", &self.shares_added),
            ("shares removed", &self.shares_removed),
            ("shares changed", &self.shares_changed),
            ("limits changed", &self.limits_changed),
            ("users added", &self.users_added),
            ("passwords changed", &self.users_changed),
            ("users removed", &self.users_removed),
        ];
        let mut parts: Vec<String> = lists.iter().filter(|(_, v)| !v.is_empty()).map(|(what, v)| format!("{what}: {}", v.join(", "))).collect();
        if self.trees_closed > 0 {
            parts.push(format!("{} tree connect(s) closed (share removed, or the user no longer admitted)", self.trees_closed));
        }
        if self.sessions_ended > 0 {
            parts.push(format!("{} session(s) of removed users ended", self.sessions_ended));
        }
        if parts.is_empty() {
            parts.push("no change to shares, users or limits".into());
        }
        if !self.needs_restart.is_empty() {
            parts.push(format!("needs a restart (ignored for now): {}", self.needs_restart.join(", ")));
        }
        write!(f, "{}", parts.join("; "))
    }
}

/// Whether two share configurations need different backends.
fn same_storage(a: &ShareConfig, b: &ShareConfig) -> bool {
    a.storage == b.storage && a.read_only == b.read_only && a.metadata_cache == b.metadata_cache
}

/// A share list.
type ShareList = Vec<Arc<Share>>;

/// The new share list: kept shares matched by name, new ones opened (nothing is swapped if
/// one cannot be opened). Returns the list and the newly opened shares.
fn plan_shares(state: &ServerState, new: &ServerConfig, report: &mut ReloadReport) -> std::io::Result<(ShareList, ShareList)> {
    let old = state.shares.load();
    let mut list = Vec::with_capacity(new.shares.len());
    let mut opened = Vec::new();
    for cfg in &new.shares {
        let kept = old.iter().find(|s| s.config.name.eq_ignore_ascii_case(&cfg.name) && same_storage(&s.config, cfg));
        let share = match kept {
            Some(s) => {
                let limits_same = s.config.limits == cfg.limits;
                let rest_same = format!("{:?}", ShareConfig { limits: cfg.limits.clone(), ..s.config.clone() }) == format!("{cfg:?}");
                if !limits_same {
                    report.limits_changed.push(cfg.name.clone());
                }
                if !rest_same {
                    report.shares_changed.push(cfg.name.clone());
                }
                if limits_same && rest_same {
                    s.clone()
                } else {
                    // Trees already connected keep the settings they connected with.
                    Arc::new(Share {
                        config: cfg.clone(),
                        backend: s.backend.clone(),
                        index: s.index,
                        qos: s.qos.clone(),
                        storage: s.storage.clone(),
                    })
                }
            }
            None => {
                let index = state.next_share_index.fetch_add(1, Ordering::Relaxed);
                let s = Arc::new(Share::open(cfg, index, &state.config)?);
                report.shares_added.push(cfg.name.clone());
                opened.push(s.clone());
                s
            }
        };
        list.push(share);
    }
    for s in old.iter().filter(|s| !list.iter().any(|n| n.index == s.index)) {
        report.shares_removed.push(s.config.name.clone());
    }
    Ok((list, opened))
}

/// Applies `new` (already validated) to the running server. Fails, changing nothing, when
/// a new share's storage cannot be opened.
pub async fn apply(state: &Arc<ServerState>, new: &ServerConfig) -> std::io::Result<ReloadReport> {
    let mut report = ReloadReport { needs_restart: needs_restart(&state.config, new), ..Default::default() };
    let (list, opened) = plan_shares(state, new, &mut report)?;
    // Limits apply first, on the limiters requests already wait in; unchanged ones are
    // left alone (setting limits may restart a limiter's buckets).
    for s in list.iter().filter(|s| s.qos.limits() != s.config.limits) {
        s.qos.set_limits(s.config.limits.clone());
    }
    for s in &opened {
        crate::changes::subscribe(state, s);
    }
    let live = list.clone();
    state.shares.store(list);
    let users = user_table(&new.users);
    let old_users = state.users.load_full();
    for (name, hash) in &users {
        match old_users.get(name) {
            None => report.users_added.push(name.clone()),
            Some(h) if h != hash => report.users_changed.push(name.clone()),
            Some(_) => {}
        }
    }
    report.users_removed = old_users.keys().filter(|n| !users.contains_key(*n)).cloned().collect();
    state.users.store(Arc::new(users));
    report.users_added.sort();
    report.users_changed.sort();
    report.users_removed.sort();
    report.trees_closed = close_removed_trees(state, &live).await;
    report.sessions_ended = end_removed_users(state).await;
    Ok(report)
}

/// Disconnects every tree whose share is no longer served, or whose share no longer
/// admits the session's user (closing its opens, as TREE_DISCONNECT does). Returns how many.
async fn close_removed_trees(state: &Arc<ServerState>, live: &[Arc<Share>]) -> usize {
    let mut closed = 0;
    for session in state.sessions.values() {
        let user = session.user().cloned().unwrap_or(User::Anonymous);
        for tree in session.trees() {
            let Some(share) = tree.share() else { continue };
            if live.iter().any(|s| s.index == share.index && s.admits(&user)) {
                continue;
            }
            for o in session.take_opens(Some(tree.id)) {
                crate::open::close_open(state, &o).await;
            }
            session.remove_tree(tree.id);
            closed += 1;
        }
    }
    closed
}

/// Ends the sessions of users who are no longer configured. Guest and anonymous sessions
/// stay (guest access is a share setting, and ends with its shares' trees).
async fn end_removed_users(state: &Arc<ServerState>) -> usize {
    let users = state.users.load();
    let mut ended = 0;
    for session in state.sessions.values() {
        // The user it authenticated as, even while it acts as anonymous after an anonymous
        // re-authentication.
        let Some(User::Named(name)) = session.security.get().map(|s| &s.user) else { continue };
        if users.contains_key(&name.to_lowercase()) {
            continue;
        }
        tracing::info!(session = format!("{:#x}", session.id.0), user = %name, "user removed: ending session");
        crate::session::end_session(state, &session).await;
        ended += 1;
    }
    ended
}

/// The settings besides shares and users that differ between `old` and `new`.
fn needs_restart(old: &ServerConfig, new: &ServerConfig) -> Vec<String> {
    let mut out = Vec::new();
    macro_rules! compare {
        ($($field:ident),*) => {
            $(if format!("{:?}", old.$field) != format!("{:?}", new.$field) {
                out.push(stringify!($field).to_string());
            })*
        };
    }
    compare!(
        listen,
        server_name,
        domain,
        max_io_size,
        max_connections,
        max_connections_per_client,
        max_unauthenticated,
        logon_timeout,
        frame_timeout,
        storage_timeout,
        storage_threads_per_share,
        max_opens_per_session,
        signing_required,
        encryption,
        ciphers,
        reject_unencrypted,
        admin,
        admin_trusted,
        admin_token,
        admin_open_metrics,
        multichannel,
        smbtorture_hooks,
        splice_writes,
        splice_min_concurrent,
        max_channels,
        interfaces
    );
    out
}

/// What the running program does to reload: re-read its configuration file and apply it
/// (the binary knows the file and the other protocols). Answers a line for the operator,
/// or the reason the file was refused.
pub type ReloadFn = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<String, String>> + Send>> + Send + Sync>;

/// Where the admin endpoint finds [`ReloadFn`] (set once by the binary).
#[derive(Default)]
pub struct ReloadHook(OnceLock<ReloadFn>);

impl fmt::Debug for ReloadHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.get().is_some() { "ReloadHook(set)" } else { "ReloadHook(unset)" })
    }
}

impl ReloadHook {
    pub fn set(&self, f: ReloadFn) {
        let _ = self.0.set(f);
    }
}

/// `POST /reload` from a peer the admin endpoint let through (trusted, or with the token):
/// runs the reload and answers its line, or why it was refused. The reload runs in a task of
/// its own, so a caller that gives up does not cut it short.
pub(crate) async fn answer_post(state: &ServerState) -> crate::admin::http::Response {
    use crate::admin::http::Response;
    use hyper::StatusCode;
    let (code, body) = match state.reload_hook.0.get() {
        None => (StatusCode::SERVICE_UNAVAILABLE, "this server cannot reload\n".to_string()),
        Some(f) => match tokio::spawn(f()).await {
            Ok(Ok(line)) => (StatusCode::OK, format!("{line}\n")),
            Ok(Err(e)) => (StatusCode::CONFLICT, format!("{e}\n")),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("reload failed: {e}\n")),
        },
    };
    Response::text(code, body)
}

#[cfg(test)]
mod tests;
