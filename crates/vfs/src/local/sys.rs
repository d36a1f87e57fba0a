//! The few system calls rustix does not wrap safely: kernel file handles
//! (`name_to_handle_at`, `open_by_handle_at`), `fchownat` with raw ids and the
//! `FICLONERANGE` ioctl.

// rustix 0.38 has no file handle calls, and its `Uid::from_raw` is unsafe (-1 is special):
// these thin wrappers keep the unsafe code in one small place.
#![allow(unsafe_code)]

use rustix::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use rustix::io::Errno;
use std::ffi::CString;

/// Largest handle the kernel returns (`MAX_HANDLE_SZ`).
const MAX_HANDLE_SZ: usize = 128;

/// `struct file_handle` with room for the largest handle.
#[repr(C)]
struct RawHandle {
    handle_bytes: u32,
    handle_type: i32,
    f_handle: [u8; MAX_HANDLE_SZ],
}

/// A kernel file handle: its type and opaque bytes, and the id of the mount it was made on.
pub(crate) struct KernelHandle {
    pub(crate) handle_type: i32,
    pub(crate) bytes: Vec<u8>,
    pub(crate) mount_id: i32,
}

fn errno() -> Errno {
    Errno::from_raw_os_error(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

/// `name_to_handle_at(dirfd, name, ...)` without following a final symlink; `""` is the
/// object `dirfd` refers to.
pub(crate) fn name_to_handle(dirfd: BorrowedFd<'_>, name: &str) -> Result<KernelHandle, Errno> {
    let c = CString::new(name).map_err(|_| Errno::INVAL)?;
    let mut h = RawHandle { handle_bytes: MAX_HANDLE_SZ as u32, handle_type: 0, f_handle: [0; MAX_HANDLE_SZ] };
    let mut mount_id: libc::c_int = 0;
    let flags = if name.is_empty() { libc::AT_EMPTY_PATH } else { 0 };
    // SAFETY: `h` is a valid file_handle with `handle_bytes` bytes of room after its header;
    // `c` is NUL-terminated and outlives the call.
    let r = unsafe {
        libc::name_to_handle_at(dirfd.as_raw_fd(), c.as_ptr(), (&mut h as *mut RawHandle).cast::<libc::file_handle>(), &mut mount_id, flags)
    };
    if r != 0 {
        return Err(errno());
    }
    let n = (h.handle_bytes as usize).min(MAX_HANDLE_SZ);
    Ok(KernelHandle { handle_type: h.handle_type, bytes: h.f_handle[..n].to_vec(), mount_id })
}

/// `open_by_handle_at(mount_fd, handle, O_PATH | O_CLOEXEC)`: needs CAP_DAC_READ_SEARCH.
pub(crate) fn open_by_handle(mount_fd: BorrowedFd<'_>, handle_type: i32, bytes: &[u8]) -> Result<OwnedFd, Errno> {
    if bytes.len() > MAX_HANDLE_SZ {
        return Err(Errno::INVAL);
    }
    let mut h = RawHandle { handle_bytes: bytes.len() as u32, handle_type, f_handle: [0; MAX_HANDLE_SZ] };
    h.f_handle[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: `h` is a valid file_handle whose `handle_bytes` bytes follow its header.
    let fd = unsafe {
        libc::open_by_handle_at(mount_fd.as_raw_fd(), (&mut h as *mut RawHandle).cast::<libc::file_handle>(), libc::O_PATH | libc::O_CLOEXEC)
    };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`: works on any fd, `O_PATH` ones included,
/// and never follows a symlink. `None` keeps an id.
pub(crate) fn fchown_empty(fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> Result<(), Errno> {
    let keep = u32::MAX;
    // SAFETY: a NUL-terminated empty path; the ids are plain integers (-1 keeps).
    let r = unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), uid.unwrap_or(keep), gid.unwrap_or(keep), libc::AT_EMPTY_PATH) };
    if r != 0 {
        return Err(errno());
    }
    Ok(())
}

/// `ioctl(dst, FICLONERANGE)`: `len` bytes at `dst_off` of `dst` share the blocks of those
/// at `src_off` of `src` (rustix 0.38 wraps only FICLONE, the whole-file clone).
pub(crate) fn ficlonerange(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, src_off: u64, dst_off: u64, len: u64) -> Result<(), Errno> {
    let arg = libc::file_clone_range { src_fd: i64::from(src.as_raw_fd()), src_offset: src_off, src_length: len, dest_offset: dst_off };
    // SAFETY: FICLONERANGE reads one `file_clone_range`, which outlives the call; both
    // descriptors are borrowed, hence open.
    let r = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONERANGE, &arg as *const libc::file_clone_range) };
    if r == 0 {
        Ok(())
    } else {
        Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO))
    }
}
