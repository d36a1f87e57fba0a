//! The files and directories of a [`MemoryBackend`](super::MemoryBackend), and the account
//! of the bytes they hold.

use super::entries::Entries;
use super::BLOCK_SIZE;
use crate::{dos, FileAttrs, FileKind, Posix, Result, SetTimes, VfsError};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::SystemTime;

/// What every file or directory costs beside its contents: its name (at most 255 bytes),
/// its place in the parent's map, and its metadata.
pub(crate) const NODE_COST: u64 = 512;

/// Largest offset or size a file may reach, as on the local backend (`loff_t` is signed).
pub(crate) const MAX_OFFSET: u64 = i64::MAX as u64;

/// DOS attributes a node stores (the rest are derived or wire-only).
const STORED_DOS: u32 = dos::READONLY | dos::HIDDEN | dos::SYSTEM | dos::ARCHIVE | dos::TEMPORARY | dos::OFFLINE | dos::NOT_CONTENT_INDEXED;

/// Bytes charged against a backend's capacity.
#[derive(Debug)]
pub(crate) struct Usage {
    used: AtomicU64,
    capacity: u64,
}

impl Usage {
    pub(crate) fn new(capacity: u64) -> Self {
        Usage { used: AtomicU64::new(0), capacity }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Moves a node's charge from `*charged` to `want`; `NoSpace` (nothing changed) when the
    /// growth does not fit.
    pub(crate) fn recharge(&self, charged: &mut u64, want: u64) -> Result<()> {
        if want > *charged {
            let add = want - *charged;
            self.used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| u.checked_add(add).filter(|n| *n <= self.capacity))
                .map_err(|_| VfsError::NoSpace)?;
        } else {
            self.used.fetch_sub(*charged - want, Ordering::Relaxed);
        }
        *charged = want;
        Ok(())
    }
}

/// The mutable part of a node.
#[derive(Debug)]
pub(crate) struct NodeState {
    /// A file's bytes.
    pub(crate) data: Vec<u8>,
    /// Space reserved by `allocate` (may exceed the data).
    pub(crate) reserved: u64,
    /// A directory's entries.
    pub(crate) entries: Entries,
    pub(crate) created: SystemTime,
    pub(crate) accessed: SystemTime,
    pub(crate) modified: SystemTime,
    pub(crate) changed: SystemTime,
    /// Stored DOS attributes (`STORED_DOS` bits and `dos::SPARSE_FILE`).
    pub(crate) dos: u32,
    pub(crate) security: Option<Vec<u8>>,
    pub(crate) eas: BTreeMap<String, Vec<u8>>,
    /// Named streams, by name as created (looked up case-insensitively).
    pub(crate) streams: BTreeMap<String, Vec<u8>>,
    /// The names it has: (directory, name). Empty once removed (open handles keep it
    /// alive), and for the root. Files may have several (hard links).
    pub(crate) links: Vec<(Weak<Node>, String)>,
    /// Permission bits (`0o7777`).
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// Bytes charged for this node.
    pub(crate) charged: u64,
}

impl NodeState {
    /// Records a change of the contents (data, or a directory's entries).
    pub(crate) fn touch_modified(&mut self, now: SystemTime) {
        self.modified = now;
        self.changed = now;
    }

    /// The bytes the data occupies: its length or the reservation, whichever is larger.
    fn data_cost(&self) -> u64 {
        (self.data.len() as u64).max(self.reserved)
    }

    /// The charge with the data cost replaced by `data_cost`.
    pub(crate) fn charge_with_data(&self, data_cost: u64) -> u64 {
        self.charged - self.data_cost() + data_cost
    }
}

/// POSIX metadata a new node starts with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta {
    pub(crate) kind: FileKind,
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// Device numbers of a device node.
    pub(crate) rdev: (u32, u32),
}

impl Meta {
    /// A file or directory with the default mode (0o644, 0o755), owned by the calling
    /// thread's file system user and group (see [`crate::creds`]).
    pub(crate) fn default_for(kind: FileKind) -> Meta {
        let (uid, gid) = crate::creds::current_fs_ids();
        let mode = if kind == FileKind::Dir { 0o755 } else { 0o644 };
        Meta { kind, mode, uid, gid, rdev: (0, 0) }
    }
}

/// One file, directory, symlink (its target is its data) or special file.
#[derive(Debug)]
pub(crate) struct Node {
    /// Unique within the backend, never reused.
    pub(crate) id: u64,
    pub(crate) is_dir: bool,
    pub(crate) kind: FileKind,
    pub(crate) rdev: (u32, u32),
    /// Tells this backend's file tokens from another's (the file system id).
    pub(crate) fsid: u64,
    state: RwLock<NodeState>,
    usage: Arc<Usage>,
}

impl Node {
    fn with_state(id: u64, meta: Meta, fsid: u64, usage: Arc<Usage>, charged: u64) -> Node {
        let now = SystemTime::now();
        let is_dir = meta.kind == FileKind::Dir;
        // Windows marks new files for backup, as the local backend does.
        let dos = if is_dir { 0 } else { dos::ARCHIVE };
        let state = NodeState {
            data: Vec::new(),
            reserved: 0,
            entries: Entries::default(),
            created: now,
            accessed: now,
            modified: now,
            changed: now,
            dos,
            security: None,
            eas: BTreeMap::new(),
            streams: BTreeMap::new(),
            links: Vec::new(),
            mode: meta.mode & 0o7777,
            uid: meta.uid,
            gid: meta.gid,
            charged,
        };
        Node { id, is_dir, kind: meta.kind, rdev: meta.rdev, fsid, state: RwLock::new(state), usage }
    }

    /// The root directory; free, so an empty share uses nothing.
    pub(crate) fn new_root(id: u64, fsid: u64, usage: Arc<Usage>) -> Node {
        Node::with_state(id, Meta::default_for(FileKind::Dir), fsid, usage, 0)
    }

    /// A new file or directory, charged [`NODE_COST`].
    pub(crate) fn new(id: u64, meta: Meta, fsid: u64, usage: Arc<Usage>) -> Result<Node> {
        let mut charged = 0;
        usage.recharge(&mut charged, NODE_COST)?;
        Ok(Node::with_state(id, meta, fsid, usage, charged))
    }

    /// Records the name `name` in `dir` (just added to `dir`'s entries). A name beyond the
    /// first (a hard link) is charged [`NODE_COST`] like a node.
    pub(crate) fn add_link(&self, dir: &Arc<Node>, name: &str) -> Result<()> {
        let mut st = self.write();
        if !st.links.is_empty() {
            let want = st.charged + NODE_COST;
            self.recharge(&mut st, want)?;
        }
        st.links.push((Arc::downgrade(dir), name.to_owned()));
        Ok(())
    }

    /// Forgets the name `name` in `dir` (just removed from `dir`'s entries); returns
    /// whether the node has no name left.
    pub(crate) fn drop_link(&self, dir: &Arc<Node>, name: &str) -> bool {
        let mut st = self.write();
        let at = st.links.iter().position(|(d, n)| n == name && std::ptr::eq(d.as_ptr(), Arc::as_ptr(dir)));
        if let Some(i) = at {
            st.links.swap_remove(i);
            if !st.links.is_empty() {
                let want = st.charged.saturating_sub(NODE_COST);
                // Shrinking always fits.
                let _ = self.recharge(&mut st, want);
            }
        }
        st.links.is_empty()
    }

    /// Changes the name `fname` in `from` into `tname` in `to` (a rename: nothing to charge).
    pub(crate) fn move_link(&self, from: &Arc<Node>, fname: &str, to: &Arc<Node>, tname: &str) {
        let mut st = self.write();
        let at = st.links.iter().position(|(d, n)| n == fname && std::ptr::eq(d.as_ptr(), Arc::as_ptr(from)));
        let link = (Arc::downgrade(to), tname.to_owned());
        match at {
            Some(i) => st.links[i] = link,
            None => st.links.push(link),
        }
    }

    /// One of the node's names, as (directory, name); `None` once removed (or the root).
    pub(crate) fn a_link(&self) -> Option<(Arc<Node>, String)> {
        let st = self.read();
        st.links.iter().find_map(|(d, n)| Some((d.upgrade()?, n.clone())))
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, NodeState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, NodeState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes `st`'s charge to `want` (see [`Usage::recharge`]).
    pub(crate) fn recharge(&self, st: &mut NodeState, want: u64) -> Result<()> {
        self.usage.recharge(&mut st.charged, want)
    }

    /// Current metadata.
    pub(crate) fn attrs(&self) -> FileAttrs {
        let st = self.read();
        let (size, nlink) = if self.is_dir {
            let subdirs = st.entries.subdirs();
            let removed = st.links.is_empty() && self.id != super::ROOT_ID;
            (0, if removed { 0 } else { u32::try_from(2 + subdirs).unwrap_or(u32::MAX) })
        } else {
            (st.data.len() as u64, u32::try_from(st.links.len()).unwrap_or(u32::MAX))
        };
        let block = u64::from(BLOCK_SIZE);
        FileAttrs {
            is_dir: self.is_dir,
            size,
            alloc_size: st.data_cost().div_ceil(block).saturating_mul(block),
            nlink,
            file_id: self.id,
            created: st.created,
            accessed: st.accessed,
            modified: st.modified,
            changed: st.changed,
            dos_attributes: st.dos | if self.is_dir { dos::DIRECTORY } else { 0 },
            posix: Posix { kind: self.kind, mode: st.mode, uid: st.uid, gid: st.gid, rdev: self.rdev, fsid: self.fsid },
        }
    }

    /// Sets the end of file, charging the new length; a reservation past it is released.
    pub(crate) fn set_len(&self, len: u64) -> Result<()> {
        if len > MAX_OFFSET {
            return Err(VfsError::TooLarge);
        }
        let new_len = usize::try_from(len).map_err(|_| VfsError::TooLarge)?;
        let mut st = self.write();
        let reserved = st.reserved.min(len);
        let want = st.charge_with_data(len.max(reserved));
        self.recharge(&mut st, want)?;
        st.reserved = reserved;
        if let Some(grow) = new_len.checked_sub(st.data.len()) {
            st.data.reserve_exact(grow);
        }
        st.data.resize(new_len, 0);
        if new_len < st.data.capacity() / 2 {
            st.data.shrink_to_fit();
        }
        st.touch_modified(SystemTime::now());
        Ok(())
    }

    /// Reserves `len` bytes for the file without moving its end.
    pub(crate) fn allocate(&self, len: u64) -> Result<()> {
        if len > MAX_OFFSET {
            return Err(VfsError::TooLarge);
        }
        let mut st = self.write();
        if len <= st.reserved {
            return Ok(());
        }
        let want = st.charge_with_data((st.data.len() as u64).max(len));
        self.recharge(&mut st, want)?;
        st.reserved = len;
        st.changed = SystemTime::now();
        Ok(())
    }

    /// Changes the times that are `Some`.
    pub(crate) fn set_times(&self, times: SetTimes) {
        let mut st = self.write();
        let now = SystemTime::now();
        st.created = times.created.unwrap_or(st.created);
        st.accessed = times.accessed.unwrap_or(st.accessed);
        st.modified = times.modified.unwrap_or(st.modified);
        st.changed = times.changed.unwrap_or(now);
    }

    /// Stores the DOS attributes it keeps; the sparse mark stays as it is.
    pub(crate) fn set_dos(&self, attrs: u32) {
        let mut st = self.write();
        st.dos = (attrs & STORED_DOS) | (st.dos & dos::SPARSE_FILE);
        st.changed = SystemTime::now();
    }

    /// Sets or clears a file's sparse mark (memory files have no holes: only the mark).
    pub(crate) fn set_sparse(&self, sparse: bool) -> Result<()> {
        if self.is_dir {
            return Err(VfsError::IsADirectory);
        }
        let mut st = self.write();
        st.dos = if sparse { st.dos | dos::SPARSE_FILE } else { st.dos & !dos::SPARSE_FILE };
        st.changed = SystemTime::now();
        Ok(())
    }

    /// Zeros `offset..offset + len`, clipped to the end of file (the bytes stay stored).
    pub(crate) fn zero_range(&self, offset: u64, len: u64) {
        let mut st = self.write();
        let size = st.data.len() as u64;
        let end = offset.saturating_add(len).min(size);
        if end > offset {
            // Both fit in usize: they are at most the data's length.
            st.data[offset as usize..end as usize].fill(0);
            st.touch_modified(SystemTime::now());
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        self.usage.used.fetch_sub(st.charged, Ordering::Relaxed);
        // Children are taken apart here, one level at a time, so a deep tree cannot
        // overflow the stack with nested drops.
        let mut orphans = st.entries.take_all();
        while let Some(n) = orphans.pop() {
            if let Some(mut n) = Arc::into_inner(n) {
                let st = n.state.get_mut().unwrap_or_else(|e| e.into_inner());
                orphans.extend(st.entries.take_all());
            }
        }
    }
}
