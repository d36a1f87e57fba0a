//! Braid's SMB2/3 server: listener, connections, request pipeline and command handlers.
//!
//! Layers, each depending only on those before it:
//! - utilities: [`sync`] (locks), [`op_metrics`], [`storage`], [`status_map`], [`buffers`], [`tcp_ack`];
//! - state: [`server`], [`connection`], [`session`], [`channel`], [`tree`], [`open`],
//!   [`locks`], [`oplocks`], [`dir_leases`], [`notify`], [`write_queue`], plus [`transform`] and the
//!   [`outbox`] trait finished frames go through;
//! - [`request`]: what a handler sees of its request and the services handlers share;
//!   [`breaks`]: sending break notifications through an outbox;
//! - [`handlers`]: one module per command;
//! - [`commands`]: the command table (session and tree needs, credit payload, handler);
//! - [`pipeline`]: credits, authentication, the gate, dispatch, response headers, compounds;
//! - transport: [`reader`] (the socket reader loop) and [`listener`].
//!
//! `tests/test_layering.py` fails on a module cycle through handlers, request, commands or
//! the pipeline.

pub mod admin;
mod afp_info;
mod break_order;
mod breaks;
mod buffers;
mod changes;
mod channel;
mod commands;
pub mod config;
mod connection;
mod credits;
mod dir_leases;
mod durable;
mod foreign;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod handlers;
mod identity;
mod interfaces;
mod listener;
mod locks;
mod notify;
// Per-command metrics, shared with the NFS server (one table per protocol).
use braid_opmetrics as op_metrics;
mod open;
mod oplocks;
mod outbox;
mod persistent;
mod pipeline;
mod qos;
mod reader;
pub mod reload;
mod replay;
mod request;
mod server;
mod session;
mod splice;
mod status_map;
mod storage;
mod sync;
mod tcp_ack;
mod transform;
mod tree;
mod write_queue;

pub use braid_opmetrics::OpTable;
pub use config::{
    EncryptionMode, InterfaceConfig, MetadataCache, ServerConfig, ShareConfig, ShareStorage, UserConfig, DEFAULT_MAX_WATCHES, DEFAULT_STATE_DIR,
};
pub use listener::{run, Server, ServerHandle, ShareInfo};
pub use locks::{SharedFiles, SmbFile};
pub use reload::ReloadReport;
