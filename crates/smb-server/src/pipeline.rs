//! The request pipeline, top to bottom: SMB1 upgrade → split compound → validate header and
//! credits → find session → verify signature → find tree → handler → grant credits → sign →
//! next compound element → send. Handlers never touch signing or credits.

use std::ops::Range;
use std::sync::Arc;

use smb_wire::header::{flags, offset, PROTOCOL_ID};
use smb_wire::msg::error::encode_error;
use smb_wire::{smb1, Command, FileId, Header, NtStatus, SessionId, HEADER_LEN};

use crate::connection::Connection;
use crate::handlers;
use crate::server::lock;
use crate::session::Session;
use crate::tree::Tree;

/// Per-request context handed to handlers.
pub struct Ctx<'a> {
    pub conn: &'a Arc<Connection>,
    pub hdr: &'a Header,
    /// The whole frame (shared so WRITE can hand its payload to a blocking thread).
    pub frame: &'a Arc<Vec<u8>>,
    /// This message's bytes within `frame`.
    pub range: Range<usize>,
    pub session: Option<Arc<Session>>,
    pub tree: Option<Arc<Tree>>,
    /// FileId produced by the previous request of a related compound.
    pub related_file: Option<FileId>,
    /// Set by SESSION_SETUP / TREE_CONNECT to put a new id in the response header.
    pub resp_session_id: Option<SessionId>,
    pub resp_tree_id: Option<u32>,
    /// Set by handlers that produce or use a FileId (for related compounds).
    pub file_id_out: Option<FileId>,
    /// Set when the request went async (interim response already sent).
    pub async_id: Option<u64>,
    /// Credits already granted in an interim response.
    pub credits_granted_early: bool,
    /// The response must be signed even if the request was not (final SESSION_SETUP).
    pub force_sign: bool,
    /// Skip signing of this response (e.g. signature check failed).
    pub no_sign: bool,
    /// Hash the final response bytes into this preauth chain (3.1.1 NEGOTIATE and
    /// SESSION_SETUP responses that are not the last).
    pub preauth_response: Option<PreauthTarget>,
}

/// Which preauth integrity hash a response extends.
pub enum PreauthTarget {
    Connection,
    Session(Arc<Session>),
}

impl Ctx<'_> {
    pub fn msg(&self) -> &[u8] {
        &self.frame[self.range.clone()]
    }

    /// Resolves a FileId from a request: the all-ones id means the previous related result.
    pub fn file_id(&self, id: FileId) -> FileId {
        if id == FileId::RELATED {
            self.related_file.unwrap_or(id)
        } else {
            id
        }
    }
}

/// A handler's verdict: `Ok(status)` with the body appended, or `Err(status)` for an error
/// response that the pipeline writes.
pub type HResult = Result<NtStatus, NtStatus>;

/// Handles one received frame.
pub async fn process_frame(conn: &Arc<Connection>, frame: Vec<u8>) {
    if frame.len() >= 4 && frame[..4] == smb1::SMB1_PROTOCOL_ID {
        handlers::negotiate::smb1(conn, &frame).await;
        return;
    }
    let mut frame = Arc::new(frame);
    let mut out: Vec<u8> = Vec::with_capacity(512);
    out.extend_from_slice(&[0; 4]);
    // (start, end-without-padding) of each response in `out`, signed after chaining.
    let mut parts: Vec<(usize, bool)> = Vec::new();
    let mut pos = 0usize;
    let mut prev: Option<(Option<Arc<Session>>, Option<Arc<Tree>>, Option<FileId>, NtStatus)> = None;
    loop {
        let Ok(hdr) = Header::decode(&frame[pos..]) else {
            tracing::warn!(conn = conn.id, peer = %conn.peer, "malformed SMB2 header; disconnecting");
            conn.close();
            return;
        };
        let end = match hdr.next_command {
            0 => frame.len(),
            n => {
                let n = n as usize;
                if n % 8 != 0 || n < HEADER_LEN || pos + n > frame.len() {
                    tracing::warn!(conn = conn.id, "bad NextCommand; disconnecting");
                    conn.close();
                    return;
                }
                pos + n
            }
        };
        let start = out.len();
        let outcome = process_one(conn, &mut frame, pos..end, &hdr, prev.take(), &mut out).await;
        let Some((sign, state)) = outcome else {
            conn.close();
            return;
        };
        prev = Some(state);
        parts.push((start, sign));
        if end == frame.len() {
            break;
        }
        // Chain: pad the response to 8 bytes and point NextCommand at the next one.
        while (out.len() - start) % 8 != 0 {
            out.push(0);
        }
        let next = u32::try_from(out.len() - start).unwrap_or(0);
        out[start + offset::NEXT_COMMAND..start + offset::NEXT_COMMAND + 4].copy_from_slice(&next.to_le_bytes());
        pos = end;
    }
    // Sign each element over its padded extent, now that NextCommand values are final.
    for (i, (start, sign)) in parts.iter().enumerate() {
        if !*sign {
            continue;
        }
        let stop = parts.get(i + 1).map_or(out.len(), |p| p.0);
        let sid = u64::from_le_bytes(out[start + offset::SESSION_ID..start + offset::SESSION_ID + 8].try_into().unwrap_or([0; 8]));
        if let Some(s) = conn.server.sessions.get(&SessionId(sid)) {
            if let Some(signer) = s.signer() {
                let f = u32::from_le_bytes(out[start + offset::FLAGS..start + offset::FLAGS + 4].try_into().unwrap_or([0; 4]));
                out[start + offset::FLAGS..start + offset::FLAGS + 4].copy_from_slice(&(f | flags::SIGNED).to_le_bytes());
                signer.sign(&mut out[*start..stop]);
            }
        }
    }
    if let Err(e) = conn.send(out).await {
        tracing::debug!(conn = conn.id, error = %e, "send failed");
        conn.close();
    }
}

type PrevState = (Option<Arc<Session>>, Option<Arc<Tree>>, Option<FileId>, NtStatus);

/// Processes one message of a compound, appending its response to `out`. Returns whether to
/// sign it and the state related requests inherit, or None to drop the connection.
async fn process_one(
    conn: &Arc<Connection>,
    frame: &mut Arc<Vec<u8>>,
    range: Range<usize>,
    hdr: &Header,
    prev: Option<PrevState>,
    out: &mut Vec<u8>,
) -> Option<(bool, PrevState)> {
    let start = out.len();
    let related = hdr.is_related() && prev.is_some();
    let (prev_session, prev_tree, prev_file, prev_status) = match prev {
        Some(p) => p,
        None => (None, None, None, NtStatus::SUCCESS),
    };
    let Some(cmd) = hdr.command() else {
        tracing::warn!(conn = conn.id, command = hdr.command, "unknown command; disconnecting");
        return None;
    };
    if hdr.is_response() {
        tracing::warn!(conn = conn.id, "response flag in a request; disconnecting");
        return None;
    }
    let negotiated = conn.negotiated.get().is_some();
    if !negotiated && cmd != Command::Negotiate {
        tracing::warn!(conn = conn.id, ?cmd, "request before NEGOTIATE; disconnecting");
        return None;
    }

    // Credits: CANCEL consumes none; everything else must use granted ids.
    let charge = u64::from(hdr.credit_charge.max(1));
    if cmd != Command::Cancel {
        let dialect = conn.dialect();
        if dialect > smb_wire::dialect::SMB202 && negotiated {
            let payload = handlers::payload_size(cmd, &frame[range.clone()]);
            let needed = (u64::from(payload.saturating_sub(1)) / 65536) + 1;
            if hdr.credit_charge == 0 && payload > 65536 || u64::from(hdr.credit_charge) > 0 && needed > charge {
                write_header(out, hdr, cmd, NtStatus::INVALID_PARAMETER, 0);
                encode_error(out);
                let granted = lock(&conn.credits).consume(hdr.message_id.0, charge).then(|| lock(&conn.credits).grant(hdr.credits)).unwrap_or(0);
                set_credits(out, start, granted);
                return Some((false, (prev_session, prev_tree, prev_file, NtStatus::INVALID_PARAMETER)));
            }
        }
        if !lock(&conn.credits).consume(hdr.message_id.0, charge) {
            tracing::warn!(conn = conn.id, mid = hdr.message_id.0, charge, "message id outside the credit window; disconnecting");
            return None;
        }
    }

    // Session lookup.
    let session_id = if related && hdr.session_id.0 == u64::MAX { prev_session.as_ref().map_or(hdr.session_id, |s| s.id) } else { hdr.session_id };
    let session = if session_id.0 != 0 { conn.server.sessions.get(&session_id) } else { None };

    // Signature check: a signed request is verified whatever the command.
    let mut verified = false;
    if hdr.is_signed() && cmd != Command::Negotiate {
        if let Some(signer) = session.as_ref().and_then(|s| s.signer()) {
            let ok = match Arc::get_mut(frame) {
                Some(f) => signer.verify(&mut f[range.clone()]),
                None => signer.verify(&mut frame[range.clone()].to_vec()),
            };
            if !ok {
                tracing::warn!(conn = conn.id, peer = %conn.peer, ?cmd, "bad signature; disconnecting");
                return None;
            }
            verified = true;
        } else if cmd != Command::SessionSetup {
            // Signed, but the session has no key (unknown, in progress or guest).
            write_header(out, hdr, cmd, if session.is_none() { NtStatus::USER_SESSION_DELETED } else { NtStatus::ACCESS_DENIED }, 0);
            encode_error(out);
            finish_credits(conn, out, start, hdr);
            return Some((false, (session, None, None, NtStatus::ACCESS_DENIED)));
        }
    }

    let mut cx = Ctx {
        conn,
        hdr,
        frame,
        range: range.clone(),
        session: session.clone(),
        tree: None,
        related_file: if related { prev_file } else { None },
        resp_session_id: None,
        resp_tree_id: None,
        file_id_out: None,
        async_id: None,
        credits_granted_early: false,
        force_sign: false,
        no_sign: false,
        preauth_response: None,
    };
    write_header(out, hdr, cmd, NtStatus::SUCCESS, session_id.0);
    let status = match gate(&mut cx, cmd, related, &prev_tree, prev_status, verified) {
        Err(st) => Err(st),
        Ok(()) => handlers::dispatch(&mut cx, cmd, out).await,
    };
    let status = match status {
        Ok(s) => s,
        Err(s) => {
            out.truncate(start + HEADER_LEN);
            encode_error(out);
            s
        }
    };
    if cmd == Command::Cancel {
        // CANCEL gets no response of its own.
        out.truncate(start);
        return Some((false, (cx.session, cx.tree, cx.file_id_out, status)));
    }
    out[start + offset::STATUS..start + offset::STATUS + 4].copy_from_slice(&status.0.to_le_bytes());
    if let Some(sid) = cx.resp_session_id {
        out[start + offset::SESSION_ID..start + offset::SESSION_ID + 8].copy_from_slice(&sid.0.to_le_bytes());
    }
    if let Some(tid) = cx.resp_tree_id {
        out[start + offset::TREE_ID..start + offset::TREE_ID + 4].copy_from_slice(&tid.to_le_bytes());
    }
    if let Some(aid) = cx.async_id {
        let f = flags::SERVER_TO_REDIR | flags::ASYNC_COMMAND | (hdr.flags & flags::RELATED_OPERATIONS);
        out[start + offset::FLAGS..start + offset::FLAGS + 4].copy_from_slice(&f.to_le_bytes());
        out[start + 32..start + 40].copy_from_slice(&aid.to_le_bytes());
    }
    if cx.credits_granted_early {
        set_credits(out, start, 0);
    } else {
        finish_credits(conn, out, start, hdr);
    }
    match cx.preauth_response.take() {
        Some(PreauthTarget::Connection) => lock(&conn.preauth).update(&out[start..]),
        Some(PreauthTarget::Session(s)) => {
            if let Some(p) = lock(&s.pending).as_mut() {
                p.preauth.update(&out[start..]);
            }
        }
        None => {}
    }
    let session_now = cx.session.clone().or_else(|| cx.resp_session_id.and_then(|id| conn.server.sessions.get(&id)));
    let sign = !cx.no_sign
        && (cx.force_sign
            || (session_now.as_ref().and_then(|s| s.signer()).is_some()
                && (hdr.is_signed() || session_now.as_ref().and_then(|s| s.security.get()).is_some_and(|s| s.signing_required))));
    let file = cx.file_id_out.or(cx.related_file);
    Some((sign, (session_now, cx.tree, file, status)))
}

/// Session, tree and compound checks that precede every handler.
fn gate(cx: &mut Ctx<'_>, cmd: Command, related: bool, prev_tree: &Option<Arc<Tree>>, prev_status: NtStatus, verified: bool) -> Result<(), NtStatus> {
    if cx.hdr.is_related() && !related {
        // The first element of a compound cannot be related.
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if related && !prev_status.is_success() && prev_status != NtStatus::MORE_PROCESSING_REQUIRED {
        // MS-SMB2 3.3.5.2.7.2: a related request after a failure fails the same way.
        if cmd != Command::Create {
            return Err(prev_status);
        }
    }
    if matches!(cmd, Command::Negotiate | Command::SessionSetup | Command::Echo | Command::Cancel) {
        return Ok(());
    }
    let Some(session) = cx.session.as_ref() else { return Err(NtStatus::USER_SESSION_DELETED) };
    if !session.is_valid() {
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    if session.conn_id != cx.conn.id {
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    if !verified && session.security.get().is_some_and(|s| s.signing_required && s.signer.is_some()) {
        tracing::warn!(conn = cx.conn.id, ?cmd, "unsigned request on a signing-required session");
        return Err(NtStatus::ACCESS_DENIED);
    }
    if matches!(cmd, Command::Logoff | Command::TreeConnect) {
        return Ok(());
    }
    let tree = if related && cx.hdr.tree_id.0 == u32::MAX { prev_tree.clone() } else { session.tree(cx.hdr.tree_id.0) };
    match tree {
        Some(t) => {
            cx.tree = Some(t);
            Ok(())
        }
        None => Err(NtStatus::NETWORK_NAME_DELETED),
    }
}

/// Appends a response header mirroring `req`.
fn write_header(out: &mut Vec<u8>, req: &Header, cmd: Command, status: NtStatus, session_id: u64) {
    let h = Header {
        credit_charge: req.credit_charge,
        status: status.0,
        command: cmd as u16,
        credits: 0,
        flags: flags::SERVER_TO_REDIR | (req.flags & flags::RELATED_OPERATIONS) | (req.flags & flags::PRIORITY_MASK),
        next_command: 0,
        message_id: req.message_id,
        async_id: 0,
        tree_id: req.tree_id,
        session_id: SessionId(session_id),
        signature: [0; 16],
    };
    h.encode(out);
}

fn set_credits(out: &mut [u8], start: usize, credits: u16) {
    out[start + offset::CREDITS..start + offset::CREDITS + 2].copy_from_slice(&credits.to_le_bytes());
}

fn finish_credits(conn: &Connection, out: &mut [u8], start: usize, req: &Header) {
    let g = lock(&conn.credits).grant(req.credits);
    set_credits(out, start, g);
}

/// Sends an interim STATUS_PENDING response and switches the request to async (MS-SMB2
/// 3.3.4.2). Credits are granted here; the final response grants none.
pub async fn go_async(cx: &mut Ctx<'_>) -> u64 {
    if let Some(a) = cx.async_id {
        return a;
    }
    let aid = cx.conn.server.new_async_id();
    let mut out = Vec::with_capacity(4 + HEADER_LEN + 9);
    out.extend_from_slice(&[0; 4]);
    let cmd = cx.hdr.command().unwrap_or(Command::Echo);
    write_header(&mut out, cx.hdr, cmd, NtStatus::PENDING, cx.hdr.session_id.0);
    let f = flags::SERVER_TO_REDIR | flags::ASYNC_COMMAND;
    out[4 + offset::FLAGS..4 + offset::FLAGS + 4].copy_from_slice(&f.to_le_bytes());
    out[4 + 32..4 + 40].copy_from_slice(&aid.to_le_bytes());
    encode_error(&mut out);
    finish_credits(cx.conn, &mut out, 4, cx.hdr);
    let signer = cx.session.as_ref().and_then(|s| s.signer());
    if let (true, Some(signer)) = (cx.hdr.is_signed(), signer) {
        let fl = f | flags::SIGNED;
        out[4 + offset::FLAGS..4 + offset::FLAGS + 4].copy_from_slice(&fl.to_le_bytes());
        signer.sign(&mut out[4..]);
    }
    let _ = cx.conn.send(out).await;
    cx.async_id = Some(aid);
    cx.credits_granted_early = true;
    aid
}

/// Whether bytes look like an SMB2 message (used by tests and the SMB1 path).
pub fn is_smb2(buf: &[u8]) -> bool {
    buf.len() >= 4 && buf[..4] == PROTOCOL_ID
}
