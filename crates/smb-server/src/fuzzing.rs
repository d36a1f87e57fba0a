//! Stateful fuzzing of the in-memory pipeline: a byte string is read as a sequence of client
//! operations (negotiate, session setup, binding, tree connect, create with oplocks, leases
//! and durable handles, I/O, byte-range locks, change notify, break acknowledgments, cancel,
//! close, logoff, disconnect, durable reconnect) spread over [`SLOTS`] connections, each a
//! [`Connection`] whose writer is memory and whose frames go through [`process_frame`] as
//! the socket reader hands them over (`reader.rs`). A lost connection is torn down as the
//! reader tears it down.
//!
//! Invariants, checked by [`run`]: nothing panics; every request is answered (finally, or
//! STATUS_PENDING for one that waits) within [`BOUND`] unless the server closed its
//! connection; once every connection is gone and the disconnected durable opens have been
//! ended (their timeout, brought forward), every request has finished and the server's
//! tables (sessions, connections, open files with their byte-range locks and oplocks, lease
//! keys, durable opens, watches, leased directories, replayable CreateGuids) are as empty as
//! at the start.
//!
//! Used by the cargo-fuzz target `smb_state` (feature `fuzzing`) and by a seeded test that
//! runs in `cargo test` (`BRAID_STATEFUL_SECS`). Not part of the server's API.

mod ops;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use smb_crypto::Signer;
use smb_wire::header::{flags, offset};
use smb_wire::msg::oplock::{LeaseBreak, OplockBreak, LEASE_BREAK_SIZE, OPLOCK_BREAK_SIZE};
use smb_wire::{Command, FileId, Header, MessageId, NtStatus, SessionId, TreeId, HEADER_LEN};
use tokio::task::JoinHandle;

use crate::config::{ServerConfig, ShareConfig, ShareStorage, UserConfig};
use crate::connection::{Connection, Writer};
use crate::server::ServerState;

/// Connections a sequence may use at once.
pub const SLOTS: usize = 3;
/// How long a request may go unanswered, and a teardown unfinished.
pub const BOUND: Duration = Duration::from_secs(5);
/// Operations read from one input at most (longer inputs are cut).
pub const MAX_OPS: usize = 96;

const USER: &str = "alice";
const PASSWORD: &str = "Fuzz-1";
/// One client: every connection presents this ClientGuid, so they may bind each other's
/// sessions.
const CLIENT_GUID: [u8; 16] = [7; 16];

/// The server's tables whose sizes must come back to the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Census {
    pub sessions: usize,
    pub connections: usize,
    pub files: usize,
    pub lease_keys: usize,
    pub stream_holds: usize,
    pub durable: usize,
    pub watches: usize,
    pub leased_dirs: usize,
    pub replay: usize,
}

impl Census {
    pub fn of(server: &ServerState) -> Census {
        let (files, lease_keys, stream_holds) = server.files.census();
        Census {
            sessions: server.sessions.len(),
            connections: server.connections.len(),
            files,
            lease_keys,
            stream_holds,
            durable: server.durable.len(),
            watches: server.notify.len(),
            leased_dirs: server.dir_leases.len(),
            replay: server.replay.len(),
        }
    }
}

/// What a sequence did, for the fuzz target's statistics and the seeded test's log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Outcome {
    pub ops: usize,
    pub requests: usize,
    pub answered_pending: usize,
    pub breaks: usize,
}

/// A server with one share, `data`, held in memory.
fn server() -> Arc<ServerState> {
    let config = ServerConfig {
        users: vec![UserConfig { name: USER.into(), nt_hash: smb_auth::nt_hash(PASSWORD) }],
        shares: vec![ShareConfig::new("data", ShareStorage::Memory { capacity: 4 << 20 })],
        ..ServerConfig::default()
    };
    Arc::new(ServerState::new(config).expect("server state"))
}

/// Runs the sequence `data` encodes on a fresh server, on a runtime of its own; Err names
/// the first invariant broken.
pub fn run(data: &[u8]) -> Result<Outcome, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(run_async(data))
}

async fn run_async(data: &[u8]) -> Result<Outcome, String> {
    let Some((&first, rest)) = data.split_first() else { return Ok(Outcome::default()) };
    let mut input = ops::Input(rest);
    // Half the inputs start from two sessions on three connections (the first bound to a
    // second channel), so that random bytes reach the opens rather than the logon.
    let prelude = (first & 1 == 0).then(ops::prelude).into_iter().flatten();
    let decoded = std::iter::from_fn(move || ops::Op::decode(&mut input)).take(MAX_OPS);
    run_ops(prelude.chain(decoded)).await
}

/// Applies `ops` to a fresh server, then ends every connection and checks the tables.
async fn run_ops(ops: impl Iterator<Item = ops::Op>) -> Result<Outcome, String> {
    let server = server();
    let start = Census::of(&server);
    let mut c = Client::new(server.clone());
    for op in ops {
        c.outcome.ops += 1;
        // Failed logons slow the next ones down (`ServerState::record_failure`); that
        // throttle is not what is fuzzed here.
        server.clear_failures(std::net::Ipv4Addr::LOCALHOST.into());
        c.apply(op.clone()).await.map_err(|e| format!("op {} ({op:?}): {e}", c.outcome.ops))?;
    }
    c.finish().await?;
    expect_census(&server, start).await?;
    Ok(c.outcome)
}

/// Waits (up to [`BOUND`]) for the tables to be back at `start`.
async fn expect_census(server: &ServerState, start: Census) -> Result<(), String> {
    let until = tokio::time::Instant::now() + BOUND;
    loop {
        let now = Census::of(server);
        if now == start {
            return Ok(());
        }
        if tokio::time::Instant::now() >= until {
            return Err(format!("state left after every connection closed: {now:?}, started with {start:?}"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A break notification a client received.
#[derive(Debug, Clone, Copy)]
enum Break {
    Oplock { file_id: FileId, level: u8 },
    Lease { key: [u8; 16], new_state: u32 },
}

/// Who sends a request (all zero: nobody, before a logon).
#[derive(Default, Clone)]
struct Who {
    session: u64,
    tree: u32,
    signer: Option<Arc<Signer>>,
}

/// One in-memory connection and what was sent on it.
struct Wire {
    conn: Arc<Connection>,
    next_mid: u64,
    /// Frames numbered by arrival, as the reader numbers them (`break_order.rs`).
    seq: u64,
    tasks: Vec<JoinHandle<()>>,
    negotiated: bool,
    /// Final answers by MessageId not yet looked at (status, message).
    answered: HashMap<u64, (NtStatus, Vec<u8>)>,
    /// Requests answered STATUS_PENDING and not yet finally: MessageId → AsyncId.
    pending: HashMap<u64, u64>,
}

/// An open a client holds.
#[derive(Debug, Clone)]
struct OpenRec {
    file_id: FileId,
    name: &'static str,
    durable: Option<[u8; 16]>,
    /// The lease context sent, for a reconnect to send again.
    lease_ctx: Option<Vec<u8>>,
}

struct Sess {
    id: u64,
    /// The session's signing key: signs the requests of a binding.
    signer: Arc<Signer>,
    /// Channel.SigningKey of each connection the session is bound to.
    channels: HashMap<usize, Arc<Signer>>,
    tree: u32,
    opens: Vec<OpenRec>,
    /// False after LOGOFF or the loss of its last channel (its durable opens may wait).
    alive: bool,
}

/// The client: its connections, sessions and the breaks it has been sent.
struct Client {
    server: Arc<ServerState>,
    wires: [Option<Wire>; SLOTS],
    sessions: Vec<Sess>,
    breaks: Vec<Break>,
    /// Connections being torn down (as their readers would, in the background).
    teardowns: Vec<JoinHandle<Result<(), String>>>,
    next_guid: u8,
    outcome: Outcome,
}

impl Client {
    fn new(server: Arc<ServerState>) -> Client {
        Client {
            server,
            wires: [None, None, None],
            sessions: Vec::new(),
            breaks: Vec::new(),
            teardowns: Vec::new(),
            next_guid: 0,
            outcome: Outcome::default(),
        }
    }

    /// A new in-memory connection in `slot`, registered as the reader registers one.
    fn connect(&mut self, slot: usize) {
        let id = self.server.next_conn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let peer = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 445));
        let conn = Arc::new(Connection::new(self.server.clone(), id, peer, Writer::Memory(Vec::new()), -1));
        self.server.connections.insert(id, Arc::downgrade(&conn));
        let w = Wire { conn, next_mid: 0, seq: 0, tasks: Vec::new(), negotiated: false, answered: HashMap::new(), pending: HashMap::new() };
        self.wires[slot] = Some(w);
    }

    /// Who sends a request: session id, tree id, and the key to sign with, if any.
    fn who(&self, slot: usize, sess: usize) -> Who {
        match self.sessions.get(sess) {
            Some(s) => Who { session: s.id, tree: s.tree, signer: s.channels.get(&slot).cloned() },
            None => Who::default(),
        }
    }

    /// A request message on `slot` from `who`; `mid` None takes the next MessageId.
    fn message(&mut self, slot: usize, who: &Who, cmd: Command, mid: Option<u64>, body: &[u8]) -> Option<(u64, Vec<u8>)> {
        let w = self.wires[slot].as_mut()?;
        let mid = mid.unwrap_or_else(|| {
            w.next_mid += 1;
            w.next_mid - 1
        });
        let h = Header {
            credit_charge: 1,
            status: 0,
            command: cmd as u16,
            credits: 32,
            flags: 0,
            next_command: 0,
            message_id: MessageId(mid),
            async_id: 0,
            tree_id: TreeId(who.tree),
            session_id: SessionId(who.session),
            signature: [0; 16],
        };
        let mut m = Vec::with_capacity(HEADER_LEN + body.len());
        h.encode(&mut m);
        m.extend_from_slice(body);
        if let Some(signer) = &who.signer {
            sign(&mut m, signer);
        }
        Some((mid, m))
    }

    /// Sends `frame` on `slot` as the reader hands one over, and waits for the answer to
    /// `mid`: Some((status, message)) when answered (STATUS_PENDING, without a message,
    /// for a request that waits), None when none is due (a CANCEL, a connection the server
    /// closed). Err: left unanswered.
    async fn exchange(&mut self, slot: usize, mid: u64, frame: Vec<u8>) -> Result<Option<(NtStatus, Vec<u8>)>, String> {
        let Some(w) = self.wires[slot].as_mut() else { return Ok(None) };
        self.outcome.requests += 1;
        w.seq += 1;
        let seq = w.seq;
        if crate::break_order::may_break(&frame) {
            w.conn.break_order.hold(seq);
        }
        let cancel = frame.get(offset::COMMAND) == Some(&(Command::Cancel as u8));
        let conn = w.conn.clone();
        let mut task = tokio::spawn(async move { crate::pipeline::process_frame(&conn, frame, None, seq).await });
        let until = tokio::time::Instant::now() + BOUND;
        loop {
            let done = tokio::time::timeout(Duration::from_millis(1), &mut task).await;
            if let Ok(Err(e)) = &done {
                return Err(format!("request task failed: {e}"));
            }
            self.collect().await;
            let w = self.wires[slot].as_mut().expect("wire");
            let answer = w.answered.remove(&mid).or_else(|| w.pending.contains_key(&mid).then(|| (NtStatus::PENDING, Vec::new())));
            if let Some(a) = answer {
                if done.is_err() {
                    w.tasks.push(task);
                    self.outcome.answered_pending += 1;
                }
                return Ok(Some(a));
            }
            if done.is_ok() && (cancel || w.conn.is_closed()) {
                return Ok(None);
            }
            if done.is_ok() {
                return Err(format!("request {mid} finished without an answer"));
            }
            if tokio::time::Instant::now() >= until {
                return Err(format!("request {mid} unanswered after {BOUND:?}"));
            }
        }
    }

    /// Builds, sends and waits for one request; see [`Client::exchange`].
    async fn call(&mut self, slot: usize, who: &Who, cmd: Command, body: &[u8]) -> Result<Option<(NtStatus, Vec<u8>)>, String> {
        let Some((mid, m)) = self.message(slot, who, cmd, None, body) else { return Ok(None) };
        self.exchange(slot, mid, m).await
    }

    /// Reads what every connection has sent: answers, interim answers, break notifications.
    async fn collect(&mut self) {
        for w in self.wires.iter_mut().flatten() {
            let sent = w.conn.take_sent().await;
            for m in messages(&sent) {
                let Ok(h) = Header::decode(&m) else { continue };
                if h.message_id.0 == u64::MAX {
                    if let Some(b) = break_of(&m) {
                        self.outcome.breaks += 1;
                        self.breaks.push(b);
                    }
                } else if h.status == NtStatus::PENDING.0 && h.flags & flags::ASYNC_COMMAND != 0 {
                    w.pending.insert(h.message_id.0, h.async_id);
                } else {
                    w.pending.remove(&h.message_id.0);
                    w.answered.insert(h.message_id.0, (NtStatus(h.status), m));
                }
            }
        }
        // Keep the list of breaks short: the newest are the ones worth acknowledging.
        if self.breaks.len() > 16 {
            self.breaks.drain(..self.breaks.len() - 16);
        }
    }
}

/// The messages of the frames in `sent` (transport headers first; compounds split).
fn messages(sent: &[u8]) -> Vec<Vec<u8>> {
    let mut msgs = Vec::new();
    let mut pos = 0;
    while pos + 4 <= sent.len() {
        let len = u32::from_be_bytes([0, sent[pos + 1], sent[pos + 2], sent[pos + 3]]) as usize;
        let Some(f) = sent.get(pos + 4..pos + 4 + len) else { break };
        pos += 4 + len;
        let mut at = 0;
        while at + HEADER_LEN <= f.len() {
            let next = u32::from_le_bytes(f[at + offset::NEXT_COMMAND..at + offset::NEXT_COMMAND + 4].try_into().expect("4")) as usize;
            let end = if next == 0 { f.len() } else { (at + next).min(f.len()) };
            msgs.push(f[at..end].to_vec());
            if next == 0 {
                break;
            }
            at = end;
        }
    }
    msgs
}

/// The break a notification (MessageId all ones, OPLOCK_BREAK) announces.
fn break_of(m: &[u8]) -> Option<Break> {
    let size = u16::from_le_bytes([*m.get(HEADER_LEN)?, *m.get(HEADER_LEN + 1)?]);
    match size {
        OPLOCK_BREAK_SIZE => OplockBreak::decode(m).ok().map(|b| Break::Oplock { file_id: b.file_id, level: b.oplock_level }),
        LEASE_BREAK_SIZE => LeaseBreak::decode(m).ok().map(|b| Break::Lease { key: b.lease_key, new_state: b.new_state }),
        _ => None,
    }
}

/// Sets SMB2_FLAGS_SIGNED and signs `m`.
fn sign(m: &mut [u8], signer: &Signer) {
    let old = u32::from_le_bytes(m[offset::FLAGS..offset::FLAGS + 4].try_into().expect("4"));
    m[offset::FLAGS..offset::FLAGS + 4].copy_from_slice(&(old | flags::SIGNED).to_le_bytes());
    signer.sign(m);
}

#[cfg(test)]
mod tests {
    use rand::{Rng, RngCore, SeedableRng};

    /// Random sequences for `BRAID_STATEFUL_SECS` seconds (default 3); each input comes from
    /// a seed (`BRAID_STATEFUL_SEED` fixes the first), printed with the input on failure.
    #[test]
    fn random_sequences_keep_the_invariants() {
        let secs: u64 = std::env::var("BRAID_STATEFUL_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
        let first: u64 = std::env::var("BRAID_STATEFUL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let (mut runs, mut total) = (0u64, super::Outcome::default());
        while runs == 0 || std::time::Instant::now() < until {
            let seed = first.wrapping_add(runs);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut data = vec![0u8; rng.gen_range(16..600)];
            rng.fill_bytes(&mut data);
            match super::run(&data) {
                Ok(o) => {
                    total.ops += o.ops;
                    total.requests += o.requests;
                    total.answered_pending += o.answered_pending;
                    total.breaks += o.breaks;
                }
                Err(e) => panic!("seed {seed} (BRAID_STATEFUL_SEED={seed} reproduces it): {e}\ninput: {data:02x?}"),
            }
            runs += 1;
        }
        eprintln!("stateful: {runs} sequences from seed {first}: {total:?}");
    }
}
