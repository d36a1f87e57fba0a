//! The `braid_share_*` Prometheus families: each share's provisioned limits, its use over the
//! last second, and totals since start, one series per share (label `share`). A limit that
//! is not set has no series: absence means unlimited.

use std::fmt::Write as _;

use braid_qos::ShareQosStatus;

use super::label;

/// A value of one share, or None when it has none (an unset limit).
type Field = fn(&ShareQosStatus) -> Option<f64>;

/// (name, type, help, value) of every family.
const FAMILIES: [(&str, &str, &str, Field); 17] = [
    ("braid_share_iops_limit", "gauge", "Provisioned baseline IOPS.", |s| f(s.limits.iops)),
    ("braid_share_burst_iops_limit", "gauge", "IOPS allowed while burst credits last.", |s| f(s.limits.burst_iops)),
    ("braid_share_burst_credits_limit", "gauge", "Size of the burst credit bucket, in IOs.", |s| f(s.limits.burst_credits)),
    ("braid_share_throughput_limit_bytes_per_second", "gauge", "Provisioned throughput, read plus write.", |s| f(s.limits.throughput)),
    ("braid_share_ingress_limit_bytes_per_second", "gauge", "Provisioned write throughput.", |s| f(s.limits.ingress)),
    ("braid_share_egress_limit_bytes_per_second", "gauge", "Provisioned read throughput.", |s| f(s.limits.egress)),
    ("braid_share_file_iops_limit", "gauge", "IOPS limit of any one file.", |s| f(s.limits.max_file_iops)),
    ("braid_share_file_throughput_limit_bytes_per_second", "gauge", "Throughput limit of any one file.", |s| f(s.limits.max_file_throughput)),
    ("braid_share_iops", "gauge", "IOs per second over the last full second.", |s| Some(s.iops)),
    ("braid_share_read_bytes_per_second", "gauge", "Bytes read per second over the last full second.", |s| Some(s.read_bytes_per_s)),
    ("braid_share_write_bytes_per_second", "gauge", "Bytes written per second over the last full second.", |s| Some(s.write_bytes_per_s)),
    ("braid_share_burst_credits", "gauge", "Burst credits left, in IOs.", |s| f(s.burst_credits)),
    ("braid_share_io_total", "counter", "IOs since start (one per 64 KiB or part of it of data, one per other operation).", |s| f(Some(s.ios_total))),
    ("braid_share_read_bytes_total", "counter", "Bytes read since start.", |s| f(Some(s.read_bytes_total))),
    ("braid_share_write_bytes_total", "counter", "Bytes written since start.", |s| f(Some(s.write_bytes_total))),
    ("braid_share_throttled_requests_total", "counter", "Requests that waited for the share's limits.", |s| f(Some(s.throttled_requests))),
    ("braid_share_throttled_seconds_total", "counter", "Time requests waited for the share's limits, summed over requests.", |s| {
        Some(s.throttled_ms as f64 / 1000.0)
    }),
];

fn f(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

/// Appends the families that have at least one series.
pub fn write(shares: &[ShareQosStatus], out: &mut String) {
    for (name, kind, help, field) in FAMILIES {
        let values: Vec<(&str, f64)> = shares.iter().filter_map(|s| Some((s.share.as_str(), field(s)?))).collect();
        if values.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (share, v) in values {
            let _ = writeln!(out, "{name}{{share=\"{}\"}} {v}", label(share));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_qos::Limits;

    /// A status as the limiter makes it (so fields added later need no change here), with use.
    fn share(name: &str, limits: Limits) -> ShareQosStatus {
        let mut s = braid_qos::ShareLimiter::new(name, limits).status();
        s.iops = 1500.5;
        s.read_bytes_per_s = 1048576.0;
        s.write_bytes_per_s = 0.0;
        s.burst_credits = None;
        s.ios_total = 123456;
        s.read_bytes_total = 7 << 30;
        s.write_bytes_total = 5;
        s.throttled_requests = 9;
        s.throttled_ms = 2500;
        s
    }

    #[test]
    fn limits_use_and_totals_per_share() {
        let limited =
            Limits { iops: Some(4024), burst_iops: Some(10000), burst_credits: Some(21513600), throughput: Some(203 << 20), ..Limits::default() };
        let mut a = share("data", limited);
        a.burst_credits = Some(21000000);
        let b = share("fr\"ee", Limits::default());
        let mut out = String::new();
        write(&[a, b], &mut out);
        for line in [
            "# TYPE braid_share_iops_limit gauge\nbraid_share_iops_limit{share=\"data\"} 4024\n",
            "braid_share_burst_iops_limit{share=\"data\"} 10000\n",
            "braid_share_burst_credits_limit{share=\"data\"} 21513600\n",
            "braid_share_throughput_limit_bytes_per_second{share=\"data\"} 212860928\n",
            "braid_share_burst_credits{share=\"data\"} 21000000\n",
            "braid_share_iops{share=\"data\"} 1500.5\nbraid_share_iops{share=\"fr\\\"ee\"} 1500.5\n",
            "braid_share_read_bytes_per_second{share=\"data\"} 1048576\n",
            "# TYPE braid_share_io_total counter\nbraid_share_io_total{share=\"data\"} 123456\n",
            "braid_share_read_bytes_total{share=\"fr\\\"ee\"} 7516192768\n",
            "braid_share_throttled_requests_total{share=\"data\"} 9\n",
            "braid_share_throttled_seconds_total{share=\"data\"} 2.5\n",
        ] {
            assert!(out.contains(line), "{line:?} missing from\n{out}");
        }
        // Unset limits have no series; a family nobody has is left out entirely.
        assert!(!out.contains("braid_share_iops_limit{share=\"fr"), "{out}");
        assert!(!out.contains("braid_share_ingress_limit"), "{out}");
        let mut empty = String::new();
        write(&[], &mut empty);
        assert!(empty.is_empty());
    }
}
