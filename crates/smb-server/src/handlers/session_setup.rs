//! SESSION_SETUP (MS-SMB2 3.3.5.5): NTLM via SPNEGO, key derivation, guest mapping,
//! re-authentication, multichannel session binding, and slowing down repeated failures.

use std::sync::Arc;

use smb_auth::{AuthError, AuthStep, Identity, NtlmServer};
use smb_crypto::{Sealer, SessionKeys, Signer, SigningAlgorithm};
use smb_wire::msg::negotiate::SIGNING_REQUIRED;
use smb_wire::msg::session_setup::SessionSetupRequest as Req;
use smb_wire::msg::session_setup::{
    encode_response, SessionSetupRequest, FLAG_BINDING, SESSION_FLAG_ENCRYPT_DATA, SESSION_FLAG_IS_GUEST, SESSION_FLAG_IS_NULL,
};
use smb_wire::{dialect, NtStatus, SessionId};

use crate::channel::{self, Binding};
use crate::config::EncryptionMode;
use crate::request::{Ctx, HResult, PreauthTarget, Reply};
use crate::session::{Pending, Session, SessionSecurity, User};
use crate::sync::lock;

/// Sessions one connection may hold; real clients use one or two.
const MAX_SESSIONS_PER_CONNECTION: usize = 64;

/// Bindings one connection may have in progress at once.
const MAX_BINDINGS_PER_CONNECTION: usize = 8;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let req = SessionSetupRequest::decode(&frame[cx.range.clone()]).map_err(super::bad("SESSION_SETUP"))?;
    let conn = cx.conn;
    let server = &conn.server;
    let dialect = conn.dialect();
    if req.flags & FLAG_BINDING != 0 {
        return bind(cx, &req, out).await;
    }
    let session = session_for(cx)?;
    cx.resp_session_id = Some(session.id);
    let reauth = session.is_valid();

    let (step, preauth) = {
        let mut guard = lock(&session.pending);
        let Some(p) = guard.as_mut() else { return Err(NtStatus::USER_SESSION_DELETED) };
        if dialect == dialect::SMB311 {
            p.preauth.update(cx.msg());
        }
        let step = p.ntlm.step(req.security_buffer, server.as_ref());
        (step, *p.preauth.value())
    };
    match step {
        AuthStep::Continue(token) => {
            encode_response(out, 0, &token);
            let mut reply = Reply::new(NtStatus::MORE_PROCESSING_REQUIRED);
            if dialect == dialect::SMB311 {
                reply.preauth = Some(PreauthTarget::Session(session.clone()));
            }
            Ok(reply)
        }
        AuthStep::Done { output, identity, session_key } => {
            let user = match identity {
                Identity::User { name, .. } => User::Named(name),
                Identity::Anonymous => User::Anonymous,
            };
            let result = finish(cx, &session, user, session_key, &preauth, req.security_mode, &output, out);
            if result.is_err() {
                drop_session(cx, &session).await;
            } else if !reauth {
                end_previous_session(cx, &session, req.previous_session_id).await;
            }
            result
        }
        AuthStep::Failed(AuthError::UnknownUser { name, .. }) if server.guest_enabled() => {
            tracing::info!(conn = conn.id, peer = %conn.peer, user = %name, "unknown user mapped to guest");
            let result = finish(cx, &session, User::Guest, [0; 16], &preauth, req.security_mode, &[], out);
            if result.is_err() {
                drop_session(cx, &session).await;
            }
            result
        }
        AuthStep::Failed(e) => {
            tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "logon failure");
            // A failed re-authentication ends the session too (MS-SMB2 3.3.5.5.3): its opens
            // must not outlive proof that the client still holds the credentials.
            *lock(&session.pending) = None;
            drop_session(cx, &session).await;
            let delay = server.record_failure(conn.peer.ip());
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            // A token that cannot be parsed is a bad request rather than bad credentials
            // (Windows and Samba answer STATUS_INVALID_PARAMETER, e.g. Samba bug 14932).
            Err(if matches!(e, AuthError::Malformed(_)) { NtStatus::INVALID_PARAMETER } else { NtStatus::LOGON_FAILURE })
        }
    }
}

/// The session a (non-binding) SESSION_SETUP works on: the session being re-authenticated
/// on one of its channels, the first authentication still in progress, or a new one.
fn session_for(cx: &Ctx<'_>) -> Result<Arc<Session>, NtStatus> {
    let conn = cx.conn;
    let server = &conn.server;
    let session = match cx.session.clone() {
        Some(s) if cx.is_channel => {
            // Re-authentication, on any channel. A session that signs must sign it too.
            if !cx.verified && s.security.get().is_some_and(|x| x.signing_required && x.signer.is_some()) {
                tracing::info!(conn = conn.id, "unsigned re-authentication of a signing session refused");
                return Err(NtStatus::ACCESS_DENIED);
            }
            let mut p = lock(&s.pending);
            if p.is_none() {
                // Re-authentication of a valid session: a fresh exchange, keys unchanged.
                *p = Some(Pending { ntlm: new_ntlm(cx), preauth: lock(&conn.preauth).clone() });
            }
            drop(p);
            s
        }
        // The first authentication, still in progress on the connection that started it.
        Some(s) if s.conn_id == conn.id && !s.is_valid() => s,
        Some(_) => return Err(NtStatus::USER_SESSION_DELETED),
        None if cx.hdr.session_id.0 != 0 => return Err(NtStatus::USER_SESSION_DELETED),
        None => {
            if lock(&conn.sessions).len() >= MAX_SESSIONS_PER_CONNECTION {
                server.admission.hit(braid_admission::Limit::SessionsPerConnection, conn.peer.ip());
                return Err(NtStatus::INSUFFICIENT_RESOURCES);
            }
            let id = server.new_session_id();
            let pending = Pending { ntlm: new_ntlm(cx), preauth: lock(&conn.preauth).clone() };
            let s = Arc::new(Session::new(id, conn, pending));
            server.sessions.insert(id, s.clone());
            lock(&conn.sessions).push(id);
            s
        }
    };
    Ok(session)
}

/// Ends a session whose setup or re-authentication failed (the caller answers the error).
async fn drop_session(cx: &Ctx<'_>, session: &Arc<Session>) {
    crate::session::end_session(&cx.conn.server, session).await;
    lock(&cx.conn.sessions).retain(|s| *s != session.id);
}

/// A client reconnecting after a lost connection names its old session in PreviousSessionId;
/// once the new session is authenticated as the same user, the old one ends and its opens
/// close, but for durable opens, which wait disconnected for a reconnect (MS-SMB2 3.3.5.5.3).
/// Guest and anonymous sessions prove no identity, so they cannot end anyone's session.
async fn end_previous_session(cx: &Ctx<'_>, session: &Arc<Session>, previous: u64) {
    if previous == 0 || previous == session.id.0 || !matches!(session.user(), Some(User::Named(_))) {
        return;
    }
    let Some(old) = cx.conn.server.sessions.get(&SessionId(previous)) else { return };
    if old.user() != session.user() {
        tracing::info!(conn = cx.conn.id, "PreviousSessionId names another user's session; ignored");
        return;
    }
    tracing::debug!(conn = cx.conn.id, old = previous, "previous session of a reconnecting client ended");
    crate::session::end_session_keeping_durable(&cx.conn.server, &old).await;
}

fn new_ntlm(cx: &Ctx<'_>) -> NtlmServer {
    let c = &cx.conn.server.config;
    NtlmServer::new(smb_auth::ServerConfig {
        netbios_domain: c.domain.clone(),
        netbios_computer: c.server_name.clone(),
        dns_domain: c.domain.to_lowercase(),
        dns_computer: c.server_name.to_lowercase(),
    })
}

/// Completes authentication: derives keys, fixes the session's user and answers SUCCESS.
#[allow(clippy::too_many_arguments)]
fn finish(
    cx: &mut Ctx<'_>,
    session: &Arc<Session>,
    user: User,
    session_key: [u8; 16],
    preauth: &[u8; 64],
    client_security_mode: u8,
    output: &[u8],
    out: &mut Vec<u8>,
) -> HResult {
    let conn = cx.conn;
    *lock(&session.pending) = None;
    let dialect = conn.dialect();
    let neg = conn.negotiated.get();
    let keyed = matches!(user, User::Named(_));
    if let Some(existing) = session.security.get() {
        // Re-authentication (MS-SMB2 3.3.5.5.3) as the session's user, or as anonymous,
        // which only drops its rights until the user re-authenticates (Windows and Samba
        // allow it: smbtorture's smb2.session.reauth2); another user is refused.
        if existing.user != user && user != User::Anonymous {
            tracing::warn!(conn = conn.id, "re-authentication as another user refused");
            return Err(NtStatus::USER_SESSION_DELETED);
        }
        session.anonymous_reauth.store(existing.user != user, std::sync::atomic::Ordering::Release);
    } else {
        let cipher = neg.and_then(|n| n.cipher).filter(|_| dialect::is_smb3(dialect));
        let keys = keyed.then(|| SessionKeys::derive(dialect, &session_key, (dialect == dialect::SMB311).then_some(preauth), cipher));
        let signer = keys.as_ref().map(|k| {
            let algo = match dialect {
                d if d >= dialect::SMB311 => neg.map_or(SigningAlgorithm::AesCmac, |n| n.signing_algorithm),
                d if d >= dialect::SMB300 => SigningAlgorithm::AesCmac,
                _ => SigningAlgorithm::HmacSha256,
            };
            Arc::new(Signer::new(algo, &k.signing))
        });
        // Guest and anonymous sessions have no key, so they can neither sign nor encrypt.
        let sealers = match (&keys, cipher) {
            (Some(k), Some(c)) => match (Sealer::new(c, &k.encrypt_s2c), Sealer::new(c, &k.decrypt_c2s)) {
                (Ok(e), Ok(d)) => Some((e, d)),
                _ => None,
            },
            _ => None,
        };
        let (encryptor, decryptor) = sealers.map_or((None, None), |(e, d)| (Some(e), Some(d)));
        let config = &conn.server.config;
        let encrypt_data = config.encryption == EncryptionMode::Required && encryptor.is_some();
        if config.encryption == EncryptionMode::Required && encryptor.is_none() && config.reject_unencrypted {
            // MS-SMB2 3.3.5.5: a client that cannot encrypt is refused when the server
            // requires encryption and rejects unencrypted access.
            tracing::warn!(conn = conn.id, peer = %conn.peer, user = ?user, "client cannot encrypt; encryption is required");
            return Err(NtStatus::ACCESS_DENIED);
        }
        let client_requires =
            u16::from(client_security_mode) & SIGNING_REQUIRED != 0 || neg.is_some_and(|n| n.client_security_mode & SIGNING_REQUIRED != 0);
        let signing_required = client_requires || (config.signing_required && signer.is_some());
        let signing_key = keys.as_ref().map(|k| k.signing.clone());
        let _ = session.security.set(SessionSecurity {
            user: user.clone(),
            signer: signer.clone(),
            signing_key,
            signing_required,
            encryptor,
            decryptor,
            encrypt_data,
        });
        // The connection becomes the session's first channel, its key Session.SigningKey.
        channel::attach(conn, session, signer)?;
    }
    conn.server.clear_failures(conn.peer.ip());
    let mut flags = match user {
        User::Guest => SESSION_FLAG_IS_GUEST,
        User::Anonymous => SESSION_FLAG_IS_NULL,
        User::Named(_) => 0,
    };
    if session.security.get().is_some_and(|s| s.encrypt_data) {
        flags |= SESSION_FLAG_ENCRYPT_DATA;
    }
    encode_response(out, flags, output);
    // The final response is signed in 3.x so the client can check the whole exchange.
    tracing::info!(conn = conn.id, peer = %conn.peer, user = ?user, dialect = format!("{dialect:#06x}"), "session established");
    Ok(Reply { force_sign: keyed && dialect::is_smb3(dialect), ..Reply::success() })
}

/// Binds this connection to an existing session as one more channel (MS-SMB2 3.3.5.5.2,
/// 3.3.5.5.3). The binding authenticates on its own (NTLM state and 3.1.1 preauth hash kept
/// per connection); nothing about the session or its other channels changes unless it
/// succeeds, and then only the channel list grows.
/// The checks a binding SESSION_SETUP passes before authenticating (MS-SMB2 3.3.5.5.2):
/// returns the session to bind and its user.
fn binding_allowed(cx: &Ctx<'_>) -> Result<(Arc<Session>, User), NtStatus> {
    let conn = cx.conn;
    let server = &conn.server;
    let Some(neg) = conn.negotiated.get() else { return Err(NtStatus::INVALID_PARAMETER) };
    if cx.hdr.session_id.0 == 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(session) = cx.session.clone() else { return Err(NtStatus::USER_SESSION_DELETED) };
    // Checked in the order Windows answers them (smbtorture smb2.session.bind_negative_*).
    // AES-GMAC signing cannot be mixed with another algorithm across channels.
    let (theirs, ours) = (session.signing_algorithm, neg.signing_algorithm);
    if theirs == SigningAlgorithm::AesGmac && ours != theirs {
        return Err(NtStatus::REQUEST_OUT_OF_SEQUENCE);
    }
    if ours == SigningAlgorithm::AesGmac && ours != theirs {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if !dialect::is_smb3(neg.dialect) || !server.config.multichannel {
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    if cx.is_channel {
        // Already a channel of this session (and the request verified with its key).
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    let Some(user) = session.user().cloned() else {
        // Session.State is InProgress.
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    };
    if !matches!(user, User::Named(_)) {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if !cx.hdr.is_signed() || !cx.verified {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if session.dialect != neg.dialect || session.cipher != neg.cipher {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if session.client_guid != neg.client_guid {
        tracing::info!(conn = conn.id, "binding from another client (ClientGuid) refused");
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    channel::has_room(&session)?;
    Ok((session, user))
}

async fn bind(cx: &mut Ctx<'_>, req: &Req<'_>, out: &mut Vec<u8>) -> HResult {
    let (session, user) = binding_allowed(cx)?;
    let conn = cx.conn;
    let server = &conn.server;
    let Some(neg) = conn.negotiated.get() else { return Err(NtStatus::INVALID_PARAMETER) };
    cx.resp_session_id = Some(session.id);

    let (step, preauth) = {
        let mut bindings = conn.channels.bindings();
        if !bindings.contains_key(&session.id) && bindings.len() >= MAX_BINDINGS_PER_CONNECTION {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        let b = bindings.entry(session.id).or_insert_with(|| Binding { ntlm: new_ntlm(cx), preauth: lock(&conn.preauth).clone() });
        if neg.dialect == dialect::SMB311 {
            b.preauth.update(cx.msg());
        }
        let step = b.ntlm.step(req.security_buffer, server.as_ref());
        (step, *b.preauth.value())
    };
    if !matches!(step, AuthStep::Continue(_)) {
        conn.channels.bindings().remove(&session.id);
    }
    match step {
        AuthStep::Continue(token) => {
            encode_response(out, 0, &token);
            let mut reply = Reply::new(NtStatus::MORE_PROCESSING_REQUIRED);
            if neg.dialect == dialect::SMB311 {
                reply.preauth = Some(PreauthTarget::Binding(session.id));
            }
            Ok(reply)
        }
        AuthStep::Done { output, identity, session_key } => {
            let bound_as = match identity {
                Identity::User { name, .. } => User::Named(name),
                Identity::Anonymous => User::Anonymous,
            };
            if bound_as != user {
                tracing::warn!(conn = conn.id, peer = %conn.peer, "binding as another user refused");
                return Err(NtStatus::ACCESS_DENIED);
            }
            // Channel.SigningKey: from this authentication's key and, in 3.1.1, this
            // channel's preauth hash, for this connection's signing algorithm.
            let keys = SessionKeys::derive(neg.dialect, &session_key, (neg.dialect == dialect::SMB311).then_some(&preauth), neg.cipher);
            let signer = Arc::new(Signer::new(neg.signing_algorithm, &keys.signing));
            channel::attach(conn, &session, Some(signer))?;
            server.clear_failures(conn.peer.ip());
            let flags = if session.security.get().is_some_and(|s| s.encrypt_data) { SESSION_FLAG_ENCRYPT_DATA } else { 0 };
            encode_response(out, flags, &output);
            tracing::info!(conn = conn.id, peer = %conn.peer, session = format!("{:#x}", session.id.0), channels = session.channel_ids().len(), "channel bound");
            Ok(Reply { force_sign: true, ..Reply::success() })
        }
        AuthStep::Failed(AuthError::UnknownUser { .. }) if server.guest_enabled() => {
            // It would be a guest: not the session's user.
            Err(NtStatus::ACCESS_DENIED)
        }
        AuthStep::Failed(e) => {
            tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "binding logon failure");
            let delay = server.record_failure(conn.peer.ip());
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Err(if matches!(e, AuthError::Malformed(_)) { NtStatus::INVALID_PARAMETER } else { NtStatus::LOGON_FAILURE })
        }
    }
}
