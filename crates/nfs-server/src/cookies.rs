//! READDIR cookies that survive removals. A cookie is a hash of the entry's name (listings
//! are sorted by name, so the next page starts after that name); the name behind the last
//! cookie of each page is remembered, so a listing resumes correctly even when the client
//! removed that entry before asking for the next page (what `rm -rf` does).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// Cookies 0 (start), 1 (`.`) and 2 (`..`) are positions; names hash above them.
pub const FIRST_NAME_COOKIE: u64 = 3;
/// Most remembered names per export; when full the map starts over.
const CAPACITY: usize = 65_536;

/// The cookie of entry `name` (stable across calls and restarts of the same build).
pub fn cookie(name: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    FIRST_NAME_COOKIE + (h.finish() >> 2)
}

/// Names behind the cookies that ended pages, per directory (by file id).
#[derive(Debug, Default)]
pub struct Cookies {
    map: Mutex<HashMap<(u64, u64), String>>,
}

impl Cookies {
    pub fn remember(&self, dir: u64, name: &str) {
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= CAPACITY {
            m.clear();
        }
        m.insert((dir, cookie(name)), name.to_string());
    }

    pub fn name(&self, dir: u64, cookie: u64) -> Option<String> {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).get(&(dir, cookie)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_above_the_positions_and_remembered() {
        assert!(cookie("") >= FIRST_NAME_COOKIE && cookie("a") >= FIRST_NAME_COOKIE);
        assert_ne!(cookie("a"), cookie("b"));
        let c = Cookies::default();
        c.remember(7, "n0001");
        assert_eq!(c.name(7, cookie("n0001")).as_deref(), Some("n0001"));
        assert_eq!(c.name(8, cookie("n0001")), None);
    }
}
