//! Client CPU time of this process (all threads), from /proc/self/stat: no unsafe code.

/// User and system CPU seconds consumed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// User-mode seconds.
    pub user: f64,
    /// Kernel-mode seconds.
    pub sys: f64,
}

impl CpuTimes {
    /// Reads the current totals; zeros where /proc is unavailable.
    pub fn now() -> Self {
        std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| parse_stat(&s, rustix::param::clock_ticks_per_second())).unwrap_or_default()
    }

    /// Time spent between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes { user: (self.user - earlier.user).max(0.0), sys: (self.sys - earlier.sys).max(0.0) }
    }
}

/// Parses utime and stime (fields 14 and 15, in clock ticks) of a /proc/PID/stat line. The
/// command name (field 2) may contain spaces and parentheses, so fields are counted from
/// the last ')'.
pub fn parse_stat(line: &str, ticks_per_sec: u64) -> Option<CpuTimes> {
    let after = &line[line.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let hz = ticks_per_sec.max(1) as f64;
    Some(CpuTimes { user: utime as f64 / hz, sys: stime as f64 / hz })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines() {
        let line = "1234 (we ird) (name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0";
        let t = parse_stat(line, 100).unwrap();
        assert_eq!(t, CpuTimes { user: 2.5, sys: 0.5 });
        assert!(parse_stat("garbage", 100).is_none());
        let now = CpuTimes::now();
        assert!(now.user + now.sys >= 0.0);
    }
}
