//! Arguments of the NFSv3 procedures (RFC 1813 section 3.3), named `<Proc>Args` after the
//! XDR `<PROC>3args`; `where` is `where_`.

use super::types::*;
use super::Proc3;
use crate::xdr::{xdr_struct, Result, XdrReader, XdrWriter};

xdr_struct!(GetattrArgs { object: NfsFh3 });
xdr_struct!(SetattrArgs {
    object: NfsFh3,
    new_attributes: Sattr3,
    /// sattrguard3: the ctime the object must still have.
    guard: Option<NfsTime3>,
});
xdr_struct!(LookupArgs { what: DirOpArgs3 });
xdr_struct!(AccessArgs { object: NfsFh3, access: u32 });
xdr_struct!(ReadlinkArgs { symlink: NfsFh3 });
xdr_struct!(ReadArgs { file: NfsFh3, offset: u64, count: u32 });
xdr_struct!(CreateArgs { where_: DirOpArgs3, how: CreateHow3 });
xdr_struct!(MkdirArgs { where_: DirOpArgs3, attributes: Sattr3 });
xdr_struct!(
    /// symlinkdata3
    SymlinkData3 { symlink_attributes: Sattr3, symlink_data: Vec<u8> }
);
xdr_struct!(SymlinkArgs { where_: DirOpArgs3, symlink: SymlinkData3 });
xdr_struct!(MknodArgs { where_: DirOpArgs3, what: MknodData3 });
xdr_struct!(RemoveArgs { object: DirOpArgs3 });
xdr_struct!(RmdirArgs { object: DirOpArgs3 });
xdr_struct!(RenameArgs { from: DirOpArgs3, to: DirOpArgs3 });
xdr_struct!(LinkArgs { file: NfsFh3, link: DirOpArgs3 });
xdr_struct!(ReaddirArgs { dir: NfsFh3, cookie: u64, cookieverf: CookieVerf3, count: u32 });
xdr_struct!(ReaddirplusArgs { dir: NfsFh3, cookie: u64, cookieverf: CookieVerf3, dircount: u32, maxcount: u32 });
xdr_struct!(FsstatArgs { fsroot: NfsFh3 });
xdr_struct!(FsinfoArgs { fsroot: NfsFh3 });
xdr_struct!(PathconfArgs { object: NfsFh3 });
xdr_struct!(CommitArgs { file: NfsFh3, offset: u64, count: u32 });

/// WRITE3args; the data is borrowed from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteArgs<'a> {
    pub file: NfsFh3,
    pub offset: u64,
    /// The count the client states; the server checks it against `data.len()`.
    pub count: u32,
    pub stable: StableHow,
    pub data: &'a [u8],
}

impl<'a> WriteArgs<'a> {
    pub fn decode(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(WriteArgs { file: NfsFh3::decode(r)?, offset: r.u64()?, count: r.u32()?, stable: StableHow::decode(r)?, data: r.opaque(u32::MAX)? })
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.encode_head(self.data.len() as u32, w);
        w.opaque_fixed(self.data);
    }

    /// Everything up to and including the data length `len`: a client appends the data
    /// bytes and [`crate::xdr::pad_len`] zeros itself.
    pub fn encode_head(&self, len: u32, w: &mut XdrWriter<'_>) {
        self.file.encode(w);
        w.u64(self.offset);
        w.u32(self.count);
        self.stable.encode(w);
        w.u32(len);
    }
}

impl<'a> crate::xdr::Xdr<'a> for WriteArgs<'a> {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        WriteArgs::decode(r)
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        self.encode(w)
    }
}

/// The arguments of any procedure, for a dispatcher that decodes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Args3<'a> {
    Null,
    Getattr(GetattrArgs),
    Setattr(SetattrArgs),
    Lookup(LookupArgs),
    Access(AccessArgs),
    Readlink(ReadlinkArgs),
    Read(ReadArgs),
    Write(WriteArgs<'a>),
    Create(CreateArgs),
    Mkdir(MkdirArgs),
    Symlink(SymlinkArgs),
    Mknod(MknodArgs),
    Remove(RemoveArgs),
    Rmdir(RmdirArgs),
    Rename(RenameArgs),
    Link(LinkArgs),
    Readdir(ReaddirArgs),
    Readdirplus(ReaddirplusArgs),
    Fsstat(FsstatArgs),
    Fsinfo(FsinfoArgs),
    Pathconf(PathconfArgs),
    Commit(CommitArgs),
}

impl<'a> Args3<'a> {
    /// Decodes the arguments of `proc_`. Bytes after them are ignored (RFC 5531 leaves
    /// trailing bytes to the server; Linux and Solaris servers accept them).
    pub fn decode(proc_: Proc3, r: &mut XdrReader<'a>) -> Result<Self> {
        use Args3 as A;
        Ok(match proc_ {
            Proc3::Null => A::Null,
            Proc3::Getattr => A::Getattr(GetattrArgs::decode(r)?),
            Proc3::Setattr => A::Setattr(SetattrArgs::decode(r)?),
            Proc3::Lookup => A::Lookup(LookupArgs::decode(r)?),
            Proc3::Access => A::Access(AccessArgs::decode(r)?),
            Proc3::Readlink => A::Readlink(ReadlinkArgs::decode(r)?),
            Proc3::Read => A::Read(ReadArgs::decode(r)?),
            Proc3::Write => A::Write(WriteArgs::decode(r)?),
            Proc3::Create => A::Create(CreateArgs::decode(r)?),
            Proc3::Mkdir => A::Mkdir(MkdirArgs::decode(r)?),
            Proc3::Symlink => A::Symlink(SymlinkArgs::decode(r)?),
            Proc3::Mknod => A::Mknod(MknodArgs::decode(r)?),
            Proc3::Remove => A::Remove(RemoveArgs::decode(r)?),
            Proc3::Rmdir => A::Rmdir(RmdirArgs::decode(r)?),
            Proc3::Rename => A::Rename(RenameArgs::decode(r)?),
            Proc3::Link => A::Link(LinkArgs::decode(r)?),
            Proc3::Readdir => A::Readdir(ReaddirArgs::decode(r)?),
            Proc3::Readdirplus => A::Readdirplus(ReaddirplusArgs::decode(r)?),
            Proc3::Fsstat => A::Fsstat(FsstatArgs::decode(r)?),
            Proc3::Fsinfo => A::Fsinfo(FsinfoArgs::decode(r)?),
            Proc3::Pathconf => A::Pathconf(PathconfArgs::decode(r)?),
            Proc3::Commit => A::Commit(CommitArgs::decode(r)?),
        })
    }

    pub fn proc_(&self) -> Proc3 {
        use Args3 as A;
        match self {
            A::Null => Proc3::Null,
            A::Getattr(_) => Proc3::Getattr,
            A::Setattr(_) => Proc3::Setattr,
            A::Lookup(_) => Proc3::Lookup,
            A::Access(_) => Proc3::Access,
            A::Readlink(_) => Proc3::Readlink,
            A::Read(_) => Proc3::Read,
            A::Write(_) => Proc3::Write,
            A::Create(_) => Proc3::Create,
            A::Mkdir(_) => Proc3::Mkdir,
            A::Symlink(_) => Proc3::Symlink,
            A::Mknod(_) => Proc3::Mknod,
            A::Remove(_) => Proc3::Remove,
            A::Rmdir(_) => Proc3::Rmdir,
            A::Rename(_) => Proc3::Rename,
            A::Link(_) => Proc3::Link,
            A::Readdir(_) => Proc3::Readdir,
            A::Readdirplus(_) => Proc3::Readdirplus,
            A::Fsstat(_) => Proc3::Fsstat,
            A::Fsinfo(_) => Proc3::Fsinfo,
            A::Pathconf(_) => Proc3::Pathconf,
            A::Commit(_) => Proc3::Commit,
        }
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        use crate::xdr::Xdr;
        use Args3 as A;
        match self {
            A::Null => {}
            A::Getattr(a) => a.encode_xdr(w),
            A::Setattr(a) => a.encode_xdr(w),
            A::Lookup(a) => a.encode_xdr(w),
            A::Access(a) => a.encode_xdr(w),
            A::Readlink(a) => a.encode_xdr(w),
            A::Read(a) => a.encode_xdr(w),
            A::Write(a) => a.encode_xdr(w),
            A::Create(a) => a.encode_xdr(w),
            A::Mkdir(a) => a.encode_xdr(w),
            A::Symlink(a) => a.encode_xdr(w),
            A::Mknod(a) => a.encode_xdr(w),
            A::Remove(a) => a.encode_xdr(w),
            A::Rmdir(a) => a.encode_xdr(w),
            A::Rename(a) => a.encode_xdr(w),
            A::Link(a) => a.encode_xdr(w),
            A::Readdir(a) => a.encode_xdr(w),
            A::Readdirplus(a) => a.encode_xdr(w),
            A::Fsstat(a) => a.encode_xdr(w),
            A::Fsinfo(a) => a.encode_xdr(w),
            A::Pathconf(a) => a.encode_xdr(w),
            A::Commit(a) => a.encode_xdr(w),
        }
    }
}
