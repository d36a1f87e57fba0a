//! The durable handle contexts of a CREATE (MS-SMB2 3.3.5.9.6, 3.3.5.9.7, 3.3.5.9.10,
//! 3.3.5.9.12): which durability a request asks for, granting it, and reconnecting a
//! disconnected durable open on a new connection. The table of durable opens and what
//! happens when a session ends is `crate::durable`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use smb_wire::msg::create::{action, oplock, CreateRequest, CreateResponse};
use smb_wire::msg::durable::{self as dh, DurableReconnectV2, DurableRequestV2};
use smb_wire::msg::oplock::LeaseContext;
use smb_wire::{FileId, NtStatus};

use crate::durable::{Claim, Grant};
use crate::open::{DirCursor, Open, OpenKind};
use crate::oplocks::{Owner, Reach};
use crate::replay::{Lookup, Reservation};
use crate::request::{Ctx, HResult, Reply};
use crate::session::Session;
use crate::sync::lock;
use crate::tree::Tree;

/// What a CREATE asks of durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    Nothing,
    /// DHnQ (v1) or DH2Q (v2, with its request).
    Durable(Option<DurableRequestV2>),
    /// DHnC (v1: no CreateGuid) or DH2C.
    Reconnect {
        file_id: FileId,
        create_guid: Option<[u8; 16]>,
    },
}

/// Reads the durable contexts and checks their combinations and sizes as Windows and
/// Samba do: two kinds at once or a wrong size is INVALID_PARAMETER; a reconnect carrying
/// other contexts (but a DHnQ beside DHnC, and a lease) is OBJECT_NAME_NOT_FOUND.
pub(super) fn parse(req: &CreateRequest<'_>) -> Result<Ask, NtStatus> {
    let (q1, c1, q2, c2) = (req.context(dh::DHNQ), req.context(dh::DHNC), req.context(dh::DH2Q), req.context(dh::DH2C));
    let both = |a: Option<&[u8]>, b: Option<&[u8]>| a.is_some() && b.is_some();
    if both(c1, c2) || both(c1, q2) || both(c2, q1) || both(q2, c2) || both(q1, q2) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let rqls = usize::from(req.context(b"RqLs").is_some());
    if let Some(d) = c1 {
        let file_id = dh::decode_reconnect_v1(d).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        if req.contexts.len() != 1 + usize::from(q1.is_some()) + rqls {
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        }
        return Ok(Ask::Reconnect { file_id, create_guid: None });
    }
    if let Some(d) = c2 {
        let r = DurableReconnectV2::decode(d).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        if req.contexts.len() != 1 + rqls {
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        }
        return Ok(Ask::Reconnect { file_id: r.file_id, create_guid: Some(r.create_guid) });
    }
    if let Some(d) = q2 {
        return Ok(Ask::Durable(Some(DurableRequestV2::decode(d).map_err(|_| NtStatus::INVALID_PARAMETER)?)));
    }
    if let Some(d) = q1 {
        if d.len() != dh::DHNQ_LEN {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        return Ok(Ask::Durable(None));
    }
    Ok(Ask::Nothing)
}

/// Makes a new open durable when it asked and qualifies (a file with a batch oplock or a
/// lease caching handles; on a continuously available share, a v2 request with the
/// persistent flag from a 3.x client needs neither and is granted persistence). Returns
/// the response context to add, if any.
pub(super) fn grant(
    cx: &Ctx<'_>,
    ask: Ask,
    open: &Open,
    session: &Session,
    (share, create_action): (usize, u32),
) -> Option<(&'static [u8], Vec<u8>)> {
    let Ask::Durable(v2) = ask else { return None };
    let node = open.node()?;
    let persistent = v2.is_some_and(|r| r.flags & dh::FLAG_PERSISTENT != 0) && persistence_offered(cx, open);
    if open.is_dir() || !(persistent || node.oplocks.caches_handle(open.id.volatile)) {
        return None;
    }
    let user = session.user()?.clone();
    // Only a named user can reclaim a persistent open after a restart.
    let persistent = persistent && matches!(user, crate::session::User::Named(_));
    let timeout = v2.map_or(crate::durable::V1_TIMEOUT, |r| crate::durable::v2_timeout(r.timeout));
    let grant =
        Grant { create_guid: v2.map(|r| r.create_guid), timeout, user, share, lease: open.lease, create_action, persistent, app_instance: None };
    cx.conn.server.durable.register(open.id.persistent, grant, session.id);
    node.enable_lock_sequences(open.id.volatile);
    let flags = if persistent { dh::FLAG_PERSISTENT } else { 0 };
    Some(match v2 {
        None => (dh::DHNQ, dh::encode_response_v1()),
        Some(_) => (dh::DH2Q, dh::encode_response_v2(u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX), flags)),
    })
}

/// Whether an open may be persistent (MS-SMB2 3.3.5.9.10): a 3.x connection, a
/// continuously available share, and a handle store to keep it in.
fn persistence_offered(cx: &Ctx<'_>, open: &Open) -> bool {
    smb_wire::dialect::is_smb3(cx.conn.dialect()) && crate::persistent::on_ca_share(open) && cx.conn.server.persistent.enabled()
}

/// Commits a persistent open's record before its CREATE is answered (nothing for other
/// opens). On failure the open is closed and the CREATE fails.
pub(super) async fn persist(cx: &Ctx<'_>, open: &Arc<Open>, session: &Session, share_access: u32) -> Result<(), NtStatus> {
    if !crate::persistent::on_ca_share(open) {
        return Ok(());
    }
    let server = cx.conn.server.clone();
    let Some(grant) = server.durable.grant(open.id.persistent).filter(|g| g.persistent) else { return Ok(()) };
    if let Err(st) = crate::persistent::granted(&server, open, &grant, share_access).await {
        session.remove_open(open.id.volatile);
        crate::open::close_open(&server, open).await;
        return Err(st);
    }
    Ok(())
}

/// A reconnect (DHnC, DH2C): the disconnected open `file_id` comes back to this session
/// and tree with its FileId, position, share mode, locks and oplock or lease, if the
/// same user asks on the same share (and, for v2, with the same CreateGuid; with a lease,
/// the same lease key from the same client and the same name).
pub(super) async fn reconnect(
    cx: &mut Ctx<'_>,
    req: &CreateRequest<'_>,
    (tree, session): (&Arc<Tree>, &Arc<Session>),
    (file_id, create_guid): (FileId, Option<[u8; 16]>),
    out: &mut Vec<u8>,
) -> HResult {
    let open = reclaim(cx, req, (tree, session), (file_id, create_guid)).await?.0;
    let mut ctxs: Vec<(&[u8], Vec<u8>)> = Vec::new();
    if req.context(dh::DHNQ).is_some() {
        ctxs.push((dh::DHNQ, dh::encode_response_v1()));
    }
    answer(out, &open, action::OPENED, ctxs, None).await
}

/// Takes the disconnected open back for this session and tree (see [`reconnect`]).
async fn reclaim(
    cx: &Ctx<'_>,
    req: &CreateRequest<'_>,
    (tree, session): (&Arc<Tree>, &Arc<Session>),
    (file_id, create_guid): (FileId, Option<[u8; 16]>),
) -> Result<(Arc<Open>, Grant), NtStatus> {
    let share = tree.share().ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    // A lease context counts whatever the OplockLevel says (as Samba reads it).
    let lease_req = match req.context(b"RqLs").filter(|_| cx.conn.dialect() >= smb_wire::dialect::SMB210) {
        Some(d) => Some(LeaseContext::decode(d).map_err(|_| NtStatus::INVALID_PARAMETER)?),
        None => None,
    };
    let server = cx.conn.server.clone();
    let claim = Claim {
        persistent: file_id.persistent,
        create_guid,
        user: session.user().cloned(),
        share: share.index,
        lease: lease_req.map(|l| (session.client_guid, l.key)),
        name: req.name.replace('/', "\\").trim_start_matches('\\').to_lowercase(),
    };
    let (old, grant) = server.durable.reconnect(&server, &claim, session.id).await?;
    let OpenKind::File { handle, is_dir, key, node } = &old.kind else { return Err(NtStatus::OBJECT_NAME_NOT_FOUND) };
    let open = Arc::new(Open {
        id: old.id,
        tree: tree.clone(),
        path: Mutex::new(lock(&old.path).clone()),
        kind: OpenKind::File { handle: handle.clone(), is_dir: *is_dir, key: *key, node: node.clone() },
        access: old.access,
        delete_on_close: AtomicBool::new(old.delete_on_close.load(Ordering::Acquire)),
        dir: tokio::sync::Mutex::new(DirCursor::default()),
        position: AtomicU64::new(old.position.load(Ordering::Acquire)),
        mode: AtomicU64::new(old.mode.load(Ordering::Acquire)),
        channel_seq: Default::default(),
        lease: old.lease,
        written: AtomicBool::new(old.written.load(Ordering::Acquire)),
    });
    let owner = Owner { session: session.id, conn: cx.conn.id, encrypt: tree.encrypt };
    node.oplocks.set_reach(open.id.volatile, Reach { owner, file_id: open.id });
    if !session.add_open(open.clone()) {
        // The session ended while the reconnect waited for the old one's teardown: the
        // open waits disconnected again (or closes), as the session's other opens did.
        if !server.durable.disconnect(&server, session, &open) {
            crate::open::close_open(&server, &open).await;
        }
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    tracing::debug!(open = open.id.persistent, "durable open reconnected");
    Ok((open, grant))
}

/// A CREATE with a durable v2 request and its CreateGuid (MS-SMB2 3.3.5.9.10; see
/// `crate::replay`): a replay (SMB2_FLAGS_REPLAY_OPERATION) of a CREATE whose answer the
/// client did not see gets that open again, never a second one; a replay while that CREATE
/// is still pending, FILE_NOT_AVAILABLE; the CreateGuid of an open reused without the
/// flag, DUPLICATE_OBJECTID. A replay naming a disconnected durable open reconnects it.
/// Ok(the reservation a new open goes on with), or Err(the answer).
pub(super) async fn replay(
    cx: &mut Ctx<'_>,
    req: &CreateRequest<'_>,
    ask: Ask,
    (tree, session): (&Arc<Tree>, &Arc<Session>),
    out: &mut Vec<u8>,
) -> Result<Option<Reservation>, HResult> {
    let Ask::Durable(Some(v2)) = ask else { return Ok(None) };
    let replay = cx.hdr.flags & smb_wire::header::flags::REPLAY_OPERATION != 0;
    let server = cx.conn.server.clone();
    let reservation = match server.replay.lookup((session.client_guid, v2.create_guid), session.id, replay) {
        Err(st) => return Err(Err(st)),
        Ok(Lookup::Replay(volatile, action)) => {
            let Some(open) = session.open(volatile) else { return Err(Err(NtStatus::FILE_NOT_AVAILABLE)) };
            return Err(replayed(cx, req, &open, action, out).await);
        }
        Ok(Lookup::Reserved(r)) => r,
    };
    if !replay {
        return Ok(Some(reservation));
    }
    match server.durable.find_by_create_guid(v2.create_guid) {
        Some((persistent, None)) => {
            server.replay.release(reservation);
            let id = FileId { persistent, volatile: persistent };
            Err(match reclaim(cx, req, (tree, session), (id, Some(v2.create_guid))).await {
                Ok((open, grant)) => replayed(cx, req, &open, grant.create_action, out).await,
                Err(st) => Err(st),
            })
        }
        _ => Ok(Some(reservation)),
    }
}

/// The answer to a replayed CREATE (as Samba gives it): a lease in the request must be the
/// open's (else ACCESS_DENIED); the oplock level is the one asked for, the lease state the
/// open's; a durable open is answered durable when the replay asked for a batch oplock or a
/// lease.
async fn replayed(cx: &Ctx<'_>, req: &CreateRequest<'_>, open: &Arc<Open>, action: u32, out: &mut Vec<u8>) -> HResult {
    let lease_req = match req.context(b"RqLs") {
        Some(d) => Some(LeaseContext::decode(d).map_err(|_| NtStatus::INVALID_PARAMETER)?),
        None => None,
    };
    if let Some(l) = lease_req {
        if open.lease.is_none_or(|(_, key)| key != l.key) {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    let level = if lease_req.is_some() { oplock::LEASE } else { req.oplock_level };
    let grant = cx.conn.server.durable.grant(open.id.persistent);
    let mut ctxs: Vec<(&[u8], Vec<u8>)> = Vec::new();
    if let Some(g) = grant.filter(|_| level == oplock::BATCH || level == oplock::LEASE) {
        let ms = u32::try_from(g.timeout.as_millis()).unwrap_or(u32::MAX);
        ctxs.push((dh::DH2Q, dh::encode_response_v2(ms, 0)));
    }
    answer(out, open, action, ctxs, Some(level)).await
}

/// The CREATE response for an open handed back (reconnect, replay): its attributes now,
/// its oplock level or lease as they stand, and `ctxs`.
async fn answer(out: &mut Vec<u8>, open: &Arc<Open>, create_action: u32, mut ctxs: Vec<(&[u8], Vec<u8>)>, level: Option<u8>) -> HResult {
    let (handle, node) = match &open.kind {
        OpenKind::File { handle, node, .. } => (handle.clone(), node.clone()),
        OpenKind::Pipe(_) => return Err(NtStatus::OBJECT_NAME_NOT_FOUND),
    };
    let attrs = super::blocking(move || handle.attrs()).await?;
    let (oplock_level, lease_ctx) = match open.lease {
        Some(id) if level.is_none_or(|l| l == oplock::LEASE) => (oplock::LEASE, node.oplocks.lease_answer(id)),
        _ => (level.unwrap_or_else(|| node.oplocks.level(open.id.volatile)), None),
    };
    if let Some(l) = lease_ctx {
        ctxs.insert(0, (b"RqLs", l.encode()));
    }
    let info = super::file_info(&attrs, open);
    CreateResponse {
        oplock_level,
        flags: 0,
        create_action,
        creation_time: info.creation_time,
        last_access_time: info.last_access_time,
        last_write_time: info.last_write_time,
        change_time: info.change_time,
        allocation_size: info.allocation_size,
        end_of_file: info.end_of_file,
        file_attributes: info.wire_attributes(),
        file_id: open.id,
        contexts: smb_wire::msg::create::encode_contexts(&ctxs),
    }
    .encode(out);
    Ok(Reply { file_id: Some(open.id), ..Reply::success() })
}
