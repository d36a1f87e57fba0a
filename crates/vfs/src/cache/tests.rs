//! The cache's rules on a real share (tmpfs when there is one): what each change
//! invalidates, the bounds, the ttl, outside changes and the own-change rule, deferred close
//! and lazy attribute opens.

use super::*;
use crate::{what, Change, ChangeKind, LocalBackend};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

struct Share {
    dir: PathBuf,
    cache: CachedBackend,
    seen: Arc<Mutex<Vec<Change>>>,
}

impl Drop for Share {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A share on a scratch directory; `watch`: with events (else ttl-bound), `cfg` its bounds.
fn share(watch: bool, cfg: CacheConfig) -> Share {
    static N: AtomicU32 = AtomicU32::new(0);
    let base = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let dir = base.join(format!("braid-cache-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let inner: Arc<dyn Backend> = Arc::new(LocalBackend::new(&dir, false).unwrap());
    let cache = CachedBackend::new(inner, watch.then_some(dir.as_path()), cfg);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let delivery = cache.subscribe(Arc::new(move |c: &Change| s2.lock().unwrap().push(c.clone())));
    if watch && watch::reports_events(&dir) {
        assert_eq!(delivery, Delivery::Events);
    } else if !watch {
        assert_eq!(delivery, Delivery::Bounded(cfg.ttl));
    }
    Share { dir, cache, seen }
}

fn p(s: &str) -> SharePath {
    SharePath::from_smb(s).unwrap()
}

fn rw(create: CreateMode) -> OpenOptions {
    OpenOptions { read: true, write: true, create, truncate: false, directory: false, non_directory: false }
}

fn attrs_only() -> OpenOptions {
    OpenOptions { read: false, write: false, ..rw(CreateMode::OpenExisting) }
}

fn read_only() -> OpenOptions {
    OpenOptions { write: false, ..rw(CreateMode::OpenExisting) }
}

fn put(s: &Share, name: &str, data: &[u8]) {
    let (h, _) = s.cache.open(&p(name), rw(CreateMode::OpenOrCreate)).unwrap();
    h.set_len(0).unwrap();
    h.write_at(data, 0).unwrap();
}

/// Polls `f` until it holds or `limit` passes.
fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn hits(s: &Share) -> u64 {
    s.cache.cache_stats().unwrap().hits
}

#[test]
fn changes_through_the_cache_invalidate_names_listings_and_misses() {
    let s = share(false, CacheConfig { ttl: Duration::from_secs(60), ..Default::default() });
    let c = &s.cache;
    // A miss is remembered, and forgotten when the name is created.
    assert!(matches!(c.stat(&p("a.txt")), Err(VfsError::NotFound)));
    let h0 = hits(&s);
    assert!(matches!(c.stat(&p("a.txt")), Err(VfsError::NotFound)));
    assert_eq!(hits(&s), h0 + 1);
    put(&s, "a.txt", b"hello");
    assert_eq!(c.stat(&p("A.TXT")).unwrap().size, 5);
    // The listing is cached, and a write through a handle shows in it after the close.
    let (d, _) = c.open(&SharePath::root(), OpenOptions { directory: true, ..read_only() }).unwrap();
    assert_eq!(d.read_dir().unwrap().len(), 1);
    put(&s, "a.txt", b"hello world");
    assert_eq!(d.read_dir().unwrap()[0].attrs.size, 11);
    assert_eq!(c.stat(&p("a.txt")).unwrap().size, 11);
    // Attribute changes through a handle.
    let (h, _) = c.open(&p("a.txt"), attrs_only()).unwrap();
    h.set_dos_attributes(crate::dos::HIDDEN).unwrap();
    assert_ne!(h.attrs().unwrap().dos_attributes & crate::dos::HIDDEN, 0);
    assert_ne!(c.stat(&p("a.txt")).unwrap().dos_attributes & crate::dos::HIDDEN, 0);
    drop(h);
    // Rename and remove.
    c.rename(&p("a.txt"), &p("b.txt"), false).unwrap();
    assert!(matches!(c.stat(&p("a.txt")), Err(VfsError::NotFound)));
    assert_eq!(c.stat(&p("b.txt")).unwrap().size, 11);
    assert_eq!(d.read_dir().unwrap()[0].name, "b.txt");
    c.remove(&p("b.txt")).unwrap();
    assert!(matches!(c.stat(&p("b.txt")), Err(VfsError::NotFound)));
    assert!(d.read_dir().unwrap().is_empty());
    // A directory renamed takes what was cached beneath it along.
    let made = c.open(&p("d1"), OpenOptions { read: false, write: false, directory: true, ..rw(CreateMode::CreateNew) });
    assert!(made.is_ok());
    put(&s, "d1\\f", b"x");
    assert_eq!(c.stat(&p("d1\\f")).unwrap().size, 1);
    c.rename(&p("d1"), &p("d2"), false).unwrap();
    assert!(matches!(c.stat(&p("d1\\f")), Err(VfsError::PathNotFound)));
    assert_eq!(c.stat(&p("d2\\f")).unwrap().size, 1);
}

#[test]
fn bounded_by_entries_and_bytes() {
    let s = share(false, CacheConfig { max_entries: 64, max_bytes: 1 << 30, ttl: Duration::from_secs(60), ..Default::default() });
    for i in 0..500 {
        let _ = s.cache.stat(&p(&format!("missing{i}")));
    }
    let st = s.cache.cache_stats().unwrap();
    assert!(st.entries <= 64, "{st:?}");
    // 32 shards of 1 KiB at least: a byte bound far below what 500 listings would take.
    let s = share(false, CacheConfig { max_entries: 100_000, max_bytes: 64 << 10, ttl: Duration::from_secs(60), ..Default::default() });
    for i in 0..200 {
        std::fs::create_dir(s.dir.join(format!("d{i}"))).unwrap();
        for j in 0..8 {
            std::fs::write(s.dir.join(format!("d{i}/some-longer-file-name-{j}")), b"").unwrap();
        }
        let (d, _) = s.cache.open(&p(&format!("d{i}")), OpenOptions { directory: true, ..read_only() }).unwrap();
        assert_eq!(d.read_dir().unwrap().len(), 8);
    }
    let st = s.cache.cache_stats().unwrap();
    assert!(st.bytes <= 64 << 10, "{st:?}");
    // The byte bound is the table's: a listing far above a shard's share is still kept.
    let s = share(false, CacheConfig { max_bytes: 1 << 20, ttl: Duration::from_secs(60), ..Default::default() });
    std::fs::create_dir(s.dir.join("big")).unwrap();
    for j in 0..1000 {
        std::fs::write(s.dir.join(format!("big/entry-{j:05}")), b"").unwrap();
    }
    let (d, _) = s.cache.open(&p("big"), OpenOptions { directory: true, ..read_only() }).unwrap();
    assert_eq!(d.read_dir().unwrap().len(), 1000);
    let h0 = hits(&s);
    assert_eq!(d.read_dir().unwrap().len(), 1000);
    assert_eq!(hits(&s), h0 + 1);
    assert!(s.cache.cache_stats().unwrap().bytes > (1 << 20) / 32);
}

#[test]
fn without_events_data_lives_for_the_ttl_only() {
    let ttl = Duration::from_millis(300);
    let s = share(false, CacheConfig { ttl, ..Default::default() });
    std::fs::write(s.dir.join("f"), b"1").unwrap();
    let t0 = Instant::now();
    assert_eq!(s.cache.stat(&p("f")).unwrap().size, 1);
    std::fs::write(s.dir.join("f"), b"12").unwrap();
    let size = s.cache.stat(&p("f")).unwrap().size;
    // Possibly stale before the ttl, never after it.
    if t0.elapsed() < ttl {
        assert_eq!(size, 1);
    }
    std::thread::sleep(ttl);
    assert_eq!(s.cache.stat(&p("f")).unwrap().size, 2);
    std::fs::remove_file(s.dir.join("f")).unwrap();
    std::thread::sleep(ttl);
    assert!(matches!(s.cache.stat(&p("f")), Err(VfsError::NotFound)));
    assert!(s.seen.lock().unwrap().is_empty(), "no events without a watcher");
}

#[test]
fn outside_changes_invalidate_and_are_reported_own_ones_are_not() {
    let s = share(true, CacheConfig { ttl: Duration::from_secs(600), ..Default::default() });
    if s.cache.delivery() != Delivery::Events {
        return; // Not a file system that reports changes: nothing to test here.
    }
    let c = &s.cache;
    // Through Braid: created, written, attributes set, renamed, removed. None is reported.
    put(&s, "own.txt", b"abc");
    let (h, _) = c.open(&p("own.txt"), attrs_only()).unwrap();
    h.set_dos_attributes(crate::dos::ARCHIVE).unwrap();
    drop(h);
    c.rename(&p("own.txt"), &p("own2.txt"), false).unwrap();
    c.remove(&p("own2.txt")).unwrap();
    // Outside: a file appears, grows, changes mode, is renamed and removed.
    assert!(matches!(c.stat(&p("out.txt")), Err(VfsError::NotFound)));
    std::fs::write(s.dir.join("out.txt"), b"1").unwrap();
    assert!(eventually(Duration::from_secs(2), || c.stat(&p("out.txt")).is_ok_and(|a| a.size == 1)));
    std::fs::write(s.dir.join("out.txt"), b"1234").unwrap();
    assert!(eventually(Duration::from_secs(2), || c.stat(&p("out.txt")).is_ok_and(|a| a.size == 4)));
    std::fs::rename(s.dir.join("out.txt"), s.dir.join("moved.txt")).unwrap();
    assert!(eventually(Duration::from_secs(2), || matches!(c.stat(&p("out.txt")), Err(VfsError::NotFound))));
    std::fs::remove_file(s.dir.join("moved.txt")).unwrap();
    assert!(eventually(Duration::from_secs(2), || matches!(c.stat(&p("moved.txt")), Err(VfsError::NotFound))));
    let names =
        |kind: ChangeKind| -> Vec<String> { s.seen.lock().unwrap().iter().filter(|c| c.kind == kind).map(|c| c.path.to_smb_string()).collect() };
    assert!(eventually(Duration::from_secs(2), || names(ChangeKind::Removed).contains(&"moved.txt".to_string())));
    let seen = s.seen.lock().unwrap().clone();
    assert!(seen.iter().all(|c| !c.path.to_smb_string().starts_with("own")), "own changes reported: {seen:?}");
    assert!(names(ChangeKind::Added).contains(&"out.txt".to_string()), "{seen:?}");
    assert!(names(ChangeKind::RenamedFrom).contains(&"out.txt".to_string()), "{seen:?}");
    assert!(names(ChangeKind::RenamedTo).contains(&"moved.txt".to_string()), "{seen:?}");
    assert!(seen.iter().any(|c| c.kind == ChangeKind::Modified && c.what & what::SIZE != 0), "{seen:?}");
}

#[test]
fn closed_handles_are_reused_until_their_name_changes() {
    let s = share(true, CacheConfig::default());
    put(&s, "f", b"data");
    let c = &s.cache;
    let (h, _) = c.open(&p("f"), read_only()).unwrap();
    assert_eq!(h.attrs().unwrap().size, 4);
    drop(h);
    assert_eq!(c.core.pool.len(), 1);
    let (h, _) = c.open(&p("f"), read_only()).unwrap();
    assert_eq!(c.core.pool.len(), 0, "reused");
    let mut buf = [0u8; 8];
    assert_eq!(h.read_at(&mut buf, 0).unwrap(), 4);
    drop(h);
    assert_eq!(c.core.pool.len(), 1);
    // A file put in its place must not be read through the old handle.
    c.remove(&p("f")).unwrap();
    assert_eq!(c.core.pool.len(), 0);
    put(&s, "f", b"new!!");
    let (h, _) = c.open(&p("f"), read_only()).unwrap();
    assert_eq!(h.read_at(&mut buf, 0).unwrap(), 5);
}

#[test]
fn attribute_only_opens_open_nothing_and_never_reach_another_file() {
    let s = share(false, CacheConfig { ttl: Duration::from_secs(60), ..Default::default() });
    put(&s, "f", b"data");
    let c = &s.cache;
    // The first open learns the on-disk name; the second opens nothing.
    drop(c.open(&p("f"), attrs_only()).unwrap());
    let (h, _) = c.open(&p("f"), attrs_only()).unwrap();
    assert!(c.core.pool.len() == 0 && format!("{h:?}").contains("opened: false"), "{h:?}");
    let h0 = hits(&s);
    assert_eq!(h.attrs().unwrap().size, 4);
    assert!(hits(&s) > h0);
    // Replaced behind Braid's back (no events here): the late open sees another file id.
    std::fs::write(s.dir.join("g"), b"other").unwrap();
    std::fs::rename(s.dir.join("g"), s.dir.join("f")).unwrap();
    assert!(matches!(h.set_times(crate::SetTimes::default()), Err(VfsError::NotFound)));
    // The cache forgot the name: the next look finds the new file.
    assert_eq!(c.stat(&p("f")).unwrap().size, 5);
}

#[test]
fn a_watched_directory_reports_outside_changes_without_anything_cached() {
    let s = share(true, CacheConfig::default());
    if s.cache.delivery() != Delivery::Events {
        return;
    }
    std::fs::create_dir(s.dir.join("w")).unwrap();
    std::fs::write(s.dir.join("w").join("before"), b"").unwrap();
    s.cache.watch_dir(&p("W"));
    std::fs::write(s.dir.join("w").join("x"), b"").unwrap();
    let added = || s.seen.lock().unwrap().iter().any(|c| c.kind == ChangeKind::Added && c.path.to_smb_string() == "w\\x");
    assert!(eventually(Duration::from_secs(2), added), "{:?}", s.seen.lock().unwrap());
    assert!(!s.seen.lock().unwrap().iter().any(|c| c.path.to_smb_string() == "w\\before"));
}

#[test]
fn handles_follow_renames_through_the_cache() {
    let s = share(true, CacheConfig { ttl: Duration::from_secs(60), ..Default::default() });
    let c = &s.cache;
    std::fs::create_dir(s.dir.join("d")).unwrap();
    put(&s, "d\\f", b"data");
    drop(c.open(&p("d\\f"), attrs_only()).unwrap());
    // An attribute-only handle, renamed (and its directory too) before it opens anything.
    let (lazy, _) = c.open(&p("d\\f"), attrs_only()).unwrap();
    c.rename(&p("d\\f"), &p("d\\g"), false).unwrap();
    c.rename(&p("d"), &p("e"), false).unwrap();
    assert_eq!(lazy.opened_path().unwrap().to_smb_string(), "e\\g");
    lazy.set_dos_attributes(crate::dos::HIDDEN).unwrap();
    assert_ne!(c.stat(&p("e\\g")).unwrap().dos_attributes & crate::dos::HIDDEN, 0);
    // A writer renamed keeps its file out of the cache under the new name.
    let (w, _) = c.open(&p("e\\g"), rw(CreateMode::OpenExisting)).unwrap();
    c.rename(&p("e\\g"), &p("e\\h"), false).unwrap();
    assert_eq!(c.stat(&p("e\\h")).unwrap().size, 4);
    w.write_at(b"0123456789", 0).unwrap();
    assert_eq!(c.stat(&p("e\\h")).unwrap().size, 10);
    drop(w);
    assert_eq!(c.stat(&p("e\\h")).unwrap().size, 10);
}

#[test]
fn exact_attributes_are_cached_apart_and_dropped_by_every_change() {
    let s = share(true, CacheConfig { ttl: Duration::from_secs(60), ..Default::default() });
    let c = &s.cache;
    put(&s, "t", b"data");
    c.symlink("t", &p("l")).unwrap();
    // An SMB lookup follows the link; the exact one never does, whichever came first.
    assert_eq!(c.stat(&p("l")).unwrap().posix.kind, crate::FileKind::File);
    assert_eq!(c.stat_exact(&p("l")).unwrap().posix.kind, crate::FileKind::Symlink);
    assert_eq!(c.stat(&p("l")).unwrap().posix.kind, crate::FileKind::File);
    let h0 = hits(&s);
    assert_eq!(c.stat_exact(&p("l")).unwrap().posix.kind, crate::FileKind::Symlink);
    assert_eq!(hits(&s), h0 + 1);
    // Misses are exact: another spelling's entry never answers.
    assert!(matches!(c.stat_exact(&p("T")), Err(VfsError::NotFound)));
    assert!(c.stat(&p("T")).is_ok());
    assert!(matches!(c.stat_exact(&p("T")), Err(VfsError::NotFound)));
    // Changes through the cache: mode, link count, removal, rename.
    assert_eq!(c.stat_exact(&p("t")).unwrap().nlink, 1);
    let (h, _) = c.open_exact(&p("t"), attrs_only()).unwrap();
    h.set_mode(0o604).unwrap();
    assert_eq!(c.stat_exact(&p("t")).unwrap().posix.mode, 0o604);
    drop(h);
    c.link(&p("t"), &p("t2")).unwrap();
    assert_eq!(c.stat_exact(&p("t")).unwrap().nlink, 2);
    c.remove_exact(&p("t2")).unwrap();
    assert!(matches!(c.stat_exact(&p("t2")), Err(VfsError::NotFound)));
    assert_eq!(c.stat_exact(&p("t")).unwrap().nlink, 1);
    c.mkdir(&p("d"), 0o700).unwrap();
    assert!(matches!(c.stat_exact(&p("d\\x")), Err(VfsError::NotFound)));
    c.rename_exact(&p("t"), &p("d\\x")).unwrap();
    assert_eq!(c.stat_exact(&p("d\\x")).unwrap().size, 4);
    assert!(matches!(c.stat_exact(&p("t")), Err(VfsError::NotFound)));
    // An outside change is learnt from the watcher.
    let before = c.stat_exact(&p("d\\x")).unwrap().posix.mode;
    assert_eq!(before, 0o604);
    std::fs::set_permissions(s.dir.join("d/x"), std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    assert!(eventually(Duration::from_secs(5), || c.stat_exact(&p("d\\x")).unwrap().posix.mode == 0o640));
    std::fs::write(s.dir.join("d/new"), b"x").unwrap();
    assert!(eventually(Duration::from_secs(5), || c.stat_exact(&p("d\\new")).is_ok()));
}

#[test]
fn exact_listings_are_cached_and_dropped_by_every_change() {
    let s = share(true, CacheConfig { ttl: Duration::from_secs(60), ..Default::default() });
    let c = &s.cache;
    let list = |dir: &str| -> Vec<(String, u32, u64)> {
        c.read_dir_exact(&p(dir)).unwrap().into_iter().map(|e| (e.name, e.attrs.posix.mode, e.attrs.size)).collect()
    };
    c.mkdir(&p("d"), 0o755).unwrap();
    put(&s, "d\\f", b"1");
    c.symlink("f", &p("d\\l")).unwrap();
    let first = list("d");
    assert_eq!(first.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["f", "l"]);
    let h0 = hits(&s);
    assert_eq!(list("d"), first);
    assert_eq!(hits(&s), h0 + 1);
    // Through the cache: a mode, a write, a new name, a removal.
    let (h, _) = c.open_exact(&p("d\\f"), rw(CreateMode::OpenExisting)).unwrap();
    h.set_mode(0o600).unwrap();
    h.write_at(b"123", 0).unwrap();
    drop(h);
    assert_eq!(list("d")[0], ("f".to_string(), 0o600, 3));
    c.mknod(&p("d\\p"), crate::FileKind::Fifo, 0o644, (0, 0)).unwrap();
    assert_eq!(list("d").len(), 3);
    c.remove_exact(&p("d\\l")).unwrap();
    assert_eq!(list("d").len(), 2);
    // A file with another name elsewhere keeps the listing out of the cache.
    c.link(&p("d\\f"), &p("f2")).unwrap();
    let _ = list("d");
    let h1 = hits(&s);
    let _ = list("d");
    assert_eq!(hits(&s), h1);
    c.remove_exact(&p("f2")).unwrap();
    // Outside changes, learnt from the watcher.
    let _ = list("d");
    std::fs::write(s.dir.join("d/out"), b"x").unwrap();
    assert!(eventually(Duration::from_secs(5), || list("d").len() == 3));
    std::fs::set_permissions(s.dir.join("d/out"), std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    assert!(eventually(Duration::from_secs(5), || list("d").iter().any(|e| e.0 == "out" && e.1 == 0o640)));
}

#[test]
fn a_directory_s_own_attributes_follow_the_names_made_and_removed_in_it() {
    // Every kind of share: with events, and ttl-bound with a long ttl (only Braid's own
    // changes can refresh it then).
    for watch in [true, false] {
        let s = share(watch, CacheConfig { ttl: Duration::from_secs(60), ..Default::default() });
        let c = &s.cache;
        c.mkdir(&p("d"), 0o755).unwrap();
        let dir = |c: &CachedBackend| c.stat_exact(&p("d")).unwrap();
        let (before, root_before) = (dir(c), c.stat_exact(&p("")).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        c.mkdir(&p("d\\sub"), 0o755).unwrap();
        let after = dir(c);
        assert!(after.modified > before.modified, "mtime after mkdir (watch {watch})");
        assert_eq!(after.nlink, before.nlink + 1, "link count after mkdir (watch {watch})");
        std::thread::sleep(Duration::from_millis(20));
        c.symlink("sub", &p("d\\l")).unwrap();
        assert!(dir(c).modified > after.modified, "mtime after symlink (watch {watch})");
        let t = dir(c).modified;
        std::thread::sleep(Duration::from_millis(20));
        c.remove_exact(&p("d\\l")).unwrap();
        assert!(dir(c).modified > t, "mtime after remove (watch {watch})");
        // The grandparent's listing carries d's attributes too.
        let listed = c.read_dir_exact(&p("")).unwrap().into_iter().find(|e| e.name == "d").unwrap();
        assert_eq!(listed.attrs.modified, dir(c).modified);
        assert!(c.stat_exact(&p("")).unwrap().nlink > root_before.nlink - 1);
    }
}
