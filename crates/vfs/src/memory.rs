//! [`MemoryBackend`]: a share held entirely in memory, for tests and benchmarks that must
//! not touch a disk.
//!
//! The share is a tree of [`Node`]s: a directory holds its entries by name, a file its bytes.
//! Every node has its own lock, so I/O on different files never contends; changes to the
//! namespace (create, remove, rename) additionally take the backend's namespace lock for
//! writing, and lookups take it for reading, so a lookup never sees half a rename. No code
//! path holds two node locks at once.
//!
//! Names follow [`LocalBackend`](crate::LocalBackend)'s rules: case-insensitive and
//! case-preserving. Unlike a directory on disk, a memory directory never holds two
//! spellings of one name, so a lookup is one map probe.
//! Everything a file holds (bytes, reserved allocation, security descriptor, extended
//! attributes, a fixed cost per node) is charged against the backend's capacity; a change
//! that would exceed it fails with [`VfsError::NoSpace`] and changes nothing.

mod entries;
mod handle;
mod node;
mod posix;

pub use handle::MemoryHandle;

use crate::{Backend, CreateMode, DirEntry, FileAttrs, FileHandle, FileKind, FsStats, OpenOptions, OpenOutcome, Result, SharePath, VfsError};
use node::{Meta, Node, Usage};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::SystemTime;

/// Allocation unit reported by [`Backend::statfs`] and used to round allocation sizes.
const BLOCK_SIZE: u32 = 4096;
/// Longest name the share accepts, in bytes (as on the local backend).
const MAX_NAME_LEN: u32 = 255;
/// File id of the root directory.
pub(crate) const ROOT_ID: u64 = 1;

/// State shared by a backend and all its handles.
struct Tree {
    root: Arc<Node>,
    /// Held for reading by lookups and for writing by namespace changes.
    namespace: RwLock<()>,
    usage: Arc<Usage>,
    next_id: AtomicU64,
    /// Nodes by id, for file tokens; a node leaves when its last name goes.
    index: Mutex<HashMap<u64, Weak<Node>>>,
    /// Random per backend instance: the file system id, and part of every file token, so a
    /// token of an earlier instance (before a restart) is stale rather than another file.
    instance: u64,
}

/// A share held in memory, bounded by a capacity in bytes.
///
/// Cheap to clone: clones share the tree. Its contents live as long as the backend or any
/// of its handles.
#[derive(Clone)]
pub struct MemoryBackend {
    tree: Arc<Tree>,
    read_only: bool,
}

impl fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("capacity", &self.tree.usage.capacity())
            .field("used", &self.tree.usage.used())
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// The entry of `dir` matching `name` case-insensitively, with its stored spelling; with
/// `exact`, only an entry stored with exactly this spelling.
fn find_child(dir: &Node, name: &str, exact: bool) -> Option<(String, Arc<Node>)> {
    let st = dir.read();
    if exact {
        return st.entries.get_exact(name).map(|n| (name.to_owned(), n));
    }
    st.entries.find(name)
}

/// A random number, different for every call (std's per-map hash keys are random).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// Where a non-root path leads: its parent directory (with the parent's stored path and the
/// directories on the way, root first) and the entry at the final name, if any.
struct Located {
    chain: Vec<Arc<Node>>,
    parent_path: SharePath,
    name: String,
    found: Option<(String, Arc<Node>)>,
}

impl Located {
    fn parent(&self) -> &Arc<Node> {
        self.chain.last().expect("the chain holds at least the root")
    }
}

impl MemoryBackend {
    /// An empty share that holds at most `capacity` bytes (file data, reserved allocation,
    /// security descriptors, extended attributes and a fixed cost per file or directory).
    ///
    /// With `read_only`, every mutating call fails with [`VfsError::ReadOnly`].
    pub fn new(capacity: u64, read_only: bool) -> Self {
        let usage = Arc::new(Usage::new(capacity));
        let instance = random_u64();
        let root = Arc::new(Node::new_root(ROOT_ID, instance, Arc::clone(&usage)));
        let mut index = HashMap::new();
        index.insert(ROOT_ID, Arc::downgrade(&root));
        let namespace = RwLock::new(());
        let tree = Tree { root, namespace, usage, next_id: AtomicU64::new(ROOT_ID + 1), index: Mutex::new(index), instance };
        MemoryBackend { tree: Arc::new(tree), read_only }
    }

    /// A backend on the same tree that refuses all changes.
    pub fn read_only_view(&self) -> Self {
        MemoryBackend { tree: Arc::clone(&self.tree), read_only: true }
    }

    /// Whether this backend refuses all changes.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The capacity given to [`MemoryBackend::new`].
    pub fn capacity(&self) -> u64 {
        self.tree.usage.capacity()
    }

    /// Bytes charged against the capacity.
    pub fn used(&self) -> u64 {
        self.tree.usage.used()
    }

    fn read_names(&self) -> RwLockReadGuard<'_, ()> {
        self.tree.namespace.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_names(&self) -> RwLockWriteGuard<'_, ()> {
        self.tree.namespace.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The directories along `comps` (root first) and their stored path; `PathNotFound` if
    /// one is missing or not a directory.
    fn dir_chain(&self, comps: &[String], exact: bool) -> Result<(Vec<Arc<Node>>, SharePath)> {
        let mut chain = vec![Arc::clone(&self.tree.root)];
        let mut stored = Vec::with_capacity(comps.len());
        for c in comps {
            let here = chain.last().expect("the chain holds at least the root");
            match find_child(here, c, exact) {
                Some((name, node)) if node.is_dir => {
                    stored.push(name);
                    chain.push(node);
                }
                _ => return Err(VfsError::PathNotFound),
            }
        }
        Ok((chain, SharePath::from_components(stored)))
    }

    /// Resolves a non-root `path` (the caller holds the namespace lock).
    fn locate(&self, path: &SharePath) -> Result<Located> {
        self.locate_with(path, false)
    }

    /// Resolves a non-root `path`, with `exact` names only or case-insensitively.
    fn locate_with(&self, path: &SharePath, exact: bool) -> Result<Located> {
        let (last, parents) = path.components().split_last().ok_or(VfsError::PermissionDenied)?;
        let (chain, parent_path) = self.dir_chain(parents, exact)?;
        let found = find_child(chain.last().expect("the chain holds at least the root"), last, exact);
        Ok(Located { chain, parent_path, name: last.clone(), found })
    }

    /// The node at `path` and its stored path (the caller holds the namespace lock).
    fn lookup(&self, path: &SharePath) -> Result<(Arc<Node>, SharePath)> {
        self.lookup_with(path, false)
    }

    /// [`MemoryBackend::lookup`] with `exact` names only or case-insensitively.
    fn lookup_with(&self, path: &SharePath, exact: bool) -> Result<(Arc<Node>, SharePath)> {
        if path.is_root() {
            return Ok((Arc::clone(&self.tree.root), SharePath::root()));
        }
        let l = self.locate_with(path, exact)?;
        let (name, node) = l.found.ok_or(VfsError::NotFound)?;
        Ok((node, l.parent_path.join(&name)?))
    }

    /// Adds a new node `name` to `parent` (the caller holds the namespace lock for
    /// writing and checked that no spelling of `name` exists).
    fn create_in(&self, parent: &Arc<Node>, name: &str, meta: Meta) -> Result<Arc<Node>> {
        let id = self.tree.next_id.fetch_add(1, Ordering::Relaxed);
        let node = Arc::new(Node::new(id, meta, self.tree.instance, Arc::clone(&self.tree.usage))?);
        node.add_link(parent, name)?;
        {
            let mut st = parent.write();
            st.entries.insert(name.to_owned(), Arc::clone(&node));
            st.touch_modified(SystemTime::now());
        }
        self.tree.index.lock().unwrap_or_else(|e| e.into_inner()).insert(id, Arc::downgrade(&node));
        Ok(node)
    }

    /// Takes the entry `name` (stored spelling) out of `parent`; a node left without a
    /// name leaves the token index.
    fn unlink_in(&self, parent: &Arc<Node>, name: &str) {
        let removed = {
            let mut st = parent.write();
            let n = st.entries.remove(name);
            st.touch_modified(SystemTime::now());
            n
        };
        if let Some(n) = removed {
            if n.drop_link(parent, name) {
                self.tree.index.lock().unwrap_or_else(|e| e.into_inner()).remove(&n.id);
            }
            n.write().changed = SystemTime::now();
        }
    }

    /// Like [`Backend::open_exact`], returning the concrete handle type.
    pub fn open_memory_exact(&self, path: &SharePath, opts: OpenOptions) -> Result<(MemoryHandle, OpenOutcome)> {
        self.open_with(path, opts, Names::Posix)
    }

    /// Like [`Backend::open`], returning the concrete handle type.
    pub fn open_memory(&self, path: &SharePath, opts: OpenOptions) -> Result<(MemoryHandle, OpenOutcome)> {
        self.open_with(path, opts, Names::Smb)
    }

    fn open_with(&self, path: &SharePath, opts: OpenOptions, names: Names) -> Result<(MemoryHandle, OpenOutcome)> {
        let exact = names != Names::Smb;
        if opts.directory && opts.non_directory {
            return Err(VfsError::InvalidName);
        }
        let ro = self.read_only;
        if ro && (opts.write || opts.truncate || opts.create == CreateMode::CreateNew) {
            return Err(VfsError::ReadOnly);
        }
        // Only a create changes the namespace; plain opens may run side by side.
        let (_reading, _writing) =
            if opts.create == CreateMode::OpenExisting { (Some(self.read_names()), None) } else { (None, Some(self.write_names())) };
        let (node, stored, outcome) = if path.is_root() {
            if opts.create == CreateMode::CreateNew {
                return Err(VfsError::Exists);
            }
            (Arc::clone(&self.tree.root), SharePath::root(), OpenOutcome::Opened)
        } else {
            let l = self.locate_with(path, exact)?;
            match (opts.create, l.found) {
                (CreateMode::CreateNew, Some(_)) => return Err(VfsError::Exists),
                (CreateMode::OpenExisting, None) => return Err(VfsError::NotFound),
                (_, None) if ro => return Err(VfsError::ReadOnly),
                (_, None) => {
                    let parent = l.chain.last().expect("non-empty chain");
                    if exact && find_child(parent, &l.name, false).is_some() {
                        // Another spelling holds the name; a memory directory keeps one.
                        return Err(VfsError::Exists);
                    }
                    let kind = if opts.directory { FileKind::Dir } else { FileKind::File };
                    let node = self.create_in(parent, &l.name, Meta::default_for(kind))?;
                    (node, l.parent_path.join(&l.name)?, OpenOutcome::Created)
                }
                (_, Some((name, node))) => (node, l.parent_path.join(&name)?, OpenOutcome::Opened),
            }
        };
        if outcome == OpenOutcome::Opened {
            check_existing(&node, opts, names == Names::Posix)?;
        }
        Ok((MemoryHandle::new(node, stored, opts, self.read_only), outcome))
    }

    /// Moves the entry `from` found to the place `to` resolves to, as [`Backend::rename`] describes (the caller holds the namespace lock).
    fn move_entry(&self, from: Located, to: Located, replace: bool) -> Result<()> {
        let (fname, src) = from.found.clone().ok_or(VfsError::NotFound)?;
        if src.is_dir && to.chain.iter().any(|d| Arc::ptr_eq(d, &src)) {
            // A directory into itself.
            return Err(VfsError::PermissionDenied);
        }
        if let Some((tname, dst)) = &to.found {
            // The source's own entry (not another link of the same file).
            let case_change = Arc::ptr_eq(to.parent(), from.parent()) && *tname == fname;
            if !case_change && !replace {
                return Err(VfsError::Exists);
            }
            if !case_change && (src.is_dir || dst.is_dir) {
                return Err(VfsError::PermissionDenied);
            }
            if !case_change {
                self.unlink_in(to.parent(), tname);
            }
        }
        self.relink(&from, &fname, &src, &to)
    }

    /// Moves `src`, the entry `fname` of `from`'s parent, to `to`'s name (free by now).
    fn relink(&self, from: &Located, fname: &str, src: &Arc<Node>, to: &Located) -> Result<()> {
        let now = SystemTime::now();
        {
            let mut st = from.parent().write();
            st.entries.remove(fname);
            st.touch_modified(now);
        }
        src.move_link(from.parent(), fname, to.parent(), &to.name);
        src.write().changed = now;
        let mut st = to.parent().write();
        st.entries.insert(to.name.clone(), Arc::clone(src));
        st.touch_modified(now);
        Ok(())
    }
}

/// How an open looks names up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Names {
    /// Case-insensitively (`Backend::open`).
    Smb,
    /// Exact spelling (`Backend::open_spelled`).
    Spelled,
    /// Exact spelling; symlinks and special files open for attributes only
    /// (`Backend::open_exact`).
    Posix,
}

/// Checks an existing node against what `opts` require, truncating it if asked. With
/// `posix`, a symlink or special file opens for attributes only.
fn check_existing(node: &Node, opts: OpenOptions, posix: bool) -> Result<()> {
    if !matches!(node.kind, FileKind::File | FileKind::Dir) {
        if !posix {
            // Symlinks and special files are not opened for SMB (as on the local backend).
            return Err(VfsError::PermissionDenied);
        }
        if opts.create != CreateMode::OpenExisting {
            return Err(VfsError::Exists);
        }
        if opts.directory {
            return Err(VfsError::NotADirectory);
        }
        if opts.read || opts.write || opts.truncate {
            return Err(VfsError::PermissionDenied);
        }
        return Ok(());
    }
    if node.is_dir && opts.non_directory {
        return Err(VfsError::IsADirectory);
    }
    if !node.is_dir && opts.directory {
        return Err(VfsError::NotADirectory);
    }
    if opts.truncate {
        if node.is_dir {
            return Err(VfsError::IsADirectory);
        }
        node.set_len(0)?;
    }
    Ok(())
}

impl Backend for MemoryBackend {
    fn open(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        let (h, outcome) = self.open_memory(path, opts)?;
        Ok((Box::new(h), outcome))
    }

    fn open_exact(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        let (h, outcome) = self.open_memory_exact(path, opts)?;
        Ok((Box::new(h), outcome))
    }

    fn open_spelled(&self, path: &SharePath, opts: OpenOptions) -> Result<(Box<dyn FileHandle>, OpenOutcome)> {
        let (h, outcome) = self.open_with(path, opts, Names::Spelled)?;
        Ok((Box::new(h), outcome))
    }

    fn stat(&self, path: &SharePath) -> Result<FileAttrs> {
        let _names = self.read_names();
        Ok(self.lookup(path)?.0.attrs())
    }

    fn remove(&self, path: &SharePath) -> Result<()> {
        if path.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        if self.read_only {
            return Err(VfsError::ReadOnly);
        }
        let _names = self.write_names();
        let l = self.locate(path)?;
        let (name, node) = l.found.as_ref().ok_or(VfsError::NotFound)?;
        if node.is_dir && !node.read().entries.is_empty() {
            return Err(VfsError::NotEmpty);
        }
        self.unlink_in(l.parent(), name);
        Ok(())
    }

    /// Renames as the local backend does: replacing never touches a directory (a directory
    /// target, or a directory source over a file, is `PermissionDenied`), and a rename to
    /// another spelling of the source's own name only changes its case.
    fn rename(&self, from: &SharePath, to: &SharePath, replace: bool) -> Result<()> {
        if from.is_root() || to.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        if self.read_only {
            return Err(VfsError::ReadOnly);
        }
        let _names = self.write_names();
        let src = self.locate(from)?;
        let (fname, _) = src.found.as_ref().ok_or(VfsError::NotFound)?;
        if src.parent_path.join(fname)? == *to {
            return Ok(());
        }
        let dst = self.locate(to)?;
        self.move_entry(src, dst, replace)
    }

    fn stat_exact(&self, path: &SharePath) -> Result<FileAttrs> {
        self.posix_stat(path)
    }

    fn read_dir_exact(&self, dir: &SharePath) -> Result<Vec<DirEntry>> {
        self.posix_read_dir(dir)
    }

    fn remove_exact(&self, path: &SharePath) -> Result<()> {
        self.posix_remove(path)
    }

    fn rename_exact(&self, from: &SharePath, to: &SharePath) -> Result<()> {
        self.posix_rename(from, to)
    }

    fn readlink(&self, path: &SharePath) -> Result<String> {
        self.posix_readlink(path)
    }

    fn symlink(&self, target: &str, at: &SharePath) -> Result<()> {
        self.posix_symlink(target, at)
    }

    fn link(&self, existing: &SharePath, new: &SharePath) -> Result<()> {
        self.posix_link(existing, new)
    }

    fn mknod(&self, at: &SharePath, kind: FileKind, mode: u32, rdev: (u32, u32)) -> Result<()> {
        self.posix_mknod(at, kind, mode, rdev)
    }

    fn mkdir(&self, at: &SharePath, mode: u32) -> Result<()> {
        self.posix_mkdir(at, mode)
    }

    fn file_token(&self, path: &SharePath) -> Result<Vec<u8>> {
        self.token(path)
    }

    fn resolve_token(&self, token: &[u8]) -> Result<SharePath> {
        self.resolve(token)
    }

    fn statfs(&self) -> Result<FsStats> {
        let total = self.tree.usage.capacity();
        let free = total.saturating_sub(self.tree.usage.used());
        // Every node costs NODE_COST at least: as many more fit in what is free.
        let (files, free_files) = (total / node::NODE_COST, free / node::NODE_COST);
        Ok(FsStats {
            total_bytes: total,
            free_bytes: free,
            avail_bytes: free,
            block_size: BLOCK_SIZE,
            max_name_len: MAX_NAME_LEN,
            total_files: files,
            free_files,
            avail_files: free_files,
        })
    }
}
