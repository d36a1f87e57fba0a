//! Log output: tracing to standard error; under systemd, lines journald files by priority.

use std::io::IsTerminal;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::registry::LookupSpan;
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
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // try_init: a second call (tests) must not panic.
    if stderr_is_journal() {
        // journald stamps each line itself and reads the `<N>` prefix as its priority
        // (decisions.md, "Logging under systemd").
        let format = Journald(tracing_subscriber::fmt::format().without_time());
        let _ = builder.with_ansi(false).event_format(format).try_init();
    } else {
        // Colour codes only garble logs redirected to files.
        let _ = builder.with_ansi(std::io::stderr().is_terminal()).try_init();
    }
}

/// Whether standard error is the journal's stream: systemd sets `JOURNAL_STREAM` to its
/// `device:inode`, which a redirection by a child's shell would no longer match.
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(want) = std::env::var_os("JOURNAL_STREAM") else { return false };
    let Ok(m) = std::fs::metadata("/proc/self/fd/2") else { return false };
    want.to_str() == Some(&format!("{}:{}", m.dev(), m.ino()))
}

/// The syslog priority journald reads from a `<N>` line prefix (sd-daemon(3)).
fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

/// A line format with the syslog priority in front.
struct Journald<F>(F);

impl<S, N, F> FormatEvent<S, N> for Journald<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        write!(writer, "<{}>", priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_are_syslogs() {
        assert_eq!([&Level::ERROR, &Level::WARN, &Level::INFO, &Level::DEBUG, &Level::TRACE].map(priority), [3, 4, 6, 7, 7]);
    }
}
