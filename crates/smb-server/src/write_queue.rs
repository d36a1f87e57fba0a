//! One writer per file at a time, without threads waiting on each other.
//!
//! Buffered writes to one Linux file serialise on its inode lock anyway; several blocking-pool
//! threads writing the same file at once only spin on that lock (`rwsem_spin_on_owner` was a
//! fifth of the server's cycles during an `smbclient` put). Here a WRITE to a file already being
//! written is queued, and the thread doing the current write runs the queued ones after it
//! (flat combining): no thread sleeps or spins for the lock, and the next write starts as soon
//! as the previous one ends, without a wake-up in between.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::sync::lock;

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    /// A blocking-pool thread is running this queue's jobs.
    running: bool,
    jobs: VecDeque<Job>,
}

/// The writes of one file, run one at a time on the blocking pool.
#[derive(Default, Clone)]
pub struct WriteQueue {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for WriteQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.state);
        f.debug_struct("WriteQueue").field("running", &s.running).field("queued", &s.jobs.len()).finish()
    }
}

impl WriteQueue {
    /// Runs `f` after the file's earlier writes; the receiver yields its result (or an error
    /// if `f` panicked).
    pub fn submit<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            // The requester may be gone (connection closed); the write still happened.
            let _ = tx.send(f());
        });
        let start = {
            let mut s = lock(&self.state);
            if s.running {
                s.jobs.push_back(job);
                None
            } else {
                s.running = true;
                Some(job)
            }
        };
        if let Some(first) = start {
            self.start_draining(first);
        }
        rx
    }

    /// Runs `f` on this thread if no write of the file is running, else hands `f` back.
    /// Writes queued while it ran are then started on the blocking pool. For writes that
    /// cannot wait for a device (a small write to a memory file system).
    pub fn run_here<T, F: FnOnce() -> T>(&self, f: F) -> Result<T, F> {
        {
            let mut s = lock(&self.state);
            if s.running {
                return Err(f);
            }
            s.running = true;
        }
        let guard = PanicGuard(self);
        let r = f();
        drop(guard);
        if let Some(first) = self.next_or_idle() {
            self.start_draining(first);
        }
        Ok(r)
    }

    fn start_draining(&self, first: Job) {
        let q = self.clone();
        tokio::task::spawn_blocking(move || q.drain(first));
    }

    /// Runs `first`, then every job queued meanwhile, until the queue is empty.
    fn drain(&self, first: Job) {
        let _guard = PanicGuard(self);
        let mut next = Some(first);
        while let Some(job) = next {
            job();
            next = self.next_or_idle();
        }
    }

    /// The next queued job, or (none queued) the queue marked idle.
    fn next_or_idle(&self) -> Option<Job> {
        let mut s = lock(&self.state);
        let next = s.jobs.pop_front();
        s.running = next.is_some();
        next
    }
}

/// Frees the queue if the running job panics, so later writes are not queued behind a dead
/// runner; the queued jobs are dropped with their senders, so their requests fail.
struct PanicGuard<'a>(&'a WriteQueue);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut s = lock(&self.0.state);
            s.jobs.clear();
            s.running = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_run_one_at_a_time_and_all_complete() {
        let q = WriteQueue::default();
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let rxs: Vec<_> = (0..200)
            .map(|i| {
                let (inside, most) = (inside.clone(), most.clone());
                q.submit(move || {
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_micros(50));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    i
                })
            })
            .collect();
        for (i, rx) in rxs.into_iter().enumerate() {
            assert_eq!(rx.await.expect("result"), i);
        }
        assert_eq!(most.load(Ordering::SeqCst), 1, "two writes of one file ran at once");
        wait_idle(&q).await;
    }

    /// A job's result is sent just before its runner lets go of the queue, so a test that
    /// needs the queue idle waits for that.
    async fn wait_idle(q: &WriteQueue) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while lock(&q.state).running {
            assert!(std::time::Instant::now() < deadline, "the runner never finished");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn run_here_runs_only_when_idle_and_starts_what_queued_behind_it() {
        let q = WriteQueue::default();
        assert_eq!(q.run_here(|| 1).ok(), Some(1));
        let gate = Arc::new(std::sync::Barrier::new(2));
        let g = gate.clone();
        let busy = q.submit(move || {
            g.wait();
            2
        });
        // Busy: the closure comes back unrun.
        let back = q.run_here(|| 3).expect_err("ran while another write was running");
        gate.wait();
        assert_eq!(busy.await.expect("busy"), 2);
        wait_idle(&q).await;
        // A write queued while an inline one runs is started when it ends.
        let (q2, queued) = (q.clone(), std::sync::Mutex::new(None));
        let r = q.run_here(|| {
            *queued.lock().unwrap() = Some(q2.submit(|| 4));
            back()
        });
        assert_eq!(r.ok(), Some(3));
        let rx = queued.lock().unwrap().take().expect("queued");
        assert_eq!(rx.await.expect("queued write ran"), 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_job_fails_only_its_queue_and_the_queue_recovers() {
        let q = WriteQueue::default();
        let gate = Arc::new(std::sync::Barrier::new(2));
        let g = gate.clone();
        // Hold the runner so the next two jobs queue behind it.
        let first = q.submit(move || {
            g.wait();
            1
        });
        let panics = q.submit(|| -> u32 { panic!("job panics") });
        let behind = q.submit(|| 3);
        gate.wait();
        assert_eq!(first.await.expect("first"), 1);
        assert!(panics.await.is_err());
        assert!(behind.await.is_err(), "jobs queued behind a panic are failed, not left hanging");
        // A new write runs normally.
        assert_eq!(q.submit(|| 4).await.expect("after"), 4);
    }
}
