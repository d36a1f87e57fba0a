//! The server over TCP with a memory share: a small blocking client built on nfs-wire's
//! client-side codecs drives MOUNT and NFS calls (the Python suite tests/test_nfs.py drives
//! the real binary with libnfs and an independent client).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use braid_filestate::{Access, BoxFut, ByteLock, CachingHooks, FileKey, FileTable, Files, Intent, Refusal, Settle, ShareMode};
use nfs_server::handle::HandleKey;
use nfs_server::state::NfsState;
use nfs_server::{ClientNet, Export, ExportRules, NfsConfig};
use nfs_wire::mount3::{MntArgs, MntRes, MountArgs3, MountProc3};
use nfs_wire::nfs3::*;
use nfs_wire::record;
use nfs_wire::rpc::{self, Auth, AuthStat, AuthSys, CallHeader, ReplyError};
use nfs_wire::{XdrReader, XdrWriter};

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// A server with one memory export `/mem` (and `/other`, whose client list excludes us).
fn start() -> (tokio::runtime::Runtime, SocketAddr) {
    start_with(Arc::new(FileTable::<()>::default()))
}

/// A server over `files`, the file table it shares with (here, imagined) other protocols.
fn start_with(files: Arc<dyn Files>) -> (tokio::runtime::Runtime, SocketAddr) {
    let addr = free_addr();
    let cfg = NfsConfig { listen: vec![addr], ..NfsConfig::default() };
    let rules = ExportRules { root_squash: false, ..ExportRules::default() };
    let mem = |name: &str, rules: ExportRules, share| Export {
        share,
        name: name.into(),
        backend: Arc::new(braid_vfs::MemoryBackend::new(1 << 24, false)),
        rules,
        qos: braid_qos::ShareLimiter::new(name, Default::default()),
        storage: braid_qos::StorageGate::new(name, 16, Duration::from_secs(30)),
    };
    let refused = ExportRules { clients: vec![ClientNet::parse("192.0.2.0/24").unwrap()], ..rules.clone() };
    let exports = vec![mem("mem", rules, 0), mem("other", refused, 1)];
    let state = NfsState::new(cfg, exports, HandleKey::from_bytes([9; 32]), files, Arc::new(nfs_server::op_table())).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.spawn(nfs_server::serve_state(Arc::new(state), std::future::pending()));
    for _ in 0..100 {
        if TcpStream::connect(addr).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (rt, addr)
}

struct Client {
    sock: TcpStream,
    xid: u32,
    cred: Auth,
}

impl Client {
    fn new(addr: SocketAddr) -> Client {
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (uid, gid) = braid_vfs::creds::current_fs_ids();
        let cred = Auth::Sys(AuthSys { stamp: 1, machine_name: b"test".to_vec(), uid, gid, gids: vec![] });
        Client { sock, xid: 100, cred }
    }

    fn send(&mut self, xid: u32, prog: u32, vers: u32, proc_: u32, args: impl FnOnce(&mut XdrWriter<'_>)) {
        let mut call = Vec::new();
        let at = record::reserve_mark(&mut call);
        let hdr = CallHeader { xid, prog, vers, proc_, cred: self.cred.clone(), verf: Auth::None };
        rpc::encode_call(&hdr, &mut call);
        args(&mut XdrWriter::new(&mut call));
        record::set_mark(&mut call, at);
        self.sock.write_all(&call).unwrap();
    }

    fn recv(&mut self) -> Vec<u8> {
        let mut mark = [0u8; 4];
        self.sock.read_exact(&mut mark).unwrap();
        let len = (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize;
        let mut rec = vec![0; len];
        self.sock.read_exact(&mut rec).unwrap();
        rec
    }

    /// One call; the reply's xid, and its results or why there are none.
    fn call(&mut self, prog: u32, vers: u32, proc_: u32, args: impl FnOnce(&mut XdrWriter<'_>)) -> Result<Vec<u8>, ReplyError> {
        self.xid += 1;
        self.send(self.xid, prog, vers, proc_, args);
        let rec = self.recv();
        let (xid, res) = rpc::decode_reply(&rec).unwrap();
        assert_eq!(xid, self.xid);
        res.map(<[u8]>::to_vec)
    }

    fn nfs(&mut self, args: Args3<'_>) -> Vec<u8> {
        let p = args.proc_() as u32;
        self.call(rpc::PROG_NFS, 3, p, |w| args.encode(w)).unwrap()
    }

    fn mnt(&mut self, path: &str) -> MntRes {
        let a = MountArgs3::Mnt(MntArgs { dirpath: path.as_bytes().to_vec() });
        let r = self.call(rpc::PROG_MOUNT, 3, MountProc3::Mnt as u32, |w| a.encode(w)).unwrap();
        MntRes::decode(&mut XdrReader::new(&r)).unwrap()
    }

    fn root(&mut self) -> NfsFh3 {
        match self.mnt("/mem") {
            MntRes::Ok(ok) => ok.fhandle,
            other => panic!("{other:?}"),
        }
    }
}

fn dirop(dir: NfsFh3, name: &str) -> DirOpArgs3 {
    DirOpArgs3 { dir, name: name.as_bytes().to_vec() }
}

fn create(c: &mut Client, dir: NfsFh3, name: &str) -> CreateRes {
    let r =
        c.nfs(Args3::Create(CreateArgs { where_: dirop(dir, name), how: CreateHow3::Guarded(Sattr3 { mode: Some(0o644), ..Default::default() }) }));
    CreateRes::decode(&mut XdrReader::new(&r)).unwrap()
}

fn created_fh(r: CreateRes) -> NfsFh3 {
    match r {
        CreateRes::Ok(ok) => ok.obj.0.unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn write_read_list_remove() {
    let (_rt, addr) = start();
    let mut c = Client::new(addr);
    let root = c.root();
    let fh = created_fh(create(&mut c, root, "a.bin"));
    let data: Vec<u8> = (0..100_003u32).map(|i| i as u8).collect();
    let w = c.nfs(Args3::Write(WriteArgs { file: fh, offset: 0, count: data.len() as u32, stable: StableHow::FileSync, data: &data }));
    match WriteRes::decode(&mut XdrReader::new(&w)).unwrap() {
        WriteRes::Ok(ok) => assert_eq!((ok.count, ok.committed), (data.len() as u32, StableHow::FileSync)),
        other => panic!("{other:?}"),
    }
    let r = c.nfs(Args3::Read(ReadArgs { file: fh, offset: 3, count: 1 << 20 }));
    match ReadRes::decode(&mut XdrReader::new(&r)).unwrap() {
        ReadRes::Ok(ok, got) => {
            assert!(ok.eof);
            assert_eq!(got, &data[3..]);
            assert_eq!(ok.file_attributes.0.unwrap().size, data.len() as u64);
        }
        other => panic!("{other:?}"),
    }
    let l = c.nfs(Args3::Readdirplus(ReaddirplusArgs { dir: root, cookie: 0, cookieverf: [0; 8], dircount: 4096, maxcount: 8192 }));
    match ReaddirplusRes::decode(&mut XdrReader::new(&l)).unwrap() {
        ReaddirplusRes::Ok(ok) => {
            let names: Vec<&[u8]> = ok.entries.iter().map(|e| e.name).collect();
            assert_eq!(names, [&b"."[..], b"..", b"a.bin"]);
            assert_eq!(ok.entries[2].name_handle.0, Some(fh));
            assert!(ok.eof);
        }
        other => panic!("{other:?}"),
    }
    let rm = c.nfs(Args3::Remove(RemoveArgs { object: dirop(root, "a.bin") }));
    assert_eq!(RemoveRes::decode(&mut XdrReader::new(&rm)).unwrap().status(), Nfsstat3::Ok);
    let g = c.nfs(Args3::Getattr(GetattrArgs { object: fh }));
    assert_eq!(GetattrRes::decode(&mut XdrReader::new(&g)).unwrap().status(), Nfsstat3::Stale);
}

#[test]
fn bad_calls_get_rpc_errors() {
    let (_rt, addr) = start();
    let mut c = Client::new(addr);
    let root = c.root();
    let mut forged = root.as_bytes().to_vec();
    *forged.last_mut().unwrap() ^= 1;
    let g = c.nfs(Args3::Getattr(GetattrArgs { object: NfsFh3::new(&forged).unwrap() }));
    assert_eq!(GetattrRes::decode(&mut XdrReader::new(&g)).unwrap().status(), Nfsstat3::Badhandle);
    assert_eq!(c.call(100_021, 1, 0, |_| {}), Err(ReplyError::ProgUnavail));
    assert_eq!(c.call(rpc::PROG_NFS, 2, 0, |_| {}), Err(ReplyError::ProgMismatch { low: 3, high: 3 }));
    assert_eq!(c.call(rpc::PROG_NFS, 3, 22, |_| {}), Err(ReplyError::ProcUnavail));
    assert_eq!(c.call(rpc::PROG_NFS, 3, Proc3::Getattr as u32, |w| w.u32(1000)), Err(ReplyError::GarbageArgs));
    assert_eq!(c.call(rpc::PROG_NFS, 3, 0, |_| {}), Ok(vec![]), "NULL");
    c.cred = Auth::None;
    assert_eq!(c.call(rpc::PROG_NFS, 3, 1, |w| root.encode(w)), Err(ReplyError::AuthError(AuthStat::TooWeak)));
}

#[test]
fn clients_outside_the_list_are_refused() {
    let (_rt, addr) = start();
    let mut c = Client::new(addr);
    assert_eq!(c.mnt("/other").status(), nfs_wire::mount3::MountStat3::Acces);
    assert_eq!(c.mnt("/nothing").status(), nfs_wire::mount3::MountStat3::Noent);
}

#[test]
fn retransmitted_create_is_answered_from_the_cache() {
    let (_rt, addr) = start();
    let mut c = Client::new(addr);
    let root = c.root();
    let args = Args3::Create(CreateArgs { where_: dirop(root, "once"), how: CreateHow3::Guarded(Sattr3::default()) });
    let first = {
        c.send(7, rpc::PROG_NFS, 3, 8, |w| args.encode(w));
        c.recv()
    };
    // The same call on another connection of the same client: the first reply again.
    let mut c2 = Client::new(addr);
    c2.send(7, rpc::PROG_NFS, 3, 8, |w| args.encode(w));
    assert_eq!(c2.recv(), first);
    // A new xid really runs: the name exists now.
    assert_eq!(create(&mut c, root, "once").status(), Nfsstat3::Exist);
}

#[test]
fn oversize_record_closes_the_connection_only() {
    let (_rt, addr) = start();
    let mut c = Client::new(addr);
    c.sock.write_all(&record::mark(64 << 20, true)).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(c.sock.read(&mut buf).unwrap_or(0), 0, "closed");
    let mut c = Client::new(addr);
    assert_eq!(c.call(rpc::PROG_NFS, 3, 0, |_| {}), Ok(vec![]));
}

/// A table whose caching protocol (SMB, in Braid) refuses what a test says and records
/// what it is asked and told.
#[derive(Debug, Default)]
struct Strict {
    refuse: std::sync::Mutex<Vec<(Intent, Refusal)>>,
    asked: std::sync::Mutex<Vec<Intent>>,
    told: std::sync::Mutex<Vec<(String, braid_vfs::ChangeKind)>>,
}

impl CachingHooks for Strict {
    fn settle<'a>(&'a self, key: FileKey, why: Settle) -> BoxFut<'a, Result<(), Refusal>> {
        assert_eq!(key.0, 0);
        let Settle::Intent(intent) = why else { return Box::pin(std::future::ready(Ok(()))) };
        self.asked.lock().unwrap().push(intent);
        let r = self.refuse.lock().unwrap().iter().find(|(i, _)| *i == intent).map(|(_, r)| *r);
        Box::pin(async move { r.map_or(Ok(()), Err) })
    }

    fn changed<'a>(&'a self, _share: usize, change: &'a braid_vfs::Change) -> BoxFut<'a, ()> {
        self.told.lock().unwrap().push((change.path.components().join("/"), change.kind));
        Box::pin(std::future::ready(()))
    }
}

/// A table whose caching protocol is `hooks`.
fn table_with(hooks: Arc<dyn CachingHooks>) -> Arc<FileTable<()>> {
    let t = Arc::new(FileTable::<()>::default());
    t.set_caching(hooks);
    t
}

fn file_id(r: &CreateRes) -> u64 {
    match r {
        CreateRes::Ok(ok) => ok.obj_attributes.0.as_ref().expect("attributes").fileid,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_caching_protocol_is_asked_and_told() {
    let hooks = Arc::new(Strict::default());
    let files = table_with(hooks.clone());
    let (_rt, addr) = start_with(files.clone());
    let mut c = Client::new(addr);
    let root = c.root();
    let made = create(&mut c, root, "f");
    // An open of another protocol holds the file, so its caching is asked to make way.
    files.node((0, file_id(&made))).claim(99, Access(0), ShareMode::ALL).unwrap();
    let fh = created_fh(made);
    hooks.refuse.lock().unwrap().extend([(Intent::Write, Refusal::Busy), (Intent::Remove, Refusal::ShareMode)]);
    let w = c.nfs(Args3::Write(WriteArgs { file: fh, offset: 0, count: 1, stable: StableHow::Unstable, data: b"x" }));
    assert_eq!(WriteRes::decode(&mut XdrReader::new(&w)).unwrap().status(), Nfsstat3::Jukebox);
    let rm = c.nfs(Args3::Remove(RemoveArgs { object: dirop(root, "f") }));
    assert_eq!(RemoveRes::decode(&mut XdrReader::new(&rm)).unwrap().status(), Nfsstat3::Acces);
    hooks.refuse.lock().unwrap().clear();
    let r = c.nfs(Args3::Read(ReadArgs { file: fh, offset: 0, count: 10 }));
    assert_eq!(ReadRes::decode(&mut XdrReader::new(&r)).unwrap().status(), Nfsstat3::Ok);
    let rm = c.nfs(Args3::Remove(RemoveArgs { object: dirop(root, "f") }));
    assert_eq!(RemoveRes::decode(&mut XdrReader::new(&rm)).unwrap().status(), Nfsstat3::Ok);
    let asked = hooks.asked.lock().unwrap().clone();
    for i in [Intent::Write, Intent::Remove, Intent::Read] {
        assert!(asked.contains(&i), "{i:?} in {asked:?}");
    }
    let told = hooks.told.lock().unwrap().clone();
    assert_eq!(told, [("f".to_string(), braid_vfs::ChangeKind::Added), ("f".to_string(), braid_vfs::ChangeKind::Removed)]);
}

/// Another protocol's exclusive byte-range lock makes NFS READs and WRITEs in its range
/// fail with NFS3ERR_ACCES, and only in its range.
#[test]
fn io_under_another_holders_exclusive_lock_fails() {
    let files = Arc::new(FileTable::<()>::default());
    let (_rt, addr) = start_with(files.clone());
    let mut c = Client::new(addr);
    let root = c.root();
    let made = create(&mut c, root, "locked");
    let node = files.node((0, file_id(&made)));
    node.claim(7, Access::WRITE_DATA, ShareMode::ALL).unwrap();
    node.try_lock(ByteLock { open: 7, offset: 100, length: 100, exclusive: true }).unwrap();
    let fh = created_fh(made);
    let write = |c: &mut Client, offset| {
        let w = c.nfs(Args3::Write(WriteArgs { file: fh, offset, count: 1, stable: StableHow::FileSync, data: b"x" }));
        WriteRes::decode(&mut XdrReader::new(&w)).unwrap().status()
    };
    assert_eq!(write(&mut c, 150), Nfsstat3::Acces);
    assert_eq!(write(&mut c, 10), Nfsstat3::Ok);
    let r = c.nfs(Args3::Read(ReadArgs { file: fh, offset: 50, count: 60 }));
    assert_eq!(ReadRes::decode(&mut XdrReader::new(&r)).unwrap().status(), Nfsstat3::Acces);
    node.unlock(7, 100, 100).unwrap();
    assert_eq!(write(&mut c, 150), Nfsstat3::Ok);
}

/// Takes its time over what it sends about a change, and records when it is done.
#[derive(Debug, Default)]
struct SlowToTell {
    told_at: std::sync::Mutex<Vec<std::time::Instant>>,
}

impl CachingHooks for SlowToTell {
    fn settle<'a>(&'a self, _key: FileKey, _why: Settle) -> BoxFut<'a, Result<(), Refusal>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn changed<'a>(&'a self, _share: usize, _change: &'a braid_vfs::Change) -> BoxFut<'a, ()> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            self.told_at.lock().unwrap().push(std::time::Instant::now());
        })
    }
}

/// The other protocols' notices about a change (SMB lease breaks) go out before the NFS
/// reply that completes it: the reply waits for them.
#[test]
fn a_reply_comes_after_the_other_protocols_are_told() {
    let hooks = Arc::new(SlowToTell::default());
    let (_rt, addr) = start_with(table_with(hooks.clone()));
    let mut c = Client::new(addr);
    let root = c.root();
    let fh = created_fh(create(&mut c, root, "f"));
    assert_eq!(hooks.told_at.lock().unwrap().len(), 1, "CREATE answered before the other protocols were told");
    let rm = c.nfs(Args3::Remove(RemoveArgs { object: dirop(root, "f") }));
    let answered = std::time::Instant::now();
    assert_eq!(RemoveRes::decode(&mut XdrReader::new(&rm)).unwrap().status(), Nfsstat3::Ok);
    let told = hooks.told_at.lock().unwrap().clone();
    assert_eq!(told.len(), 2, "REMOVE answered before the other protocols were told");
    assert!(told[1] <= answered);
    let _ = fh;
}

#[test]
fn random_calls_never_hurt_the_server() {
    let (_rt, addr) = start();
    let mut c = Client::new(addr);
    let root = c.root();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..3000u32 {
        let proc_ = (next() % 24) as u32;
        let len = (next() % 200) as usize;
        let junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Half the calls start with a valid handle, so the handlers see their arguments.
        let with_root = i % 2 == 0;
        let prog = if i % 7 == 0 { rpc::PROG_MOUNT } else { rpc::PROG_NFS };
        c.xid += 1;
        c.send(c.xid, prog, 3, proc_, |w| {
            if with_root {
                root.encode(w);
            }
            w.buf().extend_from_slice(&junk);
        });
        let rec = c.recv();
        assert!(rpc::decode_reply(&rec).is_ok(), "call {i}: an RPC reply");
    }
    assert_eq!(c.call(rpc::PROG_NFS, 3, 0, |_| {}), Ok(vec![]));
}
