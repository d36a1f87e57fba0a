//! The VFS conformance suite: behaviour every [`Backend`] shares, run against
//! `LocalBackend` (on a scratch directory, tmpfs when available), the same behind the
//! metadata cache (`CachedBackend`), and `MemoryBackend`.
//! Everything here goes through the `Backend` and `FileHandle` traits only; what only the
//! local backend can show (symlinks, modes, xattrs on disk, mappings) is in `local.rs`.

use braid_vfs::{
    creds, dos, Backend, CacheConfig, CachedBackend, CreateMode, FileHandle, FileKind, LocalBackend, MemoryBackend, OpenOptions, OpenOutcome,
    SetTimes, StreamHandle, VfsError, MAX_TOKEN_LEN,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod common;
use common::{dir_opts, open, opts, p, read_all, read_only_opts};

/// A backend under test, with a read-only view of the same share.
trait Fixture {
    fn backend(&self) -> &dyn Backend;
    fn read_only(&self) -> Box<dyn Backend>;
}

/// A local backend on a scratch directory removed on drop.
struct Local {
    dir: PathBuf,
    backend: LocalBackend,
}

impl Local {
    fn new() -> Local {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("braid-vfs-conf-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let backend = LocalBackend::new(&dir, false).unwrap();
        Local { dir, backend }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fixture for Local {
    fn backend(&self) -> &dyn Backend {
        &self.backend
    }
    fn read_only(&self) -> Box<dyn Backend> {
        Box::new(LocalBackend::new(&self.dir, true).unwrap())
    }
}

/// The local backend behind the metadata cache (watching the directory, as on tmpfs).
struct Cached {
    local: Local,
    backend: CachedBackend,
}

impl Cached {
    fn new() -> Cached {
        let local = Local::new();
        let inner: Arc<dyn Backend> = Arc::new(local.backend.clone());
        let backend = CachedBackend::new(inner, Some(&local.dir), CacheConfig::default());
        Cached { local, backend }
    }
}

impl Fixture for Cached {
    fn backend(&self) -> &dyn Backend {
        &self.backend
    }
    fn read_only(&self) -> Box<dyn Backend> {
        let inner: Arc<dyn Backend> = Arc::new(LocalBackend::new(&self.local.dir, true).unwrap());
        Box::new(CachedBackend::new(inner, Some(&self.local.dir), CacheConfig::default()))
    }
}

/// A memory backend large enough for every test here.
struct Memory(MemoryBackend);

impl Memory {
    fn new() -> Memory {
        Memory(MemoryBackend::new(256 << 20, false))
    }
}

impl Fixture for Memory {
    fn backend(&self) -> &dyn Backend {
        &self.0
    }
    fn read_only(&self) -> Box<dyn Backend> {
        Box::new(self.0.read_only_view())
    }
}

/// Creates (or replaces) file `path` holding `data`.
fn put(b: &dyn Backend, path: &str, data: &[u8]) {
    let h = open(b, path, OpenOptions { truncate: true, ..opts(CreateMode::OpenOrCreate) }).unwrap();
    assert_eq!(h.write_at(data, 0).unwrap(), data.len());
}

/// The contents of file `path`.
fn get(b: &dyn Backend, path: &str) -> Vec<u8> {
    read_all(open(b, path, read_only_opts()).unwrap().as_ref())
}

fn mkdir(b: &dyn Backend, path: &str) {
    open(b, path, dir_opts(CreateMode::CreateNew)).unwrap();
}

/// The names in directory `path`, in listing order.
fn names(b: &dyn Backend, path: &str) -> Vec<String> {
    open(b, path, dir_opts(CreateMode::OpenExisting)).unwrap().read_dir().unwrap().into_iter().map(|e| e.name).collect()
}

fn open_dispositions(f: &dyn Fixture) {
    let b = f.backend();
    let r = open(b, "missing", opts(CreateMode::OpenExisting));
    assert!(matches!(r, Err(VfsError::NotFound)), "{r:?}");
    let r = open(b, "nodir\\file", opts(CreateMode::OpenOrCreate));
    assert!(matches!(r, Err(VfsError::PathNotFound)), "{r:?}");

    let (_, outcome) = b.open(&p("f"), opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
    assert!(matches!(open(b, "f", opts(CreateMode::CreateNew)), Err(VfsError::Exists)));
    let (_, outcome) = b.open(&p("f"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Opened);
    let (_, outcome) = b.open(&p("g"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
    // A file in the middle of a path is a missing path, not a missing file.
    let r = open(b, "f\\x", opts(CreateMode::OpenExisting));
    assert!(matches!(r, Err(VfsError::PathNotFound)), "{r:?}");
    let both = OpenOptions { directory: true, non_directory: true, ..opts(CreateMode::OpenOrCreate) };
    assert!(matches!(open(b, "f", both), Err(VfsError::InvalidName)));

    let r = open(b, "f", dir_opts(CreateMode::OpenExisting));
    assert!(matches!(r, Err(VfsError::NotADirectory)), "{r:?}");
    let r = open(b, "f", dir_opts(CreateMode::OpenOrCreate));
    assert!(matches!(r, Err(VfsError::NotADirectory)), "{r:?}");

    let (d, outcome) = b.open(&p("d"), dir_opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
    assert!(d.attrs().unwrap().is_dir);
    let (_, outcome) = b.open(&p("d"), dir_opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Opened);
    assert!(matches!(open(b, "d", dir_opts(CreateMode::CreateNew)), Err(VfsError::Exists)));
    let non_dir = OpenOptions { non_directory: true, write: false, ..opts(CreateMode::OpenExisting) };
    assert!(matches!(open(b, "d", non_dir), Err(VfsError::IsADirectory)));
    // Without either flag, a directory opens as a directory.
    let h = open(b, "d", opts(CreateMode::OpenExisting)).unwrap();
    assert!(h.attrs().unwrap().is_dir);
    assert!(matches!(h.write_at(b"x", 0), Err(VfsError::IsADirectory)));
    assert!(matches!(h.read_at(&mut [0; 4], 0), Err(VfsError::IsADirectory)));
    let t = OpenOptions { truncate: true, ..opts(CreateMode::OpenExisting) };
    assert!(matches!(open(b, "d", t), Err(VfsError::IsADirectory)));

    // The root.
    let root = open(b, "", dir_opts(CreateMode::OpenExisting)).unwrap();
    assert!(root.attrs().unwrap().is_dir);
    assert!(matches!(open(b, "\\", dir_opts(CreateMode::CreateNew)), Err(VfsError::Exists)));

    // A new file in a new directory.
    let h = open(b, "d\\inner.txt", opts(CreateMode::CreateNew)).unwrap();
    h.write_at(b"hi", 0).unwrap();
    assert_eq!(get(b, "d\\inner.txt"), b"hi");
    assert_eq!(h.opened_path(), Some(p("d\\inner.txt")));
}

fn read_write_truncate_extend(f: &dyn Fixture) {
    let b = f.backend();
    let h = open(b, "file", opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(h.write_at(b"hello world", 0).unwrap(), 11);
    assert_eq!(h.write_at(b"WORLD", 6).unwrap(), 5);
    assert_eq!(read_all(&*h), b"hello WORLD");
    let mut buf = [0u8; 4];
    assert_eq!(h.read_at(&mut buf, 9).unwrap(), 2);
    assert_eq!(&buf[..2], b"LD");
    assert_eq!(h.read_at(&mut buf, 100).unwrap(), 0);
    assert_eq!(h.read_at(&mut buf, u64::MAX).unwrap(), 0);
    assert!(matches!(h.write_at(b"x", u64::MAX - 1), Err(VfsError::TooLarge)));
    assert!(matches!(h.set_len(u64::MAX), Err(VfsError::TooLarge)));

    // Sparse write past the end fills with zeros.
    h.write_at(b"!", 20).unwrap();
    let data = read_all(&*h);
    assert_eq!(data.len(), 21);
    assert!(data[11..20].iter().all(|&c| c == 0));
    assert_eq!(h.size().unwrap(), 21);
    // An empty write past the end writes nothing and leaves the end of file.
    assert_eq!(h.write_at(b"", 100).unwrap(), 0);
    assert_eq!(h.size().unwrap(), 21);

    h.set_len(5).unwrap();
    assert_eq!(read_all(&*h), b"hello");
    h.set_len(8).unwrap();
    assert_eq!(read_all(&*h), b"hello\0\0\0");
    assert_eq!(h.attrs().unwrap().size, 8);
    h.allocate(1 << 20).unwrap();
    let a = h.attrs().unwrap();
    assert_eq!(a.size, 8, "allocate keeps the end of file");
    h.sync().unwrap();

    // Open with truncate.
    let t = OpenOptions { truncate: true, ..opts(CreateMode::OpenExisting) };
    let h2 = open(b, "file", t).unwrap();
    assert_eq!(h2.attrs().unwrap().size, 0);

    // Access asked for at open time is enforced.
    h2.write_at(b"abc", 0).unwrap();
    let ro = open(b, "file", read_only_opts()).unwrap();
    assert!(matches!(ro.write_at(b"x", 0), Err(VfsError::PermissionDenied)));
    assert_eq!(read_all(&*ro), b"abc");
    // Metadata changes still work on a handle opened without write access.
    ro.set_len(2).unwrap();
    assert_eq!(read_all(&*ro), b"ab");
    let wo = open(b, "file", OpenOptions { read: false, ..opts(CreateMode::OpenExisting) }).unwrap();
    assert!(matches!(wo.read_at(&mut buf, 0), Err(VfsError::PermissionDenied)));
    wo.write_at(b"Z", 0).unwrap();
    assert_eq!(get(b, "file"), b"Zb");
    // Attribute-only open.
    let none = OpenOptions { read: false, write: false, ..opts(CreateMode::OpenExisting) };
    let h = open(b, "file", none).unwrap();
    assert_eq!(h.attrs().unwrap().size, 2);

    // A large buffer goes through whole.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
    let h = open(b, "big", opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(h.write_at(&big, 7).unwrap(), big.len());
    let mut back = vec![0u8; big.len()];
    assert_eq!(h.read_at(&mut back, 7).unwrap(), big.len());
    assert!(back == big);
    assert!(h.attrs().unwrap().alloc_size >= big.len() as u64 + 7);
}

fn rename_and_remove(f: &dyn Fixture) {
    let b = f.backend();
    put(b, "a", b"A");
    put(b, "b", b"B");
    mkdir(b, "d1");
    mkdir(b, "d1\\inner");
    mkdir(b, "d2");
    let a_id = b.stat(&p("a")).unwrap().file_id;

    assert!(matches!(b.rename(&p("a"), &p("b"), false), Err(VfsError::Exists)));
    b.rename(&p("a"), &p("b"), true).unwrap();
    assert_eq!(get(b, "b"), b"A");
    assert_eq!(b.stat(&p("b")).unwrap().file_id, a_id, "a rename keeps the file id");
    assert!(matches!(b.stat(&p("a")), Err(VfsError::NotFound)));
    b.rename(&p("b"), &p("c"), false).unwrap();
    assert_eq!(get(b, "c"), b"A");
    b.rename(&p("c"), &p("c"), false).unwrap();
    assert!(matches!(b.rename(&p("a"), &p("z"), false), Err(VfsError::NotFound)));
    assert!(matches!(b.rename(&p("c"), &p("nope\\c"), false), Err(VfsError::PathNotFound)));
    // Directories are never replaced, nor do they replace files.
    assert!(matches!(b.rename(&p("c"), &p("d2"), true), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.rename(&p("d2"), &p("c"), true), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.rename(&p("d1"), &p("d2"), true), Err(VfsError::PermissionDenied)));
    // Into a subdirectory, and a directory into itself.
    b.rename(&p("c"), &p("d1\\inner\\c"), false).unwrap();
    assert_eq!(get(b, "d1\\inner\\c"), b"A");
    assert!(matches!(b.rename(&p("d1"), &p("d1\\inner\\d1"), false), Err(VfsError::PermissionDenied)));
    b.rename(&p("d2"), &p("d3"), false).unwrap();
    assert!(b.stat(&p("d3")).unwrap().is_dir);
    // The root is untouchable.
    assert!(matches!(b.rename(&p(""), &p("x"), false), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.rename(&p("d3"), &p(""), true), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.remove(&p("")), Err(VfsError::PermissionDenied)));

    assert!(matches!(b.remove(&p("d1")), Err(VfsError::NotEmpty)));
    assert!(matches!(b.remove(&p("missing")), Err(VfsError::NotFound)));
    assert!(matches!(b.remove(&p("x\\missing")), Err(VfsError::PathNotFound)));
    // An open file outlives its removal.
    let h = open(b, "d1\\inner\\c", read_only_opts()).unwrap();
    b.remove(&p("d1\\inner\\c")).unwrap();
    assert_eq!(read_all(&*h), b"A");
    b.remove(&p("d1\\inner")).unwrap();
    b.remove(&p("d1")).unwrap();
    b.remove(&p("d3")).unwrap();
    assert!(names(b, "").is_empty());
}

fn attributes_of_new_objects(f: &dyn Fixture) {
    let b = f.backend();
    let before = SystemTime::now() - Duration::from_secs(2);
    let h = open(b, "f", opts(CreateMode::CreateNew)).unwrap();
    let a = h.attrs().unwrap();
    assert!(!a.is_dir && a.size == 0 && a.nlink == 1);
    assert!(a.created >= before && a.modified >= before && a.changed >= before);
    let d = open(b, "d", dir_opts(CreateMode::CreateNew)).unwrap();
    let da = d.attrs().unwrap();
    assert!(da.is_dir && da.size == 0 && da.nlink >= 1);
    assert_ne!(a.file_id, da.file_id);
    assert_eq!(b.stat(&p("f")).unwrap().file_id, a.file_id);
    assert_eq!(open(b, "f", read_only_opts()).unwrap().attrs().unwrap().file_id, a.file_id);
    // A write moves the modification time forward.
    h.set_times(SetTimes { modified: Some(UNIX_EPOCH + Duration::from_secs(1000)), ..SetTimes::default() }).unwrap();
    h.write_at(b"x", 0).unwrap();
    assert!(h.attrs().unwrap().modified >= before);
}

fn dos_attributes_round_trip(f: &dyn Fixture) {
    let b = f.backend();
    let h = open(b, "f", opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(h.attrs().unwrap().dos_attributes, dos::ARCHIVE);
    h.set_dos_attributes(dos::HIDDEN | dos::SYSTEM | dos::DIRECTORY | dos::NORMAL).unwrap();
    assert_eq!(h.attrs().unwrap().dos_attributes, dos::HIDDEN | dos::SYSTEM);
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, dos::HIDDEN | dos::SYSTEM);
    h.set_dos_attributes(dos::READONLY | dos::ARCHIVE).unwrap();
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, dos::READONLY | dos::ARCHIVE);
    h.set_dos_attributes(0).unwrap();
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, 0);

    let d = open(b, "d", dir_opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(d.attrs().unwrap().dos_attributes, dos::DIRECTORY);
    d.set_dos_attributes(dos::HIDDEN).unwrap();
    assert_eq!(d.attrs().unwrap().dos_attributes, dos::DIRECTORY | dos::HIDDEN);

    // Listings see the same attributes.
    h.set_dos_attributes(dos::HIDDEN).unwrap();
    let root = open(b, "", dir_opts(CreateMode::OpenExisting)).unwrap();
    let list = root.read_dir().unwrap();
    let get = |n: &str| list.iter().find(|e| e.name == n).unwrap().attrs.clone();
    assert_eq!(get("f").dos_attributes, dos::HIDDEN);
    assert_eq!(get("d").dos_attributes, dos::DIRECTORY | dos::HIDDEN);
    assert_eq!(get("f"), b.stat(&p("f")).unwrap());
}

fn sparse_mark_and_zeroed_ranges(f: &dyn Fixture) {
    let b = f.backend();
    let h = open(b, "f", opts(CreateMode::CreateNew)).unwrap();
    h.write_at(&[7u8; 8192], 0).unwrap();
    h.set_sparse(true).unwrap();
    assert_eq!(h.attrs().unwrap().dos_attributes, dos::ARCHIVE | dos::SPARSE_FILE);
    // Setting the DOS attributes keeps the mark, and cannot set it either.
    h.set_dos_attributes(dos::HIDDEN).unwrap();
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, dos::HIDDEN | dos::SPARSE_FILE);
    h.set_sparse(false).unwrap();
    h.set_dos_attributes(dos::HIDDEN | dos::SPARSE_FILE).unwrap();
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, dos::HIDDEN);
    let d = open(b, "d", dir_opts(CreateMode::CreateNew)).unwrap();
    assert!(matches!(d.set_sparse(true), Err(VfsError::IsADirectory)));

    // Zeroing keeps the end of file, whether it deallocates or not, and stops there.
    h.zero_range(100, 100, false).unwrap();
    h.zero_range(4096, 1 << 20, true).unwrap();
    assert_eq!(h.size().unwrap(), 8192);
    let data = read_all(h.as_ref());
    assert_eq!(data.len(), 8192);
    assert!(data[..100].iter().all(|&c| c == 7) && data[200..4096].iter().all(|&c| c == 7));
    assert!(data[100..200].iter().all(|&c| c == 0) && data[4096..].iter().all(|&c| c == 0));

    // Allocated ranges stay inside the file and the request, and are bounded.
    let r = h.allocated_ranges(0, 1 << 30, 8).unwrap();
    assert!(!r.is_empty() && r[0].0 == 0, "{r:?}");
    assert!(r.iter().all(|&(o, l)| l > 0 && o + l <= 8192));
    assert_eq!(h.allocated_ranges(8192, 100, 8).unwrap(), vec![]);
    assert_eq!(h.allocated_ranges(1, 10, 8).unwrap(), vec![(1, 10)]);
    assert_eq!(h.allocated_ranges(0, 4096, 0).unwrap(), vec![]);
}

fn set_times_round_trip(f: &dyn Fixture) {
    let b = f.backend();
    let h = open(b, "f", opts(CreateMode::CreateNew)).unwrap();
    let before = h.attrs().unwrap();
    assert!(before.created <= before.modified);
    let created = UNIX_EPOCH + Duration::new(1_000_000_000, 123_456_789);
    let accessed = UNIX_EPOCH + Duration::new(1_100_000_000, 1);
    let modified = UNIX_EPOCH + Duration::new(1_200_000_000, 999_999_999);
    h.set_times(SetTimes { created: Some(created), accessed: Some(accessed), modified: Some(modified), changed: Some(SystemTime::now()) }).unwrap();
    let a = h.attrs().unwrap();
    assert_eq!((a.created, a.accessed, a.modified), (created, accessed, modified));
    assert_eq!(b.stat(&p("f")).unwrap().created, created);

    // None leaves a time alone.
    let modified2 = UNIX_EPOCH + Duration::from_secs(1_300_000_000);
    h.set_times(SetTimes { modified: Some(modified2), ..SetTimes::default() }).unwrap();
    let a = h.attrs().unwrap();
    assert_eq!((a.created, a.accessed, a.modified), (created, accessed, modified2));

    // Before 1970 works for POSIX times.
    let old = UNIX_EPOCH - Duration::new(86_400, 500);
    h.set_times(SetTimes { modified: Some(old), ..SetTimes::default() }).unwrap();
    assert_eq!(h.attrs().unwrap().modified, old);

    // Directories too, listed as well.
    let d = open(b, "d", dir_opts(CreateMode::CreateNew)).unwrap();
    d.set_times(SetTimes { created: Some(created), modified: Some(modified), ..SetTimes::default() }).unwrap();
    let root = open(b, "", dir_opts(CreateMode::OpenExisting)).unwrap();
    let list = root.read_dir().unwrap();
    let da = &list.iter().find(|e| e.name == "d").unwrap().attrs;
    assert_eq!((da.created, da.modified), (created, modified));
}

fn read_dir_sorted(f: &dyn Fixture) {
    let b = f.backend();
    mkdir(b, "many");
    let n = 1000;
    for i in 0..n {
        // Reverse order of creation so sorting really matters.
        put(b, &format!("many\\f{:05}", n - i), b"");
    }
    mkdir(b, "many\\sub");
    let h = open(b, "many", dir_opts(CreateMode::OpenExisting)).unwrap();
    let list = h.read_dir().unwrap();
    assert_eq!(list.len(), n + 1);
    assert!(list.windows(2).all(|w| w[0].name < w[1].name));
    assert!(list[..n].iter().all(|e| !e.attrs.is_dir && e.attrs.dos_attributes == dos::ARCHIVE));
    assert!(list[n].attrs.is_dir);
    // A second listing of the same handle starts over.
    assert_eq!(h.read_dir().unwrap().len(), n + 1);
    assert!(h.has_child("f00001").unwrap());
    assert!(!h.has_child("f99999").unwrap());
    b.remove(&p("many\\f00001")).unwrap();
    assert!(!h.has_child("f00001").unwrap());
    let f = open(b, "many\\f00002", read_only_opts()).unwrap();
    assert!(matches!(f.read_dir(), Err(VfsError::NotADirectory)));
    assert!(matches!(f.has_child("x"), Err(VfsError::NotADirectory)));
}

fn read_only_backend_refuses_changes(f: &dyn Fixture) {
    put(f.backend(), "f", b"data");
    mkdir(f.backend(), "d");
    let ro = f.read_only();
    let b = ro.as_ref();
    for o in [
        opts(CreateMode::OpenExisting),
        opts(CreateMode::CreateNew),
        OpenOptions { write: false, ..opts(CreateMode::CreateNew) },
        OpenOptions { write: false, truncate: true, ..opts(CreateMode::OpenExisting) },
    ] {
        assert!(matches!(open(b, "f", o), Err(VfsError::ReadOnly)), "{o:?}");
    }
    let oc = OpenOptions { write: false, ..opts(CreateMode::OpenOrCreate) };
    assert!(matches!(open(b, "new", oc), Err(VfsError::ReadOnly)));
    assert!(open(b, "f", oc).is_ok());
    assert!(matches!(open(b, "newdir", dir_opts(CreateMode::OpenOrCreate)), Err(VfsError::ReadOnly)));
    assert!(matches!(b.remove(&p("f")), Err(VfsError::ReadOnly)));
    assert!(matches!(b.rename(&p("f"), &p("g"), false), Err(VfsError::ReadOnly)));

    let h = open(b, "f", read_only_opts()).unwrap();
    assert_eq!(read_all(&*h), b"data");
    assert!(matches!(h.write_at(b"x", 0), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_len(0), Err(VfsError::ReadOnly)));
    assert!(matches!(h.allocate(10), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_dos_attributes(dos::HIDDEN), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_times(SetTimes { modified: Some(UNIX_EPOCH), ..SetTimes::default() }), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_security_descriptor(&[1]), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_extended_attribute("EA", b"v"), Err(VfsError::ReadOnly)));
    let d = open(b, "d", dir_opts(CreateMode::OpenExisting)).unwrap();
    assert_eq!(d.read_dir().unwrap().len(), 0);
    assert_eq!(get(f.backend(), "f"), b"data");
}

fn statfs_figures(f: &dyn Fixture) {
    let st = f.backend().statfs().unwrap();
    assert!(st.total_bytes > 0 && st.free_bytes <= st.total_bytes);
    assert!(st.avail_bytes <= st.free_bytes);
    assert!(st.block_size > 0);
    assert_eq!(st.max_name_len, 255);
    assert!(st.total_files > 0 && st.free_files <= st.total_files && st.avail_files <= st.free_files);
}

fn concurrent_positional_io(f: &dyn Fixture) {
    let b = f.backend();
    let h: std::sync::Arc<dyn FileHandle> = open(b, "f", opts(CreateMode::CreateNew)).unwrap().into();
    std::thread::scope(|sc| {
        for t in 0..4u8 {
            let h = h.clone();
            sc.spawn(move || {
                for i in 0..64u64 {
                    let off = (i * 4 + u64::from(t)) * 1024;
                    h.write_at(&[t + 1; 1024], off).unwrap();
                }
            });
        }
    });
    let mut buf = vec![0u8; 256 * 1024];
    assert_eq!(h.read_at(&mut buf, 0).unwrap(), buf.len());
    for (k, chunk) in buf.chunks(1024).enumerate() {
        assert!(chunk.iter().all(|&c| c == (k % 4) as u8 + 1));
    }
}

fn case_insensitive_lookup_preserves_case(f: &dyn Fixture) {
    let b = f.backend();
    mkdir(b, "Dir");
    put(b, "Dir\\foo.txt", b"hello");

    // Open and stat through any spelling reach the stored entry.
    let h = open(b, "DIR\\FOO.TXT", read_only_opts()).unwrap();
    assert_eq!(read_all(h.as_ref()), b"hello");
    assert_eq!(h.opened_path(), Some(p("Dir\\foo.txt")));
    assert_eq!(b.stat(&p("dir\\Foo.Txt")).unwrap().size, 5);
    assert!(matches!(b.stat(&p("dir\\nope")), Err(VfsError::NotFound)));
    assert!(matches!(b.stat(&p("nope\\foo.txt")), Err(VfsError::PathNotFound)));
    // Unicode folding beyond ASCII.
    put(b, "Ärger.txt", b"x");
    assert_eq!(get(b, "äRGER.TXT"), b"x");

    // An exclusive create of another spelling collides; open-or-create opens the existing.
    assert!(matches!(b.open(&p("dir\\FOO.TXT"), opts(CreateMode::CreateNew)), Err(VfsError::Exists)));
    let (h, outcome) = b.open(&p("DIR\\FOO.txt"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Opened);
    assert_eq!(h.opened_path(), Some(p("Dir\\foo.txt")));
    // A new file created through a differently cased parent lands in it, as spelled.
    let (h, outcome) = b.open(&p("DIR\\New.TXT"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
    assert_eq!(h.opened_path(), Some(p("Dir\\New.TXT")));
    assert_eq!(names(b, "Dir"), ["New.TXT", "foo.txt"]);
    b.open(&p("dIR\\sub"), dir_opts(CreateMode::CreateNew)).unwrap();
    assert!(b.stat(&p("Dir\\sub")).unwrap().is_dir);
    assert!(matches!(b.open(&p("DIR\\SUB"), dir_opts(CreateMode::CreateNew)), Err(VfsError::Exists)));

    // Remove through another spelling.
    b.remove(&p("DIR\\NEW.txt")).unwrap();
    assert_eq!(names(b, "Dir"), ["foo.txt", "sub"]);
    assert!(matches!(b.remove(&p("DIR\\NEW.txt")), Err(VfsError::NotFound)));
}

fn case_insensitive_rename(f: &dyn Fixture) {
    let b = f.backend();
    put(b, "foo.txt", b"1");
    put(b, "bar.txt", b"2");
    mkdir(b, "Dir");

    // Changing only the case of the same file works, with or without replace.
    b.rename(&p("foo.txt"), &p("FOO.TXT"), false).unwrap();
    assert_eq!(names(b, ""), ["Dir", "FOO.TXT", "bar.txt"]);
    b.rename(&p("foo.txt"), &p("Foo.txt"), true).unwrap();
    assert_eq!(names(b, ""), ["Dir", "Foo.txt", "bar.txt"]);
    assert_eq!(get(b, "Foo.txt"), b"1");

    // A target existing in another case collides, or is replaced under the new spelling.
    assert!(matches!(b.rename(&p("BAR.TXT"), &p("FOO.txt"), false), Err(VfsError::Exists)));
    b.rename(&p("BAR.TXT"), &p("FOO.txt"), true).unwrap();
    assert_eq!(names(b, ""), ["Dir", "FOO.txt"]);
    assert_eq!(get(b, "FOO.txt"), b"2");

    // Into a directory through a differently cased parent.
    b.rename(&p("foo.TXT"), &p("dir\\Moved.txt"), false).unwrap();
    assert_eq!(names(b, "Dir"), ["Moved.txt"]);
    assert_eq!(get(b, "Dir\\Moved.txt"), b"2");
    assert!(matches!(b.rename(&p("gone"), &p("x"), false), Err(VfsError::NotFound)));
    assert!(matches!(b.rename(&p("DIR\\MOVED.TXT"), &p("nodir\\x"), false), Err(VfsError::PathNotFound)));
}

fn security_descriptor_round_trip(f: &dyn Fixture) {
    let b = f.backend();
    let h = open(b, "f", opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(h.security_descriptor().unwrap(), None);
    let sd = vec![1u8, 0, 4, 0x80, 7, 7, 7];
    h.set_security_descriptor(&sd).unwrap();
    // Through another handle, even a metadata-only one.
    let meta_only = OpenOptions { read: false, write: false, ..opts(CreateMode::OpenExisting) };
    let h2 = open(b, "F", meta_only).unwrap();
    assert_eq!(h2.security_descriptor().unwrap(), Some(sd));
    h2.set_security_descriptor(&[9; 300]).unwrap();
    assert_eq!(h.security_descriptor().unwrap(), Some(vec![9; 300]));
    assert!(matches!(h.set_security_descriptor(&vec![0; braid_vfs::MAX_SECURITY_DESCRIPTOR_LEN + 1]), Err(VfsError::TooLarge)));
    let ro = f.read_only();
    let h3 = open(ro.as_ref(), "f", read_only_opts()).unwrap();
    assert!(matches!(h3.set_security_descriptor(&[1]), Err(VfsError::ReadOnly)));
}

fn extended_attributes_round_trip(f: &dyn Fixture) {
    let b = f.backend();
    let h = open(b, "f", opts(CreateMode::CreateNew)).unwrap();
    assert!(h.extended_attributes().unwrap().is_empty());
    h.set_extended_attribute("SECONDEA", b"ValueTwo").unwrap();
    h.set_extended_attribute("EAONE", b"VALUE1").unwrap();
    h.set_extended_attribute("EAONE", b"VALUE2").unwrap();
    assert_eq!(h.extended_attributes().unwrap(), [("EAONE".to_string(), b"VALUE2".to_vec()), ("SECONDEA".to_string(), b"ValueTwo".to_vec())]);
    // An empty value removes; removing a missing one is fine.
    h.set_extended_attribute("EAONE", b"").unwrap();
    h.set_extended_attribute("NOPE", b"").unwrap();
    assert_eq!(h.extended_attributes().unwrap().len(), 1);
    // Bounds.
    assert!(matches!(h.set_extended_attribute("", b"x"), Err(VfsError::InvalidName)));
    assert!(matches!(h.set_extended_attribute("a\0b", b"x"), Err(VfsError::InvalidName)));
    assert!(matches!(h.set_extended_attribute("BIG", &vec![0; braid_vfs::MAX_EA_VALUE_LEN + 1]), Err(VfsError::TooLarge)));
    for i in 1..braid_vfs::MAX_EAS {
        h.set_extended_attribute(&format!("E{i:03}"), b"v").unwrap();
    }
    assert!(matches!(h.set_extended_attribute("ONEMORE", b"v"), Err(VfsError::TooLarge)));
    h.set_extended_attribute("E001", b"replaced").unwrap();
    assert_eq!(h.extended_attributes().unwrap().len(), braid_vfs::MAX_EAS);
    // DOS attributes and descriptors are not EAs.
    h.set_dos_attributes(dos::HIDDEN).unwrap();
    h.set_security_descriptor(&[1, 2, 3]).unwrap();
    assert_eq!(h.extended_attributes().unwrap().len(), braid_vfs::MAX_EAS);
    // Another handle sees them.
    let h2 = open(b, "f", read_only_opts()).unwrap();
    assert_eq!(h2.extended_attributes().unwrap().len(), braid_vfs::MAX_EAS);
}

// POSIX calls (NFS): exact names, links, special files, modes, owners, tokens.

fn exact_open(b: &dyn Backend, path: &str, o: OpenOptions) -> Result<Box<dyn FileHandle>, VfsError> {
    b.open_exact(&p(path), o).map(|(h, _)| h)
}

fn posix_attributes_and_modes(f: &dyn Fixture) {
    let b = f.backend();
    let (uid, gid) = creds::current_fs_ids();
    put(b, "f", b"abc");
    let a = b.stat_exact(&p("f")).unwrap();
    assert_eq!((a.posix.kind, a.posix.uid, a.posix.gid), (FileKind::File, uid, gid));
    assert_eq!(a.posix.rdev, (0, 0));
    assert_eq!(b.stat_exact(&p("")).unwrap().posix.kind, FileKind::Dir);
    // Modes are applied exactly, whatever the umask, special bits included.
    for (name, mode) in [("d1", 0o750), ("d2", 0o1777), ("d3", 0o700)] {
        b.mkdir(&p(name), mode).unwrap();
        let a = b.stat_exact(&p(name)).unwrap();
        assert_eq!((a.posix.kind, a.posix.mode, a.is_dir), (FileKind::Dir, mode, true), "{name}");
    }
    assert!(matches!(b.mkdir(&p("d1"), 0o755), Err(VfsError::Exists)));
    assert!(matches!(b.mkdir(&p("nope\\d"), 0o755), Err(VfsError::PathNotFound)));
    // set_mode through a handle, seen by stat_exact (through the cache too) and by stat.
    let h = exact_open(b, "f", opts(CreateMode::OpenExisting)).unwrap();
    assert_eq!(b.stat_exact(&p("f")).unwrap().posix.mode, a.posix.mode);
    h.set_mode(0o600).unwrap();
    assert_eq!(b.stat_exact(&p("f")).unwrap().posix.mode, 0o600);
    assert_eq!(h.attrs().unwrap().posix.mode, 0o600);
    drop(h);
    assert_eq!(b.stat(&p("f")).unwrap().posix.mode, 0o600);
    if creds::can_switch() {
        let h = exact_open(b, "f", read_only_opts()).unwrap();
        h.set_owner(Some(1234), None).unwrap();
        h.set_owner(None, Some(5678)).unwrap();
        let a = b.stat_exact(&p("f")).unwrap();
        assert_eq!((a.posix.uid, a.posix.gid), (1234, 5678));
    }
    let ro = f.read_only();
    assert!(matches!(ro.mkdir(&p("x"), 0o755), Err(VfsError::ReadOnly)));
    let h = ro.open_exact(&p("f"), read_only_opts()).unwrap().0;
    assert!(matches!(h.set_mode(0o644), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_owner(Some(1), None), Err(VfsError::ReadOnly)));
}

fn exact_names_never_fall_back(f: &dyn Fixture) {
    let b = f.backend();
    put(b, "Foo", b"x");
    mkdir(b, "Dir");
    put(b, "Dir\\In", b"y");
    // SMB's case-insensitive lookups first, so a cache has seen these spellings.
    assert!(b.stat(&p("foo")).is_ok());
    assert!(open(b, "FOO", read_only_opts()).is_ok());
    assert!(open(b, "dir\\in", read_only_opts()).is_ok());
    for wrong in ["foo", "FOO", "dir\\In", "Dir\\in"] {
        assert!(matches!(b.stat_exact(&p(wrong)), Err(VfsError::NotFound | VfsError::PathNotFound)), "{wrong}");
        assert!(matches!(exact_open(b, wrong, read_only_opts()), Err(VfsError::NotFound | VfsError::PathNotFound)), "{wrong}");
        assert!(matches!(b.remove_exact(&p(wrong)), Err(VfsError::NotFound | VfsError::PathNotFound)), "{wrong}");
        assert!(matches!(b.rename_exact(&p(wrong), &p("other")), Err(VfsError::NotFound | VfsError::PathNotFound)), "{wrong}");
        assert!(matches!(b.file_token(&p(wrong)), Err(VfsError::NotFound | VfsError::PathNotFound)), "{wrong}");
    }
    assert_eq!(get(b, "Foo"), b"x");
    assert_eq!(b.stat_exact(&p("Dir\\In")).unwrap().size, 1);
    // An exact create of a missing spelling, a hit of the right one.
    assert_eq!(b.open_exact(&p("Dir\\In"), opts(CreateMode::OpenOrCreate)).unwrap().1, OpenOutcome::Opened);
    let names: Vec<String> = b.read_dir_exact(&p("")).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["Dir", "Foo"]);
    assert!(matches!(b.read_dir_exact(&p("dir")), Err(VfsError::NotFound | VfsError::PathNotFound)));
    assert!(matches!(b.read_dir_exact(&p("Foo")), Err(VfsError::NotADirectory)));
    b.remove_exact(&p("Dir\\In")).unwrap();
    assert!(matches!(b.stat_exact(&p("Dir\\In")), Err(VfsError::NotFound)));
    assert!(matches!(b.stat(&p("dir\\in")), Err(VfsError::NotFound)));
}

fn symlinks_are_not_followed(f: &dyn Fixture) {
    let b = f.backend();
    put(b, "t", b"target data");
    b.symlink("t", &p("l")).unwrap();
    b.symlink("../../outside", &p("esc")).unwrap();
    assert_eq!(b.readlink(&p("l")).unwrap(), "t");
    assert_eq!(b.readlink(&p("esc")).unwrap(), "../../outside");
    let a = b.stat_exact(&p("l")).unwrap();
    assert_eq!((a.posix.kind, a.is_dir, a.size), (FileKind::Symlink, false, 1));
    assert!(matches!(b.readlink(&p("t")), Err(VfsError::InvalidName)));
    assert!(matches!(b.symlink("x", &p("t")), Err(VfsError::Exists)));
    assert!(matches!(b.symlink("", &p("e")), Err(VfsError::InvalidName)));
    let kinds: Vec<(String, FileKind)> = b.read_dir_exact(&p("")).unwrap().into_iter().map(|e| (e.name, e.attrs.posix.kind)).collect();
    assert_eq!(kinds, [("esc".into(), FileKind::Symlink), ("l".into(), FileKind::Symlink), ("t".into(), FileKind::File)]);
    // The escaping link is never listed for SMB.
    assert!(!names(b, "").contains(&"esc".to_string()));
    // open_exact opens the link itself, for attributes only; changes never reach the target.
    let attrs_only = OpenOptions { read: false, write: false, ..opts(CreateMode::OpenExisting) };
    let target_mode = b.stat_exact(&p("t")).unwrap().posix.mode;
    let (h, _) = b.open_exact(&p("l"), attrs_only).unwrap();
    assert_eq!(h.attrs().unwrap().posix.kind, FileKind::Symlink);
    assert!(h.set_mode(0o600).is_err());
    assert!(h.set_len(0).is_err());
    assert_eq!(b.stat_exact(&p("t")).unwrap().posix.mode, target_mode);
    if creds::can_switch() {
        h.set_owner(Some(777), Some(778)).unwrap();
        let (l, t) = (b.stat_exact(&p("l")).unwrap(), b.stat_exact(&p("t")).unwrap());
        assert_eq!((l.posix.uid, l.posix.gid), (777, 778));
        assert_ne!(t.posix.uid, 777);
    }
    drop(h);
    assert_eq!(get(b, "t"), b"target data");
    assert!(matches!(b.open_exact(&p("l"), read_only_opts()), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.open_exact(&p("l"), opts(CreateMode::OpenOrCreate)), Err(VfsError::Exists)));
    assert!(matches!(b.open_exact(&p("l"), OpenOptions { directory: true, ..attrs_only }), Err(VfsError::NotADirectory)));
    // Renaming and removing move the link itself.
    b.rename_exact(&p("l"), &p("l2")).unwrap();
    assert_eq!(b.readlink(&p("l2")).unwrap(), "t");
    b.remove_exact(&p("l2")).unwrap();
    assert_eq!(get(b, "t"), b"target data");
    assert!(matches!(f.read_only().symlink("t", &p("r")), Err(VfsError::ReadOnly)));
}

fn hard_links_share_one_file(f: &dyn Fixture) {
    let b = f.backend();
    put(b, "a", b"data");
    mkdir(b, "d");
    let before = b.stat_exact(&p("a")).unwrap();
    assert_eq!(before.nlink, 1);
    assert_eq!(b.stat(&p("a")).unwrap().nlink, 1);
    b.link(&p("a"), &p("d\\b")).unwrap();
    let (a, l) = (b.stat_exact(&p("a")).unwrap(), b.stat_exact(&p("d\\b")).unwrap());
    assert_eq!((a.nlink, l.nlink, l.file_id), (2, 2, before.file_id));
    assert_eq!(b.stat(&p("a")).unwrap().nlink, 2);
    assert_eq!(get(b, "d\\b"), b"data");
    // A write through one name shows under the other.
    let h = exact_open(b, "d\\b", opts(CreateMode::OpenExisting)).unwrap();
    h.write_at(b"DATA", 0).unwrap();
    drop(h);
    assert_eq!(get(b, "a"), b"DATA");
    assert!(matches!(b.link(&p("a"), &p("d\\b")), Err(VfsError::Exists)));
    assert!(matches!(b.link(&p("d"), &p("d2")), Err(VfsError::IsADirectory)));
    assert!(matches!(b.link(&p("zz"), &p("d3")), Err(VfsError::NotFound)));
    // Renaming one link onto the other changes nothing.
    b.rename_exact(&p("a"), &p("d\\b")).unwrap();
    assert_eq!(b.stat_exact(&p("a")).unwrap().nlink, 2);
    b.remove_exact(&p("a")).unwrap();
    assert_eq!(b.stat_exact(&p("d\\b")).unwrap().nlink, 1);
    assert_eq!(get(b, "d\\b"), b"DATA");
    assert!(matches!(f.read_only().link(&p("d\\b"), &p("c")), Err(VfsError::ReadOnly)));
}

fn special_files(f: &dyn Fixture) {
    let b = f.backend();
    b.mknod(&p("fifo"), FileKind::Fifo, 0o640, (9, 9)).unwrap();
    let a = b.stat_exact(&p("fifo")).unwrap();
    assert_eq!((a.posix.kind, a.posix.mode, a.posix.rdev), (FileKind::Fifo, 0o640, (0, 0)));
    b.mknod(&p("sock"), FileKind::Socket, 0o600, (0, 0)).unwrap();
    assert_eq!(b.stat_exact(&p("sock")).unwrap().posix.kind, FileKind::Socket);
    assert!(matches!(b.mknod(&p("fifo"), FileKind::Fifo, 0o600, (0, 0)), Err(VfsError::Exists)));
    assert!(matches!(b.mknod(&p("file"), FileKind::File, 0o600, (0, 0)), Err(VfsError::InvalidName)));
    // Devices: where the process may make them, with their numbers.
    match b.mknod(&p("null"), FileKind::Char, 0o666, (1, 3)) {
        Ok(()) => assert_eq!(b.stat_exact(&p("null")).unwrap().posix.rdev, (1, 3)),
        Err(e) => assert!(matches!(e, VfsError::PermissionDenied), "{e:?}"),
    }
    // SMB neither opens nor lists them; NFS opens them for attributes.
    assert!(matches!(open(b, "fifo", read_only_opts()), Err(VfsError::PermissionDenied)));
    let attrs_only = OpenOptions { read: false, write: false, ..opts(CreateMode::OpenExisting) };
    let (h, _) = b.open_exact(&p("fifo"), attrs_only).unwrap();
    h.set_mode(0o604).unwrap();
    assert_eq!(b.stat_exact(&p("fifo")).unwrap().posix.mode, 0o604);
    assert_eq!(h.attrs().unwrap().posix.kind, FileKind::Fifo);
    drop(h);
    assert!(matches!(b.open_exact(&p("fifo"), read_only_opts()), Err(VfsError::PermissionDenied)));
    assert!(!names(b, "").contains(&"fifo".to_string()));
    assert!(b.read_dir_exact(&p("")).unwrap().iter().any(|e| e.name == "fifo" && e.attrs.posix.kind == FileKind::Fifo));
    b.remove_exact(&p("fifo")).unwrap();
    assert!(matches!(b.stat_exact(&p("fifo")), Err(VfsError::NotFound)));
    assert!(matches!(f.read_only().mknod(&p("x"), FileKind::Fifo, 0o600, (0, 0)), Err(VfsError::ReadOnly)));
}

fn posix_rename_replaces(f: &dyn Fixture) {
    let b = f.backend();
    put(b, "a", b"A");
    put(b, "b", b"B");
    let ida = b.stat_exact(&p("a")).unwrap().file_id;
    assert_eq!(b.stat_exact(&p("b")).unwrap().size, 1);
    b.rename_exact(&p("a"), &p("b")).unwrap();
    assert_eq!(b.stat_exact(&p("b")).unwrap().file_id, ida);
    assert!(matches!(b.stat_exact(&p("a")), Err(VfsError::NotFound)));
    assert_eq!(get(b, "b"), b"A");
    b.mkdir(&p("d1"), 0o755).unwrap();
    b.mkdir(&p("d2"), 0o755).unwrap();
    b.mkdir(&p("full"), 0o755).unwrap();
    put(b, "full\\x", b"x");
    assert!(matches!(b.rename_exact(&p("b"), &p("d1")), Err(VfsError::IsADirectory)));
    assert!(matches!(b.rename_exact(&p("d1"), &p("b")), Err(VfsError::NotADirectory)));
    assert!(matches!(b.rename_exact(&p("d1"), &p("full")), Err(VfsError::NotEmpty | VfsError::Exists)));
    // A directory replaces an empty one.
    b.rename_exact(&p("d1"), &p("d2")).unwrap();
    assert!(matches!(b.stat_exact(&p("d1")), Err(VfsError::NotFound)));
    // Into a directory, keeping what it holds.
    b.rename_exact(&p("full"), &p("d2\\moved")).unwrap();
    assert_eq!(get(b, "d2\\moved\\x"), b"x");
    assert!(matches!(b.rename_exact(&p("d2"), &p("d2\\moved\\in")), Err(VfsError::PermissionDenied)));
    assert!(matches!(f.read_only().rename_exact(&p("b"), &p("c")), Err(VfsError::ReadOnly)));
    assert!(matches!(f.read_only().remove_exact(&p("b")), Err(VfsError::ReadOnly)));
}

fn file_tokens_follow_the_file(f: &dyn Fixture) {
    let b = f.backend();
    put(b, "f", b"x");
    mkdir(b, "d");
    b.symlink("f", &p("d\\l")).unwrap();
    for path in ["", "f", "d", "d\\l"] {
        let t = b.file_token(&p(path)).unwrap();
        assert!(!t.is_empty() && t.len() <= MAX_TOKEN_LEN, "{path}: {}", t.len());
        assert_eq!(b.resolve_token(&t).unwrap(), p(path), "{path}");
        // The same object gives the same token.
        assert_eq!(b.file_token(&p(path)).unwrap(), t);
    }
    let t = b.file_token(&p("f")).unwrap();
    b.rename_exact(&p("f"), &p("d\\g")).unwrap();
    assert_eq!(b.resolve_token(&t).unwrap(), p("d\\g"));
    let td = b.file_token(&p("d")).unwrap();
    b.rename_exact(&p("d"), &p("e")).unwrap();
    assert_eq!(b.resolve_token(&td).unwrap(), p("e"));
    assert_eq!(b.resolve_token(&t).unwrap(), p("e\\g"));
    // A removed file's token is stale, even once a new file takes its place.
    b.remove_exact(&p("e\\g")).unwrap();
    assert!(matches!(b.resolve_token(&t), Err(VfsError::NotFound)));
    put(b, "e\\g", b"new");
    put(b, "e\\h", b"new");
    assert!(matches!(b.resolve_token(&t), Err(VfsError::NotFound)));
    // A change of case (SMB's rename) keeps the token.
    let t2 = b.file_token(&p("e\\h")).unwrap();
    b.rename(&p("e\\h"), &p("e\\H"), false).unwrap();
    assert_eq!(b.resolve_token(&t2).unwrap(), p("e\\H"));
    b.rename(&p("e\\H"), &p("e\\h"), false).unwrap();
    // A file with two names resolves to one of them.
    b.link(&p("e\\h"), &p("h2")).unwrap();
    let r = b.resolve_token(&t2).unwrap();
    assert!(r == p("e\\h") || r == p("h2"), "{r}");
    for bad in [&[][..], &[1u8][..], &[0xff; 41][..]] {
        assert!(b.resolve_token(bad).is_err());
    }
}

fn creds_decide_the_owner_of_new_objects(f: &dyn Fixture) {
    if !creds::can_switch() {
        eprintln!("not root: skipped");
        return;
    }
    let b = f.backend();
    b.mkdir(&p("pub"), 0o777).unwrap();
    let c = creds::Creds { uid: 65534, gid: 65533, groups: vec![] };
    creds::with_creds(&c, || {
        b.open_exact(&p("pub\\f"), opts(CreateMode::CreateNew)).unwrap();
        b.mkdir(&p("pub\\d"), 0o755).unwrap();
        b.symlink("f", &p("pub\\l")).unwrap();
    })
    .unwrap();
    for name in ["pub\\f", "pub\\d", "pub\\l"] {
        let a = b.stat_exact(&p(name)).unwrap();
        assert_eq!((a.posix.uid, a.posix.gid), (65534, 65533), "{name}");
    }
    assert_eq!(creds::current_fs_ids().0, 0);
}

/// Named streams: created, read and written through a [`StreamHandle`], listed with their
/// sizes, found case-insensitively, bounded, removed, and gone with the file.
fn named_streams(f: &dyn Fixture) {
    let b = f.backend();
    put(b, "f.txt", b"main");
    let h: Arc<dyn FileHandle> = Arc::from(open(b, "f.txt", opts(CreateMode::OpenExisting)).unwrap());
    assert_eq!(h.streams().unwrap(), vec![]);
    assert!(h.read_stream("Zone.Identifier").unwrap().is_none());
    h.write_stream("Zone.Identifier", Some(b"")).unwrap();
    let s = StreamHandle::new(h.clone(), "Zone.Identifier".into());
    assert_eq!(s.stream_name(), Some("Zone.Identifier"));
    assert_eq!(s.write_at(b"[ZoneTransfer]", 0).unwrap(), 14);
    assert_eq!(s.write_at(b"!", 20).unwrap(), 1);
    assert_eq!(s.size().unwrap(), 21);
    assert_eq!(s.attrs().unwrap().size, 21);
    assert_eq!(s.attrs().unwrap().file_id, h.attrs().unwrap().file_id);
    assert_eq!(read_all(&s), b"[ZoneTransfer]\0\0\0\0\0\0!".to_vec());
    // The main stream is untouched; names are case-insensitive and keep their spelling.
    assert_eq!(get(b, "f.txt"), b"main");
    let (stored, data) = h.read_stream("zone.identifier").unwrap().unwrap();
    assert_eq!((stored.as_str(), data.len()), ("Zone.Identifier", 21));
    h.write_stream("ZONE.IDENTIFIER", Some(b"x")).unwrap();
    h.write_stream("second", Some(b"22")).unwrap();
    assert_eq!(h.streams().unwrap(), vec![("Zone.Identifier".to_string(), 1), ("second".to_string(), 2)]);
    s.set_len(0).unwrap();
    assert_eq!(s.size().unwrap(), 0);
    assert!(matches!(h.write_stream("", Some(b"x")), Err(VfsError::InvalidName)));
    // A large stream (a 1 MiB resource fork) written in 64 KiB pieces reads back whole.
    let big: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
    h.write_stream("AFP_Resource", Some(b"")).unwrap();
    let r = StreamHandle::new(h.clone(), "AFP_Resource".into());
    for (i, piece) in big.chunks(64 << 10).enumerate() {
        assert_eq!(r.write_at(piece, (i * (64 << 10)) as u64).unwrap(), piece.len());
    }
    assert_eq!(r.size().unwrap(), 1 << 20);
    assert_eq!(read_whole(&r), big);
    assert_eq!(h.find_stream("afp_resource").unwrap(), Some(("AFP_Resource".to_string(), 1 << 20)));
    r.set_len(100_000).unwrap();
    assert_eq!(read_whole(&r), big[..100_000].to_vec());
    assert_eq!(h.streams().unwrap().iter().find(|(n, _)| n == "AFP_Resource").unwrap().1, 100_000);
    // Renamed within the file: the content moves, another name is kept unless replaced.
    h.rename_stream("afp_resource", "Moved", false).unwrap();
    assert!(matches!(h.rename_stream("Moved", "second", false), Err(VfsError::Exists)));
    assert!(matches!(h.rename_stream("gone", "x", false), Err(VfsError::NotFound)));
    assert_eq!(h.read_stream("moved").unwrap().unwrap(), ("Moved".to_string(), big[..100_000].to_vec()));
    h.rename_stream("Moved", "second", true).unwrap();
    assert_eq!(h.find_stream("second").unwrap(), Some(("second".to_string(), 100_000)));
    h.write_stream("second", Some(b"22")).unwrap();
    assert_eq!(s.size().unwrap(), 0);
    h.write_stream("Second", None).unwrap();
    h.write_stream("never", None).unwrap();
    assert_eq!(h.streams().unwrap(), vec![("Zone.Identifier".to_string(), 0)]);
    // Streams go with the file.
    drop((s, h));
    b.remove(&p("f.txt")).unwrap();
    put(b, "f.txt", b"new");
    let h = open(b, "f.txt", opts(CreateMode::OpenExisting)).unwrap();
    assert_eq!(h.streams().unwrap(), vec![]);
}

/// All of `h`, read in 64 KiB pieces.
fn read_whole(h: &dyn FileHandle) -> Vec<u8> {
    let (mut out, mut buf) = (Vec::new(), vec![0u8; 64 << 10]);
    loop {
        let n = h.read_at(&mut buf, out.len() as u64).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Instantiates every conformance test for one fixture type.
macro_rules! conformance {
    ($module:ident, $fixture:expr) => {
        mod $module {
            use super::*;
            conformance!(@tests $fixture;
                open_dispositions, read_write_truncate_extend, rename_and_remove, attributes_of_new_objects,
                dos_attributes_round_trip, sparse_mark_and_zeroed_ranges, set_times_round_trip, read_dir_sorted, read_only_backend_refuses_changes,
                statfs_figures, concurrent_positional_io, case_insensitive_lookup_preserves_case,
                case_insensitive_rename, security_descriptor_round_trip, extended_attributes_round_trip,
                posix_attributes_and_modes, exact_names_never_fall_back, symlinks_are_not_followed, hard_links_share_one_file,
                special_files, posix_rename_replaces, file_tokens_follow_the_file, creds_decide_the_owner_of_new_objects,
                named_streams);
        }
    };
    (@tests $fixture:expr; $($name:ident),+) => {
        $(
            #[test]
            fn $name() {
                let f = $fixture;
                super::$name(&f);
            }
        )+
    };
}

conformance!(local, Local::new());
conformance!(memory, Memory::new());
conformance!(cached, Cached::new());
