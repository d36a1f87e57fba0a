//! wkssvc (MS-WKST) operations: NetrWkstaGetInfo (opnum 0) level 100.

use crate::ndr::{NdrError, NdrReader, NdrWriter};
use crate::pdu::{NCA_S_FAULT_NDR, NCA_S_OP_RNG_ERROR};
use crate::srvsvc::{PLATFORM_ID_NT, WERR_INVALID_LEVEL, WERR_OK};
use crate::RpcContext;

/// NetrWkstaGetInfo opnum (MS-WKST §3.2.4.1).
pub const OP_NETR_WKSTA_GET_INFO: u16 = 0;

/// LAN group reported in WKSTA_INFO_100; the server has no domain membership.
const LANGROUP: &str = "WORKGROUP";

/// Runs one wkssvc call; `Err` is a fault status.
pub fn dispatch(opnum: u16, stub: &[u8], ctx: &RpcContext<'_>) -> Result<Vec<u8>, u32> {
    match opnum {
        OP_NETR_WKSTA_GET_INFO => wksta_get_info(stub, ctx).map_err(|NdrError| NCA_S_FAULT_NDR),
        _ => Err(NCA_S_OP_RNG_ERROR),
    }
}

/// NetrWkstaGetInfo (MS-WKST §3.2.4.1) with WKSTA_INFO_100 (MS-WKST §2.2.5).
fn wksta_get_info(stub: &[u8], ctx: &RpcContext<'_>) -> Result<Vec<u8>, NdrError> {
    let mut r = NdrReader::new(stub);
    let _server = r.unique_wstring()?;
    let level = r.u32()?;
    let si = ctx.server;

    let mut w = NdrWriter::new();
    w.u32(level); // union discriminant
    let status = if level == 100 {
        w.ptr(true);
        w.u32(PLATFORM_ID_NT);
        w.ptr(true); // computername
        w.ptr(true); // langroup
        w.u32(si.version_major);
        w.u32(si.version_minor);
        w.wstring(&si.name);
        w.wstring(LANGROUP);
        WERR_OK
    } else {
        WERR_INVALID_LEVEL
    };
    w.u32(status);
    Ok(w.into_bytes())
}
