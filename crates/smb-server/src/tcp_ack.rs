//! Whether the peer's TCP stack has acknowledged what we sent: how a break notification
//! that needs an answer finds out that its channel is dead (MS-SMB2 3.3.4.6/3.3.4.7 let
//! the server use another channel; only the transport can tell it that it should).

//!
//! The one module of the server with `unsafe`: no safe crate wraps `TCP_INFO`'s byte
//! counters or SIOCOUTQ (docs/decisions.md). A bad descriptor only makes a call fail.
#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::time::Duration;

/// Bounds on the retransmission timeout used to pace the checks: the kernel's own value
/// on loopback is ~200 ms; a slow path must not make us wait for minutes.
const MIN_RTO: Duration = Duration::from_millis(200);
const MAX_RTO: Duration = Duration::from_secs(1);
/// A break counts as lost when its bytes are not acknowledged after this many RTOs: by
/// then TCP has retransmitted them several times.
pub const RTOS_BEFORE_LOSS: u32 = 6;

/// Offsets in Linux's `struct tcp_info` (stable ABI, include/uapi/linux/tcp.h).
const TCPI_RTO: usize = 8;
const TCPI_BYTES_ACKED: usize = 120;

/// The byte count at which everything written to `fd` so far is acknowledged, and the
/// connection's retransmission timeout (clamped). None where the kernel cannot say.
pub fn sent_mark(fd: RawFd) -> Option<(u64, Duration)> {
    // Acked first, then the queue: a byte acked in between is then counted once, so the
    // mark can only be low by what was acked meanwhile, never beyond what was sent.
    let (acked, rto) = tcp_info(fd)?;
    let queued = unacked_bytes(fd)?;
    Some((acked + queued, rto))
}

/// Bytes acknowledged so far on `fd` (monotonic).
pub fn acked(fd: RawFd) -> Option<u64> {
    tcp_info(fd).map(|(a, _)| a)
}

fn tcp_info(fd: RawFd) -> Option<(u64, Duration)> {
    let mut buf = [0u8; 256];
    let mut len = std::mem::size_of_val(&buf) as libc::socklen_t;
    // SAFETY: `buf` is writable for `len` bytes and outlives the call; a bad descriptor
    // only makes the call fail.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len) };
    if r != 0 || (len as usize) < TCPI_BYTES_ACKED + 8 {
        return None;
    }
    let rto_us = u32::from_ne_bytes(buf[TCPI_RTO..TCPI_RTO + 4].try_into().ok()?);
    let acked = u64::from_ne_bytes(buf[TCPI_BYTES_ACKED..TCPI_BYTES_ACKED + 8].try_into().ok()?);
    let rto = Duration::from_micros(rto_us.into()).clamp(MIN_RTO, MAX_RTO);
    Some((acked, rto))
}

/// Whether the peer has ended its side of the connection (its FIN or RST has arrived),
/// even if the reader has not reached that end of the stream yet: a reconnecting client
/// has left its old connection, and its reader may still be queued behind other work.
pub fn peer_finished(fd: RawFd) -> bool {
    /// `tcpi_state` values (include/net/tcp_states.h) after the peer's FIN or a reset.
    const TCP_CLOSE: u8 = 7;
    const TCP_CLOSE_WAIT: u8 = 8;
    const TCP_LAST_ACK: u8 = 9;
    let mut buf = [0u8; 8];
    let mut len = std::mem::size_of_val(&buf) as libc::socklen_t;
    // SAFETY: as in `tcp_info`; the kernel copies at most `len` bytes.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len) };
    r == 0 && len >= 1 && matches!(buf[0], TCP_CLOSE | TCP_CLOSE_WAIT | TCP_LAST_ACK)
}

/// Bytes in the socket's send queue not yet acknowledged (SIOCOUTQ).
fn unacked_bytes(fd: RawFd) -> Option<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (= SIOCOUTQ) writes one int through the pointer, which is valid.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut v) };
    if r != 0 || v < 0 {
        return None;
    }
    Some(v as u64)
}

/// Shuts the socket down in both directions without closing the descriptor: the peer
/// sees the end at once, and the reader of the connection wakes with an end of stream.
pub fn shutdown(fd: RawFd) {
    // SAFETY: plain syscall on a live descriptor; errors (already shut down) are harmless.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// A raised SO_RCVLOWAT on a socket, back to 1 byte when dropped (also when the read
/// waiting on it is cancelled).
pub struct Lowat(RawFd);

impl Lowat {
    /// The socket reports itself readable only once `bytes` are waiting (the kernel caps
    /// this at half the largest receive buffer, and still wakes the reader when the receive
    /// window runs low, so a short-sending peer cannot wedge it).
    pub fn raise(fd: RawFd, bytes: usize) -> Lowat {
        set_rcvlowat(fd, bytes);
        Lowat(fd)
    }
}

impl Drop for Lowat {
    fn drop(&mut self) {
        set_rcvlowat(self.0, 1);
    }
}

/// Sets SO_RCVLOWAT. Errors are ignored: without it reads only wake more often.
fn set_rcvlowat(fd: RawFd, bytes: usize) {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX).max(1);
    // SAFETY: one int passed by pointer for the duration of the call.
    unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, std::ptr::from_ref(&v).cast(), std::mem::size_of_val(&v) as libc::socklen_t);
    }
}

/// The connection's maximum segment size (TCP_MAXSEG): about the size of the segments the
/// peer sends on a symmetric path. None where the kernel cannot say.
pub fn mss(fd: RawFd) -> Option<usize> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
    // SAFETY: one int written through a valid pointer, its size in `len`.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, std::ptr::from_mut(&mut v).cast(), &mut len) };
    (r == 0 && v > 0).then_some(v as usize)
}

/// Time after which unacknowledged bytes count as lost.
pub fn loss_timeout(rto: Duration) -> Duration {
    rto * RTOS_BEFORE_LOSS
}

/// Remainders of a frame at least this long are waited for whole (SO_RCVLOWAT).
pub const LOWAT_MIN: usize = 64 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn loopback_segments_are_large_enough_to_splice() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let seg = mss(s.as_raw_fd()).expect("TCP_MAXSEG");
        assert!(seg >= crate::splice::MIN_MSS, "loopback MSS {seg}");
        assert_eq!(mss(-1), None);
    }

    #[test]
    fn marks_advance_when_the_peer_acknowledges() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let before = acked(s.as_raw_fd()).unwrap();
        s.write_all(&[7u8; 10_000]).unwrap();
        let (mark, rto) = sent_mark(s.as_raw_fd()).unwrap();
        assert!(rto >= MIN_RTO && rto <= MAX_RTO);
        assert!(mark <= before + 10_000 && mark >= before);
        let mut got = vec![0u8; 10_000];
        c.read_exact(&mut got).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while acked(s.as_raw_fd()).unwrap() < before + 10_000 {
            assert!(std::time::Instant::now() < deadline, "loopback never acknowledged");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(acked(s.as_raw_fd()).unwrap() >= mark);
    }

    #[test]
    fn a_peers_close_is_seen_before_the_stream_is_read() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert!(!peer_finished(s.as_raw_fd()));
        drop(c);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !peer_finished(s.as_raw_fd()) {
            assert!(std::time::Instant::now() < deadline, "the FIN never showed");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn shutdown_ends_the_peers_stream() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        shutdown(s.as_raw_fd());
        let mut b = [0u8; 1];
        assert_eq!(c.read(&mut b).unwrap(), 0);
    }
}
