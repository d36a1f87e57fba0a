//! Reused frame buffers for large requests and responses.
//!
//! A 1 MiB READ response or WRITE request in a fresh `Vec` is a fresh mapping: the allocator
//! maps it, the kernel zero-fills and faults in every page, and it is unmapped again when
//! dropped. A load generator doing that per request spends more CPU on page faults than on
//! its own work (and takes it from the server it measures on a shared machine). Buffers of
//! at least [`POOLED_MIN`] bytes come from here and return here.

use std::sync::Mutex;

use bytes::Bytes;

/// Smaller buffers come from the allocator's own free lists cheaply.
pub const POOLED_MIN: usize = 64 * 1024;
/// Buffers kept for reuse; more in flight than this are freed when done.
const KEEP: usize = 64;

static FREE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

fn free_list() -> std::sync::MutexGuard<'static, Vec<Vec<u8>>> {
    FREE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The smallest kept buffer whose capacity fits `cap`, if any.
fn best_fit(cap: usize) -> Option<Vec<u8>> {
    let mut free = free_list();
    let i = free.iter().enumerate().filter(|(_, v)| v.capacity() >= cap).min_by_key(|(_, v)| v.capacity()).map(|(i, _)| i)?;
    Some(free.swap_remove(i))
}

/// An empty buffer with room for `cap` bytes.
pub fn empty(cap: usize) -> Vec<u8> {
    if cap < POOLED_MIN {
        return Vec::with_capacity(cap);
    }
    let mut v = best_fit(cap).unwrap_or_else(|| Vec::with_capacity(cap));
    v.clear();
    v
}

/// A buffer of exactly `len` bytes to read into. Its contents are stale bytes of an earlier
/// frame (or zeros), never uninitialised memory.
pub fn filled(len: usize) -> Vec<u8> {
    if len < POOLED_MIN {
        return vec![0; len];
    }
    let mut v = best_fit(len).unwrap_or_default();
    // Only bytes this buffer never held are zeroed.
    v.resize(len, 0);
    v
}

/// Hands a buffer back for reuse.
pub fn give(v: Vec<u8>) {
    if v.capacity() < POOLED_MIN {
        return;
    }
    let mut free = free_list();
    if free.len() < KEEP {
        free.push(v);
    }
}

/// A received frame that returns to the pool when the last `Bytes` of it is dropped.
struct Pooled(Vec<u8>);

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.0));
    }
}

/// Shares `frame` as `Bytes`; large frames go back to the pool afterwards.
pub fn share(frame: Vec<u8>) -> Bytes {
    if frame.capacity() < POOLED_MIN {
        Bytes::from(frame)
    } else {
        Bytes::from_owner(Pooled(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_are_reused_with_their_length() {
        let v = filled(POOLED_MIN * 2);
        let p = v.as_ptr();
        assert_eq!(v.len(), POOLED_MIN * 2);
        drop(share(v));
        // Reused (some other test may have taken it meanwhile: only check when it is ours).
        let w = filled(POOLED_MIN * 2);
        assert_eq!(w.len(), POOLED_MIN * 2);
        if w.as_ptr() == p {
            assert!(w.capacity() >= POOLED_MIN * 2);
        }
        let e = empty(POOLED_MIN);
        assert!(e.is_empty() && e.capacity() >= POOLED_MIN);
        give(w);
        give(e);
    }

    #[test]
    fn small_buffers_bypass_the_pool() {
        let v = filled(100);
        assert_eq!(v, vec![0; 100]);
        let b = share(v);
        assert_eq!(b.len(), 100);
    }
}
