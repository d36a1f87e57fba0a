//! Results of the NFSv3 procedures (RFC 1813 section 3.3): `<Proc>Res` is `Ok(<Proc>ResOk)`
//! for NFS3_OK, or `Fail(status, resfail body)` for any other status. A `Fail` is never built
//! with `Nfsstat3::Ok` (it would encode as a success with the wrong body).
//! READDIR and READDIRPLUS results are in `dir.rs`.

use super::types::*;
use crate::xdr::{xdr_struct, Result, XdrReader, XdrWriter};

/// `<PROC>3res`: a status-discriminated union of resok and resfail.
macro_rules! nfs_res {
    ($(#[$m:meta])* $name:ident, $ok:ty, $fail:ty) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum $name {
            Ok($ok),
            Fail(Nfsstat3, $fail),
        }

        impl $name {
            pub fn status(&self) -> Nfsstat3 {
                match self {
                    Self::Ok(_) => Nfsstat3::Ok,
                    Self::Fail(s, _) => *s,
                }
            }
            pub fn decode(r: &mut XdrReader<'_>) -> Result<Self> {
                Ok(match Nfsstat3::decode(r)? {
                    Nfsstat3::Ok => Self::Ok(<$ok>::decode(r)?),
                    s => Self::Fail(s, <$fail>::decode(r)?),
                })
            }
            pub fn encode(&self, w: &mut XdrWriter<'_>) {
                match self {
                    Self::Ok(ok) => {
                        Nfsstat3::Ok.encode(w);
                        ok.encode(w);
                    }
                    Self::Fail(s, body) => {
                        s.encode(w);
                        body.encode(w);
                    }
                }
            }
        }
        $crate::xdr::xdr_via_inherent!($name);
    };
}

xdr_struct!(GetattrResOk { obj_attributes: Fattr3 });

/// GETATTR3res: the failure arm carries nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetattrRes {
    Ok(GetattrResOk),
    Fail(Nfsstat3),
}

impl GetattrRes {
    pub fn status(&self) -> Nfsstat3 {
        match self {
            Self::Ok(_) => Nfsstat3::Ok,
            Self::Fail(s) => *s,
        }
    }
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self> {
        Ok(match Nfsstat3::decode(r)? {
            Nfsstat3::Ok => Self::Ok(GetattrResOk::decode(r)?),
            s => Self::Fail(s),
        })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.status().encode(w);
        if let Self::Ok(ok) = self {
            ok.encode(w);
        }
    }
}
crate::xdr::xdr_via_inherent!(GetattrRes);

xdr_struct!(SetattrResOk { obj_wcc: WccData });
nfs_res!(SetattrRes, SetattrResOk, WccData);

xdr_struct!(LookupResOk { object: NfsFh3, obj_attributes: PostOpAttr, dir_attributes: PostOpAttr });
nfs_res!(
    /// LOOKUP3res; the failure arm holds the directory's attributes.
    LookupRes,
    LookupResOk,
    PostOpAttr
);

xdr_struct!(AccessResOk { obj_attributes: PostOpAttr, access: u32 });
nfs_res!(AccessRes, AccessResOk, PostOpAttr);

xdr_struct!(ReadlinkResOk { symlink_attributes: PostOpAttr, data: Vec<u8> });
nfs_res!(ReadlinkRes, ReadlinkResOk, PostOpAttr);

xdr_struct!(WriteResOk { file_wcc: WccData, count: u32, committed: StableHow, verf: WriteVerf3 });
nfs_res!(WriteRes, WriteResOk, WccData);

xdr_struct!(
    /// CREATE3resok, also the resok of MKDIR, SYMLINK and MKNOD (the same XDR).
    CreateResOk { obj: PostOpFh3, obj_attributes: PostOpAttr, dir_wcc: WccData }
);
pub type MkdirResOk = CreateResOk;
pub type SymlinkResOk = CreateResOk;
pub type MknodResOk = CreateResOk;
nfs_res!(CreateRes, CreateResOk, WccData);
nfs_res!(MkdirRes, CreateResOk, WccData);
nfs_res!(SymlinkRes, CreateResOk, WccData);
nfs_res!(MknodRes, CreateResOk, WccData);

xdr_struct!(RemoveResOk { dir_wcc: WccData });
pub type RmdirResOk = RemoveResOk;
nfs_res!(RemoveRes, RemoveResOk, WccData);
nfs_res!(RmdirRes, RemoveResOk, WccData);

xdr_struct!(
    /// RENAME3resok; RENAME3resfail is the same.
    RenameResOk { fromdir_wcc: WccData, todir_wcc: WccData }
);
pub type RenameResFail = RenameResOk;
nfs_res!(RenameRes, RenameResOk, RenameResFail);

xdr_struct!(
    /// LINK3resok; LINK3resfail is the same.
    LinkResOk { file_attributes: PostOpAttr, linkdir_wcc: WccData }
);
pub type LinkResFail = LinkResOk;
nfs_res!(LinkRes, LinkResOk, LinkResFail);

xdr_struct!(FsstatResOk { obj_attributes: PostOpAttr, tbytes: u64, fbytes: u64, abytes: u64, tfiles: u64, ffiles: u64, afiles: u64, invarsec: u32 });
nfs_res!(FsstatRes, FsstatResOk, PostOpAttr);

xdr_struct!(FsinfoResOk {
    obj_attributes: PostOpAttr,
    rtmax: u32,
    rtpref: u32,
    rtmult: u32,
    wtmax: u32,
    wtpref: u32,
    wtmult: u32,
    dtpref: u32,
    maxfilesize: u64,
    time_delta: NfsTime3,
    properties: u32,
});
nfs_res!(FsinfoRes, FsinfoResOk, PostOpAttr);

xdr_struct!(PathconfResOk {
    obj_attributes: PostOpAttr,
    linkmax: u32,
    name_max: u32,
    no_trunc: bool,
    chown_restricted: bool,
    case_insensitive: bool,
    case_preserving: bool,
});
nfs_res!(PathconfRes, PathconfResOk, PostOpAttr);

xdr_struct!(CommitResOk { file_wcc: WccData, verf: WriteVerf3 });
nfs_res!(CommitRes, CommitResOk, WccData);

/// READ3resok without its data: a server encodes this head (ending with the data length,
/// which equals `count`), then appends `count` bytes of file data and
/// `xdr::pad_len(count)` zeros itself, so file data is never copied into a temporary buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadResOk {
    pub file_attributes: PostOpAttr,
    pub count: u32,
    pub eof: bool,
}

impl ReadResOk {
    /// Encodes the head: attributes, count, eof, and the data length (`count`).
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.file_attributes.encode(w);
        w.u32(self.count);
        w.bool(self.eof);
        w.u32(self.count);
    }
}

/// READ3res; a decoded success borrows its data from the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadRes<'a> {
    Ok(ReadResOk, &'a [u8]),
    Fail(Nfsstat3, PostOpAttr),
}

impl<'a> ReadRes<'a> {
    pub fn status(&self) -> Nfsstat3 {
        match self {
            Self::Ok(..) => Nfsstat3::Ok,
            Self::Fail(s, _) => *s,
        }
    }

    /// Status NFS3_OK and the head of `ok`; the caller appends the data and its padding.
    pub fn encode_ok_head(ok: &ReadResOk, w: &mut XdrWriter<'_>) {
        Nfsstat3::Ok.encode(w);
        ok.encode(w);
    }

    pub fn decode(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(match Nfsstat3::decode(r)? {
            Nfsstat3::Ok => {
                let file_attributes = PostOpAttr::decode(r)?;
                let (count, eof) = (r.u32()?, r.bool()?);
                ReadRes::Ok(ReadResOk { file_attributes, count, eof }, r.opaque(u32::MAX)?)
            }
            s => ReadRes::Fail(s, PostOpAttr::decode(r)?),
        })
    }

    /// Encodes the whole result, data included (with the data's own length on the wire).
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        match self {
            ReadRes::Ok(ok, data) => {
                Nfsstat3::Ok.encode(w);
                ok.file_attributes.encode(w);
                w.u32(ok.count);
                w.bool(ok.eof);
                w.opaque(data);
            }
            ReadRes::Fail(s, attrs) => {
                s.encode(w);
                attrs.encode(w);
            }
        }
    }
}

impl<'a> crate::xdr::Xdr<'a> for ReadRes<'a> {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        ReadRes::decode(r)
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        self.encode(w)
    }
}
