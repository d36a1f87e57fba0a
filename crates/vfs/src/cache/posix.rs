//! The cache's side of the POSIX calls (for NFS): exact attributes cached under their own
//! key kind (a symlink's own attributes must never answer an SMB lookup, which follows it,
//! nor the reverse), and the names and link counts that links, removals and renames change
//! dropped as for SMB's calls; listings of every entry as itself likewise under their own
//! kind. Link targets and tokens pass straight through.

use super::own::bits;
use super::state::{self, entry_key, entry_listing_key, exact, fold, parent_of, Data, Found, Missing};
use super::CachedBackend;
use crate::{Backend, DirEntry, FileAttrs, Result, SharePath, VfsError};
use std::sync::Arc;

impl CachedBackend {
    /// See [`Backend::stat_exact`].
    pub(crate) fn posix_stat(&self, path: &SharePath) -> Result<FileAttrs> {
        let folded = fold(path);
        let k = entry_key(&folded);
        let spelled = exact(path);
        match self.core.get(&k, &spelled) {
            Some(Data::Found(f)) => return Ok(f.attrs.clone()),
            Some(Data::Missing(Missing::Name)) => return Err(VfsError::NotFound),
            Some(Data::Missing(Missing::Path)) => return Err(VfsError::PathNotFound),
            _ => {}
        }
        let parent = path.parent();
        let fill = self.core.begin(&k, parent_of(&folded), parent.as_ref().or(Some(path)));
        match self.core.inner.stat_exact(path) {
            Ok(a) => {
                if state::cacheable(&a) {
                    let found = Found { disk: Some(path.clone()), attrs: a.clone(), sd: None, eas: None };
                    self.core.finish(k, &spelled, Data::Found(Arc::new(found)), fill);
                }
                Ok(a)
            }
            Err(e @ (VfsError::NotFound | VfsError::PathNotFound)) => {
                // Exact names: the miss is of this spelling only, which is how it is keyed.
                let m = if matches!(e, VfsError::NotFound) { Missing::Name } else { Missing::Path };
                self.core.finish(k, &spelled, Data::Missing(m), fill);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// See [`Backend::read_dir_exact`]. A listing holding a file with other names
    /// elsewhere is not kept: those change without touching this directory.
    pub(crate) fn posix_read_dir(&self, dir: &SharePath) -> Result<Vec<DirEntry>> {
        let folded = fold(dir);
        let k = entry_listing_key(&folded);
        let spelled = exact(dir);
        if let Some(Data::Listing(l)) = self.core.get(&k, &spelled) {
            return Ok(l.as_ref().clone());
        }
        let fill = self.core.begin(&k, &folded, Some(dir));
        let l = self.core.inner.read_dir_exact(dir)?;
        if l.iter().all(|e| state::cacheable(&e.attrs)) {
            self.core.finish(k, &spelled, Data::Listing(Arc::new(l.clone())), fill);
        }
        Ok(l)
    }

    /// Runs a call that creates the name `at`, then drops what it changes.
    pub(crate) fn creating(&self, at: &SharePath, dir: bool, f: impl FnOnce(&dyn Backend) -> Result<()>) -> Result<()> {
        let folded = fold(at);
        self.core.expect(&folded, bits::CREATE);
        let r = f(self.core.inner.as_ref());
        if r.is_err() {
            self.core.withdraw(&folded, bits::CREATE);
        }
        self.core.changed_name(&folded, dir);
        r
    }

    /// See [`Backend::remove_exact`].
    pub(crate) fn posix_remove(&self, path: &SharePath) -> Result<()> {
        let folded = fold(path);
        let file = self.core.known_file(&folded, &exact(path));
        self.core.expect(&folded, bits::DELETE);
        let r = self.core.inner.remove_exact(path);
        if r.is_err() {
            self.core.withdraw(&folded, bits::DELETE);
        }
        self.core.changed_name(&folded, !file);
        r
    }

    /// See [`Backend::rename_exact`].
    pub(crate) fn posix_rename(&self, from: &SharePath, to: &SharePath) -> Result<()> {
        let (ff, tf) = (fold(from), fold(to));
        let file = self.core.known_file(&ff, &exact(from));
        self.core.expect(&ff, bits::MOVED_FROM);
        self.core.expect(&tf, bits::MOVED_TO);
        let r = self.core.inner.rename_exact(from, to);
        if r.is_err() {
            self.core.withdraw(&ff, bits::MOVED_FROM);
            self.core.withdraw(&tf, bits::MOVED_TO);
        }
        // What it replaced is of the source's kind (POSIX rename never mixes them).
        self.core.changed_name(&ff, !file);
        self.core.changed_name(&tf, !file);
        if r.is_ok() {
            self.core.moved(&ff, to, file);
        }
        r
    }

    /// See [`Backend::link`]: the new name appears, and the file's link count and change
    /// time move under its existing name.
    pub(crate) fn posix_link(&self, existing: &SharePath, new: &SharePath) -> Result<()> {
        let ef = fold(existing);
        self.core.expect(&ef, bits::ATTRS);
        let r = self.creating(new, false, |b| b.link(existing, new));
        self.core.changed_name(&ef, false);
        r
    }
}
