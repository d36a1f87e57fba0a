//! The operations of a fuzzed sequence: how bytes decode into them, and what the client
//! sends for each.

use std::sync::Arc;
use std::time::Duration;

use smb_auth::NtlmClient;
use smb_crypto::{SessionKeys, Signer, SigningAlgorithm};
use smb_wire::header::{flags, offset};
use smb_wire::msg::create::{CreateContext, CreateRequest};
use smb_wire::msg::durable::{DurableReconnectV2, DurableRequestV2, DH2C, DH2Q};
use smb_wire::msg::lock::{LockElement, LockRequest};
use smb_wire::msg::negotiate::{cap, NegotiateRequest};
use smb_wire::msg::notify::NotifyRequest;
use smb_wire::msg::oplock::{LeaseAck, LeaseContext, OplockBreak};
use smb_wire::msg::read::ReadRequest;
use smb_wire::msg::session_setup::{SessionSetupRequest, SessionSetupResponse, FLAG_BINDING};
use smb_wire::msg::tree::TreeConnectRequest;
use smb_wire::msg::write::WriteRequest;
use smb_wire::{Command, FileId, NtStatus, HEADER_LEN};

use super::{Break, Client, OpenRec, Sess, Who, BOUND, CLIENT_GUID, PASSWORD, SLOTS, USER};
use crate::sync::lock;

/// The bytes left to decode; reads past the end give zeros.
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    fn next(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn b(&mut self) -> u8 {
        self.next().unwrap_or(0)
    }

    fn slot(&mut self) -> usize {
        usize::from(self.b()) % SLOTS
    }
}

/// Names the client opens: files, a directory and files in it.
const NAMES: [&str; 5] = ["a.txt", "b.txt", "d", "d\\x.txt", "d\\y.txt"];

/// The parameters of a CREATE, chosen from small sets so that opens meet each other.
#[derive(Debug, Clone, Copy)]
pub struct CreateArgs {
    name: u8,
    disposition: u8,
    access: u8,
    share: u8,
    /// Oplock level index; the last asks for a lease.
    oplock: u8,
    lease_state: u8,
    lease_key: u8,
    /// Bit 0: v2 lease (with the parent's key when bit 1); bit 2: durable v2; bit 3:
    /// delete on close; bit 4: directory.
    bits: u8,
}

/// One step of a sequence. `slot` is a connection, `sess` and `open` index the client's
/// sessions and a session's opens (modulo their number).
#[derive(Debug, Clone)]
pub enum Op {
    /// A new connection in the slot (the old one, if any, is lost) and NEGOTIATE.
    Connect {
        slot: usize,
        dialect: u8,
    },
    /// An NTLM logon on the slot; with `previous`, naming that session as the one to end
    /// and reconnecting its durable opens; TREE_CONNECT after it when `tree`.
    Logon {
        slot: usize,
        previous: Option<u8>,
        tree: bool,
    },
    /// Binds the session to the slot's connection (multichannel).
    Bind {
        slot: usize,
        sess: u8,
    },
    TreeConnect {
        slot: usize,
        sess: u8,
    },
    TreeDisconnect {
        slot: usize,
        sess: u8,
    },
    Create {
        slot: usize,
        sess: u8,
        args: CreateArgs,
    },
    Write {
        slot: usize,
        sess: u8,
        open: u8,
        offset: u8,
        len: u8,
    },
    Read {
        slot: usize,
        sess: u8,
        open: u8,
        offset: u8,
        len: u8,
    },
    /// LOCK with one element: `flags` bits 0-1 shared/exclusive/unlock, bit 2 fail
    /// immediately (else a conflicting lock waits).
    Lock {
        slot: usize,
        sess: u8,
        open: u8,
        offset: u8,
        len: u8,
        flags: u8,
    },
    Notify {
        slot: usize,
        sess: u8,
        open: u8,
        filter: u8,
        subtree: bool,
    },
    /// Acknowledges one of the breaks received, to `level` (an oplock level or lease state).
    BreakAck {
        slot: usize,
        sess: u8,
        which: u8,
        level: u8,
    },
    /// CANCEL of a request answered STATUS_PENDING (by AsyncId or MessageId), or of the
    /// next MessageId (a CANCEL that overtakes its request).
    Cancel {
        slot: usize,
        which: u8,
        by_async: bool,
    },
    Close {
        slot: usize,
        sess: u8,
        open: u8,
    },
    Logoff {
        slot: usize,
        sess: u8,
    },
    /// The connection is lost (the reader's teardown).
    Disconnect {
        slot: usize,
    },
    /// A request of any command with a body of fuzzed bytes, signed.
    Garbage {
        slot: usize,
        sess: u8,
        cmd: u8,
        body: Vec<u8>,
    },
    /// Lets the server's tasks run for a while.
    Settle {
        ms: u8,
    },
}

impl Op {
    /// The next operation, or None at the end of the input.
    pub fn decode(i: &mut Input<'_>) -> Option<Op> {
        let kind = i.next()?;
        // Weighted: what changes open state comes often, what ends it (new connections,
        // logoffs, losses) rarely, so that sequences build up state before tearing it down.
        Some(match kind % 32 {
            0 => Op::Connect { slot: i.slot(), dialect: i.b() },
            1 => Op::Logon { slot: i.slot(), previous: Some(i.b()).filter(|b| b & 1 == 1).map(|b| b >> 1), tree: i.b() & 1 == 0 },
            2 => Op::Bind { slot: i.slot(), sess: i.b() },
            3 => Op::TreeConnect { slot: i.slot(), sess: i.b() },
            4 => Op::TreeDisconnect { slot: i.slot(), sess: i.b() },
            5..=10 => Op::Create { slot: i.slot(), sess: i.b(), args: create_args(i) },
            11 | 12 => Op::Write { slot: i.slot(), sess: i.b(), open: i.b(), offset: i.b(), len: i.b() },
            13 => Op::Read { slot: i.slot(), sess: i.b(), open: i.b(), offset: i.b(), len: i.b() },
            14..=16 => Op::Lock { slot: i.slot(), sess: i.b(), open: i.b(), offset: i.b() % 16, len: i.b() % 16, flags: i.b() },
            17 | 18 => Op::Notify { slot: i.slot(), sess: i.b(), open: i.b(), filter: i.b(), subtree: i.b() & 1 == 1 },
            19..=21 => Op::BreakAck { slot: i.slot(), sess: i.b(), which: i.b(), level: i.b() },
            22 | 23 => Op::Cancel { slot: i.slot(), which: i.b(), by_async: i.b() & 1 == 1 },
            24 | 25 => Op::Close { slot: i.slot(), sess: i.b(), open: i.b() },
            26 => Op::Logoff { slot: i.slot(), sess: i.b() },
            27 => Op::Disconnect { slot: i.slot() },
            28 | 29 => {
                let (slot, sess, cmd) = (i.slot(), i.b(), i.b());
                let n = usize::from(i.b() % 64);
                Op::Garbage { slot, sess, cmd, body: (0..n).map(|_| i.b()).collect() }
            }
            _ => Op::Settle { ms: i.b() % 8 },
        })
    }
}

/// Two sessions on three connections: session 0 on connections 0 and 1 (bound), session 1
/// on connection 2, each with its tree.
pub fn prelude() -> [Op; 6] {
    [
        Op::Connect { slot: 0, dialect: 0 },
        Op::Logon { slot: 0, previous: None, tree: true },
        Op::Connect { slot: 1, dialect: 0 },
        Op::Bind { slot: 1, sess: 0 },
        Op::Connect { slot: 2, dialect: 0 },
        Op::Logon { slot: 2, previous: None, tree: true },
    ]
}

fn create_args(i: &mut Input<'_>) -> CreateArgs {
    CreateArgs { name: i.b(), disposition: i.b(), access: i.b(), share: i.b(), oplock: i.b(), lease_state: i.b(), lease_key: i.b(), bits: i.b() }
}

/// A request body encoded after room for its header (bodies count offsets from it).
fn enc(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut v = vec![0; HEADER_LEN];
    f(&mut v);
    v.split_off(HEADER_LEN)
}

/// Index `i` into a collection of `n` (None when empty).
fn pick(i: u8, n: usize) -> Option<usize> {
    (n > 0).then(|| usize::from(i) % n)
}

impl Client {
    pub(super) async fn apply(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Connect { slot, dialect } => self.negotiate(slot, dialect).await,
            Op::Logon { slot, previous, tree } => self.logon(slot, previous, tree).await,
            Op::Bind { slot, sess } => self.bind(slot, sess).await,
            Op::TreeConnect { slot, sess } => self.tree_connect(slot, sess).await,
            Op::TreeDisconnect { slot, sess } => self.tree_disconnect(slot, sess).await,
            Op::Create { slot, sess, args } => self.create(slot, sess, args).await,
            Op::Write { slot, sess, open, offset, len } => self.io(slot, (sess, open), offset, len, true).await,
            Op::Read { slot, sess, open, offset, len } => self.io(slot, (sess, open), offset, len, false).await,
            Op::Lock { slot, sess, open, offset, len, flags } => self.lock(slot, sess, open, (offset, len), flags).await,
            Op::Notify { slot, sess, open, filter, subtree } => self.notify(slot, sess, open, filter, subtree).await,
            Op::BreakAck { slot, sess, which, level } => self.break_ack(slot, sess, which, level).await,
            Op::Cancel { slot, which, by_async } => self.cancel(slot, which, by_async).await,
            Op::Close { slot, sess, open } => self.close(slot, sess, open).await,
            Op::Logoff { slot, sess } => self.logoff(slot, sess).await,
            Op::Disconnect { slot } => self.disconnect(slot).await,
            Op::Garbage { slot, sess, cmd, body } => self.garbage(slot, sess, cmd, &body).await,
            Op::Settle { ms } => {
                tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
                self.collect().await;
                Ok(())
            }
        }
    }

    /// A fresh connection in `slot` (the one there is lost first) and its NEGOTIATE.
    async fn negotiate(&mut self, slot: usize, dialect: u8) -> Result<(), String> {
        self.disconnect(slot).await?;
        self.connect(slot);
        let dialects = [0x0302, 0x0300, 0x0302, 0x0302];
        let neg = NegotiateRequest {
            security_mode: 1,
            capabilities: cap::LEASING | cap::MULTI_CHANNEL | cap::DIRECTORY_LEASING | cap::LARGE_MTU,
            client_guid: CLIENT_GUID,
            dialects: vec![dialects[usize::from(dialect) % dialects.len()]],
            contexts: Vec::new(),
        };
        let body = enc(|b| neg.encode(b));
        let r = self.call(slot, &Who::default(), Command::Negotiate, &body).await?;
        if let (Some((NtStatus::SUCCESS, _)), Some(w)) = (r, self.wires[slot].as_mut()) {
            w.negotiated = true;
        }
        Ok(())
    }

    /// Two SESSION_SETUP legs of NTLM from `who` (a binding when `binding`); the session id
    /// and the key of a completed logon.
    async fn authenticate(&mut self, slot: usize, who: &Who, binding: bool, previous: u64) -> Result<Option<(u64, [u8; 16])>, String> {
        let mut ntlm = NtlmClient::new(USER, "", PASSWORD);
        let first = ntlm.initial_token();
        let setup = |token: &[u8]| {
            let req = SessionSetupRequest {
                flags: if binding { FLAG_BINDING } else { 0 },
                security_mode: 1,
                capabilities: 0,
                previous_session_id: previous,
                security_buffer: token,
            };
            enc(|b| req.encode(b))
        };
        let Some((NtStatus::MORE_PROCESSING_REQUIRED, r)) = self.call(slot, who, Command::SessionSetup, &setup(&first)).await? else {
            return Ok(None);
        };
        let id = u64::from_le_bytes(r[offset::SESSION_ID..offset::SESSION_ID + 8].try_into().expect("8"));
        let Ok(challenge) = SessionSetupResponse::decode(&r) else { return Ok(None) };
        let Ok(Some(auth)) = ntlm.step(challenge.security_buffer) else { return Ok(None) };
        let who = Who { session: id, ..who.clone() };
        let Some((NtStatus::SUCCESS, _)) = self.call(slot, &who, Command::SessionSetup, &setup(&auth)).await? else { return Ok(None) };
        Ok(ntlm.session_key().map(|k| (id, k)))
    }

    /// A logon on `slot`; naming session `previous` ends it and reconnects its durable
    /// opens on the new one.
    async fn logon(&mut self, slot: usize, previous: Option<u8>, tree: bool) -> Result<(), String> {
        let old = previous.and_then(|p| pick(p, self.sessions.len()));
        let prev_id = old.map_or(0, |i| self.sessions[i].id);
        let Some((id, key)) = self.authenticate(slot, &Who::default(), false, prev_id).await? else { return Ok(()) };
        let dialect = self.wires[slot].as_ref().map_or(0x0302, |w| w.conn.dialect());
        let keys = SessionKeys::derive(dialect, &key, None, None);
        let signer = Arc::new(Signer::new(SigningAlgorithm::AesCmac, &keys.signing));
        let channels = [(slot, signer.clone())].into_iter().collect();
        self.sessions.push(Sess { id, signer, channels, tree: 0, opens: Vec::new(), alive: true });
        let new = self.sessions.len() - 1;
        if let Some(o) = old {
            // The old session ended on the server: its non-durable opens are closed.
            self.sessions[o].alive = false;
            self.sessions[o].opens.retain(|r| r.durable.is_some());
        }
        if tree || old.is_some() {
            self.tree_connect(slot, new as u8).await?;
        }
        if let Some(o) = old {
            self.reconnect_durable(slot, o, new).await?;
        }
        Ok(())
    }

    /// DH2C for each durable open of session `old`, from session `new`.
    async fn reconnect_durable(&mut self, slot: usize, old: usize, new: usize) -> Result<(), String> {
        let opens = std::mem::take(&mut self.sessions[old].opens);
        for o in opens {
            let Some(guid) = o.durable else { continue };
            let dh2c = DurableReconnectV2 { file_id: o.file_id, create_guid: guid, flags: 0 }.encode();
            let mut contexts = vec![CreateContext { name: DH2C, data: &dh2c }];
            if let Some(l) = &o.lease_ctx {
                contexts.push(CreateContext { name: b"RqLs", data: l });
            }
            let req = CreateRequest { contexts, ..create_request(o.name, 1, 0x0012_019F, 7, 0) };
            let body = enc(|b| req.encode(b));
            let who = self.who(slot, new);
            if let Some((NtStatus::SUCCESS, r)) = self.call(slot, &who, Command::Create, &body).await? {
                self.sessions[new].opens.push(OpenRec { file_id: created_id(&r), ..o });
            }
        }
        Ok(())
    }

    /// Binds session `sess` to the connection in `slot`.
    async fn bind(&mut self, slot: usize, sess: u8) -> Result<(), String> {
        let Some(i) = pick(sess, self.sessions.len()) else { return Ok(()) };
        let s = &self.sessions[i];
        let who = Who { session: s.id, tree: 0, signer: Some(s.signer.clone()) };
        let Some((_, key)) = self.authenticate(slot, &who, true, 0).await? else { return Ok(()) };
        let dialect = self.wires[slot].as_ref().map_or(0x0302, |w| w.conn.dialect());
        let keys = SessionKeys::derive(dialect, &key, None, None);
        self.sessions[i].channels.insert(slot, Arc::new(Signer::new(SigningAlgorithm::AesCmac, &keys.signing)));
        Ok(())
    }

    async fn tree_connect(&mut self, slot: usize, sess: u8) -> Result<(), String> {
        let Some(i) = pick(sess, self.sessions.len()) else { return Ok(()) };
        let body = enc(|b| TreeConnectRequest { flags: 0, path: "\\\\BRAID\\data".into() }.encode(b));
        let who = self.who(slot, i);
        if let Some((NtStatus::SUCCESS, r)) = self.call(slot, &who, Command::TreeConnect, &body).await? {
            self.sessions[i].tree = u32::from_le_bytes(r[offset::TREE_ID..offset::TREE_ID + 4].try_into().expect("4"));
        }
        Ok(())
    }

    async fn tree_disconnect(&mut self, slot: usize, sess: u8) -> Result<(), String> {
        let Some(i) = pick(sess, self.sessions.len()) else { return Ok(()) };
        let who = self.who(slot, i);
        if let Some((NtStatus::SUCCESS, _)) = self.call(slot, &who, Command::TreeDisconnect, &[4, 0, 0, 0]).await? {
            // The tree's opens are closed; durable ones are not kept (MS-SMB2 3.3.5.8).
            self.sessions[i].opens.clear();
        }
        Ok(())
    }

    async fn create(&mut self, slot: usize, sess: u8, a: CreateArgs) -> Result<(), String> {
        let Some(i) = pick(sess, self.sessions.len()) else { return Ok(()) };
        let name = NAMES[usize::from(a.name) % NAMES.len()];
        const ACCESS: [u32; 5] = [0x0012_0089, 0x0012_019F, 0x001F_01FF, 0x0001_0080, 0x0000_0080];
        const OPLOCKS: [u8; 5] = [0, 0x01, 0x08, 0x09, 0xFF];
        let dir = a.bits & 0x10 != 0;
        let mut options = if dir { 0x1 } else { 0x40 };
        if a.bits & 0x08 != 0 {
            options |= 0x1000;
        }
        let oplock = OPLOCKS[usize::from(a.oplock) % OPLOCKS.len()];
        let disposition = u32::from(a.disposition % 6);
        let req = create_request(name, disposition, ACCESS[usize::from(a.access) % ACCESS.len()], u32::from(a.share % 8), options);
        let key = [a.lease_key % 4 + 1; 16];
        let lease_ctx = (oplock == 0xFF).then(|| {
            let v2 = (a.bits & 1 != 0).then_some((if a.bits & 2 != 0 { [0xD; 16] } else { [0; 16] }, 0u16));
            LeaseContext { key, state: u32::from(a.lease_state & 7), flags: if a.bits & 2 != 0 { 4 } else { 0 }, v2 }.encode()
        });
        let guid = (a.bits & 4 != 0).then(|| {
            self.next_guid = self.next_guid.wrapping_add(1);
            [self.next_guid; 16]
        });
        let dh2q = guid.map(|g| DurableRequestV2 { timeout: 0, flags: 0, create_guid: g }.encode());
        let mut contexts = Vec::new();
        if let Some(l) = &lease_ctx {
            contexts.push(CreateContext { name: b"RqLs", data: l });
        }
        if let Some(d) = &dh2q {
            contexts.push(CreateContext { name: DH2Q, data: d });
        }
        let body = enc(|b| CreateRequest { oplock_level: oplock, contexts, ..req }.encode(b));
        let who = self.who(slot, i);
        if let Some((NtStatus::SUCCESS, r)) = self.call(slot, &who, Command::Create, &body).await? {
            let rec = OpenRec { file_id: created_id(&r), name, durable: guid, lease_ctx };
            self.sessions[i].opens.push(rec);
        }
        Ok(())
    }

    /// The open `open` of session `sess`: who sends for it, and its FileId (a made-up one
    /// when the session holds none, which the server must refuse).
    fn open_of(&self, slot: usize, sess: u8, open: u8) -> Option<(usize, Who, FileId, Option<usize>)> {
        let i = pick(sess, self.sessions.len())?;
        let opens = &self.sessions[i].opens;
        let o = pick(open, opens.len());
        let fid = o.map_or(FileId { persistent: u64::from(open), volatile: u64::from(open) }, |o| opens[o].file_id);
        Some((i, self.who(slot, i), fid, o))
    }

    /// WRITE or READ of `len` bytes at `offset`.
    async fn io(&mut self, slot: usize, (sess, open): (u8, u8), offset: u8, len: u8, write: bool) -> Result<(), String> {
        let Some((_, who, file_id, _)) = self.open_of(slot, sess, open) else { return Ok(()) };
        if write {
            let data = vec![offset; usize::from(len)];
            let body = enc(|b| WriteRequest { offset: u64::from(offset), file_id, channel: 0, flags: 0, data: &data }.encode(b));
            self.call(slot, &who, Command::Write, &body).await?;
        } else {
            let body =
                enc(|b| ReadRequest { flags: 0, length: u32::from(len), offset: u64::from(offset), file_id, minimum_count: 0, channel: 0 }.encode(b));
            self.call(slot, &who, Command::Read, &body).await?;
        }
        Ok(())
    }

    async fn lock(&mut self, slot: usize, sess: u8, open: u8, (offset, len): (u8, u8), bits: u8) -> Result<(), String> {
        use smb_wire::msg::lock::flags as lf;
        let Some((_, who, file_id, _)) = self.open_of(slot, sess, open) else { return Ok(()) };
        let mut f = [lf::SHARED_LOCK, lf::EXCLUSIVE_LOCK, lf::UNLOCK, lf::EXCLUSIVE_LOCK][usize::from(bits & 3)];
        if bits & 4 != 0 && f != lf::UNLOCK {
            f |= lf::FAIL_IMMEDIATELY;
        }
        let el = LockElement { offset: u64::from(offset), length: u64::from(len), flags: f };
        let body = enc(|b| LockRequest { lock_sequence: 0, file_id, locks: vec![el] }.encode(b));
        self.call(slot, &who, Command::Lock, &body).await?;
        Ok(())
    }

    async fn notify(&mut self, slot: usize, sess: u8, open: u8, filter: u8, subtree: bool) -> Result<(), String> {
        let Some((_, who, file_id, _)) = self.open_of(slot, sess, open) else { return Ok(()) };
        let n = NotifyRequest { flags: u16::from(subtree), output_buffer_length: 512, file_id, completion_filter: u32::from(filter) | 1 };
        let body = enc(|b| n.encode(b));
        self.call(slot, &who, Command::ChangeNotify, &body).await?;
        Ok(())
    }

    async fn break_ack(&mut self, slot: usize, sess: u8, which: u8, level: u8) -> Result<(), String> {
        let Some(b) = pick(which, self.breaks.len()).map(|i| self.breaks.remove(i)) else { return Ok(()) };
        let Some(i) = pick(sess, self.sessions.len()) else { return Ok(()) };
        let who = self.who(slot, i);
        let body = enc(|out| match b {
            // `level` above 2 acknowledges to the level the break asked for.
            Break::Oplock { file_id, level: to } => OplockBreak { oplock_level: if level < 3 { level } else { to }, file_id }.encode(out),
            Break::Lease { key, new_state } => {
                let state = if level < 8 { u32::from(level) } else { new_state };
                LeaseAck { flags: 0, lease_key: key, lease_state: state, lease_duration: 0 }.encode(out);
            }
        });
        self.call(slot, &who, Command::OplockBreak, &body).await?;
        Ok(())
    }

    /// CANCEL of a pending request of `slot` (any session: CANCEL is not checked against
    /// one), or of the next MessageId.
    async fn cancel(&mut self, slot: usize, which: u8, by_async: bool) -> Result<(), String> {
        let Some(w) = self.wires[slot].as_ref() else { return Ok(()) };
        let mut pending: Vec<(u64, u64)> = w.pending.iter().map(|(m, a)| (*m, *a)).collect();
        pending.sort_unstable();
        let (mid, async_id) = pick(which, pending.len()).map_or((w.next_mid, 0), |i| pending[i]);
        let who = pick(which, self.sessions.len()).map(|s| self.who(slot, s)).unwrap_or_default();
        let Some((_, mut m)) = self.message(slot, &who, Command::Cancel, Some(mid), &[4, 0, 0, 0]) else { return Ok(()) };
        if by_async && async_id != 0 {
            // The async form: AsyncId in place of the TreeId, re-signed.
            let f = u32::from_le_bytes(m[offset::FLAGS..offset::FLAGS + 4].try_into().expect("4")) | flags::ASYNC_COMMAND;
            m[offset::FLAGS..offset::FLAGS + 4].copy_from_slice(&f.to_le_bytes());
            m[32..40].copy_from_slice(&async_id.to_le_bytes());
            if let Some(s) = &who.signer {
                m[offset::SIGNATURE..offset::SIGNATURE + 16].fill(0);
                s.sign(&mut m);
            }
        }
        self.exchange(slot, mid, m).await?;
        Ok(())
    }

    async fn close(&mut self, slot: usize, sess: u8, open: u8) -> Result<(), String> {
        let Some((i, who, file_id, o)) = self.open_of(slot, sess, open) else { return Ok(()) };
        let body = enc(|b| smb_wire::msg::close::CloseRequest { flags: 0, file_id }.encode(b));
        if let (Some((NtStatus::SUCCESS, _)), Some(o)) = (self.call(slot, &who, Command::Close, &body).await?, o) {
            self.sessions[i].opens.remove(o);
        }
        Ok(())
    }

    async fn logoff(&mut self, slot: usize, sess: u8) -> Result<(), String> {
        let Some(i) = pick(sess, self.sessions.len()) else { return Ok(()) };
        let who = self.who(slot, i);
        if let Some((NtStatus::SUCCESS, _)) = self.call(slot, &who, Command::Logoff, &[4, 0, 0, 0]).await? {
            let s = &mut self.sessions[i];
            s.alive = false;
            s.channels.clear();
            s.opens.retain(|o| o.durable.is_some());
        }
        Ok(())
    }

    async fn garbage(&mut self, slot: usize, sess: u8, cmd: u8, body: &[u8]) -> Result<(), String> {
        let Some(cmd) = Command::from_u16(u16::from(cmd % 19)) else { return Ok(()) };
        if cmd == Command::Cancel {
            return Ok(());
        }
        let who = pick(sess, self.sessions.len()).map(|s| self.who(slot, s)).unwrap_or_default();
        self.call(slot, &who, cmd, body).await?;
        Ok(())
    }

    /// The connection in `slot` is lost: its teardown runs in the background, as its
    /// reader's would, and the sessions it was the only channel of end.
    pub(super) async fn disconnect(&mut self, slot: usize) -> Result<(), String> {
        let Some(w) = self.wires[slot].take() else { return Ok(()) };
        for s in &mut self.sessions {
            if s.channels.remove(&slot).is_some() && s.channels.is_empty() {
                s.alive = false;
                s.opens.retain(|o| o.durable.is_some());
            }
        }
        let mut t = tokio::spawn(teardown(w));
        // Usually quick; one that waits (a request outliving its channel) goes on alone.
        if let Ok(r) = tokio::time::timeout(Duration::from_millis(50), &mut t).await {
            return r.map_err(|e| format!("teardown failed: {e}"))?;
        }
        self.teardowns.push(t);
        Ok(())
    }

    /// Every connection lost, the disconnected durable opens ended (their timeout brought
    /// forward), and every request and teardown finished within [`BOUND`].
    pub(super) async fn finish(&mut self) -> Result<(), String> {
        for slot in 0..SLOTS {
            self.disconnect(slot).await?;
        }
        for t in std::mem::take(&mut self.teardowns) {
            match tokio::time::timeout(BOUND, t).await {
                Ok(r) => r.map_err(|e| format!("teardown failed: {e}"))??,
                Err(_) => return Err(format!("a connection's teardown did not finish within {BOUND:?}")),
            }
        }
        let server = self.server.clone();
        for id in server.durable.disconnected_ids() {
            if let Some(open) = server.durable.take_disconnected(id) {
                crate::open::close_open(&server, &open).await;
            }
        }
        Ok(())
    }
}

/// What the reader does when its connection ends (`reader::serve`): closes it, wakes the
/// requests waiting for an event, waits for every request to finish, then leaves the
/// sessions it served (`channel::connection_lost`). Err when a request is still registered
/// as pending once all have finished.
async fn teardown(w: super::Wire) -> Result<(), String> {
    let conn = w.conn;
    conn.close();
    for p in lock(&conn.pending).values() {
        p.cancel.notify_one();
    }
    for t in w.tasks {
        t.await.map_err(|e| format!("request task failed: {e}"))?;
    }
    if !lock(&conn.pending).is_empty() {
        return Err(format!("{} requests still pending after they all finished", lock(&conn.pending).len()));
    }
    crate::channel::connection_lost(&conn).await;
    conn.server.connections.remove(&conn.id);
    Ok(())
}

fn create_request(name: &'static str, disposition: u32, access: u32, share: u32, options: u32) -> CreateRequest<'static> {
    CreateRequest {
        security_flags: 0,
        oplock_level: 0,
        impersonation_level: 2,
        desired_access: access,
        file_attributes: 0,
        share_access: share,
        create_disposition: disposition,
        create_options: options,
        name: name.into(),
        contexts: Vec::new(),
    }
}

/// The FileId of a CREATE response (body offset 64).
fn created_id(msg: &[u8]) -> FileId {
    msg.get(HEADER_LEN + 64..HEADER_LEN + 80).and_then(|b| b.try_into().ok()).map_or(FileId { persistent: 0, volatile: 0 }, FileId::from_bytes)
}

#[cfg(test)]
mod tests {
    use super::{prelude, CreateArgs, Op};

    /// A CREATE of session 0 waits for the break of the same session's batch oplock
    /// (STATUS_PENDING); LOGOFF ends the session meanwhile, closing the batch open, and the
    /// CREATE goes on. What it opened must not stay in the file table (it did: a file
    /// node, with its share mode, left for good).
    #[tokio::test]
    async fn a_create_that_finishes_after_its_session_ended_leaves_nothing_open() {
        let batch = CreateArgs { name: 1, disposition: 5, access: 1, share: 7, oplock: 3, lease_state: 0, lease_key: 0, bits: 0 };
        let plain = CreateArgs { oplock: 0, ..batch };
        let ops = prelude().into_iter().chain([
            Op::Create { slot: 1, sess: 0, args: batch },
            Op::Create { slot: 0, sess: 0, args: plain },
            Op::Logoff { slot: 0, sess: 0 },
        ]);
        let o = super::super::run_ops(ops).await.expect("invariants hold");
        assert!(o.answered_pending >= 1 && o.breaks >= 1, "the CREATE waited for a break: {o:?}");
    }
}
