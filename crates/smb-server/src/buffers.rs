//! A server-wide pool of large I/O buffers.
//!
//! Large READ responses and WRITE frames reuse these instead of asking the allocator for fresh
//! pages, which the kernel would zero on first touch for every request. One pool for the whole
//! server, bounded in bytes, so idle connections hold no memory and many busy ones cannot grow
//! it without limit.

use std::sync::Mutex;

use crate::sync::lock;

/// Buffers smaller than this are not worth pooling.
const MIN_LEN: usize = 64 * 1024;
/// Bytes the pool may keep.
const MAX_BYTES: usize = 64 << 20;

/// Reusable byte buffers.
#[derive(Debug, Default)]
pub struct BufferPool {
    free: Mutex<(Vec<Vec<u8>>, usize)>,
}

impl BufferPool {
    /// A buffer of at least `len` initialised bytes (contents arbitrary).
    pub fn take(&self, len: usize) -> Vec<u8> {
        if len >= MIN_LEN {
            let mut g = lock(&self.free);
            // The most recently returned buffer that fits: its lines may still be in cache.
            if let Some(i) = g.0.iter().rposition(|b| b.capacity() >= len) {
                let mut b = g.0.remove(i);
                g.1 -= b.capacity();
                drop(g);
                // Zero only what was never initialised: a 2 MiB buffer that last held a
                // 64 KiB response is not wiped whole for the next 64 KiB one.
                if b.len() < len {
                    b.resize(len, 0);
                }
                return b;
            }
        }
        vec![0u8; len]
    }

    /// Returns a buffer (its length marks how much of it is initialised); small ones, and
    /// any beyond the byte bound, are dropped.
    pub fn give(&self, buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap < MIN_LEN {
            return;
        }
        let mut g = lock(&self.free);
        if g.1 + cap <= MAX_BYTES {
            g.1 += cap;
            g.0.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reuses_and_bounds() {
        let p = BufferPool::default();
        let b = p.take(1 << 20);
        assert_eq!(b.len(), 1 << 20);
        let ptr = b.as_ptr();
        p.give(b);
        let again = p.take(1000 * 1000);
        assert_eq!(again.as_ptr(), ptr, "reused");
        assert!(again.len() >= 1000 * 1000);
        for _ in 0..200 {
            p.give(vec![0u8; 1 << 20]);
        }
        assert!(lock(&p.free).1 <= MAX_BYTES);
        p.give(vec![0u8; 100]);
    }
}
