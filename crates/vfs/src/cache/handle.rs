//! [`CachedHandle`]: a handle of a cached share. It wraps the inner backend's handle, which
//! it may open late (an open that only reads attributes needs none while they are cached)
//! and hand to the deferred-close pool when dropped. Every change through it invalidates
//! what it changes; a handle open for writing keeps its file out of the cache while it is
//! open, so READ and WRITE pass straight through with no cache work at all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::own::bits;
use super::places::{read, Place, PlaceRef};
use super::state::{listing_key, name_key, parent_of, Core, Data, Found};
use crate::{CreateMode, DirEntry, FastPaths, FileAttrs, FileHandle, OpenOptions, Result, SetTimes, SharePath, VfsError};

/// An open file or directory of a [`CachedBackend`](super::CachedBackend).
pub struct CachedHandle {
    pub(crate) core: Arc<Core>,
    pub(crate) inner: OnceLock<Box<dyn FileHandle>>,
    /// Serialises the late open.
    pub(crate) opening: Mutex<()>,
    /// The on-disk path (moved by renames through the cache).
    pub(crate) place: PlaceRef,
    /// The file id the cache knew at open; `None` when not learnt (writers).
    pub(crate) file_id: Option<u64>,
    pub(crate) is_dir: bool,
    pub(crate) opts: OpenOptions,
    /// Registered as a writer of `folded`.
    pub(crate) writer: bool,
    /// May be pooled on drop (nothing sticky was set through it).
    pub(crate) poolable: AtomicBool,
}

impl std::fmt::Debug for CachedHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedHandle")
            .field("path", &read(&self.place).exact)
            .field("opened", &self.inner.get().is_some())
            .field("writer", &self.writer)
            .finish()
    }
}

impl CachedHandle {
    /// Where the handle is now.
    fn at(&self) -> Place {
        read(&self.place).clone()
    }

    /// The inner handle, opened now if it was not: by the on-disk path, and refused when the
    /// name meanwhile leads to another file (renamed or replaced since the cache learnt it).
    fn inner(&self) -> Result<&dyn FileHandle> {
        if let Some(h) = self.inner.get() {
            return Ok(h.as_ref());
        }
        let _g = self.opening.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = self.inner.get() {
            return Ok(h.as_ref());
        }
        let opts =
            OpenOptions { create: CreateMode::OpenExisting, truncate: false, directory: self.is_dir, non_directory: !self.is_dir, ..self.opts };
        let at = self.at();
        let (h, _) = match self.core.inner.open_spelled(&at.disk, opts) {
            // Renamed into a directory spelled otherwise on disk: the backend resolves it.
            Err(VfsError::NotFound | VfsError::PathNotFound) => self.core.inner.open(&at.disk, opts)?,
            r => r?,
        };
        if let Some(id) = self.file_id {
            if h.attrs()?.file_id != id {
                self.core.changed_name(&at.folded, self.is_dir);
                return Err(VfsError::NotFound);
            }
        }
        let _ = self.inner.set(h);
        self.inner.get().map(|h| h.as_ref()).ok_or(VfsError::NotFound)
    }

    /// The cached entry of this handle's file, if it is still this file's.
    fn found(&self) -> Option<Arc<Found>> {
        // Under the place's read lock rather than a copy of it: this runs for every attribute
        // query and every close of a reader (the order place, then table is the rename's too).
        let at = read(&self.place);
        match self.core.get(&name_key(&at.folded), &at.exact)? {
            Data::Found(f) if self.file_id.is_none_or(|id| id == f.attrs.file_id) => Some(f),
            _ => None,
        }
    }

    /// Runs a change through the inner handle; what it changes is dropped from the cache
    /// afterwards (and an event it causes is expected, so it is not reported as outside).
    fn change<T>(&self, f: impl FnOnce(&dyn FileHandle) -> Result<T>) -> Result<T> {
        let folded = read(&self.place).folded.clone();
        self.core.expect(&folded, bits::ATTRS);
        let r = f(self.inner()?);
        self.core.changed_attrs(&folded);
        r
    }

    /// Reads the attributes from the inner handle and caches them.
    fn fill_attrs(&self) -> Result<FileAttrs> {
        let at = self.at();
        let k = name_key(&at.folded);
        let parent = at.disk.parent();
        let fill = self.core.begin(&k, parent_of(&at.folded), parent.as_ref().or(Some(&at.disk)));
        let a = self.inner()?.attrs()?;
        if super::state::cacheable(&a) && super::state::followed_alike(&a) && self.file_id.is_none_or(|id| id == a.file_id) {
            let found = Found { disk: Some(at.disk.clone()), attrs: a.clone(), sd: None, eas: None };
            self.core.finish(k, &at.exact, Data::Found(Arc::new(found)), fill);
        }
        Ok(a)
    }
}

impl Drop for CachedHandle {
    fn drop(&mut self) {
        self.core.places.remove(&self.place);
        let folded = read(&self.place).folded.clone();
        if self.writer {
            self.core.writer_closed(&folded);
            return;
        }
        let Some(h) = self.inner.take() else { return };
        let Some(id) = self.file_id else { return };
        // Pooled only while the cache still maps the name to this file.
        // Attribute-only opens never take from the pool (they open nothing at all).
        if self.opts.read && self.poolable.load(Ordering::Relaxed) && self.found().is_some_and(|f| f.attrs.file_id == id) {
            self.core.pool.put(&folded, h, id, self.opts.read, self.opts.write);
        }
    }
}

impl FileHandle for CachedHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.inner()?.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<usize> {
        // A writer's file is not cached while it is open: nothing to invalidate here.
        if !self.writer {
            return self.change(|h| h.write_at(buf, offset));
        }
        self.inner()?.write_at(buf, offset)
    }

    fn size(&self) -> Result<u64> {
        match self.inner.get() {
            Some(h) => h.size(),
            None => Ok(self.attrs()?.size),
        }
    }

    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        // Writes through fast paths need write access: such a handle is a writer, whose
        // file is never cached while it is open.
        self.inner.get().and_then(|h| h.fast_paths())
    }

    fn open_now(&self) -> Result<()> {
        self.inner()?.open_now()
    }

    fn attrs(&self) -> Result<FileAttrs> {
        if self.writer {
            return self.inner()?.attrs();
        }
        match self.found() {
            Some(f) => Ok(f.attrs.clone()),
            None => self.fill_attrs(),
        }
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.change(|h| h.set_len(len))
    }

    fn allocate(&self, len: u64) -> Result<()> {
        self.change(|h| h.allocate(len))
    }

    fn sync(&self) -> Result<()> {
        self.inner()?.sync()
    }

    fn set_times(&self, times: SetTimes) -> Result<()> {
        // A change time set through a handle sticks to it: it must not serve another open.
        self.poolable.store(false, Ordering::Relaxed);
        self.change(|h| h.set_times(times))
    }

    fn set_dos_attributes(&self, attrs: u32) -> Result<()> {
        self.change(|h| h.set_dos_attributes(attrs))
    }

    fn set_sparse(&self, sparse: bool) -> Result<()> {
        self.change(|h| h.set_sparse(sparse))
    }

    fn zero_range(&self, offset: u64, len: u64, deallocate: bool) -> Result<()> {
        // As `write_at`: a writer's file is not cached while it is open.
        if !self.writer {
            return self.change(|h| h.zero_range(offset, len, deallocate));
        }
        self.inner()?.zero_range(offset, len, deallocate)
    }

    fn allocated_ranges(&self, offset: u64, len: u64, max: usize) -> Result<Vec<(u64, u64)>> {
        self.inner()?.allocated_ranges(offset, len, max)
    }

    fn read_dir(&self) -> Result<Vec<DirEntry>> {
        if !self.is_dir {
            return Err(VfsError::NotADirectory);
        }
        let at = self.at();
        let k = listing_key(&at.folded);
        if let Some(Data::Listing(l)) = self.core.get(&k, &at.exact) {
            return Ok(l.as_ref().clone());
        }
        let fill = self.core.begin(&k, &at.folded, Some(&at.disk));
        let l = self.inner()?.read_dir()?;
        self.core.finish(k, &at.exact, Data::Listing(Arc::new(l.clone())), fill);
        Ok(l)
    }

    fn has_child(&self, name: &str) -> Result<bool> {
        let at = self.at();
        if let Some(Data::Listing(l)) = self.core.get(&listing_key(&at.folded), &at.exact) {
            return Ok(l.binary_search_by(|e| e.name.as_bytes().cmp(name.as_bytes())).is_ok());
        }
        self.inner()?.has_child(name)
    }

    fn opened_path(&self) -> Option<SharePath> {
        Some(read(&self.place).disk.clone())
    }

    fn streams(&self) -> Result<Vec<(String, u64)>> {
        self.inner()?.streams()
    }

    fn read_stream(&self, name: &str) -> Result<Option<(String, Vec<u8>)>> {
        self.inner()?.read_stream(name)
    }

    fn write_stream(&self, name: &str, data: Option<&[u8]>) -> Result<()> {
        self.change(|h| h.write_stream(name, data))
    }

    fn find_stream(&self, name: &str) -> Result<Option<(String, u64)>> {
        self.inner()?.find_stream(name)
    }

    fn stream_read_at(&self, stored: &str, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.inner()?.stream_read_at(stored, buf, offset)
    }

    fn stream_write_at(&self, stored: &str, buf: &[u8], offset: u64) -> Result<usize> {
        self.change(|h| h.stream_write_at(stored, buf, offset))
    }

    fn stream_set_len(&self, stored: &str, len: u64) -> Result<()> {
        self.change(|h| h.stream_set_len(stored, len))
    }

    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> Result<()> {
        self.change(|h| h.rename_stream(from, to, replace))
    }

    fn security_descriptor(&self) -> Result<Option<Vec<u8>>> {
        if let Some(sd) = self.found().and_then(|f| f.sd.clone()) {
            return Ok(sd.map(|s| s.to_vec()));
        }
        let at = self.at();
        let k = name_key(&at.folded);
        let t = self.core.table.ticket(&k);
        let sd = self.inner()?.security_descriptor()?;
        let shared: Option<Arc<[u8]>> = sd.as_deref().map(Arc::from);
        self.core.amend(&k, &at.exact, t, |f| Found { sd: Some(shared), ..f.clone() });
        Ok(sd)
    }

    fn set_security_descriptor(&self, sd: &[u8]) -> Result<()> {
        self.change(|h| h.set_security_descriptor(sd))
    }

    fn extended_attributes(&self) -> Result<Vec<(String, Vec<u8>)>> {
        if let Some(eas) = self.found().and_then(|f| f.eas.clone()) {
            return Ok(eas.as_ref().clone());
        }
        let at = self.at();
        let k = name_key(&at.folded);
        let t = self.core.table.ticket(&k);
        let eas = self.inner()?.extended_attributes()?;
        let shared = Arc::new(eas.clone());
        self.core.amend(&k, &at.exact, t, |f| Found { eas: Some(shared), ..f.clone() });
        Ok(eas)
    }

    fn set_extended_attribute(&self, name: &str, value: &[u8]) -> Result<()> {
        self.change(|h| h.set_extended_attribute(name, value))
    }

    fn set_mode(&self, mode: u32) -> Result<()> {
        self.change(|h| h.set_mode(mode))
    }

    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.change(|h| h.set_owner(uid, gid))
    }
}
