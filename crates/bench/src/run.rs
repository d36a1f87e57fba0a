//! The engine: connect, add channels, prepare files, run the data or metadata workload for
//! warm-up + duration with `threads x queue depth` workers, and build the report. The
//! many-clients mode (`--clients`) is [`crate::clients`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::task::JoinSet;

use crate::cpu::CpuTimes;
use crate::offsets::{seed_for, Layout, OffsetGen, Stripe};
use crate::pattern;
use crate::report::{Recorder, Report};
use crate::session::{BenchFile, OpenMode, Session, Target};
use crate::size::format_size;
use crate::timeline::{self, Kind};
use crate::workload::Workload;
use crate::BenchError;

/// Consecutive failures after which a worker stops (the connection is most likely gone).
pub(crate) const MAX_CONSECUTIVE_ERRORS: u32 = 16;

/// Live counters shared by the workers and the progress line, and the per-second timeline.
pub(crate) struct Live {
    pub ops: AtomicU64,
    pub bytes: AtomicU64,
    pub stop: AtomicBool,
    pub first_error: Mutex<Option<String>>,
    pub timeline: timeline::Counters,
}

impl Live {
    pub fn new(wl: &Workload) -> Self {
        Self {
            ops: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            first_error: Mutex::new(None),
            timeline: timeline::Counters::new(wl.duration_s),
        }
    }

    pub fn note_error(&self, e: &BenchError) {
        if let Ok(mut g) = self.first_error.lock() {
            g.get_or_insert_with(|| e.to_string());
        }
    }
}

/// The measurement window of a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub start: Instant,
    pub measure_from: Instant,
    pub end: Instant,
}

impl Window {
    pub fn new(wl: &Workload) -> Self {
        let start = Instant::now();
        let measure_from = start + Duration::from_secs_f64(wl.warmup_s);
        Self { start, measure_from, end: measure_from + Duration::from_secs_f64(wl.duration_s) }
    }
}

/// Runs `wl` against one target and returns its report. With `progress`, a live line
/// (elapsed, IOPS, MiB/s) is drawn on stderr while it runs (only on a terminal).
pub async fn run_target<T: Target>(target: &T, wl: &Workload, progress: bool) -> Result<Report, BenchError> {
    wl.validate()?;
    let name = target.describe();
    if wl.clients > 0 {
        let bar = progress_bar(progress);
        let result = crate::clients::run(target, wl, &name, &bar).await;
        bar.finish_and_clear();
        return result;
    }
    let first = target.connect().await?;
    let mut channels = vec![first.clone()];
    for _ in 1..wl.channels {
        let ch = first.bind_channel().await.map_err(|e| match e {
            BenchError::NotSupported(m) => BenchError::NotSupported(format!("--channels {}: {name}: {m}", wl.channels)),
            e => e,
        })?;
        channels.push(ch);
    }
    let bar = progress_bar(progress);
    let result = if wl.meta.is_some() { crate::meta::run(&channels, wl, &name, &bar).await } else { run_io(&channels, wl, &name, &bar).await };
    bar.finish_and_clear();
    result.map(|r| Report { reconnects: first.reconnects(), ..r })
}

pub(crate) fn progress_bar(show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    // ProgressBar draws to stderr and stays silent when that is not a terminal.
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()));
    bar
}

/// Spawns the task that refreshes the progress line every half second until `stop`.
pub(crate) fn spawn_ticker(bar: ProgressBar, live: Arc<Live>, win: Window, name: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = (Instant::now(), 0u64, 0u64);
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        while !live.stop.load(Ordering::Relaxed) {
            tick.tick().await;
            let now = Instant::now();
            let ops = live.ops.load(Ordering::Relaxed);
            let bytes = live.bytes.load(Ordering::Relaxed);
            let dt = now.duration_since(last.0).as_secs_f64().max(1e-3);
            let phase = if now < win.measure_from { "warm-up" } else { "run" };
            bar.set_message(format!(
                "{name}  {phase} {:.1}s/{:.0}s  IOPS {:.0}  MiB/s {:.1}",
                now.duration_since(win.start).as_secs_f64(),
                win.end.duration_since(win.start).as_secs_f64(),
                (ops - last.1) as f64 / dt,
                (bytes - last.2) as f64 / 1048576.0 / dt
            ));
            bar.tick();
            last = (now, ops, bytes);
        }
    })
}

pub(crate) fn file_path(wl: &Workload, i: u32) -> String {
    format!("{}/file{i}.dat", wl.dir)
}

/// Creates the directory and any data file that is missing or too small, filling it with
/// the pattern's generation 0 (so `--verify` knows every block). `--verify` always rewrites.
pub(crate) async fn prepare<S: Session>(s: &S, wl: &Workload, bar: &ProgressBar) -> Result<(), BenchError> {
    s.mkdir(&wl.dir).await?;
    let chunk = u64::from(s.max_io()).clamp(4096, 1 << 20);
    for i in 0..wl.files {
        let path = file_path(wl, i);
        let have = s.file_size(&path).await?;
        if !wl.verify && have.is_some_and(|n| n >= wl.file_size) {
            continue;
        }
        bar.set_message(format!("preparing {path} ({})", format_size(wl.file_size)));
        let f = s.open(&path, OpenMode::CreateOverwrite).await?;
        // Several writes in flight so large files are laid down quickly.
        let mut set = JoinSet::new();
        let mut off = 0;
        while off < wl.file_size {
            while set.len() >= 8 {
                if let Some(r) = set.join_next().await {
                    r.map_err(|e| BenchError::Io(e.to_string()))??;
                }
            }
            let len = chunk.min(wl.file_size - off) as usize;
            let f2 = f.clone();
            set.spawn(async move {
                let mut buf = vec![0u8; len];
                pattern::fill(&mut buf, i, off, 0);
                let n = f2.write(off, &buf).await?;
                if n as usize != len {
                    return Err(BenchError::Io(format!("short write while preparing: {n} of {len} bytes")));
                }
                Ok::<(), BenchError>(())
            });
            off += len as u64;
        }
        while let Some(r) = set.join_next().await {
            r.map_err(|e| BenchError::Io(e.to_string()))??;
        }
        f.close().await?;
    }
    Ok(())
}

/// Where a worker's blocks come from.
enum Source {
    /// Shared by the queue-depth slots of one thread.
    Shared(Arc<Mutex<OffsetGen>>),
    /// `--verify`: the slot's own stripe and the generation of each of its blocks.
    Own { gen: Box<OffsetGen>, stripe: Stripe, gens: Vec<u32> },
}

async fn run_io<S: Session>(channels: &[S], wl: &Workload, name: &str, bar: &ProgressBar) -> Result<Report, BenchError> {
    let max_io = channels[0].max_io();
    if wl.block_size > u64::from(max_io) {
        return Err(BenchError::BadInput(format!(
            "block size {} exceeds the server's largest I/O ({})",
            format_size(wl.block_size),
            format_size(u64::from(max_io))
        )));
    }
    prepare(&channels[0], wl, bar).await?;
    let layout = Layout { block_size: wl.block_size, blocks_per_file: wl.file_size / wl.block_size, files: u64::from(wl.files) };
    let (handles, views) = open_handles(channels, wl).await?;

    let live = Arc::new(Live::new(wl));
    bar.set_message(format!("{name}: starting"));
    let win = Window::new(wl);
    let ticker = spawn_ticker(bar.clone(), live.clone(), win, name.to_string());
    let mut set = spawn_workers(&views, layout, wl, win, &live);

    // CPU time of the measured window only: sample when warm-up ends and when time is up.
    tokio::time::sleep_until(win.measure_from.into()).await;
    let cpu0 = CpuTimes::now();
    tokio::time::sleep_until(win.end.into()).await;
    let cpu1 = CpuTimes::now();
    let mut rec = Recorder::default();
    let mut verify_err = None;
    while let Some(r) = set.join_next().await {
        match r {
            Ok(Ok(w)) => rec.merge(&w),
            Ok(Err(e)) => verify_err = verify_err.or(Some(e)),
            Err(e) => return Err(BenchError::Io(format!("worker failed: {e}"))),
        }
    }
    live.stop.store(true, Ordering::Relaxed);
    let _ = ticker.await;
    drop(views);
    for files in handles {
        for f in files {
            // A failed close does not change the measurement.
            let _ = f.close().await;
        }
    }
    if let Some(e) = verify_err {
        return Err(e);
    }
    if rec.errors > 0 {
        if let Ok(Some(first)) = live.first_error.lock().map(|g| g.clone()) {
            eprintln!("braid: warning: {name}: {} failed operation(s); first: {first}", rec.errors);
        }
    }
    let elapsed = win.end.duration_since(win.measure_from);
    Ok(Report::new(name.to_string(), wl, &rec, elapsed, cpu1.since(&cpu0)).with_timeline(live.timeline.series()))
}

/// Each thread's handles, as opened on a channel.
type Handles<S> = Vec<Vec<<S as Session>::File>>;
/// Each thread's handles as seen through every channel.
type Views<F> = Vec<Arc<Vec<Arc<Vec<F>>>>>;

/// Handles per thread, opened on the thread's channel (threads spread round-robin), and
/// each handle as seen through every channel: a slot sends its successive requests over
/// the channels in turn, as SMB 3 multichannel clients spread requests, so even one thread
/// with one request in flight uses every channel.
async fn open_handles<S: Session>(channels: &[S], wl: &Workload) -> Result<(Handles<S>, Views<S::File>), BenchError> {
    let mode = if wl.write_pct == 0 && !wl.verify { OpenMode::Read } else { OpenMode::ReadWrite };
    let mut handles = Vec::new();
    let mut views = Vec::new();
    for t in 0..wl.threads {
        let ch = &channels[t as usize % channels.len()];
        let mut files = Vec::new();
        for i in 0..wl.files {
            files.push(ch.open(&file_path(wl, i), mode).await?);
        }
        let per_channel: Vec<Arc<Vec<S::File>>> = channels.iter().map(|c| Arc::new(files.iter().map(|f| c.adopt(f)).collect())).collect();
        views.push(Arc::new(per_channel));
        handles.push(files);
    }
    Ok((handles, views))
}

/// One worker per queue-depth slot of every thread. The slots of a thread share its offset
/// generator; with `--verify` each slot owns a stripe of blocks instead.
fn spawn_workers<F: BenchFile>(
    views: &Views<F>,
    layout: Layout,
    wl: &Workload,
    win: Window,
    live: &Arc<Live>,
) -> JoinSet<Result<Recorder, BenchError>> {
    let total = layout.total_blocks();
    let slots = u64::from(wl.threads) * u64::from(wl.queue_depth);
    let channels = views.first().map_or(1, |v| v.len()).max(1);
    let mut set = JoinSet::new();
    for t in 0..wl.threads {
        let shared = Arc::new(Mutex::new(OffsetGen::new(
            Stripe::all(total),
            wl.random,
            seed_for(wl.randrepeat, u64::from(t)),
            u64::from(t) * total / u64::from(wl.threads),
        )));
        for q in 0..wl.queue_depth {
            let k = u64::from(t) * u64::from(wl.queue_depth) + u64::from(q);
            let source = if wl.verify {
                let stripe = Stripe::nth_of(k, slots, total);
                Source::Own {
                    gen: Box::new(OffsetGen::new(stripe, wl.random, seed_for(wl.randrepeat, k), 0)),
                    stripe,
                    gens: vec![0; stripe.count as usize],
                }
            } else {
                Source::Shared(shared.clone())
            };
            let first_channel = k as usize % channels;
            set.spawn(worker(views[t as usize].clone(), first_channel, source, layout, wl.clone(), win, live.clone()));
        }
    }
    set
}

/// One in-flight slot: issues I/Os back to back until the window ends. With `--verify` it
/// then reads back every block of its stripe.
async fn worker<F: BenchFile>(
    channels: Arc<Vec<Arc<Vec<F>>>>,
    mut next_channel: usize,
    mut source: Source,
    layout: Layout,
    wl: Workload,
    win: Window,
    live: Arc<Live>,
) -> Result<Recorder, BenchError> {
    let mut rec = Recorder::default();
    let bs = wl.block_size as usize;
    // The payload follows room for the request's headers, so the client sends (and signs)
    // it where it is; the buffer comes back for the next write.
    let room = F::WRITE_ROOM;
    let fresh = || {
        let mut b = bytes::BytesMut::zeroed(room + bs);
        pattern::fill(&mut b[room..], 0, 0, 0);
        b
    };
    let mut buf = fresh();
    let mut consecutive = 0;
    loop {
        let now = Instant::now();
        if now >= win.end || live.stop.load(Ordering::Relaxed) {
            break;
        }
        let (block, is_write) = next_op(&mut source, wl.write_pct)?;
        // An empty stripe (more slots than blocks) has nothing to do.
        let Some(block) = block else { break };
        let (fi, off) = layout.locate(block);
        let file = &channels[next_channel][fi];
        next_channel = (next_channel + 1) % channels.len();
        let t0 = Instant::now();
        let result = if is_write {
            if let Source::Own { stripe, gens, .. } = &mut source {
                let m = ((block - stripe.first) / stripe.stride) as usize;
                gens[m] += 1;
                pattern::fill(&mut buf[room..], fi as u32, off, gens[m]);
            }
            let sent = file.write_framed(off, &mut buf).await;
            // Lost with a failed write: the next one starts from a new buffer.
            if buf.len() != room + bs {
                buf = fresh();
            }
            sent.and_then(|n| if n as usize == bs { Ok(bs) } else { Err(BenchError::Io(format!("short write: {n} of {bs} bytes"))) })
        } else {
            read_block(file, &source, block, (fi, off), &wl, &live).await?
        };
        let lat = t0.elapsed();
        match result {
            Ok(n) => {
                consecutive = 0;
                live.ops.fetch_add(1, Ordering::Relaxed);
                live.bytes.fetch_add(n as u64, Ordering::Relaxed);
                if t0 >= win.measure_from {
                    rec.record(if is_write { "write" } else { "read" }, lat, n as u64);
                    let kind = if is_write { Kind::Write } else { Kind::Read };
                    live.timeline.record(t0.duration_since(win.measure_from) + lat, kind, n as u64);
                }
            }
            Err(e) => {
                live.note_error(&e);
                if t0 >= win.measure_from {
                    rec.errors += 1;
                }
                consecutive += 1;
                if consecutive >= MAX_CONSECUTIVE_ERRORS {
                    break;
                }
            }
        }
    }
    if let Source::Own { stripe, gens, .. } = &source {
        read_back(&channels[0], *stripe, gens, layout, &wl, &live).await?;
    }
    Ok(rec)
}

/// The slot's next block (`None` when its stripe is empty) and whether to write it.
fn next_op(source: &mut Source, write_pct: u8) -> Result<(Option<u64>, bool), BenchError> {
    Ok(match source {
        Source::Shared(g) => {
            let mut g = g.lock().map_err(|_| BenchError::Io("offset generator poisoned".into()))?;
            let w = g.next_is_write(write_pct);
            (g.next_block(), w)
        }
        Source::Own { gen, .. } => {
            let w = gen.next_is_write(write_pct);
            (gen.next_block(), w)
        }
    })
}

/// One measured read. The inner result is the operation's (counted as an error); the outer
/// error is a `--verify` mismatch, which ends the run.
async fn read_block<F: BenchFile>(
    file: &F,
    source: &Source,
    block: u64,
    (fi, off): (usize, u64),
    wl: &Workload,
    live: &Live,
) -> Result<Result<usize, BenchError>, BenchError> {
    let bs = wl.block_size as usize;
    let data = match file.read(off, bs as u32).await {
        Ok(data) => data,
        Err(e) => return Ok(Err(e)),
    };
    let data = data.as_ref();
    if let Source::Own { stripe, gens, .. } = source {
        let m = ((block - stripe.first) / stripe.stride) as usize;
        if let Err(mm) = pattern::check(data, bs, fi as u32, off, gens[m]) {
            live.stop.store(true, Ordering::Relaxed);
            return Err(BenchError::Verify(format!("{}: {mm}", file_path(wl, fi as u32))));
        }
    }
    Ok(if data.len() == bs { Ok(bs) } else { Err(BenchError::Io(format!("short read: {} of {bs} bytes", data.len()))) })
}

/// `--verify`'s final pass: every block this slot owns must hold its last generation.
async fn read_back<F: BenchFile>(files: &[F], stripe: Stripe, gens: &[u32], layout: Layout, wl: &Workload, live: &Live) -> Result<(), BenchError> {
    let bs = wl.block_size as usize;
    for (m, &g) in gens.iter().enumerate() {
        // Only a mismatch sets `stop` before every worker has returned.
        if live.stop.load(Ordering::Relaxed) {
            break;
        }
        let block = stripe.first + stripe.stride * m as u64;
        let (fi, off) = layout.locate(block);
        let data = files[fi].read(off, bs as u32).await?;
        if let Err(mm) = pattern::check(data.as_ref(), bs, fi as u32, off, g) {
            live.stop.store(true, Ordering::Relaxed);
            return Err(BenchError::Verify(format!("{} (final read-back): {mm}", file_path(wl, fi as u32))));
        }
    }
    Ok(())
}
