//! Log output: tracing to standard error.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Sets up logging. The filter comes from `-v` (debug, trace), else `RUST_LOG`, else the
/// config's `log`, else `info`.
pub fn init(verbose: u8, config_log: Option<&str>) {
    let filter = match verbose {
        0 => EnvFilter::try_from_default_env()
            .ok()
            .or_else(|| config_log.and_then(|l| EnvFilter::try_new(l).ok()))
            .unwrap_or_else(|| EnvFilter::new("info")),
        1 => EnvFilter::new("debug"),
        _ => EnvFilter::new("trace"),
    };
    // try_init: a second call (tests) must not panic.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only garble logs redirected to files or journald.
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
