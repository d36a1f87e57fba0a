//! Copying a range from one open file to another without the bytes leaving the server:
//! the kernel does it (`copy_file_range(2)`, which reflinks on file systems that share
//! extents, such as xfs and btrfs, and copies in the page cache elsewhere) when both
//! handles offer a descriptor, a bounded buffer does it otherwise. Cloning a range
//! ([`clone_range`]) is the kernel's alone: the target shares the source's blocks, or
//! nothing happens.

use std::os::fd::BorrowedFd;

use rustix::io::Errno;

use crate::{FileHandle, Result, VfsError};

/// Largest piece copied through the buffer at a time.
const BUFFER_LEN: usize = 1 << 20;

/// Copies exactly `len` bytes at `src_off` of `src` to `dst_off` of `dst` and returns
/// `len`; the caller checks first that the source holds the range. A source end reached
/// early (a racing truncate) ends the copy with the bytes copied so far. Overlapping
/// ranges of one file copy as memmove does.
pub fn copy_range(src: &dyn FileHandle, dst: &dyn FileHandle, src_off: u64, dst_off: u64, len: u64) -> Result<u64> {
    let fds = src.fast_paths().and_then(|s| s.copy_fd()).zip(dst.fast_paths().and_then(|d| d.copy_fd()));
    if let Some((from, to)) = fds {
        match in_kernel(from, to, src_off, dst_off, len) {
            Ok(n) => return Ok(n),
            // Another file system, an overlap within one file, or no support: copy here.
            Err(e) if [Errno::XDEV, Errno::INVAL, Errno::NOSYS, Errno::OPNOTSUPP, Errno::BADF].contains(&e) => {}
            Err(e) => return Err(VfsError::Io(e.into())),
        }
    }
    buffered(src, dst, src_off, dst_off, len)
}

/// Makes `len` bytes at `dst_off` of `dst` share the blocks of those at `src_off` of `src`
/// (`FICLONERANGE`), both files on one file system that can ([`crate::Backend::block_cloning`]).
/// Offsets must be aligned to the file system's block, and `len` too unless the range ends
/// at the source's end of file; the caller checks the range against both files first.
/// Handles without a descriptor (another backend, a named stream) are
/// [`VfsError::unsupported`], as is a file system that cannot clone; a range the kernel
/// refuses is an `EINVAL` I/O error.
pub fn clone_range(src: &dyn FileHandle, dst: &dyn FileHandle, src_off: u64, dst_off: u64, len: u64) -> Result<()> {
    src.open_now()?;
    dst.open_now()?;
    let from = src.fast_paths().and_then(|s| s.copy_fd());
    let to = dst.fast_paths().and_then(|d| d.copy_fd());
    match from.zip(to) {
        Some((from, to)) => crate::local::reflink::clone_fds(from, to, src_off, dst_off, len),
        None => Err(VfsError::unsupported()),
    }
}

/// copy_file_range(2) until `len` bytes are copied or the source ends. An error before
/// any byte moved is returned so that the caller can fall back; after that, it is real.
fn in_kernel(from: BorrowedFd<'_>, to: BorrowedFd<'_>, src_off: u64, dst_off: u64, len: u64) -> std::result::Result<u64, Errno> {
    let (mut s, mut d, mut done) = (src_off, dst_off, 0u64);
    while done < len {
        let want = usize::try_from(len - done).unwrap_or(usize::MAX).min(1 << 30);
        match rustix::fs::copy_file_range(from, Some(&mut s), to, Some(&mut d), want) {
            Ok(0) => break,
            Ok(n) => done += n as u64,
            Err(Errno::INTR) => continue,
            Err(e) if done == 0 => return Err(e),
            Err(e) => return Err(if e == Errno::INVAL { Errno::IO } else { e }),
        }
    }
    Ok(done)
}

/// Through a buffer of at most [`BUFFER_LEN`] bytes; back to front when the target lies
/// after the source, so an overlap within one file never reads bytes already overwritten.
fn buffered(src: &dyn FileHandle, dst: &dyn FileHandle, src_off: u64, dst_off: u64, len: u64) -> Result<u64> {
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(BUFFER_LEN).min(BUFFER_LEN)];
    let pieces: Vec<(u64, usize)> =
        (0..len).step_by(BUFFER_LEN).map(|at| (at, usize::try_from((len - at).min(BUFFER_LEN as u64)).unwrap_or(BUFFER_LEN))).collect();
    let backwards = dst_off > src_off;
    let order: Box<dyn Iterator<Item = &(u64, usize)>> = if backwards { Box::new(pieces.iter().rev()) } else { Box::new(pieces.iter()) };
    let mut done = 0u64;
    for &(at, n) in order {
        let got = read_full(src, &mut buf[..n], src_off + at)?;
        dst.write_at(&buf[..got], dst_off + at)?;
        done += got as u64;
        if got < n && !backwards {
            break;
        }
    }
    Ok(done)
}

fn read_full(src: &dyn FileHandle, buf: &mut [u8], off: u64) -> Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match src.read_at(&mut buf[got..], off + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, CreateMode, LocalBackend, OpenOptions, SharePath};

    /// A scratch directory, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn backend(tag: &str) -> (Scratch, LocalBackend) {
        let dir = std::env::temp_dir().join(format!("braid-copy-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let b = LocalBackend::new(&dir, false).unwrap();
        (Scratch(dir), b)
    }

    fn file(b: &LocalBackend, name: &str, data: &[u8]) -> Box<dyn FileHandle> {
        let opts = OpenOptions { read: true, write: true, create: CreateMode::OpenOrCreate, truncate: false, directory: false, non_directory: true };
        let (h, _) = b.open(&SharePath::from_smb(name).unwrap(), opts).unwrap();
        h.write_at(data, 0).unwrap();
        h
    }

    fn contents(h: &dyn FileHandle) -> Vec<u8> {
        let mut v = vec![0u8; h.size().unwrap() as usize];
        read_full(h, &mut v, 0).unwrap();
        v
    }

    #[test]
    fn ranges_copy_between_files_and_within_one() {
        let (_d, b) = backend("ranges");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (src, dst) = (file(&b, "a", &data), file(&b, "b", b""));
        assert_eq!(copy_range(src.as_ref(), dst.as_ref(), 100, 5, 4000).unwrap(), 4000);
        let got = contents(dst.as_ref());
        assert_eq!(&got[5..], &data[100..4100]);
        assert_eq!(&got[..5], &[0; 5]);
        // Overlap inside one file: the target gets the source's old bytes.
        assert_eq!(copy_range(src.as_ref(), src.as_ref(), 0, 2040, 2048).unwrap(), 2048);
        let after = contents(src.as_ref());
        assert_eq!(&after[2040..4088], &data[..2048]);
        assert_eq!(&after[..2040], &data[..2040]);
    }

    #[test]
    fn cloning_is_refused_where_the_file_system_or_backend_cannot_share_blocks() {
        // tmpfs cannot clone: the probe says so and a clone changes nothing.
        if std::path::Path::new("/dev/shm").is_dir() {
            let dir = std::path::PathBuf::from(format!("/dev/shm/braid-clone-probe-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let _d = Scratch(dir.clone());
            let b = LocalBackend::new(&dir, false).unwrap();
            assert!(!b.block_cloning());
            let (src, dst) = (file(&b, "a", &[7; 8192]), file(&b, "b", &[0; 8192]));
            let e = clone_range(src.as_ref(), dst.as_ref(), 0, 0, 4096).unwrap_err();
            assert!(matches!(&e, VfsError::Io(io) if io.kind() == std::io::ErrorKind::Unsupported), "{e:?}");
            assert_eq!(contents(dst.as_ref()), vec![0; 8192]);
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "the probe leaves no file behind");
        }
        // The memory backend has no descriptors to clone between.
        let m = crate::MemoryBackend::new(1 << 20, false);
        assert!(!m.block_cloning());
        let opts = OpenOptions { read: true, write: true, create: CreateMode::OpenOrCreate, truncate: false, directory: false, non_directory: true };
        let (a, _) = m.open(&SharePath::from_smb("a").unwrap(), opts).unwrap();
        let (b, _) = m.open(&SharePath::from_smb("b").unwrap(), opts).unwrap();
        a.write_at(&[1; 4096], 0).unwrap();
        let e = clone_range(a.as_ref(), b.as_ref(), 0, 0, 4096).unwrap_err();
        assert!(matches!(&e, VfsError::Io(io) if io.kind() == std::io::ErrorKind::Unsupported), "{e:?}");
    }

    #[test]
    fn the_buffer_path_copies_back_to_front_over_an_overlap() {
        let (_d, b) = backend("overlap");
        let data: Vec<u8> = (0..(3 * BUFFER_LEN as u32)).map(|i| (i % 253) as u8).collect();
        let h = file(&b, "big", &data);
        let len = 2 * BUFFER_LEN as u64 + 10;
        assert_eq!(buffered(h.as_ref(), h.as_ref(), 0, 1000, len).unwrap(), len);
        assert_eq!(&contents(h.as_ref())[1000..1000 + len as usize], &data[..len as usize]);
    }
}
