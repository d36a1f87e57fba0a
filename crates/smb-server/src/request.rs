//! What a handler sees of its request ([`Ctx`], [`HResult`]) and the request-level services
//! handlers share: finding the open a request names, ChannelSequence checks, going async
//! (STATUS_PENDING) and sending responses. This module sits between the state modules and
//! the pipeline: handlers and the pipeline depend on it, it depends on neither.

use std::ops::Range;
use std::sync::Arc;

use smb_crypto::Signer;
use smb_wire::header::{flags, offset};
use smb_wire::msg::error::encode_error;
use smb_wire::{FileId, Header, NtStatus, SessionId};

use crate::connection::Connection;
pub use crate::outbox::{FileTail, Tail};
use crate::session::Session;
use crate::storage::storage_status;
use crate::sync::lock;
use crate::transform::{self, TRANSFORM_LEN};
use crate::tree::Tree;

/// Per-request context handed to handlers.
pub struct Ctx<'a> {
    pub conn: &'a Arc<Connection>,
    pub hdr: &'a Header,
    /// The whole frame (shared so WRITE can hand its payload to a blocking thread).
    pub frame: &'a Arc<Vec<u8>>,
    /// This message's bytes within `frame`.
    pub range: Range<usize>,
    /// Where this request's response starts in the compound response buffer.
    pub(crate) start: usize,
    /// Responses to the earlier requests of the compound, not yet sent.
    pub(crate) earlier: Vec<Part>,
    pub session: Option<Arc<Session>>,
    /// This connection is a channel of `session` (multichannel: any channel serves it).
    pub is_channel: bool,
    /// The request was signed and verified, or arrived encrypted.
    pub verified: bool,
    /// The key that verified this request and signs its responses: this channel's
    /// Channel.SigningKey, or Session.SigningKey for a binding SESSION_SETUP.
    pub signer: Option<Arc<Signer>>,
    pub tree: Option<Arc<Tree>>,
    /// FileId produced by the previous request of a related compound.
    pub related_file: Option<FileId>,
    /// Set by SESSION_SETUP to put a new session id in the response header; on the context
    /// rather than in the [`Reply`] because error responses carry it too.
    pub resp_session_id: Option<SessionId>,
    /// The FileId of the open a handler used ([`find_open`]), for related compounds; on the
    /// context because the next related request uses the handle even when this one fails.
    pub file_id_out: Option<FileId>,
    /// Set when the request went async (interim response already sent).
    pub async_id: Option<u64>,
    /// Credits already granted in an interim response.
    pub credits_granted_early: bool,
    /// The request waited for its share's limits (`qos.rs`): its responses grant no more
    /// credits than it charged ([`Ctx::credits_asked`]).
    pub(crate) throttled: bool,
    /// The session whose key decrypted this frame; its responses are encrypted with it.
    pub(crate) encrypted_by: Option<Arc<Session>>,
    /// A WRITE payload received into a pipe instead of the frame (see `splice.rs`).
    pub payload: Option<crate::splice::Payload>,
    /// The frame's arrival number on its connection (`break_order.rs`).
    pub(crate) seq: u64,
}

/// Which preauth integrity hash a response extends.
pub enum PreauthTarget {
    Connection,
    Session(Arc<Session>),
    /// The channel preauth hash of a binding in progress on this connection.
    Binding(SessionId),
}

/// A response in the outgoing buffer: where it starts, the key that signs it, and the
/// preauth hash its final (signed) bytes extend.
pub struct Part {
    pub(crate) start: usize,
    pub(crate) signer: Option<Arc<Signer>>,
    pub(crate) preauth: Option<PreauthTarget>,
}

impl Part {
    pub(crate) fn plain(start: usize) -> Part {
        Part { start, signer: None, preauth: None }
    }
}

impl Ctx<'_> {
    pub fn msg(&self) -> &[u8] {
        &self.frame[self.range.clone()]
    }

    /// Whether this response may carry a [`FileTail`]: alone in its frame (no compound),
    /// neither signed nor encrypted (both need the payload in memory).
    pub fn may_send_tail(&self) -> bool {
        self.conn.has_socket()
            && self.alone_in_frame()
            && self.encrypted_by.is_none()
            && !self.hdr.is_signed()
            && !self.session.as_ref().and_then(|s| s.security.get()).is_some_and(|s| s.signing_required && s.signer.is_some())
    }

    /// Whether this response may carry a [`Tail::Mapped`] that is encrypted straight out of
    /// the mapping when sent: alone in its frame, in an encrypted frame.
    pub fn may_seal_tail(&self) -> bool {
        self.alone_in_frame() && self.encrypted_by.is_some()
    }

    /// The request is its frame's only one (no compound before or after it).
    fn alone_in_frame(&self) -> bool {
        self.earlier.is_empty() && self.range.end == self.frame.len() && !self.hdr.is_related() && self.hdr.next_command == 0
    }

    /// The credits this request's response grants (at most): what the client asked for;
    /// after a wait for the share's limits, no more than the request charged. The client's
    /// window then stops growing while it runs over its limit (credits are granted more
    /// slowly), instead of filling the server with requests that can only wait.
    pub(crate) fn credits_asked(&self) -> u16 {
        match self.throttled {
            true => self.hdr.credits.min(self.hdr.credit_charge.max(1)),
            false => self.hdr.credits,
        }
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

/// A handler's verdict: `Ok(reply)` with the body appended to the response buffer, or
/// `Err(status)` for an error response that the pipeline writes.
pub type HResult = Result<Reply, NtStatus>;

/// What a handler answers besides the body it appended: the status, and the header facts
/// of a response that is not an error. `pipeline::finish_response` applies them.
pub struct Reply {
    pub status: NtStatus,
    /// A new tree id for the response header (TREE_CONNECT).
    pub tree_id: Option<u32>,
    /// The FileId of an open the handler created (CREATE), for related compounds.
    pub file_id: Option<FileId>,
    /// The response must be signed even if the request was not (final SESSION_SETUP).
    pub force_sign: bool,
    /// Hash the final response bytes into this preauth chain (3.1.1 NEGOTIATE and
    /// SESSION_SETUP responses that are not the last).
    pub preauth: Option<PreauthTarget>,
    /// File data that follows the response on the wire, not copied into it (READ).
    pub tail: Option<Tail>,
}

impl Reply {
    /// A response with `status` and no header facts.
    pub fn new(status: NtStatus) -> Reply {
        Reply { status, tree_id: None, file_id: None, force_sign: false, preauth: None, tail: None }
    }

    /// STATUS_SUCCESS with no header facts.
    pub fn success() -> Reply {
        Reply::new(NtStatus::SUCCESS)
    }
}

/// A response buffer: the transport header, room for a TRANSFORM_HEADER when the
/// responses will be encrypted, then the responses themselves.
pub(crate) fn response_buffer(encrypted: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.resize(4 + if encrypted { TRANSFORM_LEN } else { 0 }, 0);
    out
}

/// Signs (or encrypts) and sends the responses in `out` as one compound, leaving `out` and
/// `parts` empty for whatever follows. Nothing is sent when there is no response (a lone
/// CANCEL).
pub(crate) async fn send_responses(
    conn: &Connection,
    out: &mut Vec<u8>,
    parts: &mut Vec<Part>,
    encrypted_by: Option<&Session>,
    mut tail: Option<Tail>,
) {
    let Some(last) = parts.last().map(|p| p.start) else { return };
    // The last response ends the chain, even if a request after it produced none.
    out[last + offset::NEXT_COMMAND..last + offset::NEXT_COMMAND + 4].copy_from_slice(&0u32.to_le_bytes());
    // In a frame of several responses the last is padded to 8 bytes too, as Windows and
    // Samba send it (smbtorture's compound-padding checks a last READ's length); a lone
    // response is not. (A file tail only follows a response alone in its frame.)
    if parts.len() > 1 && tail.is_none() {
        out.resize(out.len() + (8 - (out.len() - last) % 8) % 8, 0);
    }
    // Each element is signed over its padded extent; encryption replaces signing.
    for i in 0..parts.len() {
        let start = parts[i].start;
        let stop = parts.get(i + 1).map_or(out.len(), |p| p.start);
        if let Some(signer) = parts[i].signer.as_ref().filter(|_| encrypted_by.is_none()) {
            add_flags(out, start, flags::SIGNED);
            signer.sign(&mut out[start..stop]);
        }
        // 3.1.1 preauth hashes cover the response as sent (a binding's signed ones too).
        match parts[i].preauth.take() {
            Some(PreauthTarget::Connection) => lock(&conn.preauth).update(&out[start..stop]),
            Some(PreauthTarget::Session(s)) => {
                if let Some(p) = lock(&s.pending).as_mut() {
                    p.preauth.update(&out[start..stop]);
                }
            }
            Some(PreauthTarget::Binding(sid)) => {
                if let Some(b) = conn.channels.bindings().get_mut(&sid) {
                    b.preauth.update(&out[start..stop]);
                }
            }
            None => {}
        }
    }
    parts.clear();
    let mut buf = std::mem::replace(out, response_buffer(encrypted_by.is_some()));
    if let Some(session) = encrypted_by {
        let r = match tail.take() {
            Some(Tail::Mapped(m, h)) => seal_with_mapped(conn, session, &mut buf, &m, &*h),
            Some(Tail::File(_)) => Err("file tail on an encrypted response"),
            None => transform::encrypt(session, &mut buf),
        };
        if let Err(why) = r {
            tracing::warn!(conn = conn.id, why, "cannot encrypt response; disconnecting");
            conn.close();
            return;
        }
    }
    let sent = match tail {
        Some(Tail::File(t)) => conn.send_with_file(buf, t).await,
        Some(Tail::Mapped(m, h)) => conn.send_with_mapped(buf, m, &*h).await,
        None => conn.send(buf).await,
    };
    if let Err(e) = sent {
        tracing::debug!(conn = conn.id, error = %e, "send failed");
        conn.close();
    }
}

/// Encrypts the response in `buf` followed by READ data in a file's mapping, the cipher
/// reading the data in place: one pass over it instead of a pread copy and a pass over the
/// copy. `buf` becomes the finished frame (a pooled buffer). A window that user space may
/// not read (see `braid_vfs::MappedRange::with_bytes`) is read with pread instead.
fn seal_with_mapped(
    conn: &Connection,
    session: &Session,
    buf: &mut Vec<u8>,
    m: &braid_vfs::MappedRange,
    h: &dyn braid_vfs::FileHandle,
) -> Result<(), &'static str> {
    let head_len = buf.len() - 4 - TRANSFORM_LEN;
    let mut sealed = conn.take_buffer(buf.len() + m.len() + 16);
    sealed[..buf.len()].copy_from_slice(buf);
    let n = match m.with_bytes(|data| transform::encrypt_with_tail(session, &mut sealed, head_len, data)) {
        Some(r) => r?,
        None => {
            let at = buf.len();
            let got = h.read_at(&mut sealed[at..at + m.len()], m.offset()).unwrap_or(0);
            // Past a new end of file the frame keeps its announced length, as zeros.
            sealed[at + got..at + m.len()].fill(0);
            sealed.truncate(at + m.len());
            transform::encrypt(session, &mut sealed)?;
            sealed.len()
        }
    };
    sealed.truncate(n);
    let old = std::mem::replace(buf, sealed);
    conn.recycle(old);
    Ok(())
}

/// Appends a response header mirroring `req`.
/// Sets `f` in the Flags of the header at `start`.
pub(crate) fn add_flags(out: &mut [u8], start: usize, f: u32) {
    let at = start + offset::FLAGS..start + offset::FLAGS + 4;
    let old = u32::from_le_bytes(out[at.clone()].try_into().unwrap_or([0; 4]));
    out[at].copy_from_slice(&(old | f).to_le_bytes());
}

pub(crate) fn write_header(out: &mut Vec<u8>, req: &Header, status: NtStatus, session_id: u64) {
    let h = Header {
        credit_charge: req.credit_charge,
        status: status.0,
        command: req.command,
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

pub(crate) fn set_credits(out: &mut [u8], start: usize, credits: u16) {
    out[start + offset::CREDITS..start + offset::CREDITS + 2].copy_from_slice(&credits.to_le_bytes());
}

pub(crate) fn finish_credits(conn: &Connection, out: &mut [u8], start: usize, req: &Header) {
    grant_credits(conn, out, start, req.credits);
}

/// Grants up to `requested` credits in the response at `start`.
pub(crate) fn grant_credits(conn: &Connection, out: &mut [u8], start: usize, requested: u16) {
    let g = lock(&conn.credits).grant(requested);
    set_credits(out, start, g);
}

/// Sends an interim STATUS_PENDING response and switches the request to async (MS-SMB2
/// 3.3.4.2). Credits are granted here; the final response grants none. `out` is the buffer
/// the handler appends to: responses to earlier requests of a compound are sent first, so
/// the client gets them now, in order, rather than when this request completes.
pub async fn go_async(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> u64 {
    if let Some(a) = cx.async_id {
        return a;
    }
    // Breaks are sent before the wait that makes a request async: later answers may go.
    cx.conn.break_order.pass(cx.seq);
    let encrypted_by = cx.encrypted_by.clone();
    if !cx.earlier.is_empty() {
        let this = out.split_off(cx.start);
        let mut earlier = std::mem::replace(out, response_buffer(encrypted_by.is_some()));
        cx.start = out.len();
        out.extend_from_slice(&this);
        send_responses(cx.conn, &mut earlier, &mut cx.earlier, encrypted_by.as_deref(), None).await;
    }
    let aid = cx.conn.server.new_async_id();
    // A request registered for CANCEL gets its AsyncId before the client learns it: a
    // CANCEL by AsyncId may follow the interim response at once.
    if let Some(p) = crate::sync::lock(&cx.conn.pending).get_mut(&cx.hdr.message_id.0) {
        p.async_id = aid;
    }
    let mut interim = response_buffer(encrypted_by.is_some());
    let at = interim.len();
    write_header(&mut interim, cx.hdr, NtStatus::PENDING, cx.session.as_ref().map_or(cx.hdr.session_id.0, |s| s.id.0));
    let f = flags::SERVER_TO_REDIR | flags::ASYNC_COMMAND;
    interim[at + offset::FLAGS..at + offset::FLAGS + 4].copy_from_slice(&f.to_le_bytes());
    interim[at + 32..at + 40].copy_from_slice(&aid.to_le_bytes());
    encode_error(&mut interim);
    grant_credits(cx.conn, &mut interim, at, cx.credits_asked());
    match (&encrypted_by, cx.hdr.is_signed(), cx.signer.as_ref()) {
        (Some(s), _, _) if transform::encrypt(s, &mut interim).is_err() => cx.conn.close(),
        (Some(_), _, _) => {}
        (None, true, Some(signer)) => {
            add_flags(&mut interim, at, flags::SIGNED);
            signer.sign(&mut interim[at..]);
        }
        _ => {}
    }
    let _ = cx.conn.send(interim).await;
    cx.async_id = Some(aid);
    cx.credits_granted_early = true;
    aid
}

/// Finds the open a request names (resolving the related-compound id) and records it for
/// the next related request.
pub fn find_open(cx: &mut Ctx<'_>, id: smb_wire::FileId) -> Result<std::sync::Arc<crate::open::Open>, NtStatus> {
    let id = cx.file_id(id);
    let session = cx.session.as_ref().ok_or(NtStatus::USER_SESSION_DELETED)?;
    let open = session.open(id.volatile).filter(|o| o.id.persistent == id.persistent).ok_or(NtStatus::FILE_CLOSED)?;
    if cx.tree.as_ref().is_some_and(|t| t.id != open.tree.id) {
        return Err(NtStatus::FILE_CLOSED);
    }
    cx.file_id_out = Some(open.id);
    // The client names the FileId, so it saw its CREATE's answer: no replay of that CREATE.
    cx.conn.server.replay.forget_open(open.id.volatile);
    note_channel_sequence(cx, &open);
    Ok(open)
}

/// Every 3.x request naming an open moves Open.ChannelSequence forward when it carries a
/// newer one (MS-SMB2 3.3.5.2.10; Samba does this for every command with a FileId): a READ
/// after a channel failure makes older WRITEs stale. Only the modifying requests (WRITE,
/// SET_INFO, IOCTL) are refused for a stale sequence ([`channel_sequence`]); a replay moves
/// it only when no request of an older sequence is still in progress.
fn note_channel_sequence(cx: &Ctx<'_>, open: &crate::open::Open) {
    if !smb_wire::dialect::is_smb3(cx.conn.dialect()) {
        return;
    }
    let seq = (cx.hdr.status & 0xFFFF) as u16;
    let replay = cx.hdr.flags & smb_wire::header::flags::REPLAY_OPERATION != 0;
    let mut g = crate::sync::lock(&open.channel_seq);
    let newer = seq != g.seq && seq.wrapping_sub(g.seq) <= 0x7FFF;
    if newer && !(replay && g.pre_outstanding > 0) {
        g.pre_outstanding += g.outstanding;
        g.outstanding = 0;
        g.seq = seq;
    }
}

/// Holds an open's outstanding-request count for one request (see [`channel_sequence`]).
pub struct SeqGuard {
    open: std::sync::Arc<crate::open::Open>,
    seq: u16,
}

impl Drop for SeqGuard {
    fn drop(&mut self) {
        let mut g = crate::sync::lock(&self.open.channel_seq);
        if g.seq == self.seq {
            g.outstanding = g.outstanding.saturating_sub(1);
        } else {
            g.pre_outstanding = g.pre_outstanding.saturating_sub(1);
        }
    }
}

/// Verifies a 3.x request's ChannelSequence against the open (MS-SMB2 3.3.5.2.10), for the
/// requests that modify state (WRITE, SET_INFO, IOCTL): after a client moved to a newer
/// sequence (because a channel failed), a request with an older one is stale, and a replay
/// (SMB2_FLAGS_REPLAY_OPERATION) waits until the requests of the older sequence are done, so
/// a replayed write is never overtaken by its stale original. The guard counts the request
/// as outstanding until it completes.
pub fn channel_sequence(cx: &Ctx<'_>, open: &std::sync::Arc<crate::open::Open>) -> Result<Option<SeqGuard>, NtStatus> {
    if !smb_wire::dialect::is_smb3(cx.conn.dialect()) {
        return Ok(None);
    }
    // In 3.x requests the Status field is ChannelSequence (low 16 bits) and Reserved.
    let seq = (cx.hdr.status & 0xFFFF) as u16;
    let replay = cx.hdr.flags & smb_wire::header::flags::REPLAY_OPERATION != 0;
    let mut g = crate::sync::lock(&open.channel_seq);
    if seq != g.seq {
        if seq.wrapping_sub(g.seq) > 0x7FFF {
            tracing::debug!(conn = cx.conn.id, seq, current = g.seq, "stale ChannelSequence");
            return Err(NtStatus::FILE_NOT_AVAILABLE);
        }
        g.pre_outstanding += g.outstanding;
        g.outstanding = 0;
        g.seq = seq;
    }
    if replay && g.pre_outstanding > 0 {
        tracing::debug!(conn = cx.conn.id, seq, "replay while requests of an older ChannelSequence are in progress");
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    g.outstanding += 1;
    Ok(Some(SeqGuard { open: open.clone(), seq }))
}

/// How long storage work may run before its request goes async: past this the client gets
/// STATUS_PENDING (and its credits back) instead of waiting on a silent request.
pub(crate) const ASYNC_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// Answers STATUS_PENDING (MS-SMB2 3.3.4.2) and registers the request so CANCEL and a lost
/// connection can wake it through `cancel` (at once, if a CANCEL by MessageId overtook the
/// request); returns its MessageId, to remove from `Connection::pending` when it completes.
/// A connection holding its maximum of waiting requests gets INSUFFICIENT_RESOURCES instead
/// (MS-SMB2 3.3.4.2 allows it when resources are constrained).
pub async fn go_pending(cx: &mut Ctx<'_>, out: &mut Vec<u8>, cancel: &std::sync::Arc<tokio::sync::Notify>) -> Result<u64, NtStatus> {
    use crate::connection::Registration;
    let mid = cx.hdr.message_id.0;
    // Registered before the interim response goes out (which sets the AsyncId).
    let async_id = cx.async_id.unwrap_or(0);
    match cx.conn.register_pending(mid, crate::connection::PendingOp { async_id, cancel: cancel.clone() }) {
        Registration::Registered => {}
        Registration::CancelledAhead => cancel.notify_one(),
        Registration::Full => return Err(NtStatus::INSUFFICIENT_RESOURCES),
    }
    go_async(cx, out).await;
    Ok(mid)
}

/// Runs blocking work on the blocking pool; if it outlasts [`ASYNC_AFTER`], the request is
/// answered STATUS_PENDING first and completes asynchronously (MS-SMB2 3.3.4.2).
pub async fn blocking_or_pending<T: Send + 'static>(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, NtStatus> {
    // `run_blocking` keeps the share's time limit itself.
    let work = std::pin::pin!(crate::storage::run_blocking(f));
    pending_after(cx, out, work, None).await
}

/// Awaits work already started elsewhere (the blocking pool, a file's write queue); past
/// [`ASYNC_AFTER`] the request is answered STATUS_PENDING first. An error from `work` is
/// its status ([`WorkError`]). With `gate` (the request's share), the wait ends at the
/// share's storage timeout (IO_TIMEOUT; the work goes on without the request).
async fn pending_after<T, E: WorkError>(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    mut work: impl std::future::Future<Output = Result<T, E>> + Unpin,
    gate: Option<std::sync::Arc<crate::storage::StorageGate>>,
) -> Result<T, NtStatus> {
    let deadline = gate.as_ref().map(|g| g.deadline());
    let bounded = async {
        match deadline {
            Some(d) => tokio::time::timeout_at(d, &mut work).await.ok(),
            None => Some((&mut work).await),
        }
    };
    tokio::pin!(bounded);
    let r = tokio::select! {
        r = &mut bounded => r,
        _ = tokio::time::sleep(ASYNC_AFTER) => {
            go_async(cx, out).await;
            bounded.await
        }
    };
    match (r, gate) {
        (Some(r), _) => r.map_err(WorkError::status),
        (None, Some(g)) => Err(crate::storage::stalled_status(g.timed_out())),
        (None, None) => Err(NtStatus::INTERNAL_ERROR),
    }
}

/// How the failure of work awaited by [`pending_after`] becomes a status.
pub(crate) trait WorkError {
    fn status(self) -> NtStatus;
}

/// The blocking pool's own answer (IO_TIMEOUT on a stuck share).
impl WorkError for NtStatus {
    fn status(self) -> NtStatus {
        self
    }
}

/// A write queue that dropped the job without an answer: it died.
impl WorkError for tokio::sync::oneshot::error::RecvError {
    fn status(self) -> NtStatus {
        NtStatus::INTERNAL_ERROR
    }
}

/// [`storage_or_pending`] for a write: `f` runs after the file's earlier writes, on the
/// thread running them (see `write_queue.rs`).
pub async fn write_or_pending<T: Send + 'static>(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    queue: &crate::write_queue::WriteQueue,
    f: impl FnOnce() -> braid_vfs::Result<T> + Send + 'static,
) -> Result<T, NtStatus> {
    pending_after(cx, out, queue.submit(f), crate::storage::current_gate()).await?.map_err(storage_status)
}

/// [`blocking_or_pending`] for storage calls, mapping storage errors to NTSTATUS.
pub async fn storage_or_pending<T: Send + 'static>(
    cx: &mut Ctx<'_>,
    out: &mut Vec<u8>,
    f: impl FnOnce() -> braid_vfs::Result<T> + Send + 'static,
) -> Result<T, NtStatus> {
    blocking_or_pending(cx, out, f).await?.map_err(storage_status)
}
