//! Per-operation counts and latency histograms, as the admin endpoint exports them
//! (`braid_ops_total`, `braid_op_latency_seconds`). Protocol-neutral: a table is built for
//! one protocol from its operation names, so NFS procedures can get a table of their own
//! beside SMB's and share the metric families.
//!
//! The request path touches no lock: each thread records into its own shard (chosen once
//! per thread), and each operation's cells sit on cache lines of their own, so two cores
//! answering READs never write the same line. A scrape sums the shards; a count that moves
//! while it reads is off by the requests in flight, never inconsistent within one
//! histogram (the count is the sum of its buckets).

mod peers;

pub use peers::{PeerConn, PeerStatus, PeerTable};

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets in nanoseconds: 1-2-5 steps from 10 µs to 10 s. A
/// last bucket (+Inf) holds the slower ones. Loopback metadata requests take tens of
/// microseconds, so the first buckets are finer than Prometheus' default 5 ms start.
pub const BOUNDS_NS: [u64; 19] = [
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];
/// Finite buckets plus +Inf.
pub const BUCKETS: usize = BOUNDS_NS.len() + 1;
/// Shards per table; threads are spread over them round-robin.
const SHARDS: usize = 16;

/// One operation's counters in one shard, alone on its cache lines (128 bytes: adjacent
/// lines are fetched in pairs).
#[repr(align(128))]
#[derive(Default)]
struct Cells {
    errors: AtomicU64,
    sum_ns: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard, fixed at its first request.
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

/// Counts and latencies of one protocol's operations.
pub struct OpTable {
    protocol: &'static str,
    names: Vec<&'static str>,
    /// `SHARDS` × `names.len()` cells, shard-major.
    cells: Box<[Cells]>,
}

impl std::fmt::Debug for OpTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpTable").field("protocol", &self.protocol).field("ops", &self.names.len()).finish_non_exhaustive()
    }
}

/// Which bucket a latency falls in.
fn bucket_of(ns: u64) -> usize {
    BOUNDS_NS.iter().position(|&b| ns <= b).unwrap_or(BOUNDS_NS.len())
}

impl OpTable {
    /// A table for `protocol` whose operation `i` is called `names[i]`.
    pub fn new(protocol: &'static str, names: Vec<&'static str>) -> Self {
        let cells = (0..SHARDS * names.len()).map(|_| Cells::default()).collect();
        Self { protocol, names, cells }
    }

    /// Records one answered request of operation `op` (an index into the names; others
    /// are ignored).
    pub fn record(&self, op: usize, ok: bool, elapsed: Duration) {
        if op >= self.names.len() {
            return;
        }
        let shard = SHARD.with(|s| *s);
        let c = &self.cells[shard * self.names.len() + op];
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        if !ok {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
        c.sum_ns.fetch_add(ns, Ordering::Relaxed);
        c.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// The protocol label.
    pub fn protocol(&self) -> &'static str {
        self.protocol
    }

    /// Every operation seen at least once, summed over the shards, in name order.
    pub fn snapshot(&self) -> Vec<OpSnapshot> {
        let n = self.names.len();
        let mut out = Vec::new();
        for (op, &name) in self.names.iter().enumerate() {
            let mut s = OpSnapshot { op: name, errors: 0, sum_ns: 0, buckets: [0; BUCKETS] };
            for shard in 0..SHARDS {
                let c = &self.cells[shard * n + op];
                for (acc, b) in s.buckets.iter_mut().zip(&c.buckets) {
                    *acc += b.load(Ordering::Relaxed);
                }
                s.errors += c.errors.load(Ordering::Relaxed);
                s.sum_ns += c.sum_ns.load(Ordering::Relaxed);
            }
            // An error recorded after its bucket was read would make errors exceed the count.
            s.errors = s.errors.min(s.count());
            if s.count() > 0 {
                out.push(s);
            }
        }
        out
    }
}

/// One operation's totals at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpSnapshot {
    pub op: &'static str,
    pub errors: u64,
    pub sum_ns: u64,
    /// Per bucket (not cumulative), the last one +Inf.
    pub buckets: [u64; BUCKETS],
}

impl OpSnapshot {
    /// Requests answered.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The latency below which a fraction `q` of the requests fell, in nanoseconds,
    /// interpolated linearly inside its bucket as Prometheus' `histogram_quantile` does (a
    /// quantile in the +Inf bucket is the largest finite bound). None without requests.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * count as f64;
        let mut below = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            if n > 0 && (below + n) as f64 >= rank {
                let Some(&hi) = BOUNDS_NS.get(i) else { return BOUNDS_NS.last().copied() };
                let lo = if i == 0 { 0 } else { BOUNDS_NS[i - 1] };
                let frac = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
                return Some(lo + ((hi - lo) as f64 * frac) as u64);
            }
            below += n;
        }
        BOUNDS_NS.last().copied()
    }
}

/// Seconds as Prometheus text (no exponent, no trailing noise).
fn seconds(ns: u64) -> String {
    format!("{}", ns as f64 / 1e9)
}

/// Appends the `braid_ops_total` and `braid_op_latency_seconds` families for the tables.
pub fn write_prometheus(tables: &[&OpTable], out: &mut String) {
    let snaps: Vec<(&str, Vec<OpSnapshot>)> = tables.iter().map(|t| (t.protocol(), t.snapshot())).collect();
    out.push_str("# HELP braid_ops_total Requests answered, by protocol, operation and result (error: an error status).\n");
    out.push_str("# TYPE braid_ops_total counter\n");
    for (proto, ops) in &snaps {
        for s in ops {
            let _ = writeln!(out, "braid_ops_total{{protocol=\"{proto}\",op=\"{}\",result=\"ok\"}} {}", s.op, s.count() - s.errors);
            let _ = writeln!(out, "braid_ops_total{{protocol=\"{proto}\",op=\"{}\",result=\"error\"}} {}", s.op, s.errors);
        }
    }
    out.push_str("# HELP braid_op_latency_seconds Time from a request's arrival in the pipeline to its final response.\n");
    out.push_str("# TYPE braid_op_latency_seconds histogram\n");
    for (proto, ops) in &snaps {
        for s in ops {
            let labels = format!("protocol=\"{proto}\",op=\"{}\"", s.op);
            let mut cum = 0u64;
            for (i, n) in s.buckets.iter().enumerate() {
                cum += n;
                let le = BOUNDS_NS.get(i).map_or_else(|| "+Inf".to_string(), |&b| seconds(b));
                let _ = writeln!(out, "braid_op_latency_seconds_bucket{{{labels},le=\"{le}\"}} {cum}");
            }
            let _ = writeln!(out, "braid_op_latency_seconds_sum{{{labels}}} {}", seconds(s.sum_ns));
            let _ = writeln!(out, "braid_op_latency_seconds_count{{{labels}}} {cum}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> OpTable {
        OpTable::new("smb", vec!["A", "B", "C"])
    }

    #[test]
    fn buckets_are_inclusive_upper_bounds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(10_000), 0);
        assert_eq!(bucket_of(10_001), 1);
        assert_eq!(bucket_of(10_000_000_000), BOUNDS_NS.len() - 1);
        assert_eq!(bucket_of(u64::MAX), BOUNDS_NS.len());
        assert!(BOUNDS_NS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn records_sum_over_threads_and_skip_unseen_ops() {
        let t = table();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..1000u64 {
                        t.record(1, i % 10 != 0, Duration::from_micros(30));
                    }
                });
            }
        });
        t.record(7, true, Duration::from_micros(1)); // out of range: ignored
        let snap = t.snapshot();
        assert_eq!(snap.len(), 1, "only B was seen");
        assert_eq!(snap[0].op, "B");
        assert_eq!(snap[0].count(), 4000);
        assert_eq!(snap[0].errors, 400);
        assert_eq!(snap[0].buckets[2], 4000, "30 µs lies in (20 µs, 50 µs]");
        assert_eq!(snap[0].sum_ns, 4000 * 30_000);
    }

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        let mut s = OpSnapshot { op: "X", errors: 0, sum_ns: 0, buckets: [0; BUCKETS] };
        assert_eq!(s.quantile_ns(0.5), None);
        // 100 requests in (100 µs, 200 µs]: the median is half-way.
        s.buckets[4] = 100;
        assert_eq!(s.quantile_ns(0.5), Some(150_000));
        assert_eq!(s.quantile_ns(1.0), Some(200_000));
        // 99 fast (≤ 10 µs) and one slow (in (1 s, 2 s]): p50 is fast, p99 the end of the
        // first bucket, p100 in the slow bucket.
        let mut s = OpSnapshot { op: "X", errors: 0, sum_ns: 0, buckets: [0; BUCKETS] };
        s.buckets[0] = 99;
        s.buckets[16] = 1;
        assert!(s.quantile_ns(0.5).unwrap() <= 10_000);
        assert_eq!(s.quantile_ns(0.99), Some(10_000));
        assert_eq!(s.quantile_ns(1.0), Some(2_000_000_000));
        // Beyond the last bound: the last bound.
        let mut s = OpSnapshot { op: "X", errors: 0, sum_ns: 0, buckets: [0; BUCKETS] };
        s.buckets[BUCKETS - 1] = 3;
        assert_eq!(s.quantile_ns(0.5), Some(10_000_000_000));
    }

    /// What recording costs on the request path (two clock reads and three relaxed atomic
    /// adds on this thread's shard), one thread and two: `cargo test --release -p braid-opmetrics
    /// tests::cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement: run by hand"]
    fn cost() {
        let t = table();
        const N: u64 = 5_000_000;
        for threads in [1u64, 2] {
            let t0 = std::time::Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        for i in 0..N {
                            let start = std::time::Instant::now();
                            t.record((i % 3) as usize, true, start.elapsed());
                        }
                    });
                }
            });
            let ns = t0.elapsed().as_nanos() as f64 / N as f64;
            println!("{threads} thread(s): {ns:.1} ns per request (clock reads included)");
        }
        assert_eq!(t.snapshot().iter().map(OpSnapshot::count).sum::<u64>(), 3 * N);
    }

    #[test]
    fn prometheus_text_is_cumulative_and_ends_at_the_count() {
        let t = table();
        t.record(0, true, Duration::from_micros(5));
        t.record(0, false, Duration::from_millis(3));
        t.record(0, true, Duration::from_secs(20));
        let mut out = String::new();
        write_prometheus(&[&t], &mut out);
        assert!(out.contains("braid_ops_total{protocol=\"smb\",op=\"A\",result=\"ok\"} 2\n"), "{out}");
        assert!(out.contains("braid_ops_total{protocol=\"smb\",op=\"A\",result=\"error\"} 1\n"));
        assert!(!out.contains("op=\"B\""));
        let buckets: Vec<(String, u64)> = out
            .lines()
            .filter(|l| l.starts_with("braid_op_latency_seconds_bucket"))
            .map(|l| {
                let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
                (le, l.rsplit(' ').next().unwrap().parse().unwrap())
            })
            .collect();
        assert_eq!(buckets.len(), BUCKETS);
        assert_eq!(buckets[0], ("0.00001".to_string(), 1));
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative");
        assert_eq!(buckets.last().unwrap(), &("+Inf".to_string(), 3));
        assert_eq!(buckets[BUCKETS - 2], ("10".to_string(), 2));
        assert!(out.contains("braid_op_latency_seconds_count{protocol=\"smb\",op=\"A\"} 3\n"));
        assert!(out.contains("braid_op_latency_seconds_sum{protocol=\"smb\",op=\"A\"} 20.003005\n"), "{out}");
    }
}
