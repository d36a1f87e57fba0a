//! Behaviour only `MemoryBackend` has: its capacity and the account of what it holds. What
//! it shares with the local backend is in `conformance.rs`.

use braid_vfs::{Backend, CreateMode, FileHandle, MemoryBackend, OpenOptions, VfsError};

mod common;
use common::p;

fn create(b: &MemoryBackend, path: &str, directory: bool) -> Result<Box<dyn FileHandle>, VfsError> {
    let o = OpenOptions { read: true, write: !directory, create: CreateMode::CreateNew, truncate: false, directory, non_directory: false };
    b.open(&p(path), o).map(|(h, _)| h)
}

#[test]
fn backend_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<MemoryBackend>();
    check::<braid_vfs::MemoryHandle>();
}

#[test]
fn writes_past_the_capacity_fail_with_no_space_and_change_nothing() {
    let b = MemoryBackend::new(64 << 10, false);
    assert_eq!(b.used(), 0);
    let h = create(&b, "f", false).unwrap();
    let base = b.used();
    assert!(base > 0, "a file costs something even when empty");
    h.write_at(&[7; 32 << 10], 0).unwrap();
    assert!(matches!(h.write_at(&[1; 40 << 10], 32 << 10), Err(VfsError::NoSpace)));
    assert_eq!(h.size().unwrap(), 32 << 10, "a refused write leaves the file as it was");
    // A sparse write far past the end is charged for the zeros it implies.
    assert!(matches!(h.write_at(b"x", 1 << 40), Err(VfsError::NoSpace)));
    assert!(matches!(h.set_len(1 << 20), Err(VfsError::NoSpace)));
    assert!(matches!(h.allocate(1 << 20), Err(VfsError::NoSpace)));
    assert!(matches!(h.set_extended_attribute("BIG", &[0; 40 << 10]), Err(VfsError::NoSpace)));
    let st = b.statfs().unwrap();
    assert_eq!(st.total_bytes, 64 << 10);
    assert_eq!(st.free_bytes, (64 << 10) - b.used());
    // Space comes back when the file shrinks.
    h.set_len(0).unwrap();
    assert_eq!(b.used(), base);
    h.write_at(&[1; 60 << 10], 0).unwrap();
}

#[test]
fn removed_files_give_their_space_back_when_the_last_handle_closes() {
    let b = MemoryBackend::new(1 << 20, false);
    let h = create(&b, "f", false).unwrap();
    h.write_at(&[1; 100_000], 0).unwrap();
    h.set_security_descriptor(&[1; 1000]).unwrap();
    h.set_extended_attribute("EA", &[2; 1000]).unwrap();
    let full = b.used();
    assert!(full >= 102_000);
    b.remove(&p("f")).unwrap();
    assert_eq!(b.used(), full, "an open handle keeps the data");
    assert_eq!(h.attrs().unwrap().nlink, 0);
    drop(h);
    assert_eq!(b.used(), 0);
    // Directories cost something too, and are limited by the capacity.
    let tiny = MemoryBackend::new(1000, false);
    create(&tiny, "d", true).unwrap();
    assert!(matches!(create(&tiny, "e", true), Err(VfsError::NoSpace)));
}

#[test]
fn a_deep_tree_is_dropped_without_recursion() {
    let b = MemoryBackend::new(u64::MAX, false);
    let mut path = String::new();
    for _ in 0..3000 {
        path.push_str("\\d");
        create(&b, &path, true).unwrap();
    }
    assert!(b.used() > 0);
    // Nested drops of 3000 levels would need far more than this stack.
    std::thread::Builder::new().stack_size(64 << 10).spawn(move || drop(b)).unwrap().join().unwrap();
}

#[test]
fn a_read_only_view_shares_the_tree() {
    let b = MemoryBackend::new(1 << 20, false);
    create(&b, "f", false).unwrap().write_at(b"data", 0).unwrap();
    let ro = b.read_only_view();
    assert!(ro.is_read_only() && !b.is_read_only());
    assert_eq!(ro.stat(&p("F")).unwrap().size, 4);
    assert!(matches!(create(&ro, "g", false), Err(VfsError::ReadOnly)));
    assert!(b
        .open(
            &p("f"),
            OpenOptions { read: true, write: false, create: CreateMode::OpenExisting, truncate: false, directory: false, non_directory: false }
        )
        .unwrap()
        .0
        .fast_paths()
        .is_none());
}

#[test]
fn links_names_and_tokens_stay_consistent() {
    let b = MemoryBackend::new(1 << 20, false);
    create(&b, "x", false).unwrap();
    let t = b.file_token(&p("x")).unwrap();
    let one = b.used();
    b.link(&p("x"), &p("Y")).unwrap();
    assert!(b.used() > one, "a second name is charged");
    // SMB's rename of one link onto another spelling of the other's name.
    b.rename(&p("Y"), &p("X"), true).unwrap();
    let names: Vec<String> = b.read_dir_exact(&p("")).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["X"]);
    assert_eq!(b.stat_exact(&p("X")).unwrap().nlink, 1);
    assert_eq!(b.resolve_token(&t).unwrap(), p("X"));
    assert_eq!(b.used(), one, "the second name's charge is returned");
    // An exact create beside another spelling: one spelling per name here.
    assert!(matches!(b.mkdir(&p("x"), 0o755), Err(VfsError::Exists)));
    assert!(matches!(
        b.open_exact(&p("x"), OpenOptions { create: CreateMode::OpenOrCreate, ..common::opts(CreateMode::OpenOrCreate) }),
        Err(VfsError::Exists)
    ));
    // Another instance (a restart) never resolves this one's tokens.
    assert!(matches!(MemoryBackend::new(1 << 20, false).resolve_token(&t), Err(VfsError::NotFound)));
    b.remove_exact(&p("X")).unwrap();
    assert!(matches!(b.resolve_token(&t), Err(VfsError::NotFound)));
    assert_eq!(b.used(), 0);
}
