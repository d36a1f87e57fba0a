//! The reader side of a TCP connection: accepts frames off the socket (whole, or with a
//! large WRITE's payload left in a pipe) and hands each to the pipeline in its own task.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use smb_wire::frame;
use smb_wire::read_ahead::ReadAhead;
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

use braid_admission::Limit;

use crate::connection::{Connection, Writer, MAX_IN_FLIGHT};
use crate::pipeline;
use crate::server::ServerState;
use crate::splice::{self, Payload, Received};
use crate::sync::lock;
use crate::tcp_ack::LOWAT_MIN;

/// Largest frame before a logon: a SESSION_SETUP carries at most 65,535 bytes of security
/// token (a Kerberos ticket with a large PAC fits), plus its headers.
const PREAUTH_MAX_FRAME: usize = 65 * 1024;

/// Serves one accepted socket until it closes, then releases everything it held (its
/// admission `ticket` last).
pub async fn serve(server: Arc<ServerState>, sock: TcpStream, peer: SocketAddr, ticket: braid_admission::Ticket) {
    let id = server.next_conn.fetch_add(1, Ordering::Relaxed);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
    let (mut rd, wr) = sock.into_split();
    let conn = Arc::new(Connection::new(server.clone(), id, peer, Writer::Tcp(wr), fd));
    let _ = conn.admitted.set(ticket);
    server.connections.insert(id, Arc::downgrade(&conn));
    tracing::debug!(conn = id, %peer, "connected");
    let in_flight = conn.in_flight.clone();
    // Largest frame: a maximal WRITE plus headers, or a compound of small requests.
    let full_cap = (server.config.max_io_size as usize + 64 * 1024).min(frame::MAX_FRAME);
    let logon_by = tokio::time::Instant::now() + server.config.logon_timeout;
    let mut ahead = ReadAhead::default();
    // The stop (`ServerHandle::stop`) waits until every reader has dropped its receiver. It
    // flips the flag before it wakes the connections it finds, and this connection was
    // registered before the flag is read here, so one of the two sees the other.
    let stop = server.stop.subscribe();
    let mut draining = *stop.borrow();
    // Frames numbered by arrival, for the order of breaks and answers (`break_order.rs`).
    let mut seq = 0u64;
    loop {
        if draining {
            break;
        }
        let hdr = match next_header(&conn, &mut rd, &mut ahead, logon_by).await {
            Next::Header(h) => h,
            Next::Drain => {
                draining = true;
                break;
            }
            Next::Closed => break,
        };
        let Some(len) = frame_length(&conn, hdr, full_cap) else { break };
        let read = tokio::select! {
            r = receive(&conn, &mut rd, len, &mut ahead) => r,
            _ = conn.closing.notified() => Err(std::io::ErrorKind::ConnectionAborted.into()),
            _ = evicted(&conn) => Err(std::io::ErrorKind::ConnectionAborted.into()),
        };
        let Ok((buf, payload)) = read else { break };
        conn.bytes_in.fetch_add(4 + len as u64, Ordering::Relaxed);
        let Ok(permit) = in_flight.clone().acquire_owned().await else { break };
        seq += 1;
        if payload.is_none() && crate::break_order::may_break(&buf) {
            conn.break_order.hold(seq);
        }
        let c = conn.clone();
        tokio::spawn(async move {
            pipeline::process_frame(&c, buf, payload, seq).await;
            drop(permit);
        });
        if conn.is_closed() {
            break;
        }
    }
    if draining {
        finish_in_flight(&conn).await;
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
    drop(stop);
}

/// What waiting for the next frame ended with.
enum Next {
    Header([u8; 4]),
    /// The connection closed, was evicted or did not log on in time.
    Closed,
    /// A graceful stop: no new frames.
    Drain,
}

/// Waits for the next frame's transport header (read ahead with what follows it).
async fn next_header(conn: &Connection, rd: &mut OwnedReadHalf, ahead: &mut ReadAhead, logon_by: tokio::time::Instant) -> Next {
    loop {
        if let Some(h) = ahead.take_prefix() {
            return Next::Header(h);
        }
        let read = tokio::select! {
            r = rd.read(ahead.spare()) => r,
            _ = conn.closing.notified() => Ok(0),
            _ = conn.drain.notified() => return Next::Drain,
            _ = evicted(conn) => Ok(0),
            _ = tokio::time::sleep_until(logon_by), if !conn.logged_on.load(Ordering::Acquire) => {
                conn.server.admission.hit(Limit::LogonTimeout, conn.peer.ip());
                Ok(0)
            }
        };
        match read {
            Ok(n) if n > 0 && !conn.is_closed() => ahead.filled(n),
            _ => return Next::Closed,
        }
    }
}

/// The length `hdr` announces, or None (logged) when the connection must end: a malformed
/// header, or a frame larger than allowed (`full_cap`; [`PREAUTH_MAX_FRAME`] before logon).
fn frame_length(conn: &Connection, hdr: [u8; 4], full_cap: usize) -> Option<usize> {
    let logged_on = conn.logged_on.load(Ordering::Acquire);
    match frame::frame_len(hdr, if logged_on { full_cap } else { PREAUTH_MAX_FRAME }) {
        Ok(l) => Some(l),
        Err(e) if !logged_on && frame::frame_len(hdr, full_cap).is_ok() => {
            tracing::debug!(conn = conn.id, peer = %conn.peer, error = %e, "frame too large before logon");
            conn.server.admission.hit(Limit::FrameTooLarge, conn.peer.ip());
            None
        }
        Err(e) => {
            tracing::warn!(conn = conn.id, peer = %conn.peer, error = %e, "bad transport frame; disconnecting");
            None
        }
    }
}

/// Receives the rest of a frame of `len` bytes, which must come within the frame timeout
/// (a peer that sends a large header and then a byte now and then holds nothing for long).
async fn receive(conn: &Connection, rd: &mut OwnedReadHalf, len: usize, ahead: &mut ReadAhead) -> std::io::Result<(Vec<u8>, Option<Payload>)> {
    match tokio::time::timeout(conn.server.config.frame_timeout, read_frame(conn, rd, len, ahead)).await {
        Ok(r) => r,
        Err(_) => {
            conn.server.admission.hit(Limit::FrameTimeout, conn.peer.ip());
            Err(std::io::ErrorKind::TimedOut.into())
        }
    }
}

/// Resolves when the connection's admission was withdrawn to make room for a new one
/// (never for a connection logged on as a named user, nor an in-memory one).
async fn evicted(conn: &Connection) {
    match conn.admitted.get() {
        Some(t) => t.evicted().await,
        None => std::future::pending().await,
    }
}

/// On a graceful stop: waits until the requests this connection is processing have been
/// answered, except those waiting for an event (change notify, blocking locks: the close
/// that follows answers them). The stop closes the connection when its bound is reached.
async fn finish_in_flight(conn: &Connection) {
    while !conn.is_closed() && conn.requests_in_progress() > lock(&conn.pending).len() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
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
