//! `--nlm-lock`: NLM v4 byte-range lock and unlock pairs (RFC 1813 appendix II) against an
//! NFSv3 server's lock manager. Each of `--clients N` clients MOUNTs the export, creates its
//! own file `DIR/lockN.dat` over NFS, opens its own TCP connection to the NLM service and
//! loops LOCK (non-blocking, exclusive, byte 0, its own owner: `svid` N+1 and `oh`
//! "braid-bench.PID.N") then UNLOCK of the same range. One pair is one operation in the
//! report. Every answer must be `NLM4_GRANTED` with the call's cookie: anything else stops
//! the run with an error naming the client, the procedure and the status, so a failed call
//! is never counted as work.
//!
//! Own files, not disjoint ranges of one shared file: the run measures what one lock and
//! unlock costs a server as the clients grow (its per-request path and any state all
//! clients share), not how it serializes many owners on one file's lock list, which is a
//! different question.
//!
//! The NLM port is `--nlm-port`, or the portmapper's answer to GETPORT (program 100021,
//! version 4, TCP) on port 111 of the target's host.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use nfs_wire::nlm4::{Nlm4LockArgs, Nlm4Proc, Nlm4Res, Nlm4Stats, Nlm4UnlockArgs, NLM4_VERS, NLM_PROG};
use nfs_wire::portmap::{Mapping, IPPROTO_TCP, PMAP_PORT, PMAP_VERSION, PROC_GETADDR};
use nfs_wire::rpc::PROG_PORTMAP;
use nfs_wire::XdrReader;
use tokio::task::JoinSet;

use super::conn::{results, RpcConn};
use super::NfsTarget;
use crate::cpu::CpuTimes;
use crate::report::{Fairness, Recorder, Report};
use crate::run::{progress_bar, spawn_ticker, Live, Window};
use crate::session::{Session, Target};
use crate::timeline::Kind;
use crate::workload::Workload;
use crate::BenchError;

/// The operation's name in the report.
pub const OP: &str = "lock+unlock";

/// Clients set up at once (each is a MOUNT, a CREATE and a first lock and unlock).
const CONNECT_AT_ONCE: usize = 16;

/// How long a call may wait for its reply before the run fails: a server that accepts a
/// connection but never answers must not hang a bounded run.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The NSM state sent in LOCK: odd means "up" (NSM's convention); a client that never
/// restarts keeps one.
const NSM_STATE: i32 = 1;

/// Runs the lock workload against `target`; `nlm_port` None asks the portmapper.
pub async fn run(target: &NfsTarget, wl: &Workload, nlm_port: Option<u16>, progress: bool) -> Result<Report, BenchError> {
    wl.validate()?;
    if !wl.nlm_lock {
        return Err(BenchError::BadInput("nfs::nlm::run is the --nlm-lock workload: set nlm_lock".into()));
    }
    let (nfs_addr, _) = target.url.resolve()?;
    let nlm_addr = match nlm_port {
        Some(p) => SocketAddr::new(nfs_addr.ip(), p),
        None => {
            let pmap = SocketAddr::new(nfs_addr.ip(), PMAP_PORT);
            let port = getport(pmap, NLM_PROG, NLM4_VERS).await.map_err(|e| target.connect_error(format!("{e} (or give --nlm-port)")))?;
            SocketAddr::new(nfs_addr.ip(), port)
        }
    };
    let name = format!("{} (NLM {nlm_addr})", target.describe());
    let bar = progress_bar(progress);
    let result = run_clients(target, wl, nlm_addr, &name, &bar).await;
    bar.finish_and_clear();
    result
}

/// Asks the portmapper (version 2, over TCP) at `pmap` where `prog` `vers` listens over TCP.
pub async fn getport(pmap: SocketAddr, prog: u32, vers: u32) -> Result<u16, BenchError> {
    let what = format!("GETPORT of program {prog} version {vers} over TCP from the portmapper at {pmap}");
    let fail = |e: String| BenchError::Io(format!("{what}: {e}"));
    let conn = RpcConn::connect(pmap, nfs_wire::rpc::Auth::None).await.map_err(|e| fail(e.to_string()))?;
    let mapping = Mapping { prog, vers, prot: IPPROTO_TCP, port: 0 };
    let call = conn.call(PROG_PORTMAP, PMAP_VERSION, PROC_GETADDR, |w| mapping.encode(w));
    let rec = with_timeout(call).await.map_err(|e| fail(e.to_string()))?;
    let port = XdrReader::new(results(&rec).map_err(|e| fail(e.to_string()))?).u32().map_err(|e| fail(format!("malformed reply: {e}")))?;
    match u16::try_from(port) {
        Ok(0) => Err(fail("not registered".into())),
        Ok(p) => Ok(p),
        Err(_) => Err(fail(format!("port {port} is out of range"))),
    }
}

async fn with_timeout<T>(f: impl std::future::Future<Output = Result<T, BenchError>>) -> Result<T, BenchError> {
    tokio::time::timeout(REPLY_TIMEOUT, f).await.map_err(|_| BenchError::Io(format!("no reply in {} s", REPLY_TIMEOUT.as_secs())))?
}

async fn run_clients(
    target: &NfsTarget,
    wl: &Workload,
    nlm_addr: SocketAddr,
    name: &str,
    bar: &indicatif::ProgressBar,
) -> Result<Report, BenchError> {
    // One session makes the directory first, so the clients' CREATEs find it.
    target.connect().await?.mkdir(&wl.dir).await?;
    let host = hostname();
    let n = wl.clients.max(1);
    let mut clients: Vec<Option<LockClient>> = (0..n).map(|_| None).collect();
    let mut pending = stream::iter(0..n)
        .map(|i| {
            let host = host.clone();
            async move { (i, LockClient::set_up(target, wl, nlm_addr, &host, i).await) }
        })
        .buffer_unordered(CONNECT_AT_ONCE);
    let mut done = 0;
    while let Some((i, c)) = pending.next().await {
        clients[i as usize] = Some(c.map_err(|e| target.connect_error(format!("client {i} of {n}: {e}")))?);
        done += 1;
        bar.set_message(format!("{name}: {done}/{n} clients locked and unlocked once"));
    }
    drop(pending);

    let live = Arc::new(Live::new(wl));
    let win = Window::new(wl);
    let ticker = spawn_ticker(bar.clone(), live.clone(), win, name.to_string());
    let mut set = JoinSet::new();
    for c in clients.into_iter().flatten() {
        set.spawn(c.run(win, live.clone()));
    }
    // Clients run to the end of the window, so one that ends before it has failed: stop
    // then rather than at the end.
    let mut ended = Vec::new();
    let cpu0 = sleep_unless_one_ends(&mut set, win.measure_from, &mut ended).await.then(CpuTimes::now);
    let cpu1 = match cpu0 {
        Some(_) => sleep_unless_one_ends(&mut set, win.end, &mut ended).await.then(CpuTimes::now),
        None => None,
    };
    live.stop.store(true, Ordering::Relaxed);
    while let Some(r) = set.join_next().await {
        ended.push(r);
    }
    let _ = ticker.await;
    let mut rec = Recorder::default();
    let mut per_client = vec![0; n as usize];
    let mut failed = None;
    for r in ended {
        match r {
            Ok((k, Ok(c))) => {
                per_client[k as usize] = c.total().count;
                rec.merge(&c);
            }
            // The first failure stopped the others; report it, not their interrupted calls.
            Ok((_, Err(e))) => failed = failed.or(Some(e)),
            Err(e) => failed = failed.or(Some(BenchError::Io(format!("client task failed: {e}")))),
        }
    }
    let (Some(cpu0), Some(cpu1), None) = (cpu0, cpu1, failed.as_ref()) else {
        return Err(failed.unwrap_or_else(|| BenchError::Io("a client stopped before the end of the run".into())));
    };
    let elapsed = win.end.duration_since(win.measure_from);
    Ok(Report::new(name.to_string(), wl, &rec, elapsed, cpu1.since(&cpu0))
        .with_timeline(live.timeline.series())
        .with_fairness(Fairness::from_counts(per_client)))
}

type Ended = Result<(u32, Result<Recorder, BenchError>), tokio::task::JoinError>;

/// Sleeps until `until`; false (with the failure in `ended`) when a client failed first. A
/// client that ends well is kept in `ended` (it ends at the end of the window, or when
/// another failed).
async fn sleep_unless_one_ends(set: &mut JoinSet<(u32, Result<Recorder, BenchError>)>, until: Instant, ended: &mut Vec<Ended>) -> bool {
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => return true,
            r = set.join_next() => match r {
                None => {
                    tokio::time::sleep_until(until.into()).await;
                    return true;
                }
                Some(r) => {
                    let failed = !matches!(r, Ok((_, Ok(_))));
                    ended.push(r);
                    if failed {
                        return false;
                    }
                }
            },
        }
    }
}

/// This host's name, the `caller_name` of every lock (as Linux's lockd sends it).
fn hostname() -> String {
    let name = rustix::system::uname().nodename().to_string_lossy().into_owned();
    if name.is_empty() {
        "braid-bench".into()
    } else {
        name
    }
}

/// One client: its NLM connection and the lock it takes and gives back.
struct LockClient {
    index: u32,
    conn: RpcConn,
    addr: SocketAddr,
    lock: Nlm4LockArgs,
    cookie: u64,
}

impl LockClient {
    /// MOUNTs, creates the client's file, connects to the NLM service and takes and gives
    /// back the lock once, so a server that refuses locks fails before the clock starts.
    async fn set_up(target: &NfsTarget, wl: &Workload, addr: SocketAddr, host: &str, index: u32) -> Result<Self, BenchError> {
        let session = target.connect().await?;
        let fh = session.create(&lock_path(wl, index)).await?;
        drop(session);
        let conn = RpcConn::connect(addr, target.cred()).await.map_err(|e| BenchError::Io(format!("NLM: {e}")))?;
        let svid = i32::try_from(index).unwrap_or(i32::MAX - 1).saturating_add(1);
        let alock = nfs_wire::nlm4::Nlm4Lock {
            caller_name: host.as_bytes().into(),
            fh: fh.as_bytes().into(),
            oh: format!("braid-bench.{}.{index}", std::process::id()).into_bytes().into(),
            svid,
            l_offset: 0,
            l_len: 1,
        };
        let lock = Nlm4LockArgs { cookie: Vec::new().into(), block: false, exclusive: true, alock, reclaim: false, state: NSM_STATE };
        let mut c = LockClient { index, conn, addr, lock, cookie: 0 };
        c.pair().await?;
        Ok(c)
    }

    /// One LOCK and its UNLOCK; an error unless both are granted.
    async fn pair(&mut self) -> Result<(), BenchError> {
        self.call(Nlm4Proc::Lock).await?;
        self.call(Nlm4Proc::Unlock).await
    }

    /// LOCK or UNLOCK of the client's range, with a new cookie; checks the answer.
    async fn call(&mut self, p: Nlm4Proc) -> Result<(), BenchError> {
        self.cookie += 1;
        self.lock.cookie = self.cookie.to_be_bytes().to_vec().into();
        let args = &self.lock;
        let sent = self.conn.call(NLM_PROG, NLM4_VERS, p as u32, |w| match p {
            Nlm4Proc::Unlock => Nlm4UnlockArgs { cookie: args.cookie.clone(), alock: args.alock.clone() }.encode(w),
            _ => args.encode(w),
        });
        let what = if p == Nlm4Proc::Unlock { "UNLOCK" } else { "LOCK" };
        let fail = |msg: String| BenchError::Io(format!("NLM4 {what} to {}: {msg}", self.addr));
        let rec = with_timeout(sent).await.map_err(|e| fail(e.to_string()))?;
        let res = Nlm4Res::decode(&mut XdrReader::new(results(&rec).map_err(|e| fail(e.to_string()))?))
            .map_err(|e| fail(format!("malformed reply: {e}")))?;
        check(&res, &self.lock.cookie.0).map_err(fail)
    }

    /// Lock and unlock until the window ends or another client failed; returns the client's
    /// index with its numbers, or the first failure (which stops every client).
    async fn run(mut self, win: Window, live: Arc<Live>) -> (u32, Result<Recorder, BenchError>) {
        let mut rec = Recorder::default();
        while Instant::now() < win.end && !live.stop.load(Ordering::Relaxed) {
            let t0 = Instant::now();
            if let Err(e) = self.pair().await {
                live.stop.store(true, Ordering::Relaxed);
                return (self.index, Err(BenchError::Io(format!("client {}: {e}", self.index))));
            }
            let lat = t0.elapsed();
            live.ops.fetch_add(1, Ordering::Relaxed);
            if t0 >= win.measure_from && t0 < win.end {
                rec.record(OP, lat, 0);
                live.timeline.record(t0.duration_since(win.measure_from) + lat, Kind::Other, 0);
            }
        }
        (self.index, Ok(rec))
    }
}

/// The client's file.
pub fn lock_path(wl: &Workload, index: u32) -> String {
    format!("{}/lock{index}.dat", wl.dir)
}

/// Accepts a result only when it is granted and carries the call's cookie.
fn check(res: &Nlm4Res, cookie: &[u8]) -> Result<(), String> {
    if res.stat != Nlm4Stats::Granted {
        return Err(format!("{}{}", stat_name(res.stat), hint(res.stat)));
    }
    if res.cookie.as_bytes() != cookie {
        return Err(format!("granted, but with cookie {:02x?} for the call's {cookie:02x?}", res.cookie.as_bytes()));
    }
    Ok(())
}

/// The status's name in the protocol's spelling.
pub fn stat_name(s: Nlm4Stats) -> &'static str {
    match s {
        Nlm4Stats::Granted => "NLM4_GRANTED",
        Nlm4Stats::Denied => "NLM4_DENIED",
        Nlm4Stats::DeniedNolocks => "NLM4_DENIED_NOLOCKS",
        Nlm4Stats::Blocked => "NLM4_BLOCKED",
        Nlm4Stats::DeniedGracePeriod => "NLM4_DENIED_GRACE_PERIOD",
        Nlm4Stats::Deadlck => "NLM4_DEADLCK",
        Nlm4Stats::Rofs => "NLM4_ROFS",
        Nlm4Stats::StaleFh => "NLM4_STALE_FH",
        Nlm4Stats::Fbig => "NLM4_FBIG",
        Nlm4Stats::Failed => "NLM4_FAILED",
    }
}

/// What a refusal most likely means here.
fn hint(s: Nlm4Stats) -> &'static str {
    match s {
        Nlm4Stats::DeniedGracePeriod => {
            " (the server is in its grace period after starting: wait, or shorten it: Braid's nfs_grace, ganesha's Graceless)"
        }
        Nlm4Stats::DeniedNolocks => " (out of lock resources; nfs-ganesha answers this when it cannot reach an rpc.statd through rpcbind)",
        Nlm4Stats::Denied => " (another owner holds the range: is another run using this directory?)",
        Nlm4Stats::StaleFh => " (the server does not know the file handle MOUNT and CREATE gave)",
        _ => "",
    }
}

#[cfg(test)]
mod tests;
