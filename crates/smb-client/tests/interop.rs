//! The client against real servers: the braid binary and a private Samba smbd. Every
//! operation's data is checked byte for byte, through the client and on disk.

mod common;

use std::time::Duration;

use common::{Server, PASSWORD, USER};
use rand::{Rng, RngCore, SeedableRng};
use smb_client::{dialect, Cipher, Client, ClientConfig, ClientError, CreateOptions, NtStatus, Tree};

type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn cfg() -> ClientConfig {
    // 1 MiB I/O keeps debug-build crypto fast while still needing 16-credit requests.
    ClientConfig { user: USER.into(), password: PASSWORD.into(), max_io: 1 << 20, ..ClientConfig::default() }
}

fn rng(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

fn random_bytes(r: &mut impl RngCore, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    r.fill_bytes(&mut v);
    v
}

fn expect_status<T: std::fmt::Debug>(res: Result<T, ClientError>, want: &[NtStatus], what: &str) -> R {
    match res {
        Err(ClientError::Status { status, .. }) if want.contains(&status) => Ok(()),
        other => Err(format!("{what}: expected {want:?}, got {other:?}").into()),
    }
}

/// Random writes (sizes up to max_write, random offsets) mirrored in a local model, then
/// the file checked through READs, the compound read_file and on disk.
/// `rounds` random-sized writes and reads come on top of the fixed edge cases.
async fn random_io(srv: &Server, client: &Client, tree: &Tree, name: &str, seed: u64, rounds: usize) -> R {
    let mut r = rng(seed);
    let max = client.max_write() as usize;
    let f = tree.create(name, &CreateOptions::create_overwrite()).await?;
    let mut model: Vec<u8> = Vec::new();
    let mut sizes = vec![max, 1, 0, 65537];
    for _ in 0..rounds {
        sizes.push(r.gen_range(1..=max));
    }
    for (i, n) in sizes.into_iter().enumerate() {
        let off = r.gen_range(0..(2 * max) as u64);
        let data = random_bytes(&mut r, n);
        // Writes rotate over the three ways to send a payload: copied into the request, from
        // a shared buffer (no copy when plain), and in a caller-built frame (signed in place).
        let written = match i % 3 {
            0 => f.write(off, &data).await?,
            1 => f.write_bytes(off, bytes::Bytes::from(data.clone())).await?,
            _ => {
                let mut frame = bytes::BytesMut::zeroed(smb_client::WRITE_FRAME_ROOM);
                frame.extend_from_slice(&data);
                let n = f.write_framed(off, &mut frame).await?;
                assert!(frame[smb_client::WRITE_FRAME_ROOM..] == data[..], "the frame's payload came back changed");
                n
            }
        };
        assert_eq!(written as usize, n, "short write");
        let end = off as usize + n;
        if n == 0 {
            continue; // a zero-length write changes nothing
        }
        if model.len() < end {
            model.resize(end, 0);
        }
        model[off as usize..end].copy_from_slice(&data);
    }
    // Reads at random places, including across and past EOF.
    for _ in 0..rounds + 2 {
        let off = r.gen_range(0..model.len() as u64 + 10);
        let len = r.gen_range(0..=client.max_read());
        let got = f.read(off, len).await?;
        let lo = (off as usize).min(model.len());
        let hi = (off as usize + len as usize).min(model.len());
        assert!(got[..] == model[lo..hi], "{}: read {off}+{len} differs", srv.name);
    }
    let st = f.stat().await?;
    assert_eq!(st.size, model.len() as u64);
    assert!(!st.is_dir);
    f.flush().await?;
    f.close().await?;
    assert!(tree.read_file(name).await? == model, "{}: read_file differs", srv.name);
    let on_disk = std::fs::read(srv.data_dir.join(name)).map_err(|e| format!("{}: {e}", srv.data_dir.join(name).display()))?;
    assert!(on_disk == model, "{}: file on disk differs", srv.name);
    tree.remove(name).await?;
    Ok(())
}

async fn dialects(srv: &Server) -> R {
    for (d, tag) in [(dialect::SMB210, "21"), (dialect::SMB302, "302"), (dialect::SMB311, "311")] {
        let c = Client::connect(srv.addr, &ClientConfig { dialects: vec![d], sign: true, ..cfg() }).await?;
        assert_eq!(c.dialect(), d);
        assert!(c.max_write() > 65536, "LARGE_MTU expected");
        let t = c.tree_connect("data").await?;
        random_io(srv, &c, &t, &format!("dialect-{tag}.bin"), u64::from(d), 3).await?;
        t.disconnect().await?;
        c.logoff().await?;
    }
    // Unsigned: WRITE payloads leave the client without a copy.
    let c = Client::connect(srv.addr, &ClientConfig { dialects: vec![dialect::SMB311], sign: false, ..cfg() }).await?;
    let t = c.tree_connect("data").await?;
    random_io(srv, &c, &t, "plain-311.bin", 311, 3).await?;
    c.logoff().await?;
    Ok(())
}

async fn encryption(srv: &Server) -> R {
    for (i, cipher) in [Cipher::Aes128Gcm, Cipher::Aes128Ccm, Cipher::Aes256Gcm].into_iter().enumerate() {
        let c = Client::connect(srv.addr, &ClientConfig { dialects: vec![dialect::SMB311], encrypt: true, ciphers: vec![cipher], ..cfg() }).await?;
        assert_eq!(c.cipher(), Some(cipher));
        assert!(c.is_encrypted());
        let t = c.tree_connect("data").await?;
        // Debug-build AES is slow: fewer rounds, the edge cases stay.
        random_io(srv, &c, &t, &format!("enc-{i}.bin"), 100 + i as u64, 1).await?;
        c.logoff().await?;
    }
    // 3.0.2 has exactly one cipher, AES-128-CCM.
    let c = Client::connect(srv.addr, &ClientConfig { dialects: vec![dialect::SMB302], encrypt: true, ..cfg() }).await?;
    assert_eq!(c.cipher(), Some(Cipher::Aes128Ccm));
    let t = c.tree_connect("data").await?;
    random_io(srv, &c, &t, "enc-302.bin", 200, 0).await?;
    Ok(())
}

async fn bad_logon(srv: &Server) -> R {
    let err = Client::connect(srv.addr, &ClientConfig { password: "not-the-password".into(), ..cfg() }).await.unwrap_err();
    assert_eq!(err.status(), Some(NtStatus::LOGON_FAILURE), "{err:?}");
    assert_eq!(err.to_string(), "server refused logon: STATUS_LOGON_FAILURE");
    let c = Client::connect(srv.addr, &cfg()).await?;
    let err = c.tree_connect("no-such-share").await.unwrap_err();
    assert!(err.to_string().starts_with("server refused share: STATUS_BAD_NETWORK_NAME"), "{err}");
    Ok(())
}

async fn namespace(srv: &Server) -> R {
    let c = Client::connect(srv.addr, &ClientConfig { sign: true, ..cfg() }).await?;
    let t = c.tree_connect("data").await?;
    t.mkdir("ns").await?;
    expect_status(t.mkdir("ns").await, &[NtStatus::OBJECT_NAME_COLLISION], "mkdir twice")?;
    assert!(t.stat("ns").await?.is_dir);
    // Enough entries with long names for several QUERY_DIRECTORY pages.
    let names: Vec<String> = (0..400).map(|i| format!("entry-{i:04}-{}", "x".repeat(100))).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for n in names.clone() {
        let t = t.clone();
        tasks.spawn(async move {
            let f = t.create(&format!("ns/{n}"), &CreateOptions::create_overwrite()).await?;
            f.write(0, n.as_bytes()).await?;
            f.close().await
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    let d = t.create("ns", &CreateOptions::open_dir()).await?;
    let mut listed: Vec<String> = d.list("*").await?.into_iter().map(|e| e.name).filter(|n| n != "." && n != "..").collect();
    listed.sort();
    assert_eq!(listed, names);
    let one = d.list("entry-0007*").await?;
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].stat.size, names[7].len() as u64);
    d.close().await?;

    expect_status(t.rmdir("ns").await, &[NtStatus::DIRECTORY_NOT_EMPTY], "rmdir non-empty")?;
    // rename: refused onto an existing name unless replacing.
    expect_status(t.rename(&format!("ns/{}", names[0]), &format!("ns/{}", names[1]), false).await, &[NtStatus::OBJECT_NAME_COLLISION], "rename")?;
    t.rename(&format!("ns/{}", names[0]), &format!("ns/{}", names[1]), true).await?;
    assert_eq!(t.read_file(&format!("ns/{}", names[1])).await?, names[0].as_bytes());
    t.rename(&format!("ns/{}", names[1]), "moved.txt", false).await?;
    assert_eq!(std::fs::read(srv.data_dir.join("moved.txt"))?, names[0].as_bytes());
    expect_status(t.stat(&format!("ns/{}", names[1])).await, &[NtStatus::OBJECT_NAME_NOT_FOUND], "stat renamed")?;
    for n in &names[2..] {
        t.remove(&format!("ns/{n}")).await?;
    }
    t.rmdir("ns").await?;
    t.remove("moved.txt").await?;
    expect_status(t.stat("ns").await, &[NtStatus::OBJECT_NAME_NOT_FOUND], "stat removed dir")?;
    assert!(!srv.data_dir.join("ns").exists());

    // set_len grows with zeros and shrinks.
    let f = t.create("len.bin", &CreateOptions::create_overwrite()).await?;
    f.write(0, b"abcdef").await?;
    f.set_len(100_000).await?;
    assert_eq!(f.stat().await?.size, 100_000);
    let back = f.read(0, 100_000).await?;
    assert_eq!(&back[..6], b"abcdef");
    assert!(back[6..].iter().all(|b| *b == 0));
    f.set_len(3).await?;
    assert_eq!(&f.read(0, 10).await?[..], b"abc");
    f.close().await?;
    assert_eq!(t.stat("len.bin").await?.size, 3);
    t.remove("len.bin").await?;
    t.disconnect().await?;
    c.logoff().await?;
    Ok(())
}

async fn locks(srv: &Server) -> R {
    let c = Client::connect(srv.addr, &cfg()).await?;
    let t = c.tree_connect("data").await?;
    let a = t.create("locks.bin", &CreateOptions::create_overwrite()).await?;
    a.write(0, &[7u8; 4096]).await?;
    let b = t.create("locks.bin", &CreateOptions::open_rw()).await?;
    a.lock(0, 100, true, true).await?;
    expect_status(b.lock(50, 10, true, true).await, &[NtStatus::LOCK_NOT_GRANTED, NtStatus::FILE_LOCK_CONFLICT], "conflicting lock")?;
    // Writes into a range locked by another open fail.
    expect_status(b.write(10, b"x").await, &[NtStatus::FILE_LOCK_CONFLICT], "write in locked range")?;
    b.lock(200, 10, false, true).await?;
    b.unlock(200, 10).await?;
    expect_status(b.unlock(0, 100).await, &[NtStatus::RANGE_NOT_LOCKED], "unlock of another's lock")?;
    // A blocking lock waits (STATUS_PENDING interim, then the final response) until the
    // holder unlocks.
    let b2 = b.clone();
    let waiter = tokio::spawn(async move { b2.lock(0, 100, true, false).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "blocking lock returned while the range was held");
    a.unlock(0, 100).await?;
    tokio::time::timeout(Duration::from_secs(10), waiter).await???;
    b.unlock(0, 100).await?;
    a.close().await?;
    b.close().await?;
    t.remove("locks.bin").await?;
    Ok(())
}

/// 64 reads in flight at once on one connection, each checked.
async fn concurrency(srv: &Server) -> R {
    let c = Client::connect(srv.addr, &ClientConfig { sign: true, ..cfg() }).await?;
    let t = c.tree_connect("data").await?;
    let chunk = 64 * 1024;
    let data = random_bytes(&mut rng(7), 64 * chunk);
    let f = t.create("many.bin", &CreateOptions::create_overwrite()).await?;
    f.write(0, &data).await?;
    let mut tasks = Vec::new();
    for i in 0..64usize {
        let f = f.clone();
        tasks.push(tokio::spawn(async move { (i, f.read((i * chunk) as u64, chunk as u32).await) }));
    }
    for h in tasks {
        let (i, got) = h.await?;
        assert!(got?[..] == data[i * chunk..(i + 1) * chunk], "{}: concurrent read {i} differs", srv.name);
    }
    // And a mix of large writes and reads from several tasks at once.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..4u64 {
        let (f, piece) = (f.clone(), random_bytes(&mut rng(50 + i), c.max_write() as usize / 2));
        tasks.spawn(async move {
            let off = (1 << 23) + i * piece.len() as u64;
            f.write(off, &piece).await?;
            let back = f.read(off, piece.len() as u32).await?;
            assert!(back[..] == piece[..]);
            Ok::<_, ClientError>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    f.close().await?;
    t.remove("many.bin").await?;
    Ok(())
}

async fn multichannel(srv: &Server) -> R {
    let c = Client::connect(srv.addr, &cfg()).await?;
    let ipc = c.tree_connect("IPC$").await?;
    match c.query_interfaces(&ipc).await {
        Ok(ifaces) => eprintln!("{}: {} network interface(s): {:?}", srv.name, ifaces.len(), ifaces),
        Err(e) => eprintln!("{}: query_interfaces: {e}", srv.name),
    }
    match c.bind_channel(srv.addr).await {
        Err(ClientError::NotSupported(why)) => {
            eprintln!("{}: bind_channel not supported: {why}", srv.name);
            Ok(())
        }
        Err(e) => Err(format!("bind_channel: {e}").into()),
        Ok(ch2) => {
            eprintln!("{}: second channel bound", srv.name);
            let t = c.tree_connect("data").await?;
            let f = t.create("mc.bin", &CreateOptions::create_overwrite()).await?;
            let data = random_bytes(&mut rng(9), 300_000);
            f.on_channel(&ch2).write(0, &data).await?;
            assert!(f.read(0, 300_000).await?[..] == data[..]);
            assert!(f.on_channel(&ch2).read(0, 300_000).await?[..] == data[..]);
            f.close().await?;
            t.remove("mc.bin").await?;
            Ok(())
        }
    }
}

/// A durable v2 open survives its connection: written, the connection dropped, reclaimed
/// (DH2C) on a new connection with the same persistent FileId, and read back; a second reclaim of the
/// same open (now connected again) is refused.
async fn durable(srv: &Server) -> R {
    let opts = CreateOptions { durable: Some(smb_client::new_create_guid()), ..CreateOptions::create_overwrite() };
    let data = random_bytes(&mut rng(23), 100_000);
    let (id, guid) = {
        let c = Client::connect(srv.addr, &cfg()).await?;
        let t = c.tree_connect("data").await?;
        let f = t.create("durable.bin", &opts).await?;
        let guid = f.create_guid().ok_or("the server did not grant the durable open")?;
        f.write(0, &data).await?;
        (f.file_id(), guid)
        // The client, its tree and file drop here: the TCP connection closes unannounced.
    };
    let c = Client::connect(srv.addr, &cfg()).await?;
    let t = c.tree_connect("data").await?;
    let mut f = None;
    // The server may not have seen the old connection end yet.
    for _ in 0..50 {
        match t.reconnect("durable.bin", &opts, id, guid).await {
            Ok(g) => {
                f = Some(g);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let f = f.ok_or("reconnect refused")?;
    // The persistent half names the open; Samba hands out a new volatile half on a
    // reconnect (MS-SMB2 leaves it to the server), Braid keeps both.
    assert_eq!(f.file_id().persistent, id.persistent, "the reclaimed open is another open");
    assert_eq!(&f.read(0, data.len() as u32).await?[..], &data[..], "the reclaimed open reads other bytes");
    let again = t.reconnect("durable.bin", &opts, id, guid).await;
    assert!(again.is_err(), "a connected open was reclaimed twice: {again:?}");
    f.close().await?;
    t.remove("durable.bin").await?;
    Ok(())
}

/// Replays (SMB2_FLAGS_REPLAY_OPERATION). A durable CREATE sent again with its CreateGuid
/// before any request named the open is answered from the server's replay cache with the
/// same open (without the flag: DUPLICATE_OBJECTID). After a dropped connection, the
/// client's next connection (same ClientGuid, PreviousSessionId) replays the CREATE and
/// Braid answers with the disconnected durable open, data intact; a replayed WRITE on it
/// is accepted.
async fn replays(srv: &Server) -> R {
    // FILE_OPEN_IF: a server that opens the file anew on the replay keeps its data.
    let (durable, disposition) = (Some(smb_client::new_create_guid()), smb_wire::msg::create::disposition::OPEN_IF);
    let opts = CreateOptions { durable, disposition, ..CreateOptions::create_overwrite() };
    let data = random_bytes(&mut rng(31), 50_000);
    let c = Client::connect(srv.addr, &cfg()).await?;
    let t = c.tree_connect("data").await?;
    let f = t.create("replay.bin", &opts).await?;
    f.create_guid().ok_or("the server did not grant the durable open")?;
    let again = t.create_replay("replay.bin", &opts).await?;
    assert_eq!(again.file_id(), f.file_id(), "a replayed CREATE made another open");
    let dup = t.create("replay.bin", &opts).await.err().and_then(|e| e.status());
    assert_eq!(dup, Some(NtStatus::DUPLICATE_OBJECTID), "the CreateGuid was reused without the replay flag");
    f.write(0, &data).await?;
    let id = f.file_id();
    let c2 = c.connect_again(srv.addr).await?;
    drop((f, again, t, c));
    let t2 = c2.tree_connect("data").await?;
    let g = t2.create_replay("replay.bin", &opts).await?;
    // Samba opens the file anew (a replay finds only opens of a live session there).
    if srv.name == "braid" {
        assert_eq!(g.file_id().persistent, id.persistent, "the replayed CREATE did not find the durable open");
    }
    assert_eq!(g.replaying().write(data.len() as u64, b"!").await?, 1);
    let back = g.read(0, data.len() as u32 + 1).await?;
    assert!(back[..data.len()] == data[..] && back[data.len()] == b'!', "the durable open lost its data");
    g.close().await?;
    t2.remove("replay.bin").await?;
    Ok(())
}

/// One named case of the suite.
type Case<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = R> + 'a>>;

async fn suite(srv: &Server) {
    let cases: Vec<(&str, Case<'_>)> = vec![
        ("dialects 2.1/3.0.2/3.1.1 with signing", Box::pin(dialects(srv))),
        ("encryption AES-128-GCM/128-CCM/256-GCM", Box::pin(encryption(srv))),
        ("wrong password and share", Box::pin(bad_logon(srv))),
        ("mkdir/list/rename/remove/rmdir/set_len", Box::pin(namespace(srv))),
        ("byte-range locks", Box::pin(locks(srv))),
        ("64 concurrent reads", Box::pin(concurrency(srv))),
        ("multichannel", Box::pin(multichannel(srv))),
        ("durable v2 open reclaimed after a dropped connection", Box::pin(durable(srv))),
        ("replayed CREATE and WRITE", Box::pin(replays(srv))),
    ];
    let mut failed = Vec::new();
    for (name, fut) in cases {
        let t0 = std::time::Instant::now();
        match tokio::time::timeout(Duration::from_secs(60), fut).await {
            Ok(Ok(())) => eprintln!("{}: {name}: ok ({:.1}s)", srv.name, t0.elapsed().as_secs_f64()),
            Ok(Err(e)) => failed.push(format!("{}: {name}: {e}", srv.name)),
            Err(_) => failed.push(format!("{}: {name}: timed out", srv.name)),
        }
    }
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn against_braid() {
    let srv = common::braid(4481);
    suite(&srv).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn against_samba() {
    let Some(srv) = common::samba(4482) else { return };
    suite(&srv).await;
}
