//! Behaviour only `LocalBackend` has, on a real (tmpfs when available) directory: escapes
//! through symlinks, modes and xattrs on disk, names the share cannot express, several
//! on-disk spellings of one name, and the fast paths. What every backend shares is in
//! `conformance.rs`.

use braid_vfs::{dos, Backend, CreateMode, FileKind, LocalBackend, OpenOptions, SharePath, VfsError};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{dir_opts, open, opts, p, read_all, read_only_opts};

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
    let root = b.open(&SharePath::root(), dir_opts(CreateMode::OpenExisting)).unwrap().0;
    let names: Vec<_> = root.read_dir().unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["data", "inlink", "sub"]);
    let sub = open(&b, "sub", dir_opts(CreateMode::OpenExisting)).unwrap();
    let entries = sub.read_dir().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "up");
    assert!(entries[0].attrs.is_dir);
}

#[test]
fn created_objects_get_ordinary_modes_and_special_files_are_not_served() {
    let s = Scratch::new();
    let b = s.backend();
    open(&b, "d", dir_opts(CreateMode::CreateNew)).unwrap();
    assert_eq!(fs::metadata(s.share().join("d")).unwrap().permissions().mode() & 0o700, 0o700);
    let h = open(&b, "d\\inner.txt", opts(CreateMode::CreateNew)).unwrap();
    h.write_at(b"hi", 0).unwrap();
    assert_eq!(fs::read(s.share().join("d/inner.txt")).unwrap(), b"hi");
    assert_eq!(fs::metadata(s.share().join("d/inner.txt")).unwrap().permissions().mode() & 0o600, 0o600);

    let fifo = s.share().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    assert!(matches!(open(&b, "fifo", read_only_opts()), Err(VfsError::PermissionDenied)));
}

#[test]
fn symlinks_are_renamed_and_removed_as_themselves() {
    let s = Scratch::new();
    let share = s.share();
    let b = s.backend();
    fs::write(share.join("t"), b"T").unwrap();
    symlink("t", share.join("l")).unwrap();
    b.rename(&p("l"), &p("l2"), false).unwrap();
    assert!(fs::symlink_metadata(share.join("l2")).unwrap().file_type().is_symlink());
    b.remove(&p("l2")).unwrap();
    assert_eq!(fs::read(share.join("t")).unwrap(), b"T");
    assert!(!share.join("l2").exists());
}

#[test]
fn dos_attributes_live_in_xattrs_and_the_mode() {
    let s = Scratch::new();
    let b = s.backend();
    let h = open(&b, "f", opts(CreateMode::CreateNew)).unwrap();
    // READONLY is kept in the xattr only; the mode is untouched.
    h.set_dos_attributes(dos::READONLY | dos::ARCHIVE).unwrap();
    let mode = fs::metadata(s.share().join("f")).unwrap().permissions().mode();
    assert_ne!(mode & 0o200, 0);
    assert_eq!(b.stat(&p("f")).unwrap().dos_attributes, dos::READONLY | dos::ARCHIVE);

    // A file without owner write permission reads as READONLY.
    fs::write(s.share().join("ro"), b"").unwrap();
    fs::set_permissions(s.share().join("ro"), fs::Permissions::from_mode(0o444)).unwrap();
    assert_eq!(b.stat(&p("ro")).unwrap().dos_attributes, dos::ARCHIVE | dos::READONLY);

    // Listings see the same attributes, also through an in-share symlink.
    symlink("f", s.share().join("lf")).unwrap();
    h.set_dos_attributes(dos::HIDDEN).unwrap();
    let root = b.open(&SharePath::root(), dir_opts(CreateMode::OpenExisting)).unwrap().0;
    let list = root.read_dir().unwrap();
    let get = |n: &str| list.iter().find(|e| e.name == n).unwrap().attrs.clone();
    assert_eq!(get("lf").dos_attributes, dos::HIDDEN);
    assert_eq!(get("lf").file_id, get("f").file_id);
    assert_eq!(get("ro").dos_attributes, dos::ARCHIVE | dos::READONLY);
}

/// Blocks the file at `path` occupies, in bytes (st_blocks).
fn on_disk(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn punched_holes_free_space_and_allocated_ranges_see_them() {
    let s = Scratch::new();
    let b = s.backend();
    let h = open(&b, "s", opts(CreateMode::CreateNew)).unwrap();
    const MIB: u64 = 1 << 20;
    h.write_at(&vec![1u8; MIB as usize], 0).unwrap();
    h.write_at(&vec![2u8; MIB as usize], 64 * MIB).unwrap();
    h.set_sparse(true).unwrap();
    assert_eq!(h.allocated_ranges(0, 65 * MIB, 16).unwrap(), vec![(0, MIB), (64 * MIB, MIB)]);
    // The caller learns of more ranges than it can take by asking for one more.
    assert_eq!(h.allocated_ranges(0, 65 * MIB, 1).unwrap(), vec![(0, MIB)]);
    let a = h.attrs().unwrap();
    assert_eq!(a.alloc_size, on_disk(&s.share().join("s")), "allocation is st_blocks");
    assert!(a.alloc_size < 3 * MIB);

    h.zero_range(0, MIB, true).unwrap();
    assert_eq!(h.allocated_ranges(0, 65 * MIB, 16).unwrap(), vec![(64 * MIB, MIB)]);
    assert!(on_disk(&s.share().join("s")) < a.alloc_size);
    assert_eq!(h.attrs().unwrap().alloc_size, on_disk(&s.share().join("s")));
    assert_eq!(h.size().unwrap(), 65 * MIB);

    // Without deallocation the range stays allocated and reads as zeros.
    h.zero_range(64 * MIB, 4096, false).unwrap();
    assert_eq!(h.allocated_ranges(0, 65 * MIB, 16).unwrap(), vec![(64 * MIB, MIB)]);
    let mut buf = [9u8; 8192];
    h.read_at(&mut buf, 64 * MIB).unwrap();
    assert!(buf[..4096].iter().all(|&c| c == 0) && buf[4096..].iter().all(|&c| c == 2));

    // The mark is stored with the DOS attributes, for files only.
    let stored = xattr_u32(&s.share().join("s"));
    assert_eq!(stored & dos::SPARSE_FILE, dos::SPARSE_FILE);
}

/// The stored DOS attributes xattr of `path`.
fn xattr_u32(path: &Path) -> u32 {
    let mut v = [0u8; 4];
    assert_eq!(rustix::fs::getxattr(path, braid_vfs::DOS_ATTR_XATTR, &mut v).unwrap(), 4);
    u32::from_le_bytes(v)
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
fn statfs_and_new() {
    let s = Scratch::new();
    let b = s.backend();
    let st = b.statfs().unwrap();
    assert!(st.total_bytes > 0);
    assert!(matches!(LocalBackend::new(&s.0.join("missing"), false), Err(VfsError::NotFound)));
    assert!(matches!(LocalBackend::new(&s.0.join("outside/secret"), false), Err(VfsError::NotADirectory)));
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

/// A directory on a disk file system (the temp dir, else /var/tmp), or `None` if both are
/// kept in memory.
fn disk_dir(tag: &str) -> Option<PathBuf> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    [std::env::temp_dir(), PathBuf::from("/var/tmp")].into_iter().find_map(|base| {
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let t = rustix::fs::statfs(&base).ok()?.f_type as i64;
        (t != TMPFS_MAGIC && t != RAMFS_MAGIC).then(|| base.join(format!("braid-vfs-{tag}-{}", std::process::id())))
    })
}

/// A file on disk is mapped for a READ only while its pages are in the page cache: evicted,
/// the range is declined (the caller reads it the ordinary way); cached again, the range
/// holds the file's bytes, and after a cut the pages past the new end read as zeros.
#[test]
fn map_range_on_a_disk_file_system_serves_cached_pages_only() {
    let Some(dir) = disk_dir("mapped") else { return };
    let share = dir.join("share");
    fs::create_dir_all(&share).unwrap();
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 253) as u8).collect();
    fs::write(share.join("f.bin"), &data).unwrap();
    fs::File::open(share.join("f.bin")).unwrap().sync_all().unwrap();
    let b = LocalBackend::new(&share, false).unwrap();
    let h = open(&b, "f.bin", read_only_opts()).unwrap();
    let fast = h.fast_paths().unwrap();
    assert!(!fast.in_memory());
    // Clean pages that nothing maps are dropped from the page cache.
    let f = fs::File::open(share.join("f.bin")).unwrap();
    rustix::fs::fadvise(&f, 0, 0, rustix::fs::Advice::DontNeed).unwrap();
    assert!(fast.map_range(1 << 20, 1 << 20).is_none(), "evicted pages are not mapped");
    let mut all = vec![0u8; data.len()];
    assert_eq!(h.read_at(&mut all, 0).unwrap(), data.len());
    let m = fast.map_range(1 << 20, 1 << 20).expect("cached pages are mapped").unwrap();
    assert_eq!((m.offset(), m.len()), (1 << 20, 1 << 20));
    assert_eq!(m.with_bytes(<[u8]>::to_vec).unwrap(), &data[1 << 20..2 << 20]);
    // Small reads stay on the ordinary path; a range past the end is empty.
    assert!(fast.map_range(0, 4096).is_none());
    assert!(fast.map_range(8 << 20, 1 << 20).unwrap().unwrap().is_empty());
    // Cut under the range: the first page still holds the file's bytes, the rest zeros.
    fs::OpenOptions::new().write(true).open(share.join("f.bin")).unwrap().set_len((1 << 20) + 4096).unwrap();
    let got = m.with_bytes(<[u8]>::to_vec).unwrap();
    assert_eq!(&got[..4096], &data[1 << 20..(1 << 20) + 4096]);
    assert!(got[4096..].iter().all(|&b| b == 0));
    // A later range comes from a fresh window and ends at the new end of file.
    let again = fast.map_range(1 << 20, 1 << 20).expect("still cached").unwrap();
    assert_eq!(again.len(), 4096);
    assert_eq!(again.with_bytes(<[u8]>::to_vec).unwrap(), &data[1 << 20..(1 << 20) + 4096]);
    drop((m, again, h));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn file_tokens_survive_a_restart_and_never_leave_the_share() {
    if !braid_vfs::creds::can_switch() {
        // open_by_handle_at needs CAP_DAC_READ_SEARCH.
        eprintln!("not root: skipped");
        return;
    }
    let s = Scratch::new();
    fs::create_dir_all(s.share().join("a/b")).unwrap();
    fs::write(s.share().join("a/b/f"), b"x").unwrap();
    let b = s.backend();
    let t = b.file_token(&p("a\\b\\f")).unwrap();
    drop(b);
    // A new backend (a server restart) resolves the same token, also after outside renames.
    fs::rename(s.share().join("a/b"), s.share().join("a/c")).unwrap();
    let b = s.backend();
    assert_eq!(b.resolve_token(&t).unwrap(), p("a\\c\\f"));
    // A token of an object outside the share (made by a share rooted higher up) is refused.
    let wide = LocalBackend::new(&s.0, false).unwrap();
    let secret = wide.file_token(&p("outside\\secret")).unwrap();
    let top = wide.file_token(&p("")).unwrap();
    assert_eq!(wide.resolve_token(&secret).unwrap(), p("outside\\secret"));
    assert!(matches!(b.resolve_token(&secret), Err(VfsError::Escape)));
    assert!(matches!(b.resolve_token(&top), Err(VfsError::Escape)));
    // Moved out of the share: no longer reachable through it.
    fs::rename(s.share().join("a/c/f"), s.0.join("outside/f")).unwrap();
    assert!(matches!(b.resolve_token(&t), Err(VfsError::Escape)));
    // The share's root is the root, whoever made the token.
    let root = wide.file_token(&p("share")).unwrap();
    assert_eq!(b.resolve_token(&root).unwrap(), p(""));
    // Forged bytes never resolve.
    let mut forged = t.clone();
    let last = forged.len() - 1;
    forged[last] ^= 0x55;
    assert!(b.resolve_token(&forged).is_err());
}

#[test]
fn posix_modes_and_owners_on_disk() {
    use std::os::unix::fs::MetadataExt;
    let s = Scratch::new();
    let b = s.backend();
    b.mkdir(&p("d"), 0o2750).unwrap();
    assert_eq!(fs::metadata(s.share().join("d")).unwrap().mode() & 0o7777, 0o2750);
    b.mknod(&p("d\\fifo"), FileKind::Fifo, 0o666, (0, 0)).unwrap();
    let m = fs::symlink_metadata(s.share().join("d/fifo")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()));
    assert_eq!(m.mode() & 0o7777, 0o666);
    b.symlink("fifo", &p("d\\l")).unwrap();
    assert_eq!(fs::read_link(s.share().join("d/l")).unwrap(), Path::new("fifo"));
    // A handle opened for attributes only still changes mode and owner.
    let (h, _) = b.open_exact(&p("d"), OpenOptions { read: false, write: false, ..dir_opts(CreateMode::OpenExisting) }).unwrap();
    h.set_mode(0o711).unwrap();
    assert_eq!(fs::metadata(s.share().join("d")).unwrap().mode() & 0o7777, 0o711);
    if braid_vfs::creds::can_switch() {
        h.set_owner(Some(4242), Some(4343)).unwrap();
        let m = fs::metadata(s.share().join("d")).unwrap();
        assert_eq!((m.uid(), m.gid()), (4242, 4343));
    }
    // Names exact: a second spelling is a second file here.
    fs::write(s.share().join("Name"), b"1").unwrap();
    let (_, o) = b.open_exact(&p("name"), opts(CreateMode::OpenOrCreate)).unwrap();
    assert_eq!(o, braid_vfs::OpenOutcome::Created);
    assert_eq!(fs::read(s.share().join("Name")).unwrap(), b"1");
    assert_eq!(b.stat_exact(&p("name")).unwrap().size, 0);
}

#[test]
fn a_symlink_opened_as_itself_never_changes_its_target() {
    use std::os::unix::fs::MetadataExt;
    let s = Scratch::new();
    let secret = s.0.join("outside/secret");
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let before = fs::metadata(&secret).unwrap();
    symlink(&secret, s.share().join("abs")).unwrap();
    symlink("../outside/secret", s.share().join("rel")).unwrap();
    let b = s.backend();
    let attrs_only = OpenOptions { read: false, write: false, ..opts(CreateMode::OpenExisting) };
    for name in ["abs", "rel"] {
        let (h, _) = b.open_exact(&p(name), attrs_only).unwrap();
        assert_eq!(h.attrs().unwrap().posix.kind, FileKind::Symlink);
        assert!(h.set_mode(0o777).is_err());
        h.set_dos_attributes(dos::HIDDEN).unwrap();
        h.set_security_descriptor(b"sd").unwrap();
        // Stored nowhere or refused: either way not on the target (checked below).
        let _ = h.set_extended_attribute("X", b"y");
        let t = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000);
        h.set_times(braid_vfs::SetTimes { modified: Some(t), ..Default::default() }).unwrap();
        assert_eq!(fs::symlink_metadata(s.share().join(name)).unwrap().mtime(), 1_000_000);
        if braid_vfs::creds::can_switch() {
            h.set_owner(Some(999), Some(999)).unwrap();
            assert_eq!(fs::symlink_metadata(s.share().join(name)).unwrap().uid(), 999);
        }
    }
    let after = fs::metadata(&secret).unwrap();
    assert_eq!((after.mode(), after.uid(), after.mtime()), (before.mode(), before.uid(), before.mtime()));
    assert!(xattr_names(&secret).is_empty(), "{:?}", xattr_names(&secret));
    assert_eq!(fs::read(&secret).unwrap(), b"top secret");
}

/// The user xattrs of `path`.
fn xattr_names(path: &Path) -> Vec<String> {
    let mut buf = vec![0u8; 4096];
    let n = rustix::fs::listxattr(path, &mut buf).unwrap();
    buf.truncate(n);
    buf.split(|&b| b == 0).filter(|n| !n.is_empty()).map(|n| String::from_utf8_lossy(n).into_owned()).collect()
}

/// Small streams live in `user.braid.stream.<name>` xattrs on disk; a stream beyond
/// `SPILL_AT`, or one the file system will not hold in an xattr (ext4 keeps all of an
/// inode's xattrs in one block), moves to a spill file under `.braid-streams`, marked by a
/// `user.braid.spill.<name>` xattr. Checked on the share's tmpfs and on the temporary
/// directory's file system (ext4 here).
#[test]
fn streams_spill_from_xattrs_to_hidden_files() {
    use braid_vfs::{FileHandle, StreamHandle, SPILL_AT, SPILL_DIR};
    use std::sync::Arc;
    let tmp = std::env::temp_dir().join(format!("braid-vfs-streams-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).unwrap();
    let s = Scratch::new();
    for dir in [s.share(), tmp.clone()] {
        let b = LocalBackend::new(&dir, false).unwrap();
        let h: Arc<dyn FileHandle> = Arc::from(open(&b, "f", opts(CreateMode::OpenOrCreate)).unwrap());
        h.write_stream("Zone.Identifier", Some(b"[ZoneTransfer]")).unwrap();
        let mut buf = [0u8; 64];
        let n = rustix::fs::getxattr(dir.join("f"), "user.braid.stream.Zone.Identifier", &mut buf).unwrap();
        assert_eq!(&buf[..n], b"[ZoneTransfer]");
        assert!(!dir.join(SPILL_DIR).exists(), "{dir:?}: small streams stay in xattrs");
        // 6000 bytes: an xattr on tmpfs, past ext4's one block (ENOSPC) a spill file.
        let st = StreamHandle::new(h.clone(), "Zone.Identifier".into());
        st.write_at(&[7u8; 6000], 14).unwrap();
        assert_eq!(st.size().unwrap(), 6014);
        assert_eq!(&read_all(&st)[..16], b"[ZoneTransfer]\x07\x07");
        // ext4 (without ea_inode) refused the value (ENOSPC): the stream spilled below SPILL_AT.
        let ext4 = rustix::fs::statfs(&dir).is_ok_and(|f| f.f_type == 0xEF53);
        if ext4 {
            assert!(dir.join(SPILL_DIR).exists(), "{dir:?}");
        } else if dir == s.share() {
            assert!(!dir.join(SPILL_DIR).exists(), "tmpfs holds 6000 bytes in an xattr");
        }
        // A 1 MiB resource fork in 64 KiB writes: a spill file, read back whole.
        h.write_stream("AFP_Resource", Some(b"")).unwrap();
        let rf = StreamHandle::new(h.clone(), "AFP_Resource".into());
        let big: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        for (i, piece) in big.chunks(64 << 10).enumerate() {
            rf.write_at(piece, (i * (64 << 10)) as u64).unwrap();
        }
        let names = xattr_names(&dir.join("f"));
        assert!(names.contains(&"user.braid.spill.AFP_Resource".to_string()), "{names:?}");
        assert!(!names.contains(&"user.braid.stream.AFP_Resource".to_string()), "{names:?}");
        let keys: Vec<_> = fs::read_dir(dir.join(SPILL_DIR)).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(keys.len(), 1, "{keys:?}");
        assert_eq!(fs::read(keys[0].join("AFP_Resource")).unwrap(), big);
        assert!(h.streams().unwrap().contains(&("AFP_Resource".to_string(), 1 << 20)));
        // Shrunk below the threshold it stays a file; emptied, or rewritten whole and
        // small, it is an xattr again.
        rf.set_len(SPILL_AT / 2).unwrap();
        assert_eq!(rf.size().unwrap(), SPILL_AT / 2);
        assert!(keys[0].join("AFP_Resource").exists());
        rf.set_len(0).unwrap();
        assert!(!keys[0].join("AFP_Resource").exists());
        assert_eq!(h.find_stream("AFP_Resource").unwrap(), Some(("AFP_Resource".to_string(), 0)));
        rf.write_at(&big[..SPILL_AT as usize + 1], 0).unwrap();
        h.write_stream("AFP_Resource", Some(b"tiny")).unwrap();
        assert!(!keys[0].join("AFP_Resource").exists());
        assert_eq!(h.read_stream("afp_resource").unwrap().unwrap().1, b"tiny");
        // Hidden: not listed, not found, not creatable, by any spelling.
        let root = b.open(&SharePath::root(), dir_opts(CreateMode::OpenExisting)).unwrap().0;
        assert!(root.read_dir().unwrap().iter().all(|e| e.name != SPILL_DIR));
        assert!(!root.has_child(SPILL_DIR).unwrap());
        assert!(b.read_dir_exact(&SharePath::root()).unwrap().iter().all(|e| e.name != SPILL_DIR));
        assert!(matches!(b.stat(&p(".BRAID-STREAMS")), Err(VfsError::NotFound)));
        assert!(matches!(open(&b, ".braid-streams", opts(CreateMode::OpenExisting)), Err(VfsError::NotFound)));
        assert!(matches!(open(&b, ".braid-streams\\x", opts(CreateMode::OpenOrCreate)), Err(VfsError::PermissionDenied)));
        assert!(matches!(b.rename(&p("f"), &p(".braid-streams"), true), Err(VfsError::PermissionDenied)));
        // Removing the file removes its spill directory.
        rf.write_at(&big, 0).unwrap();
        drop((st, rf, h));
        b.remove(&p("f")).unwrap();
        assert_eq!(fs::read_dir(dir.join(SPILL_DIR)).unwrap().count(), 0, "{dir:?}");
        // A file removed behind the server's back leaves an orphan, swept at the next start.
        let h: Arc<dyn FileHandle> = Arc::from(open(&b, "g", opts(CreateMode::OpenOrCreate)).unwrap());
        h.write_stream("big", Some(&big)).unwrap();
        drop(h);
        fs::remove_file(dir.join("g")).unwrap();
        assert_eq!(fs::read_dir(dir.join(SPILL_DIR)).unwrap().count(), 1);
        drop(LocalBackend::new(&dir, false).unwrap());
        assert_eq!(fs::read_dir(dir.join(SPILL_DIR)).unwrap().count(), 0, "{dir:?}: orphan swept");
        // One made on another file system (a share copied elsewhere: every handle looks
        // stale there) is kept.
        let h: Arc<dyn FileHandle> = Arc::from(open(&b, "c", opts(CreateMode::OpenOrCreate)).unwrap());
        h.write_stream("big", Some(&big)).unwrap();
        drop(h);
        fs::remove_file(dir.join("c")).unwrap();
        let key = fs::read_dir(dir.join(SPILL_DIR)).unwrap().next().unwrap().unwrap().path();
        rustix::fs::setxattr(&key, "user.braid.dev", &u64::MAX.to_le_bytes(), rustix::fs::XattrFlags::empty()).unwrap();
        drop(LocalBackend::new(&dir, false).unwrap());
        assert_eq!(fs::read_dir(dir.join(SPILL_DIR)).unwrap().count(), 1, "{dir:?}: a copied share's spill kept");
    }
    let _ = fs::remove_dir_all(&tmp);
}

/// Renaming over a file and removing one of two hard links: the spill files go with the
/// last link only.
#[test]
fn spilled_streams_follow_links_and_renames() {
    use braid_vfs::SPILL_DIR;
    let s = Scratch::new();
    let b = LocalBackend::new(&s.share(), false).unwrap();
    let big = vec![3u8; 100_000];
    let h = open(&b, "a", opts(CreateMode::OpenOrCreate)).unwrap();
    h.write_stream("s", Some(&big)).unwrap();
    drop(h);
    fs::hard_link(s.share().join("a"), s.share().join("a2")).unwrap();
    b.remove(&p("a")).unwrap();
    let h = open(&b, "A2", opts(CreateMode::OpenExisting)).unwrap();
    assert_eq!(h.find_stream("S").unwrap(), Some(("s".to_string(), 100_000)));
    drop(h);
    // Renamed: the token is the same, so are the streams.
    b.rename(&p("a2"), &p("b"), false).unwrap();
    assert_eq!(open(&b, "b", opts(CreateMode::OpenExisting)).unwrap().streams().unwrap(), vec![("s".to_string(), 100_000)]);
    // Replaced by a rename: its spill directory goes.
    fs::write(s.share().join("c"), b"c").unwrap();
    b.rename(&p("c"), &p("b"), true).unwrap();
    assert_eq!(fs::read_dir(s.share().join(SPILL_DIR)).unwrap().count(), 0);
    // A directory's spilled streams go when it is removed.
    let d = open(&b, "d", dir_opts(CreateMode::CreateNew)).unwrap();
    d.write_stream("s", Some(&big)).unwrap();
    drop(d);
    assert_eq!(fs::read_dir(s.share().join(SPILL_DIR)).unwrap().count(), 1);
    b.remove(&p("d")).unwrap();
    assert_eq!(fs::read_dir(s.share().join(SPILL_DIR)).unwrap().count(), 0);
    // A spill file with a second link is not one the server made: refused, not written.
    let e = open(&b, "e", opts(CreateMode::OpenOrCreate)).unwrap();
    e.write_stream("s", Some(&big)).unwrap();
    let key = fs::read_dir(s.share().join(SPILL_DIR)).unwrap().next().unwrap().unwrap().path();
    fs::hard_link(key.join("s"), s.share().join("planted")).unwrap();
    assert!(matches!(e.stream_write_at("s", b"x", 0), Err(VfsError::PermissionDenied)));
    assert_eq!(fs::read(s.share().join("planted")).unwrap(), big);
}

#[test]
fn the_share_remembers_that_it_holds_security_descriptors() {
    let s = Scratch::new();
    let b = s.backend();
    assert!(!b.may_have_security_descriptors(), "a fresh share has none");
    let h = open(&b, "f", opts(CreateMode::CreateNew)).unwrap();
    h.set_security_descriptor(&[1, 0, 4, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert!(b.may_have_security_descriptors());
    // A restart reads the mark back from the share root.
    drop(h);
    assert!(s.backend().may_have_security_descriptors());
}
