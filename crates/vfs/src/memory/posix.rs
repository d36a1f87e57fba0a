//! The POSIX calls of [`MemoryBackend`] (for NFS): exact names only, symlinks (their target
//! is their data), hard links, special files, and file tokens.
//!
//! A memory directory holds one spelling of a name, so creating a name that exists in
//! another case is `Exists` here (a local directory can hold both). A token is the node id
//! and the backend instance's random number: ids are never reused, and a token of an
//! earlier instance (the share's contents do not survive a restart) is stale.

use super::node::{Meta, Node};
use super::{find_child, Located, MemoryBackend, ROOT_ID};
use crate::{DirEntry, FileAttrs, FileKind, Result, SharePath, VfsError};
use std::sync::Arc;
use std::time::SystemTime;

/// Longest symlink target accepted, in bytes (as on the local backend).
const MAX_TARGET_LEN: usize = 4096;

/// Token length: node id and backend instance.
const TOKEN_LEN: usize = 16;

impl MemoryBackend {
    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(VfsError::ReadOnly);
        }
        Ok(())
    }

    /// Locates a new name `at` exactly: `Exists` if any spelling of it is taken.
    fn locate_free(&self, at: &SharePath) -> Result<Located> {
        let l = self.locate_with(at, true)?;
        if l.found.is_some() || find_child(l.parent(), &l.name, false).is_some() {
            return Err(VfsError::Exists);
        }
        Ok(l)
    }

    /// Adds a new node at `at` (exact, free), with `data` (a symlink's target) in it before
    /// any lookup can see it.
    fn make(&self, at: &SharePath, meta: Meta, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        let _names = self.write_names();
        let l = self.locate_free(at)?;
        let node = self.create_in(l.parent(), &l.name, meta)?;
        if data.is_empty() {
            return Ok(());
        }
        let mut st = node.write();
        let want = st.charge_with_data(data.len() as u64);
        if let Err(e) = node.recharge(&mut st, want) {
            drop(st);
            // No room for the data: the name goes again.
            self.unlink_in(l.parent(), &l.name);
            return Err(e);
        }
        st.data = data.to_vec();
        Ok(())
    }

    pub(crate) fn posix_stat(&self, path: &SharePath) -> Result<FileAttrs> {
        let _names = self.read_names();
        Ok(self.lookup_with(path, true)?.0.attrs())
    }

    pub(crate) fn posix_read_dir(&self, dir: &SharePath) -> Result<Vec<DirEntry>> {
        let _names = self.read_names();
        let (node, _) = self.lookup_with(dir, true)?;
        if !node.is_dir {
            return Err(VfsError::NotADirectory);
        }
        // Collected first, so no two node locks are ever held together.
        let entries: Vec<(String, Arc<Node>)> = node.read().entries.iter().map(|(k, n)| (k.clone(), Arc::clone(n))).collect();
        Ok(entries.into_iter().map(|(name, n)| DirEntry { name, attrs: n.attrs() }).collect())
    }

    pub(crate) fn posix_remove(&self, path: &SharePath) -> Result<()> {
        if path.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        self.check_writable()?;
        let _names = self.write_names();
        let l = self.locate_with(path, true)?;
        let (name, node) = l.found.as_ref().ok_or(VfsError::NotFound)?;
        if node.is_dir && !node.read().entries.is_empty() {
            return Err(VfsError::NotEmpty);
        }
        self.unlink_in(l.parent(), name);
        Ok(())
    }

    pub(crate) fn posix_rename(&self, from: &SharePath, to: &SharePath) -> Result<()> {
        if from.is_root() || to.is_root() {
            return Err(VfsError::PermissionDenied);
        }
        self.check_writable()?;
        let _names = self.write_names();
        let src = self.locate_with(from, true)?;
        let (fname, node) = src.found.clone().ok_or(VfsError::NotFound)?;
        // The target as stored, in any spelling: a memory directory holds only one.
        let dst = self.locate_with(to, true)?;
        let dst = Located { found: find_child(dst.parent(), &dst.name, false), ..dst };
        if node.is_dir && dst.chain.iter().any(|d| Arc::ptr_eq(d, &node)) {
            // A directory into itself.
            return Err(VfsError::PermissionDenied);
        }
        if let Some((tname, old)) = &dst.found {
            // The source's own entry, found under the target's folded name.
            let same_entry = Arc::ptr_eq(dst.parent(), src.parent()) && *tname == fname;
            if same_entry && *tname == dst.name {
                return Ok(());
            } else if same_entry {
                // Only the case of the name changes: a plain move to the new spelling.
            } else if *tname != dst.name {
                // Another spelling holds the name, and a memory directory keeps one.
                return Err(VfsError::Exists);
            } else if Arc::ptr_eq(old, &node) {
                // Two links of one file: rename(2) does nothing.
                return Ok(());
            } else {
                match (node.is_dir, old.is_dir) {
                    (true, false) => return Err(VfsError::NotADirectory),
                    (false, true) => return Err(VfsError::IsADirectory),
                    (true, true) if !old.read().entries.is_empty() => return Err(VfsError::NotEmpty),
                    _ => {}
                }
                self.unlink_in(dst.parent(), tname);
            }
        }
        self.relink(&src, &fname, &node, &dst)
    }

    pub(crate) fn posix_readlink(&self, path: &SharePath) -> Result<String> {
        let _names = self.read_names();
        let (node, _) = self.lookup_with(path, true)?;
        if node.kind != FileKind::Symlink {
            return Err(VfsError::InvalidName);
        }
        let target = node.read().data.clone();
        String::from_utf8(target).map_err(|_| VfsError::InvalidName)
    }

    pub(crate) fn posix_symlink(&self, target: &str, at: &SharePath) -> Result<()> {
        if target.is_empty() || target.len() > MAX_TARGET_LEN || target.contains('\0') {
            return Err(VfsError::InvalidName);
        }
        let meta = Meta { mode: 0o777, ..Meta::default_for(FileKind::Symlink) };
        self.make(at, meta, target.as_bytes())
    }

    pub(crate) fn posix_link(&self, existing: &SharePath, new: &SharePath) -> Result<()> {
        self.check_writable()?;
        let _names = self.write_names();
        let (node, _) = self.lookup_with(existing, true)?;
        if node.is_dir {
            return Err(VfsError::IsADirectory);
        }
        let l = self.locate_free(new)?;
        node.add_link(l.parent(), &l.name)?;
        let now = SystemTime::now();
        node.write().changed = now;
        let mut st = l.parent().write();
        st.entries.insert(l.name.clone(), node);
        st.touch_modified(now);
        Ok(())
    }

    pub(crate) fn posix_mknod(&self, at: &SharePath, kind: FileKind, mode: u32, rdev: (u32, u32)) -> Result<()> {
        let device = match kind {
            FileKind::Fifo | FileKind::Socket => false,
            FileKind::Block | FileKind::Char => true,
            FileKind::File | FileKind::Dir | FileKind::Symlink => return Err(VfsError::InvalidName),
        };
        let base = Meta::default_for(kind);
        // As the kernel: only root makes device nodes.
        if device && base.uid != 0 {
            return Err(VfsError::PermissionDenied);
        }
        let rdev = if device { rdev } else { (0, 0) };
        self.make(at, Meta { mode, rdev, ..base }, &[])
    }

    pub(crate) fn posix_mkdir(&self, at: &SharePath, mode: u32) -> Result<()> {
        self.make(at, Meta { mode, ..Meta::default_for(FileKind::Dir) }, &[])
    }

    pub(crate) fn token(&self, path: &SharePath) -> Result<Vec<u8>> {
        let _names = self.read_names();
        let (node, _) = self.lookup_with(path, true)?;
        let mut t = Vec::with_capacity(TOKEN_LEN);
        t.extend_from_slice(&node.id.to_le_bytes());
        t.extend_from_slice(&self.tree.instance.to_le_bytes());
        Ok(t)
    }

    pub(crate) fn resolve(&self, token: &[u8]) -> Result<SharePath> {
        let (id, instance) = match token {
            [id @ .., i0, i1, i2, i3, i4, i5, i6, i7] if token.len() == TOKEN_LEN => {
                let id: [u8; 8] = id.try_into().map_err(|_| VfsError::InvalidName)?;
                (u64::from_le_bytes(id), u64::from_le_bytes([*i0, *i1, *i2, *i3, *i4, *i5, *i6, *i7]))
            }
            _ => return Err(VfsError::InvalidName),
        };
        if instance != self.tree.instance {
            return Err(VfsError::NotFound);
        }
        let _names = self.read_names();
        let node = self.tree.index.lock().unwrap_or_else(|e| e.into_inner()).get(&id).and_then(|w| w.upgrade());
        let mut node = node.ok_or(VfsError::NotFound)?;
        // Up through one name per level to the root (directories have exactly one).
        let mut comps = Vec::new();
        while node.id != ROOT_ID {
            let (dir, name) = node.a_link().ok_or(VfsError::NotFound)?;
            comps.push(name);
            node = dir;
        }
        comps.reverse();
        Ok(SharePath::from_components(comps))
    }
}
