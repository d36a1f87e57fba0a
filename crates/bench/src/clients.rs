//! `--clients N`: many independent clients instead of many requests over one session. Each
//! client has its own TCP connection, NEGOTIATE, SESSION_SETUP and TREE_CONNECT (optionally
//! from its own source address, so the server sees N hosts), and runs one operation at a
//! time: open one of the data files, `--ios-per-open` reads and writes of `-b` bytes at
//! random offsets in it (`-w` percent writes), close, again. Every open, read, write and
//! close is one operation; the report adds how evenly the server served the clients.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{self, StreamExt};
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;

use crate::cpu::CpuTimes;
use crate::offsets::{seed_for, OffsetGen, Stripe};
use crate::pattern;
use crate::report::{Fairness, Recorder, Report};
use crate::run::{file_path, prepare, spawn_ticker, Live, Window, MAX_CONSECUTIVE_ERRORS};
use crate::session::{BenchFile, OpenMode, Session, Target};
use crate::size::format_size;
use crate::timeline::Kind;
use crate::workload::Workload;
use crate::BenchError;

/// Clients connecting at once. Connecting is a burst of small requests and, for a forking
/// server, a new process each: a bounded ramp keeps the connect storm from tripping the
/// server's limits on connections not yet logged on, or its listen backlog.
const CONNECT_AT_ONCE: usize = 16;

/// Local IPv4 addresses `first ..= first + count - 1`, handed to clients in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRange {
    first: u32,
    count: u32,
}

impl SourceRange {
    /// Parses `A.B.C.D` or `A.B.C.D-E.F.G.H` (inclusive, first <= last).
    pub fn parse(s: &str) -> Result<Self, BenchError> {
        let bad = || BenchError::BadInput(format!("--source-ips {s:?}: expected an IPv4 address or FIRST-LAST, e.g. 127.2.0.1-127.2.3.232"));
        let ip = |p: &str| p.trim().parse::<Ipv4Addr>().map(u32::from).map_err(|_| bad());
        let (first, last) = match s.split_once('-') {
            Some((a, b)) => (ip(a)?, ip(b)?),
            None => (ip(s)?, ip(s)?),
        };
        if last < first {
            return Err(bad());
        }
        Ok(Self { first, count: last - first + 1 })
    }

    /// The address of client `i` (wrapping round when there are more clients).
    pub fn nth(&self, i: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(self.first + i % self.count))
    }
}

/// Runs the many-clients workload against `target`.
pub(crate) async fn run<T: Target>(target: &T, wl: &Workload, name: &str, bar: &ProgressBar) -> Result<Report, BenchError> {
    let sources = wl.source_ips.as_deref().map(SourceRange::parse).transpose()?;
    let first = target.connect_from(sources.map(|r| r.nth(0))).await?;
    let max_io = first.max_io();
    if wl.block_size > u64::from(max_io) {
        return Err(BenchError::BadInput(format!(
            "block size {} exceeds the server's largest I/O ({})",
            format_size(wl.block_size),
            format_size(u64::from(max_io))
        )));
    }
    let blocks_per_file = wl.file_size / wl.block_size;
    if wl.verify && blocks_per_file < u64::from(wl.clients) {
        return Err(BenchError::BadInput(format!(
            "--verify gives each client its own blocks of every file: {} clients need files of at least {} blocks",
            wl.clients, wl.clients
        )));
    }
    prepare(&first, wl, bar).await?;
    let sessions = connect_all(target, first, wl.clients, sources, bar).await?;

    let live = Arc::new(Live::new(wl));
    bar.set_message(format!("{name}: starting {} clients", wl.clients));
    // The clock starts once every client is connected, so all run the whole window.
    let win = Window::new(wl);
    let ticker = spawn_ticker(bar.clone(), live.clone(), win, name.to_string());
    let shared = Arc::new(wl.clone());
    let mut set = JoinSet::new();
    for (k, s) in sessions.into_iter().enumerate() {
        let c = ClientState::new(s, k as u32, &shared);
        set.spawn(c.run(shared.clone(), win, live.clone()));
    }
    tokio::time::sleep_until(win.measure_from.into()).await;
    let cpu0 = CpuTimes::now();
    tokio::time::sleep_until(win.end.into()).await;
    let cpu1 = CpuTimes::now();
    let joined = join_clients(set, wl.clients as usize).await;
    live.stop.store(true, Ordering::Relaxed);
    let _ = ticker.await;
    let (rec, per_client) = joined?;
    if rec.errors > 0 {
        if let Ok(Some(first)) = live.first_error.lock().map(|g| g.clone()) {
            eprintln!("braid: warning: {name}: {} failed operation(s); first: {first}", rec.errors);
        }
    }
    let elapsed = win.end.duration_since(win.measure_from);
    Ok(Report::new(name.to_string(), wl, &rec, elapsed, cpu1.since(&cpu0))
        .with_timeline(live.timeline.series())
        .with_fairness(Fairness::from_counts(per_client)))
}

/// Connects clients 1..n (client 0 is `first`), [`CONNECT_AT_ONCE`] at a time.
async fn connect_all<T: Target>(
    target: &T,
    first: T::Session,
    n: u32,
    sources: Option<SourceRange>,
    bar: &ProgressBar,
) -> Result<Vec<T::Session>, BenchError> {
    let mut slots: Vec<Option<T::Session>> = (0..n).map(|_| None).collect();
    slots[0] = Some(first);
    let mut pending =
        stream::iter(1..n).map(|i| async move { (i, target.connect_from(sources.map(|r| r.nth(i))).await) }).buffer_unordered(CONNECT_AT_ONCE);
    let mut done = 1;
    while let Some((i, r)) = pending.next().await {
        let s = r.map_err(|e| match e {
            BenchError::Connect { target, msg } => BenchError::Connect { target, msg: format!("client {i} of {n}: {msg}") },
            e => e,
        })?;
        slots[i as usize] = Some(s);
        done += 1;
        bar.set_message(format!("connected {done}/{n} clients"));
    }
    Ok(slots.into_iter().flatten().collect())
}

/// Waits for every client; returns the merged numbers and each client's operation count,
/// in client order.
async fn join_clients(mut set: JoinSet<(u32, Result<Recorder, BenchError>)>, n: usize) -> Result<(Recorder, Vec<u64>), BenchError> {
    let mut rec = Recorder::default();
    let mut per_client = vec![0; n];
    let mut verify_err = None;
    while let Some(r) = set.join_next().await {
        match r {
            Ok((k, Ok(c))) => {
                per_client[k as usize] = c.total().count;
                rec.merge(&c);
            }
            Ok((_, Err(e))) => verify_err = verify_err.or(Some(e)),
            Err(e) => return Err(BenchError::Io(format!("client failed: {e}"))),
        }
    }
    match verify_err {
        Some(e) => Err(e),
        None => Ok((rec, per_client)),
    }
}

/// One client: its session, its random streams and, with `--verify`, the generation of every
/// block it owns.
struct ClientState<S: Session> {
    session: S,
    index: u32,
    /// Which file the next open picks.
    files: StdRng,
    /// Blocks within a file, and the read/write choice. With `--verify` the client's own
    /// stripe of each file (so no two clients write one block and contents stay known).
    blocks: OffsetGen,
    stripe: Stripe,
    /// `--verify`: generation of block `m` of the stripe in file `f` at `f * stripe.count + m`.
    gens: Option<Vec<u32>>,
    /// Opens so far (sequential runs take the files in turn).
    opens: u64,
    consecutive_errors: u32,
}

/// What an operation did: its kind for the report and the timeline, and its bytes.
type Done = (&'static str, Kind, Result<u64, BenchError>);

impl<S: Session> ClientState<S> {
    fn new(session: S, index: u32, wl: &Workload) -> Self {
        let per_file = wl.file_size / wl.block_size;
        let k = u64::from(index);
        let stripe = if wl.verify { Stripe::nth_of(k, u64::from(wl.clients), per_file) } else { Stripe::all(per_file) };
        let seed = seed_for(wl.randrepeat, k);
        Self {
            session,
            index,
            files: StdRng::seed_from_u64(!seed),
            // Sequential clients start spread over the file, not all at its first block.
            blocks: OffsetGen::new(stripe, wl.random, seed, k * stripe.count / u64::from(wl.clients)),
            stripe,
            gens: wl.verify.then(|| vec![0; (stripe.count * u64::from(wl.files)) as usize]),
            opens: 0,
            consecutive_errors: 0,
        }
    }

    /// Opens, reads and writes, closes, again, until the window ends; then, with `--verify`,
    /// reads back every block it owns. Returns the client's index with its numbers.
    async fn run(mut self, wl: Arc<Workload>, win: Window, live: Arc<Live>) -> (u32, Result<Recorder, BenchError>) {
        let mut rec = Recorder::default();
        let mut io = IoBuf::new::<S::File>(wl.block_size as usize);
        while Instant::now() < win.end && !live.stop.load(Ordering::Relaxed) && self.consecutive_errors < MAX_CONSECUTIVE_ERRORS {
            let fi = if wl.random { self.files.gen_range(0..wl.files) } else { ((u64::from(self.index) + self.opens) % u64::from(wl.files)) as u32 };
            self.opens += 1;
            if let Err(e) = self.one_open(fi, &wl, &mut io, win, &live, &mut rec).await {
                live.stop.store(true, Ordering::Relaxed);
                return (self.index, Err(e));
            }
        }
        if self.gens.is_some() && !live.stop.load(Ordering::Relaxed) {
            if let Err(e) = self.read_back(&wl, &live).await {
                return (self.index, Err(e));
            }
        }
        (self.index, Ok(rec))
    }

    /// One open, up to `--ios-per-open` reads and writes (fewer when the window ends), one
    /// close. Errors are counted; only a `--verify` mismatch is returned.
    async fn one_open(&mut self, fi: u32, wl: &Workload, io: &mut IoBuf, win: Window, live: &Live, rec: &mut Recorder) -> Result<(), BenchError> {
        let mode = if wl.write_pct == 0 && !wl.verify { OpenMode::Read } else { OpenMode::ReadWrite };
        let t0 = Instant::now();
        let opened = self.session.open(&file_path(wl, fi), mode).await;
        let ok = opened.as_ref().map(|_| 0).map_err(|e| BenchError::Io(e.to_string()));
        self.note(("open", Kind::Other, ok), t0, win, live, rec);
        let Ok(file) = opened else { return Ok(()) };
        for _ in 0..wl.ios_per_open {
            if Instant::now() >= win.end || live.stop.load(Ordering::Relaxed) {
                break;
            }
            let t0 = Instant::now();
            let done = self.one_io(&file, fi, wl, io).await?;
            self.note(done, t0, win, live, rec);
        }
        // Sent even after the window ends, to end this open's burst (then not counted).
        let t0 = Instant::now();
        let closed = file.close().await.map(|()| 0);
        self.note(("close", Kind::Other, closed), t0, win, live, rec);
        Ok(())
    }

    /// One read or write at a block of the client's stripe of file `fi`.
    async fn one_io(&mut self, file: &S::File, fi: u32, wl: &Workload, io: &mut IoBuf) -> Result<Done, BenchError> {
        let bs = wl.block_size as usize;
        let is_write = self.blocks.next_is_write(wl.write_pct);
        // The stripe is never empty: run() checked there are enough blocks per client.
        let j = self.blocks.next_block().unwrap_or(0);
        let off = j * wl.block_size;
        let slot = ((j - self.stripe.first) / self.stripe.stride + u64::from(fi) * self.stripe.count) as usize;
        if is_write {
            if let Some(gens) = &mut self.gens {
                gens[slot] += 1;
                io.fill(fi, off, gens[slot]);
            }
            return Ok(("write", Kind::Write, io.write(file, off).await));
        }
        let data = match file.read(off, bs as u32).await {
            Ok(d) => d,
            Err(e) => return Ok(("read", Kind::Read, Err(e))),
        };
        let data = data.as_ref();
        if let Some(gens) = &self.gens {
            pattern::check(data, bs, fi, off, gens[slot]).map_err(|mm| BenchError::Verify(format!("{}: {mm}", file_path(wl, fi))))?;
        }
        let n = data.len();
        Ok(("read", Kind::Read, if n == bs { Ok(n as u64) } else { Err(BenchError::Io(format!("short read: {n} of {bs} bytes"))) }))
    }

    /// Counts an operation that started at `t0`; only those started inside the measured
    /// window go into the report and the timeline.
    fn note(&mut self, (kind, tk, result): Done, t0: Instant, win: Window, live: &Live, rec: &mut Recorder) {
        let lat = t0.elapsed();
        let measured = t0 >= win.measure_from && t0 < win.end;
        match result {
            Ok(n) => {
                self.consecutive_errors = 0;
                live.ops.fetch_add(1, Ordering::Relaxed);
                live.bytes.fetch_add(n, Ordering::Relaxed);
                if measured {
                    rec.record(kind, lat, n);
                    live.timeline.record(t0.duration_since(win.measure_from) + lat, tk, n);
                }
            }
            Err(e) => {
                live.note_error(&e);
                self.consecutive_errors += 1;
                if measured {
                    rec.errors += 1;
                }
            }
        }
    }

    /// `--verify`'s final pass: every block the client owns holds its last generation.
    async fn read_back(&self, wl: &Workload, live: &Live) -> Result<(), BenchError> {
        let (Some(gens), bs) = (&self.gens, wl.block_size as usize) else { return Ok(()) };
        for fi in 0..wl.files {
            let path = file_path(wl, fi);
            let f = self.session.open(&path, OpenMode::Read).await?;
            for m in 0..self.stripe.count {
                if live.stop.load(Ordering::Relaxed) {
                    break;
                }
                let off = (self.stripe.first + self.stripe.stride * m) * wl.block_size;
                let g = gens[(u64::from(fi) * self.stripe.count + m) as usize];
                let data = f.read(off, bs as u32).await?;
                if let Err(mm) = pattern::check(data.as_ref(), bs, fi, off, g) {
                    live.stop.store(true, Ordering::Relaxed);
                    return Err(BenchError::Verify(format!("{path} (final read-back): {mm}")));
                }
            }
            f.close().await?;
        }
        Ok(())
    }
}

/// A client's write buffer: room for the request's headers, then the payload, so the
/// client sends (and signs) it in place; it comes back from each write for the next.
struct IoBuf {
    buf: bytes::BytesMut,
    room: usize,
    bs: usize,
}

impl IoBuf {
    fn new<F: BenchFile>(bs: usize) -> Self {
        let mut me = Self { buf: bytes::BytesMut::new(), room: F::WRITE_ROOM, bs };
        me.renew();
        me
    }

    fn renew(&mut self) {
        self.buf = bytes::BytesMut::zeroed(self.room + self.bs);
        pattern::fill(&mut self.buf[self.room..], 0, 0, 0);
    }

    fn fill(&mut self, fi: u32, off: u64, gen: u32) {
        pattern::fill(&mut self.buf[self.room..], fi, off, gen);
    }

    async fn write<F: BenchFile>(&mut self, file: &F, off: u64) -> Result<u64, BenchError> {
        let sent = file.write_framed(off, &mut self.buf).await;
        // Lost with a failed write: the next one starts from a new buffer.
        if self.buf.len() != self.room + self.bs {
            self.renew();
        }
        let bs = self.bs;
        sent.and_then(|n| if n as usize == bs { Ok(bs as u64) } else { Err(BenchError::Io(format!("short write: {n} of {bs} bytes"))) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ranges() {
        let r = SourceRange::parse("127.2.0.1-127.2.3.232").unwrap();
        assert_eq!(r.count, 1000);
        assert_eq!(r.nth(0), "127.2.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(r.nth(255), "127.2.1.0".parse::<IpAddr>().unwrap());
        assert_eq!(r.nth(999), "127.2.3.232".parse::<IpAddr>().unwrap());
        // More clients than addresses: round again.
        assert_eq!(r.nth(1000), r.nth(0));
        assert_eq!(SourceRange::parse("10.0.0.7").unwrap().nth(3), "10.0.0.7".parse::<IpAddr>().unwrap());
        assert!(SourceRange::parse("127.2.0.9-127.2.0.1").is_err());
        assert!(SourceRange::parse("::1").is_err());
        assert!(SourceRange::parse("127.2.0.1-").is_err());
    }
}
