//! NFS version 3 (RFC 1813): data types, the arguments and results of all 22 procedures, and
//! the directory-listing writers.

pub mod args;
pub mod dir;
pub mod res;
pub mod types;

pub use args::*;
pub use dir::*;
pub use res::*;
pub use types::*;

types::u32_enum! {
    /// The NFSv3 procedures.
    Proc3 {
        Null = 0,
        Getattr = 1,
        Setattr = 2,
        Lookup = 3,
        Access = 4,
        Readlink = 5,
        Read = 6,
        Write = 7,
        Create = 8,
        Mkdir = 9,
        Symlink = 10,
        Mknod = 11,
        Remove = 12,
        Rmdir = 13,
        Rename = 14,
        Link = 15,
        Readdir = 16,
        Readdirplus = 17,
        Fsstat = 18,
        Fsinfo = 19,
        Pathconf = 20,
        Commit = 21,
    }
}

/// Upper-case procedure names, by procedure number, as in RFC 1813 and metrics labels.
pub const PROC3_NAMES: [&str; 22] = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "LOOKUP",
    "ACCESS",
    "READLINK",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "SYMLINK",
    "MKNOD",
    "REMOVE",
    "RMDIR",
    "RENAME",
    "LINK",
    "READDIR",
    "READDIRPLUS",
    "FSSTAT",
    "FSINFO",
    "PATHCONF",
    "COMMIT",
];

impl Proc3 {
    /// Upper-case procedure name, as in RFC 1813 and metrics labels.
    pub fn name(self) -> &'static str {
        PROC3_NAMES[self as usize]
    }
}

/// ACCESS permission bits (RFC 1813 section 3.3.4).
pub const ACCESS3_READ: u32 = 0x0001;
pub const ACCESS3_LOOKUP: u32 = 0x0002;
pub const ACCESS3_MODIFY: u32 = 0x0004;
pub const ACCESS3_EXTEND: u32 = 0x0008;
pub const ACCESS3_DELETE: u32 = 0x0010;
pub const ACCESS3_EXECUTE: u32 = 0x0020;

/// FSINFO properties bits (RFC 1813 section 3.3.19).
pub const FSF3_LINK: u32 = 0x0001;
pub const FSF3_SYMLINK: u32 = 0x0002;
pub const FSF3_HOMOGENEOUS: u32 = 0x0008;
pub const FSF3_CANSETTIME: u32 = 0x0010;

#[cfg(test)]
mod tests;
