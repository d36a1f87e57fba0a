//! Braid's SMB2/3 server: listener, connections, request pipeline and command handlers.
//!
//! Layout: [`listener`] accepts TCP connections; each [`connection`] runs a reader loop that
//! hands whole frames to [`pipeline`], which validates, dispatches to one module per command
//! under [`handlers`], and writes the (signed) response. Shared state lives in [`server`]:
//! shares, sessions and the per-file table of opens and byte-range locks.

pub mod admin;
mod buffers;
mod channel;
pub mod config;
mod connection;
mod credits;
mod handlers;
mod interfaces;
mod listener;
mod locks;
mod notify;
mod open;
mod oplocks;
mod pipeline;
mod server;
mod session;
mod splice;
mod status_map;
mod sync;
mod tcp_ack;
mod transform;
mod tree;
mod write_queue;

pub use config::{EncryptionMode, InterfaceConfig, ServerConfig, ShareConfig, UserConfig};
pub use listener::run;
