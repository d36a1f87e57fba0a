//! The `--meta` workload: a weighted mix of create/open/close/delete/stat/mkdir/rmdir over
//! many small files and directories, each worker in its own directory so workers never
//! race on one name, and `list`, the listing of one shared directory of `--files` entries
//! (kept, like data files, for the next run).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;

use crate::cpu::CpuTimes;
use crate::offsets::seed_for;
use crate::report::{Recorder, Report};
use crate::run::{spawn_ticker, Live, Window};
use crate::session::{BenchFile, OpenMode, Session};
use crate::timeline::Kind;
use crate::workload::{MetaOp, Workload};
use crate::BenchError;

/// Handles a worker keeps open at most; past this a create/open becomes a close.
const MAX_OPEN: usize = 16;
/// Files each worker creates before the clock starts, so open/stat/delete have targets.
const MIN_POOL: u32 = 32;

pub(crate) async fn run<S: Session>(channels: &[S], wl: &Workload, name: &str, bar: &ProgressBar) -> Result<Report, BenchError> {
    let mix = wl.meta.clone().unwrap_or_default();
    let root = format!("{}/meta", wl.dir);
    channels[0].mkdir(&wl.dir).await?;
    channels[0].mkdir(&root).await?;
    // With `list` in the mix, --files is the size of the listed directory, not of the pools.
    // Like data files, the directory is kept and reused by the next run of the same size.
    let listing = if mix.iter().any(|m| m.0 == MetaOp::List) {
        let dir = format!("{}/list-{}", wl.dir, wl.files);
        if channels[0].list(&dir).await.ok() != Some(u64::from(wl.files)) {
            bar.set_message(format!("{name}: filling a directory of {} file(s) to list", wl.files));
            fill_listing(channels, wl, &dir).await?;
        }
        Some((dir, u64::from(wl.files)))
    } else {
        None
    };
    let pool_size = if listing.is_some() { MIN_POOL } else { wl.files.max(MIN_POOL) };
    bar.set_message(format!("{name}: creating {pool_size} file(s) per worker"));
    let workers = prepare_workers(channels, wl, &root, pool_size, &listing).await?;
    let live = Arc::new(Live::new(wl));
    let win = Window::new(wl);
    let ticker = spawn_ticker(bar.clone(), live.clone(), win, name.to_string());
    let mut set = JoinSet::new();
    for w in workers {
        set.spawn(w.run(mix.clone(), win, live.clone()));
    }
    tokio::time::sleep_until(win.measure_from.into()).await;
    let cpu0 = CpuTimes::now();
    tokio::time::sleep_until(win.end.into()).await;
    let cpu1 = CpuTimes::now();
    let mut rec = Recorder::default();
    let mut fatal = None;
    while let Some(r) = set.join_next().await {
        match r {
            Ok(Ok(w)) => rec.merge(&w),
            Ok(Err(e)) => fatal = fatal.or(Some(e)),
            Err(e) => fatal = fatal.or(Some(BenchError::Io(format!("worker failed: {e}")))),
        }
    }
    live.stop.store(true, Ordering::Relaxed);
    let _ = ticker.await;
    // Best effort: leaves nothing behind but the listed directory if the server allows it.
    let _ = channels[0].rmdir(&root).await;
    if let Some(e) = fatal {
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

/// Each worker's session, directory and pool of `pool_size` closed files.
async fn prepare_workers<S: Session>(
    channels: &[S],
    wl: &Workload,
    root: &str,
    pool_size: u32,
    listing: &Option<(String, u64)>,
) -> Result<Vec<MetaWorker<S>>, BenchError> {
    let mut workers = Vec::new();
    for k in 0..wl.threads * wl.queue_depth {
        let s = channels[(k / wl.queue_depth) as usize % channels.len()].clone();
        let dir = format!("{root}/w{k}");
        s.mkdir(&dir).await?;
        let mut pool = Vec::new();
        for n in 0..pool_size {
            let p = format!("{dir}/f{n}");
            s.open(&p, OpenMode::CreateOverwrite).await?.close().await?;
            pool.push(p);
        }
        workers.push(MetaWorker {
            s,
            dir,
            pool,
            open: Vec::new(),
            dirs: Vec::new(),
            listing: listing.clone(),
            next: pool_size,
            rng: StdRng::seed_from_u64(seed_for(wl.randrepeat, u64::from(k))),
        });
    }
    Ok(workers)
}

/// Name of entry `n` of the listed directory.
fn listing_entry(dir: &str, n: u32) -> String {
    format!("{dir}/e{n}")
}

/// Creates the listed directory's `wl.files` files (overwriting those there), one task per
/// worker slot.
async fn fill_listing<S: Session>(channels: &[S], wl: &Workload, dir: &str) -> Result<(), BenchError> {
    channels[0].mkdir(dir).await?;
    let slots = wl.threads * wl.queue_depth;
    let mut set = JoinSet::new();
    for k in 0..slots {
        let s = channels[(k / wl.queue_depth) as usize % channels.len()].clone();
        let (dir, files) = (dir.to_string(), wl.files);
        set.spawn(async move {
            for n in (k..files).step_by(slots as usize) {
                s.open(&listing_entry(&dir, n), OpenMode::CreateOverwrite).await?.close().await?;
            }
            Ok::<(), BenchError>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| BenchError::Io(format!("filling the listed directory: {e}")))??;
    }
    Ok(())
}

struct MetaWorker<S: Session> {
    s: S,
    dir: String,
    /// Closed files that exist.
    pool: Vec<String>,
    /// Open handles and their paths.
    open: Vec<(String, S::File)>,
    /// Directories created by mkdir.
    dirs: Vec<String>,
    /// The directory `list` lists and how many entries it holds.
    listing: Option<(String, u64)>,
    next: u32,
    rng: StdRng,
}

impl<S: Session> MetaWorker<S> {
    fn pick(&mut self, mix: &[(MetaOp, u32)]) -> MetaOp {
        let total: u32 = mix.iter().map(|m| m.1).sum();
        let mut r = self.rng.gen_range(0..total.max(1));
        let mut op = mix[0].0;
        for &(o, w) in mix {
            if r < w {
                op = o;
                break;
            }
            r -= w;
        }
        // Substitute an operation whose precondition is not met, keeping the mix moving.
        match op {
            MetaOp::Create | MetaOp::Open if self.open.len() >= MAX_OPEN => MetaOp::Close,
            MetaOp::Close if self.open.is_empty() => {
                if self.pool.is_empty() {
                    MetaOp::Create
                } else {
                    MetaOp::Open
                }
            }
            MetaOp::Open | MetaOp::Delete | MetaOp::Stat if self.pool.is_empty() => MetaOp::Create,
            MetaOp::Rmdir if self.dirs.is_empty() => MetaOp::Mkdir,
            op => op,
        }
    }

    async fn run(mut self, mix: Vec<(MetaOp, u32)>, win: Window, live: Arc<Live>) -> Result<Recorder, BenchError> {
        let mut rec = Recorder::default();
        let mut consecutive = 0;
        while Instant::now() < win.end && !live.stop.load(Ordering::Relaxed) {
            let op = self.pick(&mix);
            let t0 = Instant::now();
            let r = self.step(op).await;
            let lat = t0.elapsed();
            match r {
                Ok(()) => {
                    consecutive = 0;
                    live.ops.fetch_add(1, Ordering::Relaxed);
                    if t0 >= win.measure_from {
                        rec.record(op.name(), lat, 0);
                        live.timeline.record(t0.duration_since(win.measure_from) + lat, Kind::Other, 0);
                    }
                }
                Err(e) => {
                    live.note_error(&e);
                    if t0 >= win.measure_from {
                        rec.errors += 1;
                    }
                    consecutive += 1;
                    if consecutive >= 16 {
                        break;
                    }
                }
            }
        }
        // Clean up outside the clock.
        for (p, f) in self.open.drain(..) {
            let _ = f.close().await;
            self.pool.push(p);
        }
        for p in self.pool.drain(..) {
            let _ = self.s.remove(&p).await;
        }
        for d in self.dirs.drain(..) {
            let _ = self.s.rmdir(&d).await;
        }
        let _ = self.s.rmdir(&self.dir).await;
        Ok(rec)
    }

    async fn step(&mut self, op: MetaOp) -> Result<(), BenchError> {
        match op {
            MetaOp::Create => {
                let p = format!("{}/f{}", self.dir, self.next);
                self.next += 1;
                let f = self.s.open(&p, OpenMode::CreateOverwrite).await?;
                self.open.push((p, f));
            }
            MetaOp::Open => {
                let i = self.rng.gen_range(0..self.pool.len());
                let p = self.pool.swap_remove(i);
                match self.s.open(&p, OpenMode::Read).await {
                    Ok(f) => self.open.push((p, f)),
                    Err(e) => {
                        self.pool.push(p);
                        return Err(e);
                    }
                }
            }
            MetaOp::Close => {
                let i = self.rng.gen_range(0..self.open.len());
                let (p, f) = self.open.swap_remove(i);
                self.pool.push(p);
                f.close().await?;
            }
            MetaOp::Delete => {
                let i = self.rng.gen_range(0..self.pool.len());
                let p = self.pool.swap_remove(i);
                self.s.remove(&p).await?;
            }
            MetaOp::Stat => {
                let p = &self.pool[self.rng.gen_range(0..self.pool.len())];
                self.s.stat(p).await?;
            }
            MetaOp::Mkdir => {
                let d = format!("{}/d{}", self.dir, self.next);
                self.next += 1;
                self.s.mkdir(&d).await?;
                self.dirs.push(d);
            }
            MetaOp::Rmdir => {
                let i = self.rng.gen_range(0..self.dirs.len());
                let d = self.dirs.swap_remove(i);
                self.s.rmdir(&d).await?;
            }
            MetaOp::List => {
                let Some((dir, expected)) = &self.listing else { return Ok(()) };
                let n = self.s.list(dir).await?;
                if n != *expected {
                    return Err(BenchError::Io(format!("{dir}: listed {n} entries, expected {expected}")));
                }
            }
        }
        Ok(())
    }
}
