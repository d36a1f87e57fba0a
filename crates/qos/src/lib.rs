//! Provisioned performance per share, for every protocol Braid serves.
//!
//! A share's [`Limits`] (set by hand or computed by [`presets`] from a provisioned size)
//! are enforced by its [`ShareLimiter`]: each request asks [`ShareLimiter::admit`] before it
//! runs and waits there when the share (or the file) is over its limit. Requests are never
//! refused. The limiter also measures what the share uses, for `braid status`, `/metrics`
//! and the admin page ([`ShareQosStatus`]).
//!
//! The crate knows nothing of SMB or NFS: a protocol server names the client (a
//! [`ClientSlot`]), the file (its backend file id) and the I/O ([`Io`]).

mod bucket;
pub mod cost;
pub mod gate;
pub mod limiter;
pub mod limits;
pub mod presets;
mod schedule;
pub mod status;
mod usage;

pub use cost::{io_units, Io, IO_UNIT};
pub use gate::{Stalled, StorageGate};
pub use limiter::{ClientSlot, ShareLimiter};
pub use limits::Limits;
pub use presets::{provisioned, Model};
pub use status::{ClientUse, ShareQosStatus};
