//! Where handles point: a bounded map from backend token to the path and identity of the
//! file it named when last seen, so that a call on a known handle costs a (cached) stat of
//! the path instead of `open_by_handle_at` and a walk back from the inode. An entry is used
//! only while the file at the path still has the same file id and creation time: a file
//! renamed away, removed, or replaced by another one (even one that got the same inode
//! number back) fails that check, and the token is resolved by the backend again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use braid_vfs::{FileAttrs, SharePath};

/// Most tokens remembered per export; when full the map starts over.
const CAPACITY: usize = 65_536;

#[derive(Debug, Clone)]
struct Seen {
    path: SharePath,
    file_id: u64,
    created: SystemTime,
}

/// Token to path, per export.
#[derive(Debug, Default)]
pub struct Paths {
    map: Mutex<HashMap<Vec<u8>, Seen>>,
}

impl Paths {
    /// Remembers that `token` names the file at `path` with attributes `a`.
    pub fn remember(&self, token: &[u8], path: &SharePath, a: &FileAttrs) {
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= CAPACITY && !m.contains_key(token) {
            m.clear();
        }
        m.insert(token.to_vec(), Seen { path: path.clone(), file_id: a.file_id, created: a.created });
    }

    /// The path `token` was last seen at, to be confirmed by a stat of that path.
    pub fn guess(&self, token: &[u8]) -> Option<(SharePath, u64, SystemTime)> {
        let m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        m.get(token).map(|s| (s.path.clone(), s.file_id, s.created))
    }

    /// Forgets `token` (its guess turned out wrong).
    pub fn forget(&self, token: &[u8]) {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).remove(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_and_forgets() {
        let p = Paths::default();
        let a = braid_vfs::MemoryBackend::new(1 << 20, false);
        let attrs = braid_vfs::Backend::stat_exact(&a, &SharePath::root()).unwrap();
        assert!(p.guess(b"t").is_none());
        p.remember(b"t", &SharePath::root(), &attrs);
        assert_eq!(p.guess(b"t").unwrap().1, attrs.file_id);
        p.forget(b"t");
        assert!(p.guess(b"t").is_none());
    }
}
