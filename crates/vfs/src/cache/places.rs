//! Where each open handle of a cached share is. A rename through the cache moves the handles
//! at or beneath the old name to the new one, so that a handle that opens its inner handle
//! late (attribute-only opens) finds its file, and a writer's file stays marked as written
//! under its new name.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};

use super::state::{exact, fold};
use crate::SharePath;

const SHARDS: usize = 16;

/// A handle's path: on disk, as spelled and folded; and whether it writes.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub(crate) disk: SharePath,
    pub(crate) exact: String,
    pub(crate) folded: String,
    pub(crate) writer: bool,
}

impl Place {
    pub(crate) fn new(disk: SharePath, writer: bool) -> Place {
        let folded = fold(&disk);
        Place::folded(disk, folded, writer)
    }

    /// A place whose folded path the caller has already computed (every open has).
    pub(crate) fn folded(disk: SharePath, folded: String, writer: bool) -> Place {
        Place { exact: exact(&disk), folded, disk, writer }
    }
}

pub(crate) type PlaceRef = Arc<RwLock<Place>>;

type Row = Vec<Weak<RwLock<Place>>>;

pub(crate) struct Places {
    shards: Vec<Mutex<HashMap<Box<str>, Row>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn read(p: &PlaceRef) -> std::sync::RwLockReadGuard<'_, Place> {
    p.read().unwrap_or_else(|e| e.into_inner())
}

impl Places {
    pub(crate) fn new() -> Self {
        Places { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect() }
    }

    fn shard(&self, k: &str) -> &Mutex<HashMap<Box<str>, Row>> {
        let h = std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(k);
        &self.shards[(h as usize) % SHARDS]
    }

    pub(crate) fn add(&self, p: &PlaceRef) {
        let k = read(p).folded.clone();
        lock(self.shard(&k)).entry(k.into()).or_default().push(Arc::downgrade(p));
    }

    pub(crate) fn remove(&self, p: &PlaceRef) {
        // A rename may move the place between reading its key and locking the shard: look
        // again under the new key.
        for _ in 0..3 {
            let k = read(p).folded.clone();
            let mut m = lock(self.shard(&k));
            let Some(row) = m.get_mut(k.as_str()) else { continue };
            let before = row.len();
            row.retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(p)));
            let found = row.len() < before;
            if row.is_empty() {
                m.remove(k.as_str());
            }
            if found {
                return;
            }
        }
    }

    /// Moves the handles at `from` (folded; and beneath it unless `file`) to `to`; calls
    /// `moved(old, new)` for each.
    pub(crate) fn rename(&self, from: &str, to: &SharePath, file: bool, mut moved: impl FnMut(&Place, &Place)) {
        let under = |k: &str| k == from || (!file && (from.is_empty() || k.starts_with(from) && k.as_bytes().get(from.len()) == Some(&b'/')));
        let mut taken: Vec<Weak<RwLock<Place>>> = Vec::new();
        let shards: Vec<&Mutex<HashMap<Box<str>, Row>>> = if file { vec![self.shard(from)] } else { self.shards.iter().collect() };
        for s in shards {
            let mut m = lock(s);
            let keys: Vec<Box<str>> = m.keys().filter(|k| under(k)).cloned().collect();
            for k in keys {
                taken.extend(m.remove(&k).unwrap_or_default());
            }
        }
        let depth = from.split('/').filter(|c| !c.is_empty()).count();
        for w in taken {
            let Some(p) = w.upgrade() else { continue };
            {
                let mut place = p.write().unwrap_or_else(|e| e.into_inner());
                let rest = place.disk.components().get(depth..).unwrap_or_default().to_vec();
                let mut comps = to.components().to_vec();
                comps.extend(rest);
                let new = Place::new(SharePath::from_components(comps), place.writer);
                moved(&place, &new);
                *place = new;
            }
            self.add(&p);
        }
    }
}
