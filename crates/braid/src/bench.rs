//! `braid bench`: turns the command line into a [`braid_bench::Workload`] and targets, runs
//! them and prints the table, JSON or sweep results.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use braid_bench::nfs::{NfsTarget, NfsUrl};
use braid_bench::smb::{parse_cipher, SmbOptions, SmbTarget};
use braid_bench::sweep::{parse_counts, parse_rw};
use braid_bench::{format_size, parse_meta_mix, parse_size, table, SweepSpec, TargetUrl, Workload};

use crate::cli::{BenchChartArgs, BenchCmd, BenchCommonArgs, BenchCopyArgs, BenchRunArgs, BenchSub, BenchSweepArgs};

/// Runs `braid bench` or `braid bench sweep`.
pub fn run(cmd: BenchCmd) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    match cmd.sub {
        Some(BenchSub::Sweep(args)) => rt.block_on(sweep(*args)),
        Some(BenchSub::Chart(args)) => chart(args),
        Some(BenchSub::Copy(args)) => rt.block_on(copy(args)),
        None => rt.block_on(single(cmd.run)),
    }
}

fn count(flag: &str, s: &str) -> anyhow::Result<u32> {
    match s.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("{flag} {s:?}: expected a whole number of at least 1"),
    }
}

fn seconds(flag: &str, s: &str, zero_ok: bool) -> anyhow::Result<f64> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (x > 0.0 || (zero_ok && x == 0.0)) && x <= 86_400.0 => Ok(x),
        _ => bail!("{flag} {s:?}: expected a number of seconds, {} and at most 86400", if zero_ok { "0 or more" } else { "more than 0" }),
    }
}

/// The workload fields common to both forms.
fn base_workload(c: &BenchCommonArgs) -> anyhow::Result<Workload> {
    Ok(Workload {
        queue_depth: count("-o", &c.queue_depth)?,
        random: !c.sequential,
        files: count("-f", &c.files)?,
        file_size: parse_size(&c.file_size).map_err(|e| anyhow::anyhow!("-c: {e}"))?,
        duration_s: seconds("-d", &c.duration, false)?,
        warmup_s: seconds("-W", &c.warmup, true)?,
        randrepeat: c.randrepeat,
        sign: c.sign,
        encrypt: c.encrypt,
        cipher: c.cipher.clone(),
        dir: c.dir.trim_matches('/').to_string(),
        ..Workload::default()
    })
}

/// A target of either protocol.
enum AnyTarget {
    Smb(Box<SmbTarget>),
    Nfs(NfsTarget),
}

impl AnyTarget {
    async fn run(&self, wl: &Workload, progress: bool) -> Result<braid_bench::Report, braid_bench::BenchError> {
        match self {
            AnyTarget::Smb(t) => braid_bench::run_target(t.as_ref(), wl, progress).await,
            AnyTarget::Nfs(t) => braid_bench::run_target(t, wl, progress).await,
        }
    }
}

/// Parses the URLs: nfs:// ones (with --nconnect), and smb:// ones with their passwords.
fn targets(c: &BenchCommonArgs) -> anyhow::Result<Vec<AnyTarget>> {
    let nconnect = count("--nconnect", &c.nconnect)?;
    let is_nfs = |t: &String| t.starts_with("nfs://");
    if c.targets.iter().any(is_nfs) && (c.sign || c.encrypt) {
        bail!("--sign and --encrypt are SMB's: NFS (AUTH_SYS) has neither");
    }
    if !c.targets.iter().any(is_nfs) && nconnect > 1 {
        bail!("--nconnect applies to nfs:// targets only (SMB: --channels)");
    }
    let mut out = Vec::new();
    for raw in &c.targets {
        out.push(if is_nfs(raw) {
            AnyTarget::Nfs(NfsTarget::new(NfsUrl::parse(raw)?, nconnect)?)
        } else {
            AnyTarget::Smb(Box::new(smb_target(c, raw)?))
        });
    }
    Ok(out)
}

/// Parses an smb:// URL and finds its password (URL, then BRAID_BENCH_PASSWORD, then a prompt).
fn smb_target(c: &BenchCommonArgs, raw: &str) -> anyhow::Result<SmbTarget> {
    let cipher = c.cipher.as_deref().map(parse_cipher).transpose()?;
    smb_target_with(raw, SmbOptions { sign: c.sign, encrypt: c.encrypt, cipher, durable: c.durable, persistent: c.persistent })
}

fn smb_target_with(raw: &str, opts: SmbOptions) -> anyhow::Result<SmbTarget> {
    let url = TargetUrl::parse(raw)?;
    let password = match (&url.password, std::env::var("BRAID_BENCH_PASSWORD")) {
        (Some(p), _) => p.clone(),
        (None, Ok(p)) => p,
        (None, Err(_)) if std::io::stdin().is_terminal() => {
            rpassword::prompt_password(format!("Password for {url}: ")).context("reading the password")?
        }
        (None, Err(_)) => bail!("{url}: no password: put it in the URL, set BRAID_BENCH_PASSWORD, or run on a terminal"),
    };
    Ok(SmbTarget::new(url, password, opts)?)
}

/// `braid bench copy`: one timed copy, one line of output.
async fn copy(a: BenchCopyArgs) -> anyhow::Result<()> {
    use braid_bench::copy::{copy_file, CopyMode};
    let depth = count("--depth", &a.depth.to_string())?;
    let target = smb_target_with(&a.target, SmbOptions { sign: false, encrypt: false, cipher: None, durable: false, persistent: false })?;
    let mode = if a.client_side { CopyMode::ClientSide } else { CopyMode::ServerSide };
    let r = copy_file(&target, &a.from, &a.to, mode, depth).await?;
    let name = if a.client_side { "client-side" } else { "server-side" };
    println!("copy mode={name} bytes={} seconds={:.3} mib_per_s={:.1}", r.bytes, r.seconds, r.mib_per_s());
    Ok(())
}

async fn single(a: BenchRunArgs) -> anyhow::Result<()> {
    let write_pct = match a.write_pct.trim().parse::<u8>() {
        Ok(p) if p <= 100 => p,
        _ => bail!("-w {:?}: expected a write percentage 0..100", a.write_pct),
    };
    let wl = Workload {
        block_size: parse_size(&a.block_size).map_err(|e| anyhow::anyhow!("-b: {e}"))?,
        threads: count("-t", &a.threads)?,
        write_pct,
        channels: count("--channels", &a.channels)?,
        verify: a.verify,
        meta: a.meta.as_deref().map(parse_meta_mix).transpose()?,
        clients: a.clients.as_deref().map(|n| count("--clients", n)).transpose()?.unwrap_or(u32::from(a.nlm_lock)),
        ios_per_open: count("--ios-per-open", &a.ios_per_open)?,
        source_ips: a.source_ips.clone(),
        nlm_lock: a.nlm_lock,
        ..base_workload(&a.common)?
    };
    wl.validate()?;
    if a.nlm_lock && a.common.targets.iter().any(|t| !t.starts_with("nfs://")) {
        bail!("--nlm-lock locks through NFS's lock manager: the targets must be nfs:// URLs");
    }
    if a.nlm_port == Some(0) {
        bail!("--nlm-port 0: expected a port number 1..65535");
    }
    // A durable open holds a batch oplock, which a second open of the same data file (one
    // per thread or channel) would break, and the client does not acknowledge breaks.
    if (a.common.durable || a.common.persistent) && wl.meta.is_none() && (wl.threads * wl.channels > 1 || wl.clients > 1) {
        bail!("--durable on data I/O needs -t 1 --channels 1 and at most one client (each thread or client opens the files)");
    }
    let targets = targets(&a.common)?;
    let timeline = TimelineFiles::new(&a, targets.len())?;
    let progress = !a.json;
    if !a.json {
        println!(
            "workload: {}, {}s{}",
            wl.summary(),
            wl.duration_s,
            if wl.warmup_s > 0.0 { format!(" after {}s warm-up", wl.warmup_s) } else { String::new() }
        );
    }
    let mut reports = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let r = match t {
            AnyTarget::Nfs(t) if wl.nlm_lock => braid_bench::nfs::nlm::run(t, &wl, a.nlm_port, progress).await?,
            _ => t.run(&wl, progress).await?,
        };
        if a.json {
            println!("{}", r.to_json());
        }
        timeline.write(i, &r, &wl)?;
        reports.push(r);
    }
    if !a.json {
        print!("{}", table(&reports));
        if let [first, second, ..] = &reports[..] {
            if second.iops > 0.0 {
                println!("ratio {} / {}: IOPS {:.2}x", first.target, second.target, first.iops / second.iops);
            }
        }
    }
    Ok(())
}

/// Where `--timeline` and `--timeline-chart` write: the CSV and the charts of each target.
struct TimelineFiles {
    csv: Option<PathBuf>,
    charts: Vec<PathBuf>,
    targets: usize,
}

fn is_chart(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("png") || e.eq_ignore_ascii_case("svg"))
}

impl TimelineFiles {
    /// Checks the paths before the run, so a typo does not cost the run.
    fn new(a: &BenchRunArgs, targets: usize) -> anyhow::Result<Self> {
        let mut csv = None;
        let mut charts = Vec::new();
        if let Some(p) = &a.timeline {
            if is_chart(p) {
                csv = Some(p.with_extension("csv"));
                charts.push(p.clone());
            } else {
                csv = Some(p.clone());
            }
        }
        if let Some(p) = &a.timeline_chart {
            if !is_chart(p) {
                bail!("--timeline-chart {}: expected a file name ending in .png or .svg", p.display());
            }
            charts.push(p.clone());
        }
        for p in csv.iter().chain(&charts) {
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !dir.is_dir() {
                bail!("{}: no such directory {}", p.display(), dir.display());
            }
        }
        Ok(Self { csv, charts, targets })
    }

    /// `p` for a single target; `stem-N.ext` for target N (from 1) of several.
    fn numbered(&self, p: &Path, i: usize) -> PathBuf {
        if self.targets <= 1 {
            return p.to_path_buf();
        }
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let name = match p.extension() {
            Some(e) => format!("{stem}-{}.{}", i + 1, e.to_string_lossy()),
            None => format!("{stem}-{}", i + 1),
        };
        p.with_file_name(name)
    }

    /// Writes target `i`'s series; names each file on stderr.
    fn write(&self, i: usize, r: &braid_bench::Report, wl: &Workload) -> anyhow::Result<()> {
        if let Some(p) = &self.csv {
            let p = self.numbered(p, i);
            std::fs::write(&p, braid_bench::timeline::to_csv(&r.timeline)).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("timeline: {}", p.display());
        }
        for p in &self.charts {
            let p = self.numbered(p, i);
            let title = braid_bench::chart::Title { main: r.target.clone(), sub: format!("{}, {}s", wl.summary(), wl.duration_s) };
            braid_bench::chart::write_timeline(&p, &title, &r.timeline, &[])?;
            eprintln!("timeline chart: {}", p.display());
        }
        Ok(())
    }
}

/// `braid bench chart`: draws a timeline CSV.
fn chart(a: BenchChartArgs) -> anyhow::Result<()> {
    if !is_chart(&a.out) {
        bail!("--out {}: expected a file name ending in .png or .svg", a.out.display());
    }
    let text = std::fs::read_to_string(&a.csv).with_context(|| format!("reading {}", a.csv.display()))?;
    let points = braid_bench::timeline::from_csv(&text).with_context(|| a.csv.display().to_string())?;
    let marks = match &a.iops_marks {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|m| m.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0))
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| anyhow::anyhow!("--iops-marks {list:?}: expected numbers separated by commas, e.g. 500,2000"))?,
    };
    let title = braid_bench::chart::Title { main: a.title, sub: a.subtitle };
    braid_bench::chart::write_timeline(&a.out, &title, &points, &marks)?;
    eprintln!("timeline chart: {}", a.out.display());
    Ok(())
}

/// The --rw and --bs lists of a named sweep (`--preset`).
fn preset(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        // Azure NetApp Files' Linux NFS benchmarks: 25% read/write steps, 4 KiB and 8 KiB
        // (random) and 64 KiB and 256 KiB (sequential) I/O.
        "anf-nfs" => Some(("100:0,75:25,50:50,25:75,0:100", "4k,8k,64k,256k")),
        _ => None,
    }
}

async fn sweep(a: BenchSweepArgs) -> anyhow::Result<()> {
    let (rw, bs) = match a.preset.as_deref() {
        Some(p) => preset(p).ok_or_else(|| anyhow::anyhow!("unknown --preset {p}"))?,
        None => (a.rw.as_str(), a.bs.as_str()),
    };
    let spec = SweepSpec {
        write_pcts: parse_rw(rw)?,
        block_sizes: braid_bench::size::parse_list(bs, "--bs", parse_size)?,
        channels: parse_counts(&a.channels, "--channels")?,
        threads: parse_counts(&a.threads, "--threads")?,
    };
    let base = base_workload(&a.common)?;
    let targets = targets(&a.common)?;
    let points = spec.points().len();
    eprintln!("sweep: {points} point(s) x {} target(s), {}s each, into {}", targets.len(), base.duration_s + base.warmup_s, a.out.display());
    let json = a.json;
    let print_row = |row: &braid_bench::SweepRow| {
        let r = &row.report;
        if json {
            println!("{}", r.to_json());
        } else {
            println!(
                "{}  rw {}:{}  bs {}  ch {}  t {}  IOPS {:.1}  MiB/s {:.2}  p99 {:.1} µs  errors {}",
                r.target,
                100 - row.point.write_pct,
                row.point.write_pct,
                format_size(row.point.block_size),
                row.point.channels,
                row.point.threads,
                r.iops,
                r.mib_per_s,
                r.latency_us.p99,
                r.errors
            );
        }
    };
    // A sweep runs targets of one protocol (its engine is generic over one target type).
    let (smb, nfs): (Vec<_>, Vec<_>) = targets.into_iter().partition(|t| matches!(t, AnyTarget::Smb(_)));
    let files = match (smb.is_empty(), nfs.is_empty()) {
        (false, false) => bail!("bench sweep: the targets must all be smb:// or all nfs://"),
        (false, true) => {
            let smb: Vec<SmbTarget> = smb.into_iter().filter_map(|t| if let AnyTarget::Smb(t) = t { Some(*t) } else { None }).collect();
            braid_bench::run_sweep(&smb, &base, &spec, &a.out, true, print_row).await?.1
        }
        _ => {
            let nfs: Vec<NfsTarget> = nfs.into_iter().filter_map(|t| if let AnyTarget::Nfs(t) = t { Some(t) } else { None }).collect();
            braid_bench::run_sweep(&nfs, &base, &spec, &a.out, true, print_row).await?.1
        }
    };
    eprintln!("wrote {} file(s) into {}", files.len(), a.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(timeline: Option<&str>, chart: Option<&str>) -> BenchRunArgs {
        use clap::Parser;
        let mut argv = vec!["braid", "bench"];
        if let Some(t) = timeline {
            argv.extend(["--timeline", t]);
        }
        if let Some(c) = chart {
            argv.extend(["--timeline-chart", c]);
        }
        argv.push("smb://u@h/s");
        let crate::cli::Command::Bench(b) = crate::cli::Cli::try_parse_from(argv).unwrap().command else { panic!("not bench") };
        b.run
    }

    #[test]
    fn timeline_file_names() {
        let f = TimelineFiles::new(&run_args(Some("t.csv"), None), 1).unwrap();
        assert_eq!((f.csv.as_deref(), f.charts.len()), (Some(Path::new("t.csv")), 0));
        let f = TimelineFiles::new(&run_args(Some("b.PNG"), Some("c.svg")), 2).unwrap();
        assert_eq!(f.csv.as_deref(), Some(Path::new("b.csv")));
        assert_eq!(f.charts, [PathBuf::from("b.PNG"), PathBuf::from("c.svg")]);
        assert_eq!(f.numbered(Path::new("/x/b.csv"), 1), PathBuf::from("/x/b-2.csv"));
        assert_eq!(f.numbered(Path::new("b"), 0), PathBuf::from("b-1"));
        let one = TimelineFiles::new(&run_args(None, Some("c.png")), 1).unwrap();
        assert_eq!((one.csv.is_none(), one.numbered(Path::new("c.png"), 0)), (true, PathBuf::from("c.png")));
        let e = TimelineFiles::new(&run_args(None, Some("c.csv")), 1).err().unwrap().to_string();
        assert!(e.contains("ending in .png or .svg"), "{e}");
        let e = TimelineFiles::new(&run_args(Some("/no/such/dir/t.csv"), None), 1).err().unwrap().to_string();
        assert!(e.contains("no such directory /no/such/dir"), "{e}");
    }

    #[test]
    fn the_anf_preset_is_its_matrix() {
        let (rw, bs) = preset("anf-nfs").unwrap();
        assert_eq!(parse_rw(rw).unwrap().len(), 5);
        assert_eq!(braid_bench::size::parse_list(bs, "--bs", parse_size).unwrap(), vec![4096, 8192, 65536, 262144]);
        assert!(preset("x").is_none());
    }
}
