//! The MOUNT protocol version 3 (RFC 1813 appendix I): how a client gets an export's root
//! file handle, plus the mount and export lists.

use crate::nfs3::types::{u32_enum, NfsFh3};
use crate::xdr::{Result, Xdr, XdrReader, XdrWriter};

pub const MNTPATHLEN: u32 = 1024;
pub const MNTNAMLEN: u32 = 255;
pub const FHSIZE3: u32 = 64;

/// Flavors listed in a MNT reply: at most this many are decoded (servers list one or two).
pub const MAX_AUTH_FLAVORS: u32 = 64;

u32_enum! {
    /// The MOUNT version 3 procedures.
    MountProc3 { Null = 0, Mnt = 1, Dump = 2, Umnt = 3, Umntall = 4, Export = 5 }
}

u32_enum! {
    /// mountstat3
    MountStat3 {
        Ok = 0,
        Perm = 1,
        Noent = 2,
        Io = 5,
        Acces = 13,
        Notdir = 20,
        Inval = 22,
        Nametoolong = 63,
        Notsupp = 10004,
        Serverfault = 10006,
    }
}

/// MNT's and UMNT's argument: the export path (bytes as sent).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MntArgs {
    pub dirpath: Vec<u8>,
}

impl MntArgs {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<MntArgs> {
        Ok(MntArgs { dirpath: r.string(MNTPATHLEN)?.to_vec() })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        w.string(&self.dirpath);
    }
}

/// UMNT takes the same dirpath as MNT.
pub type UmntArgs = MntArgs;

/// mountres3_ok: the root handle and the auth flavors the server accepts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MntResOk {
    pub fhandle: NfsFh3,
    pub auth_flavors: Vec<u32>,
}

impl MntResOk {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<MntResOk> {
        let fhandle = NfsFh3::decode(r)?;
        let n = r.array_len(MAX_AUTH_FLAVORS, 4)?;
        let mut auth_flavors = Vec::with_capacity(n);
        for _ in 0..n {
            auth_flavors.push(r.u32()?);
        }
        Ok(MntResOk { fhandle, auth_flavors })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.fhandle.encode(w);
        w.u32(self.auth_flavors.len() as u32);
        for f in &self.auth_flavors {
            w.u32(*f);
        }
    }
}

/// mountres3
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MntRes {
    Ok(MntResOk),
    Fail(MountStat3),
}

impl MntRes {
    pub fn status(&self) -> MountStat3 {
        match self {
            MntRes::Ok(_) => MountStat3::Ok,
            MntRes::Fail(s) => *s,
        }
    }
    pub fn decode(r: &mut XdrReader<'_>) -> Result<MntRes> {
        Ok(match MountStat3::decode(r)? {
            MountStat3::Ok => MntRes::Ok(MntResOk::decode(r)?),
            s => MntRes::Fail(s),
        })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.status().encode(w);
        if let MntRes::Ok(ok) = self {
            ok.encode(w);
        }
    }
}

/// mountbody: one entry of DUMP's mount list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MountBody {
    pub hostname: Vec<u8>,
    pub directory: Vec<u8>,
}

impl<'a> Xdr<'a> for MountBody {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(MountBody { hostname: r.string(MNTNAMLEN)?.to_vec(), directory: r.string(MNTPATHLEN)?.to_vec() })
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.string(&self.hostname);
        w.string(&self.directory);
    }
}

/// exportnode: an export path and the groups (host names) that may mount it; an empty
/// group list means everyone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportNode {
    pub dir: Vec<u8>,
    pub groups: Vec<Vec<u8>>,
}

impl<'a> Xdr<'a> for ExportNode {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        let dir = r.string(MNTPATHLEN)?.to_vec();
        let mut groups = Vec::new();
        while r.follows()? {
            groups.push(r.string(MNTNAMLEN)?.to_vec());
        }
        Ok(ExportNode { dir, groups })
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.string(&self.dir);
        for g in &self.groups {
            w.bool(true);
            w.string(g);
        }
        w.bool(false);
    }
}

/// Decodes an XDR linked list (`*T` chained through `next`) without recursion; it grows only
/// with the entries actually present.
fn decode_list<'a, T: Xdr<'a>>(r: &mut XdrReader<'a>) -> Result<Vec<T>> {
    let mut out = Vec::new();
    while r.follows()? {
        out.push(T::decode_xdr(r)?);
    }
    Ok(out)
}

fn encode_list<'a, T: Xdr<'a>>(items: &[T], w: &mut XdrWriter<'_>) {
    for it in items {
        w.bool(true);
        it.encode_xdr(w);
    }
    w.bool(false);
}

/// DUMP's result (mountlist).
pub fn encode_mount_list(list: &[MountBody], w: &mut XdrWriter<'_>) {
    encode_list(list, w)
}

pub fn decode_mount_list(r: &mut XdrReader<'_>) -> Result<Vec<MountBody>> {
    decode_list(r)
}

/// EXPORT's result (exports).
pub fn encode_export_list(list: &[ExportNode], w: &mut XdrWriter<'_>) {
    encode_list(list, w)
}

pub fn decode_export_list(r: &mut XdrReader<'_>) -> Result<Vec<ExportNode>> {
    decode_list(r)
}

/// The arguments of any MOUNT procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountArgs3 {
    Null,
    Mnt(MntArgs),
    Dump,
    Umnt(UmntArgs),
    Umntall,
    Export,
}

impl MountArgs3 {
    pub fn decode(proc_: MountProc3, r: &mut XdrReader<'_>) -> Result<Self> {
        Ok(match proc_ {
            MountProc3::Null => MountArgs3::Null,
            MountProc3::Mnt => MountArgs3::Mnt(MntArgs::decode(r)?),
            MountProc3::Dump => MountArgs3::Dump,
            MountProc3::Umnt => MountArgs3::Umnt(MntArgs::decode(r)?),
            MountProc3::Umntall => MountArgs3::Umntall,
            MountProc3::Export => MountArgs3::Export,
        })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        if let MountArgs3::Mnt(a) | MountArgs3::Umnt(a) = self {
            a.encode(w);
        }
    }
}

#[cfg(test)]
mod tests;
