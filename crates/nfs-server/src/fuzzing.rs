//! Stateful fuzzing of the NFS dispatch in memory: a byte string is read as a sequence of
//! calls (MOUNT, and NFSv3 procedures on the handles earlier replies gave, with XIDs drawn
//! from a small set so that the duplicate request cache sees retransmissions, and
//! undecodable arguments mixed in) over [`CONNS`] connections, each call run through
//! [`dispatch::call`] in its own task as `connection.rs` runs it, each connection closed
//! as its reader closes it.
//!
//! NLM calls (non-blocking LOCK, UNLOCK, TEST, FREE_ALL) by four owners of two client
//! hosts are mixed in.
//!
//! Invariants, checked by [`run`]: nothing panics; every call finishes within [`BOUND`]
//! (with a reply, or none for an undecodable record or a duplicate of a call running); a
//! reply names its call's XID; once every connection has closed, no call is left claimed
//! in progress in the DRC, the DRC and the open-file caches are within their bounds, and
//! the client table shows no live connection; once both hosts' locks are released (as
//! their SM_NOTIFY would), the file table and the lock service's book are empty.
//!
//! Used by the cargo-fuzz target `nfs_state` (feature `fuzzing`) and by a seeded test.
//! Not part of the server's API.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use nfs_wire::mount3::{MntArgs, MntRes, MountArgs3, MountProc3};
use nfs_wire::nfs3::*;
use nfs_wire::nlm4::{Nlm4Args, Nlm4Lock, Nlm4LockArgs, Nlm4Notify, Nlm4TestArgs, Nlm4UnlockArgs, NLM4_VERS, NLM_PROG};
use nfs_wire::record::{self, Record, RecordReader};
use nfs_wire::rpc::{self, Auth, AuthSys, CallHeader};
use nfs_wire::{XdrReader, XdrWriter};

use crate::dispatch;
use crate::state::NfsState;

/// Connections a sequence may use at once.
pub const CONNS: usize = 3;
/// How long a call may run.
pub const BOUND: Duration = Duration::from_secs(5);
/// Calls read from one input at most.
pub const MAX_OPS: usize = 128;

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const NAMES: [&str; 4] = ["a", "b", "d", "e"];
/// The NLM client hosts' caller names.
const HOSTS: [&str; 2] = ["host-a", "host-b"];

/// What a sequence did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Outcome {
    pub calls: usize,
    pub replies: usize,
    pub handles: usize,
}

/// One connection: its places at the exports' limiters and its traffic counts.
struct Conn {
    slots: Arc<crate::qos::Slots>,
    counts: Arc<braid_opmetrics::PeerConn>,
}

struct Client {
    state: Arc<NfsState>,
    /// The file table the state shares (checked empty at the end).
    files: Arc<braid_filestate::FileTable<()>>,
    conns: [Option<Conn>; CONNS],
    handles: Vec<NfsFh3>,
    /// The last call sent, for retransmissions.
    last: Option<Vec<u8>>,
    cred: Auth,
    outcome: Outcome,
}

/// A state with one memory export, `mem`, the lock service on, over `files`.
fn state(files: Arc<braid_filestate::FileTable<()>>) -> Arc<NfsState> {
    let rules = crate::ExportRules { root_squash: false, ..crate::ExportRules::default() };
    let export = crate::Export {
        share: 0,
        name: "mem".into(),
        backend: Arc::new(braid_vfs::MemoryBackend::new(4 << 20, false)),
        rules,
        qos: braid_qos::ShareLimiter::new("mem", Default::default()),
        storage: braid_qos::StorageGate::new("mem", 16, Duration::from_secs(30)),
    };
    let key = crate::handle::HandleKey::from_bytes([9; 32]);
    // NLM answers with a port set; nothing listens (calls go straight to the dispatch).
    let config = crate::NfsConfig { nlm_port: 1, nsm_port: 2, ..crate::NfsConfig::default() };
    let s = NfsState::new(config, vec![export], key, files, Arc::new(crate::op_table()));
    Arc::new(s.expect("nfs state"))
}

/// Runs the sequence `data` encodes on a fresh state, on a runtime of its own; Err names
/// the first invariant broken.
pub fn run(data: &[u8]) -> Result<Outcome, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(run_async(data))
}

async fn run_async(data: &[u8]) -> Result<Outcome, String> {
    let (uid, gid) = braid_vfs::creds::current_fs_ids();
    let cred = Auth::Sys(AuthSys { stamp: 1, machine_name: b"fuzz".to_vec(), uid, gid, gids: vec![] });
    let files = Arc::new(braid_filestate::FileTable::<()>::default());
    let mut c =
        Client { state: state(files.clone()), files, conns: [None, None, None], handles: Vec::new(), last: None, cred, outcome: Outcome::default() };
    let mut i = Input(data);
    for _ in 0..MAX_OPS {
        let Some(kind) = i.next() else { break };
        c.step(kind, &mut i).await?;
    }
    for slot in 0..CONNS {
        c.disconnect(slot);
    }
    c.check_state()
}

/// The bytes left; reads past the end give zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn next(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn b(&mut self) -> u8 {
        self.next().unwrap_or(0)
    }

    fn name(&mut self) -> &'static str {
        NAMES[usize::from(self.b()) % NAMES.len()]
    }
}

fn dirop(dir: NfsFh3, name: &str) -> DirOpArgs3 {
    DirOpArgs3 { dir, name: name.as_bytes().to_vec() }
}

impl Client {
    /// A handle the client holds (a made-up one when it holds none: BADHANDLE).
    fn handle(&self, i: u8) -> NfsFh3 {
        match self.handles.len() {
            0 => NfsFh3::new(&[i; 16]).expect("16 bytes"),
            n => self.handles[usize::from(i) % n],
        }
    }

    /// One operation, of kind `kind`, its parameters read from `i`.
    async fn step(&mut self, kind: u8, i: &mut Input<'_>) -> Result<(), String> {
        let slot = usize::from(i.b()) % CONNS;
        let xid = u32::from(i.b() % 16);
        let args = match kind % 24 {
            20..=23 => return self.nlm(slot, xid, kind % 4, i).await,
            0 => {
                self.disconnect(slot);
                self.connect(slot);
                return Ok(());
            }
            1 => {
                self.disconnect(slot);
                return Ok(());
            }
            2 => return self.mount(slot, xid, i.b()).await,
            3 => Args3::Lookup(LookupArgs { what: dirop(self.handle(i.b()), i.name()) }),
            4 => {
                let (dir, name, how) = (self.handle(i.b()), i.name(), i.b());
                let attrs = Sattr3 { mode: Some(0o644), ..Default::default() };
                let how = [CreateHow3::Unchecked(attrs), CreateHow3::Guarded(attrs), CreateHow3::Exclusive([how; 8])][usize::from(how % 3)];
                Args3::Create(CreateArgs { where_: dirop(dir, name), how })
            }
            5 => Args3::Mkdir(MkdirArgs {
                where_: dirop(self.handle(i.b()), i.name()),
                attributes: Sattr3 { mode: Some(0o755), ..Default::default() },
            }),
            6 => return self.write(slot, xid, i).await,
            7 => Args3::Read(ReadArgs { file: self.handle(i.b()), offset: u64::from(i.b()), count: u32::from(i.b()) * 16 }),
            8 => Args3::Commit(CommitArgs { file: self.handle(i.b()), offset: 0, count: 0 }),
            9 => Args3::Remove(RemoveArgs { object: dirop(self.handle(i.b()), i.name()) }),
            10 => Args3::Rmdir(RmdirArgs { object: dirop(self.handle(i.b()), i.name()) }),
            11 => Args3::Rename(RenameArgs { from: dirop(self.handle(i.b()), i.name()), to: dirop(self.handle(i.b()), i.name()) }),
            12 => {
                let a = Sattr3 { size: Some(u64::from(i.b())), mode: Some(0o600 | u32::from(i.b() & 0o77)), ..Default::default() };
                Args3::Setattr(SetattrArgs { object: self.handle(i.b()), new_attributes: a, guard: None })
            }
            13 => self.readdir(i),
            14 => self.query(i),
            15 => return self.garbage(slot, xid, i).await,
            16 => return self.retransmit(slot).await,
            17 => Args3::Null,
            18 => {
                tokio::time::sleep(Duration::from_millis(u64::from(i.b() % 8))).await;
                return Ok(());
            }
            _ => Args3::Link(LinkArgs { file: self.handle(i.b()), link: dirop(self.handle(i.b()), i.name()) }),
        };
        let p = args.proc_() as u32;
        let call = self.encode(xid, rpc::PROG_NFS, p, |w| args.encode(w));
        let reply = self.send(slot, call).await?;
        self.learn(&args, reply.as_deref());
        Ok(())
    }

    fn readdir(&self, i: &mut Input<'_>) -> Args3<'static> {
        let (dir, cookie, plus) = (self.handle(i.b()), u64::from(i.b() % 4), i.b() & 1 == 1);
        if plus {
            Args3::Readdirplus(ReaddirplusArgs { dir, cookie, cookieverf: [0; 8], dircount: 512, maxcount: 4096 })
        } else {
            Args3::Readdir(ReaddirArgs { dir, cookie, cookieverf: [0; 8], count: 1024 })
        }
    }

    fn query(&self, i: &mut Input<'_>) -> Args3<'static> {
        let (which, h) = (i.b() % 5, self.handle(i.b()));
        match which {
            0 => Args3::Getattr(GetattrArgs { object: h }),
            1 => Args3::Access(AccessArgs { object: h, access: 0x3f }),
            2 => Args3::Fsstat(FsstatArgs { fsroot: h }),
            3 => Args3::Fsinfo(FsinfoArgs { fsroot: h }),
            _ => Args3::Pathconf(PathconfArgs { object: h }),
        }
    }

    async fn write(&mut self, slot: usize, xid: u32, i: &mut Input<'_>) -> Result<(), String> {
        let (file, offset, len, stable) = (self.handle(i.b()), u64::from(i.b()), usize::from(i.b()), i.b() % 3);
        let data = vec![0x5a; len];
        let stable = [StableHow::Unstable, StableHow::DataSync, StableHow::FileSync][usize::from(stable)];
        let args = Args3::Write(WriteArgs { file, offset, count: len as u32, stable, data: &data });
        let call = self.encode(xid, rpc::PROG_NFS, Proc3::Write as u32, |w| args.encode(w));
        self.send(slot, call).await?;
        Ok(())
    }

    async fn mount(&mut self, slot: usize, xid: u32, which: u8) -> Result<(), String> {
        let path = ["/mem", "/mem/d", "/nope"][usize::from(which % 3)];
        let a = MountArgs3::Mnt(MntArgs { dirpath: path.as_bytes().to_vec() });
        let call = self.encode(xid, rpc::PROG_MOUNT, MountProc3::Mnt as u32, |w| a.encode(w));
        if let Some(reply) = self.send(slot, call).await? {
            if let Ok(MntRes::Ok(ok)) = results(&reply).and_then(|r| MntRes::decode(&mut XdrReader::new(r)).ok()).ok_or(()) {
                self.keep(ok.fhandle);
            }
        }
        Ok(())
    }

    /// A call of procedure `proc` (of NFS or MOUNT, or of no program) whose arguments are
    /// a handle (or not) and fuzzed bytes.
    async fn garbage(&mut self, slot: usize, xid: u32, i: &mut Input<'_>) -> Result<(), String> {
        let (proc_, prog, h, n) = (u32::from(i.b() % 24), i.b() % 4, i.b(), usize::from(i.b() % 64));
        let prog = [rpc::PROG_NFS, rpc::PROG_NFS, rpc::PROG_MOUNT, 100_099][usize::from(prog)];
        let junk: Vec<u8> = (0..n).map(|_| i.b()).collect();
        let fh = (h & 1 == 1).then(|| self.handle(h));
        let call = self.encode(xid, prog, proc_, |w| {
            if let Some(fh) = &fh {
                fh.encode(w);
            }
            w.buf().extend_from_slice(&junk);
        });
        self.send(slot, call).await?;
        Ok(())
    }

    /// The last call again, twice at once on `slot` (a client retransmitting while the
    /// first is still running): the DRC answers one from the cache or drops it.
    async fn retransmit(&mut self, slot: usize) -> Result<(), String> {
        let Some(call) = self.last.clone() else { return Ok(()) };
        let Some(conn) = &self.conns[slot] else { return Ok(()) };
        let a = spawn_call(&self.state, conn, call.clone());
        let b = spawn_call(&self.state, conn, call);
        for t in [a, b] {
            self.finish(t).await?;
        }
        Ok(())
    }

    /// An NLM call on a handle of the sequence by one of four owners of two hosts: LOCK
    /// (never blocking: a grant would call the host back over the network), UNLOCK, TEST,
    /// or FREE_ALL of a host.
    async fn nlm(&mut self, slot: usize, xid: u32, kind: u8, i: &mut Input<'_>) -> Result<(), String> {
        let owner = i.b() % 4;
        let host = HOSTS[usize::from(owner % 2)].as_bytes();
        let fh = self.handle(i.b());
        let (l_offset, l_len, exclusive) = (u64::from(i.b() % 8) * 8, u64::from(i.b() % 4) * 8, i.b() & 1 == 1);
        let alock = Nlm4Lock { caller_name: host.into(), fh: fh.as_bytes().into(), oh: vec![owner].into(), svid: i32::from(owner), l_offset, l_len };
        let cookie: nfs_wire::nlm4::Netobj = vec![owner].into();
        let args = match kind {
            0 => Nlm4Args::Lock(Nlm4LockArgs { cookie, block: false, exclusive, alock, reclaim: false, state: 1 }),
            1 => Nlm4Args::Unlock(Nlm4UnlockArgs { cookie, alock }),
            2 => Nlm4Args::Test(Nlm4TestArgs { cookie, exclusive, alock }),
            _ => Nlm4Args::FreeAll(Nlm4Notify { name: host.into(), state: 3 }),
        };
        let call = self.encode_for(xid, (NLM_PROG, NLM4_VERS), args.proc_() as u32, |w| args.encode(w));
        self.send(slot, call).await.map(drop)
    }

    /// A whole call record: header from `xid`, `prog`, `proc_`, then its arguments.
    fn encode(&mut self, xid: u32, prog: u32, proc_: u32, args: impl FnOnce(&mut XdrWriter<'_>)) -> Vec<u8> {
        self.encode_for(xid, (prog, 3), proc_, args)
    }

    /// [`Client::encode`] for program `prog` version `vers`.
    fn encode_for(&mut self, xid: u32, (prog, vers): (u32, u32), proc_: u32, args: impl FnOnce(&mut XdrWriter<'_>)) -> Vec<u8> {
        let mut call = Vec::new();
        let hdr = CallHeader { xid, prog, vers, proc_, cred: self.cred.clone(), verf: Auth::None };
        rpc::encode_call(&hdr, &mut call);
        args(&mut XdrWriter::new(&mut call));
        self.last = Some(call.clone());
        call
    }

    /// Runs `call` on `slot` (nothing without a connection there); its reply, if any.
    async fn send(&mut self, slot: usize, call: Vec<u8>) -> Result<Option<Vec<u8>>, String> {
        let Some(conn) = &self.conns[slot] else { return Ok(None) };
        let xid = u32::from_be_bytes(call[..4].try_into().expect("xid"));
        let t = spawn_call(&self.state, conn, call);
        let reply = self.finish(t).await?;
        if let Some(r) = &reply {
            match rpc::decode_reply(r) {
                Ok((x, _)) if x == xid => {}
                other => return Err(format!("the reply to call {xid} is not one: {other:?}")),
            }
        }
        Ok(reply)
    }

    /// Waits for a call's task, within [`BOUND`]; its reply without the record mark.
    async fn finish(&mut self, t: tokio::task::JoinHandle<Option<Vec<u8>>>) -> Result<Option<Vec<u8>>, String> {
        self.outcome.calls += 1;
        let reply = match tokio::time::timeout(BOUND, t).await {
            Err(_) => return Err(format!("a call ran past {BOUND:?}")),
            Ok(Err(e)) => return Err(format!("a call's task failed: {e}")),
            Ok(Ok(r)) => r,
        };
        self.outcome.replies += usize::from(reply.is_some());
        Ok(reply.map(|mut r| r.split_off(4)))
    }

    /// Keeps the handle a LOOKUP, CREATE or MKDIR answered with.
    fn learn(&mut self, args: &Args3<'_>, reply: Option<&[u8]>) {
        let Some(r) = reply.and_then(results) else { return };
        let r = &mut XdrReader::new(r);
        let fh = match args {
            Args3::Lookup(_) => match LookupRes::decode(r) {
                Ok(LookupRes::Ok(ok)) => Some(ok.object),
                _ => None,
            },
            Args3::Create(_) | Args3::Mkdir(_) => match CreateRes::decode(r) {
                Ok(CreateRes::Ok(ok)) => ok.obj.0,
                _ => None,
            },
            _ => None,
        };
        if let Some(fh) = fh {
            self.keep(fh);
        }
    }

    fn keep(&mut self, fh: NfsFh3) {
        if !self.handles.contains(&fh) && self.handles.len() < 16 {
            self.handles.push(fh);
            self.outcome.handles += 1;
        }
    }

    fn connect(&mut self, slot: usize) {
        let counts = self.state.peers.connect(PEER);
        self.conns[slot] = Some(Conn { slots: Arc::new(crate::qos::Slots::new(PEER)), counts });
    }

    /// What the reader does when its connection ends (`connection::serve`).
    fn disconnect(&mut self, slot: usize) {
        if let Some(c) = self.conns[slot].take() {
            c.slots.close();
            self.state.peers.disconnect(PEER, &c.counts);
        }
    }

    /// The invariants once every connection has closed.
    fn check_state(&self) -> Result<Outcome, String> {
        let drc = &self.state.drc;
        if drc.in_progress() != 0 {
            return Err(format!("{} calls left in progress in the DRC after every call finished", drc.in_progress()));
        }
        if drc.len() > drc.capacity() {
            return Err(format!("DRC holds {} entries, over its capacity {}", drc.len(), drc.capacity()));
        }
        for e in self.state.exports.iter() {
            if e.open_files.len() > crate::open_files::MAX_OPEN {
                return Err(format!("{} files kept open, over {}", e.open_files.len(), crate::open_files::MAX_OPEN));
            }
        }
        if let Some(p) = self.state.peers.snapshot().iter().find(|p| p.connections != 0) {
            return Err(format!("client table shows live connections after every connection closed: {p:?}"));
        }
        for h in HOSTS {
            crate::nlm::release_hosts(&self.state, Some(h.as_bytes()), None);
        }
        if !self.files.is_empty() || self.state.nlm.hosts() != 0 {
            return Err(format!("{} files and {} hosts left after every lock holder was released", self.files.len(), self.state.nlm.hosts()));
        }
        Ok(self.outcome)
    }
}

/// Runs one call record as `connection.rs` does, in its own task.
fn spawn_call(state: &Arc<NfsState>, conn: &Conn, call: Vec<u8>) -> tokio::task::JoinHandle<Option<Vec<u8>>> {
    let (state, slots, counts) = (state.clone(), conn.slots.clone(), conn.counts.clone());
    tokio::spawn(async move {
        let rec = as_record(&call);
        let len_in = rec.len();
        let reply = dispatch::call(&state, PEER, &slots, rec).await;
        counts.record(len_in, reply.as_ref().map_or(0, Vec::len));
        reply
    })
}

/// `call` as the record reader hands it over.
fn as_record(call: &[u8]) -> Record {
    let mut framed = Vec::with_capacity(call.len() + 4);
    let at = record::reserve_mark(&mut framed);
    framed.extend_from_slice(call);
    record::set_mark(&mut framed, at);
    let mut r = RecordReader::new(crate::connection::MAX_RECORD as u32);
    r.feed(&framed);
    r.next_record().ok().flatten().expect("a whole record")
}

/// The results of an accepted, successful reply.
fn results(reply: &[u8]) -> Option<&[u8]> {
    rpc::decode_reply(reply).ok().and_then(|(_, r)| r.ok())
}

#[cfg(test)]
mod tests {
    use rand::{Rng, RngCore, SeedableRng};

    /// Random sequences for `BRAID_STATEFUL_SECS` seconds (default 2); the seed
    /// (`BRAID_STATEFUL_SEED` fixes the first) and input are printed on failure.
    #[test]
    fn random_call_sequences_keep_the_invariants() {
        let secs: u64 = std::env::var("BRAID_STATEFUL_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
        let first: u64 = std::env::var("BRAID_STATEFUL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let (mut runs, mut calls, mut replies) = (0u64, 0, 0);
        while runs == 0 || std::time::Instant::now() < until {
            let seed = first.wrapping_add(runs);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut data = vec![0u8; rng.gen_range(8..800)];
            rng.fill_bytes(&mut data);
            // Start connected and mounted, so that random bytes reach the handlers.
            data.splice(0..0, [0, 0, 0, 2, 0, 0, 0]);
            match super::run(&data) {
                Ok(o) => (calls, replies) = (calls + o.calls, replies + o.replies),
                Err(e) => panic!("seed {seed} (BRAID_STATEFUL_SEED={seed} reproduces it): {e}\ninput: {data:02x?}"),
            }
            runs += 1;
        }
        eprintln!("nfs stateful: {runs} sequences from seed {first}: {calls} calls, {replies} replies");
    }
}
