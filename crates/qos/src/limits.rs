//! A share's limits. Every field is optional: `None` is no limit.

use serde::Serialize;

/// Limits of one share. Rates are per second; byte rates in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Baseline IOPS.
    pub iops: Option<u64>,
    /// IOPS while burst credits last (above `iops`).
    pub burst_iops: Option<u64>,
    /// Size of the burst credit bucket in IOs: it fills at the baseline rate while the
    /// share runs below baseline and drains by what it runs above; full at start.
    pub burst_credits: Option<u64>,
    /// Data read plus written, bytes per second.
    pub throughput: Option<u64>,
    /// Data written (to the share), bytes per second.
    pub ingress: Option<u64>,
    /// Data read (from the share), bytes per second.
    pub egress: Option<u64>,
    /// IOPS of any one file.
    pub max_file_iops: Option<u64>,
    /// Bytes per second read plus written of any one file.
    pub max_file_throughput: Option<u64>,
}

impl Limits {
    /// No limit at all: the limiter only measures.
    pub fn is_unlimited(&self) -> bool {
        *self == Limits::default()
    }
}
