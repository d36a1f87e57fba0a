//! Per-open-pipe DCE/RPC connection state machine (C706 §12.6, MS-RPCE §3.3).
//!
//! Sans-IO: the SMB layer feeds WRITE/TRANSCEIVE bytes in and drains READ
//! bytes out. Each output PDU is one pipe *message*, so a read never spans
//! two PDUs (named pipes on IPC$ are message-mode).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::RpcError;
use crate::pdu::{self, Bind, ContextResult, Header, PresContext, Request, SyntaxId};
use crate::{srvsvc, wkssvc, PipeKind, RpcContext};

/// Cap on buffered, not yet parsed input per pipe.
pub const MAX_INPUT: usize = 1 << 20;
/// Cap on a reassembled request stub.
pub const MAX_STUB: usize = 1 << 20;
/// Cap on queued, unread output per pipe.
pub const MAX_OUTPUT: usize = 4 << 20;
/// Cap on presentation contexts remembered per association.
const MAX_CONTEXTS: usize = 256;
/// KeepConnectionOnOrphanSupported (MS-RPCE §2.2.2.14). We ack only this
/// bit: orphaned calls are simply dropped; security context multiplexing is
/// meaningless without RPC-level auth.
const FEATURE_KEEP_CONNECTION_ON_ORPHAN: u8 = 0x02;

/// Source of association group ids; only needs to be non-zero and distinct.
static NEXT_ASSOC_GROUP: AtomicU32 = AtomicU32::new(0x0001_2340);

fn new_assoc_group() -> u32 {
    loop {
        let id = NEXT_ASSOC_GROUP.fetch_add(1, Ordering::Relaxed);
        if id != 0 {
            return id;
        }
    }
}

/// A request being reassembled from fragments (C706 §12.6.3.1 FIRST/LAST).
#[derive(Debug)]
struct PendingCall {
    call_id: u32,
    context_id: u16,
    opnum: u16,
    stub: Vec<u8>,
}

/// State of one open named pipe: association, accepted presentation
/// contexts, partial input and queued output PDUs.
#[derive(Debug)]
pub struct Pipe {
    kind: PipeKind,
    inbuf: Vec<u8>,
    out: VecDeque<Vec<u8>>,
    /// Bytes of `out.front()` already returned by `read`.
    out_pos: usize,
    /// Unread bytes across `out`.
    out_len: usize,
    bound: bool,
    /// Largest fragment we may send (client's max_recv_frag, clamped).
    max_xmit: u16,
    /// Largest fragment we told the client to send.
    max_recv: u16,
    assoc_group: u32,
    contexts: Vec<u16>,
    call: Option<PendingCall>,
    broken: bool,
}

impl Pipe {
    /// A freshly opened, unbound pipe for the given interface.
    pub fn new(kind: PipeKind) -> Self {
        Pipe {
            kind,
            inbuf: Vec::new(),
            out: VecDeque::new(),
            out_pos: 0,
            out_len: 0,
            bound: false,
            max_xmit: pdu::SERVER_MAX_FRAG,
            max_recv: pdu::SERVER_MAX_FRAG,
            assoc_group: 0,
            contexts: Vec::new(),
            call: None,
            broken: false,
        }
    }

    /// Which interface this pipe serves.
    pub fn kind(&self) -> PipeKind {
        self.kind
    }

    /// SMB2 WRITE to the pipe: consumes bytes (partial PDUs are kept until
    /// complete) and queues response PDUs. Any `Err` is fatal: the pipe is
    /// marked broken and the caller should close it.
    pub fn write(&mut self, data: &[u8], ctx: &RpcContext<'_>) -> Result<(), RpcError> {
        if self.broken {
            return Err(RpcError::Broken);
        }
        let r = self.write_inner(data, ctx);
        if r.is_err() {
            self.broken = true;
            self.inbuf = Vec::new();
            self.call = None;
        }
        r
    }

    fn write_inner(&mut self, data: &[u8], ctx: &RpcContext<'_>) -> Result<(), RpcError> {
        if self.inbuf.len().saturating_add(data.len()) > MAX_INPUT {
            return Err(RpcError::InputTooLarge);
        }
        self.inbuf.extend_from_slice(data);
        let buf = std::mem::take(&mut self.inbuf);
        let mut pos = 0;
        let mut result = Ok(());
        while let Some(rest) = buf.get(pos..) {
            let hdr = match Header::parse(rest) {
                Ok(Some(h)) => h,
                Ok(None) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            if hdr.frag_length > pdu::SERVER_MAX_FRAG {
                result = Err(RpcError::FragTooLarge(hdr.frag_length, pdu::SERVER_MAX_FRAG));
                break;
            }
            let Some(frag) = rest.get(..usize::from(hdr.frag_length)) else {
                break; // wait for the rest of this fragment
            };
            pos += frag.len();
            if let Err(e) = self.handle(&hdr, frag, ctx) {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() {
            self.inbuf = buf;
            self.inbuf.drain(..pos);
        }
        result
    }

    /// SMB2 READ: returns up to `max` bytes of the next queued PDU and whether
    /// more bytes *of that same PDU* remain (the SMB layer then answers
    /// STATUS_BUFFER_OVERFLOW). Further complete PDUs may still be queued;
    /// see [`Pipe::has_output`].
    pub fn read(&mut self, max: usize) -> (Vec<u8>, bool) {
        let Some(front) = self.out.front() else {
            return (Vec::new(), false);
        };
        let avail = &front[self.out_pos..];
        let n = max.min(avail.len());
        let data = avail[..n].to_vec();
        self.out_pos += n;
        self.out_len -= n;
        if self.out_pos == front.len() {
            self.out.pop_front();
            self.out_pos = 0;
            (data, false)
        } else {
            (data, true)
        }
    }

    /// FSCTL_PIPE_TRANSCEIVE: [`Pipe::write`] then [`Pipe::read`]. If unread
    /// output was already queued, that older output is returned first.
    pub fn transceive(&mut self, data: &[u8], max: usize, ctx: &RpcContext<'_>) -> Result<(Vec<u8>, bool), RpcError> {
        self.write(data, ctx)?;
        Ok(self.read(max))
    }

    /// True when at least one byte of response is waiting to be read.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    fn push(&mut self, pdu: Vec<u8>) -> Result<(), RpcError> {
        if self.out_len.saturating_add(pdu.len()) > MAX_OUTPUT {
            return Err(RpcError::OutputTooLarge);
        }
        self.out_len += pdu.len();
        self.out.push_back(pdu);
        Ok(())
    }

    fn handle(&mut self, hdr: &Header, frag: &[u8], ctx: &RpcContext<'_>) -> Result<(), RpcError> {
        if hdr.auth_length != 0 {
            return Err(RpcError::AuthNotSupported(hdr.auth_length));
        }
        let body = &frag[pdu::HEADER_LEN..];
        match hdr.ptype {
            pdu::PTYPE_BIND => self.on_bind(hdr, body),
            pdu::PTYPE_ALTER_CONTEXT => self.on_alter_context(hdr, body),
            pdu::PTYPE_REQUEST => self.on_request(hdr, body, ctx),
            // We execute calls synchronously, so a cancel has nothing to stop.
            pdu::PTYPE_CO_CANCEL => Ok(()),
            pdu::PTYPE_ORPHANED => {
                // Client abandoned the call: drop its partial stub (MS-RPCE §3.3.1.5.10).
                if self.call.as_ref().is_some_and(|c| c.call_id == hdr.call_id) {
                    self.call = None;
                }
                Ok(())
            }
            other => Err(RpcError::UnexpectedPtype(other)),
        }
    }

    /// Our interface for this pipe (MS-SRVS §1.9, MS-WKST §1.9).
    fn interface(&self) -> SyntaxId {
        match self.kind {
            PipeKind::Srvsvc => crate::SRVSVC_SYNTAX,
            PipeKind::Wkssvc => crate::WKSSVC_SYNTAX,
        }
    }

    /// Decides each proposed presentation context (C706 §12.6.3.1,
    /// MS-RPCE §3.3.1.5.3 for bind time feature negotiation).
    fn negotiate(&mut self, proposed: &[PresContext]) -> Vec<ContextResult> {
        let iface = self.interface();
        let reject = |reason| ContextResult { result: pdu::RESULT_PROVIDER_REJECTION, reason, transfer_syntax: SyntaxId::NULL };
        let mut results = Vec::with_capacity(proposed.len());
        for pc in proposed {
            if let Some(bits) = pc.transfer_syntaxes.iter().find_map(SyntaxId::bind_time_features) {
                results.push(ContextResult {
                    result: pdu::RESULT_NEGOTIATE_ACK,
                    reason: u16::from(bits & FEATURE_KEEP_CONNECTION_ON_ORPHAN),
                    transfer_syntax: SyntaxId::NULL,
                });
                continue;
            }
            let a = &pc.abstract_syntax;
            // Same major version, minor not newer than ours (C706 §12.6.4.3).
            if a.uuid != iface.uuid || a.major() != iface.major() || a.minor() > iface.minor() {
                results.push(reject(pdu::REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED));
                continue;
            }
            if !pc.transfer_syntaxes.contains(&pdu::NDR20) {
                // Typically NDR64-only: we speak NDR 2.0 only.
                results.push(reject(pdu::REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED));
                continue;
            }
            if !self.contexts.contains(&pc.id) {
                if self.contexts.len() >= MAX_CONTEXTS {
                    results.push(reject(pdu::REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED));
                    continue;
                }
                self.contexts.push(pc.id);
            }
            results.push(ContextResult { result: pdu::RESULT_ACCEPTANCE, reason: 0, transfer_syntax: pdu::NDR20 });
        }
        results
    }

    fn on_bind(&mut self, hdr: &Header, body: &[u8]) -> Result<(), RpcError> {
        if !hdr.is_ndr_le() || self.bound {
            // Foreign data representation, or a second bind on the same
            // association (C706 §12.6.4.3 allows only one): refuse in-band.
            return self.push(pdu::encode_bind_nak(hdr.call_id, pdu::BIND_NAK_REASON_NOT_SPECIFIED));
        }
        let bind = Bind::parse(body)?;
        let clamp = |v: u16| v.clamp(pdu::MUST_RECV_FRAG, pdu::SERVER_MAX_FRAG);
        self.max_xmit = clamp(bind.max_recv_frag);
        self.max_recv = clamp(bind.max_xmit_frag);
        // We keep no cross-pipe association state, so echoing the client's
        // requested group is as good as any; 0 asks for a new one.
        self.assoc_group = if bind.assoc_group_id != 0 { bind.assoc_group_id } else { new_assoc_group() };
        let results = self.negotiate(&bind.contexts);
        let sec_addr: &[u8] = match self.kind {
            PipeKind::Srvsvc => b"\\PIPE\\srvsvc\0",
            PipeKind::Wkssvc => b"\\PIPE\\wkssvc\0",
        };
        self.bound = true;
        self.push(pdu::encode_bind_ack(pdu::PTYPE_BIND_ACK, hdr.call_id, self.max_xmit, self.max_recv, self.assoc_group, sec_addr, &results))
    }

    fn on_alter_context(&mut self, hdr: &Header, body: &[u8]) -> Result<(), RpcError> {
        if !hdr.is_ndr_le() || !self.bound {
            return self.push(pdu::encode_fault(hdr.call_id, 0, pdu::NCA_S_PROTO_ERROR, true));
        }
        let bind = Bind::parse(body)?;
        let results = self.negotiate(&bind.contexts);
        // alter_context_resp carries an empty secondary address (C706 §12.6.4.2).
        self.push(pdu::encode_bind_ack(pdu::PTYPE_ALTER_CONTEXT_RESP, hdr.call_id, self.max_xmit, self.max_recv, self.assoc_group, &[], &results))
    }

    fn on_request(&mut self, hdr: &Header, body: &[u8], ctx: &RpcContext<'_>) -> Result<(), RpcError> {
        let first = hdr.flags & pdu::PFC_FIRST_FRAG != 0;
        let last = hdr.flags & pdu::PFC_LAST_FRAG != 0;
        if !hdr.is_ndr_le() || !self.bound {
            // Cannot (or may not yet) interpret the call; refuse it once, on
            // its last fragment, without executing anything.
            self.call = None;
            if last {
                return self.push(pdu::encode_fault(hdr.call_id, 0, pdu::NCA_S_PROTO_ERROR, true));
            }
            return Ok(());
        }
        let req = Request::parse(hdr.flags, body)?;
        if first {
            if self.call.is_some() {
                // Without PFC_CONC_MPX calls may not interleave (C706 §12.6.3.1).
                return Err(RpcError::Malformed("interleaved request"));
            }
            self.call = Some(PendingCall { call_id: hdr.call_id, context_id: req.context_id, opnum: req.opnum, stub: Vec::new() });
        }
        let Some(call) = self.call.as_mut().filter(|c| c.call_id == hdr.call_id) else {
            return Err(RpcError::Malformed("request fragment without first"));
        };
        if call.stub.len().saturating_add(req.stub.len()) > MAX_STUB {
            return Err(RpcError::InputTooLarge);
        }
        call.stub.extend_from_slice(req.stub);
        if !last {
            return Ok(());
        }
        let Some(call) = self.call.take() else {
            return Ok(());
        };
        if !self.contexts.contains(&call.context_id) {
            return self.push(pdu::encode_fault(call.call_id, call.context_id, pdu::NCA_S_UNKNOWN_IF, true));
        }
        let r = match self.kind {
            PipeKind::Srvsvc => srvsvc::dispatch(call.opnum, &call.stub, ctx),
            PipeKind::Wkssvc => wkssvc::dispatch(call.opnum, &call.stub, ctx),
        };
        match r {
            Ok(stub) => {
                for frag in pdu::encode_response(call.call_id, call.context_id, &stub, self.max_xmit) {
                    self.push(frag)?;
                }
                Ok(())
            }
            Err(status) => self.push(pdu::encode_fault(
                call.call_id,
                call.context_id,
                status,
                // Unmarshalling/opnum failures happen before execution.
                true,
            )),
        }
    }
}
