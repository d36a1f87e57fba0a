//! Latency histograms, the per-run report, its table and its JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cpu::CpuTimes;
use crate::timeline::Point;
use crate::workload::Workload;

/// Latencies are recorded in nanoseconds from 1 ns to 10 minutes with 3 significant digits.
const HIGHEST_NS: u64 = 600_000_000_000;

fn new_hist() -> Histogram<u64> {
    // The bounds are constants known to be valid, so this cannot fail.
    Histogram::new_with_bounds(1, HIGHEST_NS, 3).unwrap_or_else(|_| unreachable!("valid histogram bounds"))
}

/// Counts and latencies of one kind of operation.
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Completed operations.
    pub count: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Latency histogram (ns).
    pub hist: Histogram<u64>,
}

impl Default for OpStats {
    fn default() -> Self {
        Self { count: 0, bytes: 0, hist: new_hist() }
    }
}

impl OpStats {
    fn add(&mut self, other: &OpStats) {
        self.count += other.count;
        self.bytes += other.bytes;
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }
}

/// What one worker measured; merged into a [`Report`] at the end.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    /// Per operation kind (`read`, `write`, or a metadata op).
    pub ops: BTreeMap<&'static str, OpStats>,
    /// Failed operations.
    pub errors: u64,
}

impl Recorder {
    /// Records a completed operation.
    pub fn record(&mut self, kind: &'static str, latency: Duration, bytes: u64) {
        let s = self.ops.entry(kind).or_default();
        s.count += 1;
        s.bytes += bytes;
        s.hist.saturating_record((latency.as_nanos() as u64).clamp(1, HIGHEST_NS));
    }

    /// Adds another worker's numbers.
    pub fn merge(&mut self, other: &Recorder) {
        for (k, s) in &other.ops {
            self.ops.entry(k).or_default().add(s);
        }
        self.errors += other.errors;
    }

    /// All kinds together.
    pub fn total(&self) -> OpStats {
        let mut t = OpStats::default();
        for s in self.ops.values() {
            t.add(s);
        }
        t
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

fn us(ns: f64) -> f64 {
    (ns / 100.0).round() / 10.0
}

impl Latency {
    /// Percentiles of a nanosecond histogram (all zero when empty).
    pub fn from_hist(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let q = |p: f64| us(h.value_at_quantile(p) as f64);
        Self { p50: q(0.5), p90: q(0.9), p99: q(0.99), p999: q(0.999), max: us(h.max() as f64), mean: us(h.mean()) }
    }
}

/// Rates and latencies of one operation kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpReport {
    /// Completed operations.
    pub count: u64,
    /// Operations per second.
    pub ops_per_s: f64,
    /// MiB per second.
    pub mib_per_s: f64,
    /// Latency percentiles (µs).
    pub latency_us: Latency,
}

/// The result of one run against one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Target URL (no password) or mock name.
    pub target: String,
    /// Operations per second (all kinds).
    pub iops: f64,
    /// MiB per second (data moved by reads and writes).
    pub mib_per_s: f64,
    /// Latency percentiles over all operations (µs).
    pub latency_us: Latency,
    /// Failed operations.
    pub errors: u64,
    /// Client CPU seconds (user + system) during the measured window.
    pub cpu_seconds: f64,
    /// Client user-mode CPU seconds.
    pub cpu_user_seconds: f64,
    /// Client kernel-mode CPU seconds.
    pub cpu_sys_seconds: f64,
    /// Measured seconds.
    pub elapsed_s: f64,
    /// Completed operations in the measured window.
    pub ops: u64,
    /// Bytes moved in the measured window.
    pub bytes: u64,
    /// Per operation kind.
    pub by_op: BTreeMap<String, OpReport>,
    /// Every workload parameter.
    #[serde(flatten)]
    pub workload: Workload,
    /// IOPS and MiB/s of every second of the measured window (see [`crate::timeline`]).
    pub timeline: Vec<Point>,
    /// Times the session reconnected after losing its connection (durable opens only).
    pub reconnects: u64,
    /// How evenly the clients were served (`--clients` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Fairness>,
}

/// How evenly a server served independent clients: Jain's index over the operations each
/// completed in the measured window, and the spread of those counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fairness {
    /// Clients measured.
    pub clients: u32,
    /// Jain's fairness index, (Σx)² / (n·Σx²): 1 when every client did the same, 1/n when
    /// one client did everything.
    pub jain: f64,
    /// Operations of the slowest client.
    pub min_ops: u64,
    /// Median operations per client.
    pub median_ops: f64,
    /// Operations of the fastest client.
    pub max_ops: u64,
    /// Slowest client over the median one.
    pub slowest_to_median: f64,
    /// Operations of every client, in client order (the order they connected in).
    pub per_client_ops: Vec<u64>,
}

/// Jain's fairness index of `xs`, (Σx)² / (n·Σx²). Zero when empty or all zero: a run in
/// which no client got anything done is not a fair one.
pub fn jain_index(xs: &[u64]) -> f64 {
    let sum: f64 = xs.iter().map(|&x| x as f64).sum();
    let squares: f64 = xs.iter().map(|&x| (x as f64) * (x as f64)).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

/// The median of `xs` (the mean of the middle two for an even count; 0 when empty).
pub fn median(xs: &[u64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_unstable();
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2] as f64,
        n => (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0,
    }
}

impl Fairness {
    /// The fairness of per-client operation counts.
    pub fn from_counts(ops: Vec<u64>) -> Self {
        let med = median(&ops);
        let min = ops.iter().copied().min().unwrap_or(0);
        Self {
            clients: ops.len() as u32,
            jain: (jain_index(&ops) * 10_000.0).round() / 10_000.0,
            min_ops: min,
            median_ops: med,
            max_ops: ops.iter().copied().max().unwrap_or(0),
            slowest_to_median: if med > 0.0 { (min as f64 / med * 1000.0).round() / 1000.0 } else { 0.0 },
            per_client_ops: ops,
        }
    }
}

const MIB: f64 = 1024.0 * 1024.0;

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl Report {
    /// Builds the report from merged measurements.
    pub fn new(target: String, workload: &Workload, rec: &Recorder, elapsed: Duration, cpu: CpuTimes) -> Self {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let total = rec.total();
        let by_op = rec
            .ops
            .iter()
            .map(|(k, s)| {
                let r = OpReport {
                    count: s.count,
                    ops_per_s: round2(s.count as f64 / secs),
                    mib_per_s: round2(s.bytes as f64 / MIB / secs),
                    latency_us: Latency::from_hist(&s.hist),
                };
                (k.to_string(), r)
            })
            .collect();
        Self {
            target,
            iops: round2(total.count as f64 / secs),
            mib_per_s: round2(total.bytes as f64 / MIB / secs),
            latency_us: Latency::from_hist(&total.hist),
            errors: rec.errors,
            cpu_seconds: round2(cpu.user + cpu.sys),
            cpu_user_seconds: round2(cpu.user),
            cpu_sys_seconds: round2(cpu.sys),
            elapsed_s: round2(secs),
            ops: total.count,
            bytes: total.bytes,
            by_op,
            workload: workload.clone(),
            timeline: Vec::new(),
            reconnects: 0,
            fairness: None,
        }
    }

    /// The report with its per-second series.
    pub fn with_timeline(mut self, timeline: Vec<Point>) -> Self {
        self.timeline = timeline;
        self
    }

    /// The report with the clients' fairness.
    pub fn with_fairness(mut self, fairness: Fairness) -> Self {
        self.fairness = Some(fairness);
        self
    }

    /// The report as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// Renders reports as an aligned text table: one row per target, plus one row per
/// operation kind when a run mixed several.
pub fn table(reports: &[Report]) -> String {
    let mut rows: Vec<[String; 11]> =
        vec![["target", "op", "IOPS", "MiB/s", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "CPU s", "errors"].map(String::from)];
    let f1 = |x: f64| format!("{x:.1}");
    for r in reports {
        let l = r.latency_us;
        rows.push([
            r.target.clone(),
            "all".into(),
            f1(r.iops),
            format!("{:.2}", r.mib_per_s),
            f1(l.p50),
            f1(l.p90),
            f1(l.p99),
            f1(l.p999),
            f1(l.max),
            format!("{:.2}", r.cpu_seconds),
            r.errors.to_string(),
        ]);
        if r.by_op.len() > 1 {
            for (k, o) in &r.by_op {
                let l = o.latency_us;
                rows.push([
                    String::new(),
                    k.clone(),
                    f1(o.ops_per_s),
                    format!("{:.2}", o.mib_per_s),
                    f1(l.p50),
                    f1(l.p90),
                    f1(l.p99),
                    f1(l.p999),
                    f1(l.max),
                    String::new(),
                    String::new(),
                ]);
            }
        }
    }
    let widths: Vec<usize> = (0..11).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            // Text columns left-aligned, numbers right-aligned.
            if c < 2 {
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(line, "{}{cell}  ", " ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for r in reports {
        if let Some(f) = &r.fairness {
            let _ = writeln!(
                out,
                "fairness {}: {} clients, Jain {:.4}, ops per client min {} / median {} / max {}, slowest/median {:.3}",
                r.target, f.clients, f.jain, f.min_ops, f.median_ops, f.max_ops, f.slowest_to_median
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        for i in 1..=1000u64 {
            a.record("read", Duration::from_micros(i), 4096);
        }
        b.record("write", Duration::from_millis(50), 4096);
        b.errors = 2;
        a.merge(&b);
        Report::new("smb://u@h:445/s".into(), &Workload::default(), &a, Duration::from_secs(2), CpuTimes { user: 0.5, sys: 0.25 })
    }

    #[test]
    fn percentiles() {
        let r = sample();
        assert_eq!(r.ops, 1001);
        assert_eq!(r.iops, 500.5);
        assert_eq!(r.errors, 2);
        let l = r.by_op["read"].latency_us;
        // hdrhistogram keeps 3 significant digits.
        assert!((l.p50 - 500.0).abs() <= 1.0, "{l:?}");
        assert!((l.p90 - 900.0).abs() <= 1.0, "{l:?}");
        assert!((l.p99 - 990.0).abs() <= 1.0, "{l:?}");
        assert!((l.p999 - 999.0).abs() <= 1.0, "{l:?}");
        assert!((r.latency_us.max - 50_000.0).abs() <= 50.0, "{:?}", r.latency_us);
        assert_eq!(r.cpu_seconds, 0.75);
        assert!((r.mib_per_s - 1001.0 * 4096.0 / MIB / 2.0).abs() < 0.01);
        assert_eq!(Latency::from_hist(&new_hist()), Latency::default());
    }

    #[test]
    fn json_shape() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        for key in [
            "iops",
            "mib_per_s",
            "errors",
            "cpu_seconds",
            "block_size",
            "threads",
            "queue_depth",
            "write_pct",
            "random",
            "files",
            "file_size",
            "duration_s",
            "warmup_s",
            "randrepeat",
            "channels",
            "sign",
            "encrypt",
            "verify",
            "target",
            "timeline",
        ] {
            assert!(v.get(key).is_some(), "missing {key}: {v}");
        }
        for key in ["p50", "p90", "p99", "p999", "max"] {
            assert!(v["latency_us"][key].is_number(), "missing latency_us.{key}");
        }
        assert!(v["by_op"]["read"]["ops_per_s"].is_number());
        assert_eq!(v["errors"], 2);
    }

    #[test]
    fn jain_and_median() {
        assert_eq!(jain_index(&[5, 5, 5, 5]), 1.0);
        // One client of four did everything: 1/n.
        assert_eq!(jain_index(&[8, 0, 0, 0]), 0.25);
        // (1+2+3+4)^2 / (4 * (1+4+9+16)) = 100 / 120.
        assert!((jain_index(&[1, 2, 3, 4]) - 100.0 / 120.0).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 0.0);
        assert_eq!(jain_index(&[0, 0]), 0.0);
        assert_eq!(median(&[3, 1, 2]), 2.0);
        assert_eq!(median(&[4, 1, 3, 2]), 2.5);
        assert_eq!(median(&[]), 0.0);
        let f = Fairness::from_counts(vec![50, 100, 100, 120]);
        assert_eq!((f.clients, f.min_ops, f.median_ops, f.max_ops), (4, 50, 100.0, 120));
        assert_eq!(f.slowest_to_median, 0.5);
        assert!((f.jain - 0.9275).abs() < 1e-4, "{f:?}");
        assert_eq!(Fairness::from_counts(vec![0, 0]).slowest_to_median, 0.0);
    }

    #[test]
    fn fairness_in_table_and_json() {
        let r = sample().with_fairness(Fairness::from_counts(vec![10, 10]));
        assert!(table(std::slice::from_ref(&r)).contains("fairness smb://u@h:445/s: 2 clients, Jain 1.0000"));
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["fairness"]["jain"], 1.0);
        assert_eq!(v["fairness"]["per_client_ops"][1], 10);
        // Runs without --clients have no fairness key.
        assert!(serde_json::from_str::<serde_json::Value>(&sample().to_json()).unwrap().get("fairness").is_none());
    }

    #[test]
    fn table_rows() {
        let t = table(&[sample()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].starts_with("target") && lines[0].contains("p99.9 µs"));
        assert!(lines[1].contains("smb://u@h:445/s") && lines[1].contains("500.5"));
        assert!(lines[2].contains("read") && lines[3].contains("write"));
    }
}
