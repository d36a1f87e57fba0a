//! Where each I/O goes: block indices over the files' combined address space, sequential
//! (wrapping) or uniformly random, aligned to the block size.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How the blocks of all files are laid out: block `i` is in file `i / blocks_per_file` at
/// byte `(i % blocks_per_file) * block_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Block (I/O) size in bytes.
    pub block_size: u64,
    /// Whole blocks in one file (a file's tail shorter than a block is never touched).
    pub blocks_per_file: u64,
    /// Number of files.
    pub files: u64,
}

impl Layout {
    /// Blocks in all files together.
    pub fn total_blocks(&self) -> u64 {
        self.blocks_per_file * self.files
    }

    /// (file index, byte offset) of block `i`.
    pub fn locate(&self, i: u64) -> (usize, u64) {
        ((i / self.blocks_per_file) as usize, (i % self.blocks_per_file) * self.block_size)
    }
}

/// A subset of block indices: `first + stride * k` for `k < count`. Plain runs use the
/// whole space (stride 1); `--verify` gives each in-flight slot its own stripe so no two
/// concurrent I/Os touch one block and the expected contents stay known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe {
    /// First block index.
    pub first: u64,
    /// Distance between consecutive members.
    pub stride: u64,
    /// Number of members.
    pub count: u64,
}

impl Stripe {
    /// The whole space of `total` blocks.
    pub fn all(total: u64) -> Self {
        Self { first: 0, stride: 1, count: total }
    }

    /// Member `k` of `n` interleaved stripes over `total` blocks (empty if `k >= total`).
    pub fn nth_of(k: u64, n: u64, total: u64) -> Self {
        let count = if k >= total { 0 } else { (total - k).div_ceil(n) };
        Self { first: k, stride: n, count }
    }
}

/// Seed for the generator of thread `thread`. With `repeat` (fio randrepeat=1) every run
/// draws the same offsets; without it the seed comes from the clock and a process-wide
/// counter, so runs (and threads) differ even when started in the same nanosecond.
pub fn seed_for(repeat: bool, thread: u64) -> u64 {
    // Distinct odd constants keep per-thread streams apart.
    let per_thread = thread.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    if repeat {
        return 0x6272_6169_645f_6231 ^ per_thread;
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    nanos ^ per_thread ^ n.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ u64::from(std::process::id()) << 32
}

/// Produces block indices (and the read/write choice) for one thread.
#[derive(Debug, Clone)]
pub struct OffsetGen {
    stripe: Stripe,
    random: bool,
    pos: u64,
    rng: StdRng,
}

impl OffsetGen {
    /// A generator over `stripe`; sequential ones start at member `start` (modulo the count)
    /// so threads spread over the files instead of all reading the same blocks.
    pub fn new(stripe: Stripe, random: bool, seed: u64, start: u64) -> Self {
        let pos = if stripe.count == 0 { 0 } else { start % stripe.count };
        Self { stripe, random, pos, rng: StdRng::seed_from_u64(seed) }
    }

    /// The next block index, or None for an empty stripe.
    pub fn next_block(&mut self) -> Option<u64> {
        if self.stripe.count == 0 {
            return None;
        }
        let k = if self.random {
            self.rng.gen_range(0..self.stripe.count)
        } else {
            let k = self.pos;
            self.pos = (self.pos + 1) % self.stripe.count;
            k
        };
        Some(self.stripe.first + self.stripe.stride * k)
    }

    /// Whether the next I/O is a write, given the write percentage (0..=100).
    pub fn next_is_write(&mut self, write_pct: u8) -> bool {
        match write_pct {
            0 => false,
            100.. => true,
            p => self.rng.gen_range(0..100u8) < p,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(g: &mut OffsetGen, n: usize) -> Vec<u64> {
        (0..n).map(|_| g.next_block().unwrap()).collect()
    }

    #[test]
    fn sequential_wraps() {
        let mut g = OffsetGen::new(Stripe::all(4), false, 1, 2);
        assert_eq!(draw(&mut g, 7), vec![2, 3, 0, 1, 2, 3, 0]);
        let l = Layout { block_size: 4096, blocks_per_file: 2, files: 2 };
        assert_eq!(l.total_blocks(), 4);
        assert_eq!(l.locate(0), (0, 0));
        assert_eq!(l.locate(1), (0, 4096));
        assert_eq!(l.locate(3), (1, 4096));
    }

    #[test]
    fn random_covers_the_file_aligned() {
        let l = Layout { block_size: 8192, blocks_per_file: 64, files: 1 };
        let mut g = OffsetGen::new(Stripe::all(l.total_blocks()), true, seed_for(false, 0), 0);
        let mut seen = [false; 64];
        for _ in 0..5000 {
            let (f, off) = l.locate(g.next_block().unwrap());
            assert_eq!(f, 0);
            assert_eq!(off % 8192, 0);
            assert!(off + 8192 <= 64 * 8192);
            seen[(off / 8192) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "every block is hit");
    }

    #[test]
    fn repeating_is_identical_non_repeating_differs() {
        let a = draw(&mut OffsetGen::new(Stripe::all(1 << 30), true, seed_for(true, 3), 0), 64);
        let b = draw(&mut OffsetGen::new(Stripe::all(1 << 30), true, seed_for(true, 3), 0), 64);
        assert_eq!(a, b);
        let other_thread = draw(&mut OffsetGen::new(Stripe::all(1 << 30), true, seed_for(true, 4), 0), 64);
        assert_ne!(a, other_thread);
        let c = draw(&mut OffsetGen::new(Stripe::all(1 << 30), true, seed_for(false, 3), 0), 64);
        let d = draw(&mut OffsetGen::new(Stripe::all(1 << 30), true, seed_for(false, 3), 0), 64);
        assert_ne!(c, d);
        assert_ne!(a, c);
    }

    #[test]
    fn stripes_partition_the_space() {
        let total = 10;
        let mut all: Vec<u64> = Vec::new();
        for k in 0..4 {
            let s = Stripe::nth_of(k, 4, total);
            let mut g = OffsetGen::new(s, false, 0, 0);
            all.extend(draw(&mut g, s.count as usize));
        }
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(Stripe::nth_of(5, 8, 4).count, 0);
        assert_eq!(OffsetGen::new(Stripe::nth_of(5, 8, 4), true, 0, 0).next_block(), None);
    }

    #[test]
    fn write_percentage() {
        let mut g = OffsetGen::new(Stripe::all(1), true, 7, 0);
        assert!((0..100).all(|_| !g.next_is_write(0)));
        assert!((0..100).all(|_| g.next_is_write(100)));
        let w = (0..10_000).filter(|_| g.next_is_write(25)).count();
        assert!((2200..2800).contains(&w), "{w}");
    }
}
