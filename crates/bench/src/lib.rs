//! `braid bench`: an SMB load generator. Data workloads (diskspd/fio-like: block size,
//! threads, queue depth, read/write mix, random or sequential), metadata mixes, data
//! verification, and sweeps over a matrix with CSV and charts.
//!
//! The engine talks to servers through the [`session`] traits, implemented for Braid's SMB
//! client ([`smb`]) and for an in-memory mock used by the tests.

pub mod chart;
pub mod clients;
pub mod copy;
pub mod cpu;
pub mod csv;
mod meta;
pub mod nfs;
pub mod offsets;
pub mod pattern;
pub mod report;
mod run;
pub mod session;
pub mod size;
pub mod smb;
pub mod sweep;
pub mod timeline;
pub mod url;
pub mod workload;

pub use report::{table, Report};
pub use run::run_target;
pub use session::{BenchFile, OpenMode, Session, Target};
pub use size::{format_size, parse_size};
pub use sweep::{run_sweep, SweepRow, SweepSpec};
pub use url::TargetUrl;
pub use workload::{parse_meta_mix, MetaOp, Workload};

/// Everything that can stop a benchmark. Each displays as one line.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A bad flag value, URL or combination.
    #[error("{0}")]
    BadInput(String),
    /// Connecting, authenticating or connecting the share failed.
    #[error("{target}: {msg}")]
    Connect {
        /// The target (no password).
        target: String,
        /// Why.
        msg: String,
    },
    /// The server cannot do what was asked (e.g. multichannel).
    #[error("{0}")]
    NotSupported(String),
    /// A request failed.
    #[error("{0}")]
    Io(String),
    /// Data read back differs from what was written.
    #[error("{0}")]
    Verify(String),
}
