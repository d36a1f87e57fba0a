//! The lock service NFSv3 clients use for `fcntl` and `flock`: NLM v4 (program 100021,
//! as Linux's lockd speaks it) and the part of NSM v1 (program 100024) a server needs.
//! Locks go into the file table every protocol shares (`braid_filestate::Files`), as
//! POSIX-owner locks: they refuse SMB's byte-range locks and SMB's refuse them, and a
//! blocked request of either protocol is woken by the other's unlock.
//!
//! - `book`: owners, hosts, blocked requests; `record`: what survives a restart;
//! - `locking`: the NLM procedures; `nsm`: the NSM procedures, the state number, and the
//!   SM_NOTIFY sent to the hosts that held locks when Braid restarts;
//! - `callback`: calls to client hosts (GRANTED_MSG, `_RES`, SM_NOTIFY);
//! - `listen`: the NLM and NSM ports (TCP and UDP).

mod book;
pub mod callback;
mod listen;
mod locking;
mod nsm;
pub mod record;

use std::net::IpAddr;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use nfs_wire::nlm4::{Nlm4Stats, NLM4_VERS, NLM_PROG};
use nfs_wire::nsm1::{SM_PROG, SM_VERS};
use nfs_wire::rpc::{self, AcceptStat, CallHeader};

use crate::state::NfsState;

pub use listen::start;

/// The lock service's state, part of [`NfsState`].
#[derive(Debug, Default)]
pub struct Nlm {
    book: Mutex<book::Book>,
    /// This run's log of lock holders; set when the service starts.
    record: OnceLock<record::Record>,
    /// The NSM state number of this run (odd).
    state: AtomicI32,
}

impl Nlm {
    fn book(&self) -> MutexGuard<'_, book::Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self) -> Option<&record::Record> {
        self.record.get()
    }

    /// The NSM state number of this run.
    pub fn state_number(&self) -> i32 {
        self.state.load(Ordering::Relaxed)
    }

    /// Client hosts holding locks or waiting for them.
    pub fn hosts(&self) -> usize {
        self.book().hosts()
    }
}

/// Answers one NLM or NSM call; None when nothing is to be sent.
pub async fn call(state: &Arc<NfsState>, peer: IpAddr, hdr: &CallHeader, args: &[u8], out: Vec<u8>) -> Option<Vec<u8>> {
    if state.config.nlm_port == 0 {
        return accepted(hdr.xid, AcceptStat::ProgUnavail, out);
    }
    match (hdr.prog, hdr.vers) {
        (NLM_PROG, NLM4_VERS) => locking::call(state, peer, hdr, args, out).await,
        (NLM_PROG, _) => accepted(hdr.xid, AcceptStat::ProgMismatch { low: NLM4_VERS, high: NLM4_VERS }, out),
        (SM_PROG, SM_VERS) => nsm::call(state, peer, hdr, args, out).await,
        _ => accepted(hdr.xid, AcceptStat::ProgMismatch { low: SM_VERS, high: SM_VERS }, out),
    }
}

fn accepted(xid: u32, stat: AcceptStat, mut out: Vec<u8>) -> Option<Vec<u8>> {
    rpc::encode_accepted(xid, stat, &mut out);
    Some(out)
}

/// Releases everything the hosts named `name` or at `addr` held and waited for (the host
/// rebooted, or asked with FREE_ALL).
pub fn release_hosts(state: &NfsState, name: Option<&[u8]>, addr: Option<IpAddr>) {
    let (held, waits) = state.nlm.book().drop_hosts(name, addr);
    for w in waits {
        w.abort();
    }
    for (owner, key) in &held.locks {
        if let Some(core) = state.files.existing_core(*key) {
            core.unlock_posix(*owner, 0, u64::MAX);
        }
        state.files.forget_if_unused(*key);
    }
    for (claim, key) in &held.shares {
        if let Some(core) = state.files.existing_core(*key) {
            core.release(*claim);
        }
        state.files.forget_if_unused(*key);
    }
    if !held.locks.is_empty() || !held.shares.is_empty() {
        tracing::info!(
            host = name.map(|n| String::from_utf8_lossy(n).into_owned()),
            ?addr,
            locks = held.locks.len(),
            shares = held.shares.len(),
            "released a client host's NLM locks"
        );
    }
}

/// Whether `to` is one of this server's own lock services (NLM or NSM at an NFS address;
/// a wildcard NFS address covers every local address, loopback included).
fn is_self(state: &NfsState, to: std::net::SocketAddr) -> bool {
    let cfg = &state.config;
    (to.port() == cfg.nlm_port || to.port() == cfg.nsm_port)
        && cfg.listen.iter().any(|l| l.ip() == to.ip() || (l.ip().is_unspecified() && (to.ip().is_loopback() || local_address(to.ip()))))
}

/// Whether `ip` is an address of this host (bindable).
fn local_address(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind((ip, 0)).is_ok()
}

/// Sends a callback to client host `host`, never to this server itself.
async fn call_back(state: &NfsState, host: IpAddr, call: &callback::Callback) -> std::io::Result<()> {
    callback::send_via(host, nfs_wire::portmap::PMAP_PORT, call, |to| is_self(state, to)).await
}

/// NLM4_DENIED_GRACE_PERIOD while the grace period runs, for a request that is not a reclaim.
fn grace(state: &NfsState, reclaim: bool) -> Result<(), Nlm4Stats> {
    match !reclaim && state.files.grace_until().is_some() {
        true => Err(Nlm4Stats::DeniedGracePeriod),
        false => Ok(()),
    }
}
