//! Behaviour of `LocalBackend` on a real (tmpfs when available) directory.

use braid_vfs::{dos, Backend, CreateMode, FileHandle, LocalBackend, OpenOptions, OpenOutcome, SetTimes, SharePath, VfsError};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A scratch directory removed on drop; under /dev/shm (tmpfs has user xattrs) if present.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("braid-vfs-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("share")).unwrap();
        fs::create_dir_all(dir.join("outside")).unwrap();
        fs::write(dir.join("outside/secret"), b"top secret").unwrap();
        Scratch(dir)
    }
    fn share(&self) -> PathBuf {
        self.0.join("share")
    }
    fn backend(&self) -> LocalBackend {
        LocalBackend::new(&self.share(), false).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn p(s: &str) -> SharePath {
    SharePath::from_smb(s).unwrap()
}

fn opts(create: CreateMode) -> OpenOptions {
    OpenOptions { read: true, write: true, create, truncate: false, directory: false, non_directory: false }
}

fn read_only_opts() -> OpenOptions {
    OpenOptions { write: false, ..opts(CreateMode::OpenExisting) }
}

fn dir_opts(create: CreateMode) -> OpenOptions {
    OpenOptions { write: false, directory: true, ..opts(create) }
}

fn open(b: &LocalBackend, path: &str, o: OpenOptions) -> Result<Box<dyn FileHandle>, VfsError> {
    b.open(&p(path), o).map(|(h, _)| h)
}

fn read_all(h: &dyn FileHandle) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 16];
    let n = h.read_at(&mut buf, 0).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn backend_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<LocalBackend>();
    check::<braid_vfs::LocalHandle>();
}

#[test]
fn escapes_are_refused_and_inside_links_work() {
    let s = Scratch::new();
    let share = s.share();
    fs::create_dir_all(share.join("data")).unwrap();
    fs::create_dir_all(share.join("sub")).unwrap();
    fs::write(share.join("data/file.txt"), b"inside").unwrap();
    symlink("/etc", share.join("etc")).unwrap();
    symlink("/etc/passwd", share.join("passwd")).unwrap();
    symlink("../outside", share.join("out")).unwrap();
    symlink("../outside/secret", share.join("outfile")).unwrap();
    symlink("c2", share.join("c1")).unwrap();
    symlink("../outside", share.join("c2")).unwrap();
    symlink("../../outside", share.join("sub/mid")).unwrap();
    symlink("/proc/self/root", share.join("magic")).unwrap();
    symlink("nowhere", share.join("dangling")).unwrap();
    symlink("loop2", share.join("loop1")).unwrap();
    symlink("loop1", share.join("loop2")).unwrap();
    // Links that stay inside, including one climbing with `..`.
    symlink("data/file.txt", share.join("inlink")).unwrap();
    symlink("../data", share.join("sub/up")).unwrap();
    let absolute_inside = share.join("data");
    symlink(&absolute_inside, share.join("absin")).unwrap();

    let b = s.backend();
    for path in [
        "etc\\passwd",
        "etc",
        "passwd",
        "out\\secret",
        "out",
        "outfile",
        "c1\\secret",
        "c1",
        "sub\\mid\\secret",
        "magic\\etc\\passwd",
        // Absolute links are refused even when they point back inside.
        "absin\\file.txt",
    ] {
        let r = open(&b, path, read_only_opts());
        assert!(matches!(r, Err(VfsError::Escape)), "{path}: {r:?}");
        let r = b.stat(&p(path));
        assert!(matches!(r, Err(VfsError::Escape)), "stat {path}: {r:?}");
    }
    for path in ["..\\outside\\secret", "\\..\\outside", "/etc/passwd", "a/../../x", "C:\\x"] {
        assert!(matches!(SharePath::from_smb(path), Err(VfsError::InvalidName)), "{path}");
    }
    // Creating, removing and renaming through an escaping directory link.
    let r = b.open(&p("out\\new"), opts(CreateMode::CreateNew));
    assert!(matches!(r, Err(VfsError::Escape)), "{r:?}");
    let r = b.open(&p("out\\newdir"), dir_opts(CreateMode::OpenOrCreate));
    assert!(matches!(r, Err(VfsError::Escape)), "{r:?}");
    assert!(matches!(b.remove(&p("out\\secret")), Err(VfsError::Escape)));
    assert!(matches!(b.rename(&p("data\\file.txt"), &p("out\\stolen"), false), Err(VfsError::Escape)));
    assert!(matches!(b.rename(&p("out\\secret"), &p("grabbed"), false), Err(VfsError::Escape)));
    let outside: Vec<_> = fs::read_dir(s.0.join("outside")).unwrap().collect();
    assert_eq!(outside.len(), 1, "nothing was created outside");

    // Dangling and looping links are simply missing.
    assert!(matches!(open(&b, "dangling", read_only_opts()), Err(VfsError::NotFound)));
    assert!(matches!(open(&b, "loop1", read_only_opts()), Err(VfsError::NotFound)));

    // In-share links work.
    let h = open(&b, "inlink", read_only_opts()).unwrap();
    assert_eq!(read_all(&*h), b"inside");
    let h = open(&b, "sub\\up\\file.txt", read_only_opts()).unwrap();
    assert_eq!(read_all(&*h), b"inside");
    assert!(b.stat(&p("sub\\up")).unwrap().is_dir);

    // Listings leave out links that escape, dangle or loop.
    let root = open(&b, "", dir_opts(CreateMode::OpenExisting)).unwrap();
    let names: Vec<_> = root.read_dir().unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["data", "inlink", "sub"]);
    let sub = open(&b, "sub", dir_opts(CreateMode::OpenExisting)).unwrap();
    let entries = sub.read_dir().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "up");
    assert!(entries[0].attrs.is_dir);
}

#[test]
fn open_dispositions() {
    let s = Scratch::new();
    let b = s.backend();
    let r = open(&b, "missing", opts(CreateMode::OpenExisting));
    assert!(matches!(r, Err(VfsError::NotFound)), "{r:?}");
    let r = open(&b, "nodir\\file", opts(CreateMode::OpenOrCreate));
    assert!(matches!(r, Err(VfsError::PathNotFound)), "{r:?}");

    let (_, outcome) = b.open(&p("f"), opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
    assert!(matches!(open(&b, "f", opts(CreateMode::CreateNew)), Err(VfsError::Exists)));
    let (_, outcome) = b.open(&p("f"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Opened);
    let (_, outcome) = b.open(&p("g"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
    // A file in the middle of a path is a missing path, not a missing file.
    let r = open(&b, "f\\x", opts(CreateMode::OpenExisting));
    assert!(matches!(r, Err(VfsError::PathNotFound)), "{r:?}");

    let r = open(&b, "f", dir_opts(CreateMode::OpenExisting));
    assert!(matches!(r, Err(VfsError::NotADirectory)), "{r:?}");
    let r = open(&b, "f", dir_opts(CreateMode::OpenOrCreate));
    assert!(matches!(r, Err(VfsError::NotADirectory)), "{r:?}");

    let (d, outcome) = b.open(&p("d"), dir_opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
    assert!(d.attrs().unwrap().is_dir);
    assert_eq!(fs::metadata(s.share().join("d")).unwrap().permissions().mode() & 0o700, 0o700);
    let (_, outcome) = b.open(&p("d"), dir_opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Opened);
    assert!(matches!(open(&b, "d", dir_opts(CreateMode::CreateNew)), Err(VfsError::Exists)));
    let non_dir = OpenOptions { non_directory: true, write: false, ..opts(CreateMode::OpenExisting) };
    assert!(matches!(open(&b, "d", non_dir), Err(VfsError::IsADirectory)));
    // Without either flag, a directory opens as a directory.
    let h = open(&b, "d", opts(CreateMode::OpenExisting)).unwrap();
    assert!(h.attrs().unwrap().is_dir);
    assert!(matches!(h.write_at(b"x", 0), Err(VfsError::IsADirectory)));

    // The root.
    let root = open(&b, "", dir_opts(CreateMode::OpenExisting)).unwrap();
    assert!(root.attrs().unwrap().is_dir);
    assert!(matches!(open(&b, "\\", dir_opts(CreateMode::CreateNew)), Err(VfsError::Exists)));

    // A new file in a new directory.
    let h = open(&b, "d\\inner.txt", opts(CreateMode::CreateNew)).unwrap();
    h.write_at(b"hi", 0).unwrap();
    assert_eq!(fs::read(s.share().join("d/inner.txt")).unwrap(), b"hi");
    assert_eq!(fs::metadata(s.share().join("d/inner.txt")).unwrap().permissions().mode() & 0o600, 0o600);

    // Special files are not served.
    let fifo = s.share().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    assert!(matches!(open(&b, "fifo", read_only_opts()), Err(VfsError::PermissionDenied)));
}

#[test]
fn read_write_truncate_extend() {
    let s = Scratch::new();
    let b = s.backend();
    let h = open(&b, "file", opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(h.write_at(b"hello world", 0).unwrap(), 11);
    assert_eq!(h.write_at(b"WORLD", 6).unwrap(), 5);
    assert_eq!(read_all(&*h), b"hello WORLD");
    let mut buf = [0u8; 4];
    assert_eq!(h.read_at(&mut buf, 9).unwrap(), 2);
    assert_eq!(&buf[..2], b"LD");
    assert_eq!(h.read_at(&mut buf, 100).unwrap(), 0);
    assert_eq!(h.read_at(&mut buf, u64::MAX).unwrap(), 0);
    assert!(matches!(h.write_at(b"x", u64::MAX - 1), Err(VfsError::TooLarge)));

    // Sparse write past the end fills with zeros.
    h.write_at(b"!", 20).unwrap();
    let data = read_all(&*h);
    assert_eq!(data.len(), 21);
    assert!(data[11..20].iter().all(|&c| c == 0));

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
    let h2 = open(&b, "file", t).unwrap();
    assert_eq!(h2.attrs().unwrap().size, 0);

    // Software-enforced access.
    fs::write(s.share().join("file"), b"abc").unwrap();
    let ro = open(&b, "file", read_only_opts()).unwrap();
    assert!(matches!(ro.write_at(b"x", 0), Err(VfsError::PermissionDenied)));
    assert_eq!(read_all(&*ro), b"abc");
    // Metadata changes still work on a handle opened without write access.
    ro.set_len(2).unwrap();
    assert_eq!(read_all(&*ro), b"ab");
    let wo = open(&b, "file", OpenOptions { read: false, ..opts(CreateMode::OpenExisting) }).unwrap();
    assert!(matches!(wo.read_at(&mut buf, 0), Err(VfsError::PermissionDenied)));
    wo.write_at(b"Z", 0).unwrap();
    assert_eq!(fs::read(s.share().join("file")).unwrap(), b"Zb");
    // Attribute-only open.
    let none = OpenOptions { read: false, write: false, ..opts(CreateMode::OpenExisting) };
    let h = open(&b, "file", none).unwrap();
    assert_eq!(h.attrs().unwrap().size, 2);

    // A large buffer goes through whole.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
    let h = open(&b, "big", opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(h.write_at(&big, 7).unwrap(), big.len());
    let mut back = vec![0u8; big.len()];
    assert_eq!(h.read_at(&mut back, 7).unwrap(), big.len());
    assert!(back == big);
}

#[test]
fn rename_and_remove() {
    let s = Scratch::new();
    let share = s.share();
    fs::write(share.join("a"), b"A").unwrap();
    fs::write(share.join("b"), b"B").unwrap();
    fs::create_dir_all(share.join("d1/inner")).unwrap();
    fs::create_dir(share.join("d2")).unwrap();
    let b = s.backend();

    assert!(matches!(b.rename(&p("a"), &p("b"), false), Err(VfsError::Exists)));
    b.rename(&p("a"), &p("b"), true).unwrap();
    assert_eq!(fs::read(share.join("b")).unwrap(), b"A");
    assert!(!share.join("a").exists());
    b.rename(&p("b"), &p("c"), false).unwrap();
    assert_eq!(fs::read(share.join("c")).unwrap(), b"A");
    b.rename(&p("c"), &p("c"), false).unwrap();
    assert!(matches!(b.rename(&p("a"), &p("z"), false), Err(VfsError::NotFound)));
    assert!(matches!(b.rename(&p("c"), &p("nope\\c"), false), Err(VfsError::PathNotFound)));
    // Directories are never replaced, nor do they replace files.
    assert!(matches!(b.rename(&p("c"), &p("d2"), true), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.rename(&p("d2"), &p("c"), true), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.rename(&p("d1"), &p("d2"), true), Err(VfsError::PermissionDenied)));
    // Into a subdirectory, and a directory into itself.
    b.rename(&p("c"), &p("d1\\inner\\c"), false).unwrap();
    assert!(share.join("d1/inner/c").exists());
    assert!(matches!(b.rename(&p("d1"), &p("d1\\inner\\d1"), false), Err(VfsError::PermissionDenied)));
    b.rename(&p("d2"), &p("d3"), false).unwrap();
    assert!(share.join("d3").is_dir());
    // The root is untouchable.
    assert!(matches!(b.rename(&p(""), &p("x"), false), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.rename(&p("d3"), &p(""), true), Err(VfsError::PermissionDenied)));
    assert!(matches!(b.remove(&p("")), Err(VfsError::PermissionDenied)));

    assert!(matches!(b.remove(&p("d1")), Err(VfsError::NotEmpty)));
    assert!(matches!(b.remove(&p("missing")), Err(VfsError::NotFound)));
    assert!(matches!(b.remove(&p("x\\missing")), Err(VfsError::PathNotFound)));
    b.remove(&p("d1\\inner\\c")).unwrap();
    b.remove(&p("d1\\inner")).unwrap();
    b.remove(&p("d1")).unwrap();
    b.remove(&p("d3")).unwrap();
    assert_eq!(fs::read_dir(&share).unwrap().count(), 0);

    // A symlink is renamed and removed as itself, never its target.
    fs::write(share.join("t"), b"T").unwrap();
    symlink("t", share.join("l")).unwrap();
    b.rename(&p("l"), &p("l2"), false).unwrap();
    b.remove(&p("l2")).unwrap();
    assert_eq!(fs::read(share.join("t")).unwrap(), b"T");
}

#[test]
fn dos_attributes_round_trip() {
    let s = Scratch::new();
    let b = s.backend();
    let h = open(&b, "f", opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(h.attrs().unwrap().dos_attributes, dos::ARCHIVE);
    h.set_dos_attributes(dos::HIDDEN | dos::SYSTEM | dos::DIRECTORY | dos::NORMAL).unwrap();
    assert_eq!(h.attrs().unwrap().dos_attributes, dos::HIDDEN | dos::SYSTEM);
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, dos::HIDDEN | dos::SYSTEM);
    h.set_dos_attributes(dos::READONLY | dos::ARCHIVE).unwrap();
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, dos::READONLY | dos::ARCHIVE);
    // READONLY is kept in the xattr only; the mode is untouched.
    let mode = fs::metadata(s.share().join("f")).unwrap().permissions().mode();
    assert_ne!(mode & 0o200, 0);
    h.set_dos_attributes(0).unwrap();
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, 0);

    let d = open(&b, "d", dir_opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(d.attrs().unwrap().dos_attributes, dos::DIRECTORY);
    d.set_dos_attributes(dos::HIDDEN).unwrap();
    assert_eq!(d.attrs().unwrap().dos_attributes, dos::DIRECTORY | dos::HIDDEN);

    // A file without owner write permission reads as READONLY.
    fs::write(s.share().join("ro"), b"").unwrap();
    fs::set_permissions(s.share().join("ro"), fs::Permissions::from_mode(0o444)).unwrap();
    assert_eq!(b.stat(&p("ro")).unwrap().dos_attributes, dos::ARCHIVE | dos::READONLY);

    // Listings see the same attributes, also through an in-share symlink.
    symlink("f", s.share().join("lf")).unwrap();
    h.set_dos_attributes(dos::HIDDEN).unwrap();
    let root = open(&b, "", dir_opts(CreateMode::OpenExisting)).unwrap();
    let list = root.read_dir().unwrap();
    let get = |n: &str| list.iter().find(|e| e.name == n).unwrap().attrs.clone();
    assert_eq!(get("f").dos_attributes, dos::HIDDEN);
    assert_eq!(get("lf").dos_attributes, dos::HIDDEN);
    assert_eq!(get("lf").file_id, get("f").file_id);
    assert_eq!(get("d").dos_attributes, dos::DIRECTORY | dos::HIDDEN);
    assert_eq!(get("ro").dos_attributes, dos::ARCHIVE | dos::READONLY);
    assert_eq!(get("f"), b.stat(&p("f")).unwrap());
}

#[test]
fn set_times_round_trip() {
    let s = Scratch::new();
    let b = s.backend();
    let h = open(&b, "f", opts(CreateMode::CreateNew)).unwrap();
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
    let d = open(&b, "d", dir_opts(CreateMode::CreateNew)).unwrap();
    d.set_times(SetTimes { created: Some(created), modified: Some(modified), ..SetTimes::default() }).unwrap();
    let root = open(&b, "", dir_opts(CreateMode::OpenExisting)).unwrap();
    let list = root.read_dir().unwrap();
    let da = &list.iter().find(|e| e.name == "d").unwrap().attrs;
    assert_eq!((da.created, da.modified), (created, modified));
}

#[test]
fn read_dir_ten_thousand_sorted() {
    let s = Scratch::new();
    let dir = s.share().join("many");
    fs::create_dir(&dir).unwrap();
    let n = 10_000;
    for i in 0..n {
        // Reverse order of creation so sorting really matters.
        fs::write(dir.join(format!("f{:05}", n - i)), b"").unwrap();
    }
    fs::write(dir.join("bad:name"), b"").unwrap();
    let b = s.backend();
    let h = open(&b, "many", dir_opts(CreateMode::OpenExisting)).unwrap();
    let t = Instant::now();
    let list = h.read_dir().unwrap();
    let elapsed = t.elapsed();
    assert_eq!(list.len(), n, "names the share cannot express are left out");
    assert!(list.windows(2).all(|w| w[0].name < w[1].name));
    assert!(list.iter().all(|e| !e.attrs.is_dir && e.attrs.dos_attributes == dos::ARCHIVE));
    assert!(elapsed < Duration::from_secs(20), "listing took {elapsed:?}");
    // A second listing of the same handle starts over.
    assert_eq!(h.read_dir().unwrap().len(), n);
    let f = open(&b, "many\\f00001", read_only_opts()).unwrap();
    assert!(matches!(f.read_dir(), Err(VfsError::NotADirectory)));
}

#[test]
fn read_only_backend_refuses_changes() {
    let s = Scratch::new();
    fs::write(s.share().join("f"), b"data").unwrap();
    fs::create_dir(s.share().join("d")).unwrap();
    let b = LocalBackend::new(&s.share(), true).unwrap();
    assert!(b.is_read_only());
    for o in [
        opts(CreateMode::OpenExisting),
        opts(CreateMode::CreateNew),
        OpenOptions { write: false, ..opts(CreateMode::CreateNew) },
        OpenOptions { write: false, truncate: true, ..opts(CreateMode::OpenExisting) },
    ] {
        assert!(matches!(open(&b, "f", o), Err(VfsError::ReadOnly)), "{o:?}");
    }
    let oc = OpenOptions { write: false, ..opts(CreateMode::OpenOrCreate) };
    assert!(matches!(open(&b, "new", oc), Err(VfsError::ReadOnly)));
    assert!(open(&b, "f", oc).is_ok());
    assert!(matches!(open(&b, "newdir", dir_opts(CreateMode::OpenOrCreate)), Err(VfsError::ReadOnly)));
    assert!(matches!(b.remove(&p("f")), Err(VfsError::ReadOnly)));
    assert!(matches!(b.rename(&p("f"), &p("g"), false), Err(VfsError::ReadOnly)));

    let h = open(&b, "f", read_only_opts()).unwrap();
    assert_eq!(read_all(&*h), b"data");
    assert!(matches!(h.write_at(b"x", 0), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_len(0), Err(VfsError::ReadOnly)));
    assert!(matches!(h.allocate(10), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_dos_attributes(dos::HIDDEN), Err(VfsError::ReadOnly)));
    assert!(matches!(h.set_times(SetTimes { modified: Some(UNIX_EPOCH), ..SetTimes::default() }), Err(VfsError::ReadOnly)));
    let d = open(&b, "d", dir_opts(CreateMode::OpenExisting)).unwrap();
    assert_eq!(d.read_dir().unwrap().len(), 0);
    assert_eq!(fs::read(s.share().join("f")).unwrap(), b"data");
}

#[test]
fn statfs_and_new() {
    let s = Scratch::new();
    let b = s.backend();
    let st = b.statfs().unwrap();
    assert!(st.total_bytes > 0 && st.free_bytes <= st.total_bytes);
    assert!(st.avail_bytes <= st.free_bytes);
    assert!(st.block_size > 0);
    assert_eq!(st.max_name_len, 255);
    assert!(matches!(LocalBackend::new(&s.0.join("missing"), false), Err(VfsError::NotFound)));
    assert!(matches!(LocalBackend::new(&s.0.join("outside/secret"), false), Err(VfsError::NotADirectory)));
}

#[test]
fn concurrent_positional_io() {
    let s = Scratch::new();
    let b = s.backend();
    let h: std::sync::Arc<dyn FileHandle> = open(&b, "f", opts(CreateMode::CreateNew)).unwrap().into();
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

#[test]
fn case_insensitive_lookup_preserves_case() {
    let s = Scratch::new();
    let b = s.backend();
    fs::create_dir(s.share().join("Dir")).unwrap();
    fs::write(s.share().join("Dir/foo.txt"), b"hello").unwrap();

    // Open and stat through any spelling reach the on-disk entry.
    let h = open(&b, "DIR\\FOO.TXT", read_only_opts()).unwrap();
    assert_eq!(read_all(h.as_ref()), b"hello");
    assert_eq!(h.opened_path(), Some(p("Dir\\foo.txt")));
    assert_eq!(b.stat(&p("dir\\Foo.Txt")).unwrap().size, 5);
    assert!(matches!(b.stat(&p("dir\\nope")), Err(VfsError::NotFound)));
    assert!(matches!(b.stat(&p("nope\\foo.txt")), Err(VfsError::PathNotFound)));

    // An exclusive create of another spelling collides; open-or-create opens the existing.
    assert!(matches!(b.open(&p("dir\\FOO.TXT"), opts(CreateMode::CreateNew)), Err(VfsError::Exists)));
    let (h, outcome) = b.open(&p("DIR\\FOO.txt"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Opened);
    assert_eq!(h.opened_path(), Some(p("Dir\\foo.txt")));
    // A new file created through a differently cased parent lands in it, as spelled.
    let (h, outcome) = b.open(&p("DIR\\New.TXT"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(outcome, OpenOutcome::Created);
    assert_eq!(h.opened_path(), Some(p("Dir\\New.TXT")));
    assert!(s.share().join("Dir/New.TXT").is_file());
    b.open(&p("dIR\\sub"), dir_opts(CreateMode::CreateNew)).unwrap();
    assert!(s.share().join("Dir/sub").is_dir());
    assert!(matches!(b.open(&p("DIR\\SUB"), dir_opts(CreateMode::CreateNew)), Err(VfsError::Exists)));

    // Remove through another spelling.
    b.remove(&p("DIR\\NEW.txt")).unwrap();
    assert!(!s.share().join("Dir/New.TXT").exists());
    assert!(matches!(b.remove(&p("DIR\\NEW.txt")), Err(VfsError::NotFound)));
}

#[test]
fn case_insensitive_prefers_exact_then_byte_order() {
    let s = Scratch::new();
    let b = s.backend();
    fs::write(s.share().join("b.txt"), b"lower").unwrap();
    fs::write(s.share().join("B.TXT"), b"upper").unwrap();
    fs::write(s.share().join("B.txt"), b"mixed").unwrap();
    let read = |name: &str| read_all(open(&b, name, read_only_opts()).unwrap().as_ref());
    assert_eq!(read("b.txt"), b"lower");
    assert_eq!(read("B.txt"), b"mixed");
    // No exact match: the first in byte order ("B.TXT" < "B.txt" < "b.txt").
    assert_eq!(read("b.TXT"), b"upper");
    // Unicode folding beyond ASCII.
    fs::write(s.share().join("Ärger.txt"), b"x").unwrap();
    assert_eq!(read("äRGER.TXT"), b"x");
}

#[test]
fn case_insensitive_rename() {
    let s = Scratch::new();
    let b = s.backend();
    fs::write(s.share().join("foo.txt"), b"1").unwrap();
    fs::write(s.share().join("bar.txt"), b"2").unwrap();
    fs::create_dir(s.share().join("Dir")).unwrap();

    // Changing only the case of the same file works, with or without replace.
    b.rename(&p("foo.txt"), &p("FOO.TXT"), false).unwrap();
    assert!(s.share().join("FOO.TXT").is_file());
    assert!(!s.share().join("foo.txt").exists());
    b.rename(&p("foo.txt"), &p("Foo.txt"), true).unwrap();
    assert_eq!(fs::read(s.share().join("Foo.txt")).unwrap(), b"1");

    // A target existing in another case collides, or is replaced under the new spelling.
    assert!(matches!(b.rename(&p("BAR.TXT"), &p("FOO.txt"), false), Err(VfsError::Exists)));
    b.rename(&p("BAR.TXT"), &p("FOO.txt"), true).unwrap();
    let names: Vec<String> = {
        let mut v: Vec<String> = fs::read_dir(s.share()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    };
    assert_eq!(names, ["Dir", "FOO.txt"]);
    assert_eq!(fs::read(s.share().join("FOO.txt")).unwrap(), b"2");

    // Into a directory through a differently cased parent.
    b.rename(&p("foo.TXT"), &p("dir\\Moved.txt"), false).unwrap();
    assert_eq!(fs::read(s.share().join("Dir/Moved.txt")).unwrap(), b"2");
    assert!(matches!(b.rename(&p("gone"), &p("x"), false), Err(VfsError::NotFound)));
    assert!(matches!(b.rename(&p("DIR\\MOVED.TXT"), &p("nodir\\x"), false), Err(VfsError::PathNotFound)));
}

#[test]
fn case_insensitive_lookup_stays_beneath_root() {
    let s = Scratch::new();
    let b = s.backend();
    // A link out of the share is refused whatever the spelling used to reach it.
    symlink(s.0.join("outside"), s.share().join("Out")).unwrap();
    assert!(open(&b, "OUT\\secret", read_only_opts()).is_err());
    assert!(b.stat(&p("out\\SECRET")).is_err());
    symlink("../outside", s.share().join("Rel")).unwrap();
    assert!(open(&b, "rel\\secret", read_only_opts()).is_err());
    assert!(b.rename(&p("rel\\secret"), &p("stolen"), false).is_err());
    assert!(!s.share().join("stolen").exists());
    assert_eq!(fs::read(s.0.join("outside/secret")).unwrap(), b"top secret");
}

#[test]
fn security_descriptor_round_trip() {
    let s = Scratch::new();
    let b = s.backend();
    let h = open(&b, "f", opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(h.security_descriptor().unwrap(), None);
    let sd = vec![1u8, 0, 4, 0x80, 7, 7, 7];
    h.set_security_descriptor(&sd).unwrap();
    // Through another handle, even a metadata-only one.
    let meta_only = OpenOptions { read: false, write: false, ..opts(CreateMode::OpenExisting) };
    let h2 = open(&b, "F", meta_only).unwrap();
    assert_eq!(h2.security_descriptor().unwrap(), Some(sd));
    h2.set_security_descriptor(&[9; 300]).unwrap();
    assert_eq!(h.security_descriptor().unwrap(), Some(vec![9; 300]));
    assert!(matches!(h.set_security_descriptor(&vec![0; braid_vfs::MAX_SECURITY_DESCRIPTOR_LEN + 1]), Err(VfsError::TooLarge)));
    let ro = LocalBackend::new(&s.share(), true).unwrap();
    let h3 = open(&ro, "f", read_only_opts()).unwrap();
    assert!(matches!(h3.set_security_descriptor(&[1]), Err(VfsError::ReadOnly)));
}

#[test]
fn extended_attributes_round_trip() {
    let s = Scratch::new();
    let b = s.backend();
    let h = open(&b, "f", opts(CreateMode::CreateNew)).unwrap();
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
    // Other xattrs (DOS attributes, descriptors) are not EAs.
    h.set_dos_attributes(dos::HIDDEN).unwrap();
    h.set_security_descriptor(&[1, 2, 3]).unwrap();
    assert_eq!(h.extended_attributes().unwrap().len(), braid_vfs::MAX_EAS);
}

/// A non-blocking read returns exactly what `read_at` returns, or declines; never other bytes.
fn check_nowait(dir: &Path, expect_inline: bool) {
    let share = dir.join("nowait-share");
    fs::create_dir_all(&share).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(share.join("f.bin"), &data).unwrap();
    let b = LocalBackend::new(&share, false).unwrap();
    let h = open(&b, "f.bin", read_only_opts()).unwrap();
    let fast = h.fast_paths().expect("a local handle offers fast paths");
    let mut buf = vec![0u8; 65536];
    match fast.read_at_nowait(&mut buf, 4096) {
        Some(r) => {
            assert_eq!(r.unwrap(), 65536);
            assert_eq!(buf, data[4096..4096 + 65536]);
        }
        None => assert!(!expect_inline, "a tmpfs read was not served inline"),
    }
    // Past the end: a memory file system answers the short read; a disk one may decline.
    let mut tail = vec![0u8; 1000];
    if let Some(r) = fast.read_at_nowait(&mut tail, 299_500) {
        assert_eq!(r.unwrap(), 500);
        assert_eq!(tail[..500], data[299_500..]);
    }
    // A handle without read access never reads.
    let w = open(&b, "f.bin", OpenOptions { read: false, ..opts(CreateMode::OpenExisting) }).unwrap();
    assert!(w.fast_paths().unwrap().read_at_nowait(&mut buf, 0).is_none());
    fs::remove_dir_all(&share).unwrap();
}

#[test]
fn read_at_nowait_on_tmpfs_is_inline_and_exact() {
    if !Path::new("/dev/shm").is_dir() {
        return;
    }
    let s = Scratch::new();
    check_nowait(&s.0, true);
}

#[test]
fn read_at_nowait_on_a_disk_file_system_is_exact_or_declines() {
    let dir = std::env::temp_dir().join(format!("braid-vfs-nowait-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    check_nowait(&dir, false);
    let _ = fs::remove_dir_all(&dir);
}
