use std::collections::HashMap;
use std::sync::Mutex;

use nfs_wire::nlm4::{Nlm4Args, Nlm4Lock};
use nfs_wire::record::{reserve_mark, set_mark, RecordReader};
use nfs_wire::rpc::{decode_call, encode_accepted, AcceptStat, Auth};
use nfs_wire::XdrWriter;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// What the fake server answers.
#[derive(Clone, Copy)]
enum Answer {
    /// An NLM server that keeps a lock table: GRANTED unless another owner holds the file
    /// (then DENIED); after `deny_after` calls in all, the given status.
    Nlm { deny_after: u64, then: Nlm4Stats },
    /// Every call: the result's cookie is changed.
    WrongCookie,
    /// Every call: PROG_UNAVAIL (a port that serves something else).
    ProgUnavail,
    /// A portmapper: GETPORT answers this port.
    Portmap(u32),
}

#[derive(Default)]
struct Fake {
    calls: u64,
    /// Holder of each file's lock: (file handle) -> owner handle.
    held: HashMap<Vec<u8>, Vec<u8>>,
    /// Every LOCK's arguments, to check what the client sent.
    locks: Vec<Nlm4LockArgs>,
}

/// A fake RPC server on a loopback port: each connection's calls answered one by one.
async fn serve(answer: Answer) -> (SocketAddr, Arc<Mutex<Fake>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let fake = Arc::new(Mutex::new(Fake::default()));
    let state = fake.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let state = state.clone();
            tokio::spawn(async move {
                let mut rr = RecordReader::new(1 << 20);
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    rr.feed(&buf[..n]);
                    while let Ok(Some(rec)) = rr.next_record() {
                        let reply = answer_call(&rec, answer, &state);
                        if s.write_all(&reply).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, fake)
}

fn answer_call(rec: &[u8], answer: Answer, state: &Mutex<Fake>) -> Vec<u8> {
    let (hdr, args) = decode_call(rec).unwrap();
    let mut out = Vec::new();
    let at = reserve_mark(&mut out);
    match answer {
        Answer::ProgUnavail => encode_accepted(hdr.xid, AcceptStat::ProgUnavail, &mut out),
        Answer::Portmap(port) => {
            assert_eq!((hdr.prog, hdr.vers, hdr.proc_), (PROG_PORTMAP, PMAP_VERSION, PROC_GETADDR));
            let m = Mapping::decode(&mut XdrReader::new(args)).unwrap();
            assert_eq!((m.prog, m.vers, m.prot), (NLM_PROG, NLM4_VERS, IPPROTO_TCP));
            encode_accepted(hdr.xid, AcceptStat::Success, &mut out);
            XdrWriter::new(&mut out).u32(port);
        }
        Answer::Nlm { .. } | Answer::WrongCookie => {
            assert_eq!((hdr.prog, hdr.vers), (NLM_PROG, NLM4_VERS));
            let p = Nlm4Proc::from_u32(hdr.proc_).unwrap();
            let mut st = state.lock().unwrap();
            st.calls += 1;
            let (cookie, stat) = match Nlm4Args::decode(p, &mut XdrReader::new(args)).unwrap() {
                Nlm4Args::Lock(a) => {
                    let stat = match st.held.get(a.alock.fh.as_bytes()) {
                        Some(owner) if owner != a.alock.oh.as_bytes() => Nlm4Stats::Denied,
                        _ => {
                            st.held.insert(a.alock.fh.0.clone(), a.alock.oh.0.clone());
                            Nlm4Stats::Granted
                        }
                    };
                    st.locks.push(a.clone());
                    (a.cookie, stat)
                }
                Nlm4Args::Unlock(a) => {
                    if st.held.get(a.alock.fh.as_bytes()).is_some_and(|o| o == a.alock.oh.as_bytes()) {
                        st.held.remove(a.alock.fh.as_bytes());
                    }
                    (a.cookie, Nlm4Stats::Granted)
                }
                other => panic!("unexpected call {other:?}"),
            };
            let (cookie, stat) = match answer {
                Answer::WrongCookie => (vec![9u8; 8].into(), stat),
                Answer::Nlm { deny_after, then } if st.calls > deny_after => (cookie, then),
                _ => (cookie, stat),
            };
            encode_accepted(hdr.xid, AcceptStat::Success, &mut out);
            Nlm4Res { cookie, stat }.encode(&mut XdrWriter::new(&mut out));
        }
    }
    set_mark(&mut out, at);
    out
}

/// A client of the fake server, as `set_up` makes one (without the NFS part).
async fn client(addr: SocketAddr, index: u32, fh: &[u8]) -> LockClient {
    let conn = RpcConn::connect(addr, Auth::None).await.unwrap();
    let alock = Nlm4Lock {
        caller_name: b"bench-host".as_slice().into(),
        fh: fh.into(),
        oh: format!("owner{index}").into_bytes().into(),
        svid: index as i32 + 1,
        l_offset: 0,
        l_len: 1,
    };
    let lock = Nlm4LockArgs { cookie: Vec::new().into(), block: false, exclusive: true, alock, reclaim: false, state: NSM_STATE };
    LockClient { index, conn, addr, lock, cookie: 0 }
}

fn short_window() -> (Workload, Window) {
    let wl = Workload { nlm_lock: true, clients: 2, duration_s: 0.3, warmup_s: 0.05, ..Workload::default() };
    let win = Window::new(&wl);
    (wl, win)
}

#[tokio::test]
async fn pairs_are_counted_and_every_call_is_granted() {
    let (addr, fake) = serve(Answer::Nlm { deny_after: u64::MAX, then: Nlm4Stats::Granted }).await;
    let (wl, win) = short_window();
    let live = Arc::new(Live::new(&wl));
    let a = tokio::spawn(client(addr, 0, b"fh-a").await.run(win, live.clone()));
    let b = tokio::spawn(client(addr, 1, b"fh-b").await.run(win, live.clone()));
    let (ra, rb) = (a.await.unwrap(), b.await.unwrap());
    let (ra, rb) = (ra.1.unwrap(), rb.1.unwrap());
    let measured = ra.ops[OP].count + rb.ops[OP].count;
    assert!(measured > 10, "{measured} pairs in 0.3 s");
    let st = fake.lock().unwrap();
    // Every pair is two calls, and warm-up pairs are sent but not counted.
    assert!(st.calls >= 2 * measured && st.calls % 2 == 0, "{} calls for {measured} pairs", st.calls);
    assert!(st.held.is_empty(), "a lock was left held");
    let first = &st.locks[0];
    assert!(!first.block && first.exclusive && !first.reclaim);
    assert_eq!((first.alock.l_offset, first.alock.l_len), (0, 1));
    // A new cookie on each call of a client.
    let mine: Vec<_> = st.locks.iter().filter(|l| l.alock.oh.as_bytes() == b"owner0").collect();
    assert_ne!(mine[0].cookie, mine[1].cookie);
}

#[tokio::test]
async fn a_refusal_fails_the_run_loudly() {
    let (addr, _fake) = serve(Answer::Nlm { deny_after: 4, then: Nlm4Stats::DeniedGracePeriod }).await;
    let (wl, win) = short_window();
    let live = Arc::new(Live::new(&wl));
    let (_, r) = client(addr, 3, b"fh").await.run(win, live.clone()).await;
    let e = r.unwrap_err().to_string();
    assert!(e.starts_with("client 3: NLM4 LOCK to 127.0.0.1:"), "{e}");
    assert!(e.contains("NLM4_DENIED_GRACE_PERIOD (the server is in its grace period"), "{e}");
    assert!(live.stop.load(Ordering::Relaxed), "the other clients are told to stop");
}

#[tokio::test]
async fn two_owners_of_one_range_are_denied() {
    // The fake server's lock table, through the client: the second owner of a held lock
    // gets DENIED, which is an error too.
    let (addr, _fake) = serve(Answer::Nlm { deny_after: u64::MAX, then: Nlm4Stats::Granted }).await;
    let mut a = client(addr, 0, b"same").await;
    let mut b = client(addr, 1, b"same").await;
    a.call(Nlm4Proc::Lock).await.unwrap();
    let e = b.call(Nlm4Proc::Lock).await.unwrap_err().to_string();
    assert!(e.contains("NLM4_DENIED (another owner holds the range"), "{e}");
    a.call(Nlm4Proc::Unlock).await.unwrap();
    b.pair().await.unwrap();
}

#[tokio::test]
async fn a_wrong_cookie_or_no_nlm_is_an_error() {
    let (addr, _fake) = serve(Answer::WrongCookie).await;
    let e = client(addr, 0, b"fh").await.pair().await.unwrap_err().to_string();
    assert!(e.contains("granted, but with cookie"), "{e}");
    let (addr, _fake) = serve(Answer::ProgUnavail).await;
    let e = client(addr, 0, b"fh").await.pair().await.unwrap_err().to_string();
    assert!(e.contains("NLM4 LOCK") && e.contains("program unavailable"), "{e}");
}

#[tokio::test]
async fn getport_asks_the_portmapper() {
    let (addr, _fake) = serve(Answer::Portmap(4045)).await;
    assert_eq!(getport(addr, NLM_PROG, NLM4_VERS).await.unwrap(), 4045);
    let (addr, _fake) = serve(Answer::Portmap(0)).await;
    let e = getport(addr, NLM_PROG, NLM4_VERS).await.unwrap_err().to_string();
    assert!(e.contains("GETPORT of program 100021 version 4 over TCP") && e.ends_with("not registered"), "{e}");
    let (addr, _fake) = serve(Answer::Portmap(70000)).await;
    assert!(getport(addr, NLM_PROG, NLM4_VERS).await.unwrap_err().to_string().contains("out of range"));
}

#[test]
fn statuses_by_their_protocol_names() {
    assert_eq!(stat_name(Nlm4Stats::DeniedNolocks), "NLM4_DENIED_NOLOCKS");
    assert!(check(&Nlm4Res { cookie: vec![1].into(), stat: Nlm4Stats::Granted }, &[1]).is_ok());
    let e = check(&Nlm4Res { cookie: vec![1].into(), stat: Nlm4Stats::DeniedNolocks }, &[1]).unwrap_err();
    assert!(e.starts_with("NLM4_DENIED_NOLOCKS (out of lock resources"), "{e}");
    assert_eq!(check(&Nlm4Res { cookie: vec![1].into(), stat: Nlm4Stats::Failed }, &[1]).unwrap_err(), "NLM4_FAILED");
}
