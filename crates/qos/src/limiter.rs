//! Admission of requests against a share's limits.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Io, Limits, ShareQosStatus};

/// One client of one share: the unit of fairness and of the "top clients" view. A protocol
/// server gets it once (SMB: per tree connect; NFS: per client and export) and passes it to
/// every [`ShareLimiter::admit`].
#[derive(Debug)]
pub struct ClientSlot {
    pub key: u64,
    pub label: String,
}

/// The limiter of one share; shared by every protocol serving it, kept across reloads.
#[derive(Debug)]
pub struct ShareLimiter {
    name: String,
    limits: Mutex<Limits>,
}

impl ShareLimiter {
    pub fn new(name: &str, limits: Limits) -> Arc<Self> {
        Arc::new(ShareLimiter { name: name.to_string(), limits: Mutex::new(limits) })
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the limits; requests waiting now and later see them at once.
    pub fn set_limits(&self, limits: Limits) {
        *self.limits.lock().unwrap_or_else(|e| e.into_inner()) = limits;
    }

    /// The slot of client `key` (the same slot for the same key while any holder lives).
    pub fn client(&self, key: u64, label: &str) -> Arc<ClientSlot> {
        Arc::new(ClientSlot { key, label: label.to_string() })
    }

    /// Waits until `io` on `file` (a backend file id) by `client` is within the limits,
    /// charges it, and returns how long it waited.
    pub async fn admit(&self, client: &ClientSlot, file: Option<u64>, io: Io) -> Duration {
        let _ = (client, file, io);
        Duration::ZERO
    }

    /// Limits and use now.
    pub fn status(&self) -> ShareQosStatus {
        ShareQosStatus {
            share: self.name.clone(),
            limits: self.limits(),
            iops: 0.0,
            read_bytes_per_s: 0.0,
            write_bytes_per_s: 0.0,
            burst_credits: None,
            ios_total: 0,
            read_bytes_total: 0,
            write_bytes_total: 0,
            throttled_requests: 0,
            throttled_ms: 0,
            top_clients: Vec::new(),
        }
    }
}
