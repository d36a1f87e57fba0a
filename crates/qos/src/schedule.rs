//! The admission state machine of one share, with time passed in (nanoseconds since the
//! share's clock started), so it is tested deterministically; [`crate::ShareLimiter`] wraps it.
//!
//! A request passes two gates. First its file's own buckets (per-file IOPS and throughput):
//! these are reserved at arrival (FIFO per file), which gives the time it becomes eligible.
//! Then the share's buckets: eligible requests are served by start-time fair queueing across
//! clients (the virtual-time form of deficit round robin, by IO units): each request's tag
//! is where its client's previous one ends, or the current virtual time if later, so a
//! client with 64 requests waiting gets no more than one with a single request. A request
//! that finds no eligible request waiting and enough tokens goes at once.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::ops::Bound::{Excluded, Unbounded};

use crate::bucket::{self, Bucket, NANO};
use crate::{Io, Limits};

/// Per-file states kept before idle (full) ones are swept.
const FILES_SWEEP_AT: usize = 1024;
/// Per-file states kept at most: past it a new file goes without a per-file limit.
const FILES_MAX: usize = 65536;
/// The most IO units one request counts for in the fair queue.
const TAG_MAX_COST: u64 = 1024;
/// Clients' finish tags kept before those behind the virtual time (idle ones) are dropped.
const CLIENTS_SWEEP_AT: usize = 4096;
/// Requests looked at, behind a held one, for one that may go meanwhile.
const SCAN_MAX: usize = 256;

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
        self.blocked(c).2
    }

    /// The cost `c` puts on each bucket, in [`ShareBuckets::all`] order.
    fn costs(c: &Cost) -> [u64; 5] {
        [c.units, c.units, c.bytes(), c.write, c.read]
    }

    fn each(&self) -> [&Option<Bucket>; 5] {
        [&self.iops, &self.credits, &self.throughput, &self.ingress, &self.egress]
    }

    /// The buckets `c` draws on, as bits.
    fn uses(&self, c: &Cost) -> u8 {
        let costs = Self::costs(c);
        (0..5).filter(|&i| costs[i] > 0 && self.each()[i].is_some()).fold(0, |m, i| m | 1 << i)
    }

    /// The buckets that hold `c` back (as bits), how long until the first of them lets it
    /// go, and until all do.
    fn blocked(&self, c: &Cost) -> (u8, u64, u64) {
        let costs = Self::costs(c);
        let (mut mask, mut least, mut most) = (0u8, u64::MAX, 0u64);
        for (i, b) in self.each().into_iter().enumerate() {
            let w = wait(b, costs[i]);
            if w > 0 {
                mask |= 1 << i;
                least = least.min(w);
                most = most.max(w);
            }
        }
        (mask, least, most)
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
    /// Past its file's gate, queued for the share under `tag`.
    ready: bool,
    /// Its start tag in the fair queue (virtual IO units).
    tag: u64,
    payload: T,
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
    /// Waiters past their file gate, in service order: (start tag, id).
    ready: BTreeSet<(u64, u64)>,
    /// The finish tag of each client's last queued request (virtual IO units).
    finish: HashMap<u64, u64>,
    /// Virtual time: the start tag of the request last granted.
    vtime: u64,
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
            ready: BTreeSet::new(),
            finish: HashMap::new(),
            vtime: 0,
            next_id: 0,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Request `id` still waits.
    pub fn is_waiting(&self, id: u64) -> bool {
        self.waiters.contains_key(&id)
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
        if !self.ready.is_empty() {
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
        self.waiters.insert(id, Waiter { client, file, booked, cost, ready: false, tag: 0, payload });
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

    /// Queues waiter `id` for the share: its start tag is the later of the virtual time and
    /// its client's last finish tag, so a client is served in proportion to its cost whatever
    /// its queue depth, and a client back from idle starts level, with no saved-up turns.
    fn make_ready(&mut self, id: u64) {
        let Some(w) = self.waiters.get_mut(&id) else { return };
        if self.finish.len() >= CLIENTS_SWEEP_AT {
            let vtime = self.vtime;
            self.finish.retain(|_, f| *f > vtime);
        }
        let finish = self.finish.entry(w.client).or_insert(0);
        w.tag = self.vtime.max(*finish);
        *finish = w.tag + w.cost.units.min(TAG_MAX_COST);
        w.ready = true;
        self.ready.insert((w.tag, id));
    }

    /// Withdraws waiter `id` (its caller went away), giving back what it booked. False if it
    /// was already granted.
    pub fn cancel(&mut self, id: u64) -> bool {
        let Some(w) = self.waiters.remove(&id) else { return false };
        if let Some(fb) = w.file.filter(|_| w.booked).and_then(|f| self.files.get_mut(&f)) {
            fb.give(&w.cost);
        }
        if w.ready {
            self.ready.remove(&(w.tag, id));
            // The client's last request: its turn goes back too.
            let end = w.tag + w.cost.units.min(TAG_MAX_COST);
            if let Some(f) = self.finish.get_mut(&w.client).filter(|f| **f == end) {
                *f = w.tag;
            }
        } else if self.pending.len() > 2 * (self.waiters.len() - self.ready.len()) + 64 {
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

    /// Grants, in start-tag order, every waiter that may go at `now` (their payloads are
    /// pushed to `out`), and returns when to call again (None: nobody waits).
    ///
    /// When the first request is held by some buckets, later ones that draw on none of those
    /// buckets (reads while writes wait for ingress) go meanwhile: they cannot delay it.
    pub fn dispatch(&mut self, now: u64, out: &mut Vec<T>) -> Option<u64> {
        self.promote(now);
        self.share.refill(now);
        while let Some(&(tag, id)) = self.ready.first() {
            let Some(cost) = self.waiters.get(&id).map(|w| w.cost) else {
                self.ready.pop_first();
                continue;
            };
            let (held_by, first_clear, wait) = self.share.blocked(&cost);
            if wait > 0 {
                // Wake when it may go, or when one of its buckets clears (the requests behind
                // it that draw on that bucket may then go), or one of those behind may go.
                let others = self.serve_others(held_by, out);
                let at = now.saturating_add(first_clear.min(others));
                return Some(self.next_pending().map_or(at, |p| p.min(at)));
            }
            self.grant(tag, id, cost, out);
        }
        self.next_pending()
    }

    fn grant(&mut self, tag: u64, id: u64, cost: Cost, out: &mut Vec<T>) {
        self.ready.remove(&(tag, id));
        self.share.take(&cost);
        self.vtime = self.vtime.max(tag);
        if let Some(w) = self.waiters.remove(&id) {
            out.push(w.payload);
        }
    }

    /// While the first request is held by the buckets `held_by`, grants the later ones (in
    /// tag order, looking at [`SCAN_MAX`] at most) that may go now and draw on none of them.
    /// Returns how long until the next of those that must wait may go.
    fn serve_others(&mut self, held_by: u8, out: &mut Vec<T>) -> u64 {
        let Some(&first) = self.ready.first() else { return u64::MAX };
        let (mut cursor, mut soonest, mut scanned) = (first, u64::MAX, 0);
        loop {
            let mut found = None;
            for &(tag, id) in self.ready.range((Excluded(cursor), Unbounded)) {
                scanned += 1;
                if scanned > SCAN_MAX {
                    break;
                }
                cursor = (tag, id);
                let Some(w) = self.waiters.get(&id) else { continue };
                if self.share.uses(&w.cost) & held_by != 0 {
                    continue;
                }
                match self.share.wait_ns(&w.cost) {
                    0 => {
                        found = Some((tag, id, w.cost));
                        break;
                    }
                    wait => soonest = soonest.min(wait),
                }
            }
            let Some((tag, id, cost)) = found else { return soonest };
            self.grant(tag, id, cost, out);
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

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// A closed-loop client: keeps `depth` requests of `io` on `file` outstanding while it
    /// has demand; a granted request completes at once and is sent again.
    struct Client {
        depth: usize,
        file: Option<u64>,
        io: Io,
        demand: bool,
        grants: Vec<u64>,
    }

    struct Sim {
        core: Core<usize>,
        t: u64,
        clients: Vec<Client>,
    }

    impl Sim {
        fn new(limits: Limits) -> Sim {
            Sim { core: Core::new(limits, 0), t: 0, clients: Vec::new() }
        }

        fn client(&mut self, depth: usize, file: Option<u64>, io: Io) -> usize {
            self.clients.push(Client { depth, file, io, demand: true, grants: Vec::new() });
            let c = self.clients.len() - 1;
            for _ in 0..depth {
                self.submit(c);
            }
            c
        }

        /// Sends one request of client `c`, and again each time one is granted at once.
        fn submit(&mut self, c: usize) {
            loop {
                let cl = &self.clients[c];
                let cost = Cost::of(cl.io);
                if !self.core.try_admit(self.t, cl.file, cost) {
                    self.core.enqueue(self.t, c as u64, cl.file, cost, c);
                    return;
                }
                self.clients[c].grants.push(self.t);
                if !self.clients[c].demand {
                    return;
                }
            }
        }

        fn set_demand(&mut self, c: usize, on: bool) {
            let was = std::mem::replace(&mut self.clients[c].demand, on);
            if on && !was {
                let outstanding = self.outstanding(c);
                for _ in outstanding..self.clients[c].depth {
                    self.submit(c);
                }
            }
        }

        fn outstanding(&self, c: usize) -> usize {
            self.core.waiters.values().filter(|w| w.payload == c).count()
        }

        /// Runs the dispatcher until `until`.
        fn run(&mut self, until: u64) {
            let mut out = Vec::new();
            loop {
                let next = self.core.dispatch(self.t, &mut out);
                if out.is_empty() {
                    match next {
                        Some(n) if n < until => self.t = n,
                        _ => {
                            self.t = until;
                            return;
                        }
                    }
                    continue;
                }
                for c in std::mem::take(&mut out) {
                    self.clients[c].grants.push(self.t);
                    if self.clients[c].demand {
                        self.submit(c);
                    }
                }
            }
        }

        fn count(&self, c: usize, from: u64, to: u64) -> usize {
            self.clients[c].grants.iter().filter(|&&t| t >= from && t < to).count()
        }
    }

    fn near(got: usize, want: usize, pct: f64) -> bool {
        (got as f64 - want as f64).abs() <= want as f64 * pct / 100.0
    }

    fn iops(n: u64) -> Limits {
        Limits { iops: Some(n), ..Limits::default() }
    }

    #[test]
    fn the_rate_is_exact() {
        let mut sim = Sim::new(iops(1000));
        let c = sim.client(4, None, Io::Meta);
        sim.run(10 * S);
        let n = sim.count(c, 0, 10 * S);
        assert!(near(n, 10_000, 1.0), "{n}");
        // Steady state: exactly the rate.
        assert_eq!(sim.count(c, S, 10 * S), 9000);
    }

    fn burst() -> Limits {
        Limits { iops: Some(100), burst_iops: Some(1000), burst_credits: Some(9000), ..Limits::default() }
    }

    #[test]
    fn a_burst_lasts_credits_over_the_excess_then_baseline() {
        let mut sim = Sim::new(burst());
        let c = sim.client(16, None, Io::Meta);
        sim.run(30 * S);
        // 9000 credits at 1000 − 100 a second: 10 s of burst.
        for s in 1..9 {
            assert!(near(sim.count(c, s * S, (s + 1) * S), 1000, 1.0), "second {s}: {}", sim.count(c, s * S, (s + 1) * S));
        }
        let burst_end = (0..30).find(|&s| sim.count(c, s * S, (s + 1) * S) < 500).unwrap();
        assert_eq!(burst_end, 10);
        for s in 11..30 {
            assert_eq!(sim.count(c, s * S, (s + 1) * S), 100, "second {s}");
        }
        assert!(sim.core.credits(sim.t).unwrap().0 <= 1);
    }

    #[test]
    fn credits_refill_at_baseline_while_idle() {
        let mut sim = Sim::new(burst());
        let c = sim.client(16, None, Io::Meta);
        sim.run(20 * S);
        sim.set_demand(c, false);
        sim.run(21 * S);
        let (left, _) = sim.core.credits(21 * S).unwrap();
        assert!(left <= 100, "{left}");
        sim.run(41 * S);
        // 20 s idle at 100 a second: 2000 credits (plus what the last second left).
        let (refilled, _) = sim.core.credits(41 * S).unwrap();
        assert!((2000..=2100).contains(&refilled), "{refilled}");
        // Below baseline they fill by baseline − use: 40 IOPS for 10 s adds 600.
        sim.set_demand(c, true);
        sim.run(43 * S);
        let (drained, _) = sim.core.credits(43 * S).unwrap();
        // 2 s at 1000: 1800 drained.
        assert!(drained + 1850 >= refilled && drained + 1750 <= refilled, "{refilled} -> {drained}");
        assert!(near(sim.count(c, 41 * S, 43 * S), 2000, 3.0));
        sim.run(50 * S);
        assert_eq!(sim.count(c, 46 * S, 50 * S), 400);
    }

    #[test]
    fn credits_fill_by_what_runs_under_baseline() {
        let mut core: Core<()> = Core::new(burst(), 0);
        core.share.credits.as_mut().unwrap().take(9000);
        assert_eq!(core.credits(0), Some((0, 9000)));
        // 40 IOPS (a request every 25 ms) for 10 s under a baseline of 100: +60 a second.
        let mut t = 25_000_000;
        while t <= 10 * S {
            assert!(core.try_admit(t, None, Cost::of(Io::Meta)));
            t += 25_000_000;
        }
        assert_eq!(core.credits(10 * S), Some((600, 9000)));
    }

    #[test]
    fn a_file_is_held_to_its_limit_with_share_headroom() {
        let mut sim = Sim::new(Limits { iops: Some(1000), max_file_iops: Some(100), ..Limits::default() });
        let hot = sim.client(8, Some(1), Io::Meta);
        let other = sim.client(8, None, Io::Meta);
        sim.run(10 * S);
        assert_eq!(sim.count(hot, S, 10 * S), 900);
        assert!(near(sim.count(other, S, 10 * S), 8100, 1.0), "{}", sim.count(other, S, 10 * S));
        // Alone, the file still gets 100.
        let mut sim = Sim::new(Limits { iops: Some(1000), max_file_iops: Some(100), ..Limits::default() });
        let hot = sim.client(8, Some(1), Io::Meta);
        sim.run(10 * S);
        assert_eq!(sim.count(hot, S, 10 * S), 900);
    }

    #[test]
    fn file_throughput_limit() {
        let mut sim = Sim::new(Limits { max_file_throughput: Some(1 << 20), ..Limits::default() });
        let c = sim.client(4, Some(9), Io::Read(64 << 10));
        sim.run(10 * S);
        // 1 MiB/s of 64 KiB reads: 16 a second.
        assert_eq!(sim.count(c, S, 10 * S), 9 * 16);
    }

    #[test]
    fn clients_get_equal_shares_whatever_their_queue_depth() {
        let mut sim = Sim::new(iops(1000));
        let deep = sim.client(64, None, Io::Meta);
        let shallow = sim.client(1, None, Io::Meta);
        sim.run(10 * S);
        let (a, b) = (sim.count(deep, S, 10 * S), sim.count(shallow, S, 10 * S));
        assert!(near(a, 4500, 1.0) && near(b, 4500, 1.0), "{a} {b}");
    }

    #[test]
    fn fairness_is_by_io_units() {
        // 1 MiB writes (16 units) against 4 KiB reads (1 unit): equal units each.
        let mut sim = Sim::new(iops(1600));
        let big = sim.client(8, None, Io::Write(1 << 20));
        let small = sim.client(1, None, Io::Read(4096));
        sim.run(10 * S);
        let (a, b) = (sim.count(big, S, 10 * S) * 16, sim.count(small, S, 10 * S));
        assert!(near(a, 7200, 2.0) && near(b, 7200, 2.0), "{a} {b}");
    }

    #[test]
    fn a_request_bigger_than_the_bucket_goes_into_debt() {
        let mut sim = Sim::new(Limits { throughput: Some(1 << 20), ..Limits::default() });
        let c = sim.client(1, None, Io::Write(4 << 20));
        sim.run(21 * S);
        // 4 MiB at 1 MiB/s: one every 4 s, the first at once.
        assert_eq!(sim.clients[c].grants, vec![0, 4 * S, 8 * S, 12 * S, 16 * S, 20 * S]);
        let mut sim = Sim::new(iops(10));
        let c = sim.client(1, None, Io::Write(4 << 20));
        sim.run(13 * S);
        // 64 units at 10 IOPS: one every 6.4 s.
        assert_eq!(sim.clients[c].grants, vec![0, 6_400_000_000, 12_800_000_000]);
    }

    #[test]
    fn ingress_and_egress_are_separate() {
        let mut sim = Sim::new(Limits { iops: Some(1000), ingress: Some(1 << 20), egress: Some(4 << 20), ..Limits::default() });
        let w = sim.client(4, None, Io::Write(64 << 10));
        let r = sim.client(4, None, Io::Read(64 << 10));
        let m = sim.client(1, None, Io::Meta);
        sim.run(5 * S);
        assert_eq!(sim.count(w, S, 5 * S), 4 * 16);
        assert_eq!(sim.count(r, S, 5 * S), 4 * 64);
        // Metadata takes no bytes: it has the IOPS the data leaves.
        assert!(near(sim.count(m, S, 5 * S), 4000 - 64 - 256, 1.0), "{}", sim.count(m, S, 5 * S));
    }

    #[test]
    fn new_limits_apply_at_once() {
        let mut sim = Sim::new(iops(1000));
        let c = sim.client(8, None, Io::Meta);
        sim.run(5 * S);
        sim.core.set_limits(iops(200), sim.t);
        sim.run(10 * S);
        assert_eq!(sim.count(c, S, 5 * S), 4000);
        assert!(near(sim.count(c, 5 * S, 10 * S), 1000, 1.0));
        sim.core.set_limits(Limits::default(), sim.t);
        let mut out = Vec::new();
        assert_eq!(sim.core.dispatch(sim.t, &mut out), None);
        assert_eq!(out.len(), 8);
    }

    #[test]
    fn new_limits_keep_the_credits_clamped() {
        let mut core: Core<()> = Core::new(burst(), 0);
        assert_eq!(core.credits(0), Some((9000, 9000)));
        for _ in 0..2000 {
            core.share.credits.as_mut().unwrap().take(1);
        }
        core.set_limits(Limits { burst_credits: Some(20_000), ..burst() }, 0);
        assert_eq!(core.credits(0), Some((7000, 20_000)));
        core.set_limits(Limits { burst_credits: Some(1000), ..burst() }, 0);
        assert_eq!(core.credits(0), Some((1000, 1000)));
        core.set_limits(iops(100), 0);
        assert_eq!(core.credits(0), None);
    }

    #[test]
    fn new_file_limits_rebook_held_waiters() {
        let mut core: Core<u32> = Core::new(Limits { max_file_iops: Some(1), ..Limits::default() }, 0);
        let meta = Cost::of(Io::Meta);
        assert!(core.try_admit(0, Some(5), meta));
        for i in 0..3 {
            assert!(!core.try_admit(0, Some(5), meta));
            let (_, due) = core.enqueue(0, 1, Some(5), meta, i);
            assert_eq!(due, (i as u64 + 1) * S);
        }
        let mut out = Vec::new();
        assert_eq!(core.dispatch(0, &mut out), Some(S));
        core.set_limits(Limits { max_file_iops: Some(100), ..Limits::default() }, 0);
        let next = core.dispatch(0, &mut out).unwrap();
        assert!(next <= 30_000_000, "{next}");
        assert_eq!(core.dispatch(30_000_000, &mut out), None);
        assert_eq!(out, vec![0, 1, 2]);
    }

    #[test]
    fn a_withdrawn_waiter_gives_back_what_it_booked() {
        let mut core: Core<u32> = Core::new(Limits { iops: Some(10), max_file_iops: Some(1), ..Limits::default() }, 0);
        let meta = Cost::of(Io::Meta);
        assert!(core.try_admit(0, Some(5), meta));
        let (a, due_a) = core.enqueue(0, 1, Some(5), meta, 0);
        let (b, due_b) = core.enqueue(0, 2, None, meta, 1);
        assert_eq!((due_a, due_b), (S, 0));
        assert!(core.cancel(a));
        assert!(!core.cancel(a));
        // The file's second slot is free again.
        let (_, due_c) = core.enqueue(0, 1, Some(5), meta, 2);
        assert_eq!(due_c, S);
        let mut out = Vec::new();
        assert_eq!(core.dispatch(0, &mut out), Some(100_000_000));
        assert_eq!(core.dispatch(100_000_000, &mut out), Some(S));
        assert!(!core.cancel(b) && out == vec![1]);
        assert_eq!(core.dispatch(S, &mut out), None);
        assert_eq!(out, vec![1, 2]);
        assert!(core.waiters.is_empty() && core.ready.is_empty());
    }

    #[test]
    fn a_ready_waiter_withdrawn_leaves_the_round() {
        let mut core: Core<u32> = Core::new(iops(10), 0);
        let meta = Cost::of(Io::Meta);
        assert!(core.try_admit(0, None, meta));
        let (a, _) = core.enqueue(0, 1, None, meta, 0);
        let (_, _) = core.enqueue(0, 2, None, meta, 1);
        assert!(core.cancel(a));
        let mut out = Vec::new();
        assert_eq!(core.dispatch(100_000_000, &mut out), None);
        assert_eq!(out, vec![1]);
    }

    #[test]
    fn idle_file_states_are_swept() {
        let mut core: Core<()> = Core::new(Limits { max_file_iops: Some(1000), ..Limits::default() }, 0);
        for f in 0..(FILES_SWEEP_AT as u64 + 10) {
            assert!(core.try_admit(0, Some(f), Cost::of(Io::Meta)));
        }
        assert!(core.files.len() > FILES_SWEEP_AT);
        assert!(core.try_admit(2 * S, Some(1 << 40), Cost::of(Io::Meta)));
        assert_eq!(core.files.len(), 1);
    }
}
