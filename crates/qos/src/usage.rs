//! Counters of use, always on, lock-free: totals, and the counts of the last full second.
//!
//! The last full second is kept by rolling at the first request of each second: the totals
//! then are the mark, and the difference from the previous mark is the previous second's
//! count (if that second was the one just before; else the previous second had no request).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::Io;

/// IOs, bytes read and bytes written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub ios: u64,
    pub read: u64,
    pub written: u64,
}

#[derive(Debug, Default)]
struct AtomicCounts {
    ios: AtomicU64,
    read: AtomicU64,
    written: AtomicU64,
}

impl AtomicCounts {
    fn load(&self) -> Counts {
        Counts { ios: self.ios.load(Relaxed), read: self.read.load(Relaxed), written: self.written.load(Relaxed) }
    }

    fn store(&self, c: Counts) {
        self.ios.store(c.ios, Relaxed);
        self.read.store(c.read, Relaxed);
        self.written.store(c.written, Relaxed);
    }
}

fn minus(a: Counts, b: Counts) -> Counts {
    Counts { ios: a.ios.wrapping_sub(b.ios), read: a.read.wrapping_sub(b.read), written: a.written.wrapping_sub(b.written) }
}

#[derive(Debug, Default)]
pub(crate) struct Usage {
    total: AtomicCounts,
    /// The second of the last roll (seconds of the share's clock).
    second: AtomicU64,
    /// Totals at the last roll.
    mark: AtomicCounts,
    /// Counts of the second before the last roll (zero if it was not the one just before).
    last: AtomicCounts,
    throttled_requests: AtomicU64,
    throttled_us: AtomicU64,
}

impl Usage {
    /// Counts `io` in second `second`.
    pub fn record(&self, second: u64, io: Io) {
        self.roll(second);
        self.total.ios.fetch_add(io.units(), Relaxed);
        match io {
            Io::Read(n) => self.total.read.fetch_add(n, Relaxed),
            Io::Write(n) => self.total.written.fetch_add(n, Relaxed),
            Io::Meta => 0,
        };
    }

    /// Counts a request that waited `us` microseconds.
    pub fn throttled(&self, us: u64) {
        self.throttled_requests.fetch_add(1, Relaxed);
        self.throttled_us.fetch_add(us, Relaxed);
    }

    fn roll(&self, second: u64) {
        let was = self.second.load(Relaxed);
        if was >= second || self.second.compare_exchange(was, second, Relaxed, Relaxed).is_err() {
            return;
        }
        let now = self.total.load();
        let last = if second == was + 1 { minus(now, self.mark.load()) } else { Counts::default() };
        self.last.store(last);
        self.mark.store(now);
    }

    pub fn totals(&self) -> Counts {
        self.total.load()
    }

    /// The counts of the second before `second`.
    pub fn last_second(&self, second: u64) -> Counts {
        let was = self.second.load(Relaxed);
        if was == second {
            self.last.load()
        } else if was + 1 == second {
            minus(self.total.load(), self.mark.load())
        } else {
            Counts::default()
        }
    }

    pub fn throttled_requests(&self) -> u64 {
        self.throttled_requests.load(Relaxed)
    }

    pub fn throttled_ms(&self) -> u64 {
        self.throttled_us.load(Relaxed) / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_full_second() {
        let u = Usage::default();
        u.record(0, Io::Read(100));
        u.record(0, Io::Write(1 << 20));
        assert_eq!(u.last_second(0), Counts::default());
        assert_eq!(u.last_second(1), Counts { ios: 17, read: 100, written: 1 << 20 });
        u.record(1, Io::Meta);
        assert_eq!(u.last_second(1), Counts { ios: 17, read: 100, written: 1 << 20 });
        assert_eq!(u.last_second(2), Counts { ios: 1, read: 0, written: 0 });
        assert_eq!(u.last_second(3), Counts::default());
        u.record(5, Io::Meta);
        assert_eq!(u.last_second(5), Counts::default());
        assert_eq!(u.totals(), Counts { ios: 19, read: 100, written: 1 << 20 });
    }
}
