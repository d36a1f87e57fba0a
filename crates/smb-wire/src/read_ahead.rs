//! Bytes read from a socket ahead of the frame being parsed (sans-IO: the caller does the
//! receiving into [`ReadAhead::spare`]).
//!
//! One receive picks up a small message's length prefix and body together (and several
//! pipelined messages at once) where reading the 4-byte prefix, then the body, took two
//! receives plus a third that found the socket empty. With an edge-triggered reactor
//! (tokio on epoll), a receive that returns less than it asked for also shows the socket is
//! drained, so the reader goes back to sleep without that third call.

/// Default read-ahead: a few small messages, or a 4 KiB WRITE and its headers.
pub const CAPACITY: usize = 16 * 1024;

#[derive(Debug)]
pub struct ReadAhead {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Bytes the next receive may bring the buffer up to (`limit_next`).
    limit: Option<usize>,
}

impl Default for ReadAhead {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl ReadAhead {
    pub fn with_capacity(cap: usize) -> Self {
        Self { buf: vec![0; cap.max(4)].into_boxed_slice(), start: 0, end: 0, limit: None }
    }

    /// Bytes held and not yet taken.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Where the next receive goes. Meant for when less than a length prefix is held, so
    /// moving what is held to the front copies at most 3 bytes.
    pub fn spare(&mut self) -> &mut [u8] {
        let held = self.len();
        self.buf.copy_within(self.start..self.end, 0);
        self.start = 0;
        self.end = held;
        let stop = match self.limit {
            Some(l) => l.clamp(held + 1, self.buf.len()),
            None => self.buf.len(),
        };
        &mut self.buf[held..stop]
    }

    /// `n` bytes were received into [`Self::spare`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Until the next length prefix is taken, receive no more than `n` bytes in all (e.g.
    /// just the next frame's headers, leaving a large payload in the socket for the caller).
    pub fn limit_next(&mut self, n: usize) {
        self.limit = Some(n);
    }

    /// The next frame's length prefix, once all four bytes are here.
    pub fn take_prefix(&mut self) -> Option<[u8; 4]> {
        if self.len() < 4 {
            return None;
        }
        let p: [u8; 4] = self.buf[self.start..self.start + 4].try_into().ok()?;
        self.start += 4;
        self.limit = None;
        Some(p)
    }

    /// The first bytes of a frame of `frame_len` bytes that are already here (all of it if
    /// it fits); the caller receives the rest itself.
    pub fn take_frame(&mut self, frame_len: usize) -> &[u8] {
        let n = frame_len.min(self.len());
        let s = self.start;
        self.start += n;
        &self.buf[s..s + n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{frame_header, frame_len};

    fn receive(ra: &mut ReadAhead, bytes: &[u8]) -> usize {
        let spare = ra.spare();
        let n = bytes.len().min(spare.len());
        spare[..n].copy_from_slice(&bytes[..n]);
        ra.filled(n);
        n
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = frame_header(body.len()).to_vec();
        v.extend_from_slice(body);
        v
    }

    fn next_frame(ra: &mut ReadAhead) -> Vec<u8> {
        let p = ra.take_prefix().unwrap();
        ra.take_frame(frame_len(p, 1 << 20).unwrap()).to_vec()
    }

    #[test]
    fn several_frames_come_out_of_one_receive() {
        let mut ra = ReadAhead::default();
        let mut wire = framed(&[1; 100]);
        wire.extend(framed(&[2; 50]));
        wire.extend(&framed(&[3; 40])[..2]);
        assert_eq!(receive(&mut ra, &wire), wire.len());
        assert_eq!(next_frame(&mut ra), [1; 100]);
        assert_eq!(next_frame(&mut ra), [2; 50]);
        // Half a prefix: kept, moved to the front, completed by the next receive.
        assert_eq!(ra.take_prefix(), None);
        assert_eq!(ra.len(), 2);
        receive(&mut ra, &framed(&[3; 40])[2..]);
        assert_eq!(next_frame(&mut ra), [3; 40]);
        assert!(ra.is_empty());
    }

    #[test]
    fn a_frame_longer_than_what_is_held_yields_its_first_bytes() {
        let mut ra = ReadAhead::default();
        let wire = framed(&[7; 40_000]);
        assert_eq!(receive(&mut ra, &wire), CAPACITY);
        assert_eq!(ra.take_prefix(), Some(frame_header(40_000)));
        let first = ra.take_frame(40_000);
        assert_eq!(first.len(), CAPACITY - 4);
        assert!(first.iter().all(|&b| b == 7));
        assert!(ra.is_empty());
    }

    #[test]
    fn a_limit_holds_for_the_next_frame_only() {
        let mut ra = ReadAhead::default();
        ra.limit_next(120);
        assert_eq!(ra.spare().len(), 120);
        receive(&mut ra, &[0, 0]);
        // What is held counts against the limit.
        assert_eq!(ra.spare().len(), 118);
        receive(&mut ra, &framed(&[1; 10])[2..]);
        assert_eq!(next_frame(&mut ra), [1; 10]);
        assert_eq!(ra.spare().len(), CAPACITY);
        // A limit never leaves no room at all.
        ra.limit_next(0);
        assert_eq!(ra.spare().len(), 1);
    }
}
