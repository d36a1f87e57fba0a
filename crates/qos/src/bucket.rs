//! A token bucket in integer nano-tokens: a rate of `r` tokens per second adds exactly `r`
//! nano-tokens per nanosecond, so long runs keep the rate to the token, with no float drift.
//!
//! A level below zero is debt: a request bigger than the bucket still goes once the bucket is
//! full (it never waits for tokens the bucket cannot hold), and later requests pay it back.

/// Nano-tokens per token.
pub(crate) const NANO: i128 = 1_000_000_000;

/// How long a short-term bucket holds at its rate: short, so a 10 s window is exact to 0.5 %,
/// and long enough that a 1 ms timer tick loses nothing.
pub(crate) const WINDOW_NS: i128 = 50_000_000;

#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    /// Tokens per second (never 0: a zero limit is no limit).
    rate: u64,
    /// Capacity in nano-tokens.
    cap: i128,
    /// Level in nano-tokens; negative is debt.
    level: i128,
    /// Time of the last refill, ns.
    at: u64,
}

impl Bucket {
    /// A full bucket of `cap` nano-tokens.
    pub fn new(rate: u64, cap: i128, now: u64) -> Bucket {
        Bucket { rate, cap, level: cap, at: now }
    }

    /// The capacity of a short-term bucket at `rate`: [`WINDOW_NS`] of it, at least 1 token.
    pub fn window(rate: u64) -> i128 {
        (rate as i128).saturating_mul(WINDOW_NS).max(NANO)
    }

    /// Adds what the time since the last refill earned.
    pub fn refill(&mut self, now: u64) {
        if now > self.at {
            if self.level < self.cap {
                let earned = (self.rate as i128).saturating_mul((now - self.at) as i128);
                self.level = self.level.saturating_add(earned).min(self.cap);
            }
            self.at = now;
        }
    }

    /// What a request of `cost` tokens needs in the bucket before it goes.
    fn need(&self, cost: u64) -> i128 {
        (cost as i128 * NANO).min(self.cap)
    }

    /// Nanoseconds (from the last refill) until a request of `cost` may go; 0 if it may now.
    pub fn wait_ns(&self, cost: u64) -> u64 {
        let short = self.need(cost) - self.level;
        if short <= 0 {
            return 0;
        }
        let ns = (short + self.rate as i128 - 1) / self.rate as i128;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    pub fn take(&mut self, cost: u64) {
        self.level -= cost as i128 * NANO;
    }

    /// Gives back what a request that will not run took.
    pub fn give(&mut self, cost: u64) {
        self.level = (self.level + cost as i128 * NANO).min(self.cap);
    }

    /// New rate and capacity; the level is kept (clamped to the new capacity).
    pub fn reconfigure(&mut self, rate: u64, cap: i128) {
        self.rate = rate;
        self.cap = cap;
        self.level = self.level.min(cap);
    }

    pub fn is_full(&self) -> bool {
        self.level >= self.cap
    }

    /// Whole tokens in the bucket (0 in debt).
    pub fn tokens(&self) -> u64 {
        u64::try_from((self.level / NANO).max(0)).unwrap_or(u64::MAX)
    }

    /// Capacity in whole tokens.
    pub fn capacity(&self) -> u64 {
        u64::try_from(self.cap / NANO).unwrap_or(u64::MAX)
    }
}

/// Puts a bucket of `rate` and `cap` in `slot`: a new full one if there was none, the old one
/// reconfigured (keeping its level) if there was, nothing if `rate` is None.
pub(crate) fn set(slot: &mut Option<Bucket>, rate: Option<u64>, cap: i128, now: u64) {
    match (slot.as_mut(), rate) {
        (Some(b), Some(r)) => {
            b.refill(now);
            b.reconfigure(r, cap);
        }
        (None, Some(r)) => *slot = Some(Bucket::new(r, cap, now)),
        (_, None) => *slot = None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_wait_and_debt() {
        let mut b = Bucket::new(1000, 10 * NANO, 0);
        assert_eq!(b.wait_ns(10), 0);
        b.take(10);
        assert_eq!(b.wait_ns(1), 1_000_000);
        b.refill(500_000);
        assert_eq!(b.tokens(), 0);
        assert_eq!(b.wait_ns(1), 500_000);
        b.refill(1_000_000_000);
        assert!(b.is_full());
        // A request bigger than the bucket goes when it is full, then the bucket owes.
        assert_eq!(b.wait_ns(50), 0);
        b.take(50);
        assert_eq!(b.wait_ns(1), 41_000_000);
        b.give(50);
        assert!(b.is_full());
    }
}
