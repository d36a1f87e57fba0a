//! What a share's limiter reports: limits against use.

use serde::Serialize;

use crate::Limits;

/// One client's recent use of a share.
#[derive(Debug, Clone, Serialize)]
pub struct ClientUse {
    /// The protocol server's name for it (e.g. `smb braid@127.0.0.1`, `nfs 127.0.0.1`).
    pub client: String,
    /// IOs per second over the last full second.
    pub iops: f64,
    /// Bytes per second read plus written over the last full second.
    pub bytes_per_s: f64,
    /// Total time its requests waited for the limit, in milliseconds.
    pub throttled_ms: u64,
}

/// A share's limits and use, as `GET /status` and `/metrics` show them.
#[derive(Debug, Clone, Serialize)]
pub struct ShareQosStatus {
    pub share: String,
    pub limits: Limits,
    /// IOs per second over the last full second.
    pub iops: f64,
    /// Bytes per second read over the last full second.
    pub read_bytes_per_s: f64,
    /// Bytes per second written over the last full second.
    pub write_bytes_per_s: f64,
    /// Burst credits left (None without a burst bucket).
    pub burst_credits: Option<u64>,
    /// Size of the burst credit bucket (None without one).
    pub burst_credits_max: Option<u64>,
    /// Totals since start: IOs, bytes read and written, requests that waited, time waited.
    pub ios_total: u64,
    pub read_bytes_total: u64,
    pub write_bytes_total: u64,
    pub throttled_requests: u64,
    pub throttled_ms: u64,
    /// The busiest clients over the last full second, busiest first (at most 5).
    pub top_clients: Vec<ClientUse>,
}
