//! Admission of requests against a share's limits.
//!
//! One mutex per share holds the admission state ([`Core`]) for a few hundred nanoseconds per
//! request; an unlimited share takes no lock at all (counters only). A request that must wait
//! is queued and parks on a oneshot; one dispatcher task per share (spawned when the first
//! request waits, gone when none does) sleeps until the next request can go, grants it and
//! whatever else may go then, in fair-queueing order across clients (see [`crate::schedule`]).
//! A waiter whose future is dropped (its client went away) withdraws itself, so it holds
//! nothing up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Notify};

use crate::schedule::{Core, Cost};
use crate::status::ClientUse;
use crate::usage::Usage;
use crate::{Io, Limits, ShareQosStatus};

/// Clients registered per share at most (past it a new client gets a slot of its own that the
/// "top clients" view does not list).
const CLIENTS_MAX: usize = 4096;
/// Clients listed in the status.
const TOP_CLIENTS: usize = 5;

/// One client of one share: the unit of fairness and of the "top clients" view. A protocol
/// server gets it once (SMB: per tree connect; NFS: per client and export) and passes it to
/// every [`ShareLimiter::admit`].
#[derive(Debug)]
pub struct ClientSlot {
    pub key: u64,
    pub label: String,
    usage: Usage,
}

/// The limiter of one share; shared by every protocol serving it, kept across reloads.
#[derive(Debug)]
pub struct ShareLimiter {
    name: String,
    shared: Arc<Shared>,
    clients: Mutex<HashMap<u64, Weak<ClientSlot>>>,
}

#[derive(Debug)]
struct Shared {
    /// The share's clock starts here; the core's time is nanoseconds since.
    base: Instant,
    unlimited: AtomicBool,
    /// Single files have limits of their own (so a caller looks up the file).
    file_limits: AtomicBool,
    state: Mutex<State>,
    /// Wakes the dispatcher: a waiter arrived or left, or the limits changed.
    notify: Notify,
    usage: Usage,
}

#[derive(Debug)]
struct State {
    core: Core<oneshot::Sender<()>>,
    /// A dispatcher task runs.
    dispatching: bool,
    /// When the dispatcher wakes next (ns; u64::MAX when it waits for news only).
    wake_at: u64,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ShareLimiter {
    pub fn new(name: &str, limits: Limits) -> Arc<Self> {
        let base = Instant::now();
        let shared = Shared {
            base,
            unlimited: AtomicBool::new(no_limit(&limits)),
            file_limits: AtomicBool::new(file_limits(&limits)),
            state: Mutex::new(State { core: Core::new(limits, 0), dispatching: false, wake_at: u64::MAX }),
            notify: Notify::new(),
            usage: Usage::default(),
        };
        Arc::new(ShareLimiter { name: name.to_string(), shared: Arc::new(shared), clients: Mutex::new(HashMap::new()) })
    }

    /// The share's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// No limit is set: [`ShareLimiter::admit`] only counts.
    pub fn is_unlimited(&self) -> bool {
        self.shared.unlimited.load(Ordering::Acquire)
    }

    /// Single files are held to limits of their own: only then does the file of a request
    /// matter to [`ShareLimiter::admit`]. No lock.
    pub fn has_file_limits(&self) -> bool {
        self.shared.file_limits.load(Ordering::Acquire)
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.shared.lock().core.limits().clone()
    }

    /// Replaces the limits; requests waiting now and later see them at once. Buckets keep
    /// their levels (burst credits left are kept, up to the new bucket size).
    pub fn set_limits(&self, limits: Limits) {
        let sh = &self.shared;
        {
            let mut st = sh.lock();
            let now = sh.now_ns();
            sh.unlimited.store(no_limit(&limits), Ordering::Release);
            sh.file_limits.store(file_limits(&limits), Ordering::Release);
            st.core.set_limits(limits, now);
        }
        sh.notify.notify_one();
    }

    /// The slot of client `key` (the same slot for the same key while any holder lives).
    pub fn client(&self, key: u64, label: &str) -> Arc<ClientSlot> {
        let mut map = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = map.get(&key).and_then(Weak::upgrade) {
            return slot;
        }
        let slot = Arc::new(ClientSlot { key, label: label.to_string(), usage: Usage::default() });
        if map.len() >= CLIENTS_MAX {
            map.retain(|_, w| w.strong_count() > 0);
        }
        if map.len() < CLIENTS_MAX {
            map.insert(key, Arc::downgrade(&slot));
        }
        slot
    }

    /// Waits until `io` on `file` (a backend file id) by `client` is within the limits,
    /// charges it, and returns how long it waited.
    pub async fn admit(&self, client: &ClientSlot, file: Option<u64>, io: Io) -> Duration {
        let sh = &self.shared;
        if sh.unlimited.load(Ordering::Acquire) {
            self.record(client, sh.now_ns(), io);
            return Duration::ZERO;
        }
        let cost = Cost::of(io);
        let Some((id, rx)) = self.queue(client, file, cost) else {
            self.record(client, sh.now_ns(), io);
            return Duration::ZERO;
        };
        let start = Instant::now();
        let mut guard = Withdraw { shared: sh, id: Some(id) };
        // An error is a dispatcher gone with the runtime: the request goes.
        let _ = rx.await;
        guard.id = None;
        let waited = start.elapsed();
        let us = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        sh.usage.throttled(us);
        client.usage.throttled(us);
        self.record(client, sh.now_ns(), io);
        waited
    }

    /// Admits `cost` at once if it may go, else queues it and returns its id and the receiver
    /// of its grant. A queued request runs the dispatch itself (it may go past requests held
    /// by buckets it does not use, and wakes those that may go), then leaves the waiting to
    /// the share's dispatcher task, started if none runs, woken if it must wake sooner.
    fn queue(&self, client: &ClientSlot, file: Option<u64>, cost: Cost) -> Option<(u64, oneshot::Receiver<()>)> {
        let sh = &self.shared;
        let mut st = sh.lock();
        let now = sh.now_ns();
        if st.core.try_admit(now, file, cost) {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        let (id, _) = st.core.enqueue(now, client.key, file, cost, tx);
        let mut granted = Vec::new();
        let next = st.core.dispatch(now, &mut granted);
        let waits = st.core.is_waiting(id);
        let (mut spawn, mut wake) = (false, false);
        if let Some(next) = next {
            spawn = !st.dispatching;
            wake = !spawn && next < st.wake_at;
            st.dispatching = true;
            st.wake_at = st.wake_at.min(next);
        }
        drop(st);
        for tx in granted {
            let _ = tx.send(());
        }
        if spawn {
            tokio::spawn(dispatch(sh.clone()));
        } else if wake {
            sh.notify.notify_one();
        }
        waits.then_some((id, rx))
    }

    fn record(&self, client: &ClientSlot, now: u64, io: Io) {
        let second = now / 1_000_000_000;
        self.shared.usage.record(second, io);
        client.usage.record(second, io);
    }

    /// Limits and use now.
    pub fn status(&self) -> ShareQosStatus {
        let sh = &self.shared;
        let (limits, credits, now) = {
            let mut st = sh.lock();
            let now = sh.now_ns();
            (st.core.limits().clone(), st.core.credits(now), now)
        };
        let second = now / 1_000_000_000;
        let last = sh.usage.last_second(second);
        let totals = sh.usage.totals();
        ShareQosStatus {
            share: self.name.clone(),
            limits,
            iops: last.ios as f64,
            read_bytes_per_s: last.read as f64,
            write_bytes_per_s: last.written as f64,
            burst_credits: credits.map(|c| c.0),
            burst_credits_max: credits.map(|c| c.1),
            ios_total: totals.ios,
            read_bytes_total: totals.read,
            write_bytes_total: totals.written,
            throttled_requests: sh.usage.throttled_requests(),
            throttled_ms: sh.usage.throttled_ms(),
            top_clients: self.top_clients(second),
        }
    }

    /// The busiest clients over the last full second, busiest first.
    fn top_clients(&self, second: u64) -> Vec<ClientUse> {
        let slots: Vec<Arc<ClientSlot>> = self.clients.lock().unwrap_or_else(|e| e.into_inner()).values().filter_map(Weak::upgrade).collect();
        let mut used: Vec<(u64, u64, u64, &ClientSlot)> = slots
            .iter()
            .map(|s| {
                let last = s.usage.last_second(second);
                (last.ios, last.read + last.written, s.usage.totals().ios, &**s)
            })
            .collect();
        used.sort_by_key(|u| std::cmp::Reverse((u.0, u.1, u.2)));
        used.truncate(TOP_CLIENTS);
        used.into_iter()
            .map(|(ios, bytes, _, s)| ClientUse {
                client: s.label.clone(),
                iops: ios as f64,
                bytes_per_s: bytes as f64,
                throttled_ms: s.usage.throttled_ms(),
            })
            .collect()
    }
}

/// Nothing limits: every rate is unset or 0 (a credit bucket alone limits nothing).
fn file_limits(l: &Limits) -> bool {
    l.max_file_iops.is_some() || l.max_file_throughput.is_some()
}

fn no_limit(l: &Limits) -> bool {
    [l.iops, l.burst_iops, l.throughput, l.ingress, l.egress, l.max_file_iops, l.max_file_throughput].iter().all(|v| v.unwrap_or(0) == 0)
}

/// Withdraws a waiter whose admit future is dropped before it was granted.
struct Withdraw<'a> {
    shared: &'a Shared,
    id: Option<u64>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            let withdrawn = self.shared.lock().core.cancel(id);
            if withdrawn {
                self.shared.notify.notify_one();
            }
        }
    }
}

/// The dispatcher of one share: grants waiters as they may go, sleeps in between, ends when
/// nobody waits.
async fn dispatch(shared: Arc<Shared>) {
    let mut out = Vec::new();
    let mut running = Running(&shared, true);
    loop {
        let next = {
            let mut st = shared.lock();
            let now = shared.now_ns();
            let next = st.core.dispatch(now, &mut out);
            st.wake_at = next.unwrap_or(u64::MAX);
            if next.is_none() {
                st.dispatching = false;
                running.1 = false;
            }
            next
        };
        for tx in out.drain(..) {
            let _ = tx.send(());
        }
        let Some(at) = next else { return };
        // Waits of hours (a tiny rate owed a big request) are slept in hour steps.
        let at = at.min(shared.now_ns().saturating_add(3600 * 1_000_000_000));
        let when = tokio::time::Instant::from_std(shared.base + Duration::from_nanos(at));
        tokio::select! {
            _ = tokio::time::sleep_until(when) => {}
            _ = shared.notify.notified() => {}
        }
    }
}

/// Marks the dispatcher gone if its task is dropped (its runtime shut down), so the next
/// waiter starts another.
struct Running<'a>(&'a Shared, bool);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.lock().dispatching = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iops(n: u64) -> Limits {
        Limits { iops: Some(n), ..Limits::default() }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn admit_holds_the_rate_in_real_time() {
        let share = ShareLimiter::new("s", iops(200));
        let start = Instant::now();
        let mut tasks = Vec::new();
        for k in 0..4 {
            let share = share.clone();
            tasks.push(tokio::spawn(async move {
                let client = share.client(k, "c");
                let mut n = 0u64;
                while start.elapsed() < Duration::from_millis(500) {
                    share.admit(&client, None, Io::Meta).await;
                    n += 1;
                }
                n
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        // 100 in 0.5 s, plus the short-term bucket (10) and the requests in flight at the end
        // (fewer if this machine is too busy to ask in time).
        assert!((80..=120).contains(&total), "{total}");
        let st = share.status();
        assert_eq!(st.ios_total, total);
        assert!(st.throttled_requests > 0 && st.throttled_ms > 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_with_one_request_in_flight_gets_as_much_as_one_with_sixteen() {
        let share = ShareLimiter::new("s", iops(400));
        let start = Instant::now();
        let run = |key: u64| {
            let share = share.clone();
            tokio::spawn(async move {
                let client = share.client(key, "c");
                let mut n = 0u64;
                while start.elapsed() < Duration::from_millis(600) {
                    share.admit(&client, None, Io::Meta).await;
                    n += 1;
                }
                n
            })
        };
        let deep: Vec<_> = (0..16).map(|_| run(1)).collect();
        let shallow = run(2);
        let mut a = 0;
        for t in deep {
            a += t.await.unwrap();
        }
        let b = shallow.await.unwrap();
        assert!(a as f64 / b as f64 > 0.7 && (a as f64 / b as f64) < 1.43, "{a} {b}");
    }

    #[tokio::test]
    async fn a_dropped_waiter_holds_nobody_up() {
        let share = ShareLimiter::new("s", iops(5));
        let c = share.client(1, "c");
        let start = Instant::now();
        assert_eq!(share.admit(&c, None, Io::Meta).await, Duration::ZERO);
        // This one would go at 200 ms; its client goes away at 20 ms.
        assert!(tokio::time::timeout(Duration::from_millis(20), share.admit(&c, None, Io::Meta)).await.is_err());
        // So the next goes at 200 ms, not 400.
        share.admit(&c, None, Io::Meta).await;
        let t = start.elapsed();
        assert!(t >= Duration::from_millis(190) && t < Duration::from_millis(330), "{t:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_drains_its_credits_then_runs_at_baseline() {
        let limits = Limits { iops: Some(100), burst_iops: Some(1000), burst_credits: Some(180), ..Limits::default() };
        let share = ShareLimiter::new("s", limits);
        let c = share.client(1, "c");
        let start = Instant::now();
        let mut at_200ms = None;
        let mut n = 0u64;
        while start.elapsed() < Duration::from_millis(500) {
            share.admit(&c, None, Io::Meta).await;
            n += 1;
            if at_200ms.is_none() && start.elapsed() >= Duration::from_millis(200) {
                at_200ms = Some(n);
            }
        }
        // 180 credits at 1000 − 100 a second: 0.2 s of burst (about 200 IOs, plus the 50 ms
        // bucket), then 100 IOPS: about 30 more in the last 0.3 s.
        let burst = at_200ms.unwrap();
        assert!((170..=260).contains(&burst), "{burst}");
        assert!((n - burst) <= 40, "{burst} then {}", n - burst);
        assert!(share.status().burst_credits.unwrap() <= 1);
        assert_eq!(share.status().burst_credits_max, Some(180));
    }

    #[tokio::test]
    async fn a_read_passes_a_write_held_by_ingress() {
        let share = ShareLimiter::new("s", Limits { ingress: Some(64 << 10), egress: Some(1 << 30), ..Limits::default() });
        let c = share.client(1, "c");
        share.admit(&c, None, Io::Write(64 << 10)).await;
        let s2 = share.clone();
        let write = tokio::spawn(async move {
            let c = s2.client(2, "w");
            s2.admit(&c, None, Io::Write(64 << 10)).await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!write.is_finished());
        let t = Instant::now();
        assert_eq!(share.admit(&c, None, Io::Read(64 << 10)).await, Duration::ZERO);
        assert_eq!(share.admit(&c, None, Io::Meta).await, Duration::ZERO);
        assert!(t.elapsed() < Duration::from_millis(20));
        write.abort();
    }

    #[tokio::test]
    async fn new_limits_reach_waiters_at_once() {
        let share = ShareLimiter::new("s", iops(1));
        let c = share.client(1, "c");
        share.admit(&c, None, Io::Meta).await;
        let s2 = share.clone();
        let waiter = tokio::spawn(async move {
            let c = s2.client(1, "c");
            s2.admit(&c, None, Io::Meta).await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        share.set_limits(iops(1000));
        let waited = tokio::time::timeout(Duration::from_millis(300), waiter).await.unwrap().unwrap();
        assert!(waited < Duration::from_millis(200), "{waited:?}");
        assert_eq!(share.limits(), iops(1000));
    }

    #[test]
    fn admit_can_run_on_any_worker() {
        fn send<T: Send>(_: &T) {}
        let share = ShareLimiter::new("s", iops(1));
        let c = share.client(1, "c");
        send(&share.admit(&c, None, Io::Meta));
    }

    #[tokio::test]
    async fn clients_and_status() {
        let share = ShareLimiter::new("s", Limits::default());
        let a = share.client(7, "smb a");
        assert!(Arc::ptr_eq(&a, &share.client(7, "other label")));
        let b = share.client(8, "nfs b");
        share.admit(&a, Some(1), Io::Write(1 << 20)).await;
        share.admit(&b, None, Io::Read(4096)).await;
        share.admit(&b, None, Io::Meta).await;
        let st = share.status();
        assert_eq!((st.ios_total, st.read_bytes_total, st.write_bytes_total), (18, 4096, 1 << 20));
        assert_eq!(st.burst_credits, None);
        assert_eq!(st.top_clients.len(), 2);
        drop(a);
        drop(b);
        assert!(share.status().top_clients.is_empty());
        assert!(share.is_unlimited());
        share.set_limits(Limits { iops: Some(0), burst_credits: Some(5), ..Limits::default() });
        assert!(share.is_unlimited());
        share.set_limits(iops(5));
        assert!(!share.is_unlimited());
        // A dead slot's key gets a fresh slot.
        assert_eq!(share.client(7, "smb a2").label, "smb a2");
    }
}
