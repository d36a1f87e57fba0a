//! Zero-copy receive of large WRITE payloads. The reader moves a WRITE's payload from the
//! socket into a pipe with splice(2) (the kernel passes page references, no copy), and the
//! WRITE handler moves it from the pipe into the file once every check has passed, so the
//! bytes are copied once (into the page cache) instead of twice. Only plain, unsigned,
//! single-request WRITEs qualify: signing and encryption need the bytes in memory.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use rustix::pipe::{fcntl_setpipe_size, pipe_with, splice, PipeFlags, SpliceFlags};
use smb_wire::HEADER_LEN;

use crate::sync::lock;

/// Payloads below this go through the ordinary buffer: the pipe round trip costs more
/// syscalls than a small copy.
pub const MIN_PAYLOAD: usize = 256 * 1024;

/// Connections whose segments are smaller than this never splice. A pipe keeps one buffer
/// per received segment, and through a veth pair with a per-flow cap (MTU 1500 and 9000)
/// the spliced receive took 2.3-2.5x the server CPU of the buffered one; on loopback
/// (MSS ~64 KiB) it saves a copy (docs/decisions.md).
pub const MIN_MSS: usize = 32 * 1024;

/// Bytes of a WRITE request before its payload: SMB2 header and the 48-byte fixed part.
pub const PREFIX: usize = HEADER_LEN + 48;

/// Idle pipes kept for reuse; more may exist while requests are in flight.
const MAX_IDLE: usize = 64;

/// One pipe: the reader splices into `w`, the handler out of `r`.
#[derive(Debug)]
pub struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
}

/// Pipes for WRITE payloads, shared by all connections. A payload larger than one pipe
/// (unprivileged pipes stop at /proc/sys/fs/pipe-max-size, 1 MiB by default) spans several.
#[derive(Debug)]
pub struct PipePool {
    idle: Mutex<Vec<Pipe>>,
    /// Capacity of every pipe in bytes; 0 when splicing is not possible here.
    capacity: usize,
    /// Largest payload to splice (the server's max I/O size).
    max_payload: usize,
    /// Large frames being received right now, over all connections.
    receiving: std::sync::atomic::AtomicUsize,
    /// The connection that received the last large frame, and when (µs since `epoch`) a
    /// large frame last came from a connection other than the one before it.
    last_conn: std::sync::atomic::AtomicU64,
    switched_at: std::sync::atomic::AtomicU64,
    epoch: std::time::Instant,
}

/// A connection is alone once no other one has received a large frame for this long.
const LONE_AFTER_US: u64 = 20_000;

/// One large frame being received; see [`PipePool::receiving`].
pub struct Receiving<'a> {
    pool: &'a PipePool,
    /// Frames in receipt when this one started, itself included.
    pub concurrent: usize,
}

impl Drop for Receiving<'_> {
    fn drop(&mut self) {
        self.pool.receiving.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl PipePool {
    /// Finds the largest pipe size this process may use, up to what `max_payload` needs;
    /// without pipes (or splice) every WRITE takes the buffered path.
    pub fn new(max_payload: usize) -> Self {
        let mut size = max_payload.next_power_of_two();
        let mut idle = Vec::new();
        let capacity = loop {
            match Self::make(size) {
                Ok(p) => {
                    idle.push(p);
                    break size;
                }
                Err(e) if size > 64 * 1024 && e.kind() == std::io::ErrorKind::PermissionDenied => size /= 2,
                Err(e) => {
                    tracing::info!(error = %e, "no pipes for zero-copy WRITE receive; using buffers");
                    break 0;
                }
            }
        };
        PipePool { idle: Mutex::new(idle), capacity, max_payload, ..Self::disabled() }
    }

    /// Notes a large frame arriving on connection `conn`; true when `conn` has been the only
    /// connection receiving large frames for a while (`LONE_AFTER_US`). Two atomics per
    /// large frame, no lock.
    pub fn only_receiver(&self, conn: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let now = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        if self.last_conn.swap(conn, Relaxed) != conn {
            self.switched_at.store(now, Relaxed);
            return false;
        }
        now.saturating_sub(self.switched_at.load(Relaxed)) >= LONE_AFTER_US
    }

    /// Counts a large frame as being received until the guard drops.
    pub fn receiving(&self) -> Receiving<'_> {
        let n = self.receiving.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        Receiving { pool: self, concurrent: n }
    }

    /// A pool that splices nothing: every WRITE takes the buffered path.
    pub fn disabled() -> Self {
        PipePool {
            idle: Mutex::new(Vec::new()),
            capacity: 0,
            max_payload: 0,
            receiving: Default::default(),
            last_conn: std::sync::atomic::AtomicU64::new(u64::MAX),
            switched_at: Default::default(),
            epoch: std::time::Instant::now(),
        }
    }

    fn make(size: usize) -> std::io::Result<Pipe> {
        let (r, w) = pipe_with(PipeFlags::CLOEXEC)?;
        fcntl_setpipe_size(&w, size)?;
        Ok(Pipe { r, w })
    }

    /// Whether a payload of `len` bytes can be spliced.
    pub fn fits(&self, len: usize) -> bool {
        self.capacity > 0 && (MIN_PAYLOAD..=self.max_payload).contains(&len)
    }

    fn take(&self) -> std::io::Result<Pipe> {
        if let Some(p) = lock(&self.idle).pop() {
            return Ok(p);
        }
        Self::make(self.capacity)
    }

    fn give(&self, p: Pipe) {
        let mut idle = lock(&self.idle);
        if idle.len() < MAX_IDLE {
            idle.push(p);
        }
    }
}

/// A WRITE payload waiting in one or more pipes, in order. Dropping it unused (the request
/// failed a check) discards the bytes with the pipes.
#[derive(Debug)]
pub struct Payload {
    /// Each pipe and the bytes it holds.
    pipes: Vec<(Pipe, usize)>,
    pool: Arc<PipePool>,
}

impl Payload {
    pub fn len(&self) -> usize {
        self.pipes.iter().map(|(_, n)| n).sum()
    }

    /// Drains the pipes in order through `sink(pipe, bytes)`, which must take exactly
    /// `bytes` from `pipe`; returns the total.
    pub fn drain<E>(&mut self, mut sink: impl FnMut(BorrowedFd<'_>, usize) -> Result<usize, E>) -> Result<usize, E> {
        let mut total = 0;
        for (pipe, n) in &mut self.pipes {
            total += sink(pipe.r.as_fd(), *n)?;
            *n = 0;
        }
        Ok(total)
    }

    /// Reads the whole payload into memory (for a handle that cannot splice).
    pub fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        let mut v = vec![0u8; self.len()];
        let mut at = 0;
        self.drain(|fd, n| {
            read_pipe(fd, &mut v[at..at + n])?;
            at += n;
            Ok::<_, std::io::Error>(n)
        })?;
        Ok(v)
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        for (p, n) in self.pipes.drain(..) {
            // A pipe still holding bytes is closed, not reused.
            if n == 0 {
                self.pool.give(p);
            }
        }
    }
}

fn read_pipe(from: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::read(from, &mut buf[done..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Whether the 112 bytes in `prefix` start a WRITE whose payload may bypass user space:
/// a plain SMB2 header (not a transform or compression header), not signed, alone in its
/// frame, the payload right after the fixed part and filling the rest of a frame of
/// `frame_len` bytes.
pub fn is_spliceable(prefix: &[u8; PREFIX], frame_len: usize) -> bool {
    const SIGNED: u32 = 0x0000_0008;
    let u16_at = |o: usize| u16::from_le_bytes([prefix[o], prefix[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes([prefix[o], prefix[o + 1], prefix[o + 2], prefix[o + 3]]);
    prefix[..4] == smb_wire::header::PROTOCOL_ID
        && u16_at(12) == smb_wire::Command::Write as u16
        && u32_at(16) & SIGNED == 0
        && u32_at(20) == 0
        && u16_at(HEADER_LEN) == 49
        && usize::from(u16_at(HEADER_LEN + 2)) == PREFIX
        && u32_at(HEADER_LEN + 4) as usize == frame_len - PREFIX
}

/// Outcome of [`receive`].
pub enum Received {
    /// The whole payload is in pipes.
    Spliced(Payload),
    /// The pipes filled up before the payload ended (many small pages), or no pipe could be
    /// had: these bytes were taken; the rest is still in the socket.
    Partial(Vec<u8>),
}

/// Splices `len` payload bytes from the socket into pooled pipes.
pub async fn receive(pool: &Arc<PipePool>, sock: &tokio::net::TcpStream, len: usize) -> std::io::Result<Received> {
    use tokio::io::Interest;
    // A pipe counts pages, not bytes: small segments can fill one early, so allow a few more
    // pipes than the byte count needs before giving up on splicing this payload.
    let max_pipes = len.div_ceil(pool.capacity) + 2;
    // Out of pipes (or file descriptors): the caller reads the payload into a buffer.
    let Ok(first) = pool.take() else { return Ok(Received::Partial(Vec::new())) };
    let mut payload = Payload { pipes: vec![(first, 0)], pool: pool.clone() };
    let mut got = 0;
    let mut drained = false;
    while got < len {
        {
            // Once the socket ran dry mid-payload, wait for the rest whole rather than per
            // burst: the mark is exactly what is missing, and dropped before the splice
            // (`socket_has_data` must see any byte).
            let rest = len - got;
            let _lowat =
                (drained && rest >= crate::tcp_ack::LOWAT_MIN).then(|| crate::tcp_ack::Lowat::raise(std::os::fd::AsRawFd::as_raw_fd(sock), rest));
            sock.readable().await?;
        }
        let (pipe, held) = payload.pipes.last_mut().expect("at least one pipe");
        let want = (len - got).min(pool.capacity - *held);
        let w = pipe.w.as_fd();
        // EAGAIN means the socket ran dry or the pipe is full. Only the former may clear
        // tokio's readiness: the socket's edge has already fired for the bytes still
        // waiting, so a cleared readiness would sleep until the client sends more, which a
        // client whose window is full only does on its persist timer (200 ms and up).
        let r = sock.try_io(Interest::READABLE, || match splice(sock, None, w, None, want, SpliceFlags::MOVE | SpliceFlags::NONBLOCK) {
            Err(rustix::io::Errno::AGAIN) if socket_has_data(sock)? => Ok(None),
            r => r.map(Some).map_err(std::io::Error::from),
        });
        let full = match r {
            Ok(Some(0)) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(Some(n)) => {
                drained = false;
                *held += n;
                got += n;
                *held == pool.capacity
            }
            Ok(None) => true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                drained = true;
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => false,
            Err(e) => return Err(e),
        };
        if full && got < len {
            match pool.take() {
                Ok(p) if payload.pipes.len() < max_pipes => payload.pipes.push((p, 0)),
                _ => return Ok(Received::Partial(payload.read_all()?)),
            }
        }
    }
    Ok(Received::Spliced(payload))
}

fn socket_has_data(sock: &tokio::net::TcpStream) -> std::io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(sock, PollFlags::IN)];
    Ok(poll(&mut fds, 0).map_err(std::io::Error::from)? > 0 && fds[0].revents().contains(PollFlags::IN))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_prefix(len: u32) -> [u8; PREFIX] {
        let mut p = [0u8; PREFIX];
        p[..4].copy_from_slice(&smb_wire::header::PROTOCOL_ID);
        p[12..14].copy_from_slice(&(smb_wire::Command::Write as u16).to_le_bytes());
        p[HEADER_LEN..HEADER_LEN + 2].copy_from_slice(&49u16.to_le_bytes());
        p[HEADER_LEN + 2..HEADER_LEN + 4].copy_from_slice(&(PREFIX as u16).to_le_bytes());
        p[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&len.to_le_bytes());
        p
    }

    #[test]
    fn only_plain_lone_writes_qualify() {
        let n = 1 << 20;
        let p = write_prefix(n as u32);
        assert!(is_spliceable(&p, PREFIX + n));
        assert!(!is_spliceable(&p, PREFIX + n + 8), "payload must fill the frame");
        let mut signed = p;
        signed[16] = 8;
        assert!(!is_spliceable(&signed, PREFIX + n));
        let mut compound = p;
        compound[20] = 0x80;
        assert!(!is_spliceable(&compound, PREFIX + n));
        let mut read = p;
        read[12] = 8;
        assert!(!is_spliceable(&read, PREFIX + n));
        let mut transform = p;
        transform[0] = 0xFD;
        assert!(!is_spliceable(&transform, PREFIX + n));
        let mut moved = p;
        moved[HEADER_LEN + 2] = 0x78;
        assert!(!is_spliceable(&moved, PREFIX + n));
    }

    /// A pipe that fills before its byte capacity (here: one 4 KiB slot holding a 10-byte
    /// segment) while the socket still holds data must not leave the reader waiting for
    /// bytes the client has already sent.
    #[tokio::test]
    async fn a_full_pipe_does_not_wait_for_more_socket_data() {
        use tokio::io::AsyncWriteExt;
        let pool = Arc::new(PipePool::new(4096));
        if pool.capacity != 4096 {
            return; // no pipes here: nothing to test
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut tx = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (rx, _) = listener.accept().await.unwrap();
        let data: Vec<u8> = (0..4010u32).map(|i| (i * 13) as u8).collect();
        let n = data.len();
        let receiving = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let r = receive(&pool, &rx, n).await;
                (r, rx)
            })
        };
        // The first segment takes the first pipe's only slot; the rest arrives later, in one
        // burst, and nothing follows it.
        tx.write_all(&data[..10]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        tx.write_all(&data[10..]).await.unwrap();
        let (r, _rx) = tokio::time::timeout(std::time::Duration::from_secs(3), receiving)
            .await
            .expect("the reader waited for bytes already in the socket")
            .unwrap();
        let Received::Spliced(mut payload) = r.unwrap() else { panic!("payload not spliced") };
        assert_eq!(payload.read_all().unwrap(), data);
        drop(tx);
    }

    #[test]
    fn payload_round_trip_through_pipes() {
        let pool = Arc::new(PipePool::new(1 << 20));
        if pool.capacity == 0 {
            return; // no pipes here: nothing to test
        }
        let data: Vec<u8> = (0..pool.capacity as u32 + 300_000).map(|i| (i * 7) as u8).collect();
        let mut payload = Payload { pipes: Vec::new(), pool: pool.clone() };
        for chunk in data.chunks(pool.capacity) {
            let p = pool.take().unwrap();
            let mut done = 0;
            while done < chunk.len() {
                done += rustix::io::write(&p.w, &chunk[done..]).unwrap();
            }
            payload.pipes.push((p, chunk.len()));
        }
        assert_eq!(payload.len(), data.len());
        assert_eq!(payload.read_all().unwrap(), data);
        drop(payload);
        assert_eq!(lock(&pool.idle).len(), 2, "drained pipes are reused");
    }
}
