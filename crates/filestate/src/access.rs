//! Access rights and share modes with their MS-FSA / MS-SMB2 bit values, so an SMB request's
//! fields convert without translation and other protocols map onto the same meanings.

use std::ops::BitOr;

/// Access rights an open was granted (MS-FSA 2.1.5.1: FILE_READ_DATA and friends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Access(pub u32);

/// The rights by their MS-FSA names (FILE_READ_DATA, FILE_WRITE_DATA, ...).
impl Access {
    pub const READ_DATA: Access = Access(0x0000_0001);
    pub const WRITE_DATA: Access = Access(0x0000_0002);
    pub const APPEND_DATA: Access = Access(0x0000_0004);
    pub const EXECUTE: Access = Access(0x0000_0020);
    pub const READ_ATTRIBUTES: Access = Access(0x0000_0080);
    pub const WRITE_ATTRIBUTES: Access = Access(0x0000_0100);
    pub const DELETE: Access = Access(0x0001_0000);
    pub const READ_CONTROL: Access = Access(0x0002_0000);
    pub const SYNCHRONIZE: Access = Access(0x0010_0000);

    /// The rights share modes govern; an open with none of them is invisible to share
    /// checks.
    pub const DATA: Access = Access(0x0000_0001 | 0x0000_0002 | 0x0000_0004 | 0x0000_0020 | 0x0001_0000);

    /// Whether any bit of `other` is present.
    pub fn any(self, other: Access) -> bool {
        self.0 & other.0 != 0
    }

    /// Reading, in the sense of share modes (read data or execute).
    fn reads(self) -> bool {
        self.any(Access(Self::READ_DATA.0 | Self::EXECUTE.0))
    }

    /// Writing, in the sense of share modes (write or append data).
    fn writes(self) -> bool {
        self.any(Access(Self::WRITE_DATA.0 | Self::APPEND_DATA.0))
    }

    /// Which share-mode bits another open must hold for this access to coexist with it.
    pub(crate) fn needs(self) -> ShareMode {
        let mut s = ShareMode(0);
        if self.reads() {
            s = s | ShareMode::READ;
        }
        if self.writes() {
            s = s | ShareMode::WRITE;
        }
        if self.any(Self::DELETE) {
            s = s | ShareMode::DELETE;
        }
        s
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// What an open lets later (and earlier) opens do (FILE_SHARE_READ/WRITE/DELETE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ShareMode(pub u32);

/// FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_SHARE_DELETE, and all three.
impl ShareMode {
    pub const READ: ShareMode = ShareMode(1);
    pub const WRITE: ShareMode = ShareMode(2);
    pub const DELETE: ShareMode = ShareMode(4);
    pub const ALL: ShareMode = ShareMode(7);

    /// Whether every bit of `other` is present.
    pub fn contains(self, other: ShareMode) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for ShareMode {
    type Output = ShareMode;
    fn bitor(self, rhs: ShareMode) -> ShareMode {
        ShareMode(self.0 | rhs.0)
    }
}

/// An open asking only for attributes and SYNCHRONIZE (what Windows calls a stat open): it
/// meets no share mode, breaks no caching grant and gets none.
pub fn is_stat_open(access: Access) -> bool {
    access.0 & !(Access::READ_ATTRIBUTES.0 | Access::WRITE_ATTRIBUTES.0 | Access::SYNCHRONIZE.0) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_opens() {
        assert!(is_stat_open(Access(0)));
        assert!(is_stat_open(Access::READ_ATTRIBUTES | Access::WRITE_ATTRIBUTES | Access::SYNCHRONIZE));
        assert!(!is_stat_open(Access::READ_ATTRIBUTES | Access::READ_CONTROL));
        assert!(!is_stat_open(Access::READ_DATA));
    }

    #[test]
    fn needs() {
        assert_eq!(Access::READ_DATA.needs(), ShareMode::READ);
        assert_eq!(Access::EXECUTE.needs(), ShareMode::READ);
        assert_eq!(Access::WRITE_DATA.needs(), ShareMode::WRITE);
        assert_eq!(Access::APPEND_DATA.needs(), ShareMode::WRITE);
        assert_eq!(Access::DELETE.needs(), ShareMode::DELETE);
        assert_eq!((Access::READ_CONTROL | Access::READ_ATTRIBUTES).needs(), ShareMode(0));
    }
}
