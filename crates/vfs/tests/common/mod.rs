//! Helpers the VFS test binaries share: share paths, open options and whole-file reads.

// Each test binary (conformance, local, memory) uses a different subset.
#![allow(dead_code)]

use braid_vfs::{Backend, CreateMode, FileHandle, OpenOptions, SharePath, VfsError};

pub fn p(s: &str) -> SharePath {
    SharePath::from_smb(s).unwrap()
}

/// Read-write options with `create` as the disposition.
pub fn opts(create: CreateMode) -> OpenOptions {
    OpenOptions { read: true, write: true, create, truncate: false, directory: false, non_directory: false }
}

pub fn read_only_opts() -> OpenOptions {
    OpenOptions { write: false, ..opts(CreateMode::OpenExisting) }
}

pub fn dir_opts(create: CreateMode) -> OpenOptions {
    OpenOptions { write: false, directory: true, ..opts(create) }
}

pub fn open(b: &dyn Backend, path: &str, o: OpenOptions) -> Result<Box<dyn FileHandle>, VfsError> {
    b.open(&p(path), o).map(|(h, _)| h)
}

/// The first 64 KiB of a handle's file.
pub fn read_all(h: &dyn FileHandle) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 16];
    let n = h.read_at(&mut buf, 0).unwrap();
    buf.truncate(n);
    buf
}
