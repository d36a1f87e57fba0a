//! The request pipeline, top to bottom: SMB1 upgrade → split compound → validate header and
//! credits → find session → verify signature → find tree → handler → grant credits → sign →
//! next compound element → send (a request that goes async sends the responses before it
//! first). Handlers never touch signing or credits.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use smb_crypto::Signer;
use smb_wire::header::{flags, offset};
use smb_wire::msg::error::encode_error;
use smb_wire::{smb1, Command, FileId, Header, NtStatus, HEADER_LEN};

use crate::commands::{self, spec_of};
use crate::connection::Connection;
use crate::request::{
    add_flags, finish_credits, grant_credits, response_buffer, send_responses, set_credits, write_header, Ctx, HResult, Part, Reply, Tail,
};
use crate::session::Session;
use crate::sync::lock;
use crate::transform::{self, TRANSFORM_LEN};
use crate::tree::Tree;

/// Handles one received frame, the `seq`th of its connection (see `break_order.rs`).
pub async fn process_frame(conn: &Arc<Connection>, mut frame: Vec<u8>, mut payload: Option<crate::splice::Payload>, seq: u64) {
    let _place = crate::break_order::Place(&conn.break_order, seq);
    if frame.len() >= 4 && frame[..4] == smb1::SMB1_PROTOCOL_ID {
        commands::smb1(conn, &frame).await;
        return;
    }
    // Decrypt first: nothing else may look at an encrypted frame's bytes before that.
    let mut pos = 0usize;
    let mut encrypted_by = None;
    if transform::is_encrypted(&frame) {
        match transform::decrypt(conn, &mut frame) {
            Ok(s) => {
                encrypted_by = Some(s);
                pos = TRANSFORM_LEN;
                if !crate::break_order::holds_breaking_command(&frame[pos..]) {
                    conn.break_order.pass(seq);
                }
            }
            Err(why) => {
                tracing::warn!(conn = conn.id, peer = %conn.peer, why, "undecryptable frame; disconnecting");
                conn.close();
                return;
            }
        }
    }
    let mut frame = Arc::new(frame);
    // Responses not yet sent, and the (offset, sign) of each; signed (or encrypted) once
    // their NextCommand values are final.
    let mut out = response_buffer(encrypted_by.is_some());
    let mut parts: Vec<Part> = Vec::new();
    let mut tail = None;
    let mut prev: Option<PrevState> = None;
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
        // Chain: pad the previous response to 8 bytes and point its NextCommand here.
        if let Some(last) = parts.last().map(|p| p.start) {
            while (out.len() - last) % 8 != 0 {
                out.push(0);
            }
            let next = u32::try_from(out.len() - last).unwrap_or(0);
            out[last + offset::NEXT_COMMAND..last + offset::NEXT_COMMAND + 4].copy_from_slice(&next.to_le_bytes());
        }
        let at = (pos..end, seq);
        let Some(state) = process_one(conn, &mut frame, at, &hdr, prev.take(), &mut out, &mut parts, &encrypted_by, &mut tail, &mut payload).await
        else {
            conn.close();
            return;
        };
        prev = Some(state);
        if end == frame.len() {
            break;
        }
        pos = end;
    }
    // Breaks sent by earlier frames go out before this answer.
    conn.break_order.pass(seq);
    conn.break_order.wait_before(seq, conn.id).await;
    send_responses(conn, &mut out, &mut parts, encrypted_by.as_deref(), tail).await;
    if let Ok(f) = Arc::try_unwrap(frame) {
        conn.recycle(f);
    }
}

/// What a related request inherits from the one before it: session, tree, FileId, and the
/// failure it must repeat (SUCCESS when none).
type PrevState = (Option<Arc<Session>>, Option<Arc<Tree>>, Option<FileId>, NtStatus);

/// Processes one message of a compound, appending its response to `out` and recording it
/// in `parts`. Returns the state related requests inherit, or None to drop the connection.
/// The steps: header and credits, session, signature or encryption, gate and handler,
/// response header.
// The pipeline's state is passed explicitly rather than hidden in a struct, so each step
// shows what it reads and writes.
#[allow(clippy::too_many_arguments)]
async fn process_one(
    conn: &Arc<Connection>,
    frame: &mut Arc<Vec<u8>>,
    (range, seq): (Range<usize>, u64),
    hdr: &Header,
    prev: Option<PrevState>,
    out: &mut Vec<u8>,
    parts: &mut Vec<Part>,
    encrypted_by: &Option<Arc<Session>>,
    tail: &mut Option<Tail>,
    payload: &mut Option<crate::splice::Payload>,
) -> Option<PrevState> {
    let start = out.len();
    let arrived = Instant::now();
    let related = hdr.is_related() && prev.is_some();
    let (prev_session, prev_tree, prev_file, prev_chain) = match prev {
        Some(p) => p,
        None => (None, None, None, NtStatus::SUCCESS),
    };
    let cmd = match check_header_and_credits(conn, &frame[range.clone()], hdr, out, parts)? {
        Ok(cmd) => cmd,
        Err(chain) => return Some((prev_session, prev_tree, prev_file, chain)),
    };
    let auth = find_session(conn, hdr, related, &prev_session);
    let auth = match verify_request(conn, frame, range.clone(), hdr, cmd, auth, encrypted_by, out, parts)? {
        Ok(auth) => auth,
        Err(answered) => return Some(answered),
    };

    let mut cx = Ctx {
        conn,
        hdr,
        frame,
        range: range.clone(),
        start,
        earlier: std::mem::take(parts),
        session: auth.session.clone(),
        is_channel: auth.is_channel,
        verified: auth.verified,
        signer: auth.signer.clone(),
        tree: None,
        related_file: if related { prev_file } else { None },
        resp_session_id: None,
        file_id_out: None,
        async_id: None,
        credits_granted_early: false,
        throttled: false,
        encrypted_by: encrypted_by.clone(),
        payload: payload.take(),
        seq,
    };
    let session_id = auth.session.as_ref().map_or(hdr.session_id, |s| s.id);
    write_header(out, hdr, NtStatus::SUCCESS, session_id.0);
    // Compound rules (MS-SMB2 3.3.5.2.7): the first request cannot be related, and related
    // requests after a failed CREATE fail as it did. Like Windows, other failures (a denied
    // WRITE, say) do not spread: the next related request still uses the handle.
    let chain_failure = if hdr.is_related() && !related {
        Some(NtStatus::INVALID_PARAMETER)
    } else if related && !prev_chain.is_success() && cmd != Command::Create {
        Some(prev_chain)
    } else {
        None
    };
    let status = match chain_failure {
        Some(st) => Err(st),
        None => match gate(&mut cx, cmd, related, &prev_tree, auth.verified) {
            Err(st) => Err(st),
            Ok(()) => match crate::qos::admit(&mut cx, cmd, out).await {
                // Storage calls of a request on a share are bounded by its gate.
                Ok(()) => match cx.tree.as_ref().and_then(|t| t.share()).map(|s| s.storage.clone()) {
                    Some(gate) => crate::storage::on_share(gate, commands::dispatch(&mut cx, cmd, out)).await,
                    None => commands::dispatch(&mut cx, cmd, out).await,
                },
                Err(st) => Err(st),
            },
        },
    };
    // The one place requests are counted: every request that reached the gate, with its
    // final status (a request that went async returns here after its final response).
    conn.server.ops.record(cmd as usize, answered_ok(&status), arrived.elapsed());
    if conn.is_closed() && spec_of(cmd).may_disconnect {
        // The handler saw tampering (VALIDATE_NEGOTIATE_INFO mismatch, repeated NEGOTIATE)
        // and dropped the connection: MS-SMB2 3.3.5.15.12 terminates it without an answer.
        return None;
    }
    finish_response(conn, cx, cmd, status, chain_failure, auth.signer, out, parts, tail)
}

/// The result class of the metrics: success, informational and warning statuses (a
/// truncated buffer, the end of a listing) and the intermediate SESSION_SETUP's
/// MORE_PROCESSING_REQUIRED are answers, not failures.
fn answered_ok(status: &HResult) -> bool {
    let st = match status {
        Ok(r) => r.status,
        Err(st) => *st,
    };
    st.0 >> 30 != 3 || st == NtStatus::MORE_PROCESSING_REQUIRED
}

/// Step 1: the header may be processed, and the request is within the credit window with a
/// sufficient charge (MS-SMB2 3.3.5.2.3, 3.3.5.2.5). `Ok(cmd)` goes on; `Err(chain)` means an
/// error response is already written (what related requests inherit is `chain`); None drops
/// the connection.
fn check_header_and_credits(
    conn: &Connection,
    msg: &[u8],
    hdr: &Header,
    out: &mut Vec<u8>,
    parts: &mut Vec<Part>,
) -> Option<Result<Command, NtStatus>> {
    let start = out.len();
    if hdr.is_response() {
        tracing::warn!(conn = conn.id, "response flag in a request; disconnecting");
        return None;
    }
    let negotiated = conn.negotiated.get().is_some();
    if !negotiated && hdr.command() != Some(Command::Negotiate) {
        tracing::warn!(conn = conn.id, command = hdr.command, "request before NEGOTIATE; disconnecting");
        return None;
    }

    // Credits: CANCEL consumes none; everything else must use granted ids.
    let charge = u64::from(hdr.credit_charge.max(1));
    if hdr.command() != Some(Command::Cancel) {
        let dialect = conn.dialect();
        if let (true, Some(cmd)) = (dialect > smb_wire::dialect::SMB202 && negotiated, hdr.command()) {
            let payload = (spec_of(cmd).payload)(msg);
            let needed = (u64::from(payload.saturating_sub(1)) / 65536) + 1;
            if hdr.credit_charge == 0 && payload > 65536 || u64::from(hdr.credit_charge) > 0 && needed > charge {
                write_header(out, hdr, NtStatus::INVALID_PARAMETER, 0);
                encode_error(out);
                // Two statements: the window lock must be released before it is taken again.
                let consumed = lock(&conn.credits).consume(hdr.message_id.0, charge);
                let granted = if consumed { lock(&conn.credits).grant(hdr.credits) } else { 0 };
                set_credits(out, start, granted);
                parts.push(Part::plain(start));
                return Some(Err(NtStatus::INVALID_PARAMETER));
            }
        }
        if !lock(&conn.credits).consume(hdr.message_id.0, charge) {
            tracing::warn!(conn = conn.id, mid = hdr.message_id.0, charge, "message id outside the credit window; disconnecting");
            return None;
        }
    }
    let Some(cmd) = hdr.command() else {
        // An unknown command is answered, not fatal (Windows and Samba do the same).
        tracing::debug!(conn = conn.id, command = hdr.command, "unknown command");
        write_header(out, hdr, NtStatus::INVALID_PARAMETER, hdr.session_id.0);
        encode_error(out);
        finish_credits(conn, out, start, hdr);
        parts.push(Part::plain(start));
        return Some(Err(NtStatus::SUCCESS));
    };
    Some(Ok(cmd))
}

/// Who a request speaks for: its session, whether this connection is a channel of it, the
/// key that verifies it, and whether it was verified (signed or encrypted).
struct Auth {
    session: Option<Arc<Session>>,
    is_channel: bool,
    signer: Option<Arc<Signer>>,
    verified: bool,
}

/// Step 2: the request's session and the key of this connection's channel of it.
fn find_session(conn: &Connection, hdr: &Header, related: bool, prev_session: &Option<Arc<Session>>) -> Auth {
    // Session lookup: a related request works in the session of the one before it
    // (MS-SMB2 3.3.5.2.7.2), whatever its header says.
    let session = if related {
        prev_session.clone()
    } else if hdr.session_id.0 != 0 {
        conn.server.sessions.get(&hdr.session_id)
    } else {
        None
    };

    // Multichannel: the request is verified (and its response signed) with the key of this
    // connection's channel of the session. A connection that is not a channel uses
    // Session.SigningKey: a binding SESSION_SETUP is signed with it (MS-SMB2 3.3.5.5.2), and
    // anything else is answered USER_SESSION_DELETED, signed as clients expect.
    let channel = session.as_ref().and_then(|s| conn.channels.get(s.id));
    let is_channel = channel.is_some();
    let signer: Option<Arc<Signer>> = match channel {
        Some(signer) => signer,
        None => session.as_ref().and_then(|s| s.signer().cloned()),
    };
    Auth { session, is_channel, signer, verified: false }
}

/// Step 3: an encrypted request must name the session that decrypted it; a signed one must
/// verify (MS-SMB2 3.3.5.2.4). `Ok` goes on; `Err` means an error response is written (with
/// what related requests inherit); None drops the connection.
#[allow(clippy::too_many_arguments)]
fn verify_request(
    conn: &Connection,
    frame: &mut Arc<Vec<u8>>,
    range: Range<usize>,
    hdr: &Header,
    cmd: Command,
    mut auth: Auth,
    encrypted_by: &Option<Arc<Session>>,
    out: &mut Vec<u8>,
    parts: &mut Vec<Part>,
) -> Option<Result<Auth, PrevState>> {
    let start = out.len();
    // An encrypted request is authenticated by its AEAD tag, but only for the session whose
    // key opened it (MS-SMB2 3.3.5.2.1.1).
    if let Some(enc) = encrypted_by {
        if auth.session.as_ref().is_some_and(|s| s.id != enc.id) {
            tracing::warn!(conn = conn.id, "encrypted request names another session; disconnecting");
            return None;
        }
        auth.verified = true;
        enc.encrypted_seen.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // Signature check: a signed request is verified whatever the command.
    if hdr.is_signed() && cmd != Command::Negotiate && encrypted_by.is_none() {
        if let Some(signer) = auth.signer.clone().as_ref() {
            let mut ok = verify(frame, range.clone(), signer);
            if !ok && cmd == Command::SessionSetup && !auth.is_channel {
                // A binding request may be signed with Session.SigningKey under this
                // connection's algorithm rather than the session's (clients differ).
                if let Some(alt) = auth.session.as_ref().and_then(|s| binding_signer(conn, s)) {
                    ok = verify(frame, range.clone(), &alt);
                    if ok {
                        auth.signer = Some(alt);
                    }
                }
            }
            if !ok && cmd == Command::SessionSetup {
                // A SESSION_SETUP signed with another key than this channel's (a second
                // binding of a bound connection, a stale client) changes nothing: it is
                // refused (MS-SMB2 3.3.5.2.4) and the connection and session stay.
                tracing::info!(conn = conn.id, peer = %conn.peer, "SESSION_SETUP with a bad signature refused");
                // A client re-binding a connection that is already a channel signs with
                // Session.SigningKey (its new channel has no key yet) and drops an answer
                // that is not signed with it as forged; so when that key verifies, the
                // refusal is signed with it.
                let reply = auth.session.as_ref().and_then(|s| s.signer().cloned()).filter(|s| verify(frame, range.clone(), s));
                write_header(out, hdr, NtStatus::ACCESS_DENIED, hdr.session_id.0);
                encode_error(out);
                finish_credits(conn, out, start, hdr);
                parts.push(Part { start, signer: reply, preauth: None });
                return Some(Err((None, None, None, NtStatus::ACCESS_DENIED)));
            }
            if !ok {
                tracing::warn!(conn = conn.id, peer = %conn.peer, ?cmd, "bad signature; disconnecting");
                return None;
            }
            auth.verified = true;
        } else if cmd != Command::SessionSetup {
            // Signed, but there is no key: unknown session, or one this connection is not a
            // channel of; a session in progress or a guest session.
            let deleted = auth.session.as_ref().is_none_or(|s| s.is_valid() && !auth.is_channel);
            tracing::trace!(conn = conn.id, ?cmd, mid = hdr.message_id.0, session = hdr.session_id.0, deleted, "signed request without a key");
            write_header(out, hdr, if deleted { NtStatus::USER_SESSION_DELETED } else { NtStatus::ACCESS_DENIED }, 0);
            if deleted {
                // The SIGNED flag of the request is echoed with a zero signature, as Samba's
                // server does: a client that signs this session drops an unflagged response
                // as forged (Samba's client answers ACCESS_DENIED), but does not check the
                // signature of a USER_SESSION_DELETED, which no key can sign.
                add_flags(out, start, flags::SIGNED);
            }
            encode_error(out);
            finish_credits(conn, out, start, hdr);
            parts.push(Part::plain(start));
            return Some(Err((auth.session, None, None, NtStatus::ACCESS_DENIED)));
        }
    }
    Some(Ok(auth))
}

/// Step 5: the response header (status, ids, async flags), credits and the signing
/// decision; records the response in `parts` and returns what related requests inherit.
#[allow(clippy::too_many_arguments)]
fn finish_response(
    conn: &Connection,
    mut cx: Ctx<'_>,
    cmd: Command,
    status: HResult,
    chain_failure: Option<NtStatus>,
    req_signer: Option<Arc<Signer>>,
    out: &mut Vec<u8>,
    parts: &mut Vec<Part>,
    tail: &mut Option<Tail>,
) -> Option<PrevState> {
    let hdr = cx.hdr;
    let encrypted_by = cx.encrypted_by.clone();
    // go_async may have sent the earlier responses, moving this one to the front of `out`.
    let start = cx.start;
    *parts = std::mem::take(&mut cx.earlier);
    // What later related requests inherit: the failure of a CREATE or of the chain.
    let chain = match status {
        Err(st) if chain_failure.is_some() || cmd == Command::Create => st,
        _ => NtStatus::SUCCESS,
    };
    let reply = match status {
        Ok(reply) => reply,
        Err(s) => {
            out.truncate(start + HEADER_LEN);
            encode_error(out);
            Reply::new(s)
        }
    };
    let status = reply.status;
    if cmd == Command::Cancel {
        // CANCEL gets no response of its own.
        out.truncate(start);
        return Some((cx.session, cx.tree, cx.file_id_out, chain));
    }
    out[start + offset::STATUS..start + offset::STATUS + 4].copy_from_slice(&status.0.to_le_bytes());
    tracing::trace!(
        conn = conn.id,
        ?cmd,
        mid = hdr.message_id.0,
        session = hdr.session_id.0,
        signed = hdr.is_signed(),
        file = ?commands::file_id(cmd, cx.msg()),
        status = format_args!("{:#010x}", status.0),
        "response"
    );
    patch_ids(&cx, reply.tree_id, out, start);
    if cx.credits_granted_early {
        set_credits(out, start, 0);
    } else {
        grant_credits(conn, out, start, cx.credits_asked());
    }
    let session_now = cx.session.clone().or_else(|| cx.resp_session_id.and_then(|id| conn.server.sessions.get(&id)));
    // Signed with the key of the channel the response goes out on: once a SESSION_SETUP
    // completes, the new channel's; after LOGOFF, the one that verified the request.
    let signer = session_now.as_ref().and_then(|s| conn.channels.get(s.id)).flatten().or(req_signer);
    let sign = signer.is_some()
        && (reply.force_sign || hdr.is_signed() || session_now.as_ref().and_then(|s| s.security.get()).is_some_and(|s| s.signing_required));
    let file = reply.file_id.or(cx.file_id_out).or(cx.related_file);
    // A TREE_CONNECT's new tree serves the related requests after it.
    let tree_now = cx.tree.clone().or_else(|| reply.tree_id.and_then(|id| session_now.as_ref().and_then(|s| s.tree(id))));
    // The session is kept with the response: LOGOFF removes it from the table before the
    // response that must still be signed with its key goes out.
    parts.push(Part { start, signer: if sign { signer } else { None }, preauth: reply.preauth });
    // Only a successful response carries file data after it; signing would need the data in
    // the buffer, encryption (which replaces signing) seals it from the mapping.
    if status == NtStatus::SUCCESS && (!sign || encrypted_by.is_some()) {
        *tail = reply.tail;
    }
    Some((session_now, tree_now, file, chain))
}

/// Puts the ids a handler set (a new session or tree, the async id) into the response
/// header at `start`.
fn patch_ids(cx: &Ctx<'_>, tree_id: Option<u32>, out: &mut [u8], start: usize) {
    if let Some(sid) = cx.resp_session_id {
        out[start + offset::SESSION_ID..start + offset::SESSION_ID + 8].copy_from_slice(&sid.0.to_le_bytes());
    }
    if let Some(tid) = tree_id {
        out[start + offset::TREE_ID..start + offset::TREE_ID + 4].copy_from_slice(&tid.to_le_bytes());
    }
    if let Some(aid) = cx.async_id {
        let f = flags::SERVER_TO_REDIR | flags::ASYNC_COMMAND | (cx.hdr.flags & flags::RELATED_OPERATIONS);
        out[start + offset::FLAGS..start + offset::FLAGS + 4].copy_from_slice(&f.to_le_bytes());
        out[start + 32..start + 40].copy_from_slice(&aid.to_le_bytes());
    }
}

/// Verifies the signature of one message of the frame (in place when the frame is not shared).
fn verify(frame: &mut Arc<Vec<u8>>, range: Range<usize>, signer: &Signer) -> bool {
    match Arc::get_mut(frame) {
        Some(f) => signer.verify(&mut f[range]),
        None => signer.verify(&mut frame[range].to_vec()),
    }
}

/// Session.SigningKey under this connection's signing algorithm, when that differs from
/// the session's.
fn binding_signer(conn: &Connection, session: &Session) -> Option<Arc<Signer>> {
    let algo = conn.negotiated.get()?.signing_algorithm;
    let key = session.security.get()?.signing_key.as_ref()?;
    (algo != session.signing_algorithm).then(|| Arc::new(Signer::new(algo, key)))
}

/// Session, tree and compound checks that precede every handler.
fn gate(cx: &mut Ctx<'_>, cmd: Command, related: bool, prev_tree: &Option<Arc<Tree>>, verified: bool) -> Result<(), NtStatus> {
    let spec = spec_of(cmd);
    if !spec.needs_session {
        return Ok(());
    }
    if cx.session.is_none() && !related && spec.sessionless.is_some_and(|f| f(cx)) {
        return Ok(());
    }
    let Some(session) = cx.session.as_ref() else {
        // A related request whose predecessor had no session has nothing to inherit.
        return Err(if related { NtStatus::INVALID_PARAMETER } else { NtStatus::USER_SESSION_DELETED });
    };
    if !session.is_valid() {
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    // Any channel of the session may carry its requests; other connections may not.
    if !cx.is_channel {
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    if !verified && session.security.get().is_some_and(|s| s.signing_required && s.signer.is_some()) {
        tracing::warn!(conn = cx.conn.id, ?cmd, "unsigned request on a signing-required session");
        return Err(NtStatus::ACCESS_DENIED);
    }
    // MS-SMB2 3.3.5.2.9 / 3.3.5.2.11: an encrypting session or an encrypted share accepts
    // only encrypted requests.
    let encrypted = cx.encrypted_by.is_some();
    if !encrypted && session.security.get().is_some_and(|s| s.encrypt_data) {
        tracing::warn!(conn = cx.conn.id, ?cmd, "unencrypted request on an encrypting session");
        return Err(NtStatus::ACCESS_DENIED);
    }
    if !spec.needs_tree {
        return Ok(());
    }
    let tree = match prev_tree {
        Some(t) if related => Some(t.clone()),
        _ => session.tree(cx.hdr.tree_id.0),
    };
    match tree {
        Some(t) if t.encrypt && !encrypted => {
            tracing::warn!(conn = cx.conn.id, ?cmd, "unencrypted request to an encrypted share");
            Err(NtStatus::ACCESS_DENIED)
        }
        Some(t) => {
            cx.tree = Some(t);
            Ok(())
        }
        None => Err(NtStatus::NETWORK_NAME_DELETED),
    }
}

#[cfg(test)]
mod tests;
