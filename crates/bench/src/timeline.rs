//! Per-second IOPS and MiB/s of a run (`braid bench --timeline`), read and write apart: the
//! series behind a chart of a burst draining and refilling.
//!
//! Buckets are one second of the measured window (after any warm-up), chosen by when an
//! operation completed relative to the window's start. An operation counts exactly when the
//! report counts it (it started inside the window), so the buckets add up to the report's
//! totals; the few that complete after the window's end (the last requests in flight) go
//! into the last bucket rather than a sliver of a bucket of their own.
//!
//! The counters are atomics shared by every worker, one set per second allocated before the
//! clock starts: recording is an index and one or two relaxed additions, with no lock and no
//! allocation, the same cost as the progress line's counters beside them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// The most seconds a timeline holds: a day, the longest `-d` accepts.
const MAX_SECONDS: usize = 86_400;

const MIB: f64 = 1024.0 * 1024.0;

/// What an operation was, for the read and write columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A data read.
    Read,
    /// A data write.
    Write,
    /// Anything else (metadata operations): counted in the total IOPS only.
    Other,
}

/// One second's counters.
#[derive(Debug, Default)]
struct Bucket {
    other_ops: AtomicU64,
    read_ops: AtomicU64,
    read_bytes: AtomicU64,
    write_ops: AtomicU64,
    write_bytes: AtomicU64,
}

/// The per-second counters of one run, shared by its workers.
#[derive(Debug)]
pub struct Counters {
    buckets: Box<[Bucket]>,
    duration_s: f64,
}

impl Counters {
    /// Counters for a measured window of `duration_s` seconds: one bucket per second or
    /// part of one.
    pub fn new(duration_s: f64) -> Self {
        let n = if duration_s.is_finite() && duration_s > 0.0 { (duration_s.ceil() as usize).clamp(1, MAX_SECONDS) } else { 1 };
        Self { buckets: (0..n).map(|_| Bucket::default()).collect(), duration_s: duration_s.max(0.0) }
    }

    /// Counts an operation that completed `since_start` after the measured window began.
    #[inline]
    pub fn record(&self, since_start: Duration, kind: Kind, bytes: u64) {
        let i = usize::try_from(since_start.as_secs()).unwrap_or(usize::MAX).min(self.buckets.len() - 1);
        let b = &self.buckets[i];
        match kind {
            Kind::Read => {
                b.read_ops.fetch_add(1, Ordering::Relaxed);
                b.read_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            Kind::Write => {
                b.write_ops.fetch_add(1, Ordering::Relaxed);
                b.write_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            Kind::Other => {
                b.other_ops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The rates of every second. The last bucket of a window that is not a whole number of
    /// seconds is divided by its own length.
    pub fn series(&self) -> Vec<Point> {
        let last = self.buckets.len() - 1;
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let len = if i == last { (self.duration_s - i as f64).clamp(1e-3, 1.0) } else { 1.0 };
                let get = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
                let (r, w, o) = (get(&b.read_ops), get(&b.write_ops), get(&b.other_ops));
                let (rb, wb) = (get(&b.read_bytes), get(&b.write_bytes));
                Point {
                    second: i as u32,
                    iops: round(3, (r + w + o) / len),
                    read_iops: round(3, r / len),
                    write_iops: round(3, w / len),
                    mib_per_s: round(3, (rb + wb) / MIB / len),
                    read_mib_per_s: round(3, rb / MIB / len),
                    write_mib_per_s: round(3, wb / MIB / len),
                }
            })
            .collect()
    }
}

fn round(digits: i32, x: f64) -> f64 {
    let k = 10f64.powi(digits);
    (x * k).round() / k
}

/// One second of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Start of the second, counted from the start of the measured window (0, 1, 2, ...).
    pub second: u32,
    /// Operations per second, all kinds.
    pub iops: f64,
    /// Reads per second.
    pub read_iops: f64,
    /// Writes per second.
    pub write_iops: f64,
    /// MiB per second read and written.
    pub mib_per_s: f64,
    /// MiB per second read.
    pub read_mib_per_s: f64,
    /// MiB per second written.
    pub write_mib_per_s: f64,
}

/// The CSV columns, in order.
pub const CSV_HEADER: [&str; 7] = ["second", "iops", "read_iops", "write_iops", "mib_per_s", "read_mib_per_s", "write_mib_per_s"];

/// The series as CSV: a header line, then one line per second.
pub fn to_csv(points: &[Point]) -> String {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.second.to_string(),
                p.iops.to_string(),
                p.read_iops.to_string(),
                p.write_iops.to_string(),
                p.mib_per_s.to_string(),
                p.read_mib_per_s.to_string(),
                p.write_mib_per_s.to_string(),
            ]
        })
        .collect();
    crate::csv::to_csv(&CSV_HEADER, &rows)
}

/// Reads a series back from [`to_csv`]'s format (to draw it again, or several runs joined).
/// Seconds need not start at 0 or be contiguous.
pub fn from_csv(text: &str) -> Result<Vec<Point>, crate::BenchError> {
    let bad = |n: usize, why: &str| crate::BenchError::BadInput(format!("timeline CSV line {n}: {why}"));
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, h)) if h.trim() == CSV_HEADER.join(",") => {}
        _ => return Err(bad(1, &format!("expected the header {}", CSV_HEADER.join(",")))),
    }
    let mut out = Vec::new();
    for (i, line) in lines {
        let f: Vec<f64> = line.split(',').map(|x| x.trim().parse::<f64>()).collect::<Result<_, _>>().map_err(|e| bad(i + 1, &e.to_string()))?;
        if f.len() != CSV_HEADER.len() || f.iter().any(|x| !x.is_finite() || *x < 0.0) || f[0] > f64::from(u32::MAX) {
            return Err(bad(i + 1, "expected 7 numbers of 0 or more"));
        }
        out.push(Point {
            second: f[0] as u32,
            iops: f[1],
            read_iops: f[2],
            write_iops: f[3],
            mib_per_s: f[4],
            read_mib_per_s: f[5],
            write_mib_per_s: f[6],
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn buckets_by_whole_seconds_and_kinds() {
        let c = Counters::new(3.0);
        c.record(ms(0), Kind::Read, 4096);
        c.record(ms(999), Kind::Read, 4096);
        c.record(ms(1000), Kind::Write, 1 << 20);
        c.record(ms(1500), Kind::Other, 0);
        c.record(ms(2999), Kind::Write, 1 << 20);
        let s = c.series();
        assert_eq!(s.len(), 3);
        assert_eq!(s.iter().map(|p| p.second).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!((s[0].iops, s[0].read_iops, s[0].write_iops), (2.0, 2.0, 0.0));
        assert_eq!(s[0].read_mib_per_s, round(3, 8192.0 / MIB));
        assert_eq!((s[1].iops, s[1].read_iops, s[1].write_iops), (2.0, 0.0, 1.0), "metadata counts in the total only");
        assert_eq!((s[1].mib_per_s, s[1].write_mib_per_s), (1.0, 1.0));
        assert_eq!((s[2].iops, s[2].mib_per_s), (1.0, 1.0));
    }

    #[test]
    fn late_completions_go_into_the_last_second() {
        let c = Counters::new(2.0);
        c.record(ms(2000), Kind::Read, 10);
        c.record(Duration::from_secs(3600), Kind::Read, 10);
        c.record(Duration::MAX, Kind::Write, 10);
        let s = c.series();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].iops, s[1].iops, s[1].read_iops, s[1].write_iops), (0.0, 3.0, 2.0, 1.0));
    }

    #[test]
    fn a_partial_last_second_is_a_rate_over_its_length() {
        let c = Counters::new(1.5);
        for _ in 0..10 {
            c.record(ms(100), Kind::Read, 0);
        }
        for _ in 0..10 {
            c.record(ms(1200), Kind::Read, 0);
        }
        let s = c.series();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].iops, s[1].iops), (10.0, 20.0));
        // Odd durations still get at least one bucket, and never more than a day's.
        assert_eq!(Counters::new(0.2).series().len(), 1);
        assert_eq!(Counters::new(0.0).series().len(), 1);
        assert_eq!(Counters::new(f64::NAN).series().len(), 1);
        assert_eq!(Counters::new(1e9).buckets.len(), MAX_SECONDS);
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let c = std::sync::Arc::new(Counters::new(4.0));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        c.record(ms((i * 4 + t) % 4000), if i % 2 == 0 { Kind::Read } else { Kind::Write }, 4096);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = c.series();
        assert_eq!(s.iter().map(|p| p.iops).sum::<f64>(), 4000.0);
        assert_eq!(s.iter().map(|p| p.read_iops).sum::<f64>(), 2000.0);
        assert!((s.iter().map(|p| p.mib_per_s).sum::<f64>() - 4000.0 * 4096.0 / MIB).abs() < 0.01);
    }

    #[test]
    fn csv_has_the_header_and_one_line_per_second() {
        let c = Counters::new(2.0);
        c.record(ms(10), Kind::Read, 1 << 20);
        c.record(ms(1010), Kind::Write, 512 * 1024);
        c.record(ms(1020), Kind::Write, 512 * 1024);
        let csv = to_csv(&c.series());
        assert_eq!(
            csv,
            "second,iops,read_iops,write_iops,mib_per_s,read_mib_per_s,write_mib_per_s\n\
             0,1,1,0,1,1,0\n\
             1,2,0,2,1,0,1\n"
        );
        assert_eq!(from_csv(&csv).unwrap(), c.series());
        assert!(from_csv("a,b\n1,2\n").unwrap_err().to_string().contains("line 1: expected the header"));
        let e = from_csv(&format!("{}\n0,1,x,0,0,0,0\n", CSV_HEADER.join(","))).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(from_csv(&format!("{}\n0,1,1\n", CSV_HEADER.join(","))).is_err());
        let json = serde_json::to_value(c.series()).unwrap();
        assert_eq!(json[1]["write_iops"], 2.0);
        assert_eq!(json[0]["second"], 0);
    }
}
