//! srvsvc (MS-SRVS) operations: NetrShareEnumAll (opnum 15),
//! NetrShareGetInfo (16) and NetrServerGetInfo (21).
//!
//! Union arms use the non-encapsulated union encoding (discriminant, then
//! arm); levels outside the IDL's cases are treated as an empty default arm,
//! so they decode and are answered with `ERROR_INVALID_LEVEL`.

use crate::ndr::{NdrError, NdrReader, NdrWriter};
use crate::pdu::{NCA_S_FAULT_NDR, NCA_S_OP_RNG_ERROR};
use crate::{RpcContext, ShareInfo};

/// NetrShareEnumAll opnum (MS-SRVS §3.1.4.8).
pub const OP_NETR_SHARE_ENUM_ALL: u16 = 15;
/// NetrShareGetInfo opnum (MS-SRVS §3.1.4.10).
pub const OP_NETR_SHARE_GET_INFO: u16 = 16;
/// NetrServerGetInfo opnum (MS-SRVS §3.1.4.17).
pub const OP_NETR_SERVER_GET_INFO: u16 = 21;

/// Success.
pub const WERR_OK: u32 = 0;
/// `ERROR_INVALID_LEVEL` (MS-ERREF §2.2).
pub const WERR_INVALID_LEVEL: u32 = 0x7c;
/// `NERR_NetNameNotFound`: the share does not exist (MS-SRVS §3.1.4.10).
pub const NERR_NET_NAME_NOT_FOUND: u32 = 0x906;
/// `PLATFORM_ID_NT` (MS-SRVS §2.2.4, SERVER_INFO_100 platform ids).
pub const PLATFORM_ID_NT: u32 = 500;

/// Share levels NetrShareEnumAll accepts (MS-SRVS §2.2.3, SHARE_ENUM_UNION;
/// 503 not implemented).
const ENUM_LEVELS: [u32; 5] = [0, 1, 2, 501, 502];
/// Share levels NetrShareGetInfo accepts (MS-SRVS §2.2.3, SHARE_INFO union).
const GET_LEVELS: [u32; 6] = [0, 1, 2, 501, 502, 1005];

/// Runs one srvsvc call on a reassembled stub. `Ok` is the response stub,
/// `Err` a fault status (C706 Appendix E, MS-RPCE §2.2.2.8).
pub fn dispatch(opnum: u16, stub: &[u8], ctx: &RpcContext<'_>) -> Result<Vec<u8>, u32> {
    let r = match opnum {
        OP_NETR_SHARE_ENUM_ALL => share_enum_all(stub, ctx),
        OP_NETR_SHARE_GET_INFO => share_get_info(stub, ctx),
        OP_NETR_SERVER_GET_INFO => server_get_info(stub, ctx),
        _ => return Err(NCA_S_OP_RNG_ERROR),
    };
    r.map_err(|NdrError| NCA_S_FAULT_NDR)
}

/// Path reported at levels 2/502. The VFS root is not exposed to this layer;
/// an empty string is valid and avoids leaking host paths.
const SHARE_PATH: &str = "";

/// Fixed (inline) part of one SHARE_INFO_x structure (MS-SRVS §2.2.4, SHARE_INFO_0/1/2/501/502/1005).
fn share_fixed(w: &mut NdrWriter, level: u32, s: &ShareInfo) {
    match level {
        0 => w.ptr(true),
        1 | 501 => {
            w.ptr(true);
            w.u32(s.share_type);
            w.ptr(true);
            if level == 501 {
                w.u32(0); // shi501_flags: no caching policy bits
            }
        }
        2 | 502 => {
            w.ptr(true);
            w.u32(s.share_type);
            w.ptr(true);
            w.u32(0); // permissions (ignored by servers in user-level security)
            w.u32(u32::MAX); // max_uses: unlimited
            w.u32(0); // current_uses
            w.ptr(true); // path
            w.ptr(false); // passwd: never disclosed
            if level == 502 {
                w.u32(0); // shi502_reserved = security descriptor length
                w.ptr(false); // no security descriptor
            }
        }
        1005 => w.u32(0), // shi1005_flags
        _ => {}
    }
}

/// Deferred pointees of one SHARE_INFO_x, in member order (C706 §14.3.12.3).
fn share_deferred(w: &mut NdrWriter, level: u32, s: &ShareInfo) {
    match level {
        0 => w.wstring(&s.name),
        1 | 501 => {
            w.wstring(&s.name);
            w.wstring(&s.comment);
        }
        2 | 502 => {
            w.wstring(&s.name);
            w.wstring(&s.comment);
            w.wstring(SHARE_PATH);
        }
        _ => {}
    }
}

/// NetrShareEnumAll (MS-SRVS §3.1.4.8). Always returns every share in one
/// reply (`PreferedMaximumLength` is advisory) and a zero resume handle.
fn share_enum_all(stub: &[u8], ctx: &RpcContext<'_>) -> Result<Vec<u8>, NdrError> {
    let mut r = NdrReader::new(stub);
    let _server = r.unique_wstring()?;
    let level = r.u32()?;
    let switch = r.u32()?;
    if switch != level {
        return Err(NdrError);
    }
    let known = ENUM_LEVELS.contains(&level);
    if known && r.ptr()? {
        let _entries_read = r.u32()?;
        if r.ptr()? {
            // Clients send an empty container; a non-empty input array has no
            // meaning for this call and is not worth parsing.
            if r.u32()? != 0 {
                return Err(NdrError);
            }
        }
    }
    let _pref_max_len = r.u32()?;
    let resume = if r.ptr()? { Some(r.u32()?) } else { None };

    // A resume handle is an index into the list; skip what was already sent.
    let start = resume.map_or(0, |h| h as usize).min(ctx.shares.len());
    let shares = &ctx.shares[start..];
    let total = u32::try_from(ctx.shares.len()).unwrap_or(u32::MAX);
    let n = u32::try_from(shares.len()).unwrap_or(u32::MAX);

    let mut w = NdrWriter::new();
    w.u32(level); // SHARE_ENUM_STRUCT.Level
    w.u32(level); // union discriminant
    let status = if known {
        w.ptr(true); // container
        w.u32(n); // EntriesRead
        w.ptr(n > 0); // Buffer
        if n > 0 {
            w.u32(n); // conformant array max_count
            for s in shares {
                share_fixed(&mut w, level, s);
            }
            for s in shares {
                share_deferred(&mut w, level, s);
            }
        }
        WERR_OK
    } else {
        WERR_INVALID_LEVEL
    };
    w.u32(total); // TotalEntries
    w.ptr(resume.is_some());
    if resume.is_some() {
        w.u32(0); // enumeration complete
    }
    w.u32(status);
    Ok(w.into_bytes())
}

/// Case-insensitive share lookup, as share names are on Windows.
fn find_share<'a>(shares: &'a [ShareInfo], name: &str) -> Option<&'a ShareInfo> {
    let want = name.to_lowercase();
    shares.iter().find(|s| s.name.to_lowercase() == want)
}

/// NetrShareGetInfo (MS-SRVS §3.1.4.10).
fn share_get_info(stub: &[u8], ctx: &RpcContext<'_>) -> Result<Vec<u8>, NdrError> {
    let mut r = NdrReader::new(stub);
    let _server = r.unique_wstring()?;
    let net_name = r.wstring()?; // [in, string] ref pointer: no referent id
    let level = r.u32()?;

    let mut w = NdrWriter::new();
    w.u32(level); // union discriminant
    let status = if !GET_LEVELS.contains(&level) {
        WERR_INVALID_LEVEL
    } else if let Some(s) = find_share(ctx.shares, &net_name) {
        w.ptr(true);
        share_fixed(&mut w, level, s);
        share_deferred(&mut w, level, s);
        WERR_OK
    } else {
        w.ptr(false);
        NERR_NET_NAME_NOT_FOUND
    };
    w.u32(status);
    Ok(w.into_bytes())
}

/// NetrServerGetInfo (MS-SRVS §3.1.4.17), levels 100, 101 and 102
/// (SERVER_INFO_100/101/102, MS-SRVS §2.2.4).
fn server_get_info(stub: &[u8], ctx: &RpcContext<'_>) -> Result<Vec<u8>, NdrError> {
    let mut r = NdrReader::new(stub);
    let _server = r.unique_wstring()?;
    let level = r.u32()?;
    let si = ctx.server;

    let mut w = NdrWriter::new();
    w.u32(level);
    let status = match level {
        100 => {
            w.ptr(true);
            w.u32(PLATFORM_ID_NT);
            w.ptr(true);
            w.wstring(&si.name);
            WERR_OK
        }
        101 | 102 => {
            w.ptr(true);
            w.u32(PLATFORM_ID_NT);
            w.ptr(true);
            w.u32(si.version_major);
            w.u32(si.version_minor);
            w.u32(si.server_type);
            w.ptr(true);
            if level == 102 {
                w.u32(0); // users
                w.u32(15); // disc: auto-disconnect minutes (Windows default)
                w.u32(0); // hidden: visible in browse lists
                w.u32(240); // announce interval, seconds
                w.u32(3000); // anndelta, milliseconds
                w.u32(0); // licenses
                w.ptr(true); // userpath
            }
            w.wstring(&si.name);
            w.wstring(&si.comment);
            if level == 102 {
                w.wstring("C:\\");
            }
            WERR_OK
        }
        _ => WERR_INVALID_LEVEL,
    };
    w.u32(status);
    Ok(w.into_bytes())
}
