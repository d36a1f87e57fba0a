//! One TCP connection: the reader loop, the shared writer, and per-connection state.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use smb_crypto::{Cipher, PreauthHash, SigningAlgorithm};
use smb_wire::read_ahead::ReadAhead;
use smb_wire::{frame, SessionId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore};

use crate::credits::CreditWindow;
use crate::pipeline::{self, FileTail};
use crate::server::{lock, ServerState};
use crate::splice::{self, Payload, Received};

/// Requests one connection may have in progress at once; the reader stops reading (TCP
/// back-pressure) beyond it.
const MAX_IN_FLIGHT: u32 = 256;

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

/// A request that went async (STATUS_PENDING) and may be cancelled.
#[derive(Debug, Clone)]
pub struct PendingOp {
    pub async_id: u64,
    pub cancel: Arc<Notify>,
}

/// State of one connection.
#[derive(Debug)]
pub struct Connection {
    pub id: u64,
    pub peer: SocketAddr,
    pub server: Arc<ServerState>,
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    /// The socket's descriptor, for TCP state queries and shutdown (owned by `writer`).
    fd: std::os::fd::RawFd,
    pub negotiated: OnceLock<Negotiated>,
    pub credits: Mutex<CreditWindow>,
    /// Connection preauth integrity hash (3.1.1): NEGOTIATE request and response.
    pub preauth: Mutex<PreauthHash>,
    pub sessions: Mutex<Vec<SessionId>>,
    pub pending: Mutex<HashMap<u64, PendingOp>>,
    closed: AtomicBool,
    /// Wakes the reader when the connection is closed, so a dropped connection does not
    /// wait for the client's next frame.
    closing: Notify,
    /// Bytes received and sent on this connection (for `braid status`).
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Sessions this connection is a channel of, with their channel keys (multichannel).
    pub channels: crate::channel::ConnChannels,
    /// smbtorture's FSCTL_SMBTORTURE_FORCE_UNACKED_TIMEOUT was received: nothing sent here
    /// counts as acknowledged by TCP (only with `smbtorture_hooks`).
    pub force_unacked: AtomicBool,
    /// Permits of requests in progress; the reader waits for one before dispatching a frame.
    in_flight: Arc<Semaphore>,
    /// The peer's segments are large enough for the spliced WRITE receive (`splice::MIN_MSS`).
    large_segments: bool,
}

impl Connection {
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
        let sock = w.as_ref().as_fd().try_clone_to_owned()?;
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
            let sock: &TcpStream = w.as_ref();
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

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
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
    w: &mut OwnedWriteHalf,
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

/// Serves one accepted socket until it closes, then releases everything it held.
pub async fn serve(server: Arc<ServerState>, sock: TcpStream, peer: SocketAddr) {
    let id = server.next_conn.fetch_add(1, Ordering::Relaxed);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
    let (mut rd, wr) = sock.into_split();
    let conn = Arc::new(Connection {
        id,
        peer,
        server: server.clone(),
        writer: tokio::sync::Mutex::new(wr),
        fd,
        large_segments: crate::tcp_ack::mss(fd).is_some_and(|m| m >= splice::MIN_MSS),
        negotiated: OnceLock::new(),
        credits: Mutex::new(CreditWindow::default()),
        preauth: Mutex::new(PreauthHash::new()),
        sessions: Mutex::new(Vec::new()),
        pending: Mutex::new(HashMap::new()),
        closed: AtomicBool::new(false),
        closing: Notify::new(),
        bytes_in: AtomicU64::new(0),
        bytes_out: AtomicU64::new(0),
        channels: Default::default(),
        in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
        force_unacked: AtomicBool::new(false),
    });
    server.connections.insert(id, Arc::downgrade(&conn));
    tracing::debug!(conn = id, %peer, "connected");
    let in_flight = conn.in_flight.clone();
    // Largest frame: a maximal WRITE plus headers, or a compound of small requests.
    let cap = (server.config.max_io_size as usize + 64 * 1024).min(frame::MAX_FRAME);
    let mut ahead = ReadAhead::default();
    'frames: loop {
        let hdr = loop {
            if let Some(h) = ahead.take_prefix() {
                break h;
            }
            let read = tokio::select! {
                r = rd.read(ahead.spare()) => r,
                _ = conn.closing.notified() => Ok(0),
            };
            match read {
                Ok(n) if n > 0 && !conn.is_closed() => ahead.filled(n),
                _ => break 'frames,
            }
        };
        let len = match frame::frame_len(hdr, cap) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(conn = id, %peer, error = %e, "bad transport frame; disconnecting");
                break;
            }
        };
        let read = tokio::select! {
            r = read_frame(&conn, &mut rd, len, &mut ahead) => r,
            _ = conn.closing.notified() => Err(std::io::ErrorKind::ConnectionAborted.into()),
        };
        let Ok((buf, payload)) = read else { break };
        conn.bytes_in.fetch_add(4 + len as u64, Ordering::Relaxed);
        let Ok(permit) = in_flight.clone().acquire_owned().await else { break };
        let c = conn.clone();
        tokio::spawn(async move {
            pipeline::process_frame(&c, buf, payload).await;
            drop(permit);
        });
        if conn.is_closed() {
            break;
        }
    }
    conn.close();
    // Wake blocked requests, then wait until every in-flight request has finished.
    for p in lock(&conn.pending).values() {
        p.cancel.notify_one();
    }
    let _all = in_flight.acquire_many(MAX_IN_FLIGHT).await;
    teardown(&conn).await;
    server.connections.remove(&id);
    tracing::debug!(conn = id, %peer, "disconnected");
}

/// Reads the `len` bytes of one frame, starting with those already read ahead. A large
/// plain WRITE leaves its payload in a pipe (zero-copy receive, see `splice.rs`;
/// `splice_writes = false` turns it off) while other large frames are being received too
/// (`splice_min_concurrent`), on a connection whose segments are large (loopback-like,
/// `splice::MIN_MSS`), unless part of the payload was already read ahead; everything else
/// arrives whole in a pooled buffer.
async fn read_frame(conn: &Connection, rd: &mut OwnedReadHalf, len: usize, ahead: &mut ReadAhead) -> std::io::Result<(Vec<u8>, Option<Payload>)> {
    let pipes = &conn.server.pipes;
    // Deep queues splice too: pipes hold no more than buffers would (requests in flight are
    // capped per connection), and when pipes or descriptors run out the frame is read into a
    // buffer instead.
    let large = conn.large_segments && len >= splice::PREFIX && pipes.fits(len - splice::PREFIX);
    let receiving = large.then(|| pipes.receiving());
    let alone = receiving.as_ref().is_some_and(|r| r.concurrent < conn.server.config.splice_min_concurrent);
    // After a frame that may be spliced, receive only the next one's headers ahead: a large
    // WRITE's payload must still be in the socket when the splice decision is made.
    if len >= splice::PREFIX + splice::MIN_PAYLOAD {
        ahead.limit_next(4 + splice::PREFIX);
    }
    let pre = ahead.take_frame(len);
    if !large || alone || pre.len() > splice::PREFIX {
        let mut buf = conn.take_buffer(len);
        buf.truncate(len);
        buf[..pre.len()].copy_from_slice(pre);
        let have = pre.len();
        if have < len {
            read_all(conn, rd, &mut buf[have..]).await?;
        }
        return Ok((buf, None));
    }
    let mut prefix = [0u8; splice::PREFIX];
    prefix[..pre.len()].copy_from_slice(pre);
    rd.read_exact(&mut prefix[pre.len()..]).await?;
    let mut head = Vec::new();
    let lone = pipes.only_receiver(conn.id);
    if splice::is_spliceable(&prefix, len) && !(lone && overwrites_memory_file(conn, &prefix)) {
        match splice::receive(pipes, rd.as_ref(), len - splice::PREFIX).await? {
            Received::Spliced(payload) => return Ok((prefix.to_vec(), Some(payload))),
            Received::Partial(h) => head = h,
        }
    }
    let mut buf = conn.take_buffer(len);
    buf.truncate(len);
    buf[..splice::PREFIX].copy_from_slice(&prefix);
    let have = splice::PREFIX + head.len();
    buf[splice::PREFIX..have].copy_from_slice(&head);
    read_all(conn, rd, &mut buf[have..]).await?;
    Ok((buf, None))
}

/// Whether a WRITE (its `prefix`) lies inside a memory file's current size: such a WRITE,
/// received into a buffer, is copied into the file's mapping (`LocalHandle::copy_mapped`),
/// which on a lone connection beats splicing it (the hand-off to the pool and the pipe cost
/// more than the second copy saves; decisions.md, "Lone overwrites of memory files").
fn overwrites_memory_file(conn: &Connection, prefix: &[u8; splice::PREFIX]) -> bool {
    let (Ok(hdr), Ok(w)) = (smb_wire::Header::decode(prefix), smb_wire::msg::write::WriteFixed::decode(prefix)) else { return false };
    let Some(open) = conn.server.sessions.get(&hdr.session_id).and_then(|s| s.open(w.file_id.volatile)) else { return false };
    let crate::open::OpenKind::File { handle, is_dir: false, .. } = &open.kind else { return false };
    handle.fast_paths().is_some_and(|f| f.overwrites_in_place(w.offset, w.length as usize))
}

/// Remainders of a frame at least this long are waited for whole (SO_RCVLOWAT).
pub const LOWAT_MIN: usize = 64 << 10;

/// Fills `buf` from the socket. When a large frame has only partly arrived, the socket's
/// low-water mark is raised to what is missing, so the reader wakes once for the rest
/// instead of once per segment burst (a 1 MiB WRITE took ~5 reads and ~5 reactor wake-ups
/// on loopback; Samba's server takes two reads).
async fn read_all(conn: &Connection, rd: &mut OwnedReadHalf, buf: &mut [u8]) -> std::io::Result<()> {
    if buf.len() < LOWAT_MIN {
        rd.read_exact(buf).await?;
        return Ok(());
    }
    let sock: &TcpStream = rd.as_ref();
    let mut got = 0;
    while got < buf.len() {
        match sock.try_read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // The mark is exactly what is missing and only held while waiting: a mark
                // above what the peer will send could leave the reader asleep.
                let rest = buf.len() - got;
                let _lowat = (rest >= LOWAT_MIN).then(|| crate::tcp_ack::Lowat::raise(conn.fd, rest));
                sock.readable().await?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The connection stops being a channel of its sessions; a session whose last channel it
/// was ends, closing its opens (see `channel::connection_lost`).
async fn teardown(conn: &Arc<Connection>) {
    crate::channel::connection_lost(conn).await;
}
