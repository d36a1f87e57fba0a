//! ONC RPC version 2 messages (RFC 5531): call headers with AUTH_NONE / AUTH_SYS
//! credentials, accepted and denied replies, for both the server and the client side.

use crate::xdr::{XdrError, XdrReader, XdrWriter};

pub const RPC_VERSION: u32 = 2;
pub const PROG_PORTMAP: u32 = 100_000;
pub const PROG_NFS: u32 = 100_003;
pub const PROG_MOUNT: u32 = 100_005;
pub const NFS_VERSION: u32 = 3;
pub const MOUNT_VERSION: u32 = 3;

/// msg_type
const CALL: u32 = 0;
const REPLY: u32 = 1;
/// reply_stat
const MSG_ACCEPTED: u32 = 0;
const MSG_DENIED: u32 = 1;

/// auth_flavor values.
pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;
pub const AUTH_SHORT: u32 = 2;
pub const AUTH_DH: u32 = 3;
pub const RPCSEC_GSS: u32 = 6;

/// Limits from RFC 5531: an opaque_auth body, an AUTH_SYS machine name and group list.
pub const MAX_AUTH_BYTES: u32 = 400;
pub const MAX_MACHINE_NAME: u32 = 255;
pub const MAX_AUTH_GIDS: u32 = 16;

/// AUTH_SYS credentials (authsys_parms).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthSys {
    pub stamp: u32,
    pub machine_name: Vec<u8>,
    pub uid: u32,
    pub gid: u32,
    /// At most [`MAX_AUTH_GIDS`].
    pub gids: Vec<u32>,
}

/// A credential or verifier (opaque_auth); other flavors keep only their number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    Sys(AuthSys),
    Other(u32),
}

impl Auth {
    pub fn flavor(&self) -> u32 {
        match self {
            Auth::None => AUTH_NONE,
            Auth::Sys(_) => AUTH_SYS,
            Auth::Other(f) => *f,
        }
    }

    /// Decodes an opaque_auth; an AUTH_SYS body must parse and fill its opaque exactly.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Auth, XdrError> {
        let flavor = r.u32()?;
        let body = r.opaque(MAX_AUTH_BYTES)?;
        match flavor {
            AUTH_NONE => Ok(Auth::None),
            AUTH_SYS => {
                let mut br = XdrReader::new(body);
                let sys = AuthSys::decode(&mut br)?;
                if br.remaining() != 0 {
                    return Err(XdrError::BadValue(AUTH_SYS));
                }
                Ok(Auth::Sys(sys))
            }
            f => Ok(Auth::Other(f)),
        }
    }

    /// Encodes an opaque_auth; `Other` is sent with an empty body.
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        w.u32(self.flavor());
        match self {
            Auth::Sys(sys) => {
                let mut body = Vec::with_capacity(64);
                sys.encode(&mut XdrWriter::new(&mut body));
                w.opaque(&body);
            }
            Auth::None | Auth::Other(_) => w.u32(0),
        }
    }
}

impl AuthSys {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<AuthSys, XdrError> {
        let stamp = r.u32()?;
        let machine_name = r.string(MAX_MACHINE_NAME)?.to_vec();
        let uid = r.u32()?;
        let gid = r.u32()?;
        let n = r.array_len(MAX_AUTH_GIDS, 4)?;
        let mut gids = Vec::with_capacity(n);
        for _ in 0..n {
            gids.push(r.u32()?);
        }
        Ok(AuthSys { stamp, machine_name, uid, gid, gids })
    }

    /// Encodes the body; a machine name or group list over the limits is cut to them.
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        w.u32(self.stamp);
        let name = &self.machine_name[..self.machine_name.len().min(MAX_MACHINE_NAME as usize)];
        w.string(name);
        w.u32(self.uid);
        w.u32(self.gid);
        let gids = &self.gids[..self.gids.len().min(MAX_AUTH_GIDS as usize)];
        w.u32(gids.len() as u32);
        for g in gids {
            w.u32(*g);
        }
    }
}

/// The header of a call; the procedure's arguments follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallHeader {
    pub xid: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: Auth,
    pub verf: Auth,
}

/// Why a call could not be decoded, with what a server needs to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// Not even a transaction id and message type: nothing can be answered (drop it).
    #[error("RPC message too short or malformed: {0}")]
    Xdr(#[from] XdrError),
    /// A reply where a call was expected, or a call where a reply was (drop it).
    #[error("RPC message {xid:#x} has the wrong direction")]
    WrongDirection { xid: u32 },
    /// RPC version other than 2: answer MSG_DENIED / RPC_MISMATCH (2, 2).
    #[error("RPC version {vers} in call {xid:#x}")]
    RpcMismatch { xid: u32, vers: u32 },
    /// The credential or verifier does not parse: answer AUTH_ERROR / AUTH_BADCRED.
    #[error("malformed credentials in call {xid:#x}")]
    BadCred { xid: u32 },
}

/// Decodes a call record into its header and its argument bytes.
pub fn decode_call(rec: &[u8]) -> Result<(CallHeader, &[u8]), RpcError> {
    let mut r = XdrReader::new(rec);
    let xid = r.u32()?;
    if r.u32()? != CALL {
        return Err(RpcError::WrongDirection { xid });
    }
    let rpcvers = r.u32()?;
    if rpcvers != RPC_VERSION {
        return Err(RpcError::RpcMismatch { xid, vers: rpcvers });
    }
    let (prog, vers, proc_) = (r.u32()?, r.u32()?, r.u32()?);
    let cred = Auth::decode(&mut r).map_err(|_| RpcError::BadCred { xid })?;
    let verf = Auth::decode(&mut r).map_err(|_| RpcError::BadCred { xid })?;
    Ok((CallHeader { xid, prog, vers, proc_, cred, verf }, r.rest()))
}

/// Appends a call header; the caller appends the arguments (and frames the record).
pub fn encode_call(hdr: &CallHeader, out: &mut Vec<u8>) {
    let mut w = XdrWriter::new(out);
    w.u32(hdr.xid);
    w.u32(CALL);
    w.u32(RPC_VERSION);
    w.u32(hdr.prog);
    w.u32(hdr.vers);
    w.u32(hdr.proc_);
    hdr.cred.encode(&mut w);
    hdr.verf.encode(&mut w);
}

/// accept_stat of an accepted reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptStat {
    Success,
    ProgUnavail,
    ProgMismatch { low: u32, high: u32 },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
}

/// auth_stat: why credentials were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AuthStat {
    Ok = 0,
    BadCred = 1,
    RejectedCred = 2,
    BadVerf = 3,
    RejectedVerf = 4,
    TooWeak = 5,
    InvalidResp = 6,
    Failed = 7,
    KerbGeneric = 8,
    TimeExpire = 9,
    TktFile = 10,
    Decode = 11,
    NetAddr = 12,
    RpcsecGssCredProblem = 13,
    RpcsecGssCtxProblem = 14,
}

impl AuthStat {
    pub fn from_u32(v: u32) -> Option<AuthStat> {
        use AuthStat::*;
        const ALL: [AuthStat; 15] = [
            Ok,
            BadCred,
            RejectedCred,
            BadVerf,
            RejectedVerf,
            TooWeak,
            InvalidResp,
            Failed,
            KerbGeneric,
            TimeExpire,
            TktFile,
            Decode,
            NetAddr,
            RpcsecGssCredProblem,
            RpcsecGssCtxProblem,
        ];
        ALL.get(v as usize).copied()
    }
}

/// reject_stat of a denied reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectStat {
    RpcMismatch { low: u32, high: u32 },
    AuthError(AuthStat),
}

/// Appends an accepted reply header (verifier AUTH_NONE); after `Success` the caller appends
/// the procedure's results.
pub fn encode_accepted(xid: u32, stat: AcceptStat, out: &mut Vec<u8>) {
    let mut w = XdrWriter::new(out);
    w.u32(xid);
    w.u32(REPLY);
    w.u32(MSG_ACCEPTED);
    Auth::None.encode(&mut w);
    match stat {
        AcceptStat::Success => w.u32(0),
        AcceptStat::ProgUnavail => w.u32(1),
        AcceptStat::ProgMismatch { low, high } => {
            w.u32(2);
            w.u32(low);
            w.u32(high);
        }
        AcceptStat::ProcUnavail => w.u32(3),
        AcceptStat::GarbageArgs => w.u32(4),
        AcceptStat::SystemErr => w.u32(5),
    }
}

/// Appends a denied reply (the whole message).
pub fn encode_denied(xid: u32, stat: RejectStat, out: &mut Vec<u8>) {
    let mut w = XdrWriter::new(out);
    w.u32(xid);
    w.u32(REPLY);
    w.u32(MSG_DENIED);
    match stat {
        RejectStat::RpcMismatch { low, high } => {
            w.u32(0);
            w.u32(low);
            w.u32(high);
        }
        RejectStat::AuthError(s) => {
            w.u32(1);
            w.u32(s as u32);
        }
    }
}

/// A reply that carries no results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("program unavailable")]
    ProgUnavail,
    #[error("program version mismatch ({low}..={high})")]
    ProgMismatch { low: u32, high: u32 },
    #[error("procedure unavailable")]
    ProcUnavail,
    #[error("garbage arguments")]
    GarbageArgs,
    #[error("system error")]
    SystemErr,
    #[error("RPC version mismatch ({low}..={high})")]
    RpcMismatch { low: u32, high: u32 },
    #[error("authentication error {0:?}")]
    AuthError(AuthStat),
}

/// Decodes a reply record: its xid, then the result bytes or why there are none.
pub fn decode_reply(rec: &[u8]) -> Result<(u32, Result<&[u8], ReplyError>), RpcError> {
    let mut r = XdrReader::new(rec);
    let xid = r.u32()?;
    if r.u32()? != REPLY {
        return Err(RpcError::WrongDirection { xid });
    }
    match r.u32()? {
        MSG_ACCEPTED => {
            Auth::decode(&mut r)?;
            Ok((xid, decode_accepted(&mut r)?))
        }
        MSG_DENIED => Ok((xid, Err(decode_denied(&mut r)?))),
        v => Err(RpcError::Xdr(XdrError::BadValue(v))),
    }
}

fn decode_accepted<'a>(r: &mut XdrReader<'a>) -> Result<Result<&'a [u8], ReplyError>, XdrError> {
    Ok(Err(match r.u32()? {
        0 => return Ok(Ok(r.rest())),
        1 => ReplyError::ProgUnavail,
        2 => ReplyError::ProgMismatch { low: r.u32()?, high: r.u32()? },
        3 => ReplyError::ProcUnavail,
        4 => ReplyError::GarbageArgs,
        5 => ReplyError::SystemErr,
        v => return Err(XdrError::BadValue(v)),
    }))
}

fn decode_denied(r: &mut XdrReader<'_>) -> Result<ReplyError, XdrError> {
    match r.u32()? {
        0 => Ok(ReplyError::RpcMismatch { low: r.u32()?, high: r.u32()? }),
        1 => {
            let v = r.u32()?;
            AuthStat::from_u32(v).map(ReplyError::AuthError).ok_or(XdrError::BadValue(v))
        }
        v => Err(XdrError::BadValue(v)),
    }
}

#[cfg(test)]
mod tests;
