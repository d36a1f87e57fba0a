//! One TCP connection's state and its writer (the reader loop is in `reader.rs`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use smb_crypto::{Cipher, PreauthHash, SigningAlgorithm};
use smb_wire::{frame, SessionId};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore};

use crate::credits::CreditWindow;
use crate::outbox::{FileTail, Outbox};
use crate::server::ServerState;

/// Requests one connection may have in progress at once; the reader stops reading (TCP
/// back-pressure) beyond it. Requests waiting asynchronously for an event are at most
/// [`MAX_ASYNC_PER_CONNECTION`] of them, so 256 places always remain for the requests that
/// end those waits (CLOSE, CANCEL, an unlock): without that room, a client whose waiting
/// requests filled them could never be answered again.
pub(crate) const MAX_IN_FLIGHT: u32 = 256 + MAX_ASYNC_PER_CONNECTION as u32;

/// What NEGOTIATE settled (MS-SMB2 3.3.5.4).
#[derive(Debug)]
pub struct Negotiated {
    pub dialect: u16,
    pub client_guid: [u8; 16],
    pub client_security_mode: u16,
    pub client_capabilities: u32,
    pub signing_algorithm: SigningAlgorithm,
    pub cipher: Option<Cipher>,
    /// What the NEGOTIATE response said, for FSCTL_VALIDATE_NEGOTIATE_INFO.
    pub server_capabilities: u32,
    pub server_security_mode: u16,
}

/// Most requests of one connection that may wait asynchronously at once (CHANGE_NOTIFY,
/// blocking locks, creates waiting on breaks, throttled I/O). Each holds a task and its
/// buffers, and an interim response hands the client its credits back, so credits alone do
/// not bound them. Windows servers use the same figure.
pub const MAX_ASYNC_PER_CONNECTION: usize = 512;

/// What [`Connection::register_pending`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registration {
    Registered,
    /// A CANCEL naming the request came before it: it ends at once.
    CancelledAhead,
    /// The connection holds [`MAX_ASYNC_PER_CONNECTION`] waiting requests already.
    Full,
}

/// A request that went async (STATUS_PENDING) and may be cancelled.
#[derive(Debug, Clone)]
pub struct PendingOp {
    pub async_id: u64,
    pub cancel: Arc<Notify>,
}

/// Where a connection's frames go: its socket, or (pipeline tests) a byte buffer that
/// collects them. A memory connection has no descriptor, so nothing is sent with sendfile or
/// from a mapping ([`Connection::has_socket`]).
#[derive(Debug)]
pub(crate) enum Writer {
    Tcp(OwnedWriteHalf),
    #[cfg_attr(not(test), allow(dead_code))]
    Memory(Vec<u8>),
}

impl Writer {
    /// The socket, for sends that need its descriptor.
    fn socket(&self) -> std::io::Result<&TcpStream> {
        match self {
            Writer::Tcp(w) => Ok(w.as_ref()),
            Writer::Memory(_) => Err(std::io::Error::other("no socket on a memory connection")),
        }
    }
}

impl tokio::io::AsyncWrite for Writer {
    fn poll_write(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &[u8]) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Writer::Tcp(w) => std::pin::Pin::new(w).poll_write(cx, buf),
            Writer::Memory(v) => {
                v.extend_from_slice(buf);
                std::task::Poll::Ready(Ok(buf.len()))
            }
        }
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(w) => std::pin::Pin::new(w).poll_flush(cx),
            Writer::Memory(_) => std::task::Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(w) => std::pin::Pin::new(w).poll_shutdown(cx),
            Writer::Memory(_) => std::task::Poll::Ready(Ok(())),
        }
    }
}

/// State of one connection.
#[derive(Debug)]
pub struct Connection {
    pub id: u64,
    pub peer: SocketAddr,
    pub server: Arc<ServerState>,
    pub(crate) writer: tokio::sync::Mutex<Writer>,
    /// The socket's descriptor, for TCP state queries and shutdown (owned by `writer`).
    pub(crate) fd: std::os::fd::RawFd,
    pub negotiated: OnceLock<Negotiated>,
    pub credits: Mutex<CreditWindow>,
    /// Connection preauth integrity hash (3.1.1): NEGOTIATE request and response.
    pub preauth: Mutex<PreauthHash>,
    pub sessions: Mutex<Vec<SessionId>>,
    pub pending: Mutex<HashMap<u64, PendingOp>>,
    /// MessageIds that a CANCEL named before their request was registered in `pending`
    /// (requests run concurrently: a CANCEL sent right behind its request can overtake it).
    /// The newest few are kept; a request that registers late finds itself here.
    cancelled_ahead: Mutex<std::collections::VecDeque<u64>>,
    /// The latest handles closed here, with the MessageId of their CLOSE: a CHANGE_NOTIFY
    /// sent before a CLOSE but overtaken by it answers NOTIFY_CLEANUP, not FILE_CLOSED.
    recently_closed: Mutex<std::collections::VecDeque<(u64, u64)>>,
    pub(crate) closed: AtomicBool,
    /// Wakes the reader when the connection is closed, so a dropped connection does not
    /// wait for the client's next frame.
    pub(crate) closing: Notify,
    /// Wakes the reader when the server stops gracefully: it takes no new frame, but the
    /// requests it has run to their end (`ServerHandle::stop`). One per connection, so a
    /// reader waiting for data touches nothing shared.
    pub(crate) drain: Notify,
    /// Bytes received and sent on this connection (for `braid status`).
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Sessions this connection is a channel of, with their channel keys (multichannel).
    pub channels: crate::channel::ConnChannels,
    /// smbtorture's FSCTL_SMBTORTURE_FORCE_UNACKED_TIMEOUT was received: nothing sent here
    /// counts as acknowledged by TCP (only with `smbtorture_hooks`).
    pub force_unacked: AtomicBool,
    /// smbtorture's FSCTL_SMBTORTURE_GLOBAL_READ_RESPONSE_BODY_PADDING8 was received: READ
    /// responses on this connection carry 8 bytes of padding before their data (only with
    /// `smbtorture_hooks`; `handlers/read.rs`).
    pub(crate) read_body_padding: AtomicBool,
    /// Permits of requests in progress; the reader waits for one before dispatching a frame.
    pub(crate) in_flight: Arc<Semaphore>,
    /// The peer's segments are large enough for the spliced WRITE receive (`splice::MIN_MSS`).
    pub(crate) large_segments: bool,
    /// Frames that may still send breaks, which answers to later frames wait for.
    pub(crate) break_order: crate::break_order::BreakOrder,
    /// The server capabilities a macOS client negotiated with the `AAPL` create context
    /// (`handlers/create/aapl.rs`); unset for other clients.
    pub(crate) apple: OnceLock<u64>,
    /// Its place among the server's connections (`braid-admission`); unset for in-memory
    /// connections.
    pub(crate) admitted: OnceLock<braid_admission::Ticket>,
    /// A SESSION_SETUP has completed on it: the logon timeout no longer applies.
    pub(crate) logged_on: AtomicBool,
}

impl Connection {
    /// A connection writing to `writer`; `fd` is its socket's descriptor (-1 for none).
    pub(crate) fn new(server: Arc<ServerState>, id: u64, peer: SocketAddr, writer: Writer, fd: std::os::fd::RawFd) -> Connection {
        Connection {
            id,
            peer,
            server,
            writer: tokio::sync::Mutex::new(writer),
            fd,
            large_segments: fd >= 0 && crate::tcp_ack::mss(fd).is_some_and(|m| m >= crate::splice::MIN_MSS),
            negotiated: OnceLock::new(),
            credits: Mutex::new(CreditWindow::default()),
            preauth: Mutex::new(PreauthHash::new()),
            sessions: Mutex::new(Vec::new()),
            pending: Mutex::new(HashMap::new()),
            cancelled_ahead: Mutex::new(std::collections::VecDeque::new()),
            recently_closed: Mutex::new(std::collections::VecDeque::new()),
            closed: AtomicBool::new(false),
            closing: Notify::new(),
            drain: Notify::new(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            channels: Default::default(),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
            force_unacked: AtomicBool::new(false),
            read_body_padding: AtomicBool::new(false),
            break_order: Default::default(),
            apple: OnceLock::new(),
            admitted: OnceLock::new(),
            logged_on: AtomicBool::new(false),
        }
    }

    /// A session was established or bound on this connection; as a named user (not guest
    /// or anonymous) it may no longer be closed to make room for new connections.
    pub(crate) fn logged_on(&self, named: bool) {
        self.logged_on.store(true, Ordering::Release);
        if named {
            if let Some(t) = self.admitted.get() {
                t.authenticated();
            }
        }
    }

    /// Whether frames go to a socket (sendfile and mapped sends need one).
    pub fn has_socket(&self) -> bool {
        self.fd >= 0
    }

    /// The bytes a memory connection has sent so far, taken (pipeline tests, fuzzing).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) async fn take_sent(&self) -> Vec<u8> {
        match &mut *self.writer.lock().await {
            Writer::Memory(v) => std::mem::take(v),
            Writer::Tcp(_) => Vec::new(),
        }
    }

    /// Frames of this connection being processed now (the caller's included).
    pub fn requests_in_progress(&self) -> usize {
        MAX_IN_FLIGHT as usize - self.in_flight.available_permits()
    }

    /// Whether a response is being written to the socket right now.
    pub fn writer_busy(&self) -> bool {
        self.writer.try_lock().is_err()
    }

    pub fn dialect(&self) -> u16 {
        self.negotiated.get().map_or(0, |n| n.dialect)
    }

    /// Sends one frame (transport header included at bytes 0..4, filled in here).
    pub async fn send(&self, mut buf: Vec<u8>) -> std::io::Result<()> {
        let len = buf.len() - 4;
        buf[..4].copy_from_slice(&frame::frame_header(len));
        self.bytes_out.fetch_add(buf.len() as u64, Ordering::Relaxed);
        let r = self.writer.lock().await.write_all(&buf).await;
        self.recycle(buf);
        r
    }

    /// Sends a response followed by file data that goes from the file to the socket with
    /// sendfile, never through user space. The transfer runs on the blocking pool (the file
    /// may need disk reads) while the writer lock keeps the frame contiguous.
    pub async fn send_with_file(&self, mut buf: Vec<u8>, tail: FileTail) -> std::io::Result<()> {
        let len = buf.len() - 4 + tail.len;
        buf[..4].copy_from_slice(&frame::frame_header(len));
        self.bytes_out.fetch_add(4 + len as u64, Ordering::Relaxed);
        let mut w = self.writer.lock().await;
        w.write_all(&buf).await?;
        self.recycle(buf);
        let sock = w.socket()?.as_fd().try_clone_to_owned()?;
        let r = tokio::task::spawn_blocking(move || sendfile_all(&sock, &tail)).await;
        r.map_err(|_| std::io::Error::other("sendfile task failed"))?
    }

    /// Sends a response followed by file bytes written from a mapping of the file (see
    /// `braid_vfs::MappedRange`): the kernel copies them from the page cache into the
    /// socket, the only copy on this side. If the file shrank meanwhile, the rest is read
    /// with `handle` (zeros past the new end) so the frame keeps the length it announced.
    pub async fn send_with_mapped(&self, mut buf: Vec<u8>, data: braid_vfs::MappedRange, handle: &dyn braid_vfs::FileHandle) -> std::io::Result<()> {
        let total = buf.len() + data.len();
        buf[..4].copy_from_slice(&frame::frame_header(total - 4));
        self.bytes_out.fetch_add(total as u64, Ordering::Relaxed);
        let mut w = self.writer.lock().await;
        let mut done = 0;
        let mut r = Ok(());
        while done < total {
            let sock: &TcpStream = match w.socket() {
                Ok(s) => s,
                Err(e) => {
                    r = Err(e);
                    break;
                }
            };
            match sock.try_io(tokio::io::Interest::WRITABLE, || data.write_after(sock.as_fd(), &buf, done)) {
                Ok(0) => {
                    r = Err(std::io::ErrorKind::WriteZero.into());
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Err(e) = sock.writable().await {
                        r = Err(e);
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EFAULT) => {
                    tracing::debug!(conn = self.id, "file shrank while being sent; the rest is read instead");
                    r = finish_after_fault(&mut w, &buf, &data, handle, done).await;
                    break;
                }
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        drop(w);
        self.recycle(buf);
        r
    }

    /// A buffer of at least `len` bytes from the server's pool (see `buffers.rs`).
    pub fn take_buffer(&self, len: usize) -> Vec<u8> {
        self.server.buffers.take(len)
    }

    /// Returns a large buffer to the server's pool.
    pub fn recycle(&self, buf: Vec<u8>) {
        self.server.buffers.give(buf);
    }

    /// Marks the connection for closing: the reader stops at its next frame.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // notify_one keeps a permit if the reader is not waiting yet.
        self.closing.notify_one();
    }

    /// A CANCEL by MessageId found no request `mid` in `pending`: remembered, in case that
    /// request registers later. Call with `pending` locked (the same lock order as
    /// [`Connection::register_pending`]).
    pub(crate) fn cancel_ahead(&self, mid: u64) {
        /// Requests in flight are few; a CANCEL of one that already finished costs a slot.
        const KEPT: usize = 64;
        let mut ahead = crate::sync::lock(&self.cancelled_ahead);
        if ahead.len() >= KEPT {
            ahead.pop_front();
        }
        ahead.push_back(mid);
    }

    /// Registers request `mid` for CANCEL, unless a CANCEL for it came already or the
    /// connection holds [`MAX_ASYNC_PER_CONNECTION`] registered requests.
    pub(crate) fn register_pending(&self, mid: u64, op: PendingOp) -> Registration {
        let mut pending = crate::sync::lock(&self.pending);
        let mut ahead = crate::sync::lock(&self.cancelled_ahead);
        if let Some(i) = ahead.iter().position(|&m| m == mid) {
            ahead.remove(i);
            return Registration::CancelledAhead;
        }
        if pending.len() >= MAX_ASYNC_PER_CONNECTION && !pending.contains_key(&mid) {
            drop((pending, ahead));
            self.server.admission.hit(braid_admission::Limit::AsyncPerConnection, self.peer.ip());
            return Registration::Full;
        }
        pending.insert(mid, op);
        Registration::Registered
    }

    /// A CLOSE (MessageId `mid`) is closing the handle with volatile id `volatile`.
    pub(crate) fn note_closed(&self, volatile: u64, mid: u64) {
        /// Enough for the requests in flight on one connection.
        const KEPT: usize = 64;
        let mut closed = crate::sync::lock(&self.recently_closed);
        if closed.len() >= KEPT {
            closed.pop_front();
        }
        closed.push_back((volatile, mid));
    }

    /// Whether handle `volatile` was closed by a CLOSE sent after request `mid`.
    pub(crate) fn closed_after(&self, volatile: u64, mid: u64) -> bool {
        crate::sync::lock(&self.recently_closed).iter().any(|&(v, m)| v == volatile && m > mid)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closed, or the peer has left (its FIN is in, whether or not the reader saw it).
    pub fn is_ending(&self) -> bool {
        self.is_closed() || (self.fd >= 0 && crate::tcp_ack::peer_finished(self.fd))
    }

    /// Closes the connection at once: the peer sees the end of the stream now, not when
    /// the last task holding the connection lets go (a channel found dead).
    pub fn abort(&self) {
        self.close();
        crate::tcp_ack::shutdown(self.fd);
    }

    /// See [`crate::tcp_ack::sent_mark`]. (`writer` keeps `fd` open while `self` lives.)
    pub fn sent_mark(&self) -> Option<(u64, std::time::Duration)> {
        crate::tcp_ack::sent_mark(self.fd)
    }

    /// Bytes the peer's TCP has acknowledged so far (none once smbtorture asked us to
    /// pretend so).
    pub fn acked_bytes(&self) -> Option<u64> {
        if self.force_unacked.load(Ordering::Relaxed) {
            return Some(0);
        }
        crate::tcp_ack::acked(self.fd)
    }
}

/// Sends what is left of a mapped READ response after the mapping faulted, `done` bytes of
/// head and data being out: the data is read the ordinary way, zeros past the new end of
/// file, as a read racing the truncation could have returned. (Rare. The read does not wait
/// for a disk: memory files are in memory, and a disk file's range was found cached before
/// it was mapped, the part past the new end having no pages to read.)
async fn finish_after_fault(
    w: &mut Writer,
    head: &[u8],
    data: &braid_vfs::MappedRange,
    handle: &dyn braid_vfs::FileHandle,
    done: usize,
) -> std::io::Result<()> {
    w.write_all(&head[done.min(head.len())..]).await?;
    let skip = done.saturating_sub(head.len());
    let mut rest = vec![0u8; data.len() - skip];
    if let Err(e) = handle.read_at(&mut rest, data.offset() + skip as u64) {
        tracing::debug!(error = %e, "re-read after a mapping fault failed; sending zeros");
    }
    w.write_all(&rest).await
}

/// Sends all of `tail` to the (non-blocking) socket, waiting for room with poll. If the file
/// shrank meanwhile, zeros fill the rest so the frame keeps the length already announced.
fn sendfile_all(sock: &std::os::fd::OwnedFd, tail: &FileTail) -> std::io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut off = tail.offset;
    let mut left = tail.len;
    let mut zeros = false;
    while left > 0 {
        let r = if zeros {
            let chunk = [0u8; 4096];
            rustix::io::write(sock, &chunk[..left.min(chunk.len())]).map_err(std::io::Error::from)
        } else {
            tail.handle.fast_paths().map_or_else(|| Err(std::io::ErrorKind::Unsupported.into()), |f| f.send_to(sock.as_fd(), off, left))
        };
        match r {
            Ok(0) if !zeros => zeros = true,
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                off += n as u64;
                left -= n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut fds = [PollFd::new(sock, PollFlags::OUT)];
                // A client that stops reading for a minute is gone.
                if poll(&mut fds, 60_000).map_err(std::io::Error::from)? == 0 {
                    return Err(std::io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Outbox for Connection {
    fn id(&self) -> u64 {
        self.id
    }

    fn peer(&self) -> SocketAddr {
        self.peer
    }

    fn send_frame(&self, frame: Vec<u8>) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + '_>> {
        Box::pin(self.send(frame))
    }

    fn serves(&self, session: SessionId) -> bool {
        !self.is_closed() && self.channels.is_bound(session)
    }

    fn is_alive(&self) -> bool {
        !self.is_closed()
    }

    fn sent_mark(&self) -> Option<(u64, std::time::Duration)> {
        Connection::sent_mark(self)
    }

    fn acked_bytes(&self) -> Option<u64> {
        Connection::acked_bytes(self)
    }

    fn abort(&self) {
        Connection::abort(self)
    }
}
