//! Braid's SMB2/3 server: listener, connections, request pipeline and command handlers.

pub mod config;
pub use config::{ServerConfig, ShareConfig, UserConfig};

/// Runs the server until the process is stopped. Binds every `listen` address first and
/// returns an error if any bind fails.
pub async fn run(config: ServerConfig) -> std::io::Result<()> {
    let _ = config;
    Err(std::io::Error::other("server not yet implemented"))
}
