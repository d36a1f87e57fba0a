//! The admission state machine of one share, with time passed in (nanoseconds since the
//! share's clock started), so it is tested deterministically; [`crate::ShareLimiter`] wraps it.
//!
//! A request passes two gates. First its file's own buckets (per-file IOPS and throughput):
//! these are reserved at arrival (FIFO per file), which gives the time it becomes eligible.
//! Then the share's buckets: eligible requests queue per client, and the clients are served
//! by deficit round robin (quantum 1 IO unit), so a client with many requests waiting gets
//! no more turns than one with a single request. A request that finds no eligible request
//! waiting and enough tokens goes at once.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use crate::bucket::{self, Bucket, NANO};
use crate::{Io, Limits};

/// Per-file states kept before idle (full) ones are swept.
const FILES_SWEEP_AT: usize = 1024;
/// Per-file states kept at most: past it a new file goes without a per-file limit.
const FILES_MAX: usize = 65536;
/// The most IO units one request counts for in the round robin (bounds its loop).
const DRR_MAX_COST: u64 = 1024;

/// What a request costs in each kind of token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cost {
    pub units: u64,
    pub read: u64,
    pub write: u64,
}

impl Cost {
    pub fn of(io: Io) -> Cost {
        let (read, write) = match io {
            Io::Read(n) => (n, 0),
            Io::Write(n) => (0, n),
            Io::Meta => (0, 0),
        };
        Cost { units: io.units(), read, write }
    }

    fn bytes(&self) -> u64 {
        self.read.saturating_add(self.write)
    }
}

/// A limit of 0 is no limit.
fn rate(v: Option<u64>) -> Option<u64> {
    v.filter(|&r| r > 0)
}

/// The wait of `b` for `cost` (0 when the bucket is absent or the cost is nothing).
fn wait(b: &Option<Bucket>, cost: u64) -> u64 {
    match b {
        Some(b) if cost > 0 => b.wait_ns(cost),
        _ => 0,
    }
}

fn take(b: &mut Option<Bucket>, cost: u64) {
    if let Some(b) = b {
        b.take(cost);
    }
}

/// The share's buckets.
#[derive(Debug, Default)]
struct ShareBuckets {
    /// Short-term IOPS: at `burst_iops` with a burst bucket, else at `iops`.
    iops: Option<Bucket>,
    /// Burst credits: fills at baseline `iops`, drained by every IO, `burst_credits` big.
    credits: Option<Bucket>,
    throughput: Option<Bucket>,
    ingress: Option<Bucket>,
    egress: Option<Bucket>,
}

impl ShareBuckets {
    fn configure(&mut self, l: &Limits, now: u64) {
        let (base, burst, credits) = (rate(l.iops), rate(l.burst_iops), rate(l.burst_credits));
        let (short, credit) = match (base, burst, credits) {
            (Some(b), Some(p), Some(c)) if p > b => (Some(p), Some((b, c))),
            (Some(b), _, _) => (Some(b), None),
            (None, p, _) => (p, None),
        };
        bucket::set(&mut self.iops, short, Bucket::window(short.unwrap_or(0)), now);
        let credit_cap = credit.map_or(0, |(_, c)| c as i128 * NANO);
        bucket::set(&mut self.credits, credit.map(|(b, _)| b), credit_cap, now);
        for (slot, r) in [(&mut self.throughput, l.throughput), (&mut self.ingress, l.ingress), (&mut self.egress, l.egress)] {
            let r = rate(r);
            bucket::set(slot, r, Bucket::window(r.unwrap_or(0)), now);
        }
    }

    fn all(&mut self) -> [&mut Option<Bucket>; 5] {
        [&mut self.iops, &mut self.credits, &mut self.throughput, &mut self.ingress, &mut self.egress]
    }

    fn refill(&mut self, now: u64) {
        for b in self.all().into_iter().flatten() {
            b.refill(now);
        }
    }

    /// Nanoseconds until `c` may go (buckets refilled to now).
    fn wait_ns(&self, c: &Cost) -> u64 {
        wait(&self.iops, c.units)
            .max(wait(&self.credits, c.units))
            .max(wait(&self.throughput, c.bytes()))
            .max(wait(&self.ingress, c.write))
            .max(wait(&self.egress, c.read))
    }

    fn take(&mut self, c: &Cost) {
        take(&mut self.iops, c.units);
        take(&mut self.credits, c.units);
        if c.bytes() > 0 {
            take(&mut self.throughput, c.bytes());
        }
        if c.write > 0 {
            take(&mut self.ingress, c.write);
        }
        if c.read > 0 {
            take(&mut self.egress, c.read);
        }
    }
}

/// One file's buckets (reserved at arrival: the level goes below zero by what is booked).
#[derive(Debug, Default)]
struct FileBuckets {
    iops: Option<Bucket>,
    bytes: Option<Bucket>,
}

impl FileBuckets {
    fn configure(&mut self, l: &Limits, now: u64) {
        let (iops, bytes) = (rate(l.max_file_iops), rate(l.max_file_throughput));
        bucket::set(&mut self.iops, iops, Bucket::window(iops.unwrap_or(0)), now);
        bucket::set(&mut self.bytes, bytes, Bucket::window(bytes.unwrap_or(0)), now);
    }

    fn refill(&mut self, now: u64) {
        for b in [&mut self.iops, &mut self.bytes].into_iter().flatten() {
            b.refill(now);
        }
    }

    fn wait_ns(&self, c: &Cost) -> u64 {
        wait(&self.iops, c.units).max(wait(&self.bytes, c.bytes()))
    }

    fn take(&mut self, c: &Cost) {
        take(&mut self.iops, c.units);
        if c.bytes() > 0 {
            take(&mut self.bytes, c.bytes());
        }
    }

    fn give(&mut self, c: &Cost) {
        if let Some(b) = &mut self.iops {
            b.give(c.units);
        }
        if let (Some(b), true) = (&mut self.bytes, c.bytes() > 0) {
            b.give(c.bytes());
        }
    }

    fn is_full(&self) -> bool {
        [&self.iops, &self.bytes].into_iter().flatten().all(Bucket::is_full)
    }
}

#[derive(Debug)]
struct Waiter<T> {
    client: u64,
    file: Option<u64>,
    /// It booked its cost in `file`'s buckets.
    booked: bool,
    cost: Cost,
    /// Past its file's gate, queued in its client's round-robin queue.
    ready: bool,
    payload: T,
}

#[derive(Debug, Default)]
struct ClientQueue {
    queue: VecDeque<u64>,
    deficit: u64,
}

/// The admission state of one share; `T` is what a waiter is woken with.
#[derive(Debug)]
pub(crate) struct Core<T> {
    limits: Limits,
    share: ShareBuckets,
    file_limits: bool,
    files: HashMap<u64, FileBuckets>,
    last_sweep: u64,
    waiters: HashMap<u64, Waiter<T>>,
    /// Waiters held by their file's gate: (eligible at, id); cancelled ones are skipped.
    pending: BinaryHeap<Reverse<(u64, u64)>>,
    clients: HashMap<u64, ClientQueue>,
    /// Clients with ready waiters, in round-robin order.
    ring: VecDeque<u64>,
    ready: usize,
    next_id: u64,
}

impl<T> Core<T> {
    pub fn new(limits: Limits, now: u64) -> Core<T> {
        let mut share = ShareBuckets::default();
        share.configure(&limits, now);
        Core {
            file_limits: rate(limits.max_file_iops).is_some() || rate(limits.max_file_throughput).is_some(),
            limits,
            share,
            files: HashMap::new(),
            last_sweep: now,
            waiters: HashMap::new(),
            pending: BinaryHeap::new(),
            clients: HashMap::new(),
            ring: VecDeque::new(),
            ready: 0,
            next_id: 0,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Requests past their file's gate, waiting for the share.
    pub fn ready_len(&self) -> usize {
        self.ready
    }

    /// Burst credits left and the bucket's size, at `now` (None without a burst bucket).
    pub fn credits(&mut self, now: u64) -> Option<(u64, u64)> {
        let b = self.share.credits.as_mut()?;
        b.refill(now);
        Some((b.tokens(), b.capacity()))
    }

    /// Admits `cost` on `file` at once if nothing eligible waits and every bucket has the
    /// tokens; charges it and returns true. Otherwise changes nothing.
    pub fn try_admit(&mut self, now: u64, file: Option<u64>, cost: Cost) -> bool {
        if self.ready > 0 {
            return false;
        }
        self.share.refill(now);
        if self.share.wait_ns(&cost) > 0 {
            return false;
        }
        if let Some(f) = file.filter(|_| self.file_limits) {
            if let Some(fb) = self.files.get_mut(&f) {
                fb.refill(now);
                if fb.wait_ns(&cost) > 0 {
                    return false;
                }
            }
            // A file with no state has full buckets, which admit anything.
            if let Some(fb) = self.file_state(f, now) {
                fb.take(&cost);
            }
        }
        self.share.take(&cost);
        true
    }

    /// Queues a request that [`Core::try_admit`] refused; returns its id and the time it
    /// clears its file's gate (`now` without a per-file limit).
    pub fn enqueue(&mut self, now: u64, client: u64, file: Option<u64>, cost: Cost, payload: T) -> (u64, u64) {
        let id = self.next_id;
        self.next_id += 1;
        let (booked, eligible) = self.book_file(now, file, &cost);
        self.waiters.insert(id, Waiter { client, file, booked, cost, ready: false, payload });
        if eligible <= now {
            self.make_ready(id);
        } else {
            self.pending.push(Reverse((eligible, id)));
        }
        (id, eligible)
    }

    /// Books `cost` in `file`'s buckets: returns whether it did and when the request is due.
    fn book_file(&mut self, now: u64, file: Option<u64>, cost: &Cost) -> (bool, u64) {
        let Some(f) = file.filter(|_| self.file_limits) else { return (false, now) };
        let Some(fb) = self.file_state(f, now) else { return (false, now) };
        fb.refill(now);
        let due = now.saturating_add(fb.wait_ns(cost));
        fb.take(cost);
        (true, due)
    }

    /// The state of `file`, created (full) if absent; None when the map is at its bound.
    fn file_state(&mut self, file: u64, now: u64) -> Option<&mut FileBuckets> {
        if !self.files.contains_key(&file) {
            if self.files.len() >= FILES_SWEEP_AT && now.saturating_sub(self.last_sweep) >= NANO as u64 {
                self.last_sweep = now;
                self.files.retain(|_, fb| {
                    fb.refill(now);
                    !fb.is_full()
                });
            }
            if self.files.len() >= FILES_MAX {
                return None;
            }
            let mut fb = FileBuckets::default();
            fb.configure(&self.limits, now);
            self.files.insert(file, fb);
        }
        self.files.get_mut(&file)
    }

    fn make_ready(&mut self, id: u64) {
        let Some(w) = self.waiters.get_mut(&id) else { return };
        w.ready = true;
        let q = self.clients.entry(w.client).or_default();
        if q.queue.is_empty() {
            self.ring.push_back(w.client);
        }
        q.queue.push_back(id);
        self.ready += 1;
    }

    /// Withdraws waiter `id` (its caller went away), giving back what it booked. False if it
    /// was already granted.
    pub fn cancel(&mut self, id: u64) -> bool {
        let Some(w) = self.waiters.remove(&id) else { return false };
        if let Some(fb) = w.file.filter(|_| w.booked).and_then(|f| self.files.get_mut(&f)) {
            fb.give(&w.cost);
        }
        if w.ready {
            self.ready -= 1;
            if let Some(q) = self.clients.get_mut(&w.client) {
                q.queue.retain(|&x| x != id);
                if q.queue.is_empty() {
                    self.clients.remove(&w.client);
                    self.ring.retain(|&c| c != w.client);
                }
            }
        } else if self.pending.len() > 2 * (self.waiters.len() - self.ready) + 64 {
            // Drop the cancelled entries the heap still holds.
            let waiters = &self.waiters;
            self.pending.retain(|Reverse((_, id))| waiters.contains_key(id));
        }
        true
    }

    /// Moves waiters whose file gate opened by `now` to their client's queue.
    fn promote(&mut self, now: u64) {
        while let Some(&Reverse((at, id))) = self.pending.peek() {
            if at > now {
                break;
            }
            self.pending.pop();
            if self.waiters.get(&id).is_some_and(|w| !w.ready) {
                self.make_ready(id);
            }
        }
    }

    /// When the next pending waiter's file gate opens.
    fn next_pending(&mut self) -> Option<u64> {
        while let Some(&Reverse((at, id))) = self.pending.peek() {
            if self.waiters.get(&id).is_some_and(|w| !w.ready) {
                return Some(at);
            }
            self.pending.pop();
        }
        None
    }

    /// Grants, in round-robin order, every waiter that may go at `now` (their payloads are
    /// pushed to `out`), and returns when to call again (None: nobody waits).
    pub fn dispatch(&mut self, now: u64, out: &mut Vec<T>) -> Option<u64> {
        self.promote(now);
        self.share.refill(now);
        let mut fruitless = 0usize;
        while let Some(&client) = self.ring.front() {
            let Some(q) = self.clients.get_mut(&client) else {
                self.ring.pop_front();
                continue;
            };
            let Some(&id) = q.queue.front() else {
                self.clients.remove(&client);
                self.ring.pop_front();
                continue;
            };
            let Some(cost) = self.waiters.get(&id).map(|w| w.cost) else {
                q.queue.pop_front();
                continue;
            };
            let turn = cost.units.min(DRR_MAX_COST);
            if q.deficit < turn {
                fruitless += 1;
                if fruitless > self.ring.len() {
                    self.top_up();
                    fruitless = 0;
                } else {
                    q.deficit += 1;
                    self.ring.rotate_left(1);
                }
                continue;
            }
            let wait = self.share.wait_ns(&cost);
            if wait > 0 {
                let at = now.saturating_add(wait);
                return Some(self.next_pending().map_or(at, |p| p.min(at)));
            }
            fruitless = 0;
            self.share.take(&cost);
            q.deficit -= turn;
            q.queue.pop_front();
            if q.queue.is_empty() {
                self.clients.remove(&client);
                self.ring.pop_front();
            }
            self.ready -= 1;
            if let Some(w) = self.waiters.remove(&id) {
                out.push(w.payload);
            }
        }
        self.next_pending()
    }

    /// Every client in the ring is short of its turn: give each the quanta of the rounds it
    /// would take the nearest one to get there, at once.
    fn top_up(&mut self) {
        let short = |q: &ClientQueue, waiters: &HashMap<u64, Waiter<T>>| {
            let cost = q.queue.front().and_then(|id| waiters.get(id)).map_or(1, |w| w.cost.units.min(DRR_MAX_COST));
            cost.saturating_sub(q.deficit)
        };
        let k = self.ring.iter().filter_map(|c| self.clients.get(c)).map(|q| short(q, &self.waiters)).min().unwrap_or(0);
        for c in &self.ring {
            if let Some(q) = self.clients.get_mut(c) {
                q.deficit += k.max(1);
            }
        }
    }

    /// New limits, at once: buckets keep their levels (clamped to the new sizes), waiters
    /// held by a file gate are booked again under the new per-file limits.
    pub fn set_limits(&mut self, limits: Limits, now: u64) {
        self.share.configure(&limits, now);
        // Undo the bookings of waiters still at their file gate, in arrival order.
        let mut held: Vec<u64> = self.waiters.iter().filter(|(_, w)| !w.ready).map(|(&id, _)| id).collect();
        held.sort_unstable();
        for id in &held {
            let w = &self.waiters[id];
            if let Some(fb) = w.file.filter(|_| w.booked).and_then(|f| self.files.get_mut(&f)) {
                fb.give(&w.cost);
            }
        }
        self.limits = limits;
        self.file_limits = rate(self.limits.max_file_iops).is_some() || rate(self.limits.max_file_throughput).is_some();
        if self.file_limits {
            let limits = &self.limits;
            self.files.values_mut().for_each(|fb| fb.configure(limits, now));
        } else {
            self.files.clear();
        }
        self.pending.clear();
        for id in held {
            let Some(w) = self.waiters.get(&id) else { continue };
            let (file, cost) = (w.file, w.cost);
            let (booked, due) = self.book_file(now, file, &cost);
            if let Some(w) = self.waiters.get_mut(&id) {
                w.booked = booked;
            }
            if due <= now {
                self.make_ready(id);
            } else {
                self.pending.push(Reverse((due, id)));
            }
        }
    }
}
