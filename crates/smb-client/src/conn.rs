//! One TCP connection (a channel): transport framing, message ids, credits, signing and
//! sealing of requests, and the reader task that routes responses to the waiting requests
//! by MessageId (MS-SMB2 3.2.4.1, 3.2.5.1).
//!
//! Requests are built in place: a [`Request`] buffer starts with room for the transport
//! header and, when the request will be encrypted, the TRANSFORM_HEADER, so a single
//! request (the common case, and the one carrying large WRITE payloads) is never copied.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::{Bytes, BytesMut};
use smb_crypto::{Sealer, Signer, TRANSFORM_HEADER_LEN, TRANSFORM_PROTOCOL_ID};
use smb_wire::frame::{frame_header, frame_len, MAX_FRAME};
use smb_wire::header::flags;
use smb_wire::read_ahead::ReadAhead;
use smb_wire::{Command, Header, MessageId, NtStatus, SessionId, TreeId, HEADER_LEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::ClientError;

/// Unsolicited messages (oplock/lease breaks) carry this MessageId (MS-SMB2 3.2.5.19).
const UNSOLICITED: u64 = u64::MAX;

/// One request being built: transport header room, optional TRANSFORM_HEADER room, then the
/// SMB2 header (filled in at send time) and the body appended by a `smb_wire` encoder.
pub(crate) struct Request {
    pub command: Command,
    pub buf: Vec<u8>,
    /// Where the SMB2 header starts in `buf`.
    prefix: usize,
    pub tree_id: u32,
    /// Credits this request consumes (MS-SMB2 3.2.4.1.5); at least 1.
    pub charge: u16,
    /// RELATED_OPERATIONS: inherit session, tree and FileId from the previous compound element.
    pub related: bool,
    /// SMB2_FLAGS_REPLAY_OPERATION: this request was sent before, on a connection that was
    /// lost before its answer came (MS-SMB2 3.2.4.1.1; 3.x only).
    pub replay: bool,
}

impl Request {
    /// Starts a request; `encrypted` reserves room for the TRANSFORM_HEADER.
    pub fn new(command: Command, tree_id: u32, encrypted: bool) -> Request {
        Request::with_body_room(command, tree_id, encrypted, 128)
    }

    /// [`Request::new`] for a body of about `body` bytes (a WRITE's payload), in a reused
    /// buffer when it is large.
    pub fn with_body_room(command: Command, tree_id: u32, encrypted: bool, body: usize) -> Request {
        let prefix = 4 + if encrypted { TRANSFORM_HEADER_LEN } else { 0 };
        let mut buf = crate::buffers::empty(prefix + HEADER_LEN + body);
        buf.resize(prefix + HEADER_LEN, 0);
        Request { command, buf, prefix, tree_id, charge: 1, related: false, replay: false }
    }

    /// Whether this request was built to be sealed.
    pub fn encrypted(&self) -> bool {
        self.prefix > 4
    }

    /// The buffer the body encoder appends to (the header placeholder is already in it).
    pub fn body(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

/// A response message: the decoded header and the message bytes, shared with the other
/// messages of the same frame.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub hdr: Header,
    frame: Bytes,
    range: Range<usize>,
}

impl Response {
    /// The whole message, header first (what the `smb_wire` decoders take).
    pub fn msg(&self) -> &[u8] {
        &self.frame[self.range.clone()]
    }

    /// A zero-copy slice of the message; `r` is relative to the message start.
    pub fn slice(&self, r: Range<usize>) -> Bytes {
        self.frame.slice(self.range.start + r.start..self.range.start + r.end)
    }

    pub fn status(&self) -> NtStatus {
        self.hdr.nt_status()
    }

    /// Ok unless the status is an error (warnings such as BUFFER_OVERFLOW pass).
    pub fn check(self, command: &'static str) -> Result<Response, ClientError> {
        let status = self.status();
        if status.0 >> 30 == 3 {
            return Err(ClientError::Status { command, status });
        }
        Ok(self)
    }
}

/// The security state of this channel once a session is set up.
#[derive(Debug)]
pub(crate) struct Security {
    pub session_id: u64,
    /// Channel.SigningKey (or Session.SigningKey); None for guest/anonymous sessions.
    pub signer: Option<Signer>,
    /// Client-to-server key; requests are sealed with it when encryption is on.
    pub encryptor: Option<Arc<Sealer>>,
    /// Server-to-client key.
    pub decryptor: Option<Arc<Sealer>>,
    /// Unsigned (and unencrypted) final responses are refused (MS-SMB2 3.2.5.1.3).
    pub require_signed: bool,
}

/// How one send treats security.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SendOpts {
    /// Seal the frame with the session's encryptor (the request must have been built with
    /// `encrypted = true`).
    pub encrypt: bool,
    /// Sign each message with the channel signer (ignored when encrypting).
    pub sign: bool,
    /// Check response signatures in the reader (false for NEGOTIATE and SESSION_SETUP,
    /// whose final response the caller verifies with the new key).
    pub verify: bool,
    /// Keep a copy of each message as sent (the 3.1.1 preauth hash needs it).
    pub capture: bool,
    /// SessionId to put in the headers; None = the channel's session.
    pub session_id: Option<u64>,
}

type Reply = Result<Response, ClientError>;

struct Pending {
    tx: oneshot::Sender<Reply>,
    charge: u16,
    verify: bool,
}

struct State {
    next_id: u64,
    pending: HashMap<u64, Pending>,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Credits granted by the server and not yet used (MS-SMB2 3.2.4.1.5 / 3.2.5.1.4).
    credits: Semaphore,
    /// Credits charged by requests still waiting for their final response.
    inflight: AtomicUsize,
    credits_target: usize,
    security: RwLock<Option<Arc<Security>>>,
    /// Largest frame accepted from the server; raised after NEGOTIATE.
    frame_cap: AtomicUsize,
    /// LARGE_MTU negotiated: CreditCharge is meaningful.
    large_mtu: AtomicBool,
}

/// What the writer task sends: a whole frame, a frame's head followed by a payload that
/// is written from the caller's buffer (a plain WRITE's data, never copied into the frame),
/// or a whole frame in the caller's buffer (see [`FRAMED_ROOM`]).
enum Outgoing {
    Frame(Vec<u8>),
    Split(Vec<u8>, Bytes),
    Shared(Bytes),
}

/// Bytes a caller-built WRITE frame keeps before its payload: transport header, SMB2 header
/// and the WRITE request's fixed part, filled in at send time (`Conn::call_framed`).
pub const FRAMED_ROOM: usize = 4 + HEADER_LEN + 48;

/// A WRITE payload that is not copied into the request.
enum Tail<'a> {
    /// Written after the request (plain requests only).
    After(Bytes),
    /// The whole frame: the request's head goes into the room before the payload, and a
    /// signature is computed in place.
    Framed(BytesMut),
    /// Encrypted from the caller's bytes into the frame in the sealing pass itself (sealed
    /// requests only): the payload is read once, never copied into the request first.
    Sealed(&'a [u8]),
}

impl Tail<'_> {
    fn len(&self) -> usize {
        match self {
            Tail::After(b) => b.len(),
            Tail::Framed(b) => b.len().saturating_sub(FRAMED_ROOM),
            Tail::Sealed(b) => b.len(),
        }
    }
}

/// One connection to a server. Dropping it stops its tasks and closes the socket.
pub(crate) struct Conn {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Outgoing>,
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
    peer: Option<std::net::SocketAddr>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}

impl Conn {
    /// Starts the reader and writer tasks on a connected socket. The client begins with
    /// one credit, enough for NEGOTIATE (MS-SMB2 3.2.4.2.1).
    pub fn start(stream: TcpStream, credits_target: u16) -> Conn {
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr().ok();
        let (rd, wr) = stream.into_split();
        let shared = Arc::new(Shared {
            state: Mutex::new(State { next_id: 0, pending: HashMap::new(), closed: false }),
            credits: Semaphore::new(1),
            inflight: AtomicUsize::new(0),
            credits_target: usize::from(credits_target.max(1)),
            security: RwLock::new(None),
            frame_cap: AtomicUsize::new(1 << 20),
            large_mtu: AtomicBool::new(false),
        });
        // Unbounded, but every queued frame holds credits the server granted, so the queue
        // is bounded by credits x frame size.
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(writer_loop(shared.clone(), wr, rx));
        let reader = tokio::spawn(reader_loop(shared.clone(), rd));
        Conn { shared, tx, reader, writer, peer }
    }

    /// Test hook: drops the socket at once, as a network failure would; every waiting and
    /// later request fails with [`ClientError::Disconnected`].
    pub fn abort(&self) {
        self.reader.abort();
        self.writer.abort();
        close(&self.shared);
    }

    /// The server's address.
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.peer
    }

    /// Sets what NEGOTIATE decided: LARGE_MTU and the largest frame to accept.
    pub fn set_limits(&self, large_mtu: bool, max_io: u32) {
        self.shared.large_mtu.store(large_mtu, Ordering::Relaxed);
        // Payload + header and a response body + transform header, with slack.
        let cap = (max_io as usize).saturating_add(64 * 1024 + TRANSFORM_HEADER_LEN).min(MAX_FRAME);
        self.shared.frame_cap.store(cap, Ordering::Relaxed);
    }

    pub fn set_security(&self, sec: Option<Arc<Security>>) {
        if let Ok(mut s) = self.shared.security.write() {
            *s = sec;
        }
    }

    pub fn security(&self) -> Option<Arc<Security>> {
        self.shared.security.read().ok().and_then(|s| s.clone())
    }

    /// Sends one request and waits for its final response.
    pub async fn call(&self, req: Request, opts: SendOpts) -> Result<(Response, Vec<u8>), ClientError> {
        let (mut rx, mut sent, _) = self.send(vec![req], opts, None).await?;
        let rx = rx.pop().ok_or(ClientError::Disconnected)?;
        let resp = rx.await.map_err(|_| ClientError::Disconnected)??;
        Ok((resp, sent.pop().unwrap_or_default()))
    }

    /// Sends requests as one compound frame (MS-SMB2 3.2.4.1.4) and waits for all answers.
    pub async fn call_compound(&self, reqs: Vec<Request>, opts: SendOpts) -> Result<Vec<Reply>, ClientError> {
        let (rxs, _, _) = self.send(reqs, opts, None).await?;
        let mut out = Vec::with_capacity(rxs.len());
        for rx in rxs {
            out.push(rx.await.unwrap_or(Err(ClientError::Disconnected)));
        }
        Ok(out)
    }

    /// Sends one request whose last `payload.len()` bytes are `payload`, written to the
    /// socket straight from it: only for requests neither signed nor sealed (both need the
    /// whole message in one buffer).
    pub async fn call_with_payload(&self, req: Request, payload: Bytes, opts: SendOpts) -> Result<Response, ClientError> {
        if opts.sign || opts.encrypt || opts.capture {
            return Err(ClientError::Protocol("a split payload cannot be signed or sealed"));
        }
        let (mut rx, _, _) = self.send(vec![req], opts, Some(Tail::After(payload))).await?;
        let rx = rx.pop().ok_or(ClientError::Disconnected)?;
        rx.await.map_err(|_| ClientError::Disconnected)?
    }

    /// Sends one sealed request whose last `payload.len()` bytes are `payload`, encrypted
    /// straight from it into the frame (see `Sealer::seal_with_tail`).
    pub async fn call_sealed_payload(&self, req: Request, payload: &[u8], opts: SendOpts) -> Result<Response, ClientError> {
        if !opts.encrypt || opts.capture || !req.encrypted() {
            return Err(ClientError::Protocol("a sealed payload needs a sealed request"));
        }
        let (mut rx, _, _) = self.send(vec![req], opts, Some(Tail::Sealed(payload))).await?;
        let rx = rx.pop().ok_or(ClientError::Disconnected)?;
        rx.await.map_err(|_| ClientError::Disconnected)?
    }

    /// Sends one WRITE whose frame the caller built: `frame` holds [`FRAMED_ROOM`] bytes of
    /// room and then the payload; `req` is the request's head (header room and the 48-byte
    /// fixed part), copied into the room. A signature is computed over the frame in place,
    /// so a signed WRITE costs no copy of its payload either. Not for sealed requests, which
    /// would encrypt the caller's payload in place. `frame` is handed back once the writer
    /// has let go of it (else replaced by a copy).
    pub async fn call_framed(&self, req: Request, frame: &mut BytesMut, opts: SendOpts) -> Result<Response, ClientError> {
        if opts.encrypt || opts.capture || req.encrypted() || req.buf.len() != FRAMED_ROOM || frame.len() < FRAMED_ROOM {
            return Err(ClientError::Protocol("a caller-built frame is plain or signed, with exactly its header room"));
        }
        let (mut rx, _, shared) = self.send(vec![req], opts, Some(Tail::Framed(std::mem::take(frame)))).await?;
        let r = match rx.pop() {
            Some(rx) => rx.await.map_err(|_| ClientError::Disconnected).and_then(|r| r),
            None => Err(ClientError::Disconnected),
        };
        if let Some(b) = shared {
            *frame = b.try_into_mut().unwrap_or_else(|b| BytesMut::from(&b[..]));
        }
        r
    }

    /// Queues requests as one frame (with `payload` after the last one); returns a receiver
    /// per request and, with `opts.capture`, each message as sent.
    #[allow(clippy::type_complexity)]
    async fn send(
        &self,
        reqs: Vec<Request>,
        opts: SendOpts,
        payload: Option<Tail<'_>>,
    ) -> Result<(Vec<oneshot::Receiver<Reply>>, Vec<Vec<u8>>, Option<Bytes>), ClientError> {
        if reqs.is_empty() {
            return Ok((Vec::new(), Vec::new(), None));
        }
        let tail = payload.as_ref().map_or(0, Tail::len);
        let framed = matches!(payload, Some(Tail::Framed(_)));
        let sh = &self.shared;
        let total: u32 = reqs.iter().map(|r| u32::from(r.charge.max(1))).sum();
        // Wait for credits first: this is the only await, so from here on the send cannot
        // be cancelled halfway (a MessageId allocated but never sent would stall the
        // server's sequence window).
        let permit = sh.credits.acquire_many(total).await.map_err(|_| ClientError::Disconnected)?;
        let sec = self.security();
        let encrypt = opts.encrypt;
        let sealer =
            if encrypt { Some(sec.as_ref().and_then(|s| s.encryptor.clone()).ok_or(ClientError::Protocol("no encryption key"))?) } else { None };
        let signer = if opts.sign && !encrypt { sec.as_ref().and_then(|s| s.signer.as_ref()) } else { None };
        let session_id = opts.session_id.or(sec.as_ref().map(|s| s.session_id)).unwrap_or(0);

        // Ask for enough credits to reach the target, counting what is in hand and in flight.
        let have = sh.credits.available_permits() + sh.inflight.load(Ordering::Relaxed) + total as usize;
        let extra = sh.credits_target.saturating_sub(have).min(512) as u16;

        let (mut frame, start, parts) = assemble(reqs);
        let (first_id, rxs) = self.register(&parts, opts.verify && !encrypt)?;
        permit.forget();
        sh.inflight.fetch_add(total as usize, Ordering::Relaxed);

        let heads = Heads { first_id, session_id, extra, tail, large_mtu: sh.large_mtu.load(Ordering::Relaxed) };
        // A caller-built frame is signed once its head is in place, below.
        let captured = write_headers(&mut frame, &parts, &heads, signer, !framed, opts.capture);
        let tail_outside = match sealer {
            Some(sealer) => seal_frame(&mut frame, start, &sealer, session_id, &payload, tail)?,
            None if matches!(payload, Some(Tail::Sealed(_))) => {
                return Err(ClientError::Protocol("a sealed payload on a request that is not sealed"))
            }
            None => tail,
        };
        let len = frame.len() - 4 + tail_outside;
        frame[..4].copy_from_slice(&frame_header(len));
        let mut shared = None;
        let out = match payload {
            Some(Tail::After(p)) => Outgoing::Split(frame, p),
            Some(Tail::Framed(mut f)) => {
                // `call_framed` checked that the head is exactly the room.
                f[..FRAMED_ROOM].copy_from_slice(&frame);
                if let Some(s) = signer {
                    s.sign(&mut f[4..]);
                }
                let b = f.freeze();
                shared = Some(b.clone());
                Outgoing::Shared(b)
            }
            Some(Tail::Sealed(_)) | None => Outgoing::Frame(frame),
        };
        if self.tx.send(out).is_err() {
            return Err(ClientError::Disconnected);
        }
        Ok((rxs, captured, shared))
    }

    /// Allocates MessageIds for the messages of one frame and registers a reply slot for
    /// each; returns the first id and the receivers.
    fn register(&self, parts: &[Part], verify: bool) -> Result<(u64, Vec<oneshot::Receiver<Reply>>), ClientError> {
        let mut st = self.shared.state.lock().map_err(|_| ClientError::Disconnected)?;
        if st.closed {
            return Err(ClientError::Disconnected);
        }
        let first_id = st.next_id;
        let mut rxs = Vec::with_capacity(parts.len());
        for p in parts {
            let (tx, rx) = oneshot::channel();
            let id = st.next_id;
            st.pending.insert(id, Pending { tx, charge: p.charge, verify });
            st.next_id += u64::from(p.charge);
            rxs.push(rx);
        }
        Ok((first_id, rxs))
    }
}

/// One message of an outgoing frame: where it starts and what its header says.
struct Part {
    at: usize,
    command: Command,
    tree_id: u32,
    charge: u16,
    related: bool,
    replay: bool,
}

/// Header values shared by the messages of one frame.
struct Heads {
    first_id: u64,
    session_id: u64,
    /// Credits asked for beyond the charge, on the first message.
    extra: u16,
    /// Payload bytes that follow the last message outside `frame`.
    tail: usize,
    large_mtu: bool,
}

/// Builds one frame from the requests: the first request's buffer, then each further
/// message 8-byte aligned (MS-SMB2 3.2.4.1.4). Returns the frame, where its first header
/// starts, and the messages.
fn assemble(reqs: Vec<Request>) -> (Vec<u8>, usize, Vec<Part>) {
    let mut reqs = reqs.into_iter();
    let Some(first) = reqs.next() else { return (Vec::new(), 0, Vec::new()) };
    let start = first.prefix;
    let part = |at, r: &Request| Part { at, command: r.command, tree_id: r.tree_id, charge: r.charge.max(1), related: r.related, replay: r.replay };
    let mut parts = vec![part(start, &first)];
    let mut frame = first.buf;
    for r in reqs {
        while (frame.len() - start) % 8 != 0 {
            frame.push(0);
        }
        let at = frame.len();
        frame.extend_from_slice(&r.buf[r.prefix..]);
        parts.push(part(at, &r));
    }
    (frame, start, parts)
}

/// Writes each message's header (ids, credits, flags, NextCommand), flagged SIGNED when
/// there is a `signer` and signed now when `sign_now`; returns each message as sent when
/// `capture` is on.
fn write_headers(frame: &mut [u8], parts: &[Part], heads: &Heads, signer: Option<&Signer>, sign_now: bool, capture: bool) -> Vec<Vec<u8>> {
    let mut id = heads.first_id;
    let n = parts.len();
    let mut captured = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let end = if i + 1 < n { parts[i + 1].at } else { frame.len() };
        let msg_len = end - p.at + if i + 1 == n { heads.tail } else { 0 };
        let mut fl = 0;
        if p.related && i > 0 {
            fl |= flags::RELATED_OPERATIONS;
        }
        if signer.is_some() {
            fl |= flags::SIGNED;
        }
        if p.replay {
            fl |= flags::REPLAY_OPERATION;
        }
        let hdr = Header {
            // CreditCharge is only meaningful with LARGE_MTU (MS-SMB2 3.2.4.1.5).
            credit_charge: if heads.large_mtu { p.charge } else { 0 },
            status: 0,
            command: p.command as u16,
            credits: p.charge.saturating_add(if i == 0 { heads.extra } else { 0 }),
            flags: fl,
            next_command: if i + 1 < n { msg_len as u32 } else { 0 },
            message_id: MessageId(id),
            async_id: 0,
            tree_id: TreeId(p.tree_id),
            session_id: SessionId(heads.session_id),
            signature: [0; 16],
        };
        id += u64::from(p.charge);
        let mut h = Vec::with_capacity(HEADER_LEN);
        hdr.encode(&mut h);
        frame[p.at..p.at + HEADER_LEN].copy_from_slice(&h);
        if let (Some(s), true) = (signer, sign_now) {
            s.sign(&mut frame[p.at..end]);
        }
        if capture {
            captured.push(frame[p.at..end].to_vec());
        }
    }
    captured
}

/// Encrypts the frame (a sealed payload from the caller's bytes in the same pass); returns
/// the payload bytes still to be written after the frame.
fn seal_frame(
    frame: &mut Vec<u8>,
    start: usize,
    sealer: &Sealer,
    session_id: u64,
    payload: &Option<Tail<'_>>,
    tail: usize,
) -> Result<usize, ClientError> {
    if start != 4 + TRANSFORM_HEADER_LEN {
        return Err(ClientError::Protocol("request not built for encryption"));
    }
    if let Some(Tail::Sealed(p)) = payload {
        // The head moves into a frame with room for the ciphertext and the tag's scratch; a
        // pooled buffer, so no page is zeroed or faulted in per request.
        let head_len = frame.len() - start;
        let mut out = crate::buffers::filled(frame.len() + p.len() + 16);
        out[..frame.len()].copy_from_slice(frame);
        let total = sealer.seal_with_tail(session_id, &mut out[4..], head_len, p)?;
        out.truncate(4 + total);
        crate::buffers::give(std::mem::replace(frame, out));
        return Ok(0);
    }
    sealer.seal(session_id, &mut frame[4..])?;
    Ok(tail)
}

async fn writer_loop(shared: Arc<Shared>, mut wr: OwnedWriteHalf, mut rx: mpsc::UnboundedReceiver<Outgoing>) {
    while let Some(out) = rx.recv().await {
        let (frame, r) = match out {
            Outgoing::Frame(frame) => {
                let r = wr.write_all(&frame).await;
                (frame, r)
            }
            Outgoing::Split(head, payload) => {
                let r = write_all_two(&mut wr, &head, &payload).await;
                (head, r)
            }
            Outgoing::Shared(frame) => {
                let r = wr.write_all(&frame).await;
                // Hand the buffer back to `call_framed` before the answer can arrive.
                drop(frame);
                (Vec::new(), r)
            }
        };
        if let Err(e) = r {
            tracing::debug!(error = %e, "smb-client: write failed");
            close(&shared);
            return;
        }
        crate::buffers::give(frame);
    }
    let _ = wr.shutdown().await;
}

/// Writes `a` then `b` with vectored writes (one segment for a small head and its payload).
async fn write_all_two(wr: &mut OwnedWriteHalf, a: &[u8], b: &[u8]) -> std::io::Result<()> {
    let mut done = 0;
    let total = a.len() + b.len();
    while done < total {
        let n = if done < a.len() {
            wr.write_vectored(&[std::io::IoSlice::new(&a[done..]), std::io::IoSlice::new(b)]).await?
        } else {
            wr.write(&b[done - a.len()..]).await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

async fn reader_loop(shared: Arc<Shared>, mut rd: OwnedReadHalf) {
    // Small responses arrive with their length prefix in one receive (see `ReadAhead`).
    let mut ahead = ReadAhead::default();
    'frames: loop {
        let th = loop {
            if let Some(th) = ahead.take_prefix() {
                break th;
            }
            match rd.read(ahead.spare()).await {
                Ok(n) if n > 0 => ahead.filled(n),
                _ => break 'frames,
            }
        };
        let Ok(len) = frame_len(th, shared.frame_cap.load(Ordering::Relaxed)) else {
            tracing::debug!("smb-client: bad or oversized frame from server");
            break;
        };
        let mut frame = crate::buffers::filled(len);
        let pre = ahead.take_frame(len);
        frame[..pre.len()].copy_from_slice(pre);
        let have = pre.len();
        if have < len && rd.read_exact(&mut frame[have..]).await.is_err() {
            break;
        }
        if let Err(why) = process_frame(&shared, frame) {
            tracing::debug!(why, "smb-client: dropping connection");
            break;
        }
    }
    close(&shared);
}

/// Marks the connection closed and fails every waiting request.
fn close(shared: &Shared) {
    let pending: Vec<Pending> = match shared.state.lock() {
        Ok(mut st) => {
            st.closed = true;
            st.pending.drain().map(|(_, p)| p).collect()
        }
        Err(_) => Vec::new(),
    };
    for p in pending {
        let _ = p.tx.send(Err(ClientError::Disconnected));
    }
    shared.credits.close();
}

/// Decrypts, splits, verifies and dispatches one received frame. An error drops the
/// connection (MS-SMB2 3.2.5.1.1: undecryptable or malformed frames).
fn process_frame(shared: &Shared, mut frame: Vec<u8>) -> Result<(), &'static str> {
    let sec = shared.security.read().ok().and_then(|s| s.clone());
    let mut start = 0;
    let encrypted = frame.len() >= 4 && frame[..4] == TRANSFORM_PROTOCOL_ID;
    if encrypted {
        let dec = sec.as_ref().and_then(|s| s.decryptor.as_ref()).ok_or("encrypted frame without a session key")?;
        let range = dec.open(&mut frame).map_err(|_| "decryption failed")?;
        start = range.start;
    }
    // Split the compound chain (MS-SMB2 3.2.5.1.8 ... each element is its own response).
    let mut msgs = Vec::new();
    let mut pos = start;
    loop {
        let hdr = Header::decode(frame.get(pos..).ok_or("truncated")?).map_err(|_| "malformed header")?;
        if !hdr.is_response() {
            return Err("request from server");
        }
        let next = hdr.next_command as usize;
        let end = if next == 0 {
            frame.len()
        } else {
            if next < HEADER_LEN || next % 8 != 0 {
                return Err("bad NextCommand");
            }
            pos.checked_add(next).filter(|e| *e <= frame.len()).ok_or("NextCommand past frame")?
        };
        msgs.push((hdr, pos..end));
        if next == 0 {
            break;
        }
        pos = end;
        if msgs.len() > 64 {
            return Err("compound too long");
        }
    }
    // Verify signatures in place before the bytes are shared (MS-SMB2 3.2.5.1.3).
    let mut errors: Vec<Option<ClientError>> = Vec::with_capacity(msgs.len());
    for (hdr, range) in &msgs {
        let verify = match shared.state.lock() {
            Ok(st) => st.pending.get(&hdr.message_id.0).is_some_and(|p| p.verify),
            Err(_) => false,
        };
        let interim = hdr.nt_status() == NtStatus::PENDING && hdr.is_async();
        // A server that no longer has the session cannot sign this answer, whatever its
        // SIGNED flag says; it ends the session either way.
        let gone = hdr.nt_status() == NtStatus::USER_SESSION_DELETED;
        let mut err = None;
        if verify && !encrypted && !interim && !gone {
            match sec.as_ref() {
                Some(s) if hdr.is_signed() => {
                    if let Some(signer) = &s.signer {
                        if !signer.verify(&mut frame[range.clone()]) {
                            err = Some(ClientError::Protocol("response signature does not verify"));
                        }
                    }
                }
                // A LOGOFF response ends the session, so it protects nothing; some servers
                // (Braid today) send it unsigned.
                Some(s) if s.require_signed && s.signer.is_some() && hdr.command != Command::Logoff as u16 => {
                    tracing::debug!(command = hdr.command, status = ?hdr.nt_status(), "smb-client: unsigned response");
                    err = Some(ClientError::Protocol("unsigned response on a signed session"));
                }
                _ => {}
            }
        }
        errors.push(err);
    }
    let frame = crate::buffers::share(frame);
    for ((hdr, range), err) in msgs.into_iter().zip(errors) {
        dispatch(shared, hdr, frame.clone(), range, err);
    }
    Ok(())
}

fn dispatch(shared: &Shared, hdr: Header, frame: Bytes, range: Range<usize>, err: Option<ClientError>) {
    let id = hdr.message_id.0;
    let granted = usize::from(hdr.credits);
    if id == UNSOLICITED {
        // Oplock/lease break notification: we never ask for oplocks, nothing to do.
        shared.credits.add_permits(granted);
        return;
    }
    let interim = hdr.nt_status() == NtStatus::PENDING && hdr.is_async();
    let pending = match shared.state.lock() {
        // An interim response keeps the request waiting for the final async one.
        Ok(mut st) if !interim => st.pending.remove(&id),
        _ => None,
    };
    shared.credits.add_permits(granted);
    let Some(p) = pending else {
        if !interim {
            tracing::debug!(id, "smb-client: response to unknown MessageId");
        }
        return;
    };
    shared.inflight.fetch_sub(usize::from(p.charge), Ordering::Relaxed);
    let reply = match err {
        Some(e) => Err(e),
        None => Ok(Response { hdr, frame, range }),
    };
    let _ = p.tx.send(reply);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads() -> Heads {
        Heads { first_id: 7, session_id: 9, extra: 0, tail: 0, large_mtu: true }
    }

    #[test]
    fn a_replayed_request_carries_the_replay_flag() {
        for replay in [false, true] {
            let mut r = Request::new(Command::Write, 3, false);
            r.replay = replay;
            r.body().extend_from_slice(&[0; 48]);
            let (mut frame, start, parts) = assemble(vec![r]);
            write_headers(&mut frame, &parts, &heads(), None, false, false);
            let hdr = Header::decode(&frame[start..]).unwrap();
            assert_eq!(hdr.flags & flags::REPLAY_OPERATION != 0, replay);
            assert_eq!(hdr.message_id, MessageId(7));
        }
    }
}
