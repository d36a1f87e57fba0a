//! The basic data types of NFS version 3 (RFC 1813 section 2.5 and 2.6).

use crate::xdr::{xdr_via_inherent, Result, XdrError, XdrReader, XdrWriter};

/// Largest file handle (NFS3_FHSIZE).
pub const NFS3_FHSIZE: usize = 64;
pub const NFS3_COOKIEVERFSIZE: usize = 8;
pub const NFS3_CREATEVERFSIZE: usize = 8;
pub const NFS3_WRITEVERFSIZE: usize = 8;

/// writeverf3, cookieverf3 and createverf3.
pub type WriteVerf3 = [u8; NFS3_WRITEVERFSIZE];
pub type CookieVerf3 = [u8; NFS3_COOKIEVERFSIZE];
pub type CreateVerf3 = [u8; NFS3_CREATEVERFSIZE];

macro_rules! u32_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $val:expr),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum $name { $($(#[$vm])* $var = $val),+ }

        impl $name {
            pub fn from_u32(v: u32) -> Option<Self> {
                match v { $($val => Some(Self::$var),)+ _ => None }
            }
            pub fn decode(r: &mut $crate::xdr::XdrReader<'_>) -> $crate::xdr::Result<Self> {
                let v = r.u32()?;
                Self::from_u32(v).ok_or($crate::xdr::XdrError::BadValue(v))
            }
            pub fn encode(&self, w: &mut $crate::xdr::XdrWriter<'_>) {
                w.u32(*self as u32);
            }
        }
        $crate::xdr::xdr_via_inherent!($name);
    };
}
pub(crate) use u32_enum;

u32_enum! {
    /// nfsstat3: every status RFC 1813 defines.
    Nfsstat3 {
        Ok = 0,
        Perm = 1,
        Noent = 2,
        Io = 5,
        Nxio = 6,
        Acces = 13,
        Exist = 17,
        Xdev = 18,
        Nodev = 19,
        Notdir = 20,
        Isdir = 21,
        Inval = 22,
        Fbig = 27,
        Nospc = 28,
        Rofs = 30,
        Mlink = 31,
        Nametoolong = 63,
        Notempty = 66,
        Dquot = 69,
        Stale = 70,
        Remote = 71,
        Badhandle = 10001,
        NotSync = 10002,
        BadCookie = 10003,
        Notsupp = 10004,
        Toosmall = 10005,
        Serverfault = 10006,
        Badtype = 10007,
        Jukebox = 10008,
    }
}

u32_enum! {
    /// ftype3
    Ftype3 { Reg = 1, Dir = 2, Blk = 3, Chr = 4, Lnk = 5, Sock = 6, Fifo = 7 }
}

u32_enum! {
    /// stable_how: how far a WRITE must reach stable storage before the reply.
    StableHow { Unstable = 0, DataSync = 1, FileSync = 2 }
}

/// nfs_fh3: an opaque handle of at most 64 bytes, kept inline (no allocation per request).
#[derive(Clone, Copy)]
pub struct NfsFh3 {
    len: u8,
    data: [u8; NFS3_FHSIZE],
}

impl NfsFh3 {
    /// A handle from its bytes; `None` when longer than [`NFS3_FHSIZE`].
    pub fn new(bytes: &[u8]) -> Option<NfsFh3> {
        if bytes.len() > NFS3_FHSIZE {
            return None;
        }
        let mut data = [0u8; NFS3_FHSIZE];
        data[..bytes.len()].copy_from_slice(bytes);
        Some(NfsFh3 { len: bytes.len() as u8, data })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.data[..usize::from(self.len)]
    }

    pub fn decode(r: &mut XdrReader<'_>) -> Result<NfsFh3> {
        let b = r.opaque(NFS3_FHSIZE as u32)?;
        NfsFh3::new(b).ok_or(XdrError::Short)
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        w.opaque(self.as_bytes());
    }
}

impl Default for NfsFh3 {
    fn default() -> Self {
        NfsFh3 { len: 0, data: [0; NFS3_FHSIZE] }
    }
}

impl PartialEq for NfsFh3 {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl Eq for NfsFh3 {}

impl std::hash::Hash for NfsFh3 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl std::fmt::Debug for NfsFh3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NfsFh3(")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// nfstime3
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NfsTime3 {
    pub seconds: u32,
    pub nseconds: u32,
}

impl NfsTime3 {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<NfsTime3> {
        Ok(NfsTime3 { seconds: r.u32()?, nseconds: r.u32()? })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        w.u32(self.seconds);
        w.u32(self.nseconds);
    }
}

/// specdata3: device numbers of a block or character special file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Specdata3 {
    pub specdata1: u32,
    pub specdata2: u32,
}

impl Specdata3 {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Specdata3> {
        Ok(Specdata3 { specdata1: r.u32()?, specdata2: r.u32()? })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        w.u32(self.specdata1);
        w.u32(self.specdata2);
    }
}

/// fattr3 (`type` is `ftype` here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fattr3 {
    pub ftype: Ftype3,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub used: u64,
    pub rdev: Specdata3,
    pub fsid: u64,
    pub fileid: u64,
    pub atime: NfsTime3,
    pub mtime: NfsTime3,
    pub ctime: NfsTime3,
}

impl Fattr3 {
    /// Encoded size in bytes.
    pub const XDR_LEN: usize = 84;

    pub fn decode(r: &mut XdrReader<'_>) -> Result<Fattr3> {
        Ok(Fattr3 {
            ftype: Ftype3::decode(r)?,
            mode: r.u32()?,
            nlink: r.u32()?,
            uid: r.u32()?,
            gid: r.u32()?,
            size: r.u64()?,
            used: r.u64()?,
            rdev: Specdata3::decode(r)?,
            fsid: r.u64()?,
            fileid: r.u64()?,
            atime: NfsTime3::decode(r)?,
            mtime: NfsTime3::decode(r)?,
            ctime: NfsTime3::decode(r)?,
        })
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.ftype.encode(w);
        w.u32(self.mode);
        w.u32(self.nlink);
        w.u32(self.uid);
        w.u32(self.gid);
        w.u64(self.size);
        w.u64(self.used);
        self.rdev.encode(w);
        w.u64(self.fsid);
        w.u64(self.fileid);
        self.atime.encode(w);
        self.mtime.encode(w);
        self.ctime.encode(w);
    }

    /// The weak cache consistency subset of these attributes.
    pub fn wcc(&self) -> WccAttr {
        WccAttr { size: self.size, mtime: self.mtime, ctime: self.ctime }
    }
}

/// wcc_attr: attributes before an operation, for weak cache consistency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WccAttr {
    pub size: u64,
    pub mtime: NfsTime3,
    pub ctime: NfsTime3,
}

impl WccAttr {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<WccAttr> {
        Ok(WccAttr { size: r.u64()?, mtime: NfsTime3::decode(r)?, ctime: NfsTime3::decode(r)? })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        w.u64(self.size);
        self.mtime.encode(w);
        self.ctime.encode(w);
    }
}

/// An XDR optional (`union switch (bool)`) as a newtype over `Option`.
macro_rules! optional {
    ($(#[$m:meta])* $name:ident($inner:ty)) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name(pub Option<$inner>);

        impl $name {
            pub fn decode(r: &mut XdrReader<'_>) -> Result<Self> {
                Ok($name(if r.bool()? { Some(<$inner>::decode(r)?) } else { None }))
            }
            pub fn encode(&self, w: &mut XdrWriter<'_>) {
                w.bool(self.0.is_some());
                if let Some(v) = &self.0 {
                    v.encode(w);
                }
            }
        }
        $crate::xdr::xdr_via_inherent!($name);
    };
}

optional!(
    /// post_op_attr
    PostOpAttr(Fattr3)
);
optional!(
    /// pre_op_attr
    PreOpAttr(WccAttr)
);
optional!(
    /// post_op_fh3
    PostOpFh3(NfsFh3)
);

/// wcc_data: attributes before and after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WccData {
    pub before: PreOpAttr,
    pub after: PostOpAttr,
}

impl WccData {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<WccData> {
        Ok(WccData { before: PreOpAttr::decode(r)?, after: PostOpAttr::decode(r)? })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.before.encode(w);
        self.after.encode(w);
    }
}

/// set_atime / set_mtime (time_how and its client time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetTime {
    #[default]
    DontChange,
    ServerTime,
    Client(NfsTime3),
}

impl SetTime {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<SetTime> {
        match r.u32()? {
            0 => Ok(SetTime::DontChange),
            1 => Ok(SetTime::ServerTime),
            2 => Ok(SetTime::Client(NfsTime3::decode(r)?)),
            v => Err(XdrError::BadValue(v)),
        }
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        match self {
            SetTime::DontChange => w.u32(0),
            SetTime::ServerTime => w.u32(1),
            SetTime::Client(t) => {
                w.u32(2);
                t.encode(w);
            }
        }
    }
}

/// sattr3: attributes to set; `None` / `DontChange` leaves one alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sattr3 {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: SetTime,
    pub mtime: SetTime,
}

fn opt_u32(r: &mut XdrReader<'_>) -> Result<Option<u32>> {
    Ok(if r.bool()? { Some(r.u32()?) } else { None })
}

fn put_opt_u32(w: &mut XdrWriter<'_>, v: Option<u32>) {
    w.bool(v.is_some());
    if let Some(v) = v {
        w.u32(v);
    }
}

impl Sattr3 {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Sattr3> {
        Ok(Sattr3 {
            mode: opt_u32(r)?,
            uid: opt_u32(r)?,
            gid: opt_u32(r)?,
            size: if r.bool()? { Some(r.u64()?) } else { None },
            atime: SetTime::decode(r)?,
            mtime: SetTime::decode(r)?,
        })
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        put_opt_u32(w, self.mode);
        put_opt_u32(w, self.uid);
        put_opt_u32(w, self.gid);
        w.bool(self.size.is_some());
        if let Some(s) = self.size {
            w.u64(s);
        }
        self.atime.encode(w);
        self.mtime.encode(w);
    }
}

/// diropargs3: a name in a directory. The name is bytes as sent; the server validates it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirOpArgs3 {
    pub dir: NfsFh3,
    pub name: Vec<u8>,
}

impl DirOpArgs3 {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<DirOpArgs3> {
        Ok(DirOpArgs3 { dir: NfsFh3::decode(r)?, name: r.string(u32::MAX)?.to_vec() })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.dir.encode(w);
        w.string(&self.name);
    }
}

/// createhow3: the mode of a CREATE and what comes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateHow3 {
    Unchecked(Sattr3),
    Guarded(Sattr3),
    Exclusive(CreateVerf3),
}

impl CreateHow3 {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<CreateHow3> {
        match r.u32()? {
            0 => Ok(CreateHow3::Unchecked(Sattr3::decode(r)?)),
            1 => Ok(CreateHow3::Guarded(Sattr3::decode(r)?)),
            2 => Ok(CreateHow3::Exclusive(r.array()?)),
            v => Err(XdrError::BadValue(v)),
        }
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        match self {
            CreateHow3::Unchecked(s) => {
                w.u32(0);
                s.encode(w);
            }
            CreateHow3::Guarded(s) => {
                w.u32(1);
                s.encode(w);
            }
            CreateHow3::Exclusive(v) => {
                w.u32(2);
                w.opaque_fixed(v);
            }
        }
    }
}

/// mknoddata3: what MKNOD makes. Regular files, directories and links carry nothing (the
/// server answers NFS3ERR_BADTYPE), but they are valid XDR and decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MknodData3 {
    Chr { dev_attributes: Sattr3, spec: Specdata3 },
    Blk { dev_attributes: Sattr3, spec: Specdata3 },
    Sock(Sattr3),
    Fifo(Sattr3),
    Other(Ftype3),
}

impl MknodData3 {
    pub fn ftype(&self) -> Ftype3 {
        match self {
            MknodData3::Chr { .. } => Ftype3::Chr,
            MknodData3::Blk { .. } => Ftype3::Blk,
            MknodData3::Sock(_) => Ftype3::Sock,
            MknodData3::Fifo(_) => Ftype3::Fifo,
            MknodData3::Other(t) => *t,
        }
    }

    pub fn decode(r: &mut XdrReader<'_>) -> Result<MknodData3> {
        Ok(match Ftype3::decode(r)? {
            Ftype3::Chr => MknodData3::Chr { dev_attributes: Sattr3::decode(r)?, spec: Specdata3::decode(r)? },
            Ftype3::Blk => MknodData3::Blk { dev_attributes: Sattr3::decode(r)?, spec: Specdata3::decode(r)? },
            Ftype3::Sock => MknodData3::Sock(Sattr3::decode(r)?),
            Ftype3::Fifo => MknodData3::Fifo(Sattr3::decode(r)?),
            t => MknodData3::Other(t),
        })
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.ftype().encode(w);
        match self {
            MknodData3::Chr { dev_attributes, spec } | MknodData3::Blk { dev_attributes, spec } => {
                dev_attributes.encode(w);
                spec.encode(w);
            }
            MknodData3::Sock(s) | MknodData3::Fifo(s) => s.encode(w),
            // A chosen `Other(Chr)` etc. would not round-trip; encode what its type needs.
            MknodData3::Other(t) => match t {
                Ftype3::Chr | Ftype3::Blk => {
                    Sattr3::default().encode(w);
                    Specdata3::default().encode(w);
                }
                Ftype3::Sock | Ftype3::Fifo => Sattr3::default().encode(w),
                _ => {}
            },
        }
    }
}

xdr_via_inherent!(NfsFh3, NfsTime3, Specdata3, Fattr3, WccAttr, WccData, SetTime, Sattr3, DirOpArgs3, CreateHow3, MknodData3);
