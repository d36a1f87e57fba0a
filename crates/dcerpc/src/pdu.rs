//! Connection-oriented PDU framing: the common header and the bodies of the
//! PDU types a named-pipe server needs (C706 §12.6, MS-RPCE §2.2.2).
//!
//! Everything we *emit* uses NDR data representation little-endian / ASCII /
//! IEEE (`drep = 10 00 00 00`).

use crate::error::RpcError;

/// `request` PDU type (C706 §12.6.4.9).
pub const PTYPE_REQUEST: u8 = 0;
/// `response` PDU type (C706 §12.6.4.10).
pub const PTYPE_RESPONSE: u8 = 2;
/// `fault` PDU type (C706 §12.6.4.7).
pub const PTYPE_FAULT: u8 = 3;
/// `bind` PDU type (C706 §12.6.4.3).
pub const PTYPE_BIND: u8 = 11;
/// `bind_ack` PDU type (C706 §12.6.4.4).
pub const PTYPE_BIND_ACK: u8 = 12;
/// `bind_nak` PDU type (C706 §12.6.4.5).
pub const PTYPE_BIND_NAK: u8 = 13;
/// `alter_context` PDU type (C706 §12.6.4.1).
pub const PTYPE_ALTER_CONTEXT: u8 = 14;
/// `alter_context_resp` PDU type (C706 §12.6.4.2).
pub const PTYPE_ALTER_CONTEXT_RESP: u8 = 15;
/// `rpc_auth_3` PDU type (MS-RPCE §2.2.2.10).
pub const PTYPE_AUTH3: u8 = 16;
/// `shutdown` PDU type (C706 §12.6.4.11).
pub const PTYPE_SHUTDOWN: u8 = 17;
/// `co_cancel` PDU type (C706 §12.6.4.6).
pub const PTYPE_CO_CANCEL: u8 = 18;
/// `orphaned` PDU type (C706 §12.6.4.8).
pub const PTYPE_ORPHANED: u8 = 19;

/// First fragment of a call (C706 §12.6.3.1 `pfc_flags`).
pub const PFC_FIRST_FRAG: u8 = 0x01;
/// Last fragment of a call.
pub const PFC_LAST_FRAG: u8 = 0x02;
/// The call did not execute (set on faults for calls we refused).
pub const PFC_DID_NOT_EXECUTE: u8 = 0x20;
/// An object UUID follows the request header (C706 §12.6.4.9).
pub const PFC_OBJECT_UUID: u8 = 0x80;

/// The only data representation we accept and emit: little-endian integers,
/// ASCII characters, IEEE floats (C706 §14.1 `drep`).
pub const DREP_LE: [u8; 4] = [0x10, 0, 0, 0];

/// Maximum fragment size we advertise in `bind_ack`: the value Windows uses on
/// `ncacn_np` (MS-RPCE §3.3.3.5.4 leaves the choice to the implementation).
pub const SERVER_MAX_FRAG: u16 = 4280;
/// Fragment size every implementation must accept (C706 §12.6.3.1
/// `MustRecvFragSize`); we never negotiate below it.
pub const MUST_RECV_FRAG: u16 = 1432;

/// `nca_s_op_rng_error`: opnum out of range (C706 Appendix E status codes).
pub const NCA_S_OP_RNG_ERROR: u32 = 0x1c01_0002;
/// `nca_s_unknown_if`: request on an unknown presentation context.
pub const NCA_S_UNKNOWN_IF: u32 = 0x1c01_0003;
/// `nca_s_proto_error`: protocol state violation.
pub const NCA_S_PROTO_ERROR: u32 = 0x1c01_000b;
/// `nca_s_fault_ndr` (RPC_X_BAD_STUB_DATA): stub data could not be unmarshalled.
pub const NCA_S_FAULT_NDR: u32 = 0x0000_06f7;

/// `bind_nak` reason: not specified (C706 §12.6.3.3 `p_reject_reason_t`).
pub const BIND_NAK_REASON_NOT_SPECIFIED: u16 = 0;
/// `bind_nak` reason: protocol version not supported.
pub const BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED: u16 = 4;

/// Presentation result: acceptance (C706 §12.6.3.1 `p_cont_def_result_t`).
pub const RESULT_ACCEPTANCE: u16 = 0;
/// Presentation result: provider rejection.
pub const RESULT_PROVIDER_REJECTION: u16 = 2;
/// Presentation result: bind time feature negotiation ack (MS-RPCE §2.2.2.4).
pub const RESULT_NEGOTIATE_ACK: u16 = 3;
/// Provider reason: abstract syntax not supported (C706 `p_provider_reason_t`).
pub const REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED: u16 = 1;
/// Provider reason: proposed transfer syntaxes not supported.
pub const REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED: u16 = 2;

/// Header length shared by all connection-oriented PDUs (C706 §12.6.3.1).
pub const HEADER_LEN: usize = 16;
/// Header plus the request/response fixed fields that precede stub data.
pub const REQUEST_HEADER_LEN: usize = 24;

/// A presentation syntax identifier: interface/transfer UUID plus version
/// (C706 §12.6.3.1 `p_syntax_id_t`). `uuid` holds the 16 bytes as they appear
/// on the wire in little-endian NDR (first three fields byte-swapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxId {
    /// UUID in little-endian wire order.
    pub uuid: [u8; 16],
    /// `if_version`: major version in the low 16 bits, minor in the high 16.
    pub version: u32,
}

impl SyntaxId {
    /// Builds a syntax id from the textual UUID fields
    /// `time_low-time_mid-time_hi-clock_seq+node` and a major.minor version.
    pub const fn new(time_low: u32, time_mid: u16, time_hi: u16, tail: [u8; 8], major: u16, minor: u16) -> Self {
        let a = time_low.to_le_bytes();
        let b = time_mid.to_le_bytes();
        let c = time_hi.to_le_bytes();
        SyntaxId {
            uuid: [a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], tail[0], tail[1], tail[2], tail[3], tail[4], tail[5], tail[6], tail[7]],
            version: (major as u32) | ((minor as u32) << 16),
        }
    }

    /// The all-zero syntax used in rejected / negotiate_ack results.
    pub const NULL: SyntaxId = SyntaxId { uuid: [0; 16], version: 0 };

    /// Major interface version (low 16 bits of `if_version`).
    pub fn major(&self) -> u16 {
        (self.version & 0xffff) as u16
    }

    /// Minor interface version (high 16 bits of `if_version`).
    pub fn minor(&self) -> u16 {
        (self.version >> 16) as u16
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.uuid);
        out.extend_from_slice(&self.version.to_le_bytes());
    }
}

/// NDR 2.0 transfer syntax 8a885d04-1ceb-11c9-9fe8-08002b104860 v2
/// (C706 Appendix I, MS-RPCE §2.2.4.12).
pub const NDR20: SyntaxId = SyntaxId::new(0x8a88_5d04, 0x1ceb, 0x11c9, [0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10, 0x48, 0x60], 2, 0);

/// NDR64 transfer syntax 71710533-beba-4937-8319-b5dbef9ccc36 v1
/// (MS-RPCE §2.2.4.12). Recognised only so we can reject it.
pub const NDR64: SyntaxId = SyntaxId::new(0x7171_0533, 0xbeba, 0x4937, [0x83, 0x19, 0xb5, 0xdb, 0xef, 0x9c, 0xcc, 0x36], 1, 0);

/// First 8 wire bytes of the bind time feature negotiation pseudo transfer
/// syntax 6cb71c2c-9812-4540-... (MS-RPCE §3.3.1.5.3).
const BTFN_PREFIX: [u8; 8] = [0x2c, 0x1c, 0xb7, 0x6c, 0x12, 0x98, 0x40, 0x45];

impl SyntaxId {
    /// If this is a bind-time-feature-negotiation transfer syntax, returns the
    /// client's feature bitmask (first octet of `BindTimeFeatureNegotiationBitmask`,
    /// MS-RPCE §2.2.2.14).
    pub fn bind_time_features(&self) -> Option<u8> {
        if self.uuid[..8] == BTFN_PREFIX {
            Some(self.uuid[8])
        } else {
            None
        }
    }
}

/// The common 16-byte PDU header (C706 §12.6.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// PDU type (`PTYPE_*`).
    pub ptype: u8,
    /// `pfc_flags` (`PFC_*`).
    pub flags: u8,
    /// Data representation label of the sender.
    pub drep: [u8; 4],
    /// Total length of this fragment including header and auth trailer.
    pub frag_length: u16,
    /// Length of the auth verifier's credentials (0: no authentication).
    pub auth_length: u16,
    /// Call identifier echoed in responses.
    pub call_id: u32,
}

impl Header {
    /// Parses a header from the start of `buf`. Returns `Ok(None)` when fewer
    /// than 16 bytes are available yet (streaming input).
    ///
    /// Multi-byte fields are read in the sender's byte order so that a
    /// big-endian PDU can still be delimited and refused politely.
    pub fn parse(buf: &[u8]) -> Result<Option<Header>, RpcError> {
        let Some(h) = buf.get(..HEADER_LEN) else {
            return Ok(None);
        };
        if h[0] != 5 || h[1] != 0 {
            return Err(RpcError::BadVersion(h[0], h[1]));
        }
        let drep = [h[4], h[5], h[6], h[7]];
        // drep[0] high nibble: 1 = little-endian integers, 0 = big-endian.
        let le = drep[0] & 0xf0 != 0;
        let u16_at = |i: usize| {
            let b = [h[i], h[i + 1]];
            if le {
                u16::from_le_bytes(b)
            } else {
                u16::from_be_bytes(b)
            }
        };
        let b = [h[12], h[13], h[14], h[15]];
        let call_id = if le { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) };
        let hdr = Header { ptype: h[2], flags: h[3], drep, frag_length: u16_at(8), auth_length: u16_at(10), call_id };
        if usize::from(hdr.frag_length) < HEADER_LEN {
            return Err(RpcError::FragTooShort(hdr.frag_length));
        }
        Ok(Some(hdr))
    }

    /// True when the sender uses the representation we speak (LE, ASCII, IEEE).
    pub fn is_ndr_le(&self) -> bool {
        self.drep[0] == DREP_LE[0] && self.drep[1] == DREP_LE[1]
    }
}

/// Zero-pads `v` to a multiple of 4 bytes (PDU-relative alignment).
fn pad4(v: &mut Vec<u8>) {
    let pad = (4 - v.len() % 4) % 4;
    v.resize(v.len() + pad, 0);
}

/// Writes a header with `frag_length` left as zero; [`finish`] patches it.
fn start(ptype: u8, flags: u8, call_id: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(&[5, 0, ptype, flags]);
    v.extend_from_slice(&DREP_LE);
    v.extend_from_slice(&[0, 0, 0, 0]); // frag_length, auth_length
    v.extend_from_slice(&call_id.to_le_bytes());
    v
}

/// Patches `frag_length`. Callers only build PDUs bounded by the negotiated
/// fragment size (or small fixed PDUs), so the length always fits in u16.
fn finish(mut v: Vec<u8>) -> Vec<u8> {
    let len = u16::try_from(v.len()).unwrap_or(u16::MAX);
    v[8..10].copy_from_slice(&len.to_le_bytes());
    v
}

/// One presentation context element of a bind / alter_context
/// (C706 §12.6.3.1 `p_cont_elem_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresContext {
    /// Presentation context id chosen by the client.
    pub id: u16,
    /// Interface requested.
    pub abstract_syntax: SyntaxId,
    /// Transfer syntaxes offered, in preference order.
    pub transfer_syntaxes: Vec<SyntaxId>,
}

/// Body of a `bind` or `alter_context` PDU (C706 §12.6.4.1, §12.6.4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// Largest fragment the client will transmit.
    pub max_xmit_frag: u16,
    /// Largest fragment the client can receive.
    pub max_recv_frag: u16,
    /// Requested association group (0: new group).
    pub assoc_group_id: u32,
    /// Presentation contexts proposed.
    pub contexts: Vec<PresContext>,
}

/// Little-endian cursor over a PDU body; every read is bounds-checked.
struct Cur<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RpcError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(RpcError::Malformed(self.what))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, RpcError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, RpcError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, RpcError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn syntax(&mut self) -> Result<SyntaxId, RpcError> {
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(self.take(16)?);
        Ok(SyntaxId { uuid, version: self.u32()? })
    }
}

impl Bind {
    /// Parses the body of a little-endian `bind`/`alter_context` PDU
    /// (`body` = bytes after the 16-byte header, auth trailer excluded).
    pub fn parse(body: &[u8]) -> Result<Bind, RpcError> {
        let mut c = Cur { buf: body, pos: 0, what: "bind" };
        let max_xmit_frag = c.u16()?;
        let max_recv_frag = c.u16()?;
        let assoc_group_id = c.u32()?;
        let n = c.u8()?;
        c.take(3)?; // reserved
                    // n is at most 255 and every element is >= 44 bytes, all bounds-checked
                    // below, so growth is bounded by the (already bounded) body length.
        let mut contexts = Vec::new();
        for _ in 0..n {
            let id = c.u16()?;
            let nts = c.u8()?;
            c.take(1)?; // reserved
            let abstract_syntax = c.syntax()?;
            let mut transfer_syntaxes = Vec::new();
            for _ in 0..nts {
                transfer_syntaxes.push(c.syntax()?);
            }
            contexts.push(PresContext { id, abstract_syntax, transfer_syntaxes });
        }
        Ok(Bind { max_xmit_frag, max_recv_frag, assoc_group_id, contexts })
    }
}

/// One entry of `p_result_list` in a bind_ack / alter_context_resp
/// (C706 §12.6.3.1 `p_result_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextResult {
    /// `RESULT_*`.
    pub result: u16,
    /// Provider reason, or the acknowledged feature bits for negotiate_ack.
    pub reason: u16,
    /// Accepted transfer syntax (NULL when not accepted).
    pub transfer_syntax: SyntaxId,
}

/// Encodes a `bind_ack` (ptype 12) or `alter_context_resp` (ptype 15)
/// (C706 §12.6.4.2, §12.6.4.4). `sec_addr` is the secondary address
/// *including* its terminating NUL, or empty.
pub fn encode_bind_ack(
    ptype: u8,
    call_id: u32,
    max_xmit_frag: u16,
    max_recv_frag: u16,
    assoc_group_id: u32,
    sec_addr: &[u8],
    results: &[ContextResult],
) -> Vec<u8> {
    let mut v = start(ptype, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id);
    v.extend_from_slice(&max_xmit_frag.to_le_bytes());
    v.extend_from_slice(&max_recv_frag.to_le_bytes());
    v.extend_from_slice(&assoc_group_id.to_le_bytes());
    // sec_addr is tiny (pipe name); saturate rather than panic.
    let sl = u16::try_from(sec_addr.len()).unwrap_or(0);
    v.extend_from_slice(&sl.to_le_bytes());
    v.extend_from_slice(&sec_addr[..usize::from(sl)]);
    // p_result_list must start 4-byte aligned relative to the PDU start.
    pad4(&mut v);
    // Callers pass at most 255 results (one per proposed context).
    v.push(u8::try_from(results.len()).unwrap_or(u8::MAX));
    v.extend_from_slice(&[0, 0, 0]);
    for r in results.iter().take(255) {
        v.extend_from_slice(&r.result.to_le_bytes());
        v.extend_from_slice(&r.reason.to_le_bytes());
        r.transfer_syntax.write(&mut v);
    }
    finish(v)
}

/// Encodes a `bind_nak` (C706 §12.6.4.5) listing 5.0 as the only supported
/// protocol version.
pub fn encode_bind_nak(call_id: u32, reason: u16) -> Vec<u8> {
    let mut v = start(PTYPE_BIND_NAK, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id);
    v.extend_from_slice(&reason.to_le_bytes());
    v.extend_from_slice(&[1, 5, 0]); // n_protocols = 1, {major 5, minor 0}
    pad4(&mut v);
    finish(v)
}

/// Encodes a 32-byte `fault` PDU (C706 §12.6.4.7, MS-RPCE §2.2.2.8: no stub
/// data, status in the header).
pub fn encode_fault(call_id: u32, context_id: u16, status: u32, did_not_execute: bool) -> Vec<u8> {
    let mut flags = PFC_FIRST_FRAG | PFC_LAST_FRAG;
    if did_not_execute {
        flags |= PFC_DID_NOT_EXECUTE;
    }
    let mut v = start(PTYPE_FAULT, flags, call_id);
    v.extend_from_slice(&32u32.to_le_bytes()); // alloc_hint (MS-RPCE: 0x20)
    v.extend_from_slice(&context_id.to_le_bytes());
    v.extend_from_slice(&[0, 0]); // cancel_count, reserved
    v.extend_from_slice(&status.to_le_bytes());
    v.extend_from_slice(&[0; 4]); // reserved
    finish(v)
}

/// Splits a response stub into `response` PDUs (C706 §12.6.4.10) no larger
/// than `max_frag` bytes each. An empty stub still yields one PDU.
pub fn encode_response(call_id: u32, context_id: u16, stub: &[u8], max_frag: u16) -> Vec<Vec<u8>> {
    // Keep chunk sizes a multiple of 8 so every fragment's stub stays aligned
    // the way NDR peers (and auth padding rules) expect.
    let room = usize::from(max_frag.max(MUST_RECV_FRAG)) - REQUEST_HEADER_LEN;
    let chunk = room & !7;
    let mut out = Vec::new();
    let mut off = 0usize;
    loop {
        let end = (off + chunk).min(stub.len());
        let mut flags = 0;
        if off == 0 {
            flags |= PFC_FIRST_FRAG;
        }
        if end == stub.len() {
            flags |= PFC_LAST_FRAG;
        }
        let mut v = start(PTYPE_RESPONSE, flags, call_id);
        // alloc_hint = stub bytes remaining from this fragment on.
        let hint = u32::try_from(stub.len() - off).unwrap_or(u32::MAX);
        v.extend_from_slice(&hint.to_le_bytes());
        v.extend_from_slice(&context_id.to_le_bytes());
        v.extend_from_slice(&[0, 0]); // cancel_count, reserved
        v.extend_from_slice(&stub[off..end]);
        out.push(finish(v));
        off = end;
        if off >= stub.len() {
            break;
        }
    }
    out
}

/// Fixed fields of a `request` PDU (C706 §12.6.4.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    /// Client's hint of the total stub size (advisory only).
    pub alloc_hint: u32,
    /// Presentation context the call is made on.
    pub context_id: u16,
    /// Operation number within the interface.
    pub opnum: u16,
    /// This fragment's stub data.
    pub stub: &'a [u8],
}

impl<'a> Request<'a> {
    /// Parses a little-endian request body (`body` = bytes after the header,
    /// auth trailer excluded). Skips the optional object UUID.
    pub fn parse(flags: u8, body: &'a [u8]) -> Result<Request<'a>, RpcError> {
        let mut c = Cur { buf: body, pos: 0, what: "request" };
        let alloc_hint = c.u32()?;
        let context_id = c.u16()?;
        let opnum = c.u16()?;
        if flags & PFC_OBJECT_UUID != 0 {
            c.take(16)?;
        }
        Ok(Request { alloc_hint, context_id, opnum, stub: &body[c.pos..] })
    }
}
