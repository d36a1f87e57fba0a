//! Storage metadata as NFS attributes (fattr3, wcc_attr) and NFS times as system times.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use braid_vfs::{FileAttrs, FileKind};
use nfs_wire::nfs3::{Fattr3, Ftype3, NfsTime3, PostOpAttr, PreOpAttr, Specdata3, WccAttr};

use crate::auth::Owner;

/// A system time as nfstime3 (seconds since 1970, clamped to what 32 bits hold).
pub fn nfs_time(t: SystemTime) -> NfsTime3 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => NfsTime3 { seconds: u32::try_from(d.as_secs()).unwrap_or(u32::MAX), nseconds: d.subsec_nanos() },
        Err(_) => NfsTime3 { seconds: 0, nseconds: 0 },
    }
}

/// An nfstime3 as a system time.
pub fn system_time(t: NfsTime3) -> SystemTime {
    UNIX_EPOCH + Duration::new(u64::from(t.seconds), t.nseconds.min(999_999_999))
}

/// The ftype3 of a storage kind.
pub fn ftype(kind: FileKind) -> Ftype3 {
    match kind {
        FileKind::File => Ftype3::Reg,
        FileKind::Dir => Ftype3::Dir,
        FileKind::Symlink => Ftype3::Lnk,
        FileKind::Block => Ftype3::Blk,
        FileKind::Char => Ftype3::Chr,
        FileKind::Fifo => Ftype3::Fifo,
        FileKind::Socket => Ftype3::Sock,
    }
}

/// fattr3 of a file of the export with id `fsid` (every file of an export reports the
/// export's id, so clients see one file system per export).
pub fn fattr(a: &FileAttrs, fsid: u64) -> Fattr3 {
    let p = &a.posix;
    Fattr3 {
        ftype: ftype(p.kind),
        mode: p.mode & 0o7777,
        nlink: a.nlink,
        uid: p.uid,
        gid: p.gid,
        size: a.size,
        used: a.alloc_size,
        rdev: Specdata3 { specdata1: p.rdev.0, specdata2: p.rdev.1 },
        fsid,
        fileid: a.file_id,
        atime: nfs_time(a.accessed),
        mtime: nfs_time(a.modified),
        ctime: nfs_time(a.changed),
    }
}

/// post_op_attr of optional attributes.
pub fn post_op(a: Option<&FileAttrs>, fsid: u64) -> PostOpAttr {
    PostOpAttr(a.map(|a| fattr(a, fsid)))
}

/// pre_op_attr (wcc_attr) of optional attributes.
pub fn pre_op(a: Option<&FileAttrs>) -> PreOpAttr {
    PreOpAttr(a.map(|a| WccAttr { size: a.size, mtime: nfs_time(a.modified), ctime: nfs_time(a.changed) }))
}

/// What a permission check needs of a file.
pub fn owner(a: &FileAttrs) -> Owner {
    Owner { uid: a.posix.uid, gid: a.posix.gid, mode: a.posix.mode, is_dir: a.posix.kind == FileKind::Dir }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        assert_eq!(system_time(nfs_time(t)), t);
        assert_eq!(nfs_time(UNIX_EPOCH - Duration::from_secs(5)), NfsTime3 { seconds: 0, nseconds: 0 });
    }
}
