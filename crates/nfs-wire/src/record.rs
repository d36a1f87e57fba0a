//! Record marking for RPC over TCP (RFC 5531 section 11): every record is sent as one or more
//! fragments, each behind a 4-byte big-endian header whose top bit marks the last fragment
//! and whose low 31 bits hold the fragment's length.

use std::ops::Deref;

/// Fragment header bit: this is the record's last fragment.
pub const LAST_FRAGMENT: u32 = 0x8000_0000;

/// Zero-length fragments allowed before the end of one record: senders have no reason to
/// send any, and each one costs a header of work without any progress.
const MAX_EMPTY_FRAGMENTS: u32 = 8;

/// Why the byte stream cannot go on (the connection should be closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The record would grow over the reader's `max_record`.
    #[error("RPC record of at least {len} bytes is over the limit {max}")]
    TooLong { len: u64, max: u32 },
    /// Too many zero-length fragments within one record.
    #[error("RPC record with too many empty fragments")]
    EmptyFragments,
}

/// The 4-byte header of a fragment of `len` bytes (`len` must be below 2^31).
pub fn mark(len: u32, last: bool) -> [u8; 4] {
    let v = (len & !LAST_FRAGMENT) | if last { LAST_FRAGMENT } else { 0 };
    v.to_be_bytes()
}

/// Appends room for a fragment header to `buf` and returns where it is, so a reply can be
/// encoded in place and framed afterwards with [`set_mark`].
pub fn reserve_mark(buf: &mut Vec<u8>) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    at
}

/// Fills the header reserved at `at` for one last fragment holding everything after it.
/// Does nothing if `at` does not leave room for a header.
pub fn set_mark(buf: &mut [u8], at: usize) {
    let Some(len) = at.checked_add(4).and_then(|end| buf.len().checked_sub(end)) else { return };
    let len = u32::try_from(len).unwrap_or(!LAST_FRAGMENT);
    buf[at..at + 4].copy_from_slice(&mark(len, true));
}

/// One whole record. Derefs to its bytes; a record that arrived alone in the buffer is
/// handed over without a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    bytes: Vec<u8>,
    start: usize,
}

impl Record {
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..]
    }
}

/// A whole message that arrived alone (a UDP datagram).
impl From<Vec<u8>> for Record {
    fn from(bytes: Vec<u8>) -> Self {
        Record { bytes, start: 0 }
    }
}

impl Deref for Record {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Reassembles records from a byte stream fed in arbitrary pieces.
///
/// Feed what the socket gave, then call [`RecordReader::next_record`] until it returns
/// `Ok(None)`; the buffer then holds at most one unfinished fragment, which is never longer
/// than `max_record` (its header is checked as soon as it arrives).
#[derive(Debug)]
pub struct RecordReader {
    max_record: u32,
    /// Raw stream bytes; those before `start` are consumed.
    buf: Vec<u8>,
    start: usize,
    /// Fragments of the current record received so far (when it has more than one).
    record: Vec<u8>,
    empty_fragments: u32,
}

impl RecordReader {
    pub fn new(max_record: u32) -> Self {
        RecordReader { max_record, buf: Vec::new(), start: 0, record: Vec::new(), empty_fragments: 0 }
    }

    /// The largest record accepted.
    pub fn max_record(&self) -> u32 {
        self.max_record
    }

    /// Appends bytes received from the stream.
    pub fn feed(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The stream buffer, for reading from a socket straight into it: only append to it.
    pub fn read_buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Bytes needed before the next call to `next_record` can make progress: the rest of a
    /// fragment header or of the current fragment (a hint for sizing reads).
    pub fn wanted(&self) -> usize {
        let avail = self.buf.len().saturating_sub(self.start);
        match self.header() {
            None => 4 - avail,
            Some((len, _)) => (len as usize + 4).saturating_sub(avail),
        }
    }

    /// Whether part of a record has been received.
    pub fn in_record(&self) -> bool {
        self.buf.len() > self.start || !self.record.is_empty()
    }

    fn header(&self) -> Option<(u32, bool)> {
        let h = self.buf.get(self.start..self.start.checked_add(4)?)?;
        let v = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        Some((v & !LAST_FRAGMENT, v & LAST_FRAGMENT != 0))
    }

    /// The next whole record, `Ok(None)` when more bytes are needed, or an error after which
    /// the stream cannot be trusted any more.
    pub fn next_record(&mut self) -> Result<Option<Record>, RecordError> {
        loop {
            let Some((len, last)) = self.header() else {
                self.compact();
                return Ok(None);
            };
            let total = self.record.len() as u64 + u64::from(len);
            if total > u64::from(self.max_record) {
                return Err(RecordError::TooLong { len: total, max: self.max_record });
            }
            let end = self.start + 4 + len as usize;
            if self.buf.len() < end {
                self.compact();
                // Room for the whole fragment (checked against the limit above) at once, so
                // reads into `read_buf` go straight to their place without regrowing.
                self.buf.reserve(end - self.start - self.buf.len());
                return Ok(None);
            }
            if len == 0 && !last {
                self.empty_fragments += 1;
                if self.empty_fragments > MAX_EMPTY_FRAGMENTS {
                    return Err(RecordError::EmptyFragments);
                }
            }
            if last && self.record.is_empty() {
                return Ok(Some(self.take_single(end)));
            }
            self.record.extend_from_slice(&self.buf[self.start + 4..end]);
            self.start = end;
            if last {
                self.empty_fragments = 0;
                return Ok(Some(Record { bytes: std::mem::take(&mut self.record), start: 0 }));
            }
        }
    }

    /// A record made of one fragment ending at `end`: moves the whole buffer out when the
    /// record is all it holds (large WRITEs), else copies the record.
    fn take_single(&mut self, end: usize) -> Record {
        self.empty_fragments = 0;
        let body = self.start + 4;
        if end == self.buf.len() {
            let bytes = std::mem::take(&mut self.buf);
            self.start = 0;
            return Record { bytes, start: body };
        }
        let rec = Record { bytes: self.buf[body..end].to_vec(), start: 0 };
        self.start = end;
        rec
    }

    /// Drops consumed bytes from the front of the buffer.
    fn compact(&mut self) {
        if self.start > self.buf.len() {
            // Only a caller that shrank `read_buf` gets here; what is left is unusable.
            self.buf.clear();
            self.start = 0;
        } else if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(data: &[u8], last: bool) -> Vec<u8> {
        let mut v = mark(data.len() as u32, last).to_vec();
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn mark_layout() {
        assert_eq!(mark(0x1c, true), [0x80, 0, 0, 0x1c]);
        assert_eq!(mark(5, false), [0, 0, 0, 5]);
        let mut buf = vec![7];
        let at = reserve_mark(&mut buf);
        buf.extend_from_slice(b"abc");
        set_mark(&mut buf, at);
        assert_eq!(buf, [7, 0x80, 0, 0, 3, b'a', b'b', b'c']);
    }

    #[test]
    fn reassembles_fragments_fed_byte_by_byte() {
        let mut stream = frag(b"hel", false);
        stream.extend(frag(b"", false));
        stream.extend(frag(b"lo", true));
        stream.extend(frag(b"second", true));
        let mut rr = RecordReader::new(100);
        let mut got = Vec::new();
        for b in &stream {
            rr.feed(std::slice::from_ref(b));
            while let Some(rec) = rr.next_record().unwrap() {
                got.push(rec.to_vec());
            }
        }
        assert_eq!(got, [b"hello".to_vec(), b"second".to_vec()]);
        assert!(!rr.in_record());
    }

    #[test]
    fn several_records_in_one_feed() {
        let mut stream = frag(b"a", true);
        stream.extend(frag(b"bb", true));
        stream.extend(&frag(b"ccc", true)[..5]);
        let mut rr = RecordReader::new(100);
        rr.feed(&stream);
        assert_eq!(&*rr.next_record().unwrap().unwrap(), b"a");
        assert_eq!(&*rr.next_record().unwrap().unwrap(), b"bb");
        assert_eq!(rr.next_record(), Ok(None));
        assert_eq!(rr.wanted(), 2);
        rr.feed(b"cc");
        assert_eq!(&*rr.next_record().unwrap().unwrap(), b"ccc");
    }

    #[test]
    fn reads_into_the_buffer_with_room_for_the_fragment() {
        let mut rr = RecordReader::new(1 << 20);
        rr.read_buf().extend_from_slice(&mark(100_000, true));
        assert_eq!(rr.next_record(), Ok(None));
        assert!(rr.read_buf().capacity() >= 100_004);
        assert_eq!(rr.wanted(), 100_000);
        rr.read_buf().resize(100_004, 0xab);
        let rec = rr.next_record().unwrap().unwrap();
        assert_eq!((rec.len(), rec[99_999]), (100_000, 0xab));
        assert!(!rr.in_record());
        assert_eq!(rr.next_record(), Ok(None));
    }

    #[test]
    fn oversize_is_refused_from_the_header() {
        let mut rr = RecordReader::new(10);
        rr.feed(&mark(11, true));
        assert_eq!(rr.next_record(), Err(RecordError::TooLong { len: 11, max: 10 }));
        // Across fragments too.
        let mut rr = RecordReader::new(10);
        rr.feed(&frag(b"123456", false));
        rr.feed(&mark(5, true));
        assert_eq!(rr.next_record(), Err(RecordError::TooLong { len: 11, max: 10 }));
        let mut rr = RecordReader::new(10);
        rr.feed(&frag(b"0123456789", true));
        assert_eq!(rr.next_record().unwrap().unwrap().len(), 10);
    }

    #[test]
    fn empty_fragment_flood_is_refused() {
        let mut rr = RecordReader::new(10);
        for _ in 0..=MAX_EMPTY_FRAGMENTS {
            rr.feed(&mark(0, false));
        }
        assert_eq!(rr.next_record(), Err(RecordError::EmptyFragments));
        let mut rr = RecordReader::new(10);
        rr.feed(&mark(0, true));
        assert_eq!(rr.next_record().unwrap().unwrap().len(), 0);
    }
}
