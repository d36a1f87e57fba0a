//! A memory directory's entries: by stored name for listings, by case-folded name for
//! lookups, so neither a listing nor a miss scans the directory.

use super::node::Node;
use crate::local::case::fold_char;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The entries of one directory.
#[derive(Debug, Default)]
pub(crate) struct Entries {
    /// By stored name, in byte order (the order of listings).
    by_name: BTreeMap<String, Arc<Node>>,
    /// Folded name to stored name. The backend never lets two spellings of one name exist
    /// side by side (a create finds the other spelling, a rename replaces it), so a folded
    /// name has one stored name.
    folded: HashMap<String, String>,
    /// How many entries are directories (for the directory's link count).
    subdirs: usize,
}

/// `name` under simple case folding (see [`fold_char`]).
fn fold(name: &str) -> String {
    name.chars().map(fold_char).collect()
}

impl Entries {
    /// The entry matching `name` case-insensitively, with its stored spelling.
    pub(crate) fn find(&self, name: &str) -> Option<(String, Arc<Node>)> {
        if let Some(n) = self.by_name.get(name) {
            return Some((name.to_owned(), Arc::clone(n)));
        }
        let stored = self.folded.get(&fold(name))?;
        self.by_name.get(stored).map(|n| (stored.clone(), Arc::clone(n)))
    }

    /// The entry stored with exactly this spelling.
    pub(crate) fn get_exact(&self, name: &str) -> Option<Arc<Node>> {
        self.by_name.get(name).cloned()
    }

    /// Whether an entry is stored with exactly this spelling.
    pub(crate) fn contains_exact(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Adds `node` as `name`, replacing an entry with another spelling of the name (which
    /// callers remove first; kept here so the two maps can never disagree).
    pub(crate) fn insert(&mut self, name: String, node: Arc<Node>) {
        if let Some(old) = self.folded.insert(fold(&name), name.clone()) {
            debug_assert_eq!(old, name, "two spellings of one name");
            self.remove_stored(&old);
        }
        self.subdirs += usize::from(node.is_dir);
        if let Some(old) = self.by_name.insert(name, node) {
            self.subdirs -= usize::from(old.is_dir);
        }
    }

    /// Removes the entry stored as exactly `name`.
    pub(crate) fn remove(&mut self, name: &str) -> Option<Arc<Node>> {
        let n = self.remove_stored(name)?;
        self.folded.remove(&fold(name));
        Some(n)
    }

    fn remove_stored(&mut self, name: &str) -> Option<Arc<Node>> {
        let n = self.by_name.remove(name)?;
        self.subdirs -= usize::from(n.is_dir);
        Some(n)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// How many entries are directories.
    pub(crate) fn subdirs(&self) -> usize {
        self.subdirs
    }

    /// Every entry, in byte order of the stored names.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &Arc<Node>)> {
        self.by_name.iter()
    }

    /// Empties the directory, returning its nodes.
    pub(crate) fn take_all(&mut self) -> Vec<Arc<Node>> {
        self.folded.clear();
        self.subdirs = 0;
        std::mem::take(&mut self.by_name).into_values().collect()
    }
}
