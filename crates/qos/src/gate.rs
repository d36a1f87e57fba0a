//! A share's bound on its storage calls, for every protocol serving it.
//!
//! A backend that stops answering (a hung FUSE or network file system) keeps the threads
//! that called it. So that it stalls only its own share, a share lets a bounded number of
//! calls run at once on the blocking pool, and a caller waits at most the share's time limit
//! for its call, in line or running; past it the caller gives up ([`Stalled`]) and answers an
//! error, while the call, stuck, keeps its place until it returns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The call did not finish within the share's time limit (or died without an answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stalled {
    /// Past the time limit: the caller answers "try later" or a time-out.
    TimedOut,
    /// The call panicked.
    Died,
}

/// One share's bound on storage calls.
#[derive(Debug)]
pub struct StorageGate {
    share: String,
    calls: Arc<Semaphore>,
    timeout: Duration,
    timeouts: AtomicU64,
}

impl StorageGate {
    /// At most `threads` calls of share `share` at once, each waited for at most `timeout`.
    pub fn new(share: &str, threads: usize, timeout: Duration) -> Arc<StorageGate> {
        Arc::new(StorageGate { share: share.to_string(), calls: Arc::new(Semaphore::new(threads)), timeout, timeouts: AtomicU64::new(0) })
    }

    /// When a caller that starts waiting now gives up.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// Counts a caller that gave up, logging the 1st, 2nd, 4th, 8th... of them.
    pub fn timed_out(&self) -> Stalled {
        let n = self.timeouts.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!(share = %self.share, timeouts = n, timeout = ?self.timeout, "storage not answering in time: requests given up");
        }
        Stalled::TimedOut
    }

    /// Callers that gave up so far.
    pub fn timeouts(&self) -> u64 {
        self.timeouts.load(Ordering::Relaxed)
    }

    /// Runs `f` on the blocking pool within this share's bound.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Stalled> {
        let deadline = self.deadline();
        // A free place is taken without a timer; only a full share waits for one.
        let permit = match self.calls.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => match tokio::time::timeout_at(deadline, self.calls.clone().acquire_owned()).await {
                Ok(Ok(p)) => p,
                _ => return Err(self.timed_out()),
            },
        };
        // The permit goes with the call: a call stuck in the backend keeps its place.
        let call = tokio::task::spawn_blocking(move || {
            let r = f();
            drop(permit);
            r
        });
        match tokio::time::timeout_at(deadline, call).await {
            Ok(r) => r.map_err(|_| Stalled::Died),
            Err(_) => Err(self.timed_out()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stuck_share_answers_in_time_and_keeps_its_threads() {
        let gate = StorageGate::new("hung", 2, Duration::from_millis(200));
        let release = Arc::new(std::sync::Barrier::new(3));
        let t0 = std::time::Instant::now();
        let stuck = |b: Arc<std::sync::Barrier>| {
            move || {
                b.wait();
            }
        };
        let (a, b) = (release.clone(), release.clone());
        let r = tokio::join!(gate.run(stuck(a)), gate.run(stuck(b)));
        assert_eq!((r.0.unwrap_err(), r.1.unwrap_err()), (Stalled::TimedOut, Stalled::TimedOut));
        // Both threads are still stuck: a third call waits for a place and gives up too.
        assert_eq!(gate.run(|| 7).await.unwrap_err(), Stalled::TimedOut);
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert_eq!(gate.timeouts(), 3);
        // Another share is not held back.
        assert_eq!(StorageGate::new("fine", 2, Duration::from_millis(200)).run(|| 5).await.unwrap(), 5);
        // Unstuck, the share serves again.
        release.wait();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(gate.run(|| 8).await.unwrap(), 8);
    }
}
