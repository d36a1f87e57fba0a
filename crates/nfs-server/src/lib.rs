//! Braid's NFSv3 server (RFC 1813) with MOUNT v3, over TCP with RFC 5531 record marking.
//!
//! Layers, each depending only on those before it:
//! - utilities: [`config`], [`handle`] (file handles and their MAC),
//!   [`auth`] (credentials, squash, permission bits);
//! - state: [`drc`] (the duplicate request cache), `paths` (where handles point), `cookies`
//!   (READDIR positions), [`exports`] (replaced on reload), [`state`];
//! - the file state shared with other protocols: `braid_filestate::Files`, and `announce`
//!   (how often data changes are told);
//! - [`nlm`]: the lock service (NLM v4, NSM v1), whose locks live in the shared file table;
//! - `portmap`: port 111 (Braid's own portmapper, or registration with the system's rpcbind).

pub mod auth;
pub mod config;
pub mod drc;
pub mod exports;
pub mod handle;

pub use config::{ClientNet, Export, ExportRules, NfsConfig, PortmapperMode, DEFAULT_STATE_DIR};
mod announce;
mod attrs;
mod connection;
mod cookies;
mod dispatch;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod handlers;
mod listener;
mod mount;
pub mod nlm;
mod open_files;
mod paths;
mod portmap;
mod qos;
mod request;
pub mod state;
mod status;

pub use braid_opmetrics::OpTable;
pub use listener::{serve, serve_state, serve_with_metrics};
pub use state::{op_table, peer_table};
