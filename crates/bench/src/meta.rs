//! The `--meta` workload: a weighted mix of create/open/close/delete/stat/mkdir/rmdir over
//! many small files and directories, each worker in its own directory so workers never
//! race on one name.

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
    let slots = wl.threads * wl.queue_depth;
    bar.set_message(format!("{name}: creating {} file(s) per worker", wl.files.max(MIN_POOL)));
    let mut workers = Vec::new();
    for k in 0..slots {
        let s = channels[(k / wl.queue_depth) as usize % channels.len()].clone();
        let dir = format!("{root}/w{k}");
        s.mkdir(&dir).await?;
        let mut pool = Vec::new();
        for n in 0..wl.files.max(MIN_POOL) {
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
            next: wl.files.max(MIN_POOL),
            rng: StdRng::seed_from_u64(seed_for(wl.randrepeat, u64::from(k))),
        });
    }
    let live = Arc::new(Live::default());
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
    // Best effort: leaves nothing behind if the server allows it.
    let _ = channels[0].rmdir(&root).await;
    if let Some(e) = fatal {
        return Err(e);
    }
    if rec.errors > 0 {
        if let Ok(Some(first)) = live.first_error.lock().map(|g| g.clone()) {
            eprintln!("braid: warning: {name}: {} failed operation(s); first: {first}", rec.errors);
        }
    }
    Ok(Report::new(name.to_string(), wl, &rec, win.end.duration_since(win.measure_from), cpu1.since(&cpu0)))
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
        }
        Ok(())
    }
}
