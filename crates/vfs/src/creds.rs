//! Per-thread file system credentials, so storage calls made for an NFS client are checked
//! by the kernel against that client's user, groups and mode bits (and create files owned
//! by it) while the server process stays root.
//!
//! Linux keeps credentials per thread; glibc's `setuid`/`setgid`/`setgroups` wrappers
//! broadcast a change to every thread of the process, which would let one request's
//! identity leak into every other. This module calls the kernel directly instead:
//! `setfsuid`/`setfsgid` (which only ever change the calling thread's file system ids) and
//! `SYS_setgroups` through `libc::syscall` (not the broadcasting wrapper), and restores the
//! previous ids on every way out of [`with_creds`], unwinding included, so a pooled thread
//! never carries one request's identity into the next.

// rustix offers no setfsuid/setfsgid: these few calls go through libc, each a plain
// system call on the calling thread's credentials.
#![allow(unsafe_code)]

use crate::{Result, VfsError};
use std::sync::OnceLock;

/// Most supplementary groups [`with_creds`] accepts (AUTH_SYS carries at most 16).
pub const MAX_GROUPS: usize = 64;

/// The identity storage calls run as: user, primary group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Creds {
    /// File system user id.
    pub uid: u32,
    /// File system group id (owner group of new files).
    pub gid: u32,
    /// Supplementary groups, at most [`MAX_GROUPS`].
    pub groups: Vec<u32>,
}

impl Creds {
    /// The calling thread's own credentials (its file system ids and groups).
    pub fn current() -> Result<Creds> {
        let (uid, gid) = current_fs_ids();
        Ok(Creds { uid, gid, groups: current_groups()? })
    }
}

/// Whether the process may switch credentials (it runs as root; `CAP_SETUID` and
/// `CAP_SETGID` come with that).
pub fn can_switch() -> bool {
    static ROOT: OnceLock<bool> = OnceLock::new();
    // SAFETY: geteuid has no preconditions and cannot fail.
    *ROOT.get_or_init(|| unsafe { libc::geteuid() } == 0)
}

/// The calling thread's file system user and group ids.
pub fn current_fs_ids() -> (u32, u32) {
    // An invalid id (-1) changes nothing and returns the current one.
    // SAFETY: plain system calls on the calling thread's credentials.
    unsafe { (libc::setfsuid(u32::MAX) as u32, libc::setfsgid(u32::MAX) as u32) }
}

/// The calling thread's supplementary groups.
fn current_groups() -> Result<Vec<u32>> {
    // getgroups is a plain system call reading the calling thread's credentials.
    // SAFETY: a zero size only asks for the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let n = usize::try_from(n).map_err(|_| VfsError::Io(std::io::Error::last_os_error()))?;
    let mut v = vec![0u32; n];
    // SAFETY: `v` has room for `n` ids.
    let got = unsafe { libc::getgroups(n as libc::c_int, v.as_mut_ptr()) };
    let got = usize::try_from(got).map_err(|_| VfsError::Io(std::io::Error::last_os_error()))?;
    v.truncate(got);
    Ok(v)
}

/// Sets the calling thread's supplementary groups only (never glibc's broadcasting wrapper).
fn set_thread_groups(groups: &[u32]) -> Result<()> {
    // SAFETY: the pointer and length describe `groups`, which outlives the call.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len() as libc::c_long, groups.as_ptr()) };
    if r != 0 {
        return Err(VfsError::Io(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Sets the thread's file system ids and checks they took (setfsuid reports no errors).
fn set_fs_ids(uid: u32, gid: u32) -> Result<()> {
    // SAFETY: per-thread credential system calls; the return values are the old ids.
    unsafe {
        libc::setfsgid(gid);
        libc::setfsuid(uid);
    }
    if current_fs_ids() != (uid, gid) {
        return Err(VfsError::PermissionDenied);
    }
    Ok(())
}

/// Puts the thread's previous credentials back when dropped (also while unwinding).
struct Restore {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        // Groups and gid first: dropping root fsuid last keeps the right to change them.
        let groups = set_thread_groups(&self.groups);
        let ids = set_fs_ids(self.uid, self.gid);
        if groups.is_err() || ids.is_err() {
            // A thread that cannot get its identity back must not serve anything else.
            tracing::error!("cannot restore the thread's credentials");
            std::process::abort();
        }
    }
}

/// Runs `f` with the calling thread's file system user, group and supplementary groups set
/// to `creds`, restoring the previous ones afterwards (also if `f` panics).
///
/// Only a root process can switch: otherwise `f` runs unchanged when `creds` equal the
/// thread's own (groups compared as sets), and the call fails with `PermissionDenied`
/// when they do not. More than [`MAX_GROUPS`] groups are `InvalidName`.
pub fn with_creds<T>(creds: &Creds, f: impl FnOnce() -> T) -> Result<T> {
    if creds.groups.len() > MAX_GROUPS {
        return Err(VfsError::InvalidName);
    }
    let (uid, gid) = current_fs_ids();
    let groups = current_groups()?;
    if !can_switch() {
        let mut want = creds.groups.clone();
        let mut have = groups;
        want.sort_unstable();
        want.dedup();
        have.sort_unstable();
        have.dedup();
        if (creds.uid, creds.gid, want) != (uid, gid, have) {
            return Err(VfsError::PermissionDenied);
        }
        return Ok(f());
    }
    let restore = Restore { uid, gid, groups };
    set_thread_groups(&creds.groups)?;
    set_fs_ids(creds.uid, creds.gid)?;
    let r = f();
    drop(restore);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};

    fn tmp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("braid-creds-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        // Everyone may create here, so only the credentials decide who owns new files.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        d
    }

    fn nobody() -> Creds {
        Creds { uid: 65534, gid: 65534, groups: vec![65534] }
    }

    #[test]
    fn files_are_created_as_the_switched_user_and_the_thread_is_restored() {
        if !can_switch() {
            eprintln!("not root: skipped");
            return;
        }
        let d = tmp("owner");
        let before = Creds::current().unwrap();
        let c = Creds { uid: 4321, gid: 8765, groups: vec![8765, 100] };
        let inside = with_creds(&c, || {
            std::fs::write(d.join("f"), b"x").unwrap();
            Creds::current().unwrap()
        })
        .unwrap();
        assert_eq!((inside.uid, inside.gid), (4321, 8765));
        // The kernel keeps groups sorted.
        assert_eq!(inside.groups, vec![100, 8765]);
        let m = std::fs::metadata(d.join("f")).unwrap();
        assert_eq!((m.uid(), m.gid()), (4321, 8765));
        assert_eq!(Creds::current().unwrap(), before);
        // Another thread never saw the change.
        let other = std::thread::spawn(|| Creds::current().unwrap()).join().unwrap();
        assert_eq!((other.uid, other.gid), (0, before.gid));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn permissions_are_checked_against_the_switched_user() {
        if !can_switch() {
            eprintln!("not root: skipped");
            return;
        }
        let d = tmp("perm");
        let f = d.join("secret");
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&f).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let denied = with_creds(&nobody(), || std::fs::File::open(&f).map(|_| ())).unwrap();
        assert_eq!(denied.unwrap_err().kind(), std::io::ErrorKind::PermissionDenied);
        // Root again afterwards.
        std::fs::File::open(&f).unwrap();
        // A group the file is shared with opens it only with that group among the groups.
        std::os::unix::fs::chown(&f, Some(0), Some(4000)).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        let c = Creds { uid: 65534, gid: 65534, groups: vec![4000] };
        assert!(with_creds(&c, || std::fs::File::open(&f).is_ok()).unwrap());
        assert!(!with_creds(&nobody(), || std::fs::File::open(&f).is_ok()).unwrap());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_panic_inside_restores_the_thread() {
        if !can_switch() {
            eprintln!("not root: skipped");
            return;
        }
        let before = Creds::current().unwrap();
        let r = std::panic::catch_unwind(|| with_creds(&nobody(), || panic!("inside")));
        assert!(r.is_err());
        assert_eq!(Creds::current().unwrap(), before);
    }

    #[test]
    fn own_creds_run_and_too_many_groups_are_refused() {
        let own = Creds::current().unwrap();
        assert_eq!(with_creds(&own, || 7).unwrap(), 7);
        let many = Creds { groups: (0..=MAX_GROUPS as u32).collect(), ..own };
        assert!(matches!(with_creds(&many, || ()), Err(VfsError::InvalidName)));
    }
}
