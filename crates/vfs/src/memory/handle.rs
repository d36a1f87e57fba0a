//! [`MemoryHandle`]: an open file or directory of a [`MemoryBackend`](super::MemoryBackend).

use super::node::{Node, MAX_OFFSET};
use crate::{DirEntry, FileAttrs, FileHandle, FileKind, OpenOptions, Result, SetTimes, SharePath, VfsError};
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

/// An open file or directory held in memory.
///
/// Read and write permissions asked for at open time are enforced for `read_at` and
/// `write_at`; metadata changes (`set_len`, times, attributes) work on any handle of a
/// writable share, as they do on the local backend's. The node outlives its removal from
/// the tree while handles remain.
pub struct MemoryHandle {
    node: Arc<Node>,
    path: SharePath,
    allow_read: bool,
    allow_write: bool,
    read_only: bool,
}

impl fmt::Debug for MemoryHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryHandle").field("path", &self.path).field("file_id", &self.node.id).field("is_dir", &self.node.is_dir).finish()
    }
}

impl MemoryHandle {
    pub(crate) fn new(node: Arc<Node>, path: SharePath, opts: OpenOptions, read_only: bool) -> Self {
        MemoryHandle { node, path, allow_read: opts.read, allow_write: opts.write, read_only }
    }

    /// Common gate of every call that changes the file's data.
    fn check_data_change(&self) -> Result<()> {
        if self.read_only {
            return Err(VfsError::ReadOnly);
        }
        if self.node.is_dir {
            return Err(VfsError::IsADirectory);
        }
        if self.node.kind != FileKind::File {
            // A symlink's data is its target; special files have none.
            return Err(VfsError::PermissionDenied);
        }
        Ok(())
    }

    /// Common gate of every metadata change.
    fn check_meta_change(&self) -> Result<()> {
        if self.read_only {
            return Err(VfsError::ReadOnly);
        }
        Ok(())
    }
}

impl MemoryHandle {
    /// Resizes the stream `stored` (created if missing) to `len`, charging the change.
    fn resize_stream(&self, st: &mut super::node::NodeState, stored: &str, len: u64) -> Result<()> {
        crate::streams::check_name(stored)?;
        let len_us = usize::try_from(len).map_err(|_| VfsError::TooLarge)?;
        let old = st.streams.get(stored).map_or(0, |v| (stored.len() + v.len()) as u64);
        let want = (st.charged - old).saturating_add(stored.len() as u64).saturating_add(len);
        self.node.recharge(st, want)?;
        st.streams.entry(stored.to_owned()).or_default().resize(len_us, 0);
        Ok(())
    }
}

impl FileHandle for MemoryHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        if self.node.is_dir {
            return Err(VfsError::IsADirectory);
        }
        if !self.allow_read {
            return Err(VfsError::PermissionDenied);
        }
        let st = self.node.read();
        let Ok(start) = usize::try_from(offset) else { return Ok(0) };
        let Some(avail) = st.data.get(start..) else { return Ok(0) };
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<usize> {
        self.check_data_change()?;
        if !self.allow_write {
            return Err(VfsError::PermissionDenied);
        }
        let end = match offset.checked_add(buf.len() as u64) {
            Some(end) if end <= MAX_OFFSET => end,
            _ => return Err(VfsError::TooLarge),
        };
        if buf.is_empty() {
            // As pwrite: nothing written, the end of file stays.
            return Ok(0);
        }
        let mut st = self.node.write();
        if end > st.data.len() as u64 {
            let want = st.charge_with_data(end.max(st.reserved));
            self.node.recharge(&mut st, want)?;
            let end = usize::try_from(end).map_err(|_| VfsError::TooLarge)?;
            let grow = end - st.data.len();
            st.data.reserve_exact(grow);
            st.data.resize(end, 0);
        }
        // Both fit in usize: the data just reached `end`.
        let start = offset as usize;
        st.data[start..start + buf.len()].copy_from_slice(buf);
        st.touch_modified(SystemTime::now());
        Ok(buf.len())
    }

    fn size(&self) -> Result<u64> {
        Ok(if self.node.is_dir { 0 } else { self.node.read().data.len() as u64 })
    }

    fn attrs(&self) -> Result<FileAttrs> {
        Ok(self.node.attrs())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check_data_change()?;
        self.node.set_len(len)
    }

    fn allocate(&self, len: u64) -> Result<()> {
        self.check_data_change()?;
        self.node.allocate(len)
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn set_times(&self, times: SetTimes) -> Result<()> {
        self.check_meta_change()?;
        self.node.set_times(times);
        Ok(())
    }

    fn set_dos_attributes(&self, attrs: u32) -> Result<()> {
        self.check_meta_change()?;
        self.node.set_dos(attrs);
        Ok(())
    }

    fn set_sparse(&self, sparse: bool) -> Result<()> {
        self.check_meta_change()?;
        self.node.set_sparse(sparse)
    }

    fn zero_range(&self, offset: u64, len: u64, _deallocate: bool) -> Result<()> {
        self.check_data_change()?;
        if !self.allow_write {
            return Err(VfsError::PermissionDenied);
        }
        self.node.zero_range(offset, len);
        Ok(())
    }

    fn read_dir(&self) -> Result<Vec<DirEntry>> {
        if !self.node.is_dir {
            return Err(VfsError::NotADirectory);
        }
        // The entries are collected first, so no two node locks are ever held together.
        let entries: Vec<(String, Arc<Node>)> = self.node.read().entries.iter().map(|(k, n)| (k.clone(), Arc::clone(n))).collect();
        // Symlinks and special files are not listed (as on the local backend).
        let served = entries.into_iter().filter(|(_, n)| matches!(n.kind, FileKind::File | FileKind::Dir));
        Ok(served.map(|(name, n)| DirEntry { name, attrs: n.attrs() }).collect())
    }

    fn has_child(&self, name: &str) -> Result<bool> {
        if !self.node.is_dir {
            return Err(VfsError::NotADirectory);
        }
        Ok(self.node.read().entries.contains_exact(name))
    }

    fn opened_path(&self) -> Option<SharePath> {
        Some(self.path.clone())
    }

    fn set_mode(&self, mode: u32) -> Result<()> {
        self.check_meta_change()?;
        if self.node.kind == FileKind::Symlink {
            // As on the local backend: Linux has no lchmod.
            return Err(VfsError::unsupported());
        }
        let mut st = self.node.write();
        let (uid, _) = crate::creds::current_fs_ids();
        // As chmod(2): the owner or root.
        if uid != 0 && uid != st.uid {
            return Err(VfsError::PermissionDenied);
        }
        st.mode = mode & 0o7777;
        st.changed = SystemTime::now();
        Ok(())
    }

    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.check_meta_change()?;
        let mut st = self.node.write();
        let (me, _) = crate::creds::current_fs_ids();
        // As chown(2), roughly: root changes anything, the owner only the group.
        if me != 0 && (uid.is_some_and(|u| u != st.uid) || (gid.is_some() && me != st.uid)) {
            return Err(VfsError::PermissionDenied);
        }
        st.uid = uid.unwrap_or(st.uid);
        st.gid = gid.unwrap_or(st.gid);
        st.changed = SystemTime::now();
        Ok(())
    }

    fn security_descriptor(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.node.read().security.clone())
    }

    fn set_security_descriptor(&self, sd: &[u8]) -> Result<()> {
        self.check_meta_change()?;
        if sd.len() > crate::MAX_SECURITY_DESCRIPTOR_LEN {
            return Err(VfsError::TooLarge);
        }
        let mut st = self.node.write();
        let old = st.security.as_ref().map_or(0, Vec::len) as u64;
        let want = st.charged - old + sd.len() as u64;
        self.node.recharge(&mut st, want)?;
        st.security = Some(sd.to_vec());
        st.changed = SystemTime::now();
        Ok(())
    }

    fn streams(&self) -> Result<Vec<(String, u64)>> {
        Ok(self.node.read().streams.iter().map(|(k, v)| (k.clone(), v.len() as u64)).collect())
    }

    fn read_stream(&self, name: &str) -> Result<Option<(String, Vec<u8>)>> {
        let st = self.node.read();
        Ok(st.streams.iter().find(|(k, _)| crate::streams::same_name(k, name)).map(|(k, v)| (k.clone(), v.clone())))
    }

    fn write_stream(&self, name: &str, data: Option<&[u8]>) -> Result<()> {
        self.check_meta_change()?;
        crate::streams::check_name(name)?;
        let mut st = self.node.write();
        let stored = st.streams.keys().find(|k| crate::streams::same_name(k, name)).cloned();
        let key = stored.unwrap_or_else(|| name.to_owned());
        let old = st.streams.get(&key).map_or(0, |v| (key.len() + v.len()) as u64);
        let new = data.map_or(0, |d| (key.len() + d.len()) as u64);
        let want = st.charged - old + new;
        self.node.recharge(&mut st, want)?;
        match data {
            Some(d) => st.streams.insert(key, d.to_vec()),
            None => st.streams.remove(&key),
        };
        st.touch_modified(SystemTime::now());
        Ok(())
    }

    fn find_stream(&self, name: &str) -> Result<Option<(String, u64)>> {
        let st = self.node.read();
        Ok(st.streams.iter().find(|(k, _)| crate::streams::same_name(k, name)).map(|(k, v)| (k.clone(), v.len() as u64)))
    }

    fn stream_read_at(&self, stored: &str, buf: &mut [u8], offset: u64) -> Result<usize> {
        let st = self.node.read();
        let data = st.streams.get(stored).map_or(&[][..], |v| v.as_slice());
        let Some(rest) = usize::try_from(offset).ok().and_then(|o| data.get(o..)) else { return Ok(0) };
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }

    /// In place, charged to the capacity before the value grows.
    fn stream_write_at(&self, stored: &str, buf: &[u8], offset: u64) -> Result<usize> {
        self.check_meta_change()?;
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= MAX_OFFSET).ok_or(VfsError::TooLarge)?;
        let mut st = self.node.write();
        let len = st.streams.get(stored).map_or(0, |v| v.len() as u64);
        self.resize_stream(&mut st, stored, len.max(end))?;
        let start = usize::try_from(offset).map_err(|_| VfsError::TooLarge)?;
        if let Some(v) = st.streams.get_mut(stored) {
            v[start..start + buf.len()].copy_from_slice(buf);
        }
        st.touch_modified(SystemTime::now());
        Ok(buf.len())
    }

    fn stream_set_len(&self, stored: &str, len: u64) -> Result<()> {
        self.check_meta_change()?;
        let mut st = self.node.write();
        self.resize_stream(&mut st, stored, len)?;
        st.touch_modified(SystemTime::now());
        Ok(())
    }

    fn extended_attributes(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let st = self.node.read();
        Ok(st.eas.iter().take(crate::MAX_EAS).map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    fn set_extended_attribute(&self, name: &str, value: &[u8]) -> Result<()> {
        self.check_meta_change()?;
        if name.is_empty() || name.len() > 255 || name.contains('\0') {
            return Err(VfsError::InvalidName);
        }
        if value.len() > crate::MAX_EA_VALUE_LEN {
            return Err(VfsError::TooLarge);
        }
        let mut st = self.node.write();
        let old = st.eas.get(name).map_or(0, |v| (name.len() + v.len()) as u64);
        if value.is_empty() {
            if st.eas.remove(name).is_some() {
                let want = st.charged - old;
                self.node.recharge(&mut st, want)?;
                st.changed = SystemTime::now();
            }
            return Ok(());
        }
        if old == 0 && st.eas.len() >= crate::MAX_EAS {
            return Err(VfsError::TooLarge);
        }
        let want = st.charged - old + (name.len() + value.len()) as u64;
        self.node.recharge(&mut st, want)?;
        st.eas.insert(name.to_owned(), value.to_vec());
        st.changed = SystemTime::now();
        Ok(())
    }
}
