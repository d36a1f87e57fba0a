//! Shared mappings of files, so that a read's data goes from
//! the page cache to a socket in one copy (`writev` straight from the mapping, instead of
//! `pread` into a buffer and a second copy into the socket), and a spliced WRITE payload
//! goes from its pipe into the page cache with `read` into the mapping, a plain copy,
//! instead of the file system's write path, which costs about twice as much per page.
//! Files kept in memory (tmpfs, ramfs) are mapped for both; files on disk only for reads
//! whose pages [`MappedRange::resident`] finds in the page cache.
//!
//! Safety rests on two rules. Kernel copies (`writev`, `read`) get a mapping's bytes as raw
//! addresses; if the file shrinks under the mapping, the copy fails with `EFAULT` (a fault
//! taken inside a system call is not a SIGBUS), which the caller handles. User space touches
//! a mapping only through [`MappedRange::with_bytes`] and [`MappedRange::copy_in`], and only
//! in windows registered with `fault_guard`, whose SIGBUS handler maps zeros over pages past
//! a new end of file.

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::fault_guard::Guard;

/// A mapping covers this much of the file from an aligned start, plus [`MAX_RANGE`], so a
/// range starting in the window always ends inside the mapping.
const WINDOW: u64 = 256 << 20;
/// Longest range one call maps (the largest SMB READ Braid allows).
pub(crate) const MAX_RANGE: usize = 8 << 20;
/// Windows one file keeps (threads and handles at different places of it).
const WINDOWS_PER_FILE: usize = 8;
/// Windows one handle remembers from its file's set (see [`Windows::range_through`]).
const WINDOWS_PER_HANDLE: usize = 4;
/// Address space mapped over the whole process. Page tables of touched pages stay until
/// a window is dropped (8 bytes per 4 KiB), so this bounds them too: at most 128 MiB.
const BUDGET: u64 = 64 << 30;

static MAPPED: AtomicU64 = AtomicU64::new(0);

/// One mapped window of a file.
#[derive(Debug)]
struct Window {
    /// Address of the mapping (never dereferenced here; see the module comment).
    addr: usize,
    /// File offset of the mapping's first byte.
    base: u64,
    len: usize,
    /// Mapped for writing too (the descriptor is open for reading and writing).
    writable: bool,
    /// Registration for user-space access (`with_bytes`, `copy_in`); `None`: kernel copies
    /// only.
    guard: Option<Guard>,
}

impl Window {
    fn map(fd: BorrowedFd<'_>, base: u64, writable: bool) -> Option<Window> {
        let len = WINDOW as usize + MAX_RANGE;
        if MAPPED.fetch_add(len as u64, Ordering::Relaxed) + len as u64 > BUDGET {
            MAPPED.fetch_sub(len as u64, Ordering::Relaxed);
            return None;
        }
        let off = libc::off_t::try_from(base).ok()?;
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: a fresh shared mapping chosen by the kernel; it aliases nothing of ours,
        // and is unmapped exactly once, in Drop.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), off) };
        if p == libc::MAP_FAILED {
            MAPPED.fetch_sub(len as u64, Ordering::Relaxed);
            tracing::debug!(error = %std::io::Error::last_os_error(), "mmap failed; reading with pread");
            return None;
        }
        let guard = Guard::register(p as usize, len, writable);
        Some(Window { addr: p as usize, base, len, writable, guard })
    }

    fn covers(&self, offset: u64, len: usize, writable: bool) -> bool {
        offset >= self.base && offset - self.base + len as u64 <= self.len as u64 && (self.writable || !writable)
    }

    /// Whether a page of zeros replaced part of the window (see `fault_guard`).
    fn stale(&self) -> bool {
        self.guard.as_ref().is_some_and(Guard::stale)
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // Unregister first: once unmapped, the addresses may belong to someone else.
        drop(self.guard.take());
        // SAFETY: `addr`/`len` are exactly what mmap returned, unmapped once.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
        MAPPED.fetch_sub(self.len as u64, Ordering::Relaxed);
    }
}

/// The windows of one file, most recently used first, shared by every handle open on it
/// (see [`shared`]).
#[derive(Debug, Default)]
pub(crate) struct Windows(Mutex<Vec<Arc<Window>>>);

/// Windows of the files open now, by (device, inode). Handles of one file share its windows:
/// the first touch of a page through a window costs a page fault (~0.5 µs per 4 KiB), paid
/// once per file instead of once per handle. An entry lives while a handle holds it; the
/// mappings keep their file alive, so its inode number cannot be reused meanwhile.
type SharedMap = std::collections::HashMap<(u64, u64), std::sync::Weak<Windows>>;
static SHARED: Mutex<Option<SharedMap>> = Mutex::new(None);

/// The windows of the file `fd` is open on (a fresh, unshared set if it cannot be stat'ed).
pub(crate) fn shared(fd: BorrowedFd<'_>) -> Arc<Windows> {
    let Ok(st) = rustix::fs::fstat(fd) else { return Arc::default() };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let key = (st.st_dev as u64, st.st_ino as u64);
    let mut g = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    let map = g.get_or_insert_with(Default::default);
    if let Some(w) = map.get(&key).and_then(std::sync::Weak::upgrade) {
        return w;
    }
    // Drop entries of files no longer open before the map would grow.
    if map.len() == map.capacity() {
        map.retain(|_, w| w.strong_count() > 0);
    }
    let w = Arc::new(Windows::default());
    map.insert(key, Arc::downgrade(&w));
    w
}

impl Windows {
    /// A range of `len` bytes at `offset` (already checked against the end of file), from a
    /// window kept here or a new one; `None` when mapping is not possible now. `writable`
    /// asks for a window the kernel may copy into (`fd` must be open for writing); `rw`
    /// says whether `fd` is, so that new windows serve reads and writes alike.
    pub(crate) fn range(&self, fd: BorrowedFd<'_>, offset: u64, len: usize, writable: bool, rw: bool) -> Option<MappedRange> {
        if len > MAX_RANGE {
            return None;
        }
        let mut ws = self.0.lock().unwrap_or_else(|p| p.into_inner());
        ws.retain(|w| !w.stale());
        let w = match ws.iter().position(|w| w.covers(offset, len, writable)) {
            Some(i) => {
                let w = ws.remove(i);
                ws.insert(0, w.clone());
                w
            }
            None => {
                let w = Arc::new(Window::map(fd, offset - offset % WINDOW, rw)?);
                ws.insert(0, w.clone());
                ws.truncate(WINDOWS_PER_FILE);
                w
            }
        };
        MappedRange::in_window(w, offset, len)
    }

    /// [`Windows::range`] for one handle of a file whose windows are `shared` by all its
    /// handles: `self` is the handle's own short list, looked at first, so the handles of a
    /// busy file do not all queue on the shared list's lock for every request (8 threads
    /// reading 64 KiB blocks of one file lost up to 19% that way); the shared list is only
    /// asked for a window the handle has not used yet.
    pub(crate) fn range_through(
        &self,
        shared: &Windows,
        fd: BorrowedFd<'_>,
        offset: u64,
        len: usize,
        writable: bool,
        rw: bool,
    ) -> Option<MappedRange> {
        if len > MAX_RANGE {
            return None;
        }
        {
            let mut ws = self.0.lock().unwrap_or_else(|p| p.into_inner());
            ws.retain(|w| !w.stale());
            if let Some(w) = ws.iter().find(|w| w.covers(offset, len, writable)).cloned() {
                return MappedRange::in_window(w, offset, len);
            }
        }
        let r = shared.range(fd, offset, len, writable, rw)?;
        if let Some(w) = r.window.clone() {
            let mut ws = self.0.lock().unwrap_or_else(|p| p.into_inner());
            ws.insert(0, w);
            ws.truncate(WINDOWS_PER_HANDLE);
        }
        Some(r)
    }
}

/// The system's page size (4 KiB where sysconf cannot tell).
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system; no memory is involved.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|n| n.is_power_of_two()).unwrap_or(4096)
}

/// File bytes to be sent from a mapping; keeps its window mapped while it lives.
#[derive(Debug)]
pub struct MappedRange {
    window: Option<Arc<Window>>,
    /// Where the range starts in its window.
    at: usize,
    len: usize,
    /// Where the range starts in the file.
    offset: u64,
}

impl MappedRange {
    /// `len` bytes at file offset `offset` of window `w`, which covers them.
    fn in_window(w: Arc<Window>, offset: u64, len: usize) -> Option<MappedRange> {
        let at = usize::try_from(offset - w.base).ok()?;
        Some(MappedRange { window: Some(w), at, len, offset })
    }

    /// A range of no bytes (a read at or past the end of file).
    pub fn empty() -> MappedRange {
        MappedRange { window: None, at: 0, len: 0, offset: 0 }
    }

    /// File offset of the range's first byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes in the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs `f` over the range's bytes read in place from the mapping (no copy); `None` when
    /// the window is not registered for user-space reads (then read the file instead).
    ///
    /// The bytes are the file's live pages, not a snapshot: another writer may change them
    /// while `f` runs, and pages past a new end of file (the file cut short by someone else)
    /// read as zeros. So `f` must read them once and keep what it derives (a ciphertext, a
    /// copy), never read them twice expecting the same bytes.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let Some(w) = self.window.as_ref() else {
            return Some(f(&[]));
        };
        w.guard.as_ref()?;
        // SAFETY: the range lies inside a live mapping (`self.window` holds it; `at + len <=
        // w.len`), readable, registered with the fault guard so a truncated page reads as
        // zeros instead of raising SIGBUS. Other writers may change the bytes during `f` (as
        // with any shared mapping); `f` is told so and only reads them.
        let bytes = unsafe { std::slice::from_raw_parts((w.addr + self.at) as *const u8, self.len) };
        Some(f(bytes))
    }

    /// Copies `src` (exactly the range's length) into the range; `None` when the window is
    /// read-only or not registered for user-space access (then write the file instead).
    /// If the file is cut short meanwhile, the bytes past its new end land in zero pages
    /// the fault guard maps (see `fault_guard`): as if written just before the cut.
    pub fn copy_in(&self, src: &[u8]) -> Option<()> {
        let w = self.window.as_ref()?;
        if !w.writable || w.guard.is_none() || src.len() != self.len {
            return None;
        }
        // SAFETY: the destination lies inside a live, writable shared mapping (`self.window`
        // holds it; `at + len <= w.len`) registered with the fault guard; no Rust reference
        // to it exists, and `src` is ordinary memory that cannot overlap it.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), (w.addr + self.at) as *mut u8, self.len) };
        Some(())
    }

    /// Whether every page of the range is in the page cache now (`mincore`), so that a copy
    /// from it waits for no disk read (unless the pages are evicted before the copy). An
    /// empty range is; one the kernel will not tell about (`mincore` refused, or limited to
    /// this process's page tables for a file it neither owns nor may write) may answer "no".
    pub fn resident(&self) -> bool {
        let Some(w) = self.window.as_ref().filter(|_| self.len > 0) else {
            return true;
        };
        let page = page_size();
        let end = w.addr + self.at + self.len;
        // Windows are page-aligned (mmap), so this start lies inside the window too.
        let mut p = (w.addr + self.at) & !(page - 1);
        let mut vec = [0u8; 512];
        while p < end {
            let pages = (end - p).div_ceil(page).min(vec.len());
            // SAFETY: `p .. p + pages * page` lies inside the live mapping `w` (the range
            // ends inside it, and the window's length is a multiple of the page size);
            // mincore only writes `pages` bytes into `vec`.
            let r = unsafe { libc::mincore(p as *mut libc::c_void, pages * page, vec.as_mut_ptr()) };
            if r != 0 || vec[..pages].iter().any(|b| b & 1 == 0) {
                return false;
            }
            p += pages * page;
        }
        true
    }

    /// One `writev` to the (non-blocking) socket `sock` of what is left of `head` followed
    /// by the range, `done` bytes of the two being sent already. Returns the bytes written;
    /// `WouldBlock` when the socket is full; `EFAULT` (raw OS error) when the file shrank
    /// under the range. After `EFAULT` the kernel may have dropped a whole segment it was
    /// filling, head bytes included: `done` plus what earlier calls returned is what went
    /// out, and the caller sends the rest another way.
    pub fn write_after(&self, sock: BorrowedFd<'_>, head: &[u8], done: usize) -> std::io::Result<usize> {
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 2];
        let mut n = 0;
        if done < head.len() {
            iov[0] = libc::iovec { iov_base: head[done..].as_ptr() as *mut libc::c_void, iov_len: head.len() - done };
            n = 1;
        }
        let skip = done.saturating_sub(head.len()).min(self.len);
        if let Some(w) = self.window.as_ref().filter(|_| skip < self.len) {
            // The address arithmetic stays inside the window: `at + len <= w.len` by
            // construction (`Windows::range`).
            iov[n] = libc::iovec { iov_base: (w.addr + self.at + skip) as *mut libc::c_void, iov_len: self.len - skip };
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: the first iovec points into `head`, borrowed for the call; the second into
        // a live mapping (`self.window` holds it) that only the kernel reads.
        let r = unsafe { libc::writev(sock.as_raw_fd(), iov.as_ptr(), n as libc::c_int) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    /// One `read` from `from` (a pipe holding at least the rest) into the range, `done`
    /// bytes of it being filled already. Returns the bytes copied; `EFAULT` (raw OS error)
    /// when the file shrank under the range, after which the bytes not copied are still in
    /// the pipe. The range must come from a writable window.
    pub fn fill_from(&self, from: BorrowedFd<'_>, done: usize) -> std::io::Result<usize> {
        let Some(w) = self.window.as_ref().filter(|w| w.writable && done < self.len) else {
            return Ok(0);
        };
        // SAFETY: the destination lies inside a live shared mapping (`self.window` holds
        // it; `at + len <= w.len`) that only the kernel touches.
        let r = unsafe { libc::read(from.as_raw_fd(), (w.addr + self.at + done) as *mut libc::c_void, self.len - done) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;

    fn socket_pair() -> (std::os::unix::net::UnixStream, std::os::unix::net::UnixStream) {
        std::os::unix::net::UnixStream::pair().unwrap()
    }

    /// A file holding `content`, open for reading and writing, in a directory removed on drop.
    struct Scratch(std::path::PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch_file(tag: &str, content: &[u8]) -> (Scratch, std::fs::File) {
        let dir = std::env::temp_dir().join(format!("braid-mapped-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, content).unwrap();
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        (Scratch(dir), f)
    }

    fn send_all(r: &MappedRange, sock: BorrowedFd<'_>, head: &[u8]) -> std::io::Result<usize> {
        let mut done = 0;
        while done < head.len() + r.len() {
            match r.write_after(sock, head, done)? {
                0 => break,
                n => done += n,
            }
        }
        Ok(done)
    }

    #[test]
    fn sends_the_head_then_the_files_bytes() {
        let data: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i * 7 % 251) as u8).collect();
        let (_dir, f) = scratch_file("send", &data);
        let ws = Windows::default();
        let r = ws.range(f.as_fd(), 4000, 8000, false, false).unwrap();
        let (a, mut b) = socket_pair();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        assert_eq!(send_all(&r, a.as_fd(), b"head").unwrap(), 8004);
        drop(a);
        let got = reader.join().unwrap();
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..], &data[4000..12000]);
        // The window is kept and reused for a later range.
        let again = ws.range(f.as_fd(), 100, 10, false, false).unwrap();
        assert!(Arc::ptr_eq(again.window.as_ref().unwrap(), r.window.as_ref().unwrap()));
    }

    #[test]
    fn a_file_cut_short_under_the_mapping_is_an_error_not_a_signal() {
        let (_dir, f) = scratch_file("cut", &[5u8; 64 << 10]);
        let r = Windows::default().range(f.as_fd(), 0, 64 << 10, false, false).unwrap();
        f.set_len(0).unwrap();
        let (a, _b) = socket_pair();
        let e = r.write_after(a.as_fd(), b"", 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
    }

    #[test]
    fn windows_per_file_are_bounded() {
        let (_dir, f) = scratch_file("win", b"");
        f.set_len(16 * WINDOW).unwrap();
        let ws = Windows::default();
        for i in 0..16 {
            ws.range(f.as_fd(), i * WINDOW + 1, 10, false, false).unwrap();
        }
        assert_eq!(ws.0.lock().unwrap().len(), WINDOWS_PER_FILE);
        assert!(ws.range(f.as_fd(), 0, MAX_RANGE + 1, false, false).is_none());
    }

    #[test]
    fn handles_of_one_file_share_its_windows() {
        let (_dir, f) = scratch_file("share", &[3u8; 8192]);
        let g = std::fs::File::open(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
        let (a, b) = (shared(f.as_fd()), shared(g.as_fd()));
        assert!(Arc::ptr_eq(&a, &b));
        // A handle's own list takes the window from the shared one, and finds it there next.
        let (mine, theirs) = (Windows::default(), Windows::default());
        let r1 = mine.range_through(&a, f.as_fd(), 0, 10, false, false).unwrap();
        let r2 = theirs.range_through(&b, g.as_fd(), 100, 10, false, false).unwrap();
        assert!(Arc::ptr_eq(r1.window.as_ref().unwrap(), r2.window.as_ref().unwrap()));
        assert_eq!(mine.0.lock().unwrap().len(), 1);
        drop((mine, theirs, r1, r2));
        let (_dir2, other) = scratch_file("share2", &[3u8; 8192]);
        assert!(!Arc::ptr_eq(&a, &shared(other.as_fd())));
        // Once no handle holds them, the file gets a fresh set.
        drop((a, b));
        assert!(shared(f.as_fd()).0.lock().unwrap().is_empty());
    }

    #[test]
    fn reads_the_bytes_in_place() {
        let data: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i * 13 % 251) as u8).collect();
        let (_dir, f) = scratch_file("bytes", &data);
        let r = Windows::default().range(f.as_fd(), 100, 9000, false, false).unwrap();
        assert_eq!(r.with_bytes(<[u8]>::to_vec).unwrap(), &data[100..9100]);
        assert_eq!(MappedRange::empty().with_bytes(|b| b.len()), Some(0));
    }

    #[test]
    fn pages_past_a_new_end_read_as_zeros_and_the_window_is_replaced() {
        let (_dir, f) = scratch_file("zeros", &[7u8; 5 * 4096]);
        let ws = Windows::default();
        let r = ws.range(f.as_fd(), 0, 5 * 4096, false, false).unwrap();
        f.set_len(4096 + 10).unwrap();
        // The first page (partly past the end: the kernel zeroes its tail) is the file's;
        // later ones would raise SIGBUS and read as zeros instead.
        let got = r.with_bytes(<[u8]>::to_vec).unwrap();
        assert!(got[..4096 + 10].iter().all(|&b| b == 7));
        assert!(got[4096 + 10..].iter().all(|&b| b == 0));
        let w = r.window.as_ref().unwrap();
        assert!(w.stale());
        // The file grows back: a new range comes from a fresh window that sees it.
        f.set_len(5 * 4096).unwrap();
        let again = ws.range(f.as_fd(), 0, 5 * 4096, false, false).unwrap();
        assert!(!Arc::ptr_eq(again.window.as_ref().unwrap(), w));
        assert_eq!(ws.0.lock().unwrap().len(), 1);
    }

    #[test]
    fn copies_into_a_writable_range_and_survives_a_cut() {
        let (_dir, f) = scratch_file("copyin", &[0u8; 4 * 4096]);
        let ws = Windows::default();
        assert!(ws.range(f.as_fd(), 0, 10, false, false).unwrap().copy_in(&[1u8; 10]).is_none(), "read-only window");
        let data: Vec<u8> = (0..3 * 4096).map(|i| (i % 241) as u8).collect();
        let r = ws.range(f.as_fd(), 4096, data.len(), true, true).unwrap();
        assert!(r.copy_in(&data[1..]).is_none(), "length must match");
        r.copy_in(&data).unwrap();
        let got = std::fs::read(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
        assert_eq!(&got[4096..], &data[..]);
        // Cut under the range: the copy lands, what fell past the end goes nowhere, and the
        // file keeps its new length.
        f.set_len(4096 + 100).unwrap();
        r.copy_in(&vec![9u8; data.len()]).unwrap();
        assert!(r.window.as_ref().unwrap().stale());
        let got = std::fs::read(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
        assert_eq!(got.len(), 4096 + 100);
        assert!(got[4096..].iter().all(|&b| b == 9));
    }

    fn pipe_with(bytes: &[u8]) -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
        let (r, w) = rustix::pipe::pipe().unwrap();
        assert_eq!(rustix::io::write(&w, bytes).unwrap(), bytes.len());
        (r, w)
    }

    #[test]
    fn fills_a_writable_range_from_a_pipe() {
        let (_dir, f) = scratch_file("fill", &[0u8; 3 * 4096]);
        let ws = Windows::default();
        // A read-only window does not serve a write; a writable one serves both.
        let ro = ws.range(f.as_fd(), 0, 10, false, false).unwrap();
        let r = ws.range(f.as_fd(), 1000, 5000, true, true).unwrap();
        assert!(!Arc::ptr_eq(ro.window.as_ref().unwrap(), r.window.as_ref().unwrap()));
        assert_eq!(ro.fill_from(pipe_with(b"x").0.as_fd(), 0).unwrap(), 0);
        let data: Vec<u8> = (0..5000).map(|i| (i % 253) as u8).collect();
        let (pr, _pw) = pipe_with(&data);
        let mut done = 0;
        while done < data.len() {
            done += r.fill_from(pr.as_fd(), done).unwrap();
        }
        let got = std::fs::read(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
        assert_eq!(&got[1000..6000], &data[..]);
        assert!(got[..1000].iter().chain(&got[6000..]).all(|&b| b == 0));
        let again = ws.range(f.as_fd(), 0, 10, false, true).unwrap();
        assert!(Arc::ptr_eq(again.window.as_ref().unwrap(), r.window.as_ref().unwrap()));
    }

    #[test]
    fn a_file_cut_short_under_a_fill_leaves_the_bytes_in_the_pipe() {
        let (_dir, f) = scratch_file("fillcut", &[0u8; 64 << 10]);
        let r = Windows::default().range(f.as_fd(), 0, 64 << 10, true, true).unwrap();
        f.set_len(4096).unwrap();
        let (pr, _pw) = pipe_with(&[9u8; 8192]);
        // The first page is still the file's; the next one faults.
        let n = r.fill_from(pr.as_fd(), 0).unwrap();
        assert_eq!(n, 4096);
        let e = r.fill_from(pr.as_fd(), n).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
        let mut rest = [0u8; 8192];
        assert_eq!(rustix::io::read(&pr, &mut rest).unwrap(), 4096);
    }
}
