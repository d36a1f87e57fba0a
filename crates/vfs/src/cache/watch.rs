//! Outside changes on local file systems: one inotify watch per directory the cache holds
//! something of (or a client watches), read by one thread per share that invalidates what
//! changed and reports each change that Braid did not make itself to the subscribed sink.
//!
//! inotify rather than fanotify: fanotify's directory-entry events need CAP_SYS_ADMIN and
//! mark whole file systems or mounts (every change on the disk, not just the share's);
//! inotify needs no privilege and watches exactly the directories in use.

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, Weak};
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use super::own::bits;
use super::state::Core;
use crate::{what, Change, ChangeKind, SharePath};

/// The events a directory is watched for.
const MASK: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::EXCL_UNLINK);

/// How often the thread looks up from waiting (lingering handles expire, a dropped share
/// ends it).
const TICK: Duration = Duration::from_millis(250);

/// How long events may gather before they are read (their delivery's added latency).
const GATHER: Duration = Duration::from_millis(5);

/// File systems whose changes inotify reports wherever they are made (the kernel makes
/// them all). FUSE, NFS, CIFS, Ceph, 9p, overlay (lower layers) and the like do not.
pub(crate) fn reports_events(root: &Path) -> bool {
    const LOCAL: [i64; 9] = [
        0x0102_1994,            // tmpfs
        0x8584_58f6,            // ramfs
        0xef53,                 // ext2/3/4
        0x5846_5342,            // xfs
        0x9123_683e_u32 as i64, // btrfs
        0xf2f5_2010_u32 as i64, // f2fs
        0x2fc1_2fc1,            // zfs
        0x3153_464a,            // jfs
        0x5265_4973,            // reiserfs
    ];
    rustix::fs::statfs(root).is_ok_and(|s| {
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let t = s.f_type as i64;
        LOCAL.contains(&(t & 0xffff_ffff))
    })
}

struct Watches {
    by_dir: HashMap<Box<str>, i32>,
    /// The directories (folded, as spelled on disk) a watch stands for: several when
    /// symlinks lead to one directory.
    by_wd: HashMap<i32, Vec<(Box<str>, SharePath)>>,
    order: VecDeque<Box<str>>,
}

/// The inotify instance of a share.
pub(crate) struct Watcher {
    fd: OwnedFd,
    root: PathBuf,
    max: usize,
    state: RwLock<Watches>,
}

impl Watcher {
    pub(crate) fn new(root: &Path, max: usize) -> std::io::Result<Watcher> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let state = RwLock::new(Watches { by_dir: HashMap::new(), by_wd: HashMap::new(), order: VecDeque::new() });
        Ok(Watcher { fd, root: root.to_path_buf(), max: max.max(1), state })
    }

    /// Watches directory `dir` (folded; spelled `disk`); whether it is watched. Past the
    /// bound the oldest watch goes, and what the cache holds of its directory with it.
    pub(crate) fn ensure(&self, core: &Core, dir: &str, disk: &SharePath) -> bool {
        if self.state.read().unwrap_or_else(|p| p.into_inner()).by_dir.contains_key(dir) {
            return true;
        }
        let path = if disk.is_root() { self.root.clone() } else { self.root.join(disk.to_fs_relative()) };
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
        if st.by_dir.contains_key(dir) {
            return true;
        }
        let wd = match inotify::add_watch(&self.fd, &path, MASK) {
            Ok(wd) => wd,
            // ENOSPC: out of watches (fs.inotify.max_user_watches); the directory's data then
            // expires after the bound.
            Err(e) => {
                tracing::debug!(dir = %path.display(), error = %e, "cannot watch");
                return false;
            }
        };
        st.by_dir.insert(dir.into(), wd);
        let aliases = st.by_wd.entry(wd).or_default();
        if !aliases.iter().any(|(d, _)| &**d == dir) {
            aliases.push((dir.into(), disk.clone()));
        }
        st.order.push_back(dir.into());
        while st.by_dir.len() > self.max {
            let Some(old) = st.order.pop_front() else { break };
            if &*old == dir {
                st.order.push_back(old);
                continue;
            }
            self.unwatch(&mut st, &old);
            core.kills.kill(&old);
        }
        true
    }

    /// Stops watching `dir` (its watch goes when no alias is left).
    fn unwatch(&self, st: &mut Watches, dir: &str) {
        let Some(wd) = st.by_dir.remove(dir) else { return };
        st.order.retain(|d| &**d != dir);
        let empty = st.by_wd.get_mut(&wd).map(|v| {
            v.retain(|(d, _)| &**d != dir);
            v.is_empty()
        });
        if empty == Some(true) {
            st.by_wd.remove(&wd);
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    /// Calls `f` with each directory watch `wd` stands for, under the read lock: nearly every
    /// event is Braid's own, and copying the aliases for each was measurable. `f` may take the
    /// table's, the pool's and the expectations' locks (as `ensure` does under the write lock).
    fn each_dir(&self, wd: i32, mut f: impl FnMut(&str, &SharePath)) {
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        for (d, disk) in st.by_wd.get(&wd).into_iter().flatten() {
            f(d, disk);
        }
    }

    /// Forgets watch `wd` (its directory went away or moved): everything beneath goes.
    fn forget(&self, core: &Core, wd: i32, removed_by_kernel: bool) {
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
        let dirs = st.by_wd.remove(&wd).unwrap_or_default();
        for (d, _) in &dirs {
            st.by_dir.remove(d);
            st.order.retain(|o| o != d);
            core.kills.kill(d);
            core.changed_name(d, true);
        }
        if !removed_by_kernel {
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }
}

/// One event, as read.
struct Event {
    wd: i32,
    mask: ReadFlags,
    cookie: u32,
    name: Option<String>,
}

/// Runs the share's watcher (or, without one, only the housekeeping) until `core` is gone.
pub(crate) fn run(core: Weak<Core>, fd: Option<OwnedFd>) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 << 10];
    let mut pending: Option<Event> = None;
    loop {
        let ready = match &fd {
            Some(fd) => {
                let wait = if pending.is_some() { 10 } else { TICK.as_millis() as i32 };
                let mut p = [PollFd::new(fd, PollFlags::IN)];
                matches!(poll(&mut p, wait), Ok(n) if n > 0)
            }
            None => {
                std::thread::sleep(TICK);
                false
            }
        };
        if ready && pending.is_none() {
            // Let a burst gather: the kernel folds an event into an identical one still
            // queued (a run of writes to one file is one IN_MODIFY), so reading at once
            // would cost a wake-up per write.
            std::thread::sleep(GATHER);
        }
        let Some(core) = core.upgrade() else { return };
        if let (true, Some(fd)) = (ready, &fd) {
            let mut events = Vec::new();
            let mut r = inotify::Reader::new(fd.as_fd(), &mut buf);
            loop {
                match r.next() {
                    Ok(e) => events.push(Event {
                        wd: e.wd(),
                        mask: e.events(),
                        cookie: e.cookie(),
                        name: e.file_name().map(|n| n.to_string_lossy().into_owned()),
                    }),
                    Err(Errno::INTR) => {}
                    Err(_) => break,
                }
            }
            for e in events {
                pending = handle(&core, e, pending.take());
            }
        } else if let Some(from) = pending.take() {
            // No MOVED_TO followed: the name left the watched directories.
            report_child(&core, &from, ChangeKind::Removed, what::NAME, bits::MOVED_FROM);
        }
        core.pool.purge(false);
    }
}

/// Handles one event; returns a MOVED_FROM still waiting for its MOVED_TO.
fn handle(core: &Core, e: Event, pending: Option<Event>) -> Option<Event> {
    let Some(w) = &core.watcher else { return None };
    let m = e.mask;
    if let Some(from) = pending {
        if m.contains(ReadFlags::MOVED_TO) && e.cookie == from.cookie {
            report_child(core, &from, ChangeKind::RenamedFrom, what::NAME, bits::MOVED_FROM);
            report_child(core, &e, ChangeKind::RenamedTo, what::NAME, bits::MOVED_TO);
            return None;
        }
        report_child(core, &from, ChangeKind::Removed, what::NAME, bits::MOVED_FROM);
    }
    if m.contains(ReadFlags::QUEUE_OVERFLOW) {
        // Changes were lost: nothing cached can be trusted, and watchers must rescan.
        core.drop_all();
        notify(core, &Change { path: SharePath::root(), kind: ChangeKind::Modified, is_dir: true, what: what::LOST });
        return None;
    }
    if m.contains(ReadFlags::IGNORED) {
        w.forget(core, e.wd, true);
        return None;
    }
    if e.name.is_none() {
        if m.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
            w.forget(core, e.wd, false);
        } else {
            // The directory's own attributes: its parent's watch reports them.
            w.each_dir(e.wd, |d, _| core.changed_attrs(d));
        }
        return None;
    }
    if m.contains(ReadFlags::MOVED_FROM) {
        return Some(e);
    }
    let (kind, bits, what) = if m.contains(ReadFlags::CREATE) {
        (ChangeKind::Added, bits::CREATE, what::NAME)
    } else if m.contains(ReadFlags::DELETE) {
        (ChangeKind::Removed, bits::DELETE, what::NAME)
    } else if m.contains(ReadFlags::MOVED_TO) {
        // Moved in from outside the watched directories.
        (ChangeKind::Added, bits::MOVED_TO, what::NAME)
    } else if m.contains(ReadFlags::MODIFY) {
        (ChangeKind::Modified, bits::ATTRS, what::SIZE | what::LAST_WRITE)
    } else if m.contains(ReadFlags::ATTRIB) {
        // Mode, owner, times or any xattr (DOS attributes, EAs and the security
        // descriptor are xattrs): inotify does not say which.
        let attrs = what::ATTRIBUTES | what::EA | what::SECURITY | what::LAST_WRITE | what::LAST_ACCESS | what::CREATION;
        (ChangeKind::Modified, bits::ATTRS, attrs)
    } else {
        return None;
    };
    report_child(core, &e, kind, what, bits);
    None
}

/// Invalidates what event `e` (of a child of a watched directory) touches and reports it
/// unless Braid made it.
fn report_child(core: &Core, e: &Event, kind: ChangeKind, what: u32, bit: u8) {
    let Some(w) = &core.watcher else { return };
    let Some(name) = &e.name else { return };
    let is_dir = e.mask.contains(ReadFlags::ISDIR);
    let folded_name: String = name.chars().map(crate::local::case::fold_char).collect();
    let mut own = false;
    w.each_dir(e.wd, |dir, _| {
        let folded = if dir.is_empty() { folded_name.clone() } else { format!("{dir}/{folded_name}") };
        if what == what::NAME {
            core.changed_name(&folded, is_dir);
        } else {
            core.changed_attrs(&folded);
        }
        own |= core.expected.consume(&folded, bit) || (bit == bits::ATTRS && core.writers.contains(&folded));
    });
    if own {
        return;
    }
    let mut change = None;
    w.each_dir(e.wd, |_, disk| {
        if change.is_none() {
            change = disk.join(name).ok().map(|path| Change { path, kind, is_dir, what });
        }
    });
    if let Some(c) = change {
        tracing::debug!(path = %c.path, kind = ?c.kind, what = c.what, "outside change");
        notify(core, &c);
    }
}

fn notify(core: &Core, c: &Change) {
    let sink = core.sink.read().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(s) = sink {
        s(c);
    }
}

/// The fd the thread reads (a duplicate, so the thread never borrows the shared state).
pub(crate) fn reader_fd(w: &Watcher) -> Option<OwnedFd> {
    rustix::io::fcntl_dupfd_cloexec(&w.fd, 0).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, CacheConfig, CachedBackend, LocalBackend};
    use std::sync::{Arc, Mutex};

    #[test]
    fn an_overflow_drops_everything_and_says_changes_were_lost() {
        let dir = std::env::temp_dir().join(format!("braid-cache-overflow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), b"1").unwrap();
        let inner: Arc<dyn Backend> = Arc::new(LocalBackend::new(&dir, false).unwrap());
        let cache = CachedBackend::new(inner, None, CacheConfig { ttl: Duration::from_secs(60), ..Default::default() });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        cache.subscribe(Arc::new(move |c: &Change| s2.lock().unwrap().push(c.clone())));
        cache.stat(&SharePath::from_smb("f").unwrap()).unwrap();
        assert_eq!(cache.cache_stats().unwrap().entries, 1);
        // The same core with a watcher, as on a file system with events.
        let core = &cache.core;
        let w = Watcher::new(&dir, 16).unwrap();
        let ev = Event { wd: -1, mask: ReadFlags::QUEUE_OVERFLOW, cookie: 0, name: None };
        let with_watcher = Core::new(core.inner.clone(), core.ttl, 1000, 1 << 20, super::super::pool::Pool::new(4, core.ttl), Some(w));
        *with_watcher.sink.write().unwrap() = core.sink.read().unwrap().clone();
        with_watcher.table.insert(
            super::super::state::name_key("f"),
            "f",
            super::super::state::Data::Missing(super::super::state::Missing::Name),
            with_watcher.table.ticket(&super::super::state::name_key("f")),
            0,
            true,
        );
        assert_eq!(with_watcher.stats().entries, 1);
        assert!(handle(&with_watcher, ev, None).is_none());
        assert_eq!(with_watcher.stats().entries, 0);
        let seen = seen.lock().unwrap();
        assert!(seen.iter().any(|c| c.path.is_root() && c.what & what::LOST != 0), "{seen:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
