//! A call's admission against its export's provisioned performance (`braid_qos`, the same
//! limiter as the share's SMB clients use): every NFS procedure but NULL (and MOUNT's) on an
//! export waits here until the share, and for READ and WRITE the file, is within its
//! limits. The reply is simply later; nothing fails.
//!
//! A client is one address per export: the connections of one client (nconnect) share its
//! slot, so they are one party to the limiter's fairness. Each connection keeps the slots it
//! used, so the limiter's table is asked once per connection and export.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use braid_qos::{ClientSlot, Io, ShareLimiter};
use nfs_wire::nfs3::Args3;

use crate::handlers::read::MAX_READ;
use crate::state::{ExportState, NfsState};

/// One connection's client slots, by export id, and whether the connection is gone.
#[derive(Debug)]
pub struct Slots {
    peer: IpAddr,
    slots: Mutex<Vec<(u32, Arc<ClientSlot>)>>,
    closed: AtomicBool,
    closing: Notify,
}

impl Slots {
    pub fn new(peer: IpAddr) -> Self {
        Slots { peer, slots: Mutex::new(Vec::new()), closed: AtomicBool::new(false), closing: Notify::new() }
    }

    /// The connection is gone: its waiting calls leave the queue uncharged (nobody would get
    /// their replies).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.closing.notify_waiters();
    }

    /// This connection's slot at `export`'s limiter.
    fn slot(&self, export: &ExportState) -> Arc<ClientSlot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, s)) = slots.iter().find(|(id, _)| *id == export.id) {
            return s.clone();
        }
        let s = export.export.qos.client(client_key(self.peer), &format!("nfs {}", self.peer));
        slots.push((export.id, s.clone()));
        s
    }
}

/// The limiter's key of a client address: a hash of it with the top bit set, apart from
/// SMB's session ids, which the same limiter sees.
fn client_key(peer: IpAddr) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(peer) | 1 << 63
}

/// What a call costs its export: data by its size, every other procedure one IO.
fn cost(args: &Args3<'_>) -> Option<Io> {
    Some(match args {
        Args3::Null => return None,
        Args3::Read(a) => Io::Read(u64::from(a.count.min(MAX_READ))),
        Args3::Write(a) => Io::Write(a.data.len() as u64),
        _ => Io::Meta,
    })
}

/// Waits until the call is within its export's limits; false when the connection went away
/// meanwhile (the call is not to run).
pub async fn admit(slots: &Slots, state: &NfsState, export: &ExportState, args: &Args3<'_>) -> bool {
    let Some(io) = cost(args) else { return true };
    let limiter = &export.export.qos;
    let file = match args {
        Args3::Read(a) if has_file_limits(limiter) => file_id(state, export, a.file.as_bytes()),
        Args3::Write(a) if has_file_limits(limiter) => file_id(state, export, a.file.as_bytes()),
        _ => None,
    };
    let slot = slots.slot(export);
    let mut wait = std::pin::pin!(limiter.admit(&slot, file, io));
    if futures_ready(wait.as_mut()).await {
        return true;
    }
    // Subscribed before the flag is read, so a close between the two is not missed.
    let closing = slots.closing.notified();
    let mut closing = std::pin::pin!(closing);
    closing.as_mut().enable();
    if slots.closed.load(Ordering::Acquire) {
        return false;
    }
    tokio::select! {
        _ = wait => true,
        _ = closing => false,
    }
}

/// Polls `f` once; true if it finished (a call within its limits goes on without a timer
/// or a subscription).
async fn futures_ready<F: std::future::Future>(mut f: std::pin::Pin<&mut F>) -> bool {
    std::future::poll_fn(|c| std::task::Poll::Ready(f.as_mut().poll(c).is_ready())).await
}

/// Whether the share holds single files to limits of their own (only then is the file of
/// a READ or WRITE looked up).
fn has_file_limits(limiter: &ShareLimiter) -> bool {
    !limiter.is_unlimited() && limiter.has_file_limits()
}

/// The backend file id behind handle `fh`, where the export has seen it (the id SMB's
/// opens of the same file use, so per-file limits are one for both protocols).
fn file_id(state: &NfsState, export: &ExportState, fh: &[u8]) -> Option<u64> {
    let token = state.key.check(fh).ok()?.token;
    export.paths.guess(token).map(|(_, id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_per_address_and_apart_from_session_ids() {
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(client_key(a), client_key(a));
        assert_ne!(client_key(a), client_key(b));
        assert!(client_key(a) >> 63 == 1);
    }
}
