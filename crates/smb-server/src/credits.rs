//! The per-connection credit window (MS-SMB2 3.3.1.1, 3.3.5.2.3).
//!
//! Every MessageId may be used once, and only after the server granted it. The window is a
//! bitmap from the lowest unused id to the highest granted id, so its size is bounded by the
//! number of credits the server ever hands out.

/// Most credits outstanding per connection (Windows uses 8192 as well).
pub const MAX_CREDITS: u64 = 8192;

/// Tracks which message ids a connection may still use.
#[derive(Debug)]
pub struct CreditWindow {
    /// Lowest id not yet used.
    low: u64,
    /// One past the highest granted id.
    high: u64,
    /// used[i] says whether id `low + i` was consumed (only ids in `low..high`).
    used: std::collections::VecDeque<bool>,
}

impl Default for CreditWindow {
    fn default() -> Self {
        // Id 0 is implicitly granted for the first NEGOTIATE.
        CreditWindow { low: 0, high: 1, used: std::collections::VecDeque::from([false]) }
    }
}

impl CreditWindow {
    /// Consumes ids `first..first+charge`; false if any is outside the window or reused.
    pub fn consume(&mut self, first: u64, charge: u64) -> bool {
        let Some(end) = first.checked_add(charge) else { return false };
        if first < self.low || end > self.high {
            return false;
        }
        let start = (first - self.low) as usize;
        let n = charge as usize;
        if self.used.range(start..start + n).any(|u| *u) {
            return false;
        }
        for u in self.used.range_mut(start..start + n) {
            *u = true;
        }
        while self.used.front() == Some(&true) {
            self.used.pop_front();
            self.low += 1;
        }
        true
    }

    /// Credits granted but not yet used.
    pub fn outstanding(&self) -> u64 {
        self.used.iter().filter(|u| !**u).count() as u64
    }

    /// Grants up to `requested` more ids (at least one if the client would otherwise have
    /// none), never exceeding [`MAX_CREDITS`] outstanding. Returns the number granted.
    pub fn grant(&mut self, requested: u16) -> u16 {
        let outstanding = self.outstanding();
        let room = MAX_CREDITS.saturating_sub(outstanding);
        let mut g = u64::from(requested).min(room);
        if g == 0 && outstanding == 0 {
            g = 1;
        }
        // The bitmap spans low..high; bound its length even if the client leaves holes.
        let span_room = (MAX_CREDITS * 2).saturating_sub(self.high - self.low);
        g = g.min(span_room);
        for _ in 0..g {
            self.used.push_back(false);
        }
        self.high += g;
        u16::try_from(g).unwrap_or(u16::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_rules() {
        let mut w = CreditWindow::default();
        assert!(w.consume(0, 1));
        assert!(!w.consume(0, 1), "reuse");
        assert_eq!(w.outstanding(), 0);
        assert_eq!(w.grant(0), 1, "never leave the client with no credit");
        assert_eq!(w.grant(10), 10);
        assert!(!w.consume(5, 8), "beyond the window");
        assert!(w.consume(5, 4));
        assert!(w.consume(1, 4));
        assert!(!w.consume(3, 1));
        assert!(w.consume(9, 2));
        // Ids 1..=11 were granted (1 + 10): 11 is the last usable one.
        assert!(w.consume(11, 1));
        assert!(!w.consume(12, 1));
        assert_eq!(w.outstanding(), 0);
    }

    #[test]
    fn window_is_bounded() {
        let mut w = CreditWindow::default();
        assert!(w.consume(0, 1));
        let mut total = 0u64;
        for _ in 0..100 {
            total += u64::from(w.grant(u16::MAX));
        }
        assert!(total <= MAX_CREDITS);
    }
}
