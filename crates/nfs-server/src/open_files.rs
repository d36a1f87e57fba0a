//! Open files kept between calls. NFS has no OPEN or CLOSE, so without this every READ and
//! WRITE would open and close its file, and lose what an open file carries: on tmpfs and
//! disk file systems the backend's mapped window, whose setup (page faults) and teardown
//! (munmap, TLB shootdowns) then dominate large WRITEs. A handle lingers for
//! [`IDLE`] after its last use, at most [`MAX_OPEN`] per export.
//!
//! Safe to share between callers because every use is preceded by the caller's own checks:
//! the path still holds the same file (else the call takes the slow way, which answers
//! STALE), and the caller's permission from the file's attributes. The first open of a file
//! runs as the caller, so the kernel checks it too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use braid_vfs::{FileHandle, SharePath};

/// How long an unused handle stays open.
pub const IDLE: Duration = Duration::from_secs(2);
/// Most handles open per export.
pub const MAX_OPEN: usize = 256;

type Shared = Arc<Box<dyn FileHandle>>;

#[derive(Debug)]
struct Slot {
    handle: Shared,
    path: SharePath,
    last: Instant,
}

/// One export's open files, by (file id, opened for writing).
#[derive(Debug, Default)]
pub struct OpenFiles {
    slots: Mutex<HashMap<(u64, bool), Slot>>,
}

impl OpenFiles {
    /// The handle of file `file_id` at `path` open for reading or writing (`write`), opened
    /// with `open` when none is kept. Handles dropped here are closed on the calling
    /// (blocking) thread.
    pub fn get(
        &self,
        file_id: u64,
        path: &SharePath,
        write: bool,
        open: impl FnOnce() -> braid_vfs::Result<Box<dyn FileHandle>>,
    ) -> braid_vfs::Result<Shared> {
        let now = Instant::now();
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(s) = slots.get_mut(&(file_id, write)) {
                if s.path == *path && now.duration_since(s.last) < IDLE {
                    s.last = now;
                    return Ok(s.handle.clone());
                }
            }
        }
        let handle: Shared = Arc::new(open()?);
        let gone = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let mut gone: Vec<Slot> = Vec::new();
            if slots.len() >= MAX_OPEN / 2 {
                let idle: Vec<(u64, bool)> = slots.iter().filter(|(_, s)| now.duration_since(s.last) >= IDLE).map(|(k, _)| *k).collect();
                gone.extend(idle.iter().filter_map(|k| slots.remove(k)));
            }
            if slots.len() < MAX_OPEN {
                let slot = Slot { handle: handle.clone(), path: path.clone(), last: now };
                gone.extend(slots.insert((file_id, write), slot));
            }
            gone
        };
        drop(gone);
        Ok(handle)
    }

    /// Closes every handle unused for [`IDLE`] (the export's sweeper calls it).
    pub fn sweep(&self) {
        let now = Instant::now();
        let gone: Vec<Slot> = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let idle: Vec<(u64, bool)> = slots.iter().filter(|(_, s)| now.duration_since(s.last) >= IDLE).map(|(k, _)| *k).collect();
            idle.iter().filter_map(|k| slots.remove(k)).collect()
        };
        drop(gone);
    }

    /// Closes the handles of `file_id` (it was removed, renamed or truncated).
    pub fn forget(&self, file_id: u64) {
        let gone: Vec<Slot> = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            [false, true].iter().filter_map(|w| slots.remove(&(file_id, *w))).collect()
        };
        drop(gone);
    }

    /// Closes every handle (the server stops).
    pub fn close_all(&self) {
        let gone: Vec<Slot> = self.slots.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, s)| s).collect();
        drop(gone);
    }

    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_vfs::{Backend, CreateMode, MemoryBackend, OpenOptions};

    #[test]
    fn a_handle_is_reused_until_idle_or_forgotten() {
        let b = MemoryBackend::new(1 << 20, false);
        let p = SharePath::from_smb("f").unwrap();
        let opts = OpenOptions { read: true, write: true, create: CreateMode::OpenOrCreate, truncate: false, directory: false, non_directory: true };
        let opens = std::cell::Cell::new(0);
        let open = || {
            opens.set(opens.get() + 1);
            b.open(&p, opts).map(|(h, _)| h)
        };
        let files = OpenFiles::default();
        let a = files.get(1, &p, true, open).unwrap();
        let again = files.get(1, &p, true, || unreachable!("kept")).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        // Another path for the id (renamed): opened anew.
        let q = SharePath::from_smb("g").unwrap();
        assert!(files.get(1, &q, true, || b.open(&p, opts).map(|(h, _)| h)).is_ok());
        files.forget(1);
        assert!(files.is_empty());
        assert_eq!(opens.get(), 1);
    }
}
