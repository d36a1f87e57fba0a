//! `braid bench sweep`: a matrix of read/write ratio x block size x channels x threads over
//! one or more targets. Targets are interleaved at every point (and the order rotates from
//! point to point) so slow drift on the machine affects all targets alike.

use std::path::{Path, PathBuf};

use crate::chart::{write_chart, Chart, Series};
use crate::csv::to_csv;
use crate::report::Report;
use crate::run::run_target;
use crate::session::Target;
use crate::size::{format_size, parse_list};
use crate::workload::Workload;
use crate::BenchError;

/// The swept values; every combination is one point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSpec {
    /// Write percentages (from `--rw 100:0,75:25`: read:write).
    pub write_pcts: Vec<u8>,
    /// Block sizes in bytes.
    pub block_sizes: Vec<u64>,
    /// Channel counts.
    pub channels: Vec<u32>,
    /// Thread counts.
    pub threads: Vec<u32>,
}

/// Parses `--rw 100:0,75:25,50:50` (read:write percentages summing to 100) into write
/// percentages.
pub fn parse_rw(s: &str) -> Result<Vec<u8>, BenchError> {
    parse_list(s, "--rw", |p| {
        let bad = || BenchError::BadInput(format!("--rw: bad ratio {p:?} (expected READ:WRITE percentages adding up to 100, e.g. 70:30)"));
        let (r, w) = p.split_once(':').ok_or_else(bad)?;
        let r: u8 = r.trim().parse().map_err(|_| bad())?;
        let w: u8 = w.trim().parse().map_err(|_| bad())?;
        if u16::from(r) + u16::from(w) != 100 {
            return Err(bad());
        }
        Ok(w)
    })
}

/// Parses a list of counts such as `1,2,4,8` (each at least 1).
pub fn parse_counts(s: &str, what: &str) -> Result<Vec<u32>, BenchError> {
    parse_list(s, what, |p| p.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| BenchError::BadInput(format!("{what}: bad count {p:?}"))))
}

/// One point of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Write percentage.
    pub write_pct: u8,
    /// Block size.
    pub block_size: u64,
    /// Channels.
    pub channels: u32,
    /// Threads.
    pub threads: u32,
}

impl SweepSpec {
    /// Every combination, block size varying slowest so files are reused longest.
    pub fn points(&self) -> Vec<Point> {
        let mut v = Vec::new();
        for &block_size in &self.block_sizes {
            for &channels in &self.channels {
                for &threads in &self.threads {
                    for &write_pct in &self.write_pcts {
                        v.push(Point { write_pct, block_size, channels, threads });
                    }
                }
            }
        }
        v
    }
}

/// One measured point for one target.
#[derive(Debug, Clone)]
pub struct SweepRow {
    /// The point.
    pub point: Point,
    /// Its report.
    pub report: Report,
}

const CSV_HEADER: &[&str] = &[
    "target",
    "read_pct",
    "write_pct",
    "block_size",
    "channels",
    "threads",
    "queue_depth",
    "random",
    "iops",
    "mib_per_s",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "max_us",
    "errors",
    "cpu_seconds",
];

/// The CSV of a sweep.
pub fn sweep_csv(rows: &[SweepRow]) -> String {
    let data: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let p = r.point;
            let l = r.report.latency_us;
            vec![
                r.report.target.clone(),
                (100 - p.write_pct).to_string(),
                p.write_pct.to_string(),
                p.block_size.to_string(),
                p.channels.to_string(),
                p.threads.to_string(),
                r.report.workload.queue_depth.to_string(),
                r.report.workload.random.to_string(),
                r.report.iops.to_string(),
                r.report.mib_per_s.to_string(),
                l.p50.to_string(),
                l.p90.to_string(),
                l.p99.to_string(),
                l.p999.to_string(),
                l.max.to_string(),
                r.report.errors.to_string(),
                r.report.cpu_seconds.to_string(),
            ]
        })
        .collect();
    to_csv(CSV_HEADER, &data)
}

/// Swept dimensions: (file-name key, axis name, key of a point, label of a key).
#[derive(Clone, Copy)]
enum Dim {
    Rw,
    Bs,
    Channels,
    Threads,
}

impl Dim {
    const ALL: [Dim; 4] = [Dim::Rw, Dim::Bs, Dim::Channels, Dim::Threads];
    fn key(self, p: &Point) -> u64 {
        match self {
            Dim::Rw => u64::from(p.write_pct),
            Dim::Bs => p.block_size,
            Dim::Channels => u64::from(p.channels),
            Dim::Threads => u64::from(p.threads),
        }
    }
    fn label(self, k: u64) -> String {
        match self {
            Dim::Rw => format!("{}:{}", 100 - k, k),
            Dim::Bs => format_size(k),
            Dim::Channels | Dim::Threads => k.to_string(),
        }
    }
    fn short(self, k: u64) -> String {
        match self {
            Dim::Rw => format!("rw{}-{}", 100 - k, k),
            Dim::Bs => format!("bs{}", format_size(k)),
            Dim::Channels => format!("ch{k}"),
            Dim::Threads => format!("t{k}"),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Dim::Rw => "rw",
            Dim::Bs => "bs",
            Dim::Channels => "channels",
            Dim::Threads => "threads",
        }
    }
    fn axis(self) -> &'static str {
        match self {
            Dim::Rw => "read:write %",
            Dim::Bs => "block size",
            Dim::Channels => "channels",
            Dim::Threads => "threads",
        }
    }
    fn values(self, spec: &SweepSpec) -> Vec<u64> {
        match self {
            Dim::Rw => spec.write_pcts.iter().map(|&v| u64::from(v)).collect(),
            Dim::Bs => spec.block_sizes.clone(),
            Dim::Channels => spec.channels.iter().map(|&v| u64::from(v)).collect(),
            Dim::Threads => spec.threads.iter().map(|&v| u64::from(v)).collect(),
        }
    }
}

/// Writes one IOPS and one MiB/s chart (PNG + SVG) per swept variable and per combination
/// of the other swept variables; returns the files written.
pub fn write_charts(dir: &Path, spec: &SweepSpec, rows: &[SweepRow], targets: &[String]) -> Result<Vec<PathBuf>, BenchError> {
    let varying: Vec<Dim> = Dim::ALL.into_iter().filter(|d| d.values(spec).len() > 1).collect();
    // With nothing swept there is still one chart, over block size.
    let xs = if varying.is_empty() { vec![Dim::Bs] } else { varying.clone() };
    let mut files = Vec::new();
    for x in xs {
        let others: Vec<Dim> = varying.iter().copied().filter(|d| d.name() != x.name()).collect();
        // Every combination of the other varying dimensions, in first-seen order.
        let mut groups: Vec<Vec<u64>> = Vec::new();
        for r in rows {
            let g: Vec<u64> = others.iter().map(|d| d.key(&r.point)).collect();
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        let cats = x.values(spec);
        for g in groups {
            let fixed: Vec<String> = others.iter().zip(&g).map(|(d, &k)| d.short(k)).collect();
            let sel: Vec<&SweepRow> = rows.iter().filter(|r| others.iter().zip(&g).all(|(d, &k)| d.key(&r.point) == k)).collect();
            let Some(any) = sel.first() else { continue };
            let wl = &any.report.workload;
            let ctx = {
                let mut parts = vec![if wl.random { "random".to_string() } else { "sequential".to_string() }, format!("QD {}", wl.queue_depth)];
                for d in Dim::ALL {
                    if d.name() != x.name() {
                        parts.push(format!("{} {}", d.axis(), d.label(d.key(&any.point))));
                    }
                }
                parts.join(", ")
            };
            for (metric, ylabel) in [("iops", "IOPS"), ("mib_per_s", "MiB/s")] {
                let series = targets
                    .iter()
                    .map(|t| Series {
                        name: t.clone(),
                        values: cats
                            .iter()
                            .map(|&c| {
                                sel.iter().find(|r| &r.report.target == t && x.key(&r.point) == c).map(|r| {
                                    if metric == "iops" {
                                        r.report.iops
                                    } else {
                                        r.report.mib_per_s
                                    }
                                })
                            })
                            .collect(),
                    })
                    .collect();
                let chart = Chart {
                    title: format!("{ylabel} vs {} ({ctx})", x.axis()),
                    x_label: x.axis().into(),
                    y_label: ylabel.into(),
                    categories: cats.iter().map(|&c| x.label(c)).collect(),
                    series,
                };
                let mut name = format!("{metric}_vs_{}", x.name());
                if !fixed.is_empty() {
                    name = format!("{name}__{}", fixed.join("_"));
                }
                files.extend(write_chart(&dir.join(name), &chart)?);
            }
        }
    }
    Ok(files)
}

/// Runs the matrix against every target, calling `each` after every run (for live output),
/// then writes `results.csv` and the charts into `out`. Returns the rows and files written.
pub async fn run_sweep<T: Target>(
    targets: &[T],
    base: &Workload,
    spec: &SweepSpec,
    out: &Path,
    progress: bool,
    mut each: impl FnMut(&SweepRow),
) -> Result<(Vec<SweepRow>, Vec<PathBuf>), BenchError> {
    if targets.is_empty() {
        return Err(BenchError::BadInput("no target".into()));
    }
    let max_bs = spec.block_sizes.iter().copied().max().unwrap_or(0);
    if base.file_size < max_bs {
        return Err(BenchError::BadInput(format!(
            "file size {} is smaller than the largest block size {}",
            format_size(base.file_size),
            format_size(max_bs)
        )));
    }
    for p in spec.points() {
        Workload { write_pct: p.write_pct, block_size: p.block_size, channels: p.channels, threads: p.threads, ..base.clone() }.validate()?;
    }
    std::fs::create_dir_all(out).map_err(|e| BenchError::Io(format!("{}: {e}", out.display())))?;
    let mut rows = Vec::new();
    for (i, p) in spec.points().into_iter().enumerate() {
        let wl = Workload { write_pct: p.write_pct, block_size: p.block_size, channels: p.channels, threads: p.threads, ..base.clone() };
        for j in 0..targets.len() {
            let t = &targets[(i + j) % targets.len()];
            let report = run_target(t, &wl, progress).await?;
            let row = SweepRow { point: p, report };
            each(&row);
            rows.push(row);
        }
    }
    let csv_path = out.join("results.csv");
    std::fs::write(&csv_path, sweep_csv(&rows)).map_err(|e| BenchError::Io(format!("{}: {e}", csv_path.display())))?;
    let names: Vec<String> = targets.iter().map(|t| t.describe()).collect();
    let mut files = vec![csv_path];
    files.extend(write_charts(out, spec, &rows, &names)?);
    Ok((rows, files))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_matrix_lists() {
        assert_eq!(parse_rw("100:0, 75:25,0:100").unwrap(), vec![0, 25, 100]);
        assert!(parse_rw("70:20").is_err());
        assert!(parse_rw("70").is_err());
        assert!(parse_rw("").is_err());
        assert_eq!(parse_counts("1,2,16", "--threads").unwrap(), vec![1, 2, 16]);
        assert!(parse_counts("0", "--threads").is_err());
        let spec = SweepSpec { write_pcts: vec![0, 50], block_sizes: vec![4096, 65536], channels: vec![1], threads: vec![1, 2] };
        assert_eq!(spec.points().len(), 8);
    }
}
