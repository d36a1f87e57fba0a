//! Reading a file's mapping from user space without dying when the file shrinks.
//!
//! A shared mapping of a file that another process cuts short raises SIGBUS on the next
//! user-space access to a page past the new end. Sealing a READ straight out of the mapping
//! (one pass instead of a pread copy and a pass over the copy) and copying a buffered WRITE
//! into it access it from user space, so every window is registered here, and a SIGBUS
//! handler, installed once, answers a fault inside a registered window by mapping zero pages
//! over the faulting page and the rest of the window (every page after the first one past
//! the end is past it too) and returning: the access is retried. A read then sees zeros,
//! which is what the kernel-copy paths already send past a new end of file. A write lands
//! nowhere: its bytes fell past the end of a file that was cut short while they were being
//! written, which is what the write followed by the cut leaves, so no ordering a client could
//! observe is broken. The window is marked stale so no new range is taken from it (its zero
//! pages no longer follow the file). Zero pages are writable only in windows mapped for
//! writing.
//!
//! A SIGBUS anywhere else gets the disposition that was in place before (Rust's own, or the
//! default) back and is re-raised by the retried access: such faults stay fatal.
//!
//! The handler only loads atomics and calls `mmap` / `sigaction`, both plain system calls:
//! nothing in it takes a lock or allocates.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Registered windows at most. The mapping budget allows ~250 windows of 264 MiB; windows
/// beyond this many still serve kernel copies, only not user-space reads.
const SLOTS: usize = 512;

struct Slot {
    /// Window address; 0 when the slot is free.
    start: AtomicUsize,
    len: AtomicUsize,
    /// A zero page was mapped into the window: it no longer mirrors the file.
    stale: AtomicBool,
    /// User space writes into the window too (buffered WRITEs), so its zero pages must take
    /// writes.
    writable: AtomicBool,
}

static TABLE: [Slot; SLOTS] =
    [const { Slot { start: AtomicUsize::new(0), len: AtomicUsize::new(0), stale: AtomicBool::new(false), writable: AtomicBool::new(false) } }; SLOTS];

/// The SIGBUS disposition before ours (restored for faults that are not ours).
struct Previous(libc::sigaction);
// SAFETY: a plain C struct written once before the handler is installed, then only read.
unsafe impl Sync for Previous {}
unsafe impl Send for Previous {}

static PREVIOUS: OnceLock<Option<Previous>> = OnceLock::new();
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// Installs the handler (once per process); false if that failed.
fn install() -> bool {
    PREVIOUS
        .get_or_init(|| {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if page > 0 {
                PAGE.store(page as usize, Ordering::Relaxed);
            }
            // SAFETY: zeroed sigaction structs are valid inputs; the handler has the
            // SA_SIGINFO signature and is async-signal-safe (module comment).
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut act.sa_mask);
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                    return None;
                }
                // Store the previous disposition before ours can run.
                let prev = Previous(old);
                if libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut()) != 0 {
                    return None;
                }
                Some(prev)
            }
        })
        .is_some()
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for s in &TABLE {
        let start = s.start.load(Ordering::Acquire);
        if start == 0 || addr < start || addr - start >= s.len.load(Ordering::Acquire) {
            continue;
        }
        // Every page after the first one past the end of file is past it too: zeros go from
        // the faulting page to the end of the window, one signal per cut instead of one per
        // page.
        let at = addr & !(page - 1);
        let len = start + s.len.load(Ordering::Acquire) - at;
        // SAFETY: the pages lie inside a live window (a reader holds it while faulting in
        // it); MAP_FIXED replaces just them, and only this module's readers and the kernel
        // touch the window.
        let prot = if s.writable.load(Ordering::Acquire) { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        let p = unsafe { libc::mmap(at as *mut libc::c_void, len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED, -1, 0) };
        if p != libc::MAP_FAILED {
            s.stale.store(true, Ordering::Release);
            return;
        }
        break;
    }
    // Not ours (or no page could be mapped): the previous disposition takes the retried fault.
    if let Some(Some(prev)) = PREVIOUS.get() {
        // SAFETY: restoring a disposition read from the kernel.
        unsafe { libc::sigaction(libc::SIGBUS, &prev.0, std::ptr::null_mut()) };
    } else {
        // SAFETY: SIG_DFL is always a valid disposition.
        unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
    }
}

/// A registered window; unregisters on drop (before the caller unmaps it).
#[derive(Debug)]
pub(crate) struct Guard(usize);

impl Guard {
    /// Registers `len` bytes at `addr`; `None` when the handler could not be installed or
    /// every slot is taken (the window then serves kernel copies only).
    pub(crate) fn register(addr: usize, len: usize, writable: bool) -> Option<Guard> {
        if addr == 0 || !install() {
            return None;
        }
        for (i, s) in TABLE.iter().enumerate() {
            if s.start.compare_exchange(0, addr, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                s.stale.store(false, Ordering::Relaxed);
                s.writable.store(writable, Ordering::Relaxed);
                s.len.store(len, Ordering::Release);
                return Some(Guard(i));
            }
        }
        None
    }

    /// Whether a zero page was mapped into the window.
    pub(crate) fn stale(&self) -> bool {
        TABLE[self.0].stale.load(Ordering::Acquire)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let s = &TABLE[self.0];
        s.len.store(0, Ordering::Release);
        s.start.store(0, Ordering::Release);
    }
}
