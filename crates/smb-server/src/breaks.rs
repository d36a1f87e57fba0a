//! Sending break notifications (MS-SMB2 3.3.4.6, 3.3.4.7): framing, sealing and delivery
//! through a channel's [`Outbox`], and whether the client's TCP has acknowledged them. The
//! oplock and lease state that decides what breaks is in `oplocks.rs`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use smb_wire::header::flags;
use smb_wire::{Command, Header, MessageId, SessionId, TreeId};
use tokio::time::Instant;

use crate::oplocks::{Event, Notice, Owner, Requester};
use crate::outbox::Outbox;
use crate::server::ServerState;
use crate::transform;

/// Sends break notifications (server-initiated: MessageId all ones, no credits, not
/// signed; encrypted when the session or the open's share encrypts).
pub async fn deliver(server: &Arc<ServerState>, notices: Vec<Notice>) {
    for n in notices {
        send_notice(server, &n, &mut Vec::new()).await;
    }
}

/// Sends one notification to the first reachable channel not in `tried` (connection ids),
/// and records the one used. Used again after a channel was found dead (see
/// [`Delivery`]), it moves on to the session's other channels.
pub async fn send_notice(server: &Arc<ServerState>, n: &Notice, tried: &mut Vec<u64>) -> Option<Delivery> {
    // A disconnected durable open cannot acknowledge: it is closed instead (in a task of
    // its own: closing may announce changes, which may send breaks).
    crate::persistent::breaking(server, n).await;
    // A disconnected persistent open stays: the break is acknowledged for it.
    let kept = server.durable.persistent_break_targets(n);
    if !kept.is_empty() {
        deliver_later(server, crate::persistent::acknowledge_for(server, n, &kept));
        return None;
    }
    let purged = server.durable.take_break_targets(n);
    if !purged.is_empty() {
        for open in purged {
            tracing::debug!(open = open.id.persistent, "break to a disconnected durable open: closed");
            let server = server.clone();
            tokio::spawn(async move { crate::open::close_open(&server, &open).await });
        }
        return None;
    }
    let (msg, owners) = match n {
        Notice::Oplock { owner, body, .. } => {
            let mut msg = Vec::with_capacity(64 + 24);
            header(owner.session).encode(&mut msg);
            body.encode(&mut msg);
            (msg, vec![*owner])
        }
        Notice::Lease { owners, body } => {
            let mut msg = Vec::with_capacity(64 + 44);
            // Lease breaks name no session (MS-SMB2 3.3.4.7), unless encrypted.
            header(SessionId(0)).encode(&mut msg);
            body.encode(&mut msg);
            let mut owners = owners.clone();
            owners.dedup();
            (msg, owners)
        }
    };
    send_to(server, &owners, msg, tried, matches!(n, Notice::Lease { .. })).await
}

/// Where a break went, and the byte count at which the client's TCP has acknowledged it.
/// A channel that has not acknowledged it after several retransmission timeouts is dead
/// (MS-SMB2 lets the server then use another channel; only TCP can tell).
#[derive(Debug)]
pub struct Delivery {
    outbox: Weak<dyn Outbox>,
    mark: u64,
    lost_at: Instant,
}

/// What became of a [`Delivery`].
#[derive(Debug)]
pub enum DeliveryState {
    /// The client's TCP has acknowledged the break (or the kernel cannot tell).
    Acked,
    Pending,
    /// Not acknowledged in time: the channel is dead.
    Lost(Arc<dyn Outbox>),
    /// The connection ended meanwhile.
    Gone,
}

impl Delivery {
    /// Where the kernel cannot tell, the mark is 0: the break counts as delivered.
    fn after_send(outbox: &Arc<dyn Outbox>) -> Delivery {
        let (mark, rto) = outbox.sent_mark().unwrap_or_default();
        Delivery { outbox: Arc::downgrade(outbox), mark, lost_at: Instant::now() + crate::tcp_ack::loss_timeout(rto) }
    }

    pub fn check(&self, now: Instant) -> DeliveryState {
        let Some(conn) = self.outbox.upgrade().filter(|c| c.is_alive()) else { return DeliveryState::Gone };
        match conn.acked_bytes() {
            Some(a) if a < self.mark && now >= self.lost_at => DeliveryState::Lost(conn),
            Some(a) if a < self.mark => DeliveryState::Pending,
            _ => DeliveryState::Acked,
        }
    }
}

/// The longest a request's answer waits for the break notifications it caused to be
/// written. A break is a small frame and is written at once unless the channel's writer is
/// held by a large response or the client stopped reading; this bound keeps such a client
/// from holding back the answers of others (the break still goes out, after the answer).
const WRITE_WAIT: Duration = Duration::from_millis(250);

/// Break notifications a request caused and must write before its own answer: a client
/// whose break handler runs before it sees the answer never serves a listing or data it
/// cached under a lease the change ended (the Linux client answers `readdir` from its
/// cached directory as soon as `unlink` returns). Returned by whatever changes state
/// (`changes.rs`, [`break_level2`]), carried out by [`Notices::send`] in the request's
/// own flow (callers with no answer to order them before hand them to [`deliver_later`]).
#[must_use = "break notifications go out before the answer: call send"]
#[derive(Debug, Default)]
pub struct Notices(Vec<Notice>);

impl Notices {
    pub fn new(notices: Vec<Notice>) -> Notices {
        Notices(notices)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `other`'s notifications after these.
    pub fn add(&mut self, mut other: Notices) {
        self.0.append(&mut other.0);
    }

    pub(crate) fn into_vec(self) -> Vec<Notice> {
        self.0
    }

    /// Writes the notifications to their channels, returning once they are written (or
    /// after [`WRITE_WAIT`]). The writing runs in a task of its own: a request dropped
    /// meanwhile still sends them, and a write given up on never leaves half a frame on
    /// the wire. Nothing is spawned when there is nothing to send.
    pub async fn send(self, server: &Arc<ServerState>) {
        if self.0.is_empty() {
            return;
        }
        let task = tokio::spawn(delivery(server.clone(), self.0));
        if tokio::time::timeout(WRITE_WAIT, task).await.is_err() {
            tracing::warn!(wait = ?WRITE_WAIT, "break notifications not written in time (a client not reading?); answering before them");
        }
    }
}

/// [`deliver`] as a boxed future, named `Send`: sending may close a disconnected open,
/// whose close sends breaks in turn, and the compiler cannot see through that cycle of
/// `async fn`s without a named type.
fn delivery(server: Arc<ServerState>, notices: Vec<Notice>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move { deliver(&server, notices).await })
}

/// [`deliver`] in a task of its own, for callers with no answer to order the notifications
/// before.
pub fn deliver_later(server: &Arc<ServerState>, notices: Vec<Notice>) {
    if notices.is_empty() {
        return;
    }
    let server = server.clone();
    tokio::spawn(async move { deliver(&server, notices).await });
}

fn header(session: SessionId) -> Header {
    Header {
        credit_charge: 0,
        status: 0,
        command: Command::OplockBreak as u16,
        credits: 0,
        flags: flags::SERVER_TO_REDIR,
        next_command: 0,
        message_id: MessageId(u64::MAX),
        async_id: 0,
        tree_id: TreeId(0),
        session_id: session,
        signature: [0; 16],
    }
}

/// The live connections of the client with `guid`, oldest first.
fn client_connections(server: &ServerState, guid: [u8; 16]) -> Vec<u64> {
    let mut ids: Vec<u64> = (server.connections.values().into_iter())
        .filter_map(|w| w.upgrade())
        .filter(|c| !c.is_closed() && c.negotiated.get().is_some_and(|n| n.client_guid == guid))
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// Sends one notification to the first reachable channel. An oplock break goes to the
/// open's own connection first. A lease break belongs to the client, not to one
/// connection: unencrypted, it goes to the client's oldest live connection (as Samba and
/// Windows do; smbtorture smb2.lease.v2_complex1 checks it), else to the session's
/// channels in the order they were bound. Then any other live channel of the owner's
/// session (multichannel).
async fn send_to(server: &Arc<ServerState>, owners: &[Owner], msg: Vec<u8>, tried: &mut Vec<u64>, lease: bool) -> Option<Delivery> {
    for owner in owners {
        let Some(session) = server.sessions.get(&owner.session) else { continue };
        let encrypt = owner.encrypt || session.security.get().is_some_and(|s| s.encrypt_data);
        // Channels in bind order; an oplock break moves the open's own connection first.
        let mut candidates = session.channel_ids();
        if !lease {
            candidates.retain(|c| *c != owner.conn);
            candidates.insert(0, owner.conn);
        } else if !candidates.contains(&owner.conn) {
            candidates.push(owner.conn);
        }
        if lease && !encrypt {
            let mut first = client_connections(server, session.client_guid);
            candidates.retain(|c| !first.contains(c));
            first.append(&mut candidates);
            candidates = first;
        }
        for cid in candidates {
            if tried.contains(&cid) {
                continue;
            }
            let Some(conn) = server.outbox(cid) else { continue };
            // An unencrypted lease break names no session: any live connection of the
            // client will do.
            let reachable = if lease && !encrypt { conn.is_alive() } else { conn.serves(session.id) };
            if !reachable {
                continue;
            }
            let mut buf = vec![0u8; 4 + if encrypt { transform::TRANSFORM_LEN } else { 0 }];
            let at = buf.len();
            buf.extend_from_slice(&msg);
            if encrypt {
                // An encrypted break names its session (the client needs it to decrypt).
                buf[at + smb_wire::header::offset::SESSION_ID..at + smb_wire::header::offset::SESSION_ID + 8]
                    .copy_from_slice(&session.id.0.to_le_bytes());
                if transform::encrypt(&session, &mut buf).is_err() {
                    continue;
                }
            }
            tried.push(cid);
            match conn.send_frame(buf).await {
                Ok(()) => return Some(Delivery::after_send(&conn)),
                Err(e) => tracing::debug!(conn = cid, error = %e, "break notification not sent"),
            }
        }
    }
    tracing::debug!("break notification found no other live channel");
    None
}

/// The level II / read-caching break of WRITE, truncation, set-size and byte-range locks:
/// one atomic load when nothing is cached; otherwise the notifications to send before the
/// answer (nobody waits for an acknowledgment).
pub fn break_level2(open: &crate::open::Open) -> Notices {
    let Some(node) = open.node() else { return Notices::default() };
    if !node.oplocks.any_shared() {
        return Notices::default();
    }
    let b = node.oplocks.start_breaks(Requester { open: open.id.volatile, lease: open.lease }, Event::Write, Instant::now());
    Notices(b.notices)
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::Duration;

    use super::*;

    /// An outbox whose TCP progress the test sets.
    #[derive(Debug, Default)]
    struct Fake {
        acked: AtomicU64,
        closed: AtomicBool,
    }

    impl Outbox for Fake {
        fn id(&self) -> u64 {
            7
        }
        fn peer(&self) -> std::net::SocketAddr {
            std::net::SocketAddr::from(([127, 0, 0, 1], 7))
        }
        fn send_frame(&self, _frame: Vec<u8>) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send + '_>> {
            Box::pin(async { Ok(()) })
        }
        fn serves(&self, _session: SessionId) -> bool {
            self.is_alive()
        }
        fn is_alive(&self) -> bool {
            !self.closed.load(Ordering::Relaxed)
        }
        fn sent_mark(&self) -> Option<(u64, Duration)> {
            Some((1000, Duration::from_millis(200)))
        }
        fn acked_bytes(&self) -> Option<u64> {
            Some(self.acked.load(Ordering::Relaxed))
        }
        fn abort(&self) {
            self.closed.store(true, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_delivery_is_pending_until_acked_and_lost_after_the_timeout() {
        let fake = Arc::new(Fake::default());
        let outbox: Arc<dyn Outbox> = fake.clone();
        let d = Delivery::after_send(&outbox);
        let now = Instant::now();
        assert!(matches!(d.check(now), DeliveryState::Pending));
        assert!(matches!(d.check(now + Duration::from_secs(60)), DeliveryState::Lost(o) if o.id() == 7));
        fake.acked.store(1000, Ordering::Relaxed);
        assert!(matches!(d.check(now + Duration::from_secs(60)), DeliveryState::Acked));
        fake.abort();
        assert!(matches!(d.check(now), DeliveryState::Gone));
        drop(outbox);
        drop(fake);
        assert!(matches!(d.check(now), DeliveryState::Gone), "the connection ended");
    }
}
