//! Portmapper version 2 (RFC 1833 section 3) and rpcbind versions 3 and 4 (RFC 1833
//! section 2): the arguments of each procedure a server answers or a client sends, and
//! their results. Clients ask these where a program lives before calling it (Linux
//! `mount.nfs`, `showmount`, `rpcinfo`, libnfs); servers register themselves with SET and
//! UNSET. Sans-IO like the rest of the crate: every decoder is bounded by its input.

use std::net::{IpAddr, SocketAddr};

use crate::xdr::{XdrError, XdrReader, XdrWriter};

pub const PMAP_PORT: u16 = 111;
pub const PMAP_VERSION: u32 = 2;
pub const RPCB_VERSION3: u32 = 3;
pub const RPCB_VERSION4: u32 = 4;

/// Procedure numbers shared by all three versions (GETPORT in version 2 is GETADDR in 3
/// and 4; DUMP's results differ).
pub const PROC_NULL: u32 = 0;
pub const PROC_SET: u32 = 1;
pub const PROC_UNSET: u32 = 2;
pub const PROC_GETADDR: u32 = 3;
pub const PROC_DUMP: u32 = 4;
/// rpcbind version 4 only.
pub const PROC_GETVERSADDR: u32 = 9;

pub const IPPROTO_TCP: u32 = 6;
pub const IPPROTO_UDP: u32 = 17;

/// Longest netid, universal address and owner accepted: real ones ("tcp6",
/// "ffff:...:ffff.255.255", "superuser") are far shorter, and a bound keeps a call small.
pub const MAX_RPCB_STRING: u32 = 255;

/// A version 2 mapping (`struct mapping`): where `prog` `vers` listens over `prot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mapping {
    pub prog: u32,
    pub vers: u32,
    /// [`IPPROTO_TCP`] or [`IPPROTO_UDP`].
    pub prot: u32,
    pub port: u32,
}

impl Mapping {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Mapping, XdrError> {
        Ok(Mapping { prog: r.u32()?, vers: r.u32()?, prot: r.u32()?, port: r.u32()? })
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        for v in [self.prog, self.vers, self.prot, self.port] {
            w.u32(v);
        }
    }
}

/// A version 3/4 registration (`struct rpcb`): `addr` is a universal address
/// ("127.0.0.1.8.1" is port 2049) for transport `netid` ("tcp", "udp", "tcp6", "udp6").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rpcb {
    pub prog: u32,
    pub vers: u32,
    pub netid: String,
    pub addr: String,
    pub owner: String,
}

impl Rpcb {
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Rpcb, XdrError> {
        let (prog, vers) = (r.u32()?, r.u32()?);
        let mut text = || -> Result<String, XdrError> {
            let b = r.string(MAX_RPCB_STRING)?;
            // Netids and universal addresses are ASCII; anything else is garbage.
            String::from_utf8(b.to_vec()).map_err(|_| XdrError::BadValue(0))
        };
        let (netid, addr, owner) = (text()?, text()?, text()?);
        Ok(Rpcb { prog, vers, netid, addr, owner })
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        w.u32(self.prog);
        w.u32(self.vers);
        for s in [&self.netid, &self.addr, &self.owner] {
            w.string(s.as_bytes());
        }
    }
}

/// A decoded call to program 100000.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Null,
    /// Version 2 SET, UNSET, GETPORT.
    Set(Mapping),
    Unset(Mapping),
    Getport(Mapping),
    /// Version 2 DUMP (answered with a `pmaplist`).
    Dump,
    /// Versions 3 and 4 SET, UNSET, GETADDR, and version 4 GETVERSADDR.
    RpcbSet(Rpcb),
    RpcbUnset(Rpcb),
    Getaddr(Rpcb),
    Getversaddr(Rpcb),
    /// Versions 3 and 4 DUMP (answered with an `rpcblist`).
    RpcbDump,
}

impl Call {
    /// The procedure number (the version follows from the variant, but for NULL).
    pub fn proc_(&self) -> u32 {
        match self {
            Call::Null => PROC_NULL,
            Call::Set(_) | Call::RpcbSet(_) => PROC_SET,
            Call::Unset(_) | Call::RpcbUnset(_) => PROC_UNSET,
            Call::Getport(_) | Call::Getaddr(_) => PROC_GETADDR,
            Call::Dump | Call::RpcbDump => PROC_DUMP,
            Call::Getversaddr(_) => PROC_GETVERSADDR,
        }
    }

    /// Appends the arguments (a client's side of [`decode_call`]).
    pub fn encode_args(&self, w: &mut XdrWriter<'_>) {
        match self {
            Call::Null | Call::Dump | Call::RpcbDump => {}
            Call::Set(m) | Call::Unset(m) | Call::Getport(m) => m.encode(w),
            Call::RpcbSet(b) | Call::RpcbUnset(b) | Call::Getaddr(b) | Call::Getversaddr(b) => b.encode(w),
        }
    }
}

/// Why a call to program 100000 gets no result: the accept_stat to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// A version other than 2, 3 or 4: PROG_MISMATCH (2, 4).
    ProgMismatch,
    /// A procedure not answered (CALLIT, GETTIME, the address translations, ...).
    ProcUnavail,
    /// The arguments do not decode, or bytes follow them.
    GarbageArgs,
}

/// Lowest and highest version answered, for PROG_MISMATCH.
pub const VERSIONS: (u32, u32) = (PMAP_VERSION, RPCB_VERSION4);

/// Decodes the arguments of procedure `proc_` of version `vers`.
pub fn decode_call(vers: u32, proc_: u32, args: &[u8]) -> Result<Call, CallError> {
    if !(VERSIONS.0..=VERSIONS.1).contains(&vers) {
        return Err(CallError::ProgMismatch);
    }
    let mut r = XdrReader::new(args);
    let v2 = vers == PMAP_VERSION;
    let call = match proc_ {
        PROC_NULL => Ok(Call::Null),
        PROC_DUMP if v2 => Ok(Call::Dump),
        PROC_DUMP => Ok(Call::RpcbDump),
        PROC_SET | PROC_UNSET | PROC_GETADDR if v2 => Mapping::decode(&mut r).map(|m| match proc_ {
            PROC_SET => Call::Set(m),
            PROC_UNSET => Call::Unset(m),
            _ => Call::Getport(m),
        }),
        PROC_SET | PROC_UNSET | PROC_GETADDR => Rpcb::decode(&mut r).map(|b| match proc_ {
            PROC_SET => Call::RpcbSet(b),
            PROC_UNSET => Call::RpcbUnset(b),
            _ => Call::Getaddr(b),
        }),
        PROC_GETVERSADDR if vers == RPCB_VERSION4 => Rpcb::decode(&mut r).map(Call::Getversaddr),
        _ => return Err(CallError::ProcUnavail),
    };
    match call {
        Ok(c) if r.remaining() == 0 => Ok(c),
        _ => Err(CallError::GarbageArgs),
    }
}

/// Appends a version 2 DUMP result (`pmaplist`: each entry behind TRUE, then FALSE).
pub fn encode_pmaplist(maps: &[Mapping], w: &mut XdrWriter<'_>) {
    for m in maps {
        w.bool(true);
        m.encode(w);
    }
    w.bool(false);
}

/// Appends a version 3/4 DUMP result (`rpcblist`).
pub fn encode_rpcblist(list: &[Rpcb], w: &mut XdrWriter<'_>) {
    for b in list {
        w.bool(true);
        b.encode(w);
    }
    w.bool(false);
}

/// Most entries a DUMP result decodes into (a client-side bound; a busy rpcbind holds a
/// few dozen).
pub const MAX_DUMP_ENTRIES: usize = 4096;

/// Decodes a version 2 DUMP result.
pub fn decode_pmaplist(r: &mut XdrReader<'_>) -> Result<Vec<Mapping>, XdrError> {
    let mut out = Vec::new();
    while r.bool()? {
        if out.len() == MAX_DUMP_ENTRIES {
            return Err(XdrError::BadValue(MAX_DUMP_ENTRIES as u32));
        }
        out.push(Mapping::decode(r)?);
    }
    Ok(out)
}

/// Decodes a version 3/4 DUMP result.
pub fn decode_rpcblist(r: &mut XdrReader<'_>) -> Result<Vec<Rpcb>, XdrError> {
    let mut out = Vec::new();
    while r.bool()? {
        if out.len() == MAX_DUMP_ENTRIES {
            return Err(XdrError::BadValue(MAX_DUMP_ENTRIES as u32));
        }
        out.push(Rpcb::decode(r)?);
    }
    Ok(out)
}

/// The netid of a transport for an address's family: "tcp"/"udp", "tcp6"/"udp6".
pub fn netid(addr: &SocketAddr, tcp: bool) -> &'static str {
    match (addr.is_ipv4(), tcp) {
        (true, true) => "tcp",
        (true, false) => "udp",
        (false, true) => "tcp6",
        (false, false) => "udp6",
    }
}

/// The universal address of `addr` (RFC 5665 section 5.2.3): the IP address in its usual
/// text form, then the port's high and low bytes: 127.0.0.1:2049 is "127.0.0.1.8.1".
pub fn uaddr(addr: &SocketAddr) -> String {
    let p = addr.port();
    format!("{}.{}.{}", addr.ip().to_canonical(), p >> 8, p & 0xff)
}

/// Parses a universal address; None when it is not one.
pub fn parse_uaddr(s: &str) -> Option<SocketAddr> {
    let (rest, lo) = s.rsplit_once('.')?;
    let (ip, hi) = rest.rsplit_once('.')?;
    let (hi, lo): (u8, u8) = (hi.parse().ok()?, lo.parse().ok()?);
    let ip: IpAddr = ip.parse().ok()?;
    Some(SocketAddr::new(ip, u16::from(hi) << 8 | u16::from(lo)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut XdrWriter<'_>)) -> Vec<u8> {
        let mut v = Vec::new();
        f(&mut XdrWriter::new(&mut v));
        v
    }

    #[test]
    fn version_2_calls() {
        let m = Mapping { prog: 100_005, vers: 3, prot: IPPROTO_TCP, port: 0 };
        let a = args(|w| m.encode(w));
        assert_eq!(decode_call(2, PROC_GETADDR, &a), Ok(Call::Getport(m)));
        assert_eq!(decode_call(2, PROC_SET, &a), Ok(Call::Set(m)));
        assert_eq!(decode_call(2, PROC_UNSET, &a), Ok(Call::Unset(m)));
        assert_eq!(decode_call(2, PROC_DUMP, &[]), Ok(Call::Dump));
        assert_eq!(decode_call(2, PROC_NULL, &[]), Ok(Call::Null));
        // CALLIT is not answered; short or long arguments are garbage.
        assert_eq!(decode_call(2, 5, &a), Err(CallError::ProcUnavail));
        assert_eq!(decode_call(2, PROC_GETADDR, &a[..12]), Err(CallError::GarbageArgs));
        assert_eq!(decode_call(2, PROC_DUMP, &[0; 4]), Err(CallError::GarbageArgs));
        assert_eq!(decode_call(1, PROC_NULL, &[]), Err(CallError::ProgMismatch));
        assert_eq!(decode_call(5, PROC_NULL, &[]), Err(CallError::ProgMismatch));
    }

    #[test]
    fn rpcbind_calls() {
        let b = Rpcb { prog: 100_003, vers: 3, netid: "tcp".into(), addr: "127.0.0.1.8.1".into(), owner: "braid".into() };
        let a = args(|w| b.encode(w));
        assert_eq!(decode_call(3, PROC_GETADDR, &a), Ok(Call::Getaddr(b.clone())));
        assert_eq!(decode_call(4, PROC_SET, &a), Ok(Call::RpcbSet(b.clone())));
        assert_eq!(decode_call(4, PROC_UNSET, &a), Ok(Call::RpcbUnset(b.clone())));
        assert_eq!(decode_call(4, PROC_GETVERSADDR, &a), Ok(Call::Getversaddr(b.clone())));
        assert_eq!(decode_call(3, PROC_GETVERSADDR, &a), Err(CallError::ProcUnavail));
        assert_eq!(decode_call(3, PROC_DUMP, &[]), Ok(Call::RpcbDump));
        // A netid longer than the bound, and one that is not text.
        let long = args(|w| {
            w.u32(1);
            w.u32(1);
            w.string(&[b'a'; 256]);
        });
        assert_eq!(decode_call(4, PROC_GETADDR, &long), Err(CallError::GarbageArgs));
        let bad = args(|w| Rpcb { netid: "\u{0}".into(), ..b.clone() }.encode(w));
        let mut bad = bad;
        bad[8 + 4] = 0xff;
        assert_eq!(decode_call(4, PROC_GETADDR, &bad), Err(CallError::GarbageArgs));
    }

    #[test]
    fn lists_round_trip() {
        let maps =
            [Mapping { prog: 100_000, vers: 2, prot: IPPROTO_UDP, port: 111 }, Mapping { prog: 100_003, vers: 3, prot: IPPROTO_TCP, port: 2049 }];
        let v = args(|w| encode_pmaplist(&maps, w));
        assert_eq!(v.len(), 4 + 2 * 20);
        assert_eq!(decode_pmaplist(&mut XdrReader::new(&v)).unwrap(), maps);
        let list = [Rpcb { prog: 100_005, vers: 3, netid: "tcp6".into(), addr: "::1.8.1".into(), owner: "braid".into() }];
        let v = args(|w| encode_rpcblist(&list, w));
        assert_eq!(decode_rpcblist(&mut XdrReader::new(&v)).unwrap(), list);
        assert!(decode_rpcblist(&mut XdrReader::new(&v[..v.len() - 4])).is_err());
    }

    #[test]
    fn universal_addresses() {
        let a: SocketAddr = "127.0.0.1:2049".parse().unwrap();
        assert_eq!(uaddr(&a), "127.0.0.1.8.1");
        assert_eq!(parse_uaddr("127.0.0.1.8.1"), Some(a));
        let b: SocketAddr = "[fd00::1]:111".parse().unwrap();
        assert_eq!(uaddr(&b), "fd00::1.0.111");
        assert_eq!(parse_uaddr("fd00::1.0.111"), Some(b));
        // A v4-mapped address is written as IPv4, as rpcbind does.
        assert_eq!(uaddr(&"[::ffff:10.0.0.1]:2049".parse().unwrap()), "10.0.0.1.8.1");
        for bad in ["", "1.2.3.4", "1.2.3.4.256.1", "x.8.1", "1.2.3.4.8.-1"] {
            assert_eq!(parse_uaddr(bad), None, "{bad}");
        }
        assert_eq!(netid(&a, true), "tcp");
        assert_eq!(netid(&b, false), "udp6");
    }
}
