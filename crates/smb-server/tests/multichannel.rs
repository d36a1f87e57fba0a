//! SMB 3 multichannel against the real `braid` binary, driven by Braid's own client
//! (`smb-client`): binding many channels, I/O spread over them, refused bindings that must not
//! disturb the session, losing a channel in the middle of a transfer, and a bounded load test
//! that checks the server's memory comes back down.
//!
//! The binary is `$BRAID_BIN`, else `braid` next to this test's target directory (build it
//! first: `cargo build -p braid`), else `$CARGO_TARGET_DIR` or the workspace `target/`.

mod common;
use common::{add_user, braid_bin, free_port, serve, unique};

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smb_client::{dialect, BindTweaks, Client, ClientConfig, ClientError, CreateOptions, File, NtStatus, Tree};

const USER: &str = "mc";
const PASSWORD: &str = "Multi-Channel-1";
const OTHER: &str = "other";
const OTHER_PASSWORD: &str = "Other-User-1";

// ---------------------------------------------------------------------------------------------
// the server under test
// ---------------------------------------------------------------------------------------------

/// A braid process on a free port with share `data`, stopped and cleaned up on drop.
struct Braid {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Braid {
    /// Starts braid with `server_extra` appended to its `[server]` section.
    fn start(server_extra: &str) -> Braid {
        let bin = braid_bin();
        let dir = std::env::temp_dir().join(format!("braid-mc-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(dir.join("data")).expect("share dir");
        let port = free_port();
        let config = dir.join("braid.toml");
        let toml = format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n{admin}{server_extra}\n\n\
             [[share]]\nname = \"data\"\npath = \"{data}\"\n",
            data = dir.join("data").display(),
            admin = if server_extra.contains("admin") { "" } else { "admin = \"off\"\n" },
        );
        std::fs::write(&config, toml).expect("write config");
        for (user, pw) in [(USER, PASSWORD), (OTHER, OTHER_PASSWORD)] {
            add_user(&bin, &config, user, pw);
        }
        let child = serve(&bin, &config, &dir.join("braid.log"), port);
        Braid { child, port, dir }
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("braid.log")).unwrap_or_default()
    }

    /// Resident memory of the server process in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("proc status");
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).expect("VmRSS")
    }

    fn assert_alive(&mut self) {
        assert!(self.child.try_wait().expect("try_wait").is_none(), "braid exited; log:\n{}", self.log());
        assert!(!self.log().contains("panicked"), "braid panicked; log:\n{}", self.log());
    }
}

impl Drop for Braid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

fn config(dialects: &[u16]) -> ClientConfig {
    ClientConfig { user: USER.into(), password: PASSWORD.into(), dialects: dialects.to_vec(), max_io: 1 << 20, ..ClientConfig::default() }
}

/// Deterministic file content: every byte depends on its offset and a seed.
fn pattern(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let x = (offset + i).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
            (x >> 29) as u8 ^ (x >> 7) as u8
        })
        .collect()
}

fn status(e: &ClientError) -> Option<NtStatus> {
    e.status()
}

async fn open_rw(tree: &Tree, name: &str) -> File {
    tree.create(name, &CreateOptions::create_overwrite()).await.expect("create")
}

/// The session still serves I/O on `client` after something was refused.
async fn assert_session_works(client: &Client, name: &str) {
    let tree = client.tree_connect("data").await.expect("tree connect after a refused binding");
    let f = open_rw(&tree, name).await;
    let data = pattern(7, 0, 4096);
    f.write(0, &data).await.expect("write");
    assert_eq!(&f.read(0, 4096).await.expect("read")[..], &data[..]);
    f.close().await.expect("close");
}

/// Writes `chunks` chunks of `chunk` bytes spread round-robin over `channels`, then reads
/// every chunk back on a different channel than the one that wrote it.
async fn spread_io(file: &File, channels: &[Client], seed: u64, chunks: u64, chunk: usize) {
    let mut tasks = Vec::new();
    for i in 0..chunks {
        let f = file.on_channel(&channels[i as usize % channels.len()]);
        tasks.push(tokio::spawn(async move {
            let off = i * chunk as u64;
            f.write(off, &pattern(seed, off, chunk)).await.expect("write on a channel");
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let mut tasks = Vec::new();
    for i in 0..chunks {
        let f = file.on_channel(&channels[(i as usize + 1) % channels.len()]);
        tasks.push(tokio::spawn(async move {
            let off = i * chunk as u64;
            let got = f.read(off, chunk as u32).await.expect("read on a channel");
            assert!(got[..] == pattern(seed, off, chunk)[..], "chunk {i} differs");
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
}

// ---------------------------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bind_4_and_16_channels_with_io_over_all() {
    let admin = free_port();
    let mut braid = Braid::start(&format!("admin = \"127.0.0.1:{admin}\""));
    for dialects in [vec![dialect::SMB311], vec![dialect::SMB300], vec![dialect::SMB302]] {
        let first = Client::connect(braid.addr(), &config(&dialects)).await.expect("connect");
        let tree = first.tree_connect("data").await.expect("tree");
        // The interface list names the listen address.
        let ipc = first.tree_connect("IPC$").await.expect("IPC$");
        let ifaces = first.query_interfaces(&ipc).await.expect("interfaces");
        assert!(ifaces.iter().any(|i| i.addr == Some(braid.addr().ip())), "{ifaces:?}");
        let mut channels = vec![first.clone()];
        for n in [4usize, 16] {
            while channels.len() < n {
                channels.push(first.bind_channel(braid.addr()).await.expect("bind"));
            }
            let name = format!("spread-{:x}-{n}.bin", dialects[0]);
            let file = open_rw(&tree, &name).await;
            spread_io(&file, &channels, n as u64, 4 * n as u64, 256 * 1024).await;
            // Metadata requests work on every channel too.
            for ch in &channels {
                let st = tree.on_channel(ch).stat(&name).await.expect("stat on a channel");
                assert_eq!(st.size, 4 * n as u64 * 256 * 1024);
            }
            file.close().await.expect("close");
            // `braid status` sees the session with all n channels, each of which moved data.
            let st: serde_json::Value = serde_json::from_str(&admin_status(admin)).expect("status JSON");
            let sess = st["sessions"].as_array().expect("sessions").iter().find(|s| s["current_channels"].as_u64() == Some(n as u64));
            let sess = sess.unwrap_or_else(|| panic!("no session with {n} channels: {st}"));
            assert_eq!(sess["max_channels"].as_u64(), Some(32), "{sess}");
            for ch in sess["channels"].as_array().expect("channels") {
                assert!(ch["bytes_in"].as_u64().unwrap_or(0) > 256 * 1024, "a channel carried no I/O: {sess}");
            }
        }
        // LOGOFF on one channel ends the session on all of them.
        let last = channels.pop().expect("a channel");
        last.logoff().await.expect("logoff on a bound channel");
        let err = tree.on_channel(&channels[1]).stat("spread-x").await.expect_err("session gone");
        assert_eq!(status(&err), Some(NtStatus::USER_SESSION_DELETED), "{err:?}");
    }
    braid.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_bindings_leave_the_session_intact() {
    let mut braid = Braid::start("max_channels = 4");
    let first = Client::connect(braid.addr(), &config(&[dialect::SMB311])).await.expect("connect");
    let tree = first.tree_connect("data").await.expect("tree");
    let keep = open_rw(&tree, "kept-open.bin").await;
    keep.write(0, b"still here").await.expect("write");

    // Another user cannot join the session.
    let t = BindTweaks { credentials: Some((OTHER.into(), OTHER_PASSWORD.into())), ..BindTweaks::default() };
    let err = first.bind_channel_with(braid.addr(), &t).await.expect_err("other user");
    assert_eq!(status(&err), Some(NtStatus::ACCESS_DENIED), "{err:?}");
    assert_session_works(&first, "after-other-user.bin").await;

    // A wrong password fails like a logon, the session stays.
    let t = BindTweaks { credentials: Some((USER.into(), "wrong".into())), ..BindTweaks::default() };
    let err = first.bind_channel_with(braid.addr(), &t).await.expect_err("bad password");
    assert_eq!(status(&err), Some(NtStatus::LOGON_FAILURE), "{err:?}");
    assert_session_works(&first, "after-bad-password.bin").await;

    // An unsigned binding request.
    let t = BindTweaks { unsigned: true, ..BindTweaks::default() };
    let err = first.bind_channel_with(braid.addr(), &t).await.expect_err("unsigned");
    assert_eq!(status(&err), Some(NtStatus::INVALID_PARAMETER), "{err:?}");
    assert_session_works(&first, "after-unsigned.bin").await;

    // Another dialect than the session's: from a 3.1.1 session signing with AES-GMAC, the
    // algorithm mismatch is what Windows reports; between 3.0.2 and 3.0, the dialect.
    let t = BindTweaks { dialects: Some(vec![dialect::SMB300]), ..BindTweaks::default() };
    let err = first.bind_channel_with(braid.addr(), &t).await.expect_err("other dialect");
    assert_eq!(status(&err), Some(NtStatus::REQUEST_OUT_OF_SEQUENCE), "{err:?}");
    let old = Client::connect(braid.addr(), &config(&[dialect::SMB302])).await.expect("connect 3.0.2");
    let err = old.bind_channel_with(braid.addr(), &t).await.expect_err("3.0 channel for a 3.0.2 session");
    assert_eq!(status(&err), Some(NtStatus::INVALID_PARAMETER), "{err:?}");
    assert_session_works(&old, "after-dialect-302.bin").await;
    // SMB 2.1 cannot bind at all.
    let t = BindTweaks { dialects: Some(vec![dialect::SMB210]), ..BindTweaks::default() };
    let err = old.bind_channel_with(braid.addr(), &t).await.expect_err("2.1");
    assert_eq!(status(&err), Some(NtStatus::REQUEST_NOT_ACCEPTED), "{err:?}");
    // Another client (ClientGuid).
    let t = BindTweaks { client_guid: Some([0x5a; 16]), ..BindTweaks::default() };
    let err = first.bind_channel_with(braid.addr(), &t).await.expect_err("other client");
    assert_eq!(status(&err), Some(NtStatus::USER_SESSION_DELETED), "{err:?}");
    assert_session_works(&first, "after-dialects.bin").await;

    // max_channels = 4: the first connection and three more.
    let mut channels = vec![first.clone()];
    for _ in 0..3 {
        channels.push(first.bind_channel(braid.addr()).await.expect("bind within the limit"));
    }
    let err = first.bind_channel(braid.addr()).await.expect_err("fifth channel");
    assert_eq!(status(&err), Some(NtStatus::INSUFFICIENT_RESOURCES), "{err:?}");
    // Every channel still works, and the handle opened before everything is intact.
    for (i, ch) in channels.iter().enumerate() {
        assert_eq!(&keep.on_channel(ch).read(0, 10).await.expect("read")[..], b"still here", "channel {i}");
    }
    // A lost channel frees its slot.
    channels.pop().expect("channel").abort_connection();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match first.bind_channel(braid.addr()).await {
            Ok(c) => {
                channels.push(c);
                break;
            }
            Err(e) if status(&e) == Some(NtStatus::INSUFFICIENT_RESOURCES) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("rebinding after a lost channel: {e:?}"),
        }
    }
    keep.close().await.expect("close");
    braid.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multichannel_can_be_turned_off() {
    let braid = Braid::start("multichannel = false");
    let first = Client::connect(braid.addr(), &config(&[dialect::SMB311])).await.expect("connect");
    let err = first.bind_channel(braid.addr()).await.expect_err("no multichannel");
    assert!(matches!(err, ClientError::NotSupported(_)), "{err:?}");
    // A client that binds anyway is refused.
    let t = BindTweaks { dialects: Some(vec![dialect::SMB311]), ..BindTweaks::default() };
    let _ = first.bind_channel_with(braid.addr(), &t).await.expect_err("refused");
    assert_session_works(&first, "mc-off.bin").await;
}

/// 1 GiB written over four channels; one channel's socket dies a third of the way in.
/// Requests that failed with it are retried on the others; every byte is then checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transfer_survives_a_lost_channel() {
    const TOTAL: u64 = 1 << 30;
    const CHUNK: usize = 1 << 20;
    let mut braid = Braid::start("");
    let first = Client::connect(braid.addr(), &config(&[dialect::SMB311])).await.expect("connect");
    let tree = first.tree_connect("data").await.expect("tree");
    let mut channels = vec![first.clone()];
    for _ in 0..3 {
        channels.push(first.bind_channel(braid.addr()).await.expect("bind"));
    }
    let file = open_rw(&tree, "big.bin").await;
    let channels = Arc::new(channels);
    let dead = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let retried = Arc::new(AtomicUsize::new(0));
    let victim = 2usize;
    let mut workers = Vec::new();
    for w in 0..8usize {
        let (channels, dead, next, retried, file) = (channels.clone(), dead.clone(), next.clone(), retried.clone(), file.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= TOTAL / CHUNK as u64 {
                    break;
                }
                if i == TOTAL / CHUNK as u64 / 3 {
                    // Marked dead first: another worker's write on it may fail the moment
                    // it is aborted.
                    dead.store(true, Ordering::Release);
                    channels[victim].abort_connection();
                }
                let off = i * CHUNK as u64;
                let data = pattern(42, off, CHUNK);
                let mut ch = (w + i as usize) % channels.len();
                loop {
                    match file.on_channel(&channels[ch]).write(off, &data).await {
                        Ok(n) => {
                            assert_eq!(n as usize, CHUNK);
                            break;
                        }
                        Err(e) => {
                            assert!(ch == victim && dead.load(Ordering::Acquire), "write failed on a live channel {ch}: {e:?}");
                            retried.fetch_add(1, Ordering::Relaxed);
                            ch = (ch + 1) % channels.len();
                        }
                    }
                }
            }
        }));
    }
    for w in workers {
        w.await.expect("worker");
    }
    assert!(dead.load(Ordering::Acquire));
    assert!(retried.load(Ordering::Relaxed) > 0, "no request hit the dead channel");
    // Read everything back over the surviving channels.
    let live: Vec<Client> = channels.iter().enumerate().filter(|(i, _)| *i != victim).map(|(_, c)| c.clone()).collect();
    let mut tasks = Vec::new();
    for i in 0..TOTAL / CHUNK as u64 {
        let f = file.on_channel(&live[i as usize % live.len()]);
        tasks.push(tokio::spawn(async move {
            let off = i * CHUNK as u64;
            let got = f.read(off, CHUNK as u32).await.expect("read");
            assert!(got[..] == pattern(42, off, CHUNK)[..], "chunk {i} differs");
        }));
        if tasks.len() >= 16 {
            for t in tasks.drain(..) {
                t.await.expect("reader");
            }
        }
    }
    for t in tasks {
        t.await.expect("reader");
    }
    assert_eq!(tree.stat("big.bin").await.expect("stat").size, TOTAL);
    file.close().await.expect("close");
    braid.assert_alive();
}

/// Many sessions (default 64) with four channels each doing mixed I/O, in two rounds; no
/// error, no session or connection left behind, and the server's memory does not grow from
/// one round to the next (what the first round adds is allocator caches, not a leak).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn load_many_sessions_and_channels() {
    let sessions: usize = std::env::var("MC_LOAD_SESSIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    let seconds: u64 = std::env::var("MC_LOAD_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let admin = free_port();
    let mut braid = Braid::start(&format!("admin = \"127.0.0.1:{admin}\""));
    // Baseline after one session has come and gone (lazy initialisation is not a leak).
    {
        let c = Client::connect(braid.addr(), &config(&[dialect::SMB311])).await.expect("connect");
        assert_session_works(&c, "warmup.bin").await;
        c.logoff().await.expect("logoff");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let baseline = braid.rss_kib();
    let mut after = Vec::new();
    for round in 0..2 {
        let rounds = load_round(braid.addr(), sessions, seconds).await;
        // Connections close asynchronously; give the server a moment to tear them down.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut status = admin_status(admin);
        while !(status.contains("\"connections\":0") && status.contains("\"sessions\":[]")) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            status = admin_status(admin);
        }
        assert!(status.contains("\"connections\":0") && status.contains("\"sessions\":[]"), "left behind after the clients left: {status}");
        after.push(braid.rss_kib());
        eprintln!("load round {round}: {sessions} sessions x 4 channels, {rounds} rounds, RSS baseline {baseline} KiB, after {} KiB", after[round]);
    }
    assert!(after[0] <= baseline + 64 * 1024, "server RSS {} KiB far above the baseline {baseline} KiB", after[0]);
    assert!(after[1] <= after[0] + 16 * 1024, "server RSS grew from {} to {} KiB between identical rounds", after[0], after[1]);
    braid.assert_alive();
}

/// GET /status from the admin endpoint.
fn admin_status(port: u16) -> String {
    use std::io::Read;
    let mut s = common::connect(port);
    s.write_all(b"GET /status HTTP/1.0\r\n\r\n").expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    // The body only, without layout whitespace (names and addresses contain no spaces).
    text.split_once("\r\n\r\n").map_or(text.clone(), |(_, b)| b.to_string()).replace([' ', '\n'], "")
}

/// One round of the load test; returns how many I/O rounds ran.
async fn load_round(addr: SocketAddr, sessions: usize, seconds: u64) -> u64 {
    let stop = Instant::now() + Duration::from_secs(seconds);
    let ops = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let ops = ops.clone();
        tasks.push(tokio::spawn(async move {
            let first = Client::connect(addr, &config(&[dialect::SMB311])).await.expect("connect");
            let mut channels = vec![first.clone()];
            for _ in 0..3 {
                channels.push(first.bind_channel(addr).await.expect("bind"));
            }
            let tree = first.tree_connect("data").await.expect("tree");
            let name = format!("load-{s}.bin");
            let file = open_rw(&tree, &name).await;
            let mut round = 0u64;
            while Instant::now() < stop {
                let mut io = Vec::new();
                for (c, ch) in channels.iter().enumerate() {
                    let f = file.on_channel(ch);
                    let t = tree.on_channel(ch);
                    let (name, seed) = (name.clone(), round * 8 + c as u64);
                    io.push(tokio::spawn(async move {
                        let off = c as u64 * 65536;
                        let data = pattern(seed, off, 65536);
                        f.write(off, &data).await.expect("write");
                        assert!(f.read(off, 65536).await.expect("read")[..] == data[..], "read back");
                        t.stat(&name).await.expect("stat");
                        if c == 0 {
                            let d = t.create("", &CreateOptions::open_dir()).await.expect("open dir");
                            assert!(!d.list("*").await.expect("list").is_empty());
                            d.close().await.expect("close dir");
                        }
                    }));
                }
                for t in io {
                    t.await.expect("io");
                }
                ops.fetch_add(1, Ordering::Relaxed);
                round += 1;
            }
            file.close().await.expect("close");
            // Half the sessions log off; the others just lose every channel.
            if s % 2 == 0 {
                first.logoff().await.expect("logoff");
            } else {
                for c in &channels {
                    c.abort_connection();
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("session task");
    }
    ops.load(Ordering::Relaxed)
}
